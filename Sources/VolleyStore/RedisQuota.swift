import Foundation
import VolleyCore
import VolleyRedis

/// Hourly push quotas in Redis (layout in `RecipientKeys`): one hash per org, platform and UTC hour with
/// `used` (charged, in-flight included) and `pending` (charged, not settled yet).
///
/// Exactness: `charge` grants while `used < limit`, atomically (one script), so the fleet together never has more
/// than `limit` pushes charged — and so never more than `limit` accepted. Refunds (settle with `refunded`) lower
/// `used` again, so later pushes of the hour can take the freed room. A caller denied while `pending > 0` should
/// retry shortly (`QuotaGrant.shouldRetryDenied`, bounded by `QuotaWaitPolicy`): in-flight pushes may be refunded.
/// Keys expire on their own at the end of the hour plus `graceSeconds`.
public final class RedisQuotaStore: HourlyQuota, @unchecked Sendable {
    private let redis: SerializedRedis
    private let clock: any WallClock
    /// Limits from configuration: defaults and per-org file overrides. Redis overrides (`setLimits`) win.
    public let defaults: QuotaLimits
    public let configured: [String: (ios: Int?, android: Int?)]
    public let graceSeconds: Int
    public let waitPolicy: QuotaWaitPolicy
    /// Charges not yet settled by this process, per "org|platform", oldest hour first.
    private var outstanding: [String: [(hour: QuotaHour, count: Int)]] = [:]
    private let lock = NSLock()

    public init(client: RedisClient, defaults: QuotaLimits = QuotaLimits(),
                configured: [String: (ios: Int?, android: Int?)] = [:], clock: any WallClock = SystemClock(),
                graceSeconds: Int = 3600, waitPolicy: QuotaWaitPolicy = QuotaWaitPolicy()) {
        self.waitPolicy = waitPolicy
        redis = SerializedRedis(client)
        self.defaults = defaults; self.configured = configured; self.clock = clock; self.graceSeconds = graceSeconds
    }

    /// The configured limit before Redis overrides: file override for the org, else the default.
    public func configuredLimit(org: OrgID, platform: Platform) -> Int {
        let o = configured[org.rawValue]
        return (platform == .ios ? o?.ios : o?.android) ?? defaults[platform]
    }

    public func charge(org: OrgID, platform: Platform, count: Int) throws -> QuotaGrant {
        let now = clock.now()
        let hour = QuotaHour(containing: now)
        let k = RecipientKeys(org: org)
        if count <= 0 {
            return QuotaGrant(granted: 0, denied: 0, pending: 0, hour: hour, limit: configuredLimit(org: org, platform: platform))
        }
        let reply = try redis.with {
            try $0.eval(RecipientScripts.quotaCharge, keys: [k.quota(platform, hour), k.quotaLimits],
                        args: [platform.rawValue, String(configuredLimit(org: org, platform: platform)), String(count),
                               String(hour.ttlSeconds(at: now, grace: graceSeconds))])
        }
        try reply.throwIfError("quota charge")
        guard let a = reply.array, a.count == 3, let g = a[0].integer, let p = a[1].integer, let l = a[2].integer else {
            throw RedisError(.unexpectedReply, "quota charge: \(reply)")
        }
        if g > 0 {
            lock.withLock {
                let key = "\(org.rawValue)|\(platform.rawValue)"
                var list = outstanding[key] ?? []
                if let last = list.last, last.hour == hour { list[list.count - 1].count += Int(g) } else { list.append((hour, Int(g))) }
                outstanding[key] = list
            }
        }
        return QuotaGrant(granted: Int(g), denied: count - Int(g), pending: Int(p), hour: hour, limit: Int(l))
    }

    /// Settles against the hours this process charged, oldest first (refunds first, then deliveries).
    public func settle(org: OrgID, platform: Platform, delivered: Int, refunded: Int) throws {
        var refundLeft = max(0, refunded), deliveredLeft = max(0, delivered)
        var parts: [(QuotaHour, Int, Int)] = []
        lock.withLock {
            let key = "\(org.rawValue)|\(platform.rawValue)"
            var list = outstanding[key] ?? []
            while (refundLeft > 0 || deliveredLeft > 0), !list.isEmpty {
                let r = min(refundLeft, list[0].count)
                let d = min(deliveredLeft, list[0].count - r)
                parts.append((list[0].hour, d, r))
                refundLeft -= r; deliveredLeft -= d
                list[0].count -= r + d
                if list[0].count == 0 { list.removeFirst() }
            }
            outstanding[key] = list.isEmpty ? nil : list
        }
        // More settled than this process charged (should not happen): settle against the current hour.
        if refundLeft > 0 || deliveredLeft > 0 { parts.append((QuotaHour(containing: clock.now()), deliveredLeft, refundLeft)) }
        for (h, d, r) in parts { try settle(org: org, platform: platform, hour: h, delivered: d, refunded: r) }
    }

    public func settle(org: OrgID, platform: Platform, hour: QuotaHour, delivered: Int, refunded: Int) throws {
        if delivered <= 0 && refunded <= 0 { return }
        let k = RecipientKeys(org: org)
        let reply = try redis.with {
            try $0.eval(RecipientScripts.quotaSettle, keys: [k.quota(platform, hour)],
                        args: [String(max(0, delivered)), String(max(0, refunded))])
        }
        try reply.throwIfError("quota settle")
    }

    /// `volley quota set`: Redis overrides (nil leaves a platform as it is).
    public func setLimits(org: OrgID, ios: Int?, android: Int?) throws {
        var args: [String] = []
        if let ios { args += ["ios", String(ios)] }
        if let android { args += ["android", String(android)] }
        if args.isEmpty { return }
        _ = try redis.with { try $0.checked(["HSET", RecipientKeys(org: org).quotaLimits] + args) }
    }

    /// Removes the Redis overrides (back to configuration).
    public func clearLimits(org: OrgID) throws {
        _ = try redis.with { try $0.checked(["DEL", RecipientKeys(org: org).quotaLimits]) }
    }

    /// Used and remaining this hour, per platform (`volley quota show`).
    public func usage(org: OrgID) throws -> [QuotaUsage] {
        let hour = QuotaHour(containing: clock.now())
        let k = RecipientKeys(org: org)
        let platforms: [Platform] = [.ios, .android]
        var commands: [[String]] = [["HMGET", k.quotaLimits, "ios", "android"]]
        for p in platforms { commands.append(["HMGET", k.quota(p, hour), "used", "pending"]) }
        let r = try redis.with { try $0.pipeline(commands) }
        for x in r { try x.throwIfError("quota show") }
        let overrides = r[0].array ?? []
        return platforms.enumerated().map { i, p in
            let limit = overrides.count > i ? overrides[i].integer.map(Int.init) : nil
            let v = r[i + 1].array ?? []
            return QuotaUsage(platform: p, hour: hour.label,
                              limit: limit ?? configuredLimit(org: org, platform: p),
                              used: v.first?.integer.map(Int.init) ?? 0,
                              pending: v.count > 1 ? v[1].integer.map(Int.init) ?? 0 : 0)
        }
    }
}
