import Foundation
import VolleyCore

// In-memory twins of the API's Redis stores (VolleyStore `RedisAPIStores.swift`): the same protocols, the same
// answers, no server. Each keeps its state behind one lock; an outage switch makes every call throw
// `StoreUnavailable`, as a lost connection would.

/// One value behind one lock.
final class Locked<Value>: @unchecked Sendable {
    private var value: Value
    private let lock = NSLock()
    init(_ value: Value) { self.value = value }
    func withLock<T>(_ body: (inout Value) throws -> T) rethrows -> T {
        lock.lock()
        defer { lock.unlock() }
        return try body(&value)
    }
}

/// A switch that makes a store fail, shared by the stores of one test.
public final class StoreOutageSwitch: Sendable {
    private let on = Locked(false)
    public init() {}
    public var isOn: Bool {
        get { on.withLock { $0 } }
        set { on.withLock { $0 = newValue } }
    }
    func check() throws { if isOn { throw StoreUnavailable("the in-memory store is failing on purpose") } }
}

/// API-key records and token buckets; the buckets refill on `clock` as the Redis script does on Redis's TIME.
public final class InMemoryCredentialStore: CredentialStore, APIKeyRegistry {
    private struct Bucket {
        var tokens: Double
        var at: Date
    }
    private let keys = Locked<[String: String]>([:])
    private let buckets = Locked<[String: Bucket]>([:])
    private let clock: any WallClock
    public let outage: StoreOutageSwitch

    public init(clock: any WallClock = SystemClock(), outage: StoreOutageSwitch = StoreOutageSwitch()) {
        self.clock = clock
        self.outage = outage
    }

    public func admit(subject: String, keyID: String?, bucket: RateBucket) async throws -> CredentialAdmission? {
        try outage.check()
        var record: String?
        if let keyID {
            guard let found = keys.withLock({ $0[keyID] }) else { return nil }
            record = found
        }
        let rate = bucket.requestsPerSecond
        if rate <= 0 { return CredentialAdmission(record: record, retryAfterMilliseconds: 0) }
        let now = clock.now()
        let wait: Int = buckets.withLock { all in
            var b = all[subject] ?? Bucket(tokens: Double(bucket.burst), at: now)
            if now > b.at { b.tokens = min(Double(bucket.burst), b.tokens + now.timeIntervalSince(b.at) * rate) }
            b.at = max(b.at, now)
            var wait = 0
            if b.tokens >= 1 {
                b.tokens -= 1
            } else {
                wait = Int(((1 - b.tokens) * 1000 / rate).rounded(.up))
            }
            all[subject] = b
            return wait
        }
        return CredentialAdmission(record: record, retryAfterMilliseconds: wait)
    }

    public func ping() async throws { try outage.check() }

    public func put(id: String, record: String) throws { keys.withLock { $0[id] = record } }
    public func records() throws -> [String: String] { keys.withLock { $0 } }
    public func record(id: String) throws -> String? { keys.withLock { $0[id] } }
    public func remove(id: String) throws -> Bool { keys.withLock { $0.removeValue(forKey: id) != nil } }
}

/// The job stream and the API's job records: submissions, plain enqueues, and the status a reader sees (a job is
/// `queued` until a test moves it on with `setStatus`).
public final class InMemoryJobs: JobSubmitter, JobStatusReader {
    public struct Entry: Sendable, Hashable {
        public var id: String
        /// The job's JSON as the worker would decode it.
        public var json: String
    }
    private struct Record {
        var digest: String
        var status: JobStatus
        /// Submission order: the list's "created at" (newest first) without reading clocks.
        var order: Int64 = 0
    }
    private struct State {
        var entries: [Entry] = []
        var records: [String: Record] = [:]
        var events: [String: [DebugEvent]] = [:]
        var next = 0

        mutating func add(_ json: String) -> String {
            next += 1
            let id = "\(1_800_000_000_000 + next)-0"
            entries.append(Entry(id: id, json: json))
            return id
        }
    }
    private let state = Locked(State())
    public let outage: StoreOutageSwitch

    public init(outage: StoreOutageSwitch = StoreOutageSwitch()) { self.outage = outage }

