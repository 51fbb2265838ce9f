import Foundation
import VolleyCore
import VolleyRedis

// The schedule: jobs parked until their `sendAt` (docs/scheduling.md). Beside each job stream shard, in its slot:
// - `volley:sched:{<stream tag>}` — sorted set: `<org>␟<job>` (U+001F between) → due time in ms since 1970.
// - `volley:sched-jobs:{<stream tag>}` — hash: the same member → the job's JSON as it came on the stream.
// - `volley:sched-lease:{<stream tag>}` — string: the worker promoting that shard's due jobs, expiring.
// `<stream tag>` is the job stream's own hash tag (`jobs0` for `volley:jobs:{jobs0}`), or its whole name when it has
// none (`{volley:jobs}` hashes like the key `volley:jobs`): parking acknowledges the entry and promotion adds it back
// in one script each, so the schedule must share the stream's slot on a Redis Cluster.

extension StoreConfiguration {
    /// The hash tag of job stream shard `shard`, as the schedule's keys carry it.
    func scheduleTag(shard: Int) -> Substring { RedisClusterSlot.hashedPart(of: jobStream(shard: shard)) }
    /// The schedule (sorted set by due time) of job stream shard `shard`.
    public func scheduleKey(shard: Int) -> String { "\(prefix):sched:{\(scheduleTag(shard: shard))}" }
    /// The parked jobs' bodies of job stream shard `shard`.
    public func scheduledJobsKey(shard: Int) -> String { "\(prefix):sched-jobs:{\(scheduleTag(shard: shard))}" }
    /// The promotion lease of job stream shard `shard`.
    public func scheduleLeaseKey(shard: Int) -> String { "\(prefix):sched-lease:{\(scheduleTag(shard: shard))}" }

    /// The schedule's member for a job: the org and the job id, U+001F between (neither may hold it).
    public static func scheduleMember(org: OrgID, job: JobID) -> String { "\(org.rawValue)\u{1F}\(job.rawValue)" }

    /// The member of a local-time job's wave: the job's member, then `<reference ms>@<wave ms>` (promotion hands it
    /// to the worker as the entry's `wave` field).
    public static func waveMember(org: OrgID, job: JobID, reference: Date, at: Date) -> String {
        scheduleMember(org: org, job: job, wave: LocalTimeWaves.waveField(reference: reference, at: at))
    }

    /// The job's member, followed by its wave field when it has one (an entry's `wave`, as promotion wrote it).
    static func scheduleMember(org: OrgID, job: JobID, wave: String?) -> String {
        scheduleMember(org: org, job: job) + (wave.map { "\u{1F}" + $0 } ?? "")
    }
}

/// The schedule's scripts. Every one touches the keys of one job stream shard only (`RedisKeyGroups.schedule`).
enum ScheduleScripts {
    /// Parks a job and acknowledges its entry. KEYS: schedule, bodies, job stream. ARGV: member, due ms, job JSON,
    /// group, entry id. A member parked already keeps its first due time and body (a replay of the same job).
    static let park = RedisScript(
        """
        if not redis.call('ZSCORE', KEYS[1], ARGV[1]) then
          redis.call('ZADD', KEYS[1], ARGV[2], ARGV[1])
          redis.call('HSET', KEYS[2], ARGV[1], ARGV[3])
        end
        return redis.call('XACK', KEYS[3], ARGV[4], ARGV[5])
        """)

