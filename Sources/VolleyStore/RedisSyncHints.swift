import Foundation
import VolleyCore
import VolleyRedis

/// The keys of sync hints, all of one org under its `{org}` hash tag, so each script runs in one slot. `m` is the
/// `SyncHintKey.member` (app, user and type joined by U+001F):
/// - `volley:hints:{org}:ids:<m>` — sorted set: waiting record id → the id of the hint that last named it.
/// - `volley:hints:{org}:tk:<m>` — sorted set: the ids of a batch taken for a push, until the push is on the stream.
/// - `volley:hints:{org}:st:<m>` — hash: `hid` (last hint id), `full` (hint id up to which a full sync is owed),
///   `last` (last push, ms), `pushes` (push times within the hour, ms), `batch`, `taken`, `takenAt`, `tkfull`.
/// - `volley:hints:{org}:due` — sorted set: m → when a flusher should look at it next (ms).
/// - `volley:hints:{org}:oldest` — sorted set: m → when its oldest waiting hint arrived (ms).
/// - `volley:hints:{org}:u:<app>\u{1F}<user>` — set of the types a user has had hints of (for the status read).
/// - `volley:hints:orgs` — set of the orgs that have had hints (where flushers look).
public struct SyncHintKeys: Sendable {
    public let org: OrgID
    public init(org: OrgID) { self.org = org }
    public var prefix: String { "volley:hints:{\(org.rawValue)}:" }
    public var due: String { prefix + "due" }
    public var oldest: String { prefix + "oldest" }
    public func ids(_ key: SyncHintKey) -> String { prefix + "ids:" + key.member }
    public func taken(_ key: SyncHintKey) -> String { prefix + "tk:" + key.member }
    public func state(_ key: SyncHintKey) -> String { prefix + "st:" + key.member }
    public func userTypes(_ app: AppName, _ user: UserID) -> String {
        prefix + "u:" + app.rawValue + "\u{1F}" + user.rawValue
    }
    public static let orgs = "volley:hints:orgs"
}

/// One key's window as a flusher read it, with the last push as stored (the take is guarded by it).
public struct SyncHintDue: Sendable, Hashable {
    public var key: SyncHintKey
    public var window: SyncHintWindow
    /// `last` as stored ("" when never pushed): the take succeeds only if it is still the same.
    public var lastStamp: String
}

/// What a flusher does with one key after deciding.
public enum SyncHintStep: Sendable, Hashable {
    case wait(SyncHintKey, until: Date)
    case forget(SyncHintKey)
    case take(SyncHintKey, lastStamp: String)
    case takeAgain(SyncHintKey, batch: Int64)
}

/// Sync hints in Redis: the Lua scripts store and take atomically; every decision is `SyncHintStateMachine`'s.
/// Blocking, one call at a time per instance (its client is serialized).
public final class RedisSyncHintStore: SyncHintIntake, @unchecked Sendable {
    private let redis: SerializedRedis
    private let maxRecordIds: Int
    private let lock = NSLock()
    /// Orgs this process has written to the org set, and when: written again at most once a minute.
    private var knownOrgs: [OrgID: Date] = [:]

    public init(client: RedisClient, maxRecordIds: Int = SyncHintConfiguration.defaultMaxRecordIds) {
        redis = SerializedRedis(client)
        self.maxRecordIds = maxRecordIds
    }

