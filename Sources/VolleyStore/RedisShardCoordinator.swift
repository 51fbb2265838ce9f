import Foundation
import VolleyCore
import VolleyRedis

/// Shards in Redis (layout in `RecipientKeys`): one list of user ids per shard, an aggregate hash per parent with
/// the summed counters and `remainingShards`, a set of shards already counted (so a redelivered shard is counted
/// once), and a plan marker so a redelivered parent does not split again.
public final class RedisShardCoordinator: ShardCoordinator, @unchecked Sendable {
    private let redis: SerializedRedis
    /// Where campaign shard jobs are enqueued: each on the job stream shard of its own id, so a campaign spreads
    /// over every job stream shard.
    public let store: StoreConfiguration
    /// Lifetime of shard lists and aggregates (a campaign must finish within it).
    public var ttlSeconds = 7 * 86_400

    public init(client: RedisClient, store: StoreConfiguration) {
        redis = SerializedRedis(client)
        self.store = store
    }

    /// One job stream (no stream shards) named `jobStream`.
    public convenience init(client: RedisClient, jobStream: String) {
        self.init(client: client, store: StoreConfiguration(jobStream: jobStream))
    }

    private static let counters = [
        "users", "devices", "accepted", "rejected", "failed", "tokensRemoved", "noDevices",
        "quotaExceeded", "inAppStored", "alreadyRecorded", "expired",
    ]

    public func split(job: PushJob, jobID: JobID, users: any UserBatches, shardSize: Int, startedAt: Date) throws -> Int
    {
        let k = RecipientKeys(org: job.org)
        let agg = k.shardAggregate(jobID)
        if let n = try redis.with({ try $0.checked(["HGET", agg, "planned"]) }).integer { return Int(n) }
        let size = max(1, shardSize)
        let count = max(1, (users.summary.users + size - 1) / size)
        var index = 0
        var inShard = 0
        // Each shard list's length so far: an append names the length it expects, so one sent again (the whole
        // pipeline runs again after a lost connection) finds the list longer and adds nothing.
        var lengths = [Int](repeating: 0, count: count)
        try redis.with { c in
            var cmds: [[String]] = (0..<count).map { ["DEL", k.shardList(jobID, $0)] }
            _ = try c.pipeline(cmds)
            cmds = []
            while let batch = try users.next(max: min(1000, size)) {
                var rest = batch[...]
                while !rest.isEmpty {
                    let take = min(rest.count, size - inShard)
                    let idx = min(index, count - 1)
                    cmds.append(
                        ["EVAL", Self.appendAtLength.source, "1", k.shardList(jobID, idx), String(lengths[idx])]
                            + rest.prefix(take).map(\.rawValue))
                    lengths[idx] += take
                    rest = rest.dropFirst(take)
                    inShard += take
                    if inShard >= size {
                        index += 1
                        inShard = 0
                    }
                }
                if cmds.count >= 64 {
                    for r in try c.pipeline(cmds) { try r.throwIfError("append to shard list") }
                    cmds = []
                }
            }
            cmds += (0..<count).map { ["EXPIRE", k.shardList(jobID, $0), String(ttlSeconds)] }
            cmds.append(["HSETNX", agg, "remainingShards", String(count)])
            cmds.append(["HSETNX", agg, "startedMs", String(Int64(startedAt.timeIntervalSince1970 * 1000))])
            cmds.append(["HSETNX", agg, "unknownRecipients", String(users.summary.unknown.count)])
            cmds.append(["HSETNX", agg, "recipients", String(job.recipients?.count ?? 0)])
            cmds.append(["EXPIRE", agg, String(ttlSeconds)])
            for r in try c.pipeline(cmds) { try r.throwIfError("shard plan") }
            // Shard jobs: the parent job with its own id and a shard reference.
            var xadds: [[String]] = []
            for i in 0..<count {
                var s = job
                let ref = ShardRef(parent: jobID, index: i, count: count)
                s.id = ref.jobID
                s.shard = ref
                xadds.append(["XADD", store.jobStream(for: ref.jobID), "*", "job", s.jsonText])
            }
            xadds.append(["HSET", agg, "planned", String(count)])
            for r in try c.pipeline(xadds) { try r.throwIfError("XADD shard") }
        }
        return count
    }

    /// RPUSH only when the list has the length the caller expects before it: the same append sent twice adds its
    /// users once. KEYS[1] the list; ARGV[1] its expected length, ARGV[2..] the values. Returns the new length, or
    /// -1 when the append was already made (or the list is not what the caller built).
    static let appendAtLength = RedisScript(
        """
        if redis.call('LLEN', KEYS[1]) ~= tonumber(ARGV[1]) then return -1 end
        return redis.call('RPUSH', KEYS[1], unpack(ARGV, 2))
        """)

