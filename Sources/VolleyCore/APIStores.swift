import Foundation

// The stores the HTTP API and the Salesforce-compatible resources see. Handlers call these protocols only; the Redis
// implementations live in VolleyStore, in-memory ones in VolleyTestDoubles, and the composition root picks.
// Calls that do I/O are `async`: an implementation never blocks the caller's thread (an event loop, in `volley api`).

/// A store that cannot answer right now (connection refused or lost, a timeout, an error reply). The API answers
/// 503 with `Retry-After`; the request may be retried as it is.
public struct StoreUnavailable: Error, Sendable, Hashable, CustomStringConvertible {
    public var description: String
    public init(_ description: String) { self.description = description }
}

/// A store that refused an operation because its user lacks the permission (Redis `NOPERM`): a configuration
/// error, which retrying does not fix. The API answers 500 without `Retry-After` and `/readyz` names it.
/// `description` names the command and key Redis refused.
public struct StorePermissionDenied: Error, Sendable, Hashable, CustomStringConvertible {
    public var description: String
    public init(_ description: String) { self.description = description }
}

/// The steady rate and burst of one credential's token bucket (`api.rateLimit`).
public struct RateBucket: Sendable, Hashable {
    /// Tokens added per second; 0 turns limiting off.
    public var requestsPerSecond: Double
    /// The bucket's size: requests allowed at once after a quiet period.
    public var burst: Int
    public init(requestsPerSecond: Double, burst: Int) {
        self.requestsPerSecond = requestsPerSecond
        self.burst = burst
    }
}

/// What one admission decided: the key's stored record (when one was looked up) and how long to wait.
public struct CredentialAdmission: Sendable, Hashable {
    /// The API key's record as stored (JSON), when the admission looked one up; nil otherwise.
    public var record: String?
    /// 0: admitted; else the caller's bucket is empty and a token comes back after this many milliseconds.
    public var retryAfterMilliseconds: Int
    public init(record: String?, retryAfterMilliseconds: Int) {
        self.record = record
        self.retryAfterMilliseconds = retryAfterMilliseconds
    }
}

/// API-key records and the rate buckets of every credential, shared by the fleet: the hot path of every request.
public protocol CredentialStore: Sendable {
    /// Takes one token from `subject`'s bucket and, when `keyID` is given, reads that key's record, in one round
    /// trip. nil: `keyID` names no key (nothing was charged).
    func admit(subject: String, keyID: String?, bucket: RateBucket) async throws -> CredentialAdmission?
    /// Proves the store answers and runs its scripts (`/readyz`).
    func ping() async throws
}

/// The API-key records by id, for `volley keys` (records are JSON; only the key's SHA-256 is stored, never the key).
/// Blocking: for command-line tools, not for request handlers.
public protocol APIKeyRegistry: Sendable {
    func put(id: String, record: String) throws
    /// Every record by key id.
    func records() throws -> [String: String]
    func record(id: String) throws -> String?
    /// True when the key existed.
    func remove(id: String) throws -> Bool
}

/// How a job submission ended.
public enum JobSubmission: Sendable, Hashable {
    /// A new job, now on the job stream at `entry`.
    case accepted(entry: String)
    /// The same body was accepted before under this id, at `entry`: nothing was added.
    case replayed(entry: String)
    /// A different body was accepted before under this id.
    case conflict
}

/// Puts jobs on the job stream.
public protocol JobSubmitter: Sendable {
    /// Accepts `entry` (the job's JSON, as the worker will decode it) once per (org, job): a replay of the same
    /// `digest` answers the first entry, another digest `conflict`. The check and the write are one step, so two
    /// racing requests with one id never both enqueue. `createdAt` is ISO 8601.
    func submit(
        org: OrgID, job: JobID, app: AppName, digest: String, entry: String, createdAt: String
    ) async throws -> JobSubmission
    /// Adds `job` to the job stream (no idempotency record); answers the stream entry id.
    @discardableResult
    func enqueue(_ job: PushJob) async throws -> String
}

