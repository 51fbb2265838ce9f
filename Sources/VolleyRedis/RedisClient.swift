import Crypto
import Foundation
import Logging
import VolleyCore

/// A `RedisConnection` that reconnects with exponential backoff and retries what was interrupted.
///
/// Owned by one thread (or serial queue) at a time, like the connection it holds; blocking calls, never on Swift's
/// cooperative pool. When Redis is down, `command`/`pipeline` wait and retry until Redis is back or `isCancelled`
/// returns true (then they throw `RedisError(.cancelled)`), so in-flight work is never dropped.
///
/// Retried commands may run twice when a connection broke after the server executed them: only pass commands that
/// are idempotent (HSET, XACK, XCLAIM, SET) or whose duplicates are harmless, or guard them with a script.
public final class RedisClient: @unchecked Sendable {
    public struct Options: Sendable {
        public var connectTimeout: Double
        public var commandTimeout: Double
        public var initialBackoff: Double
        public var maxBackoff: Double
        /// Give up after this long without a successful reconnect (nil = keep trying until cancelled).
        public var giveUpAfter: Double?
        /// Where NOPERM answers are reported (logged once each, kept for `/readyz`); shared by a process's clients.
        public var permissionDenials: RedisPermissionDenials?
        public init(
            connectTimeout: Double = 2, commandTimeout: Double = 5, initialBackoff: Double = 0.05,
            maxBackoff: Double = 2, giveUpAfter: Double? = nil, permissionDenials: RedisPermissionDenials? = nil
        ) {
            self.connectTimeout = connectTimeout
            self.commandTimeout = commandTimeout
            self.initialBackoff = initialBackoff
            self.maxBackoff = maxBackoff
            self.giveUpAfter = giveUpAfter
            self.permissionDenials = permissionDenials
        }

        /// The wait after failed attempts to reach Redis: `initialBackoff` doubling up to `maxBackoff`, no jitter
        /// (one client per thread, each retrying on its own).
        var backoff: ExponentialBackoff { ExponentialBackoff(base: initialBackoff, max: maxBackoff) }
    }

    public let endpoint: RedisEndpoint
    public let options: Options
    public let name: String
    private let logger: Logger
    private let isCancelled: @Sendable () -> Bool
    private var connection: RedisConnection?
    private var scriptSHAs: [String: String] = [:]
    private var singleReconnects = 0
    /// Routing by slot when `endpoint` is a Redis Cluster.
    private let cluster: RedisClusterClient?
    /// Number of reconnects after the first connection (for tests and metrics).
    public var reconnects: Int { cluster?.reconnects ?? singleReconnects }

    public init(
        endpoint: RedisEndpoint, options: Options = Options(), name: String = "redis",
        logger: Logger = Logger(label: "volley.redis"),
        isCancelled: @escaping @Sendable () -> Bool = { false }
    ) {
        self.endpoint = endpoint
        self.options = options
        self.name = name
        self.logger = logger
        self.isCancelled = isCancelled
        cluster =
            endpoint.isCluster
            ? RedisClusterClient(
                endpoint: endpoint, options: options, policy: .init(), name: name, logger: logger,
                isCancelled: isCancelled) : nil
    }

    /// Connects now (with retries), so configuration errors surface at start.
    public func connect() throws {
        if let cluster { return try cluster.ensureMap() }
        _ = try ensureConnection()
    }

    /// Drops the connection (every node's, on a cluster); the next call reconnects.
    public func disconnect() {
        connection = nil
        cluster?.disconnect()
    }

    /// The primaries of the cluster's current slot map; empty for a single Redis.
    public var clusterPrimaries: [RedisClusterNode] { cluster?.primaries ?? [] }

    public func command(_ args: [String]) throws -> RedisReply {
        try command(RedisCommand(args))
    }

    /// As `command(_:)` for a command built as bytes (retried whole, like any command).
    public func command(_ command: RedisCommand) throws -> RedisReply {
        let reply: RedisReply
        if let cluster {
            reply = try cluster.pipeline([command], window: 1)[0]
        } else {
            reply = try withRetry { try $0.command(command) }
        }
        return permissionChecked(reply, command)
    }

