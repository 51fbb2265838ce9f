import Foundation
import Logging
import VolleyCore

/// The I/O half of cluster routing for one `RedisClient`: a connection per primary, the slot map loaded with
/// `CLUSTER SLOTS`, and the loop that carries out `RedisClusterRouter`'s decisions. Owned by the client's thread.
///
/// Pipelines are split per primary and the replies put back in the caller's order; a `MULTI` … `EXEC` block stays
/// together (its keys share one slot). A command answered with a redirection or a transient cluster error is sent
/// again as the router decides; one whose node cannot be reached waits (with backoff) for the map to show a new
/// primary, like a lost single Redis, so in-flight work is not dropped.
final class RedisClusterClient {
    /// The cluster's endpoint: its seeds, and the login and TLS every node's connection uses.
    let endpoint: RedisEndpoint
    var seeds: [RedisClusterNode] { endpoint.clusterSeeds }
    let options: RedisClient.Options
    let name: String
    let logger: Logger
    let isCancelled: @Sendable () -> Bool
    private(set) var router: RedisClusterRouter
    private var connections: [RedisClusterNode: RedisConnection] = [:]
    private var scriptSHAs: [String: String] = [:]
    private(set) var reconnects = 0

    init(
        endpoint: RedisEndpoint, options: RedisClient.Options, policy: RedisClusterRouter.Policy, name: String,
        logger: Logger, isCancelled: @escaping @Sendable () -> Bool
    ) {
        self.endpoint = endpoint
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
            endpoint: endpoint.node(node),
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
        try route(commands, window: window, timeout: timeout) { index, reply in replies[index] = reply.value }
        return replies.map { $0 ?? .null }
    }

    /// As `pipeline`, handing each reply to `visit` with its command's index as hiredis parsed it (not in order).
    /// Commands only: a `MULTI` … `EXEC` block's replies must be kept until its last one, which a view cannot be.
    func pipelineVisitRaw(_ commands: [RedisCommand], window: Int, _ visit: (Int, RedisRawReply) throws -> Void)
        throws
    {
        if let block = Self.units(commands).first(where: { $0.count > 1 }) {
            throw RedisError(
                .unexpectedReply,
                "\(name): a raw visit takes single commands, not a transaction (commands \(block))")
        }
        try route(commands, window: window, timeout: nil) { index, reply in
            guard case .raw(let raw) = reply else { return }
            try visit(index, raw)
        }
    }

    /// A final reply of the routing loop: in place for a single command (valid only during the sink's call), or
    /// as a value for a command of a `MULTI` … `EXEC` block, whose replies are kept until its last one shows that
    /// no command of the block was redirected.
    enum RoutedReply {
        case raw(RedisRawReply)
        case kept(RedisReply)

        var value: RedisReply {
            switch self {
            case .raw(let r): return r.value
            case .kept(let v): return v
            }
        }
    }