    /// KEYS[1] due, KEYS[2] oldest; ARGV prefix, now (ms), maxRecordIds, type, app, user count, users…, ids….
    /// Per user: the hint id (now, or one past the last), the ids into the waiting set (or, once past the cap, only
    /// the full-sync mark), the key due now unless it already waits for a later time. Answers the hint ids.
    /// The state hash and the user's type set expire 8 days after the last hint or push: longer than the job records
    /// (7 days) that a batch number names, so a batch number is never used twice while its record lives.
    static let addScript = RedisScript(
        """
        local p, now, cap, typ, app = ARGV[1], tonumber(ARGV[2]), tonumber(ARGV[3]), ARGV[4], ARGV[5]
        local n = tonumber(ARGV[6])
        local first = 7 + n
        local out = {}
        for u = 7, 6 + n do
          local m = app .. '\\31' .. ARGV[u] .. '\\31' .. typ
          local st = p .. 'st:' .. m
          local ids = p .. 'ids:' .. m
          local hid = now
          local last = tonumber(redis.call('HGET', st, 'hid') or '0')
          if hid <= last then hid = last + 1 end
          local hs = string.format('%.0f', hid)
          redis.call('HSET', st, 'hid', hs)
          if redis.call('HEXISTS', st, 'full') == 1 then
            redis.call('HSET', st, 'full', hs)
          else
            local args = {}
            for i = first, #ARGV do
              args[#args + 1] = hs
              args[#args + 1] = ARGV[i]
              if #args >= 1000 then
                redis.call('ZADD', ids, unpack(args))
                args = {}
              end
            end
            if #args > 0 then redis.call('ZADD', ids, unpack(args)) end
            if redis.call('ZCARD', ids) > cap then
              redis.call('DEL', ids)
              redis.call('HSET', st, 'full', hs)
            end
          end
          redis.call('PEXPIRE', st, 691200000)
          redis.call('ZADD', KEYS[2], 'NX', ARGV[2], m)
          redis.call('ZADD', KEYS[1], 'NX', ARGV[2], m)
          redis.call('SADD', p .. 'u:' .. app .. '\\31' .. ARGV[u], typ)
          redis.call('PEXPIRE', p .. 'u:' .. app .. '\\31' .. ARGV[u], 691200000)
          out[#out + 1] = hs
        end
        return out
        """)

    /// KEYS[1] due; ARGV prefix, now (ms), limit. Each key due by now: member, waiting count, full, last, pushes,
    /// taken, takenAt, oldest ("" for absent fields).
    static let inspectScript = RedisScript(
        """
        local p = ARGV[1]
        local ms = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', ARGV[2], 'LIMIT', 0, tonumber(ARGV[3]))
        local out = {}
        for _, m in ipairs(ms) do
          local st = p .. 'st:' .. m
          local f = redis.call('HMGET', st, 'full', 'last', 'pushes', 'taken', 'takenAt')
          local n = redis.call('ZCARD', p .. 'ids:' .. m)
          local o = redis.call('ZSCORE', KEYS[2], m)
          out[#out + 1] = {m, n, f[1] or '', f[2] or '', f[3] or '', f[4] or '', f[5] or '', o or ''}
        end
        return out
        """)