    private static func key(_ org: OrgID, _ job: JobID) -> String { "\(org.rawValue)\u{1}\(job.rawValue)" }

    public func submit(
        org: OrgID, job: JobID, app: AppName, digest: String, entry: String, createdAt: String
    ) async throws -> JobSubmission {
        try outage.check()
        return state.withLock { s in
            if let r = s.records[Self.key(org, job)] {
                return r.digest == digest ? .replayed(entry: r.status.entry ?? "") : .conflict
            }
            let id = s.add(entry)
            var status = JobStatus(state: "queued", entry: id, app: app.rawValue, createdAt: createdAt)
            status.id = job.rawValue
            s.records[Self.key(org, job)] = Record(digest: digest, status: status, order: Int64(s.next))
            return .accepted(entry: id)
        }
    }

    public func enqueue(_ job: PushJob) async throws -> String {
        try outage.check()
        let e = JSONEncoder()
        e.outputFormatting = [.sortedKeys]
        let json = String(decoding: try e.encode(job), as: UTF8.self)
        return state.withLock { $0.add(json) }
    }

    public func status(org: OrgID, job: JobID) async throws -> JobStatus? {
        try outage.check()
        return state.withLock { $0.records[Self.key(org, job)]?.status }
    }

    /// A job not finished becomes `cancelled` (it keeps `dueAt` when it was scheduled).
    public func cancel(org: OrgID, job: JobID, now: Date) async throws -> JobCancellation {
        try outage.check()
        return state.withLock { s in
            guard var r = s.records[Self.key(org, job)] else { return .unknown }
            if r.status.state == "done" || r.status.state == "dead-lettered" { return .finished(r.status) }
            r.status.state = "cancelled"
            s.records[Self.key(org, job)] = r
            return .cancelled(r.status)
        }
    }

    /// A job not finished or cancelled becomes `paused`.
    public func pause(org: OrgID, job: JobID, now: Date) async throws -> JobSteerAnswer {
        try outage.check()
        return state.withLock { s in
            guard var r = s.records[Self.key(org, job)] else { return .unknown }
            if ["done", "dead-lettered", "cancelled"].contains(r.status.state) { return .refused(r.status) }
            r.status.state = "paused"
            s.records[Self.key(org, job)] = r
            return .changed(r.status)
        }
    }

    /// A paused job goes back to `queued`.
    public func resume(org: OrgID, job: JobID, now: Date) async throws -> JobSteerAnswer {
        try outage.check()
        return state.withLock { s in
            guard var r = s.records[Self.key(org, job)] else { return .unknown }
            if r.status.state != "paused" { return .refused(r.status) }
            r.status.state = "queued"
            s.records[Self.key(org, job)] = r
            return .changed(r.status)
        }
    }

    /// Sets a job's live counts, as a worker's outcomes would (tests of the pages that show them).
    public func setCounts(org: OrgID, job: JobID, jobState: String, counts: JobCounts?) {
        state.withLock { s in
            s.records[Self.key(org, job)]?.status.state = jobState
            s.records[Self.key(org, job)]?.status.counts = counts
        }
    }

    public func events(org: OrgID, job: JobID) async throws -> [DebugEvent]? {
        try outage.check()
        return state.withLock { s in
            if let events = s.events[Self.key(org, job)], !events.isEmpty { return events }
            return s.records[Self.key(org, job)] == nil ? nil : []
        }
    }

    /// Every entry on the stream, oldest first.
    public var entries: [Entry] { state.withLock { $0.entries } }

    /// The jobs on the stream, decoded, oldest first (entries that are not jobs are left out).
    public func jobs() -> [PushJob] {
        entries.compactMap { try? JSONDecoder().decode(PushJob.self, from: Data($0.json.utf8)) }
    }

    /// Changes what `status` answers for a submitted job (a worker took it, finished it, dead-lettered it).
    public func setStatus(org: OrgID, job: JobID, _ change: (inout JobStatus) -> Void) {
        state.withLock { s in
            if var r = s.records[Self.key(org, job)] {
                change(&r.status)
                s.records[Self.key(org, job)] = r
            }
        }
    }

