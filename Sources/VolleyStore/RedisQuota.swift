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
    let clock: any WallClock
    /// Limits from configuration: defaults and per-org file overrides. Redis overrides (`setLimits`) win.
    public let defaults: QuotaLimits
    public let configured: [String: (ios: Int?, android: Int?)]
    public let graceSeconds: Int
    public let waitPolicy: QuotaWaitPolicy
    /// Charges outside any job not yet settled by this process, per "org|platform".
    private var outstanding: [String: OutstandingCharges] = [:]
    private let lock = NSLock()

    public init(
        client: RedisClient, defaults: QuotaLimits = QuotaLimits(),
        configured: [String: (ios: Int?, android: Int?)] = [:], clock: any WallClock = SystemClock(),
        graceSeconds: Int = 3600, waitPolicy: QuotaWaitPolicy = QuotaWaitPolicy()
    ) {
        self.waitPolicy = waitPolicy
        redis = SerializedRedis(client)
        self.defaults = defaults
        self.configured = configured
        self.clock = clock
        self.graceSeconds = graceSeconds
    }

    /// The configured limit before Redis overrides: file override for the org, else the default.
    public func configuredLimit(org: OrgID, platform: Platform) -> Int {
        let o = configured[org.rawValue]
        return (platform == .ios ? o?.ios : o?.android) ?? defaults[platform]
    }

    public func account(org: OrgID, job: JobID, delivery: String, adoptingEarlierCharges: Bool) throws
        -> any QuotaAccount
    {
        let account = RedisQuotaAccount(store: self, org: org, job: job, delivery: delivery)
        if adoptingEarlierCharges { try account.adoptEarlierCharges() }
        return account
    }

    /// Charges outside any job (`volley test-push`): settled with `settle(org:platform:delivered:refunded:)`.
    public func charge(org: OrgID, platform: Platform, count: Int) throws -> QuotaGrant {
        let grant = try charge(org: org, platform: platform, count: count, job: nil)
        lock.withLock {
            outstanding["\(org.rawValue)|\(platform.rawValue)", default: .init()].add(grant.granted, hour: grant.hour)
        }
        return grant
    }

    /// Settles charges made with `charge(org:platform:count:)`, against the hours charged, oldest first.
    public func settle(org: OrgID, platform: Platform, delivered: Int, refunded: Int) throws {
        let (parts, unmatched) = lock.withLock {
            outstanding["\(org.rawValue)|\(platform.rawValue)", default: .init()].take(
                delivered: delivered, refunded: refunded)
        }
        for p in parts {
            try settle(
                org: org, platform: platform, hour: p.hour, delivered: p.delivered, refunded: p.refunded)
        }
        // More settled than this process charged (should not happen): settle against the current hour.
        if unmatched.delivered > 0 || unmatched.refunded > 0 {
            try settle(
                org: org, platform: platform, hour: QuotaHour(containing: clock.now()),
                delivered: unmatched.delivered, refunded: unmatched.refunded)
        }
    }

    /// One charge script call. `job`: the job's charges hash, this delivery's field prefix and last-charge key, and
    /// the charge's number in the delivery (a call sent again with the same number is charged once).
    func charge(
        org: OrgID, platform: Platform, count: Int,
        job: (key: String, delivery: String, lastCharge: String, number: Int)?
    ) throws -> QuotaGrant {
        let now = clock.now()
        let hour = QuotaHour(containing: now)
        let limit = configuredLimit(org: org, platform: platform)
        if count <= 0 { return QuotaGrant(granted: 0, denied: 0, pending: 0, hour: hour, limit: limit) }
        var keys = RedisKeyGroups.quotaCharge(org: org, platform: platform, hour: hour, job: nil)
        var args = [
            platform.rawValue, String(limit), String(count), String(hour.ttlSeconds(at: now, grace: graceSeconds)),
        ]
        if let job {
            keys += [job.key, job.lastCharge]
            args += [Self.chargeField(delivery: job.delivery, platform: platform, hour: hour), String(job.number)]
        }
        let reply = try redis.with { try $0.eval(RecipientScripts.quotaCharge, keys: keys, args: args) }
        try reply.throwIfError("quota charge")
        guard let a = reply.array, a.count == 3, let g = a[0].integer, let p = a[1].integer, let l = a[2].integer else {
            throw RedisError(.unexpectedReply, "quota charge: \(reply)")
        }
        return QuotaGrant(granted: Int(g), denied: count - Int(g), pending: Int(p), hour: hour, limit: Int(l))
    }

    /// Settles the hour's counters: delivered pushes stay in `used`, refunded ones leave it, both leave `pending`.
    public func settle(org: OrgID, platform: Platform, hour: QuotaHour, delivered: Int, refunded: Int) throws {
        if delivered <= 0 && refunded <= 0 { return }
        let reply = try redis.with {
            try $0.eval(
                RecipientScripts.quotaSettle,
                keys: RedisKeyGroups.quotaSettle(org: org, platform: platform, hour: hour),
                args: [String(max(0, delivered)), String(max(0, refunded))])
        }
        try reply.throwIfError("quota settle")
    }

    /// Moves the job's unsettled charges of other deliveries to `delivery`; returns them per platform.
    func adopt(org: OrgID, job: JobID, delivery: String) throws -> [Platform: OutstandingCharges] {
        let reply = try redis.with {
            try $0.eval(
                RecipientScripts.quotaAdopt, keys: RedisKeyGroups.quotaAdopt(org: org, job: job), args: [delivery])
        }
        try reply.throwIfError("quota adopt")
        let items = reply.array ?? []
        var out: [Platform: OutstandingCharges] = [:]
        var i = 0
        while i + 2 < items.count {
            if let platform = items[i].string.flatMap(Platform.init(rawValue:)),
                let hour = items[i + 1].string.flatMap({ Int64($0) }), let count = items[i + 2].integer
            {
                out[platform, default: .init()].add(Int(count), hour: QuotaHour(index: hour))
            }
            i += 3
        }
        return out
    }

    static func chargeField(delivery: String, platform: Platform, hour: QuotaHour) -> String {
        "\(delivery)|\(platform.rawValue)|\(hour.index)"
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
            return QuotaUsage(
                platform: p, hour: hour.label,
                limit: limit ?? configuredLimit(org: org, platform: p),
                used: v.first?.integer.map(Int.init) ?? 0,
                pending: v.count > 1 ? v[1].integer.map(Int.init) ?? 0 : 0)
        }
    }
}