/// What a cancel did.
public enum JobCancellation: Sendable {
    /// `org` has no such job.
    case unknown
    /// The job had finished (its report is published) or was dead-lettered: nothing to cancel.
    case finished(JobStatus)
    /// Cancelled: the job's status after the cancel (`cancelled`, with `dueAt` when it was parked).
    case cancelled(JobStatus)
}

/// What a pause or resume did.
public enum JobSteerAnswer: Sendable {
    /// `org` has no such job.
    case unknown
    /// Nothing to change: the job has finished, was cancelled, or (a resume) is not paused. Its status says which.
    case refused(JobStatus)
    /// Done: the job's status after the change (`paused`; after a resume, where it is now).
    case changed(JobStatus)
}

/// `GET /v1/jobs/{id}`: where a job is, as its stores show it.
///
/// - `done`: the outcome ledger holds the published report, which comes along.
/// - `running`: the job's stream entry is pending in the worker group (read, not yet acknowledged).
/// - `queued`: the entry is past the group's last delivered id (not read yet), or no group exists yet.
/// - `dead-lettered`: read and acknowledged without a report; the dead letter gives the reason.
/// - `scheduled`: parked until `dueAt` (its `sendAt`).
/// - `cancelled`: cancelled before its report; one that was sending turns `done` (report `status: cancelled`) once
///   its worker has recorded what went.
/// - `paused`: paused (`POST /v1/jobs/{id}/pause`): nothing more is sent until `POST /v1/jobs/{id}/resume`.
public struct JobStatus: Sendable, Encodable {
    public var id: String = ""
    public var state: String
    public var entry: String?
    public var app: String?
    public var createdAt: String?
    public var report: JobReport?
    public var reason: String?
    public var detail: String?
    /// `scheduled`: when the job is due (its `sendAt`, RFC 3339 in UTC); `cancelled` before it ran: when it would
    /// have been.
    public var dueAt: String?
    /// `scheduled`, a `deliverAtLocalTime` job: devices still waiting for their local time.
    public var waiting: Int?
    /// Engagement reported by the apps (`POST /v1/interactions`), each device once: pushes opened, dismissed, and
    /// taps per action id; absent until one is counted.
    public var opened: Int?
    public var dismissed: Int?
    public var actions: [String: Int]?
    /// The device outcomes recorded so far, while the job runs and after (absent before the first is recorded).
    public var counts: JobCounts?

    public init(
        state: String, entry: String? = nil, app: String? = nil, createdAt: String? = nil, report: JobReport? = nil,
        reason: String? = nil, detail: String? = nil
    ) {
        self.state = state
        self.entry = entry
        self.app = app
        self.createdAt = createdAt
        self.report = report
        self.reason = reason
        self.detail = detail
    }

    /// Stream ids `ms-seq` compared numerically.
    public static func isAfter(_ a: String, _ b: String) -> Bool {
        func parts(_ s: String) -> (UInt64, UInt64) {
            let p = s.split(separator: "-")
            return (UInt64(p.first ?? "0") ?? 0, p.count > 1 ? UInt64(p[1]) ?? 0 : 0)
        }
        return parts(a) > parts(b)
    }
}

/// A job's live counts: each device outcome recorded so far, per platform and per failure reason, the tokens
/// removed, and the accepted and opened pushes per minute. Written in the transaction that records the outcomes, so
/// exact while the job runs and after a worker's crash; a campaign's shards count into it.
public struct JobCounts: Sendable, Encodable, Equatable {
    public var accepted: Int64 = 0
    public var rejected: Int64 = 0
    public var failed: Int64 = 0
    public var quotaExceeded: Int64 = 0
    public var expired: Int64 = 0
    public var tokensRemoved: Int64 = 0
    /// Users the job skipped: held by a frequency cap (in-app only), or with no device for the job's app.
    public var capped: Int64 = 0
    public var noDevice: Int64 = 0
    /// Everyone the job has decided about so far: the devices with an outcome and the users skipped. It grows as the
    /// job resolves its recipients and is final with its report.
    public var audience: Int64 = 0
    /// `ios`, `android`: the same outcomes of that platform's devices.
    public var byPlatform: [String: [String: Int64]] = [:]
    /// Rejected and failed pushes by the provider's reason (`Unregistered`, `UNAVAILABLE`, …).
    public var byReason: [String: Int64] = [:]
    /// One entry per minute (UTC, oldest first) in which a push was accepted or opened.
    public var perMinute: [Minute] = []

