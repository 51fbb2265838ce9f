import Foundation
import VolleyCore
import VolleyRedis

/// Recurring schedules in Redis, hash-tagged by org so each org's schedule scripts run in one slot:
///
/// - `volley:sched:{<org>}:<id>` — hash `def` (the definition, JSON), `next` (the next run, ms; empty: none left),
///   `paused` (`0`/`1`), `last` (the last run's job id).
/// - `volley:sched:{<org>}:ids` — sorted set: id → creation (ms), for listing and the per-org limit.
/// - `volley:sched:{<org>}:due` — sorted set: id → next run (ms), unpaused schedules with a run left. Promotion
///   reads it by score (`ZRANGEBYSCORE … LIMIT`): its cost per run does not grow with the schedules waiting.
/// - `volley:sched-orgs` — set of the orgs that have schedules (its own slot): what a promotion pass walks.
/// - `volley:sched-lease` — the promotion lease: the worker promoting, expiring.
///
/// A run is promoted in two steps, each atomic: the run job goes to the job stream through the API's submit
/// script (in the stream's slot; the run's id is its idempotency key, so a run submitted twice is accepted once),
/// then the schedule advances to its next run only if it still names this run (compare and set). A worker killed
/// between the two leaves the run due: the next pass submits it again (answered as a replay, nothing added) and
/// advances. Blocking: the worker's promoter and the CLI call it directly, the API through
/// `RedisScheduleRepository`.
public final class RedisSchedules: @unchecked Sendable {
    private let redis: SerializedRedis
    let store: StoreConfiguration

    public init(client: RedisClient, store: StoreConfiguration = StoreConfiguration()) {
        redis = SerializedRedis(client)
        self.store = store
    }

    func key(_ org: OrgID, _ id: String) -> String { "\(store.prefix):sched:{\(org.rawValue)}:\(id)" }
    func idsKey(_ org: OrgID) -> String { "\(store.prefix):sched:{\(org.rawValue)}:ids" }
    func dueKey(_ org: OrgID) -> String { "\(store.prefix):sched:{\(org.rawValue)}:due" }
    var orgsKey: String { "\(store.prefix):sched-orgs" }
    var leaseKey: String { "\(store.prefix):sched-lease" }

    static func ms(_ d: Date) -> Int64 { Int64((d.timeIntervalSince1970 * 1000).rounded(.down)) }
    static func date(_ ms: Int64) -> Date { Date(timeIntervalSince1970: Double(ms) / 1000) }

    /// KEYS schedule, ids, due; ARGV def, created ms, next ms ('' none), limit. {-1} limit, {0} exists, {1} created.
    static let createScript = RedisScript(
        """
        if redis.call('EXISTS', KEYS[1]) == 1 then return 0 end
        if redis.call('ZCARD', KEYS[2]) >= tonumber(ARGV[4]) then return -1 end
        redis.call('HSET', KEYS[1], 'def', ARGV[1], 'next', ARGV[3], 'paused', '0', 'last', '')
        redis.call('ZADD', KEYS[2], ARGV[2], ARGV[5])
        if ARGV[3] ~= '' then redis.call('ZADD', KEYS[3], ARGV[3], ARGV[5]) end
        return 1
        """)

    /// Creates a schedule whose first run is its first at or after a minute ago: a start up to 60 s past (what
    /// the body's check allows) runs at once, as a job's `sendAt` would.
    public func create(_ s: Schedule, now: Date) throws -> ScheduleCreation {
        let next = s.recurrence.run(onOrAfter: now.addingTimeInterval(-60))
        let reply = try redis.with {
            try $0.eval(
                Self.createScript, keys: [key(s.org, s.id), idsKey(s.org), dueKey(s.org)],
                args: [
                    s.definition.jsonText, String(Self.ms(s.createdAt)), next.map { String(Self.ms($0)) } ?? "",
                    String(Schedule.maxPerOrg), s.id,
                ])
        }
        switch try reply.int("create schedule") {
        case 1:
            _ = try redis.with { try $0.checked(["SADD", orgsKey, s.org.rawValue]) }
            return .created(ScheduleState(schedule: s, paused: false, nextRunAt: next, lastRunJob: nil))
        case 0: return .exists
        default: return .limitReached
        }
    }

    public func schedule(org: OrgID, id: String) throws -> ScheduleState? {
        let r = try redis.with { try $0.checked(["HMGET", key(org, id), "def", "next", "paused", "last"]) }
        return try Self.state(org: org, fields: r.array ?? [])
    }