/// One delivery's quota charges for one job. Its charges whose devices are not recorded yet are also kept in Redis
/// per delivery (`volley:quota:{org}:job:<job>`): the ledger write of a batch releases its charges in the same
/// transaction as its outcomes, so a redelivery adopts exactly the charges of devices it will send again, and each
/// device is charged once. A worker killed between that ledger write and the hour's settle leaves at most one
/// batch counted in the hour's `pending` (never in `used` twice) until the hour's key expires.
final class RedisQuotaAccount: QuotaAccount {
    let store: RedisQuotaStore
    let org: OrgID
    let jobID: JobID
    let job: (key: String, delivery: String)
    /// This delivery's last-charge key, and how many charges it has sent (each numbered, so a charge Redis runs twice
    /// after a stall counts once).
    let lastCharge: String
    private var charges = 0
    /// Charges not yet settled, per platform.
    private var outstanding: [Platform: OutstandingCharges] = [:]
    /// Adopted charges not yet handed to a send: the next charges of the platform take these first, free.
    private var prepaid: [Platform: OutstandingCharges] = [:]

    init(store: RedisQuotaStore, org: OrgID, job: JobID, delivery: String) {
        self.store = store
        self.org = org
        jobID = job
        self.job = (RecipientKeys(org: org).quotaCharges(job), delivery)
        lastCharge = RecipientKeys(org: org).quotaLastCharge(job, delivery: delivery)
    }

    func adoptEarlierCharges() throws {
        prepaid = try store.adopt(org: org, job: jobID, delivery: job.delivery)
    }

    func charge(platform: Platform, count: Int) throws -> QuotaGrant {
        var free = 0
        for part in prepaid[platform]?.take(upTo: count) ?? [] {
            outstanding[platform, default: .init()].add(part.count, hour: part.hour)
            free += part.count
        }
        if free == count {
            return QuotaGrant(
                granted: free, denied: 0, pending: 0, hour: QuotaHour(containing: store.clock.now()),
                limit: store.configuredLimit(org: org, platform: platform))
        }
        charges += 1
        var grant = try store.charge(
            org: org, platform: platform, count: count - free,
            job: (job.key, job.delivery, lastCharge, charges))
        outstanding[platform, default: .init()].add(grant.granted, hour: grant.hour)
        grant.granted += free
        grant.denied = count - grant.granted
        return grant
    }

    func settlement(platform: Platform, delivered: Int, refunded: Int) -> QuotaSettlement {
        // Only what this account charged is settled: a settle beyond it has no charge to give back.
        let parts = outstanding[platform, default: .init()].take(delivered: delivered, refunded: refunded).parts
        return QuotaSettlement(
            delivery: job.delivery,
            parts: parts.map {
                QuotaSettlement.Part(platform: platform, hour: $0.hour, delivered: $0.delivered, refunded: $0.refunded)
            })
    }

    func settle(_ settlement: QuotaSettlement) throws {
        for p in settlement.parts {
            try store.settle(org: org, platform: p.platform, hour: p.hour, delivered: p.delivered, refunded: p.refunded)
        }
    }
}