    /// A local-time job's outcomes per wave (the wave's instant, oldest first): absent for other jobs.
    public var perWave: [Wave]?

    public struct Wave: Sendable, Encodable, Equatable {
        /// The wave's instant, RFC 3339 in UTC: when its devices' local time came.
        public var wave: String
        /// Outcome → devices (`accepted`, `rejected`, `failed`, `quotaExceeded`, `expired`).
        public var outcomes: [String: Int64]
    }

    public struct Minute: Sendable, Encodable, Equatable {
        /// The minute's start, RFC 3339 in UTC.
        public var minute: String
        public var accepted: Int64
        public var opened: Int64

        public init(minute: String, accepted: Int64, opened: Int64) {
            self.minute = minute
            self.accepted = accepted
            self.opened = opened
        }
    }

    public init() {}

    /// From the counts hash's fields (docs/redis-keys.md): nil when it holds no device outcome yet. Fields it does
    /// not know (engagement's, read on their own) are left alone.
    public init?(fields: [(String, String)]) {
        var minutes: [Int64: (accepted: Int64, opened: Int64)] = [:]
        var waves: [Int64: [String: Int64]] = [:]
        var any = false
        for (field, value) in fields {
            guard let n = Int64(value) else { continue }
            let parts = field.split(separator: ":", maxSplits: 1)
            if parts.count == 2, let minute = Int64(parts[1]), parts[0] == "accepted" || parts[0] == "opened" {
                if parts[0] == "accepted" { minutes[minute, default: (0, 0)].accepted += n }
                if parts[0] == "opened" { minutes[minute, default: (0, 0)].opened += n }
                continue
            }
            if parts.count == 2, parts[0] == "wave" {
                let waveParts = parts[1].split(separator: ":", maxSplits: 1)
                if waveParts.count == 2, let instant = Int64(waveParts[0]) {
                    waves[instant, default: [:]][String(waveParts[1]), default: 0] += n
                }
                continue
            }
            if parts.count == 2, parts[0] == "reason" {
                byReason[String(parts[1]), default: 0] += n
                continue
            }
            if parts.count == 2, Platform(rawValue: String(parts[0])) != nil {
                byPlatform[String(parts[0]), default: [:]][String(parts[1]), default: 0] += n
                continue
            }
            switch field {
            case "accepted": accepted = n
            case "rejected": rejected = n
            case "failed": failed = n
            case "quotaExceeded": quotaExceeded = n
            case "expired": expired = n
            case "tokensRemoved": tokensRemoved = n
            case "capped": capped = n
            case "noDevice": noDevice = n
            default: continue
            }
            any = true
        }
        if !any { return nil }
        audience = accepted + rejected + failed + quotaExceeded + expired + capped + noDevice
        if !waves.isEmpty {
            perWave = waves.keys.sorted().map {
                Wave(wave: RFC3339.format(Date(timeIntervalSince1970: Double($0))), outcomes: waves[$0] ?? [:])
            }
        }
        perMinute = minutes.keys.sorted().map {
            Minute(
                minute: RFC3339.format(Date(timeIntervalSince1970: Double($0) * 60)),
                accepted: minutes[$0]?.accepted ?? 0,
                opened: minutes[$0]?.opened ?? 0)
        }
    }
}