    public func record(org: OrgID, job: JobID, events: [DebugEvent]) {
        state.withLock { $0.events[Self.key(org, job), default: []] += events }
    }
}

/// The device registry: one record per (org, app, token), owned by one user.
public final class InMemoryDevices: DeviceStore {
    private struct Key: Hashable {
        var org: OrgID
        var app: AppName
        var platform: Platform
        var token: DeviceToken
    }
    private let devices = Locked<[Key: DeviceRecord]>([:])
    public let outage: StoreOutageSwitch

    public init(outage: StoreOutageSwitch = StoreOutageSwitch()) { self.outage = outage }

    public func register(_ device: DeviceImportRecord, now: Date) async throws {
        try outage.check()
        let record = DeviceRecord(
            platform: device.platform, token: device.token,
            environment: device.platform == .ios ? (device.environment ?? .production) : nil, locale: device.locale,
            user: device.user, registeredAt: now, lastSeenAt: now, rsaPublicKey: device.rsaPublicKey,
            cipherName: device.rsaPublicKey == nil ? nil : device.cipherName, timeZone: device.timeZone)
        devices.withLock {
            $0[Key(org: device.org, app: device.app, platform: device.platform, token: device.token)] = record
        }
    }

    public func unregister(
        org: OrgID, app: AppName, user: UserID, platform: Platform, token: DeviceToken
    ) async throws -> Bool {
        try outage.check()
        let key = Key(org: org, app: app, platform: platform, token: token)
        return devices.withLock { all in
            guard all[key]?.user == user else { return false }
            all[key] = nil
            return true
        }
    }

    public func devices(org: OrgID, app: AppName, user: UserID) async throws -> [DeviceRecord] {
        try outage.check()
        return devices.withLock { all in
            all.filter { $0.key.org == org && $0.key.app == app && $0.value.user == user }.map(\.value)
                .sorted(by: DeviceRecord.newestFirst)
        }
    }

    public func remove(org: OrgID, app: AppName, platform: Platform, token: DeviceToken) async throws -> Bool {
        try outage.check()
        let key = Key(org: org, app: app, platform: platform, token: token)
        return devices.withLock { $0.removeValue(forKey: key) != nil }
    }

    public func withTokenSuffix(org: OrgID, app: AppName, suffix: String, limit: Int) async throws -> [DeviceRecord] {
        try outage.check()
        return devices.withLock { all in
            Array(
                all.filter { $0.key.org == org && $0.key.app == app && $0.key.token.rawValue.hasSuffix(suffix) }
                    .map(\.value).sorted(by: DeviceRecord.newestFirst).prefix(limit))
        }
    }

    public func recent(org: OrgID, app: AppName, limit: Int) async throws -> [DeviceRecord] {
        try outage.check()
        return devices.withLock { all in
            Array(
                all.filter { $0.key.org == org && $0.key.app == app }.map(\.value).sorted(by: DeviceRecord.newestFirst)
                    .prefix(limit))
        }
    }
}

/// Custom notification types, org channel switches and app settings; `policy` decides as the worker's store does.
public final class InMemoryNotificationTypes: NotificationTypeRepository, NotificationTypeStore {
    private struct State {
        var types: [OrgID: [String: NotificationType]] = [:]
        var settings: [String: [String: NotificationAppSetting]] = [:]
        var orgSettings: [OrgID: [String: NotificationOrgSetting]] = [:]
        var appSettings: [String: AppNotificationSettings] = [:]
    }
    private let state = Locked(State())
    public let outage: StoreOutageSwitch

    public init(outage: StoreOutageSwitch = StoreOutageSwitch()) { self.outage = outage }

    private static func appKey(_ org: OrgID, _ app: AppName) -> String { "\(org.rawValue)\u{1}\(app.rawValue)" }

