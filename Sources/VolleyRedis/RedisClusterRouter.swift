import VolleyCore

/// A primary of a Redis Cluster, as `CLUSTER SLOTS` and redirections name it.
public struct RedisClusterNode: Sendable, Hashable, CustomStringConvertible {
    public var host: String
    public var port: Int
    public init(host: String, port: Int) {
        self.host = host
        self.port = port
    }

    /// Parses `host:port` (the last colon separates the port, so IPv6 hosts work).
    public init?(address: String) {
        guard let colon = address.lastIndex(of: ":"), let port = Int(address[address.index(after: colon)...]),
            (1...65_535).contains(port)
        else { return nil }
        var host = String(address[..<colon])
        if host.hasPrefix("["), host.hasSuffix("]") { host = String(host.dropFirst().dropLast()) }
        if host.isEmpty { return nil }
        self.init(host: host, port: port)
    }

    public var description: String { host.contains(":") ? "[\(host)]:\(port)" : "\(host):\(port)" }
}

/// Which primary serves each slot: `CLUSTER SLOTS` parsed.
public struct RedisClusterTopology: Sendable, Hashable {
    public struct Range: Sendable, Hashable {
        public var slots: ClosedRange<Int>
        public var primary: RedisClusterNode
        public init(slots: ClosedRange<Int>, primary: RedisClusterNode) {
            self.slots = slots
            self.primary = primary
        }
    }
    public var ranges: [Range]
    public init(ranges: [Range]) { self.ranges = ranges }

    /// Parses a `CLUSTER SLOTS` reply: `[[start, end, [host, port, id, …], replica…], …]`. An empty host (or `?`)
    /// means the node that answered (`queried`). Throws on a reply of another shape.
    public init(clusterSlots reply: RedisReply, queried: RedisClusterNode) throws {
        guard let entries = reply.array else {
            throw RedisError(.unexpectedReply, "CLUSTER SLOTS returned \(reply)")
        }
        var ranges: [Range] = []
        for e in entries {
            guard let parts = e.array, parts.count >= 3, let start = parts[0].integer, let end = parts[1].integer,
                start >= 0, end >= start, end < Int64(RedisClusterSlot.count), let node = parts[2].array,
                node.count >= 2, let port = node[1].integer, (1...65_535).contains(port)
            else { throw RedisError(.unexpectedReply, "CLUSTER SLOTS entry \(e)") }
            var host = node[0].string ?? ""
            if host.isEmpty || host == "?" { host = queried.host }
            ranges.append(Range(slots: Int(start)...Int(end), primary: RedisClusterNode(host: host, port: Int(port))))
        }
        self.init(ranges: ranges)
    }
}

/// The decisions of a Redis Cluster client, without I/O: which primary serves a command, what a redirection or a
/// transient cluster error asks for, and when to load the slot map again. The owner (one `RedisClient`, one thread)
/// performs the I/O it is told to and reports back.
///
/// Redis Cluster specification, "Redirection and resharding": `MOVED <slot> <host:port>` means the slot now lives
/// there for good (update the map; the map is probably stale elsewhere too, so reload it, at most once per
/// `refreshInterval`); `ASK <slot> <host:port>` means this one command goes there, preceded by `ASKING`, and the map
/// stays. `TRYAGAIN` (a multi-key command during a slot migration) and `CLUSTERDOWN` (no quorum, or a failover in
/// progress) are retried a bounded number of times after a jittered, growing pause.
public struct RedisClusterRouter: Sendable {
    public struct Policy: Sendable, Hashable {
        /// Redirections followed for one command before its last error is handed back.
        public var maxRedirects: Int
        /// Retries of `TRYAGAIN` / `CLUSTERDOWN` for one command.
        public var maxRetries: Int
        /// First retry pause, doubled per retry up to `maxPause`, then between half and all of it (jitter).
        public var firstPause: Double
        public var maxPause: Double
        /// `firstPause` doubling up to `maxPause`, between half and all of it at random.
        public var backoff: ExponentialBackoff { ExponentialBackoff(base: firstPause, max: maxPause, jitter: 0.5) }
        /// Minimum time between two slot-map reloads.
        public var refreshInterval: Double
        public init(
            maxRedirects: Int = 5, maxRetries: Int = 8, firstPause: Double = 0.05, maxPause: Double = 1,
            refreshInterval: Double = 1
        ) {
            self.maxRedirects = maxRedirects
            self.maxRetries = maxRetries
            self.firstPause = firstPause
            self.maxPause = maxPause
            self.refreshInterval = refreshInterval
        }
    }