    /// Takes or renews the promotion lease and, when held, moves the jobs due at or before ARGV[3] onto the stream,
    /// at most ARGV[4] of them: a range read of the earliest members, so the cost follows the jobs moved, never the
    /// jobs waiting. Each goes back with `jobId` (the member's job part) and `due` (its score). KEYS: schedule,
    /// bodies, job stream, lease. ARGV: owner, lease ms, now ms, batch.
    /// Answers {0} when another worker holds the lease, else {1, moved, full (0/1), earliest due ms left or -1}.
    static let promote = RedisScript(
        """
        local holder = redis.call('GET', KEYS[4])
        if holder and holder ~= ARGV[1] then return {0} end
        redis.call('SET', KEYS[4], ARGV[1], 'PX', ARGV[2])
        local due = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', ARGV[3], 'WITHSCORES', 'LIMIT', 0, ARGV[4])
        local moved = 0
        for i = 1, #due, 2 do
          local member = due[i]
          local body = redis.call('HGET', KEYS[2], member)
          if body then
            local sep = string.find(member, '\\31', 1, true)
            local rest = sep and string.sub(member, sep + 1) or member
            local waveSep = string.find(rest, '\\31', 1, true)
            if waveSep then
              redis.call('XADD', KEYS[3], '*', 'job', body, 'jobId', string.sub(rest, 1, waveSep - 1),
                'due', due[i + 1], 'wave', string.sub(rest, waveSep + 1))
            else
              redis.call('XADD', KEYS[3], '*', 'job', body, 'jobId', rest, 'due', due[i + 1])
            end
            moved = moved + 1
          end
          redis.call('ZREM', KEYS[1], member)
          redis.call('HDEL', KEYS[2], member)
        end
        local full = 0
        if #due / 2 >= tonumber(ARGV[4]) then full = 1 end
        local left = redis.call('ZRANGE', KEYS[1], 0, 0, 'WITHSCORES')
        local nextDue = -1
        if left[2] then nextDue = tonumber(left[2]) end
        return {1, moved, full, nextDue}
        """)

    /// Parks a local-time job's waves. KEYS: schedule, bodies. ARGV: job JSON, then member and due ms pairs. A wave
    /// parked already keeps its place.
    static let parkWaves = RedisScript(
        """
        for i = 2, #ARGV, 2 do
          if not redis.call('ZSCORE', KEYS[1], ARGV[i]) then
            redis.call('ZADD', KEYS[1], ARGV[i + 1], ARGV[i])
            redis.call('HSET', KEYS[2], ARGV[i], ARGV[1])
          end
        end
        return 1
        """)

    /// Removes a parked job. KEYS: schedule, bodies. ARGV: member. Answers its due ms, or -1 when it was not parked.
    static let unpark = RedisScript(
        """
        local due = redis.call('ZSCORE', KEYS[1], ARGV[1])
        if not due then return -1 end
        redis.call('ZREM', KEYS[1], ARGV[1])
        redis.call('HDEL', KEYS[2], ARGV[1])
        return tonumber(due)
        """)

    /// Marks a job paused in its outcome ledger unless its report is there or it was cancelled. KEYS: the ledger.
    /// ARGV: when (ISO 8601), ttl seconds. Answers 1 when marked (or marked before), 0 when finished or cancelled.
    static let markPaused = RedisScript(
        """
        if redis.call('HEXISTS', KEYS[1], '_report') == 1 then return 0 end
        if redis.call('HEXISTS', KEYS[1], '_cancelled') == 1 then return 0 end
        redis.call('HSETNX', KEYS[1], '_paused', ARGV[1])
        redis.call('EXPIRE', KEYS[1], ARGV[2])
        return 1
        """)

    /// Moves a parked member's due time to ARGV[2] if it is parked. KEYS: schedule. ARGV: member, due ms.
    static let reschedule = RedisScript(
        """
        return redis.call('ZADD', KEYS[1], 'XX', 'CH', ARGV[2], ARGV[1])
        """)

    /// Marks a job cancelled in its outcome ledger unless its report is there already. KEYS: the ledger. ARGV:
    /// when (ISO 8601), ttl seconds. Answers 1 when marked (or marked before), 0 when the job has finished.
    static let markCancelled = RedisScript(
        """
        if redis.call('HEXISTS', KEYS[1], '_report') == 1 then return 0 end
        redis.call('HSETNX', KEYS[1], '_cancelled', ARGV[1])
        redis.call('EXPIRE', KEYS[1], ARGV[2])
        return 1
        """)
}