    public func types(org: OrgID) async throws -> [NotificationType] {
        try outage.check()
        return state.withLock { ($0.types[org] ?? [:]).values.sorted { $0.id < $1.id } }
    }
    public func type(org: OrgID, id: String) async throws -> NotificationType? {
        try outage.check()
        return state.withLock { $0.types[org]?[id] }
    }
    public func setType(org: OrgID, _ type: NotificationType) async throws {
        try outage.check()
        state.withLock { $0.types[org, default: [:]][type.id] = type }
    }
    public func removeType(org: OrgID, id: String) async throws {
        try outage.check()
        state.withLock { _ = $0.types[org]?.removeValue(forKey: id) }
    }
    public func settings(org: OrgID, app: AppName) async throws -> [String: NotificationAppSetting] {
        try outage.check()
        return state.withLock { $0.settings[Self.appKey(org, app)] ?? [:] }
    }
    public func setSetting(org: OrgID, app: AppName, typeID: String, enabled: Bool?, pushEnabled: Bool?)
        async throws
    {
        try outage.check()
        state.withLock { s in
            var current = s.settings[Self.appKey(org, app)]?[typeID] ?? NotificationAppSetting()
            if let enabled { current.enabled = enabled }
            if let pushEnabled { current.pushEnabled = pushEnabled }
            s.settings[Self.appKey(org, app), default: [:]][typeID] = current
        }
    }
    public func resetSetting(org: OrgID, app: AppName, typeID: String) async throws {
        try outage.check()
        state.withLock { _ = $0.settings[Self.appKey(org, app)]?.removeValue(forKey: typeID) }
    }
    public func orgSettings(org: OrgID) async throws -> [String: NotificationOrgSetting] {
        try outage.check()
        return state.withLock { $0.orgSettings[org] ?? [:] }
    }
    public func setOrgSetting(org: OrgID, typeID: String, _ change: NotificationOrgSetting) async throws
        -> NotificationOrgSetting
    {
        try outage.check()
        return state.withLock { s in
            var current = s.orgSettings[org]?[typeID] ?? NotificationOrgSetting()
            if let v = change.desktopEnabled { current.desktopEnabled = v }
            if let v = change.emailEnabled { current.emailEnabled = v }
            if let v = change.mobileEnabled { current.mobileEnabled = v }
            if let v = change.slackEnabled { current.slackEnabled = v }
            s.orgSettings[org, default: [:]][typeID] = current
            return current
        }
    }
    public func resetOrgSetting(org: OrgID, typeID: String) async throws {
        try outage.check()
        state.withLock { _ = $0.orgSettings[org]?.removeValue(forKey: typeID) }
    }

    public func appNotificationSettings(org: OrgID, app: AppName) async throws -> AppNotificationSettings {
        try outage.check()
        return state.withLock { $0.appSettings[Self.appKey(org, app)] ?? AppNotificationSettings() }
    }
    public func setAppNotificationSettings(org: OrgID, app: AppName, _ change: AppNotificationSettings) async throws
        -> AppNotificationSettings
    {
        try outage.check()
        return state.withLock { s in
            let stored = (s.appSettings[Self.appKey(org, app)] ?? AppNotificationSettings()).merging(change)
            s.appSettings[Self.appKey(org, app)] = stored
            return stored
        }
    }

    public func fullContent(org: OrgID, app: AppName) throws -> Bool {
        try outage.check()
        return state.withLock { $0.appSettings[Self.appKey(org, app)]?.fullContent ?? false }
    }

    public func policy(org: OrgID, app: AppName, typeID: String?) throws -> DeliveryPolicy {
        try outage.check()
        guard let typeID else { return .pushAndInbox }
        return state.withLock { s in
            var type = s.types[org]?[typeID]
            if let t = type, let orgSetting = s.orgSettings[org]?[typeID] {
                type?.mobile = orgSetting.effective(for: t).mobile
            }
            return DeliveryPolicy.decide(
                typeID: typeID, type: type, setting: s.settings[Self.appKey(org, app)]?[typeID], app: app)
        }
    }
}

/// Each user's in-app notifications: `deliver` stores them as the worker does (unread, unseen), at millisecond
/// precision like Redis's scores, newest kept first up to the retention's count.
public final class InMemoryInbox: InboxRepository {
    private struct Entry {
        var content: InboxContent
        var created: Date
        var read = false
        var seen = false
    }
    /// By "org \u{1} user", newest first.
    private let inboxes = Locked<[String: [Entry]]>([:])
    private let retention: InboxRetention
    public let outage: StoreOutageSwitch