    static func state(org: OrgID, fields f: [RedisReply]) throws -> ScheduleState? {
        guard f.count == 4, let def = f[0].string else { return nil }
        let schedule: Schedule
        do { schedule = try Schedule(definition: try JSONValue(parsing: def), org: org) } catch {
            throw RedisError(.unexpectedReply, "a stored schedule of org \(org) is not readable: \(error)")
        }
        let next = f[1].string.flatMap(Int64.init).map(date)
        let last = f[3].string.flatMap { $0.isEmpty ? nil : JobID($0) }
        return ScheduleState(schedule: schedule, paused: f[2].string == "1", nextRunAt: next, lastRunJob: last)
    }

    /// Every schedule of the org, by id.
    public func list(org: OrgID) throws -> [ScheduleState] {
        let ids = try redis.with { try $0.checked(["ZRANGE", idsKey(org), "0", "-1"]) }.array?.compactMap(\.string)
        guard let ids, !ids.isEmpty else { return [] }
        let replies = try redis.with { r in
            try r.pipeline(ids.map { ["HMGET", key(org, $0), "def", "next", "paused", "last"] })
        }
        var out: [ScheduleState] = []
        for reply in replies {
            try reply.throwIfError("list schedules")
            if let s = try Self.state(org: org, fields: reply.array ?? []) { out.append(s) }
        }
        return out.sorted { $0.schedule.id < $1.schedule.id }
    }

    /// KEYS schedule, due; ARGV id, paused ('1'/'0'), next ms ('' none). 0 when there is no such schedule.
    static let pauseScript = RedisScript(
        """
        if redis.call('EXISTS', KEYS[1]) == 0 then return 0 end
        if ARGV[2] == '1' then
          redis.call('HSET', KEYS[1], 'paused', '1')
          redis.call('ZREM', KEYS[2], ARGV[1])
        else
          redis.call('HSET', KEYS[1], 'paused', '0', 'next', ARGV[3])
          if ARGV[3] == '' then
            redis.call('ZREM', KEYS[2], ARGV[1])
          else
            redis.call('ZADD', KEYS[2], ARGV[3], ARGV[1])
          end
        end
        return 1
        """)

    /// Pauses a schedule (its runs stop being promoted) or resumes it from its next run at or after `now` (runs
    /// missed while paused are not sent).
    public func setPaused(org: OrgID, id: String, paused: Bool, now: Date) throws -> ScheduleState? {
        guard let current = try schedule(org: org, id: id) else { return nil }
        let next = paused ? current.nextRunAt : current.schedule.recurrence.run(onOrAfter: now)
        let reply = try redis.with {
            try $0.eval(
                Self.pauseScript, keys: [key(org, id), dueKey(org)],
                args: [id, paused ? "1" : "0", next.map { String(Self.ms($0)) } ?? ""])
        }
        guard try reply.int("pause schedule") == 1 else { return nil }
        return try schedule(org: org, id: id)
    }

    /// True when the schedule existed.
    public func delete(org: OrgID, id: String) throws -> Bool {
        let r = try redis.with {
            // HDEL of every field removes the hash (the API's Redis user has no DEL).
            try $0.pipeline([
                ["HDEL", key(org, id), "def", "next", "paused", "last"], ["ZREM", idsKey(org), id],
                ["ZREM", dueKey(org), id],
            ])
        }
        for x in r { try x.throwIfError("delete schedule") }
        return try r[0].int("delete schedule") > 0
    }

    // MARK: promotion

    /// KEYS schedule, due; ARGV id, the run promoted (ms), the next run (ms, '' none), the run's job id. Advances
    /// only a schedule that still names this run: 1 advanced, 0 not (paused, deleted, or advanced by another).
    static let advanceScript = RedisScript(
        """
        if redis.call('HGET', KEYS[1], 'next') ~= ARGV[2] then return 0 end
        redis.call('HSET', KEYS[1], 'next', ARGV[3], 'last', ARGV[4])
        if ARGV[3] == '' or redis.call('HGET', KEYS[1], 'paused') == '1' then
          redis.call('ZREM', KEYS[2], ARGV[1])
        else
          redis.call('ZADD', KEYS[2], ARGV[3], ARGV[1])
        end
        return 1
        """)