/// The schedule's due time of a paused job (the last millisecond of year 9999): parked until its resume moves it.
let pausedDueMillis: Int64 = 253_402_300_799_999

/// Pause, resume and the paused parts a resume or cancel brings back: one place for the API's stores and the
/// worker's session.
struct JobSteeringMarks {
    let store: StoreConfiguration

    /// What the ledgers' marks say (a cancel outranks a pause); `replies` answer `commands(for:)`, two per ledger.
    static func steering(from replies: ArraySlice<RedisReply>) -> JobSteering {
        var paused = false
        for (i, r) in replies.enumerated() where r.integer == 1 {
            if i % 2 == 0 { return .cancelled }
            paused = true
        }
        return paused ? .paused : .run
    }

    /// `HEXISTS _cancelled` and `HEXISTS _paused` per ledger (no HMGET: that is the outcome look-up's command).
    static func commands(for ledgers: [String]) -> [RedisCommand] {
        ledgers.flatMap {
            [RedisCommand(["HEXISTS", $0, "_cancelled"]), RedisCommand(["HEXISTS", $0, "_paused"])]
        }
    }

    /// Brings every parked part of a paused job back to the stream at `now` (the promoter moves it), forgetting
    /// each once it is moved. A part not parked (yet) is forgotten too: its worker looks at the marks again after
    /// parking it.
    func bringBack(_ client: RedisClient, org: OrgID, job: JobID, now: Date) throws -> Int {
        let key = store.pausedPartsKey(org, job)
        let parts = try client.checked(["SMEMBERS", key]).array?.compactMap(\.string) ?? []
        var moved = 0
        for part in parts {
            guard let sep = part.firstIndex(of: "\u{1F}"), let shard = Int(part[..<sep]) else { continue }
            let member = String(part[part.index(after: sep)...])
            let r = try client.eval(
                ScheduleScripts.reschedule, keys: [store.scheduleKey(shard: shard)],
                args: [member, String(RedisPipelineSession.millis(now))])
            try r.throwIfError("bring a paused job back")
            moved += Int(r.integer ?? 0)
            try client.checked(["SREM", key, part])
        }
        return moved
    }
}

extension RedisPipelineSession {
    public func parkPaused(_ entry: JobEntry, org: OrgID, job: JobID, pausedBy: [JobID], now: Date) throws {
        guard let body = entry.fields["job"] else {
            throw RedisError(.unexpectedReply, "entry \(entry.entryID) has no job to park")
        }
        let shard = entry.entryID.shard
        // A local-time wave keeps its wave: it comes back as the same wave.
        let member = StoreConfiguration.scheduleMember(org: org, job: job, wave: entry.fields["wave"])
        let ttl = String(store.ledgerTTLSeconds)
        // Noted first (the org's slot), parked second (the stream's slot).
        var notes: [RedisCommand] = []
        for p in pausedBy {
            let key = store.pausedPartsKey(org, p)
            notes += [RedisCommand(["SADD", key, "\(shard)\u{1F}\(member)"]), RedisCommand(["EXPIRE", key, ttl])]
        }
        for r in try client.pipeline(notes) { try r.throwIfError("note a paused job") }
        try client.eval(
            ScheduleScripts.park, keys: RedisKeyGroups.schedulePark(store, shard: shard),
            args: [member, String(pausedDueMillis), body, store.group, entry.entryID.rawValue]
        ).throwIfError("park a paused job")
        // A resume (or cancel) between the note and the park found nothing parked to move: look again.
        let marks = try client.pipeline(JobSteeringMarks.commands(for: pausedBy.map { store.ledgerKey(org, $0) }))
        for r in marks { try r.throwIfError("pause marks") }
        if JobSteeringMarks.steering(from: marks[...]) != .paused {
            try client.eval(
                ScheduleScripts.reschedule, keys: [store.scheduleKey(shard: shard)],
                args: [member, String(Self.millis(now))]
            ).throwIfError("bring a resumed job back")
        }
    }