/// Jobs accepted through the API: their state and their debug events.
public protocol JobStatusReader: Sendable {
    /// nil when `org` submitted no job `job` (or its record expired).
    func status(org: OrgID, job: JobID) async throws -> JobStatus?
    /// `DELETE /v1/jobs/{id}`: cancels a job of `org` that has not finished. A parked job leaves the schedule and
    /// nothing is sent; a queued or running one is marked, and its worker sends nothing more after the chunk it is
    /// on, then publishes a report with `status: cancelled`.
    func cancel(org: OrgID, job: JobID, now: Date) async throws -> JobCancellation
    /// `POST /v1/jobs/{id}/pause`: marks a job of `org` that has not finished paused. Its worker sends nothing more
    /// after the credits or throttle slice it is on, records what went and parks it; a queued or scheduled job is
    /// parked when it comes up.
    func pause(org: OrgID, job: JobID, now: Date) async throws -> JobSteerAnswer
    /// `POST /v1/jobs/{id}/resume`: lifts the pause and brings every parked part back to the stream (due `now`); a
    /// worker then sends each device not yet recorded, once, at its throttle.
    func resume(org: OrgID, job: JobID, now: Date) async throws -> JobSteerAnswer
    /// The job's debug events, oldest first; nil when `org` has no such job (an empty list: known, no events).
    func events(org: OrgID, job: JobID) async throws -> [DebugEvent]?
}

/// The device registry as the API changes it: one user's devices in one org and app.
public protocol DeviceStore: Sendable {
    /// Registers (or refreshes) a device; a token registered to another user moves to this one.
    func register(_ device: DeviceImportRecord, now: Date) async throws
    /// Removes `user`'s token; false when the token is unknown or belongs to someone else.
    func unregister(org: OrgID, app: AppName, user: UserID, platform: Platform, token: DeviceToken) async throws
        -> Bool
    /// The user's devices in `app`.
    func devices(org: OrgID, app: AppName, user: UserID) async throws -> [DeviceRecord]
    /// Removes a token whoever holds it (its provider said it is dead); false when it was not registered.
    func remove(org: OrgID, app: AppName, platform: Platform, token: DeviceToken) async throws -> Bool
    /// The `limit` devices of `app` registered (or registered again) most recently, newest first.
    func recent(org: OrgID, app: AppName, limit: Int) async throws -> [DeviceRecord]
    /// Up to `limit` devices of `app` whose token ends with `suffix` (a support lookup by the characters a user
    /// reads off a log or a delivery history). It reads the app's token index a page at a time, at most
    /// `DeviceLookup.maxScanned` tokens: a suffix found past them is not found.
    func withTokenSuffix(org: OrgID, app: AppName, suffix: String, limit: Int) async throws -> [DeviceRecord]
}

/// The bounds of a lookup by token suffix.
public enum DeviceLookup {
    /// The shortest suffix searched for (shorter ones match too many tokens to mean one device).
    public static let minSuffix = 6
    /// Tokens read at most per lookup.
    public static let maxScanned = 1_000_000
    /// Tokens read per step.
    public static let pageSize = 1_000
}

/// An org's custom notification types, its channel switches per type, and each app's settings per type.
/// (The worker reads the same data through `NotificationTypeStore.policy`.)
public protocol NotificationTypeRepository: Sendable {
    /// Every type of `org`, by id.
    func types(org: OrgID) async throws -> [NotificationType]
    /// One type, nil when the org does not define it.
    func type(org: OrgID, id: String) async throws -> NotificationType?
    func setType(org: OrgID, _ type: NotificationType) async throws
    func removeType(org: OrgID, id: String) async throws
    /// The (type, app) settings of `app`, by type id.
    func settings(org: OrgID, app: AppName) async throws -> [String: NotificationAppSetting]
    /// Merges the (type, app) setting; nil fields keep their value.
    func setSetting(org: OrgID, app: AppName, typeID: String, enabled: Bool?, pushEnabled: Bool?) async throws
    /// Back to the defaults.
    func resetSetting(org: OrgID, app: AppName, typeID: String) async throws
    /// The org's channel switches by type id; absent types take the defaults.
    func orgSettings(org: OrgID) async throws -> [String: NotificationOrgSetting]
    /// Merges `change` into the type's switches and answers what is stored.
    func setOrgSetting(org: OrgID, typeID: String, _ change: NotificationOrgSetting) async throws
        -> NotificationOrgSetting
    func resetOrgSetting(org: OrgID, typeID: String) async throws
    /// The type `typeID` and each app's setting for it (nil: the app has none), in one read; nil when the org does
    /// not define the type. What a custom notification action reads per type.
    func subscriptions(org: OrgID, typeID: String, apps: [AppName]) async throws -> [AppName: NotificationAppSetting?]?
    /// The settings of `app` that hold for all its types.
    func appNotificationSettings(org: OrgID, app: AppName) async throws -> AppNotificationSettings
    /// Merges `change` into the app's settings (nil fields keep their value) and answers what is stored.
    func setAppNotificationSettings(org: OrgID, app: AppName, _ change: AppNotificationSettings) async throws
        -> AppNotificationSettings
}