    public init(retention: InboxRetention = InboxRetention(), outage: StoreOutageSwitch = StoreOutageSwitch()) {
        self.retention = retention
        self.outage = outage
    }

    private static func key(_ org: OrgID, _ user: UserID) -> String { "\(org.rawValue)\u{1}\(user.rawValue)" }
    private static func ms(_ d: Date) -> Date {
        Date(timeIntervalSince1970: (d.timeIntervalSince1970 * 1000).rounded() / 1000)
    }

    private static func notification(_ e: Entry) -> InboxNotification {
        InboxNotification(
            id: e.content.id, type: e.content.type, title: e.content.title, body: e.content.body,
            target: e.content.target, targetPageRef: e.content.targetPageRef, createdAt: e.created, read: e.read,
            seen: e.seen)
    }

    /// Stores `content` in each user's inbox, unread and unseen (a repeat of one id replaces it).
    public func deliver(org: OrgID, content: InboxContent, to users: [UserID]) {
        inboxes.withLock { all in
            for user in users {
                var list = all[Self.key(org, user)] ?? []
                list.removeAll { $0.content.id == content.id }
                list.append(Entry(content: content, created: Self.ms(content.createdAt)))
                list.sort { ($0.created, $0.content.id) > ($1.created, $1.content.id) }
                all[Self.key(org, user)] = Array(list.prefix(retention.maxCount))
            }
        }
    }

    public func list(org: OrgID, user: UserID, size: Int, before: Date?, after: Date?) async throws
        -> [InboxNotification]
    {
        try outage.check()
        let before = before.map(Self.ms)
        let after = after.map(Self.ms)
        return inboxes.withLock { all in
            (all[Self.key(org, user)] ?? [])
                .filter { e in before.map { e.created < $0 } ?? true && after.map { e.created > $0 } ?? true }
                .prefix(max(1, size)).map(Self.notification)
        }
    }

    public func notification(org: OrgID, user: UserID, id: String) async throws -> InboxNotification? {
        try outage.check()
        return inboxes.withLock { all in
            (all[Self.key(org, user)] ?? []).first { $0.content.id == id }.map(Self.notification)
        }
    }

    public func status(org: OrgID, user: UserID) async throws -> InboxStatus {
        try await status(org: org, user: user, includes: { _ in true })
    }

    public func status(org: OrgID, user: UserID, includes: @escaping @Sendable (String?) -> Bool) async throws
        -> InboxStatus
    {
        try outage.check()
        let list = inboxes.withLock { $0[Self.key(org, user)] ?? [] }
        var st = InboxStatus(unreadCount: 0, unseenCount: 0, oldestUnread: nil, oldestUnseen: nil, lastActivity: nil)
        for e in list where includes(e.content.type) {
            if !e.read {
                st.unreadCount += 1
                st.oldestUnread = min(st.oldestUnread ?? e.created, e.created)
            }
            if !e.seen {
                st.unseenCount += 1
                st.oldestUnseen = min(st.oldestUnseen ?? e.created, e.created)
            }
            st.lastActivity = max(st.lastActivity ?? e.created, e.created)
        }
        return st
    }

    public func mark(org: OrgID, user: UserID, _ mark: InboxMark) async throws -> Int {
        try outage.check()
        return inboxes.withLock { all in
            var list = all[Self.key(org, user)] ?? []
            var touched = 0
            for i in list.indices {
                let selected: Bool
                switch mark.selection {
                case .ids(let ids): selected = ids.contains(list[i].content.id)
                case .before(let date): selected = list[i].created < Self.ms(date)
                }
                guard selected else { continue }
                touched += 1
                if let read = mark.read { list[i].read = read }
                if let seen = mark.seen { list[i].seen = seen }
            }
            all[Self.key(org, user)] = list
            return touched
        }
    }
}

/// An hourly quota per org and platform on `clock`'s hour, with the configured limits.
public final class InMemoryQuota: QuotaLedger {
    private let used = Locked<[String: Int]>([:])
    private let limits: QuotaLimits
    private let clock: any WallClock
    public let outage: StoreOutageSwitch

    public init(
        limits: QuotaLimits = QuotaLimits(), clock: any WallClock = SystemClock(),
        outage: StoreOutageSwitch = StoreOutageSwitch()
    ) {
        self.limits = limits
        self.clock = clock
        self.outage = outage
    }

