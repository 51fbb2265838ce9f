import Dispatch
import Foundation
import Logging
import VolleyCore
import VolleyRedis

// The Redis implementations of the API's stores (VolleyCore `APIStores.swift`). The hot path (credentials with
// their rate buckets, job submission) runs its scripts on the calling event loop's own connection; the rest runs
// on blocking clients, each owned by one serial queue, so a blocking call never holds more than its own thread.

extension StoreUnavailable {
    /// Connection lost, refused or timed out, or an unexpected reply: the API answers 503 and the caller may retry.
    init(_ error: RedisError) { self.init(error.description) }
}

/// What the API's handlers see of a Redis failure: a refusal for lack of permission (NOPERM, a configuration error
/// the caller cannot fix by retrying) or a store that cannot answer right now.
func apiStoreError(_ error: RedisError) -> any Error {
    if error.kind == .server, error.message.contains("NOPERM") { return StorePermissionDenied(error.message) }
    return StoreUnavailable(error)
}

/// The API's own Redis keys (under the store prefix, default `volley`). The braces are Redis Cluster hash tags:
/// - `volley:{api}:keys` — hash: key id → `APIKeyRecord` JSON (hashed key, org, role, name).
/// - `volley:{api}:rate:<subject>` — hash `tokens`, `at` (ms): one token bucket per API key or user-token subject;
///   in the credentials' slot, since one script reads the key and takes a token.
/// - `volley:api:job:{<stream>}:<org>:<job>` — hash `body` (SHA-256 of the canonical job), `entry`, `app`,
///   `createdAt`: jobs accepted through the API, for idempotent replays and `GET /v1/jobs/{id}`; expires with the
///   outcome ledger. Tagged with the job stream's slot, since one script checks it and adds the job.
/// - `volley:api:job:index:{<stream>}:<org>` — sorted set: the org's job ids submitted on that stream shard, scored
///   by their `createdAt` in milliseconds, for `GET /v1/jobs`. Written by the same script as the record (same slot),
///   trimmed to the ledger's TTL by age on every write and expiring with it.
public struct APIKeys: Sendable {
    public let prefix: String
    public init(prefix: String) { self.prefix = prefix }
    public var apiKeys: String { "\(prefix):{api}:keys" }
    public func rate(_ subject: String) -> String { "\(prefix):{api}:rate:\(subject)" }
    public func job(_ org: OrgID, _ job: JobID, stream: String) -> String {
        // Appended piece by piece: built on every job POST, where interpolating the identifiers cost twice as much.
        let tag = RedisClusterSlot.hashedPart(of: stream)
        var key = ""
        key.reserveCapacity(prefix.utf8.count + tag.utf8.count + org.rawValue.utf8.count + job.rawValue.utf8.count + 12)
        key += prefix
        key += ":api:job:{"
        key += tag
        key += "}:"
        key += org.rawValue
        key += ":"
        key += job.rawValue
        return key
    }
    /// The org's jobs submitted on `stream`, by creation time: in the slot of the records beside that stream.
    public func jobIndex(_ org: OrgID, stream: String) -> String {
        "\(prefix):api:job:index:{\(RedisClusterSlot.hashedPart(of: stream))}:\(org.rawValue)"
    }

    /// A stable digest of a job's entry for a submission that has no request body of its own (`volley send`, sync
    /// hints): equal entries, equal digests, so the same entry submitted again is a replay.
    static func digest(_ entry: String) -> String {
        var h: UInt64 = 0xcbf2_9ce4_8422_2325
        for b in entry.utf8 {
            h ^= UInt64(b)
            h = h &* 0x0000_0100_0000_01b3
        }
        return "fnv1a64:\(String(h, radix: 16)):\(entry.utf8.count)"
    }

    /// The keys and arguments of `APIScripts.submit` for a job of `org` on `stream`: the record, the stream, the
    /// org's job index; `createdAt` (RFC 3339, as the record keeps it) also scores the job in the index.
    public func submission(
        org: OrgID, job: JobID, stream: String, digest: String, entry: String, createdAt: String, app: String,
        ttlSeconds: Int
    ) -> (keys: [String], args: [String]) {
        let created = try? RFC3339.parse(createdAt)
        let millis = created.map { String(Int64(($0.timeIntervalSince1970 * 1000).rounded(.down))) }
        return (
            [self.job(org, job, stream: stream), stream, jobIndex(org, stream: stream)],
            [digest, entry, createdAt, app, String(ttlSeconds), millis ?? "", job.rawValue]
        )
    }
}