    /// KEYS[1] due, KEYS[2] oldest; ARGV prefix, now (ms), lease (ms), then (op, member, arg) triples:
    /// `w` due at arg; `f` forget when nothing waits or is taken; `t` take when `last` is still arg and nothing is
    /// taken (the waiting ids become the taken batch, the push time is recorded, the key is due again when the
    /// lease ends); `r` renew batch arg's lease to push it again. Answers each batch taken: member, batch, full
    /// (0/1), ids.
    static let applyScript = RedisScript(
        """
        local p, now, lease = ARGV[1], tonumber(ARGV[2]), tonumber(ARGV[3])
        local out = {}
        for i = 4, #ARGV, 3 do
          local op, m, a = ARGV[i], ARGV[i + 1], ARGV[i + 2]
          local st, ids, tk = p .. 'st:' .. m, p .. 'ids:' .. m, p .. 'tk:' .. m
          if op == 'w' then
            redis.call('ZADD', KEYS[1], 'XX', a, m)
          elseif op == 'f' then
            if redis.call('EXISTS', ids) == 0 and redis.call('HEXISTS', st, 'full') == 0
              and redis.call('HEXISTS', st, 'taken') == 0 then
              redis.call('ZREM', KEYS[1], m)
              redis.call('ZREM', KEYS[2], m)
            end
          elseif op == 't' then
            local last = redis.call('HGET', st, 'last') or ''
            local full = redis.call('HGET', st, 'full')
            local has = redis.call('EXISTS', ids) == 1
            if last == a and redis.call('HEXISTS', st, 'taken') == 0 and (full or has) then
              redis.call('DEL', tk)
              local fl = 0
              if full then
                fl = 1
                redis.call('HDEL', st, 'full')
                redis.call('DEL', ids)
              else
                redis.call('RENAME', ids, tk)
              end
              local b = redis.call('HINCRBY', st, 'batch', 1)
              local kept = {}
              for t in string.gmatch(redis.call('HGET', st, 'pushes') or '', '%S+') do
                if tonumber(t) > now - 3600000 then kept[#kept + 1] = t end
              end
              kept[#kept + 1] = ARGV[2]
              redis.call('HSET', st, 'taken', b, 'takenAt', ARGV[2], 'last', ARGV[2], 'tkfull', fl,
                'pushes', table.concat(kept, ' '))
              redis.call('PEXPIRE', st, 691200000)
              redis.call('ZADD', KEYS[1], string.format('%.0f', now + lease), m)
              redis.call('ZREM', KEYS[2], m)
              out[#out + 1] = {m, b, fl, redis.call('ZRANGE', tk, 0, -1)}
            end
          elseif op == 'r' then
            local b = redis.call('HGET', st, 'taken')
            if b == a then
              redis.call('HSET', st, 'takenAt', ARGV[2])
              redis.call('ZADD', KEYS[1], string.format('%.0f', now + lease), m)
              out[#out + 1] = {m, tonumber(b), tonumber(redis.call('HGET', st, 'tkfull') or '0'),
                redis.call('ZRANGE', tk, 0, -1)}
            end
          end
        end
        return out
        """)

    /// KEYS[1] due; ARGV prefix, now (ms), then (member, batch) pairs: each batch whose push is on the job stream is
    /// let go, and its key looked at again now (for what arrived meanwhile).
    static let confirmScript = RedisScript(
        """
        local p = ARGV[1]
        for i = 3, #ARGV, 2 do
          local m, b = ARGV[i], ARGV[i + 1]
          local st = p .. 'st:' .. m
          if redis.call('HGET', st, 'taken') == b then
            redis.call('DEL', p .. 'tk:' .. m)
            redis.call('HDEL', st, 'taken', 'takenAt', 'tkfull')
            redis.call('ZADD', KEYS[1], 'XX', ARGV[2], m)
          end
        end
        return 1
        """)

    /// KEYS[1] due, KEYS[2] oldest; ARGV prefix, member, upTo (hint id). Drops the waiting ids last named by a
    /// hint at or before upTo, and the full-sync mark when it is covered. Answers dropped, remaining, full (0/1).
    static let ackScript = RedisScript(
        """
        local p, m, upTo = ARGV[1], ARGV[2], tonumber(ARGV[3])
        local st, ids = p .. 'st:' .. m, p .. 'ids:' .. m
        local dropped = redis.call('ZREMRANGEBYSCORE', ids, '-inf', ARGV[3])
        local full = redis.call('HGET', st, 'full')
        if full and tonumber(full) <= upTo then
          redis.call('HDEL', st, 'full')
          full = nil
        end
        local remaining = redis.call('ZCARD', ids)
        if remaining == 0 and not full then redis.call('ZREM', KEYS[2], m) end
        return {dropped, remaining, full and 1 or 0}
        """)