    /// One promotion pass under the lease: per org, up to `limit` schedules due by `dueBy` each get their run
    /// submitted (id `<schedule>-<run epoch>`) and advance to their next run after `now`; runs missed while no
    /// worker promoted (Volley down for longer than a period) are not sent, only the one that was due.
    public func promoteDue(
        dueBy: Date, now: Date, leaseSeconds: Double, owner: String, limit: Int = 100
    ) throws -> SchedulePromotionResult {
        guard
            try redis.with({
                try FleetLease.take($0, key: leaseKey, owner: owner, seconds: leaseSeconds, what: "schedule lease")
            })
        else { return SchedulePromotionResult(leased: false) }
        var result = SchedulePromotionResult(leased: true)
        let orgs = try redis.with { try $0.checked(["SMEMBERS", orgsKey]) }.array?.compactMap(\.string) ?? []
        for orgName in orgs.sorted() {
            let org = OrgID(orgName)
            let due =
                try redis.with {
                    try $0.checked([
                        "ZRANGEBYSCORE", dueKey(org), "-inf", String(Self.ms(dueBy)), "WITHSCORES", "LIMIT", "0",
                        String(limit),
                    ])
                }.array ?? []
            if due.count / 2 >= limit { result.more = true }
            var i = 0
            while i + 1 < due.count {
                defer { i += 2 }
                guard let id = due[i].string, let runMS = due[i + 1].string.flatMap({ Int64($0) }) else { continue }
                if let job = try promote(org: org, id: id, runMS: runMS, now: now) {
                    result.promoted.append(job)
                }
            }
        }
        return result
    }

    /// Submits one due run and advances its schedule; the run's job id, or nil when the schedule moved on.
    func promote(org: OrgID, id: String, runMS: Int64, now: Date) throws -> PromotedRun? {
        guard let state = try schedule(org: org, id: id), !state.paused,
            let next = state.nextRunAt, Self.ms(next) == runMS
        else { return nil }
        let run = Self.date(runMS)
        let jobID = Schedule.runJobID(schedule: id, run: run)
        let app = state.schedule.job.objectValue?["app"]?.stringValue ?? ""
        let stream = store.jobStream(for: jobID)
        // Listed at `GET /v1/jobs` like a job the API accepted: the script also adds it to the org's job index.
        let submission = APIKeys(prefix: store.prefix).submission(
            org: org, job: jobID, stream: stream, digest: "schedule:\(id):\(runMS)",
            entry: state.schedule.runJob(at: run).jsonText, createdAt: RFC3339.format(now, .milliseconds), app: app,
            ttlSeconds: store.ledgerTTLSeconds)
        let reply = try redis.with { try $0.eval(APIScripts.submit, keys: submission.keys, args: submission.args) }
        try reply.throwIfError("submit scheduled run")
        let replayed = reply.array?.first?.integer == 1
        let following = state.schedule.recurrence.run(after: max(run, now))
        let advanced = try redis.with {
            try $0.eval(
                Self.advanceScript, keys: [key(org, id), dueKey(org)],
                args: [id, String(runMS), following.map { String(Self.ms($0)) } ?? "", jobID.rawValue])
        }
        _ = try advanced.int("advance schedule")
        return PromotedRun(org: org, schedule: id, job: jobID, run: run, replayed: replayed)
    }
}

/// A run promoted to the job stream.
public struct PromotedRun: Sendable, Hashable {
    public var org: OrgID
    public var schedule: String
    public var job: JobID
    public var run: Date
    /// The run was submitted before (a pass that died before advancing): nothing was added this time.
    public var replayed: Bool
}

/// What one promotion pass did.
public struct SchedulePromotionResult: Sendable, Hashable {
    /// False when another worker held the lease (nothing was read).
    public var leased: Bool
    public var promoted: [PromotedRun] = []
    /// An org had a full batch of due schedules: more may be due.
    public var more = false
    public init(leased: Bool) { self.leased = leased }
}

/// `ScheduleStore` for the API: the schedules on a serial lane of their own.
public final class RedisScheduleRepository: ScheduleStore {
    private let lane: SerialLane<RedisSchedules>

    public init(client: RedisClient, store: StoreConfiguration) {
        lane = SerialLane(RedisSchedules(client: client, store: store), label: "volley.store.schedules")
    }

    public func create(_ schedule: Schedule, now: Date) async throws -> ScheduleCreation {
        try await lane.run { try $0.create(schedule, now: now) }
    }
    public func list(org: OrgID) async throws -> [ScheduleState] { try await lane.run { try $0.list(org: org) } }
    public func schedule(org: OrgID, id: String) async throws -> ScheduleState? {
        try await lane.run { try $0.schedule(org: org, id: id) }
    }
    public func setPaused(org: OrgID, id: String, paused: Bool, now: Date) async throws -> ScheduleState? {
        try await lane.run { try $0.setPaused(org: org, id: id, paused: paused, now: now) }
    }
    public func delete(org: OrgID, id: String) async throws -> Bool {
        try await lane.run { try $0.delete(org: org, id: id) }
    }
}