/// A value (a blocking Redis client, or a store built on one) owned by one serial queue: every call on it runs
/// there, one at a time, and an async caller waits without blocking its own thread.
public final class SerialLane<Owned: Sendable>: Sendable {
    private let owned: Owned
    private let queue: DispatchQueue

    public init(_ owned: Owned, label: String) {
        self.owned = owned
        queue = DispatchQueue(label: label)
    }

    /// Runs `body` on the lane's queue with the owned value.
    public func run<T: Sendable>(_ body: @escaping @Sendable (Owned) throws -> T) async throws -> T {
        try await withCheckedThrowingContinuation { continuation in
            queue.async {
                continuation.resume(
                    with: Result {
                        do { return try body(self.owned) } catch let e as RedisError { throw apiStoreError(e) }
                    })
            }
        }
    }
}

/// A few serial lanes taken in turn: at most `count` blocking calls at once, each on its own connection.
public final class SerialLanes<Owned: Sendable>: @unchecked Sendable {
    private let lanes: [SerialLane<Owned>]
    private let lock = NSLock()
    private var next = 0

    /// `count` lanes (at least one), lane `n` (from 1) owning `make(n)`.
    public init(count: Int, label: String, _ make: (Int) -> Owned) {
        lanes = (1...max(1, count)).map { n in SerialLane(make(n), label: "\(label).\(n)") }
    }

    public func run<T: Sendable>(_ body: @escaping @Sendable (Owned) throws -> T) async throws -> T {
        let lane = lock.withLock {
            next &+= 1
            return lanes[next % lanes.count]
        }
        return try await lane.run(body)
    }
}

/// Where the hot path's scripts go: the calling event loop's own connection, or (Redis Cluster, whose slot routing
/// the blocking client does) serial lanes of cluster clients.
public enum RedisScriptRoute: Sendable {
    case eventLoops(RedisEventLoopPipeline)
    case lanes(SerialLanes<RedisClient>)

    func eval(_ script: RedisScript, keys: [String], args: [String]) async throws -> RedisReply {
        switch self {
        case .eventLoops(let pipeline): try await pipeline.eval(script, keys: keys, args: args)
        case .lanes(let lanes): try await lanes.run { try $0.eval(script, keys: keys, args: args) }
        }
    }

    func command(_ args: [String]) async throws -> RedisReply {
        switch self {
        case .eventLoops(let pipeline): try await pipeline.send(RedisCommand(args))
        case .lanes(let lanes): try await lanes.run { try $0.command(args) }
        }
    }
}

/// API-key records (`{api}:keys`) and the credentials' token buckets, charged by one script per request.
public final class RedisCredentialStore: CredentialStore {
    private let keys: APIKeys
    private let redis: RedisScriptRoute

    public init(redis: RedisScriptRoute, prefix: String) {
        self.redis = redis
        keys = APIKeys(prefix: prefix)
    }

    public func admit(subject: String, keyID: String?, bucket: RateBucket) async throws -> CredentialAdmission? {
        do {
            let reply = try await redis.eval(
                APIScripts.admit, keys: [keys.apiKeys, keys.rate(subject)],
                args: [keyID ?? "", String(bucket.requestsPerSecond), String(bucket.burst)])
            try reply.throwIfError("admit")
            guard let parts = reply.array, let found = parts.first?.integer else {
                throw RedisError(.unexpectedReply, "admit: \(reply)")
            }
            if found == 0 { return nil }
            guard parts.count == 3, let wait = parts[2].integer else {
                throw RedisError(.unexpectedReply, "admit: \(reply)")
            }
            return CredentialAdmission(record: keyID == nil ? nil : parts[1].string, retryAfterMilliseconds: Int(wait))
        } catch let e as RedisError {
            throw apiStoreError(e)
        }
    }

    public func ping() async throws {
        do {
            try await redis.eval(APIScripts.ping, keys: [], args: []).throwIfError("readyz")
        } catch let e as RedisError {
            throw apiStoreError(e)
        }
    }
}