    /// The routing loop: sends every unit to its node, follows the router's decision on each unit's replies
    /// (answer, redirect with or without `ASKING`, retry after a pause), waits with backoff for a node that cannot
    /// be reached, and hands each command's final reply to `sink` exactly once, with the command's index.
    private func route(
        _ commands: [RedisCommand], window: Int, timeout: Double?, _ sink: (Int, RoutedReply) throws -> Void
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
                // What each reply of this node's pipeline belongs to: its unit (an index into `group`) and its
                // place in the unit, -1 for the `ASKING` sent before it.
                var list: [RedisCommand] = []
                var places: [(member: Int, position: Int)] = []
                list.reserveCapacity(group.count)
                places.reserveCapacity(group.count)
                for (m, u) in group.enumerated() {
                    if asking[u] {
                        list.append(Self.askingCommand)
                        places.append((m, -1))
                    }
                    for (k, i) in units[u].enumerated() {
                        list.append(commands[i])
                        places.append((m, k))
                    }
                }
                var at = 0
                // Units of `group` decided so far (replies come in order, so they are its first `decided`).
                var decided = 0
                // The replies of the transaction being read, and the first routing error among them.
                var kept: [RedisReply] = []
                var keptRouting: String?
                func decide(_ u: Int, _ routing: String?) -> Bool {
                    decided += 1
                    guard let routing else { return true }
                    switch router.replied(errorMessage: routing, attempt: attempts[u], random: Double.random(in: 0..<1))
                    {
                    case .answer:
                        return true
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
                    return false
                }
                do {
                    try onNode(node) { c in
                        if let timeout { try c.setCommandTimeout(timeout) }
                        try c.pipelineVisitRaw(list, window: window) { raw in
                            guard at < places.count else { return }
                            let (m, k) = places[at]
                            at += 1
                            if k < 0 { return }
                            let u = group[m]
                            let unit = units[u]
                            let routing = raw.errorMessage.flatMap(Self.routingError)
                            if unit.count == 1 {
                                if decide(u, routing) { try sink(unit.lowerBound, .raw(raw)) }
                                return
                            }
                            if k == 0 {
                                kept.removeAll(keepingCapacity: true)
                                keptRouting = nil
                            }
                            kept.append(raw.value)
                            if keptRouting == nil { keptRouting = routing }
                            if k == unit.count - 1, decide(u, keptRouting) {
                                for (i, r) in zip(unit, kept) { try sink(i, .kept(r)) }
                            }
                        }
                        if timeout != nil { try c.setCommandTimeout(options.commandTimeout) }
                    }
                } catch let e as RedisError where e.kind == .connection {
                    lost = e
                    next += group[decided...]
                }
            }
            if let lost { try backoff.wait(after: lost) } else if pause > 0 { Thread.sleep(forTimeInterval: pause) }
            pending = next
        }
    }

    private static let askingCommand = RedisCommand(["ASKING"])

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
    /// command is a unit of its own. A unit is a range of command indices.
    static func units(_ commands: [RedisCommand]) -> [Range<Int>] {
        var out: [Range<Int>] = []
        out.reserveCapacity(commands.count)
        var blockStart: Int?
        for (i, c) in commands.enumerated() {
            if let start = blockStart {
                if c.isNamed("EXEC") || c.isNamed("DISCARD") {
                    out.append(start..<(i + 1))
                    blockStart = nil
                }
            } else if c.isNamed("MULTI") {
                blockStart = i
            } else {
                out.append(i..<(i + 1))
            }
        }
        if let start = blockStart { out.append(start..<commands.count) }
        return out
    }

    /// Pending units by the node to send them to, in first-seen order (deterministic); units redirected to a node
    /// the map does not list come last. Grouped by the map's node index: no hashing of node names per command.
    private func groups(
        _ pending: [Int], _ units: [Range<Int>], _ commands: [RedisCommand], _ forced: [RedisClusterNode?]
    ) -> [(RedisClusterNode, [Int])] {
        let known = router.nodes
        var byIndex = [[Int]](repeating: [], count: known.count)
        var order: [Int] = []
        var others: [(RedisClusterNode, [Int])] = []
        func add(_ u: Int, to node: RedisClusterNode) {
            if let k = others.firstIndex(where: { $0.0 == node }) {
                others[k].1.append(u)
            } else {
                others.append((node, [u]))
            }
        }
        for u in pending {
            var index: Int?
            if let target = forced[u] {
                index = known.firstIndex(of: target)
                if index == nil {
                    add(u, to: target)
                    continue
                }
            } else {
                for i in units[u] {
                    if let slot = RedisClusterRouter.slot(of: commands[i]) {
                        index = router.nodeIndex(for: slot)
                        break
                    }
                }
            }
            guard let n = index ?? (known.isEmpty ? nil : 0) else {
                add(u, to: seeds[0])
                continue
            }
            if byIndex[n].isEmpty { order.append(n) }
            byIndex[n].append(u)
        }
        return order.map { (known[$0], byIndex[$0]) } + others
    }

    /// The error message when it is a redirection or a transient cluster error (the router decides on those; any
    /// other error is the command's answer). In a transaction, a queued command's `MOVED` makes `EXEC` answer
    /// `EXECABORT`: the first routing error of the block decides for all of it.
    static func routingError(_ message: String) -> String? {
        for prefix in ["MOVED ", "ASK ", "TRYAGAIN", "CLUSTERDOWN"] where message.hasPrefix(prefix) { return message }
        return nil
    }
}

/// Exponential backoff between attempts to reach Redis, honouring `giveUpAfter` and cancellation.
struct Backoff {
    let options: RedisClient.Options
    let name: String
    let logger: Logger
    let isCancelled: @Sendable () -> Bool
    private var attempt = 0
    private let started = Date()

    init(options: RedisClient.Options, name: String, logger: Logger, isCancelled: @escaping @Sendable () -> Bool) {
        self.options = options
        self.name = name
        self.logger = logger
        self.isCancelled = isCancelled
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
        // A dedicated thread owns this client: sleeping is fine here.
        Thread.sleep(forTimeInterval: options.backoff.delay(afterFailures: attempt))
    }
}