    public func users(of shard: ShardRef, org: OrgID) throws -> any UserBatches {
        let key = RecipientKeys(org: org).shardList(shard.parent, shard.index)
        let n = try redis.with { try $0.checked(["LLEN", key]) }.integer ?? 0
        return ListBatches(redis: redis, key: key, summary: ResolutionSummary(users: Int(n)))
    }

    final class ListBatches: UserBatches {
        let redis: SerializedRedis
        let key: String
        let summary: ResolutionSummary
        var offset = 0
        init(redis: SerializedRedis, key: String, summary: ResolutionSummary) {
            self.redis = redis
            self.key = key
            self.summary = summary
        }
        func next(max: Int) throws -> [UserID]? {
            if offset >= summary.users { return nil }
            let end = min(summary.users, offset + Swift.max(1, max)) - 1
            let r = try redis.with { try $0.checked(["LRANGE", key, String(offset), String(end)]) }
            let users = (r.array ?? []).compactMap { $0.string.map(UserID.init) }
            if users.isEmpty {
                throw DirectoryError(
                    "shard list \(key) vanished at \(offset) of \(summary.users) users (Redis lost it)")
            }
            offset += users.count
            return users
        }
    }

    public func shardFinished(_ report: JobReport, shard: ShardRef) throws -> JobReport? {
        let k = RecipientKeys(org: report.org)
        let agg = k.shardAggregate(shard.parent)
        var args = [String(shard.index), String(ttlSeconds)]
        let values = [
            report.users, report.devices, report.accepted, report.rejected, report.failed, report.tokensRemoved,
            report.noDevices, report.quotaExceeded, report.inAppStored ?? 0, report.alreadyRecorded,
            report.expired ?? 0,
        ]
        for (name, v) in zip(Self.counters, values) { args += [name, String(v)] }
        if let capped = report.capped { args += ["capped", String(capped)] }
        if report.status == "cancelled" { args += ["cancelledShards", "1"] }
        for (reason, v) in report.rejectedByReason { args += ["rejectedByReason.\(reason)", String(v)] }
        for (reason, v) in report.failedByReason { args += ["failedByReason.\(reason)", String(v)] }
        for (p, v) in report.byPlatform { args += ["byPlatform.\(p)", String(v)] }
        let left = try redis.with {
            try $0.eval(
                RecipientScripts.shardComplete,
                keys: RedisKeyGroups.shardComplete(org: report.org, parent: shard.parent),
                args: args)
        }.int("shard complete")
        if left != 0 { return nil }
        let fields = try redis.with { try $0.checked(["HGETALL", agg]) }.fieldPairs
        var f: [String: Int] = [:]
        for (name, v) in fields { if let i = Int(v) { f[name] = i } }
        let started = Date(timeIntervalSince1970: Double(f["startedMs"] ?? 0) / 1000)
        var parent = JobReport(job: shard.parent, entry: nil, org: report.org, app: report.app, startedAt: started)
        parent.recipients = f["recipients"] ?? 0
        parent.users = f["users"] ?? 0
        parent.devices = f["devices"] ?? 0
        parent.accepted = f["accepted"] ?? 0
        parent.rejected = f["rejected"] ?? 0
        parent.failed = f["failed"] ?? 0
        parent.tokensRemoved = f["tokensRemoved"] ?? 0
        parent.noDevices = f["noDevices"] ?? 0
        parent.quotaExceeded = f["quotaExceeded"] ?? 0
        if let expired = f["expired"], expired > 0 { parent.expired = expired }
        parent.inAppStored = f["inAppStored"] ?? 0
        parent.alreadyRecorded = f["alreadyRecorded"] ?? 0
        parent.unknownRecipients = f["unknownRecipients"] ?? 0
        parent.capped = f["capped"]
        for (name, v) in f {
            if name.hasPrefix("rejectedByReason.") { parent.rejectedByReason[String(name.dropFirst(17))] = v }
            if name.hasPrefix("failedByReason.") { parent.failedByReason[String(name.dropFirst(15))] = v }
            if name.hasPrefix("byPlatform.") { parent.byPlatform[String(name.dropFirst(11))] = v }
        }
        parent.shards = shard.count
        parent.worker = report.worker
        parent.finishedAt = report.finishedAt
        if let n = f["cancelledShards"], n > 0 {
            parent.status = "cancelled"
            parent.statusDetail =
                "cancelled (DELETE /v1/jobs/{id}); \(parent.accepted) pushes were accepted before "
                + "(\(n) of \(shard.count) shards stopped)"
        }
        return parent
    }
}
