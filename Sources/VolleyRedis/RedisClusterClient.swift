import Foundation
import Logging

/// The I/O half of cluster routing for one `RedisClient`: a connection per primary, the slot map loaded with
/// `CLUSTER SLOTS`, and the loop that carries out `RedisClusterRouter`'s decisions. Owned by the client's thread.
///
/// Pipelines are split per primary and the replies put back in the caller's order; a `MULTI` … `EXEC` block stays
/// together (its keys share one slot). A command answered with a redirection or a transient cluster error is sent
/// again as the router decides; one whose node cannot be reached waits (with backoff) for the map to show a new
/// primary, like a lost single Redis, so in-flight work is not dropped.
final class RedisClusterClient {
    let seeds: [RedisClusterNode]
    let user: String?
    let password: String?
    let options: RedisClient.Options
    let name: String
    let logger: Logger
    let isCancelled: @Sendable () -> Bool
    private(set) var router: RedisClusterRouter
    private var connections: [RedisClusterNode: RedisConnection] = [:]
    private var scriptSHAs: [String: String] = [:]
    private(set) var reconnects = 0

    init(
        seeds: [RedisClusterNode], user: String?, password: String?, options: RedisClient.Options,
        policy: RedisClusterRouter.Policy, name: String, logger: Logger, isCancelled: @escaping @Sendable () -> Bool
    ) {
        self.seeds = seeds
        self.user = user
        self.password = password
        self.options = options
        self.name = name
        self.logger = logger
        self.isCancelled = isCancelled
        router = RedisClusterRouter(policy: policy)
    }

    private var now: Double { ProcessInfo.processInfo.systemUptime }

    func disconnect() { connections = [:] }

    /// Primaries of the current map.
    var primaries: [RedisClusterNode] { router.nodes }

    // MARK: - Connections and the map

    private func connection(_ node: RedisClusterNode) throws -> RedisConnection {
        if let c = connections[node], !c.isBroken { return c }
        connections[node] = nil
        let c = try RedisConnection(
            endpoint: RedisEndpoint(address: .tcp(host: node.host, port: node.port), user: user, password: password),
            connectTimeout: options.connectTimeout, commandTimeout: options.commandTimeout)
        connections[node] = c
        return c
    }

    /// Runs `body` on `node`'s connection once; a lost connection is dropped and marks the map stale.
    private func onNode<T>(_ node: RedisClusterNode, _ body: (RedisConnection) throws -> T) throws -> T {
        do {
            return try body(try connection(node))
        } catch let e as RedisError where e.kind == .connection {
            if connections.removeValue(forKey: node) != nil { reconnects += 1 }
            router.nodeFailed()
            throw e
        }
    }

    /// Loads the slot map from the first node that answers: known primaries first, then the seeds.
    func refresh() throws {
        var lastError: RedisError?
        var tried = Set<RedisClusterNode>()
        for node in router.nodes + seeds where tried.insert(node).inserted {
            do {
                let reply = try onNode(node) { try $0.command(["CLUSTER", "SLOTS"]) }
                if let e = reply.errorMessage {
                    lastError = RedisError(.server, "CLUSTER SLOTS on \(node): \(e)")
                    continue
                }
                let topology = try RedisClusterTopology(clusterSlots: reply, queried: node)
                if topology.ranges.isEmpty {
                    lastError = RedisError(.server, "CLUSTER SLOTS on \(node): no slot is served")
                    continue
                }
                router.topologyLoaded(topology, at: now)
                for stale in connections.keys where !router.nodes.contains(stale) { connections[stale] = nil }
                return
            } catch let e as RedisError where e.kind == .connection || e.kind == .unexpectedReply {
                lastError = e
            }
        }
        throw lastError ?? RedisError(.connection, "\(name): no Redis Cluster seed configured")
    }

    /// Waits, with the client's backoff, until a slot map is loaded.
    func ensureMap() throws {
        if router.hasMap, !router.shouldRefresh(at: now) { return }
        if router.hasMap {
            // Stale but usable: a failed reload keeps the map we have.
            do { try refresh() } catch let e as RedisError where e.kind == .connection || e.kind == .server {
                logger.debug("redis cluster map reload failed", metadata: ["conn": "\(name)", "error": "\(e)"])
            }
            return
        }
        var backoff = Backoff(options: options, name: name, logger: logger, isCancelled: isCancelled)
        while true {
            do {
                try refresh()
                return
            } catch let e as RedisError where e.kind == .connection || e.kind == .server {
                try backoff.wait(after: e)
            }
        }
    }

    // MARK: - Commands

    /// Runs `commands`, split per primary, and returns one reply per command in their order.
    func pipeline(_ commands: [RedisCommand], window: Int, timeout: Double? = nil) throws -> [RedisReply] {
        var replies = [RedisReply?](repeating: nil, count: commands.count)
        try run(commands, window: window, timeout: timeout) { index, reply in replies[index] = reply }
        return replies.map { $0 ?? .null }
    }