    /// As `pipeline(_:window:)` for commands built as bytes.
    public func pipeline(_ commands: [RedisCommand], window: Int = 256) throws -> [RedisReply] {
        if commands.isEmpty { return [] }
        let replies: [RedisReply]
        if let cluster {
            replies = try cluster.pipeline(commands, window: window)
        } else {
            replies = try withRetry { try $0.pipeline(commands, window: window) }
        }
        return zip(replies, commands).map { permissionChecked($0, $1) }
    }

    /// A NOPERM answer names the command and key, and is reported to `options.permissionDenials`.
    private func permissionChecked(_ reply: RedisReply, _ command: @autoclosure () -> RedisCommand) -> RedisReply {
        guard case .error(let e) = reply, RedisPermissionDenials.isRefusal(e) else { return reply }
        return RedisPermissionDenials.annotate(
            reply, command: command(), denials: options.permissionDenials, logger: logger)
    }

    /// Runs one command and throws when the reply is an error.
    @discardableResult
    public func checked(_ args: [String]) throws -> RedisReply {
        try command(args).throwIfError(args.first ?? "")
    }

    /// Pipelines `commands` and returns their replies in order. On a cluster they are split per primary (a
    /// `MULTI` … `EXEC` block stays whole) and put back in order.
    public func pipeline(_ commands: [[String]], window: Int = 256) throws -> [RedisReply] {
        if commands.isEmpty { return [] }
        let replies: [RedisReply]
        if let cluster {
            replies = try cluster.pipeline(commands.map(RedisCommand.init), window: window)
        } else {
            replies = try withRetry { try $0.pipeline(commands, window: window) }
        }
        return zip(replies, commands).map { permissionChecked($0, RedisCommand($1)) }
    }

    /// `RedisConnection.pipelineVisitRaw` with reconnects: after a lost connection the whole pipeline runs again,
    /// so `restart` is called before each attempt (the visitor's caller drops what it collected).
    public func pipelineVisitRaw(
        _ commands: [[String]], window: Int = 256, restart: () -> Void,
        _ visit: (RedisRawReply) throws -> Void
    ) throws {
        if commands.isEmpty { return }
        try withRetry { c in
            restart()
            try c.pipelineVisitRaw(commands, window: window, visit)
        }
    }

    /// As `pipelineVisitRaw(_:window:restart:_:)`, with each reply's command index. On a single Redis the replies
    /// come in order (and the whole pipeline runs again after a lost connection, `restart` first); on a cluster
    /// each node's replies come as they arrive and a command is visited once, whatever happened to the others.
    public func pipelineVisitRawIndexed(
        _ commands: [[String]], window: Int = 256, restart: () -> Void,
        _ visit: (Int, RedisRawReply) throws -> Void
    ) throws {
        if commands.isEmpty { return }
        if let cluster {
            restart()
            return try cluster.pipelineVisitRaw(commands.map(RedisCommand.init), window: window, visit)
        }
        try withRetry { c in
            restart()
            var index = 0
            try c.pipelineVisitRaw(commands, window: window) { raw in
                try visit(index, raw)
                index += 1
            }
        }
    }

    /// Runs a command with a socket timeout of `timeout` seconds (an XREADGROUP BLOCK must use a longer one than
    /// its BLOCK, or hiredis reports a timeout), restoring the default afterwards.
    public func command(_ args: [String], timeout: Double) throws -> RedisReply {
        let reply: RedisReply
        if let cluster {
            reply = try cluster.pipeline([RedisCommand(args)], window: 1, timeout: timeout)[0]
        } else {
            reply = try withRetry { c in
                try c.setCommandTimeout(timeout)
                let r = try c.command(args)
                try c.setCommandTimeout(options.commandTimeout)
                return r
            }
        }
        return permissionChecked(reply, RedisCommand(args))
    }

    /// `WAIT`: blocks until `replicas` replicas acknowledged this client's writes, or `timeoutMillis` passed, and
    /// returns how many did. On a cluster it asks the primary of `key`'s slot, where the writes to wait for went.
    /// A lost connection is not retried: its writes may be lost too, and the caller decides.
    public func waitReplicas(_ replicas: Int, timeoutMillis: Int, afterWritingTo key: String) throws -> Int {
        let r: RedisReply
        if let cluster {
            r = try cluster.wait(replicas: replicas, timeoutMillis: timeoutMillis, key: key)
        } else {
            r = try ensureConnection().command(["WAIT", String(replicas), String(timeoutMillis)])
        }
        try r.throwIfError("WAIT")
        guard let n = r.integer else { throw RedisError(.unexpectedReply, "WAIT returned \(r)") }
        return Int(n)
    }