    /// What to do with a reply.
    public enum Decision: Sendable, Hashable {
        /// The reply is the answer (a value, or an error that is not about routing).
        case answer
        /// Send the command again to `node`; with `asking`, send `ASKING` first on the same connection.
        case redirect(RedisClusterNode, asking: Bool)
        /// Send it again to the same slot after `pause` seconds.
        case retry(after: Double)
    }

    public let policy: Policy
    /// Primary of each slot (index into `nodes`), -1 when unknown.
    private var owners: [Int16]
    public private(set) var nodes: [RedisClusterNode] = []
    private var lastRefresh: Double?
    /// A redirection or a lost node showed the map is stale.
    public private(set) var isStale = true

    public init(policy: Policy = Policy()) {
        self.policy = policy
        owners = [Int16](repeating: -1, count: RedisClusterSlot.count)
    }

    /// True once a slot map was loaded.
    public var hasMap: Bool { !nodes.isEmpty }

    /// The primary serving `slot`, or nil when the map does not know it.
    public func node(for slot: RedisClusterSlot) -> RedisClusterNode? {
        let i = Int(owners[slot.rawValue])
        return i >= 0 ? nodes[i] : nil
    }

    /// The index in `nodes` of the primary serving `slot`, or nil when the map does not know it.
    public func nodeIndex(for slot: RedisClusterSlot) -> Int? {
        let i = Int(owners[slot.rawValue])
        return i >= 0 ? i : nil
    }

    /// The primary serving the command's first key; nil when the command has no key (any node answers it) or the
    /// slot is not mapped.
    public func node(for command: RedisCommand) -> RedisClusterNode? {
        guard let slot = Self.slot(of: command) else { return nil }
        return node(for: slot)
    }

    /// Replaces the map with a freshly loaded topology.
    public mutating func topologyLoaded(_ topology: RedisClusterTopology, at now: Double) {
        nodes = []
        owners = [Int16](repeating: -1, count: RedisClusterSlot.count)
        for r in topology.ranges {
            let i = index(of: r.primary)
            for s in r.slots { owners[s] = i }
        }
        lastRefresh = now
        isStale = false
    }

    /// A node could not be reached: the map may be stale (a replica may have been promoted).
    public mutating func nodeFailed() { isStale = true }

    /// Whether to load the map again now: it is stale (or missing) and the last load is `refreshInterval` old.
    public func shouldRefresh(at now: Double) -> Bool {
        guard isStale || !hasMap else { return false }
        guard let last = lastRefresh else { return true }
        return now - last >= policy.refreshInterval
    }

    /// A reply to a command routed for the `attempt`-th time (0 for the first send). `random` in 0..<1 picks the
    /// jitter. A `MOVED` updates the slot's owner at once.
    public mutating func replied(_ reply: RedisReply, attempt: Int, random: Double) -> Decision {
        guard let message = reply.errorMessage else { return .answer }
        return replied(errorMessage: message, attempt: attempt, random: random)
    }