/// Jobs onto the job stream: idempotent submissions (a record per org and id beside the stream, checked and written
/// with the XADD in one script) and plain XADDs.
public final class RedisJobSubmitter: JobSubmitter, @unchecked Sendable {
    private let keys: APIKeys
    private let store: StoreConfiguration
    private let redis: RedisScriptRoute
    private let lock = NSLock()
    /// Where jobs without an id go, round robin.
    private var nextShard = 0

    public init(redis: RedisScriptRoute, store: StoreConfiguration) {
        self.redis = redis
        self.store = store
        keys = APIKeys(prefix: store.prefix)
    }

    public func submit(
        org: OrgID, job: JobID, app: AppName, digest: String, entry: String, createdAt: String
    ) async throws -> JobSubmission {
        do {
            // The job id picks the stream shard; the record carries that shard's hash tag, so the script's two keys
            // share a slot and a replay of the id finds the record beside the stream it wrote to.
            let stream = store.jobStream(for: job)
            let submission = keys.submission(
                org: org, job: job, stream: stream, digest: digest, entry: entry, createdAt: createdAt,
                app: app.rawValue, ttlSeconds: store.ledgerTTLSeconds)
            return try APIScripts.submission(
                from: await redis.eval(APIScripts.submit, keys: submission.keys, args: submission.args))
        } catch let e as RedisError {
            throw apiStoreError(e)
        }
    }

    public func enqueue(_ job: PushJob) async throws -> String {
        do {
            let json = job.jsonText
            let shard =
                job.id.map { store.streamShard(of: $0) }
                ?? lock.withLock {
                    nextShard &+= 1
                    return nextShard % store.streamShardIndexes.count
                }
            let reply = try await redis.command(["XADD", store.jobStream(shard: shard), "*", "job", json])
            try reply.throwIfError("XADD job")
            guard let id = reply.string else { throw RedisError(.unexpectedReply, "XADD returned \(reply)") }
            return id
        } catch let e as RedisError {
            throw apiStoreError(e)
        }
    }
}

/// API-key records in `{api}:keys`, for `volley keys`. Blocking, one call at a time.
public final class RedisAPIKeyRegistry: APIKeyRegistry, @unchecked Sendable {
    private let redis: SerializedRedis
    private let keys: APIKeys

    public init(client: RedisClient, prefix: String = "volley") {
        redis = SerializedRedis(client)
        keys = APIKeys(prefix: prefix)
    }

    public func put(id: String, record: String) throws {
        _ = try redis.with { try $0.checked(["HSET", keys.apiKeys, id, record]) }
    }

    public func records() throws -> [String: String] {
        let r = try redis.with { try $0.checked(["HGETALL", keys.apiKeys]) }
        return Dictionary(r.fieldPairs, uniquingKeysWith: { a, _ in a })
    }

    public func record(id: String) throws -> String? {
        try redis.with { try $0.checked(["HGET", keys.apiKeys, id]) }.string
    }

    public func remove(id: String) throws -> Bool {
        (try redis.with { try $0.checked(["HDEL", keys.apiKeys, id]) }.integer ?? 0) > 0
    }
}

/// `GET /v1/jobs/{id}` and its events, from the submission record, the ledger, the stream and its dead letters.
public final class RedisJobStatusReader: JobStatusReader {
    private let lanes: SerialLanes<RedisClient>
    private let store: StoreConfiguration
    private let keys: APIKeys

    public init(lanes: SerialLanes<RedisClient>, store: StoreConfiguration) {
        self.lanes = lanes
        self.store = store
        keys = APIKeys(prefix: store.prefix)
    }

    public func status(org: OrgID, job: JobID) async throws -> JobStatus? {
        try await lanes.run { client in
            guard var status = try self.read(client, org: org, job: job) else { return nil }
            let counts = try client.checked(["HGETALL", self.store.countsKey(org, job)]).fieldPairs
            status.counts = JobCounts(fields: counts)
            status.addEngagement(fields: counts)
            return status
        }
    }

    public func events(org: OrgID, job: JobID) async throws -> [DebugEvent]? {
        try await lanes.run { client in
            let events = try RedisDebugEvents(client: client, store: self.store).events(org: org, job: job)
            if !events.isEmpty { return events }
            return try self.read(client, org: org, job: job) == nil ? nil : []
        }
    }

