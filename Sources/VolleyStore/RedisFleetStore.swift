import Foundation
import VolleyCore
import VolleyRedis

/// Redis key layout of what the whole fleet shares about the providers. Each script's keys carry one hash tag, so
/// they share a cluster slot.
///
/// ```
/// volley:apns-token:{<team>:<key>}        STRING "<iat seconds> <authorization value>"; PX = one hour after iat
/// volley:apns-token:{<team>:<key>}:lease  STRING the minting worker's name; PX = FleetTokenStateMachine leaseSeconds
/// volley:pause:{<provider>:<target>}      STRING pause end, milliseconds since 1970; PX = until the end
/// volley:budget:{<provider>:<target>}:<s> STRING sends taken in second <s> (since 1970); PX = 5 s
/// volley:pause-events                     STREAM one entry per pause moved later: key, until (ms); ~1,000 kept
/// ```
public enum FleetKeys {
    public static func apnsToken(_ c: FleetCredential) -> String { "volley:apns-token:{\(c.teamID):\(c.keyID)}" }
    public static func apnsTokenLease(_ c: FleetCredential) -> String { apnsToken(c) + ":lease" }
    public static func pause(_ k: FleetPauseKey) -> String { "volley:pause:{\(k.provider.rawValue):\(k.target)}" }
    /// Every worker blocks on this stream (XREAD) to learn of a pause the moment it is published.
    public static let pauseEvents = "volley:pause-events"
    public static func budget(_ k: FleetPauseKey, window: Int64) -> String {
        "volley:budget:{\(k.provider.rawValue):\(k.target)}:\(window)"
    }

    /// Every script with the keys it is called with, for the key layout check.
    public static func scriptKeys(_ c: FleetCredential, _ k: FleetPauseKey) -> [(RedisScript, [String])] {
        [
            (RedisFleetStore.publishScript, [apnsToken(c), apnsTokenLease(c)]),
            (RedisFleetStore.extendPauseScript, [pause(k)]),
            (RedisFleetStore.takeBudgetScript, [budget(k, window: 0)]),
        ]
    }
}

/// The fleet's shared APNs provider tokens and provider pauses in Redis. Each call is one round trip (a script or
/// one command); none is on the per-send path. Uses its own client, which gives up quickly when Redis is
/// unreachable, so a worker falls back to its own token instead of waiting.
public final class RedisFleetStore: FleetTokenStore, FleetPauseStore, FleetBudgetStore, @unchecked Sendable {
    private let redis: SerializedRedis
    private let clock: any WallClock

    public init(client: RedisClient, clock: any WallClock = SystemClock()) {
        redis = SerializedRedis(client)
        self.clock = clock
    }

    /// Encoded as "<iat seconds> <value>".
    static func encode(_ t: FleetToken) -> String { "\(Int(t.issuedAt.timeIntervalSince1970)) \(t.value)" }
    static func decode(_ s: String?) -> FleetToken? {
        guard let s, let space = s.firstIndex(of: " "), let iat = Int(s[..<space]) else { return nil }
        return FleetToken(
            value: String(s[s.index(after: space)...]), issuedAt: Date(timeIntervalSince1970: Double(iat)))
    }

    public func currentToken(for credential: FleetCredential) throws -> FleetToken? {
        let r = try redis.with { try $0.command(["GET", FleetKeys.apnsToken(credential)]) }
        try r.throwIfError("GET apns token")
        return Self.decode(r.string)
    }

    public func acquireMintLease(for credential: FleetCredential, owner: String, seconds: Double) throws -> Bool {
        let ms = String(max(1, Int(seconds * 1000)))
        let r = try redis.with { try $0.command(["SET", FleetKeys.apnsTokenLease(credential), owner, "NX", "PX", ms]) }
        try r.throwIfError("SET apns token lease")
        return !r.isNull
    }

    /// KEYS: token, lease. ARGV: expected encoded token ("" = none), new encoded token, new iat, TTL ms, owner,
    /// minimum interval seconds. Publishes only if the current token is still the expected one and at least the
    /// minimum interval old (APNs: one token per 20 minutes), so two workers never both replace it.
    static let publishScript = RedisScript(
        """
        local cur = redis.call('GET', KEYS[1])
        local ok = (cur or '') == ARGV[1]
        if ok and cur then
          local iat = tonumber(string.match(cur, '^%d+'))
          if iat and tonumber(ARGV[3]) - iat < tonumber(ARGV[6]) then ok = false end
        end
        if ok then
          redis.call('SET', KEYS[1], ARGV[2], 'PX', ARGV[4])
          cur = ARGV[2]
        end
        if redis.call('GET', KEYS[2]) == ARGV[5] then redis.call('DEL', KEYS[2]) end
        return cur
        """)

    public func publish(
        _ token: FleetToken, replacing expected: FleetToken?, for credential: FleetCredential, owner: String,
        minimumIntervalSeconds: Double
    ) throws -> FleetToken? {
        // The key lives as long as APNs accepts the token: an hour after its iat.
        let ttl = max(
            1000, Int((token.issuedAt.timeIntervalSince1970 + 3600 - clock.now().timeIntervalSince1970) * 1000))
        let r = try redis.with {
            try $0.eval(
                Self.publishScript,
                keys: [FleetKeys.apnsToken(credential), FleetKeys.apnsTokenLease(credential)],
                args: [
                    expected.map(Self.encode) ?? "", Self.encode(token),
                    String(Int(token.issuedAt.timeIntervalSince1970)), String(ttl), owner,
                    String(Int(minimumIntervalSeconds)),
                ])
        }
        try r.throwIfError("publish apns token")
        return Self.decode(r.string)
    }