    /// KEYS[1] due; ARGV prefix, app, user, limit. Per type of the user: type, ids (at most limit), full, hid, last,
    /// pushes, taken count, due, whether a batch is taken (0/1).
    static let statusScript = RedisScript(
        """
        local p, app, user, limit = ARGV[1], ARGV[2], ARGV[3], tonumber(ARGV[4])
        local out = {}
        for _, t in ipairs(redis.call('SMEMBERS', p .. 'u:' .. app .. '\\31' .. user)) do
          local m = app .. '\\31' .. user .. '\\31' .. t
          local st = p .. 'st:' .. m
          local f = redis.call('HMGET', st, 'full', 'hid', 'last', 'pushes')
          out[#out + 1] = {t, redis.call('ZRANGE', p .. 'ids:' .. m, 0, limit - 1), f[1] or '', f[2] or '',
            f[3] or '', f[4] or '', redis.call('ZCARD', p .. 'tk:' .. m), redis.call('ZSCORE', KEYS[1], m) or '',
            redis.call('HEXISTS', st, 'taken')}
        end
        return out
        """)

    // MARK: - intake

    public func add(org: OrgID, app: AppName, users: [UserID], type: String, recordIds: [String], now: Date) throws
        -> [SyncHintID]
    {
        let k = SyncHintKeys(org: org)
        let nowMS = SyncHintID.milliseconds(now)
        var out: [SyncHintID] = []
        // Users in slices, so one script's arguments stay near 10,000.
        let slice = max(1, 10_000 / max(1, recordIds.count))
        var start = 0
        while start < users.count {
            let part = users[start..<min(users.count, start + slice)]
            start += part.count
            let args =
                [k.prefix, String(nowMS), String(maxRecordIds), type, app.rawValue, String(part.count)]
                + part.map(\.rawValue) + recordIds
            let reply = try redis.with {
                try $0.eval(Self.addScript, keys: [k.due, k.oldest], args: args)
            }
            try reply.throwIfError("add sync hint")
            guard let ids = reply.array, ids.count == part.count else {
                throw RedisError(.unexpectedReply, "add sync hint: \(reply)")
            }
            out += try ids.map { r in
                guard let s = r.string ?? r.integer.map({ String($0) }), let ms = Int64(s) else {
                    throw RedisError(.unexpectedReply, "add sync hint: \(r)")
                }
                return SyncHintID(milliseconds: ms)
            }
        }
        let register: Bool = lock.withLock {
            if let at = knownOrgs[org], now.timeIntervalSince(at) < 60, now >= at { return false }
            knownOrgs[org] = now
            return true
        }
        if register { _ = try redis.with { try $0.checked(["SADD", SyncHintKeys.orgs, org.rawValue]) } }
        return out
    }

    public func ack(org: OrgID, key: SyncHintKey, upTo: SyncHintID) throws -> SyncHintAckResult {
        let k = SyncHintKeys(org: org)
        let reply = try redis.with {
            try $0.eval(
                Self.ackScript, keys: [k.due, k.oldest], args: [k.prefix, key.member, String(upTo.milliseconds)])
        }
        try reply.throwIfError("ack sync hints")
        let n = reply.array?.compactMap(\.integer) ?? []
        guard n.count == 3 else { throw RedisError(.unexpectedReply, "ack sync hints: \(reply)") }
        return SyncHintAckResult(dropped: Int(n[0]), remaining: Int(n[1]), fullSync: n[2] == 1)
    }

    public func status(
        org: OrgID, apps: [AppName], user: UserID, configuration: SyncHintConfiguration, now: Date
    ) throws -> [SyncHintStatus] {
        let k = SyncHintKeys(org: org)
        let machine = SyncHintStateMachine(configuration: configuration)
        var out: [SyncHintStatus] = []
        for app in apps.sorted(by: { $0.rawValue < $1.rawValue }) {
            let reply = try redis.with {
                try $0.eval(
                    Self.statusScript, keys: [k.due],
                    args: [k.prefix, app.rawValue, user.rawValue, String(configuration.maxRecordIds)])
            }
            try reply.throwIfError("sync hint status")
            for row in reply.array ?? [] {
                guard let f = row.array, f.count == 9, let type = f[0].string else { continue }
                let ids = f[1].array?.compactMap(\.string) ?? []
                let full = !(f[2].string ?? "").isEmpty
                let last = Self.date(f[4].string)
                let pushes = Self.dates(f[5].string)
                let inFlight = Int(f[6].integer ?? 0)
                var nextPushAt: Date?
                if !ids.isEmpty || full {
                    let window = SyncHintWindow(
                        waiting: ids.count, fullSync: full, lastPush: last, recentPushes: pushes)
                    nextPushAt = max(machine.nextPush(window, now: now), Self.date(f[7].string) ?? .distantPast)
                }
                let hourAgo = now.addingTimeInterval(-3_600)
                out.append(
                    SyncHintStatus(
                        app: app.rawValue, type: type, recordIds: ids, fullSync: full,
                        lastHintId: (f[3].string ?? "").isEmpty ? nil : f[3].string, lastPushAt: last,
                        pushesLastHour: pushes.filter { $0 > hourAgo }.count, nextPushAt: nextPushAt,
                        inFlight: inFlight, pushing: f[8].integer == 1))
            }
        }
        return out.sorted { ($0.app, $0.type) < ($1.app, $1.type) }
    }