    private func key(_ org: OrgID, _ platform: Platform, _ hour: QuotaHour) -> String {
        "\(org.rawValue)\u{1}\(platform.rawValue)\u{1}\(hour.index)"
    }

    public func usage(org: OrgID) async throws -> [QuotaUsage] {
        try outage.check()
        let hour = QuotaHour(containing: clock.now())
        return [Platform.ios, .android].map { p in
            QuotaUsage(
                platform: p, hour: hour.label, limit: limits[p],
                used: used.withLock { $0[key(org, p, hour)] ?? 0 }, pending: 0)
        }
    }

    public func charge(org: OrgID, platform: Platform, count: Int) async throws -> QuotaGrant {
        try outage.check()
        let hour = QuotaHour(containing: clock.now())
        let limit = limits[platform]
        let granted = used.withLock { all in
            let now = all[key(org, platform, hour)] ?? 0
            let granted = max(0, min(count, limit - now))
            all[key(org, platform, hour)] = now + granted
            return granted
        }
        return QuotaGrant(granted: granted, denied: count - granted, pending: 0, hour: hour, limit: limit)
    }

    public func settle(org: OrgID, platform: Platform, delivered: Int, refunded: Int) async throws {
        try outage.check()
        let hour = QuotaHour(containing: clock.now())
        used.withLock { all in all[key(org, platform, hour)] = max(0, (all[key(org, platform, hour)] ?? 0) - refunded) }
    }
}

/// Notification templates per org, with the Redis store's limit check and millisecond timestamps.
/// Users' attributes in memory, for handler tests.
public final class InMemoryUserAttributeStore: UserAttributeStore {
    private let state = Locked<[String: [String: String]]>([:])
    public init() {}
    public func attributes(org: OrgID, user: UserID) async throws -> [String: String]? {
        state.withLock { $0["\(org.rawValue)\u{1F}\(user.rawValue)"] }
    }
    public func setAttributes(org: OrgID, user: UserID, _ attributes: [String: String]) async throws {
        state.withLock { $0["\(org.rawValue)\u{1F}\(user.rawValue)"] = attributes.isEmpty ? nil : attributes }
    }
}

public final class InMemoryTemplateStore: TemplateStore, TemplateReader {
    private let state = Locked<[OrgID: [String: StoredTemplate]]>([:])
    public let outage: StoreOutageSwitch

    public init(outage: StoreOutageSwitch = StoreOutageSwitch()) { self.outage = outage }

    public func put(org: OrgID, id: String, notification: JSONValue, now: Date, maxCount: Int) async throws
        -> TemplatePut
    {
        try outage.check()
        let at = Date(timeIntervalSince1970: (now.timeIntervalSince1970 * 1000).rounded(.down) / 1000)
        return state.withLock { all in
            var templates = all[org] ?? [:]
            if let old = templates[id] {
                let t = StoredTemplate(id: id, notification: notification, createdAt: old.createdAt, updatedAt: at)
                templates[id] = t
                all[org] = templates
                return .replaced(t)
            }
            guard templates.count < maxCount else { return .limitReached }
            let t = StoredTemplate(id: id, notification: notification, createdAt: at, updatedAt: at)
            templates[id] = t
            all[org] = templates
            return .created(t)
        }
    }

    public func template(org: OrgID, id: String) async throws -> StoredTemplate? {
        try outage.check()
        return state.withLock { $0[org]?[id] }
    }

    public func delete(org: OrgID, id: String) async throws -> Bool {
        try outage.check()
        return state.withLock { $0[org]?.removeValue(forKey: id) != nil }
    }

    public func list(org: OrgID) async throws -> [StoredTemplate] {
        try outage.check()
        return state.withLock { ($0[org] ?? [:]).values.sorted { $0.id < $1.id } }
    }

    public func notification(org: OrgID, templateID: String) throws -> JSONValue? {
        try outage.check()
        return state.withLock { $0[org]?[templateID]?.notification }
    }
}