    public func park(_ entry: JobEntry, org: OrgID, job: JobID, due: Date) throws {
        guard let body = entry.fields["job"] else {
            throw RedisError(.unexpectedReply, "entry \(entry.entryID) has no job to park")
        }
        let shard = entry.entryID.shard
        let ms = Int64((due.timeIntervalSince1970 * 1000).rounded(.up))
        try client.eval(
            ScheduleScripts.park, keys: RedisKeyGroups.schedulePark(store, shard: shard),
            args: [
                StoreConfiguration.scheduleMember(org: org, job: job), String(ms), body, store.group,
                entry.entryID.rawValue,
            ]
        ).throwIfError("park job")
    }

    public func parkWaves(_ entry: JobEntry, org: OrgID, job: JobID, reference: Date, waves: [Date: Int]) throws {
        guard let body = entry.fields["job"], let next = waves.keys.min() else { return }
        var args = [body]
        for at in waves.keys.sorted() {
            args += [
                StoreConfiguration.waveMember(org: org, job: job, reference: reference, at: at),
                String(Self.millis(at)),
            ]
        }
        try client.eval(
            ScheduleScripts.parkWaves, keys: RedisKeyGroups.scheduleUnpark(store, shard: entry.entryID.shard),
            args: args
        ).throwIfError("park local-time waves")
        let ledger = store.ledgerKey(org, job)
        let replies = try client.pipeline([
            [
                "HSET", ledger, "_nextDue", String(Self.millis(next)), "_waiting",
                String(waves.values.reduce(0, +)),
            ],
            ["EXPIRE", ledger, String(store.ledgerTTLSeconds)],
        ])
        for r in replies { try r.throwIfError("note local-time waves") }
    }

    static func millis(_ date: Date) -> Int64 { Int64((date.timeIntervalSince1970 * 1000).rounded(.up)) }

    /// One promotion pass over every job stream shard (`SchedulePromotionStateMachine`): per shard one script that
    /// takes or renews the lease for `owner` and moves at most `batch` jobs due at or before `now`.
    public func promoteDue(owner: String, leaseSeconds: Double, now: Date, batch: Int) throws
        -> SchedulePromotionStateMachine.Pass
    {
        var pass = SchedulePromotionStateMachine.Pass(leased: false)
        let nowMillis = String(Int64((now.timeIntervalSince1970 * 1000).rounded(.down)))
        for shard in store.streamShardIndexes {
            let r = try client.eval(
                ScheduleScripts.promote, keys: RedisKeyGroups.schedulePromote(store, shard: shard),
                args: [owner, String(max(1, Int(leaseSeconds * 1000))), nowMillis, String(max(1, batch))])
            try r.throwIfError("promote scheduled jobs")
            guard let parts = r.array, let leased = parts.first?.integer else {
                throw RedisError(.unexpectedReply, "promote: \(r)")
            }
            guard leased == 1, parts.count >= 4 else { continue }
            pass.leased = true
            pass.promoted += Int(parts[1].integer ?? 0)
            if parts[2].integer == 1 { pass.full = true }
            if let next = parts[3].integer, next >= 0 {
                let d = Date(timeIntervalSince1970: Double(next) / 1000)
                pass.nextDue = min(pass.nextDue ?? d, d)
            }
        }
        return pass
    }

    /// Jobs parked in the schedule, over every shard (`volley status`, the scheduled-jobs gauge).
    public func scheduledCount() throws -> Int {
        let replies = try client.pipeline(store.streamShardIndexes.map { ["ZCARD", store.scheduleKey(shard: $0)] })
        var n = 0
        for r in replies {
            try r.throwIfError("ZCARD schedule")
            n += Int(r.integer ?? 0)
        }
        return n
    }
}