extension NotificationTypeRepository {
    /// `subscriptions` from `type` and each app's `settings` (a store that reads them in one step overrides it).
    public func subscriptions(org: OrgID, typeID: String, apps: [AppName]) async throws
        -> [AppName: NotificationAppSetting?]?
    {
        guard try await type(org: org, id: typeID) != nil else { return nil }
        var out: [AppName: NotificationAppSetting?] = [:]
        for app in apps { out[app] = .some(try await settings(org: org, app: app)[typeID]) }
        return out
    }
}

/// One user's in-app notifications as the Notifications resources read and mark them.
/// (The worker stores them through `InboxStore.deliver`.)
public protocol InboxRepository: Sendable {
    /// Newest first, at most `size`; `before` pages back, `after` keeps those newer than it.
    func list(org: OrgID, user: UserID, size: Int, before: Date?, after: Date?) async throws -> [InboxNotification]
    func notification(org: OrgID, user: UserID, id: String) async throws -> InboxNotification?
    /// Counts over every notification of the user.
    func status(org: OrgID, user: UserID) async throws -> InboxStatus
    /// Counts over the notifications whose type `includes` takes.
    func status(org: OrgID, user: UserID, includes: @escaping @Sendable (String?) -> Bool) async throws
        -> InboxStatus
    /// Answers how many notifications the mark touched.
    @discardableResult
    func mark(org: OrgID, user: UserID, _ mark: InboxMark) async throws -> Int
}

/// An org's hourly push quota as the API shows and charges it (test pushes).
public protocol QuotaLedger: Sendable {
    /// This hour's limit and use, per platform.
    func usage(org: OrgID) async throws -> [QuotaUsage]
    func charge(org: OrgID, platform: Platform, count: Int) async throws -> QuotaGrant
    /// Settles this hour's charge: `delivered` stays charged, `refunded` is given back.
    func settle(org: OrgID, platform: Platform, delivered: Int, refunded: Int) async throws
}

/// Where a page of `GET /v1/jobs` ends: the last job it listed, by creation time (milliseconds since 1970) and id.
/// The list is ordered newest first, jobs created in the same millisecond by id, descending (as Redis orders equal
/// scores in `ZREVRANGEBYSCORE`); the next page starts strictly after this one. Written as `<millis>:<job id>`,
/// which clients treat as opaque.
public struct JobListCursor: Sendable, Hashable, CustomStringConvertible {
    public var createdAtMillis: Int64
    public var job: JobID

    public init(createdAtMillis: Int64, job: JobID) {
        self.createdAtMillis = createdAtMillis
        self.job = job
    }

    /// The cursor a page's `nextCursor` wrote; nil when `text` is not one (a 400 naming `cursor`).
    public init?(_ text: String) {
        guard let colon = text.utf8.firstIndex(of: UInt8(ascii: ":")) else { return nil }
        let digits = text[..<colon]
        let id = text[text.index(after: colon)...]
        guard !digits.isEmpty, digits.utf8.count <= 15, digits.utf8.allSatisfy({ $0 >= 48 && $0 <= 57 }),
            let millis = Int64(digits), !id.isEmpty, id.utf8.count <= 128
        else { return nil }
        createdAtMillis = millis
        job = JobID(String(id))
    }