/// An org's schedules, as `RedisSchedules` keeps them: created once per id, at most `Schedule.maxPerOrg`.
public final class InMemoryScheduleStore: ScheduleStore {
    private let state = Locked<[OrgID: [String: ScheduleState]]>([:])
    public init() {}

    public func create(_ schedule: Schedule, now: Date) async throws -> ScheduleCreation {
        state.withLock { all in
            var schedules = all[schedule.org] ?? [:]
            if schedules[schedule.id] != nil { return .exists }
            guard schedules.count < Schedule.maxPerOrg else { return .limitReached }
            let s = ScheduleState(
                schedule: schedule, paused: false, nextRunAt: schedule.recurrence.run(onOrAfter: now), lastRunJob: nil)
            schedules[schedule.id] = s
            all[schedule.org] = schedules
            return .created(s)
        }
    }

    public func list(org: OrgID) async throws -> [ScheduleState] {
        state.withLock { ($0[org] ?? [:]).values.sorted { $0.schedule.id < $1.schedule.id } }
    }

    public func schedule(org: OrgID, id: String) async throws -> ScheduleState? { state.withLock { $0[org]?[id] } }

    public func setPaused(org: OrgID, id: String, paused: Bool, now: Date) async throws -> ScheduleState? {
        state.withLock { all in
            guard var s = all[org]?[id] else { return nil }
            s.paused = paused
            if !paused { s.nextRunAt = s.schedule.recurrence.run(onOrAfter: now) }
            all[org]?[id] = s
            return s
        }
    }

    public func delete(org: OrgID, id: String) async throws -> Bool {
        state.withLock { $0[org]?.removeValue(forKey: id) != nil }
    }
}

/// User attributes per org, as the directory import stores them.
public final class InMemoryUserAttributes: UserAttributeReader {
    private let state = Locked<[OrgID: [UserID: [String: String]]]>([:])
    /// Reads made, one per call (the engine reads once per chunk of users).
    private let readCount = Locked(0)
    public init() {}

    public func set(org: OrgID, user: UserID, _ attributes: [String: String]?) {
        state.withLock { $0[org, default: [:]][user] = attributes }
    }

    public var reads: Int { readCount.withLock { $0 } }

    public func attributes(org: OrgID, users: [UserID]) throws -> [[String: String]?] {
        readCount.withLock { $0 += 1 }
        return state.withLock { all in users.map { all[org]?[$0] } }
    }
}

/// The orgs' zones set through `/v1/time-zone`.
public final class InMemoryOrgTimeZones: OrgTimeZoneRepository {
    private let state = Locked<[OrgID: String]>([:])
    public init() {}
    public func zone(org: OrgID) async throws -> String? { state.withLock { $0[org] } }
    public func setZone(org: OrgID, _ zone: String) async throws { state.withLock { $0[org] = zone } }
    public func removeZone(org: OrgID) async throws -> Bool { state.withLock { $0.removeValue(forKey: org) != nil } }
}

/// The job list, newest first, as `RedisJobHistory` answers it; no ledger is kept, so an export has no rows.
extension InMemoryJobs: JobHistoryReader {
    public func jobs(org: OrgID, query: JobListQuery) async throws -> JobListPage {
        try outage.check()
        return state.withLock { s in
            let prefix = "\(org.rawValue)\u{1}"
            var all = s.records.filter { $0.key.hasPrefix(prefix) }.map(\.value)
                .filter { query.state == nil || $0.status.state == query.state }
                .sorted { ($0.order, $0.status.id) > ($1.order, $1.status.id) }
            if let c = query.cursor {
                all = all.filter { ($0.order, $0.status.id) < (c.createdAtMillis, c.job.rawValue) }
            }
            let page = Array(all.prefix(query.limit))
            let next =
                all.count > query.limit
                ? page.last.map { JobListCursor(createdAtMillis: $0.order, job: JobID($0.status.id)) } : nil
            return JobListPage(jobs: page.map(\.status), next: next)
        }
    }

    public func outcomeLedgers(org: OrgID, job: JobID) async throws -> [JobID] { [job] }

    public func outcomes(org: OrgID, ledger: JobID, app: AppName?, from position: OutcomeExportPosition)
        async throws -> OutcomeExportPage
    {
        OutcomeExportPage(rows: [], next: nil)
    }
}