/// What a cancel found (`DELETE /v1/jobs/{id}`, `volley jobs cancel`).
public enum ScheduleCancel: Sendable, Hashable {
    /// The job was parked: it is removed, nothing is sent. `due` is when it would have gone.
    case unparked(due: Date)
    /// The job is marked cancelled: a worker reading it sends nothing; one sending it stops between chunks and
    /// publishes a report with `status: cancelled`.
    case marked
    /// The job's report is published: it had finished.
    case finished
}

/// Cancels jobs and reads the schedule of one job, on a blocking client (the API's lanes, the CLI).
public struct RedisScheduleAdmin: Sendable {
    public let store: StoreConfiguration
    public init(store: StoreConfiguration) { self.store = store }

    /// Marks the job cancelled in its ledger first, then removes it from the schedule: a promotion between the two
    /// brings back a job its worker then finds cancelled, so no order of events sends it.
    /// A paused job is brought back instead of unparked: its worker publishes the report of what went, saying
    /// `cancelled`.
    public func cancel(_ client: RedisClient, org: OrgID, job: JobID, now: Date) throws -> ScheduleCancel {
        let ledger = store.ledgerKey(org, job)
        let marked = try client.eval(
            ScheduleScripts.markCancelled, keys: [ledger],
            args: [RFC3339.format(now), String(store.ledgerTTLSeconds)])
        try marked.throwIfError("cancel job")
        if marked.integer == 0 { return .finished }
        let pause = try client.pipeline([["HDEL", ledger, "_paused"], ["SCARD", store.pausedPartsKey(org, job)]])
        for r in pause { try r.throwIfError("cancel job") }
        if pause[0].integer == 1 || (pause[1].integer ?? 0) > 0 {
            _ = try JobSteeringMarks(store: store).bringBack(client, org: org, job: job, now: now)
            return .marked
        }
        let member = StoreConfiguration.scheduleMember(org: org, job: job)
        // A job without its own id is parked on the shard of its entry, which the id does not name: every shard is
        // looked at (a handful of scripts, once per cancel).
        let shards = [store.streamShard(of: job)] + store.streamShardIndexes.filter { $0 != store.streamShard(of: job) }
        for shard in shards {
            let r = try client.eval(
                ScheduleScripts.unpark, keys: RedisKeyGroups.scheduleUnpark(store, shard: shard), args: [member])
            try r.throwIfError("cancel job")
            if let ms = r.integer, ms >= 0 { return .unparked(due: Date(timeIntervalSince1970: Double(ms) / 1000)) }
        }
        return .marked
    }

    /// Marks a job that has not finished or been cancelled paused; false when it has.
    public func pause(_ client: RedisClient, org: OrgID, job: JobID, now: Date) throws -> Bool {
        let r = try client.eval(
            ScheduleScripts.markPaused, keys: [store.ledgerKey(org, job)],
            args: [RFC3339.format(now), String(store.ledgerTTLSeconds)])
        try r.throwIfError("pause job")
        return r.integer == 1
    }

    /// Lifts a pause and brings every parked part of the job back (due `now`); answers how many parts came back.
    /// The mark goes first: a part parked after this is brought back by its own worker (`parkPaused`).
    @discardableResult
    public func resume(_ client: RedisClient, org: OrgID, job: JobID, now: Date) throws -> Int {
        try client.checked(["HDEL", store.ledgerKey(org, job), "_paused"])
        return try JobSteeringMarks(store: store).bringBack(client, org: org, job: job, now: now)
    }

    /// When the job is due, if it is parked on its id's shard (nil: not parked there).
    public func due(_ client: RedisClient, org: OrgID, job: JobID) throws -> Date? {
        let r = try client.command([
            "ZSCORE", store.scheduleKey(shard: store.streamShard(of: job)),
            StoreConfiguration.scheduleMember(org: org, job: job),
        ])
        try r.throwIfError("ZSCORE schedule")
        return r.string.flatMap(Double.init).map { Date(timeIntervalSince1970: $0 / 1000) }
    }
}