    public func cancel(org: OrgID, job: JobID, now: Date) async throws -> JobCancellation {
        try await lanes.run { client in
            guard let before = try self.read(client, org: org, job: job) else { return .unknown }
            if before.state == "done" || before.state == "dead-lettered" { return .finished(before) }
            var after = before
            switch try RedisScheduleAdmin(store: self.store).cancel(client, org: org, job: job, now: now) {
            case .finished: return .finished(try self.read(client, org: org, job: job) ?? before)
            case .unparked(let due):
                after.state = "cancelled"
                after.dueAt = ScheduledTime.utcText(due)
            case .marked:
                after.state = "cancelled"
            }
            return .cancelled(after)
        }
    }

    public func pause(org: OrgID, job: JobID, now: Date) async throws -> JobSteerAnswer {
        try await lanes.run { client in
            guard let before = try self.read(client, org: org, job: job) else { return .unknown }
            if ["done", "dead-lettered", "cancelled"].contains(before.state) { return .refused(before) }
            let marked = try RedisScheduleAdmin(store: self.store).pause(client, org: org, job: job, now: now)
            let after = try self.read(client, org: org, job: job) ?? before
            return marked ? .changed(after) : .refused(after)
        }
    }

    public func resume(org: OrgID, job: JobID, now: Date) async throws -> JobSteerAnswer {
        try await lanes.run { client in
            guard let before = try self.read(client, org: org, job: job) else { return .unknown }
            if before.state != "paused" { return .refused(before) }
            try RedisScheduleAdmin(store: self.store).resume(client, org: org, job: job, now: now)
            return .changed(try self.read(client, org: org, job: job) ?? before)
        }
    }

    /// The job of `org` as its stores show it, read from the job stream shard of its id; nil when unknown.
    func read(_ client: RedisClient, org: OrgID, job: JobID) throws -> JobStatus? {
        let shard = store.streamShard(of: job)
        let recordKey = keys.job(org, job, stream: store.jobStream(shard: shard))
        let ledger = store.ledgerKey(org, job)
        let r = try client.pipeline([
            ["HGETALL", recordKey], ["HGET", ledger, "_report"],
            ["HMGET", ledger, "_cancelled", "_nextDue", "_waiting", "_paused"],
            ["ZSCORE", store.scheduleKey(shard: shard), StoreConfiguration.scheduleMember(org: org, job: job)],
        ])
        for x in r { try x.throwIfError("job status") }
        var record: [String: String] = [:]
        for (k, v) in r[0].fieldPairs { record[k] = v }
        if let report = r[1].string {
            return JobStatus(
                state: "done", entry: record["entry"], app: record["app"], createdAt: record["createdAt"],
                report: try? ReportCoding.decoder.decode(JobReport.self, from: Data(report.utf8)))
        }
        let marks = r[2].array ?? []
        if marks.first?.string != nil {
            return JobStatus(
                state: "cancelled", entry: record["entry"], app: record["app"], createdAt: record["createdAt"])
        }
        // Paused: marked, or parked until a resume (a resume cut short before it brought the job back).
        if (marks.count == 4 && marks[3].string != nil) || r[3].string.flatMap(Int64.init) == pausedDueMillis {
            return JobStatus(
                state: "paused", entry: record["entry"], app: record["app"], createdAt: record["createdAt"])
        }
        if marks.count == 4, let ms = marks[1].string.flatMap(Double.init) {
            // A local-time job between its waves: the devices due so far are sent, the rest wait.
            var status = JobStatus(
                state: "scheduled", entry: record["entry"], app: record["app"], createdAt: record["createdAt"])
            status.dueAt = ScheduledTime.utcText(Date(timeIntervalSince1970: ms / 1000))
            status.waiting = marks[2].string.flatMap(Int.init)
            return status
        }
        if let ms = r[3].string.flatMap(Double.init) {
            // Parked by a worker (the entry it came on is acknowledged): due at its score.
            var status = JobStatus(
                state: "scheduled", entry: record["entry"], app: record["app"], createdAt: record["createdAt"])
            status.dueAt = ScheduledTime.utcText(Date(timeIntervalSince1970: ms / 1000))
            return status
        }
        guard let entry = record["entry"] else { return nil }
        var status = JobStatus(state: "queued", entry: entry, app: record["app"], createdAt: record["createdAt"])
        let checks = try client.pipeline([
            ["XPENDING", store.jobStream(shard: shard), store.group, entry, entry, "1"],
            ["XINFO", "GROUPS", store.jobStream(shard: shard)],
        ])
        if let pending = checks[0].array, !pending.isEmpty {
            status.state = "running"
            return status
        }
        var lastDelivered: String?
        for g in checks[1].array ?? [] {
            var fields: [String: String] = [:]
            let items = g.array ?? []
            var i = 0
            while i + 1 < items.count {
                if let k = items[i].string { fields[k] = items[i + 1].string ?? items[i + 1].integer.map(String.init) }
                i += 2
            }
            if fields["name"] == store.group { lastDelivered = fields["last-delivered-id"] }
        }
        guard let lastDelivered, !JobStatus.isAfter(entry, lastDelivered) else { return status }
        // Read and acknowledged without a report: look for its dead letter among the newest ones.
        let dead = try client.checked(["XREVRANGE", store.deadStream(shard: shard), "+", "-", "COUNT", "1000"])
        for e in dead.array ?? [] {
            guard let parts = e.array, parts.count == 2 else { continue }
            var fields: [String: String] = [:]
            for (k, v) in parts[1].fieldPairs { fields[k] = v }
            if fields["sourceEntry"] == entry {
                status.state = "dead-lettered"
                status.reason = fields["reason"]
                status.detail = fields["detail"]
                return status
            }
        }
        // Acknowledged, its report not visible yet (being published): still running as far as a client can tell.
        status.state = "running"
        return status
    }
}