    /// KEYS: pause. ARGV: end ms, now ms. The pause only moves later (a max), and expires when it ends.
    static let extendPauseScript = RedisScript(
        """
        local cur = tonumber(redis.call('GET', KEYS[1]) or '0') or 0
        local want = tonumber(ARGV[1])
        if want > cur then
          local ttl = want - tonumber(ARGV[2])
          if ttl < 1 then ttl = 1 end
          redis.call('SET', KEYS[1], ARGV[1], 'PX', ttl)
          return ARGV[1]
        end
        return tostring(cur)
        """)

    public func extendPause(_ key: FleetPauseKey, until: Date) throws -> Date {
        let want = Int64((until.timeIntervalSince1970 * 1000).rounded(.up))
        let now = Int64(clock.now().timeIntervalSince1970 * 1000)
        let r = try redis.with {
            try $0.eval(Self.extendPauseScript, keys: [FleetKeys.pause(key)], args: [String(want), String(now)])
        }
        try r.throwIfError("extend pause")
        guard let ms = r.integer else { throw RedisError(.unexpectedReply, "extend pause: \(r)") }
        return Date(timeIntervalSince1970: Double(ms) / 1000)
    }

    /// Announces that `key`'s pause now ends at `until` to every worker blocked in `pauseEvents(after:blockMillis:)`
    /// (one XADD; the stream keeps about the last 1,000 announcements).
    public func announcePause(_ key: FleetPauseKey, until: Date) throws {
        let ms = String(Int64((until.timeIntervalSince1970 * 1000).rounded(.up)))
        let r = try redis.with {
            try $0.command([
                "XADD", FleetKeys.pauseEvents, "MAXLEN", "~", "1000", "*", "key", FleetKeys.pause(key), "until", ms,
            ])
        }
        try r.throwIfError("XADD pause event")
    }

    /// Waits up to `blockMillis` for pause announcements after stream id `lastID` (`$`: from now on). Returns them
    /// as (pause key as stored, end) and the id to continue after. Blocks its client: use a store of its own.
    public func pauseEvents(after lastID: String, blockMillis: Int) throws -> (
        events: [(key: String, until: Date)], lastID: String
    ) {
        let args = ["XREAD", "COUNT", "100", "BLOCK", String(blockMillis), "STREAMS", FleetKeys.pauseEvents, lastID]
        // The socket timeout must outlast BLOCK, or hiredis reports the wait as a timeout.
        let r = try redis.with { try $0.command(args, timeout: Double(blockMillis) / 1000 + 2) }
        try r.throwIfError("XREAD pause events")
        var events: [(key: String, until: Date)] = []
        var last = lastID
        // [[stream, [[id, [field, value, …]], …]]]; nil when BLOCK ran out.
        for stream in r.array ?? [] {
            for entry in stream.array?.last?.array ?? [] {
                guard let parts = entry.array, parts.count == 2, let id = parts[0].string else { continue }
                last = id
                let fields = Dictionary(parts[1].fieldPairs, uniquingKeysWith: { _, new in new })
                if let key = fields["key"], let ms = fields["until"].flatMap(Int64.init) {
                    events.append((key, Date(timeIntervalSince1970: Double(ms) / 1000)))
                }
            }
        }
        return (events, last)
    }

    /// One pipelined GET per key (not MGET: the keys have different hash tags).
    public func pauses(_ keys: [FleetPauseKey]) throws -> [FleetPauseKey: Date] {
        if keys.isEmpty { return [:] }
        let replies = try redis.with { try $0.pipeline(keys.map { ["GET", FleetKeys.pause($0)] }) }
        var out: [FleetPauseKey: Date] = [:]
        for (k, r) in zip(keys, replies) {
            try r.throwIfError("GET pause")
            if let ms = r.integer { out[k] = Date(timeIntervalSince1970: Double(ms) / 1000) }
        }
        return out
    }

    /// KEYS: the window's counter. ARGV: sends wanted, the window's budget. Grants what is left, up to the ask.
    static let takeBudgetScript = RedisScript(
        """
        local used = tonumber(redis.call('GET', KEYS[1]) or '0') or 0
        local grant = math.min(tonumber(ARGV[1]), tonumber(ARGV[2]) - used)
        if grant <= 0 then return 0 end
        redis.call('INCRBY', KEYS[1], grant)
        redis.call('PEXPIRE', KEYS[1], 5000)
        return grant
        """)

    public func takeBudget(_ key: FleetPauseKey, window: Int64, count: Int, limit: Int) throws -> Int {
        let r = try redis.with {
            try $0.eval(
                Self.takeBudgetScript, keys: [FleetKeys.budget(key, window: window)],
                args: [String(count), String(limit)])
        }
        return try r.int("take budget")
    }
}