    /// EVALSHA, loading the script on NOSCRIPT (after a restart or SCRIPT FLUSH).
    public func eval(_ script: RedisScript, keys: [String], args: [String]) throws -> RedisReply {
        if let cluster {
            let reply = try cluster.eval(script, keys: keys, args: args)
            return permissionChecked(reply, RedisCommand(["EVALSHA", script.sha1, String(keys.count)] + keys + args))
        }
        var attempt = 0
        while true {
            let sha = try loadedSHA(script, reload: attempt > 0)
            let r = try command(["EVALSHA", sha, String(keys.count)] + keys + args)
            if let e = r.errorMessage, e.hasPrefix("NOSCRIPT"), attempt < 3 {
                attempt += 1
                continue
            }
            return r
        }
    }

    private func loadedSHA(_ script: RedisScript, reload: Bool) throws -> String {
        if !reload, let sha = scriptSHAs[script.source] { return sha }
        let r = try checked(["SCRIPT", "LOAD", script.source])
        guard let sha = r.string else { throw RedisError(.unexpectedReply, "SCRIPT LOAD returned \(r)") }
        scriptSHAs[script.source] = sha
        return sha
    }

    // MARK: - reconnect

    private func ensureConnection() throws -> RedisConnection {
        if let c = connection, !c.isBroken { return c }
        connection = nil
        let started = Date()
        var attempt = 0
        while true {
            if isCancelled() {
                throw RedisError(.cancelled, "\(name): gave up connecting to \(endpoint): shutting down")
            }
            do {
                let c = try RedisConnection(
                    endpoint: endpoint, connectTimeout: options.connectTimeout,
                    commandTimeout: options.commandTimeout)
                // A server restarting from its append-only file answers LOADING to every command until its data
                // set is in memory: not available yet, like a refused connection, so wait for it here rather than
                // fail the caller's command (a job would be left for redelivery and resent).
                if let e = try c.command(["PING"]).errorMessage, e.hasPrefix("LOADING") {
                    throw RedisError(.connection, "\(endpoint) is loading its data set")
                }
                if attempt > 0 {
                    logger.info("redis reconnected", metadata: ["conn": "\(name)", "attempts": "\(attempt)"])
                }
                connection = c
                return c
            } catch let e as RedisError where e.kind == .connection {
                attempt += 1
                if let limit = options.giveUpAfter, Date().timeIntervalSince(started) > limit {
                    throw RedisError(.connection, "\(e.message) (gave up after \(attempt) attempts in \(Int(limit)) s)")
                }
                if attempt == 1 || attempt % 20 == 0 {
                    logger.warning(
                        "redis unavailable, retrying",
                        metadata: [
                            "conn": "\(name)", "error": "\(e.message)",
                            "attempt": "\(attempt)",
                        ])
                }
                // A dedicated thread owns this client: sleeping is fine here.
                Thread.sleep(forTimeInterval: options.backoff.delay(afterFailures: attempt))
            }
        }
    }

    private func withRetry<T>(_ body: (RedisConnection) throws -> T) throws -> T {
        var hadConnection = connection != nil
        while true {
            let c = try ensureConnection()
            do {
                return try body(c)
            } catch let e as RedisError where e.kind == .connection {
                connection = nil
                if hadConnection { singleReconnects += 1 }
                hadConnection = true
                logger.warning(
                    "redis connection lost, reconnecting", metadata: ["conn": "\(name)", "error": "\(e.message)"])
            }
        }
    }
}

/// A Lua script run with EVALSHA (and loaded on NOSCRIPT).
public struct RedisScript: Sendable, Hashable {
    public let source: String
    /// The name EVALSHA calls it by: the SHA-1 of `source`, lower-case hex.
    public let sha1: String
    public init(_ source: String) {
        self.source = source
        sha1 = Insecure.SHA1.hash(data: Array(source.utf8)).withUnsafeBytes { $0.lowercaseHex }
    }
}