    // MARK: - flushing

    /// The orgs that have had hints.
    public func orgs() throws -> [OrgID] {
        let r = try redis.with { try $0.checked(["SMEMBERS", SyncHintKeys.orgs]) }
        return (r.array?.compactMap(\.string) ?? []).sorted().map(OrgID.init)
    }

    /// The keys of `org` due by `now`, at most `limit`, with their windows.
    public func due(org: OrgID, now: Date, limit: Int) throws -> [SyncHintDue] {
        let k = SyncHintKeys(org: org)
        let reply = try redis.with {
            try $0.eval(
                Self.inspectScript, keys: [k.due, k.oldest],
                args: [k.prefix, String(SyncHintID.milliseconds(now)), String(limit)])
        }
        try reply.throwIfError("read due sync hints")
        return (reply.array ?? []).compactMap { row in
            guard let f = row.array, f.count == 8, let m = f[0].string, let key = SyncHintKey(member: m) else {
                return nil
            }
            var taken: (batch: Int64, at: Date)?
            if let b = f[5].string.flatMap({ Int64($0) }), let at = Self.date(f[6].string) { taken = (b, at) }
            let window = SyncHintWindow(
                waiting: Int(f[1].integer ?? 0), fullSync: !(f[2].string ?? "").isEmpty,
                lastPush: Self.date(f[3].string), recentPushes: Self.dates(f[4].string), taken: taken,
                oldestWaiting: Self.date(f[7].string))
            return SyncHintDue(key: key, window: window, lastStamp: f[3].string ?? "")
        }
    }

    /// Carries out the decisions; answers the batches taken (to push).
    public func apply(org: OrgID, _ steps: [SyncHintStep], now: Date, leaseSeconds: Double) throws -> [SyncHintBatch] {
        guard !steps.isEmpty else { return [] }
        let k = SyncHintKeys(org: org)
        var args = [k.prefix, String(SyncHintID.milliseconds(now)), String(Int64(leaseSeconds * 1_000))]
        for s in steps {
            switch s {
            case .wait(let key, let until): args += ["w", key.member, String(SyncHintID.milliseconds(until))]
            case .forget(let key): args += ["f", key.member, ""]
            case .take(let key, let last): args += ["t", key.member, last]
            case .takeAgain(let key, let batch): args += ["r", key.member, String(batch)]
            }
        }
        let reply = try redis.with { try $0.eval(Self.applyScript, keys: [k.due, k.oldest], args: args) }
        try reply.throwIfError("take sync hints")
        return (reply.array ?? []).compactMap { row in
            guard let f = row.array, f.count == 4, let m = f[0].string, let key = SyncHintKey(member: m),
                let batch = f[1].integer
            else { return nil }
            let ids = f[3].array?.compactMap(\.string) ?? []
            return SyncHintBatch(key: key, batch: batch, recordIds: f[2].integer == 1 ? nil : ids)
        }
    }