    /// As `pipeline`, handing each reply to `visit` with its command's index as hiredis parsed it (not in order).
    func pipelineVisitRaw(_ commands: [RedisCommand], window: Int, _ visit: (Int, RedisRawReply) throws -> Void)
        throws
    {
        let units = Self.units(commands)
        var attempts = [Int](repeating: 0, count: units.count)
        var forced = [RedisClusterNode?](repeating: nil, count: units.count)
        var asking = [Bool](repeating: false, count: units.count)
        var pending = Array(units.indices)
        var backoff = Backoff(options: options, name: name, logger: logger, isCancelled: isCancelled)
        while !pending.isEmpty {
            try ensureMap()
            var next: [Int] = []
            var pause = 0.0
            var lost: RedisError?
            for (node, group) in groups(pending, units, commands, forced) {
                var list: [RedisCommand] = []
                var entries: [(unit: Int, asking: Bool)] = []
                for u in group {
                    if asking[u] {
                        list.append(RedisCommand(["ASKING"]))
                        entries.append((u, true))
                    }
                    list.append(commands[units[u][0]])
                    entries.append((u, false))
                }
                var at = 0
                var done = Set<Int>()
                do {
                    try onNode(node) { c in
                        try c.pipelineVisitRaw(list, window: window) { raw in
                            guard at < entries.count else { return }
                            let (u, isAsking) = entries[at]
                            at += 1
                            if isAsking { return }
                            done.insert(u)
                            let decision =
                                raw.errorMessage.map {
                                    router.replied(
                                        errorMessage: $0, attempt: attempts[u], random: Double.random(in: 0..<1))
                                } ?? .answer
                            switch decision {
                            case .answer:
                                try visit(units[u][0], raw)
                            case .redirect(let target, let ask):
                                attempts[u] += 1
                                forced[u] = target
                                asking[u] = ask
                                next.append(u)
                            case .retry(let p):
                                attempts[u] += 1
                                forced[u] = nil
                                asking[u] = false
                                pause = max(pause, p)
                                next.append(u)
                            }
                        }
                    }
                } catch let e as RedisError where e.kind == .connection {
                    lost = e
                    next += group.filter { !done.contains($0) }
                }
            }
            if let lost { try backoff.wait(after: lost) } else if pause > 0 { Thread.sleep(forTimeInterval: pause) }
            pending = next
        }
    }

    /// The routing loop: runs every unit on its node and calls `answer` once per command with its final reply.
    private func run(
        _ commands: [RedisCommand], window: Int, timeout: Double?, _ answer: (Int, RedisReply) -> Void
    ) throws {
        let units = Self.units(commands)
        var attempts = [Int](repeating: 0, count: units.count)
        var forced = [RedisClusterNode?](repeating: nil, count: units.count)
        var asking = [Bool](repeating: false, count: units.count)
        var pending = Array(units.indices)
        var backoff = Backoff(options: options, name: name, logger: logger, isCancelled: isCancelled)
        while !pending.isEmpty {
            try ensureMap()
            var next: [Int] = []
            var pause = 0.0
            var lost: RedisError?
            for (node, group) in groups(pending, units, commands, forced) {
                var list: [RedisCommand] = []
                for u in group {
                    if asking[u] { list.append(RedisCommand(["ASKING"])) }
                    for i in units[u] { list.append(commands[i]) }
                }
                let replies: [RedisReply]
                do {
                    replies = try onNode(node) { c in
                        if let timeout { try c.setCommandTimeout(timeout) }
                        let r = try c.pipeline(list, window: window)
                        if timeout != nil { try c.setCommandTimeout(options.commandTimeout) }
                        return r
                    }
                } catch let e as RedisError where e.kind == .connection {
                    lost = e
                    next += group
                    continue
                }
                var at = 0
                for u in group {
                    if asking[u] { at += 1 }
                    let mine = Array(replies[at..<min(replies.count, at + units[u].count)])
                    at += units[u].count
                    let decision =
                        Self.routingError(mine).map {
                            router.replied(errorMessage: $0, attempt: attempts[u], random: Double.random(in: 0..<1))
                        } ?? .answer
                    switch decision {
                    case .answer:
                        for (i, r) in zip(units[u], mine) { answer(i, r) }
                    case .redirect(let target, let ask):
                        attempts[u] += 1
                        forced[u] = target
                        asking[u] = ask
                        next.append(u)
                    case .retry(let p):
                        attempts[u] += 1
                        forced[u] = nil
                        asking[u] = false
                        pause = max(pause, p)
                        next.append(u)
                    }
                }
            }
            if let lost { try backoff.wait(after: lost) } else if pause > 0 { Thread.sleep(forTimeInterval: pause) }
            pending = next
        }
    }

    /// `WAIT replicas timeout` on the connection to the primary of `key`'s slot: the one that carried this client's
    /// writes to that slot.
    func wait(replicas: Int, timeoutMillis: Int, key: String) throws -> RedisReply {
        try ensureMap()
        let node = router.node(for: RedisClusterSlot(key: key)) ?? router.nodes.first ?? seeds[0]
        return try onNode(node) { try $0.command(["WAIT", String(replicas), String(timeoutMillis)]) }
    }