/// The device registry (the worker's layout, `RedisPipelineSession`), one user's devices at a time.
public final class RedisDeviceStore: DeviceStore {
    private let lanes: SerialLanes<RedisClient>
    private let store: StoreConfiguration
    private let logger: Logger

    public init(lanes: SerialLanes<RedisClient>, store: StoreConfiguration, logger: Logger) {
        self.lanes = lanes
        self.store = store
        self.logger = logger
    }

    private func session(_ client: RedisClient) -> RedisPipelineSession {
        RedisPipelineSession(client: client, store: store, consumer: "api", logger: logger)
    }

    public func register(_ device: DeviceImportRecord, now: Date) async throws {
        _ = try await lanes.run { client in try self.session(client).register([device], now: now) }
    }

    public func unregister(
        org: OrgID, app: AppName, user: UserID, platform: Platform, token: DeviceToken
    ) async throws -> Bool {
        let index = store.tokenIndexKey(org, app)
        return try await lanes.run { client in
            // Only the user's own token: another user's (or an unknown) token is left alone.
            let owner = try client.checked(["HGET", index, "\(platform.rawValue):\(token.rawValue)"])
            guard owner.string == user.rawValue else { return false }
            return try self.session(client).unregister(org: org, app: app, platform: platform, token: token)
        }
    }

    public func devices(org: OrgID, app: AppName, user: UserID) async throws -> [DeviceRecord] {
        try await lanes.run { client in try self.session(client).records(org: org, app: app, user: user) }
    }

    public func remove(org: OrgID, app: AppName, platform: Platform, token: DeviceToken) async throws -> Bool {
        try await lanes.run { client in
            try self.session(client).unregister(org: org, app: app, platform: platform, token: token)
        }
    }

    public func recent(org: OrgID, app: AppName, limit: Int) async throws -> [DeviceRecord] {
        try await lanes.run { client in try self.session(client).recentRecords(org: org, app: app, limit: limit) }
    }

    public func withTokenSuffix(org: OrgID, app: AppName, suffix: String, limit: Int) async throws -> [DeviceRecord] {
        try await lanes.run { client in
            try self.session(client).records(org: org, app: app, tokenSuffix: suffix, limit: limit)
        }
    }
}

/// `RedisNotificationTypeStore` (the worker's types and settings) on its own serial queue.
public final class RedisNotificationTypeRepository: NotificationTypeRepository {
    private let lane: SerialLane<RedisNotificationTypeStore>

    public init(client: RedisClient) {
        lane = SerialLane(RedisNotificationTypeStore(client: client), label: "volley.store.types")
    }