    /// As `replied(_:attempt:random:)` for an error message.
    public mutating func replied(errorMessage message: String, attempt: Int, random: Double) -> Decision {
        let words = message.split(separator: " ", maxSplits: 3)
        guard let kind = words.first else { return .answer }
        switch kind {
        case "MOVED", "ASK":
            guard attempt < policy.maxRedirects, words.count >= 3, let s = Int(words[1]),
                let slot = RedisClusterSlot(rawValue: s), let target = RedisClusterNode(address: String(words[2]))
            else { return .answer }
            if kind == "ASK" { return .redirect(target, asking: true) }
            owners[slot.rawValue] = index(of: target)
            isStale = true
            return .redirect(target, asking: false)
        case "TRYAGAIN", "CLUSTERDOWN":
            guard attempt < policy.maxRetries else { return .answer }
            if kind == "CLUSTERDOWN" { isStale = true }
            return .retry(after: pause(attempt: attempt, random: random))
        default:
            return .answer
        }
    }

    /// `firstPause · 2^attempt`, capped at `maxPause`, then scaled into [½, 1] of itself by `random`.
    public func pause(attempt: Int, random: Double) -> Double {
        // `attempt` counts the retries before this one: the first pause follows one failure. Twenty doublings at most.
        policy.backoff.delay(afterFailures: min(attempt, 20) + 1, unit: random)
    }

    private mutating func index(of node: RedisClusterNode) -> Int16 {
        if let i = nodes.firstIndex(of: node) { return Int16(i) }
        nodes.append(node)
        return Int16(nodes.count - 1)
    }

    // MARK: - Keys of a command

    /// The slot of the command's first key, or nil for a command without keys (`PING`, `SCRIPT LOAD`, `MULTI`, an
    /// `EVALSHA` with no keys…). Which argument is the key follows the Redis command table for the commands Volley
    /// sends: `EVAL`/`EVALSHA`/`FCALL` after `numkeys`, `XREAD`/`XREADGROUP` after `STREAMS`, `XGROUP`/`XINFO` and
    /// `OBJECT`/`MEMORY` subcommands at 2, everything else at 1.
    public static func slot(of command: RedisCommand) -> RedisClusterSlot? {
        guard let key = firstKeyArgument(of: command) else { return nil }
        return key.withUnsafeBufferPointer { RedisClusterSlot(keyBytes: $0) }
    }

    /// The command's first key as text (for messages), or nil for a command without keys.
    public static func firstKey(of command: RedisCommand) -> String? {
        firstKeyArgument(of: command).map { String(decoding: $0, as: UTF8.self) }
    }

    /// The bytes of the command's first key (see `slot(of:)` for where it is).
    static func firstKeyArgument(of command: RedisCommand) -> ArraySlice<UInt8>? {
        guard let name = command.argument(0) else { return nil }
        let keyIndex: Int?
        switch keyRule(name) {
        case .noKey:
            keyIndex = nil
        case .afterNumKeys:
            guard let n = command.argument(2).flatMap({ Int(String(decoding: $0, as: UTF8.self)) }), n > 0 else {
                return nil
            }
            keyIndex = 3
        case .afterStreams:
            var i = 1
            var found: Int?
            while let a = command.argument(i) {
                if a.count == 7, equalsUpper(a, "STREAMS") {
                    found = i + 1
                    break
                }
                i += 1
            }
            keyIndex = found
        case .second:
            keyIndex = 2
        case .first:
            keyIndex = 1
        }
        guard let keyIndex else { return nil }
        return command.argument(keyIndex)
    }

    /// Where a command's first key is.
    enum KeyRule {
        /// No key (any node answers it).
        case noKey
        /// `EVAL`/`EVALSHA`/`FCALL`: after `numkeys`.
        case afterNumKeys
        /// `XREAD`/`XREADGROUP`: after `STREAMS`.
        case afterStreams
        /// `XGROUP`/`XINFO`/`OBJECT`/`MEMORY`: after the subcommand.
        case second
        /// Everything else.
        case first
    }