    public var description: String { "\(createdAtMillis):\(job.rawValue)" }

    /// True when a job created at `millis` with id `job` comes after this cursor in the list's order (older, or as
    /// old with a smaller id).
    public func precedes(millis: Int64, job other: JobID) -> Bool {
        if millis != createdAtMillis { return millis < createdAtMillis }
        return other.rawValue.utf8.lexicographicallyPrecedes(job.rawValue.utf8)
    }
}

/// What `GET /v1/jobs` asks for: at most `limit` jobs of one org, newest first, created at or after `since`, in
/// `state` (one of `JobListQuery.states`), after `cursor`.
public struct JobListQuery: Sendable, Hashable {
    /// The states a job can be in (`JobStatus`).
    public static let states = ["queued", "running", "scheduled", "paused", "cancelled", "done", "dead-lettered"]
    /// A page's size when the request does not say, and the most it may ask for.
    public static let defaultLimit = 20
    public static let maxLimit = 100

    public var state: String?
    public var since: Date?
    public var limit: Int
    public var cursor: JobListCursor?

    public init(
        state: String? = nil, since: Date? = nil, limit: Int = JobListQuery.defaultLimit,
        cursor: JobListCursor? = nil
    ) {
        self.state = state
        self.since = since
        self.limit = limit
        self.cursor = cursor
    }
}

/// One page of `GET /v1/jobs`: the jobs in order, and where the next page starts (nil: no older job is left).
/// With a `state` filter a page may hold fewer than `limit` jobs (a store looks at a bounded number of jobs per
/// page) and still have a next one.
public struct JobListPage: Sendable {
    public var jobs: [JobStatus]
    public var next: JobListCursor?
    public init(jobs: [JobStatus], next: JobListCursor?) {
        self.jobs = jobs
        self.next = next
    }
}

/// One device's recorded outcome, as the CSV export writes it.
public struct OutcomeExportRow: Sendable, Hashable {
    public var platform: Platform
    public var token: DeviceToken
    /// The user the token is registered to now (the registry's reverse index); nil when it is not registered (a
    /// token the provider reported dead has been removed, an explicit device was never registered).
    public var user: UserID?
    public var outcome: DeliveryOutcome

    public init(platform: Platform, token: DeviceToken, user: UserID?, outcome: DeliveryOutcome) {
        self.platform = platform
        self.token = token
        self.user = user
        self.outcome = outcome
    }
}

/// Where an export of one ledger has got to: the non-accepted outcomes (a hash, scanned from `scanCursor`), then
/// the accepted ones (a list of batches, from element `acceptedIndex`).
public enum OutcomeExportPosition: Sendable, Hashable {
    case start
    case nonAccepted(scanCursor: String)
    case accepted(index: Int)
}

/// One page of a ledger's outcomes and where the next starts (nil: the ledger is exhausted).
public struct OutcomeExportPage: Sendable {
    public var rows: [OutcomeExportRow]
    public var next: OutcomeExportPosition?
    public init(rows: [OutcomeExportRow], next: OutcomeExportPosition?) {
        self.rows = rows
        self.next = next
    }
}

/// `GET /v1/jobs` and the per-device CSV export of `GET /v1/jobs/{id}/outcomes`: an org's jobs accepted through the
/// API, and the outcome ledgers of one of them, page by page.
public protocol JobHistoryReader: Sendable {
    /// A page of `org`'s jobs, newest first; only jobs of `org` are ever read.
    func jobs(org: OrgID, query: JobListQuery) async throws -> JobListPage
    /// The jobs whose ledgers hold `job`'s device outcomes: the job itself and, for a campaign split into shards,
    /// each shard's job (`<job>.s<i>`), in shard order.
    func outcomeLedgers(org: OrgID, job: JobID) async throws -> [JobID]
    /// One page of the ledger of `ledger` (a job or shard of `org`) from `position`; users are looked up in `app`'s
    /// registry when it is given.
    func outcomes(org: OrgID, ledger: JobID, app: AppName?, from position: OutcomeExportPosition) async throws
        -> OutcomeExportPage
}