    public func types(org: OrgID) async throws -> [NotificationType] {
        try await lane.run { try $0.types(org: org) }
    }
    public func type(org: OrgID, id: String) async throws -> NotificationType? {
        try await lane.run { try $0.type(org: org, id: id) }
    }
    public func setType(org: OrgID, _ type: NotificationType) async throws {
        try await lane.run { try $0.setType(org: org, type) }
    }
    public func removeType(org: OrgID, id: String) async throws {
        try await lane.run { try $0.removeType(org: org, id: id) }
    }
    public func subscriptions(org: OrgID, typeID: String, apps: [AppName]) async throws
        -> [AppName: NotificationAppSetting?]?
    {
        try await lane.run { try $0.subscriptions(org: org, typeID: typeID, apps: apps) }
    }
    public func settings(org: OrgID, app: AppName) async throws -> [String: NotificationAppSetting] {
        try await lane.run { try $0.settings(org: org, app: app) }
    }
    public func setSetting(org: OrgID, app: AppName, typeID: String, enabled: Bool?, pushEnabled: Bool?)
        async throws
    {
        try await lane.run {
            try $0.setSetting(org: org, app: app, typeID: typeID, enabled: enabled, pushEnabled: pushEnabled)
        }
    }
    public func resetSetting(org: OrgID, app: AppName, typeID: String) async throws {
        try await lane.run { try $0.resetSetting(org: org, app: app, typeID: typeID) }
    }
    public func orgSettings(org: OrgID) async throws -> [String: NotificationOrgSetting] {
        try await lane.run { try $0.orgSettings(org: org) }
    }
    public func setOrgSetting(org: OrgID, typeID: String, _ change: NotificationOrgSetting) async throws
        -> NotificationOrgSetting
    {
        try await lane.run { try $0.setOrgSetting(org: org, typeID: typeID, change) }
    }
    public func resetOrgSetting(org: OrgID, typeID: String) async throws {
        try await lane.run { try $0.resetOrgSetting(org: org, typeID: typeID) }
    }
    public func appNotificationSettings(org: OrgID, app: AppName) async throws -> AppNotificationSettings {
        try await lane.run { try $0.appNotificationSettings(org: org, app: app) }
    }
    public func setAppNotificationSettings(org: OrgID, app: AppName, _ change: AppNotificationSettings) async throws
        -> AppNotificationSettings
    {
        try await lane.run { try $0.setAppNotificationSettings(org: org, app: app, change) }
    }
}

/// `RedisInboxStore` (what the worker delivers) on its own serial queue, as the Notifications resources read it.
public final class RedisInboxRepository: InboxRepository {
    private let lane: SerialLane<RedisInboxStore>

    public init(store: RedisInboxStore) {
        lane = SerialLane(store, label: "volley.store.inbox")
    }

    public func list(org: OrgID, user: UserID, size: Int, before: Date?, after: Date?) async throws
        -> [InboxNotification]
    {
        try await lane.run { try $0.list(org: org, user: user, size: size, before: before, after: after) }
    }
    public func notification(org: OrgID, user: UserID, id: String) async throws -> InboxNotification? {
        try await lane.run { try $0.notification(org: org, user: user, id: id) }
    }
    public func status(org: OrgID, user: UserID) async throws -> InboxStatus {
        try await lane.run { try $0.status(org: org, user: user) }
    }
    public func status(org: OrgID, user: UserID, includes: @escaping @Sendable (String?) -> Bool) async throws
        -> InboxStatus
    {
        try await lane.run { try $0.status(org: org, user: user, includes: includes) }
    }
    public func mark(org: OrgID, user: UserID, _ mark: InboxMark) async throws -> Int {
        try await lane.run { try $0.mark(org: org, user: user, mark) }
    }
}

/// `RedisQuotaStore` (the worker's hourly quota) on its own serial queue; it keeps this process's test-push
/// charges until they are settled.
public final class RedisQuotaLedger: QuotaLedger {
    private let lane: SerialLane<RedisQuotaStore>

    public init(store: RedisQuotaStore) {
        lane = SerialLane(store, label: "volley.store.quota")
    }