    /// A command name of at most 16 bytes, upper-cased and packed into two words: a dictionary key built without
    /// allocating (this runs once per command a cluster client sends).
    struct PackedName: Hashable {
        var low: UInt64 = 0
        var high: UInt64 = 0

        init?<C: Collection>(_ name: C) where C.Element == UInt8 {
            guard name.count <= 16 else { return nil }
            for (i, var b) in name.enumerated() {
                if b >= UInt8(ascii: "a") && b <= UInt8(ascii: "z") { b -= 32 }
                if i < 8 { low |= UInt64(b) << (8 * UInt64(i)) } else { high |= UInt64(b) << (8 * UInt64(i - 8)) }
            }
        }
    }

    /// Command names whose key is not the first argument.
    private static let keyRules: [PackedName: KeyRule] = {
        var d: [PackedName: KeyRule] = [:]
        func add(_ names: [String], _ rule: KeyRule) {
            for n in names { if let k = PackedName(Array(n.utf8)) { d[k] = rule } }
        }
        add(
            [
                "PING", "ECHO", "SCRIPT", "FUNCTION", "INFO", "CLUSTER", "WAIT", "MULTI", "EXEC", "DISCARD", "ASKING",
                "AUTH", "SELECT", "FLUSHALL", "FLUSHDB", "DBSIZE", "CONFIG", "CLIENT", "TIME", "KEYS", "SCAN",
                "READONLY", "READWRITE", "HELLO", "COMMAND", "DEBUG", "SHUTDOWN", "LASTSAVE", "SAVE", "BGSAVE",
                "PUBLISH", "SUBSCRIBE", "UNSUBSCRIBE", "QUIT", "RESET", "SLOWLOG", "LATENCY", "MONITOR", "ROLE",
            ], .noKey)
        add(["EVAL", "EVALSHA", "EVAL_RO", "EVALSHA_RO", "FCALL", "FCALL_RO"], .afterNumKeys)
        add(["XREAD", "XREADGROUP"], .afterStreams)
        add(["XGROUP", "XINFO", "OBJECT", "MEMORY"], .second)
        return d
    }()

    /// The key rule of a command name (any case).
    static func keyRule(_ name: ArraySlice<UInt8>) -> KeyRule {
        guard let packed = PackedName(name) else { return .first }
        return keyRules[packed] ?? .first
    }

    /// `bytes` equals `upper` (upper-case ASCII) ignoring ASCII case; the lengths must already match.
    static func equalsUpper(_ bytes: ArraySlice<UInt8>, _ upper: StaticString) -> Bool {
        upper.withUTF8Buffer { u in
            var i = bytes.startIndex
            for c in u {
                var b = bytes[i]
                if b >= UInt8(ascii: "a") && b <= UInt8(ascii: "z") { b -= 32 }
                if b != c { return false }
                i += 1
            }
            return true
        }
    }
}

extension RedisCommand {
    /// The bytes of argument `index`, or nil past the last one.
    func argument(_ index: Int) -> ArraySlice<UInt8>? {
        guard index >= 0, index < count else { return nil }
        var at = 0
        var i = 0
        while at < body.count {
            // `$<length>\r\n<bytes>\r\n`
            at += 1
            var length = 0
            while at < body.count, body[at] != 13 {
                length = length * 10 + Int(body[at] &- 48)
                at += 1
            }
            at += 2
            if i == index { return at + length <= body.count ? body[at..<(at + length)] : nil }
            at += length + 2
            i += 1
        }
        return nil
    }

    /// The command's name, upper-cased (`EVALSHA`), or "" for an empty command.
    var name: String { argument(0).map { String(decoding: $0, as: UTF8.self).uppercased() } ?? "" }

    /// Whether the command's name is `upper` (given upper-case ASCII), compared without building a String.
    func isNamed(_ upper: StaticString) -> Bool {
        guard let name = argument(0), name.count == upper.utf8CodeUnitCount else { return false }
        return RedisClusterRouter.equalsUpper(name, upper)
    }
}