    /// EVALSHA on the slot of the first key; on NOSCRIPT the script is loaded on every primary and run again.
    func eval(_ script: RedisScript, keys: [String], args: [String]) throws -> RedisReply {
        var attempt = 0
        while true {
            let sha: String
            if let known = scriptSHAs[script.source], attempt == 0 {
                sha = known
            } else {
                sha = try load(script)
            }
            let r = try pipeline([RedisCommand(["EVALSHA", sha, String(keys.count)] + keys + args)], window: 1)[0]
            if let e = r.errorMessage, e.hasPrefix("NOSCRIPT"), attempt < 3 {
                attempt += 1
                continue
            }
            return r
        }
    }

    /// SCRIPT LOAD on every primary of the map (a script must be loaded where its keys live, and a promoted replica
    /// or a new primary may not have it).
    private func load(_ script: RedisScript) throws -> String {
        try ensureMap()
        var sha: String?
        var lastError: RedisError?
        for node in router.nodes {
            do {
                let r = try onNode(node) { try $0.command(["SCRIPT", "LOAD", script.source]) }
                if let e = r.errorMessage {
                    lastError = RedisError(.server, "SCRIPT LOAD on \(node): \(e)")
                } else if let s = r.string {
                    sha = s
                }
            } catch let e as RedisError where e.kind == .connection {
                lastError = e
            }
        }
        guard let sha else { throw lastError ?? RedisError(.unexpectedReply, "SCRIPT LOAD returned no sha") }
        scriptSHAs[script.source] = sha
        return sha
    }

    // MARK: - Splitting

    /// Commands grouped into units sent together: a `MULTI` … `EXEC` (or `DISCARD`) block is one unit, any other
    /// command is a unit of its own.
    static func units(_ commands: [RedisCommand]) -> [[Int]] {
        var out: [[Int]] = []
        var block: [Int]?
        for (i, c) in commands.enumerated() {
            let name = c.name
            if var b = block {
                b.append(i)
                if name == "EXEC" || name == "DISCARD" {
                    out.append(b)
                    block = nil
                } else {
                    block = b
                }
            } else if name == "MULTI" {
                block = [i]
            } else {
                out.append([i])
            }
        }
        if let block { out.append(block) }
        return out
    }

    /// Pending units by the node to send them to, in first-seen order (deterministic).
    private func groups(
        _ pending: [Int], _ units: [[Int]], _ commands: [RedisCommand], _ forced: [RedisClusterNode?]
    ) -> [(RedisClusterNode, [Int])] {
        var order: [RedisClusterNode] = []
        var byNode: [RedisClusterNode: [Int]] = [:]
        let fallback = router.nodes.first ?? seeds[0]
        for u in pending {
            var node = forced[u]
            if node == nil {
                for i in units[u] {
                    if let slot = RedisClusterRouter.slot(of: commands[i]) {
                        node = router.node(for: slot)
                        break
                    }
                }
            }
            let n = node ?? fallback
            if byNode[n] == nil { order.append(n) }
            byNode[n, default: []].append(u)
        }
        return order.map { ($0, byNode[$0] ?? []) }
    }

    /// The redirection or transient error among one unit's replies: a single command's error, or for a transaction
    /// the error a queued command got (`MOVED` at queue time; `EXEC` then answers `EXECABORT`).
    static func routingError(_ replies: [RedisReply]) -> String? {
        for r in replies {
            guard let e = r.errorMessage else { continue }
            for prefix in ["MOVED ", "ASK ", "TRYAGAIN", "CLUSTERDOWN"] where e.hasPrefix(prefix) { return e }
        }
        return nil
    }
}

/// Exponential backoff between attempts to reach Redis, honouring `giveUpAfter` and cancellation.
struct Backoff {
    let options: RedisClient.Options
    let name: String
    let logger: Logger
    let isCancelled: @Sendable () -> Bool
    private var delay: Double
    private var attempt = 0
    private let started = Date()

    init(options: RedisClient.Options, name: String, logger: Logger, isCancelled: @escaping @Sendable () -> Bool) {
        self.options = options
        self.name = name
        self.logger = logger
        self.isCancelled = isCancelled
        delay = options.initialBackoff
    }

    mutating func wait(after error: RedisError) throws {
        attempt += 1
        if isCancelled() { throw RedisError(.cancelled, "\(name): gave up reaching Redis: shutting down") }
        if let limit = options.giveUpAfter, Date().timeIntervalSince(started) > limit {
            throw RedisError(.connection, "\(error.message) (gave up after \(attempt) attempts in \(Int(limit)) s)")
        }
        if attempt == 1 || attempt % 20 == 0 {
            logger.warning(
                "redis cluster node unavailable, retrying",
                metadata: ["conn": "\(name)", "error": "\(error.message)", "attempt": "\(attempt)"])
        }
        Thread.sleep(forTimeInterval: delay) // a dedicated thread owns this client: sleeping is fine here
        delay = min(options.maxBackoff, delay * 2)
    }
}