    /// Puts each batch's push on the job stream, at most once per batch: the job id is the batch's, and the job
    /// record the API keeps for idempotent submissions (`APIScripts.submit`) answers a second submission as a replay.
    public func submit(
        org: OrgID, _ batches: [SyncHintBatch], store: StoreConfiguration, now: Date
    ) throws -> [SyncHintBatch] {
        guard !batches.isEmpty else { return [] }
        let keys = APIKeys(prefix: store.prefix)
        var done: [SyncHintBatch] = []
        for b in batches {
            let job = SyncHintPush.job(org: org, batch: b)
            let id = job.id ?? SyncHintPush.jobID(org: org, batch: b)
            let entry = job.jsonText
            let stream = store.jobStream(for: id)
            let submission = keys.submission(
                org: org, job: id, stream: stream, digest: APIKeys.digest(entry), entry: entry,
                createdAt: RFC3339.format(now, .milliseconds), app: b.key.app.rawValue,
                ttlSeconds: store.ledgerTTLSeconds)
            let reply = try redis.with { try $0.eval(APIScripts.submit, keys: submission.keys, args: submission.args) }
            try reply.throwIfError("submit sync hint push")
            // 2: a different job holds this id (cannot happen for a batch's own id); the batch stays taken.
            if reply.array?.first?.integer != 2 { done.append(b) }
        }
        return done
    }

    /// Lets go of batches whose push is on the job stream.
    public func confirm(org: OrgID, _ batches: [SyncHintBatch], now: Date) throws {
        guard !batches.isEmpty else { return }
        let k = SyncHintKeys(org: org)
        var args = [k.prefix, String(SyncHintID.milliseconds(now))]
        for b in batches { args += [b.key.member, String(b.batch)] }
        try redis.with { try $0.eval(Self.confirmScript, keys: [k.due], args: args) }.throwIfError("confirm sync hints")
    }

    /// Waiting keys and the oldest waiting hint's arrival, for `org`.
    public func backlog(org: OrgID) throws -> (waiting: Int, oldest: Date?) {
        let k = SyncHintKeys(org: org)
        let r = try redis.with {
            try $0.pipeline([["ZCARD", k.oldest], ["ZRANGE", k.oldest, "0", "0", "WITHSCORES"]])
        }
        for reply in r { try reply.throwIfError("sync hint backlog") }
        let oldest = r[1].array?.dropFirst().first?.string.flatMap(Double.init)
        return (Int(r[0].integer ?? 0), oldest.map { Date(timeIntervalSince1970: $0 / 1_000) })
    }

    static func date(_ ms: String?) -> Date? {
        guard let ms, let v = Double(ms) else { return nil }
        return Date(timeIntervalSince1970: v / 1_000)
    }

    static func dates(_ list: String?) -> [Date] {
        (list ?? "").split(separator: " ").compactMap { Double($0).map { Date(timeIntervalSince1970: $0 / 1_000) } }
    }
}

/// `SyncHintStore` for the API: the Redis store on a serial lane of its own.
public final class RedisSyncHintRepository: SyncHintStore {
    private let lane: SerialLane<RedisSyncHintStore>

    public init(client: RedisClient, maxRecordIds: Int) {
        lane = SerialLane(
            RedisSyncHintStore(client: client, maxRecordIds: maxRecordIds), label: "volley.store.sync-hints")
    }

    public func add(org: OrgID, app: AppName, users: [UserID], type: String, recordIds: [String], now: Date)
        async throws -> [SyncHintID]
    {
        try await lane.run { try $0.add(org: org, app: app, users: users, type: type, recordIds: recordIds, now: now) }
    }

    public func ack(org: OrgID, key: SyncHintKey, upTo: SyncHintID) async throws -> SyncHintAckResult {
        try await lane.run { try $0.ack(org: org, key: key, upTo: upTo) }
    }

    public func status(
        org: OrgID, apps: [AppName], user: UserID, configuration: SyncHintConfiguration, now: Date
    ) async throws -> [SyncHintStatus] {
        try await lane.run {
            try $0.status(org: org, apps: apps, user: user, configuration: configuration, now: now)
        }
    }
}