    public func usage(org: OrgID) async throws -> [QuotaUsage] {
        try await lane.run { try $0.usage(org: org) }
    }
    public func charge(org: OrgID, platform: Platform, count: Int) async throws -> QuotaGrant {
        try await lane.run { try $0.charge(org: org, platform: platform, count: count) }
    }
    public func settle(org: OrgID, platform: Platform, delivered: Int, refunded: Int) async throws {
        try await lane.run { try $0.settle(org: org, platform: platform, delivered: delivered, refunded: refunded) }
    }
}

/// The scripts the API runs on its hot path.
public enum APIScripts {
    /// Looks up an API key (when ARGV[1] names one) and takes one token from the caller's bucket, in one round trip.
    /// KEYS: keys hash, bucket. ARGV: key id or '', rate per second, burst.
    /// Answers {0} for an unknown key, else {1, record JSON or '', milliseconds to wait (0 = admitted)}.
    /// The clock is Redis's own TIME, so every API process of the fleet shares one view of each bucket.
    static let admit = RedisScript(
        """
        local rec = ''
        if ARGV[1] ~= '' then
          rec = redis.call('HGET', KEYS[1], ARGV[1])
          if not rec then return {0} end
        end
        local rate = tonumber(ARGV[2])
        local burst = tonumber(ARGV[3])
        if rate <= 0 then return {1, rec, 0} end
        local t = redis.call('TIME')
        local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
        local b = redis.call('HMGET', KEYS[2], 'tokens', 'at')
        local tokens = tonumber(b[1]) or burst
        local at = tonumber(b[2]) or now
        if now > at then tokens = math.min(burst, tokens + (now - at) * rate / 1000) end
        local wait = 0
        if tokens >= 1 then
          tokens = tokens - 1
        else
          wait = math.ceil((1 - tokens) * 1000 / rate)
        end
        redis.call('HSET', KEYS[2], 'tokens', tostring(tokens), 'at', tostring(now))
        redis.call('PEXPIRE', KEYS[2], math.ceil(burst * 1000 / rate) + 1000)
        return {1, rec, wait}
        """)

    /// Accepts a job once per (org, id). KEYS: job record, job stream, the org's job index. ARGV: body digest, job
    /// JSON, createdAt, app, record TTL seconds, createdAt in milliseconds ('' leaves the index alone), job id
    /// (`APIKeys.submission` builds both). Answers {0, entry} for a new job, {1, entry} for a replay of the same
    /// body, {2} for a different body under the same id. Checking and XADD happen in one script, so two racing
    /// requests with one key can never both enqueue. The index loses the jobs older than the record TTL (their
    /// records have expired) on each write, so it holds what `GET /v1/jobs` can still describe.
    static let submit = RedisScript(
        """
        local h = redis.call('HGET', KEYS[1], 'body')
        if h then
          if h == ARGV[1] then return {1, redis.call('HGET', KEYS[1], 'entry')} end
          return {2}
        end
        local e = redis.call('XADD', KEYS[2], '*', 'job', ARGV[2])
        redis.call('HSET', KEYS[1], 'body', ARGV[1], 'entry', e, 'createdAt', ARGV[3], 'app', ARGV[4])
        redis.call('EXPIRE', KEYS[1], ARGV[5])
        local ms = tonumber(ARGV[6])
        if KEYS[3] and ms then
          redis.call('ZADD', KEYS[3], ARGV[6], ARGV[7])
          redis.call('ZREMRANGEBYSCORE', KEYS[3], '-inf', '(' .. string.format('%d', ms - tonumber(ARGV[5]) * 1000))
          redis.call('EXPIRE', KEYS[3], ARGV[5])
        end
        return {0, e}
        """)

    /// What `submit` answered: {0, entry} a new job, {1, entry} the same body again, {2} another body under the id.
    static func submission(from reply: RedisReply) throws -> JobSubmission {
        try reply.throwIfError("submit job")
        guard let parts = reply.array, let code = parts.first?.integer else {
            throw RedisError(.unexpectedReply, "submit: \(reply)")
        }
        let written = parts.count > 1 ? parts[1].string ?? "" : ""
        switch code {
        case 0: return .accepted(entry: written)
        case 1: return .replayed(entry: written)
        default: return .conflict
        }
    }

    /// `/readyz`: proves Redis answers and runs scripts.
    static let ping = RedisScript("return 1")
}
