import Foundation

/// The tuning of sync hints (`syncHints:` in the configuration; docs/tuning.md says why the defaults).
public struct SyncHintConfiguration: Sendable, Hashable {
    /// `syncHints.minIntervalSeconds`: after a push to a user for a type, later hints of that type wait, merged,
    /// until this much time has passed. FCM lets a device take one collapsible message every 3 minutes once its
    /// burst of 20 is spent.
    public var minIntervalSeconds: Double
    /// `syncHints.maxPerHour`: pushes per user and type within any rolling hour. Apple: background pushes "no more
    /// than two or three per hour"; the rest are throttled.
    public var maxPerHour: Int
    /// `syncHints.maxRecordIds`: waiting ids kept per user and type; past it the next push says `fullSync: true`.
    public var maxRecordIds: Int
    /// How long a batch taken for a push may stay unconfirmed before another worker pushes it again (the same job
    /// id, so at most once on the job stream).
    public var leaseSeconds: Double

    public static let defaultMinIntervalSeconds = 180.0
    public static let defaultMaxPerHour = 3
    public static let defaultMaxRecordIds = 100

    public init(
        minIntervalSeconds: Double = defaultMinIntervalSeconds, maxPerHour: Int = defaultMaxPerHour,
        maxRecordIds: Int = defaultMaxRecordIds, leaseSeconds: Double = 30
    ) {
        self.minIntervalSeconds = minIntervalSeconds
        self.maxPerHour = maxPerHour
        self.maxRecordIds = maxRecordIds
        self.leaseSeconds = leaseSeconds
    }
}

/// Where hints wait: one (app, user, type) of an org.
public struct SyncHintKey: Sendable, Hashable, Comparable, CustomStringConvertible {
    public var app: AppName
    public var user: UserID
    public var type: String
    public init(app: AppName, user: UserID, type: String) {
        self.app = app
        self.user = user
        self.type = type
    }

    /// The store's member name: the three parts joined by the unit separator (none of them may contain it).
    public var member: String { "\(app.rawValue)\u{1F}\(user.rawValue)\u{1F}\(type)" }

    public init?(member: String) {
        let parts = member.split(separator: "\u{1F}", omittingEmptySubsequences: false)
        guard parts.count == 3 else { return nil }
        self.init(app: AppName(String(parts[0])), user: UserID(String(parts[1])), type: String(parts[2]))
    }

    public static func < (a: SyncHintKey, b: SyncHintKey) -> Bool { a.member < b.member }
    public var description: String { "\(app)/\(user)/\(type)" }
}

/// A sync hint as `POST /v1/sync-hints` and the job stream (entry field `syncHint`) take it: `{app, users, type,
/// recordIds}`, plus `org` on the stream (the API takes the key's). The one reading of it; errors name the field.
public struct SyncHintRequest: Sendable, Hashable, JSONReadable {
    public var org: OrgID?
    public var app: AppName
    public var users: [UserID]
    public var type: String
    public var recordIds: [String]

    /// Users per call, as recipients per job (Salesforce's 500).
    public static let maxUsers = PushJob.maxRecipients
    /// Ids per call.
    public static let maxRecordIds = 1_000
    /// Bytes per record id (UTF-8): a Salesforce id is 18, a UUID 36.
    public static let maxRecordIdBytes = 128
    /// Characters of a type: it is sent as `apns-collapse-id` `sync-<type>`, at most 64 bytes.
    public static let maxTypeLength = 48
    /// Keys the body may hold.
    public static let keys: Set<String> = ["org", "app", "users", "type", "recordIds"]

    public init(org: OrgID? = nil, app: AppName, users: [UserID], type: String, recordIds: [String]) {
        self.org = org
        self.app = app
        self.users = users
        self.type = type
        self.recordIds = recordIds
    }

    public init(json: JSONValue, at path: [JSONPathComponent]) throws(JSONFieldError) {
        let o = try JSONObjectReader(json, at: path)
        if let unknown = o.members.keys.sorted().first(where: { !Self.keys.contains($0) }) {
            throw JSONFieldError(path: path + [.key(unknown)], problem: .expected("no such key"))
        }
        org = try o.string("org").map(OrgID.init)
        app = AppName(try o.required(o.string("app"), "app"))
        users = try o.required(o.strings("users"), "users").map(UserID.init)
        type = try o.required(o.string("type"), "type")
        recordIds = try o.required(o.strings("recordIds"), "recordIds")
    }

    public init(from decoder: any Decoder) throws { self = try Self.decoded(from: decoder) }

    /// The first problem, as (field, message); nil when the hint may be stored.
    public var problem: (field: String, message: String)? {
        if app.rawValue.isEmpty { return ("app", "must not be empty") }
        if users.isEmpty { return ("users", "name at least one user") }
        if users.count > Self.maxUsers { return ("users", "\(users.count) users; at most \(Self.maxUsers) per call") }
        for (i, u) in users.enumerated() where !Self.isSafeID(u.rawValue, maxLength: 128) {
            return ("users[\(i)]", "1–128 characters of letters, digits and . _ : -")
        }
        if !Self.isSafeID(type, maxLength: Self.maxTypeLength) {
            return ("type", "1–\(Self.maxTypeLength) characters of letters, digits and . _ : - (the app's own word)")
        }
        if recordIds.isEmpty { return ("recordIds", "name at least one record id") }
        if recordIds.count > Self.maxRecordIds {
            return ("recordIds", "\(recordIds.count) ids; at most \(Self.maxRecordIds) per call")
        }
        for (i, id) in recordIds.enumerated() {
            let bytes = id.utf8.count
            if bytes == 0 || bytes > Self.maxRecordIdBytes {
                return ("recordIds[\(i)]", "1–\(Self.maxRecordIdBytes) bytes of UTF-8")
            }
            if id.unicodeScalars.contains(where: { $0.value < 0x20 || $0.value == 0x7F }) {
                return ("recordIds[\(i)]", "must not contain control characters")
            }
        }
        return nil
    }

    public static func isSafeID(_ s: String, maxLength: Int) -> Bool {
        let u = s.utf8
        return !u.isEmpty && u.count <= maxLength
            && u.allSatisfy { c in
                (c >= 0x30 && c <= 0x39) || (c >= 0x41 && c <= 0x5A) || (c >= 0x61 && c <= 0x7A) || c == 0x2E
                    || c == 0x5F || c == 0x3A || c == 0x2D
            }
    }
}

/// A hint's id: the time it was accepted in milliseconds since 1970, raised by one when needed so that ids only grow
/// per user and type. An ack's `upTo` is a hint id or a time, compared on the same scale.
public struct SyncHintID: Sendable, Hashable, Comparable, CustomStringConvertible {
    public var milliseconds: Int64
    public init(milliseconds: Int64) { self.milliseconds = milliseconds }
    public static func < (a: SyncHintID, b: SyncHintID) -> Bool { a.milliseconds < b.milliseconds }
    public var description: String { String(milliseconds) }

    /// `upTo` as an ack gives it: a hint id (digits) or an RFC 3339 time; nil for anything else.
    public init?(upTo text: String) {
        if !text.isEmpty, text.utf8.allSatisfy({ $0 >= 0x30 && $0 <= 0x39 }), let ms = Int64(text) {
            self.init(milliseconds: ms)
            return
        }
        guard let date = RFC3339.date(text) else { return nil }
        self.init(milliseconds: Int64((date.timeIntervalSince1970 * 1_000).rounded(.down)))
    }

    public static func milliseconds(_ date: Date) -> Int64 {
        Int64((date.timeIntervalSince1970 * 1_000).rounded(.down))
    }
}

/// What waits for one (app, user, type), as the store reads it for a decision.
public struct SyncHintWindow: Sendable, Hashable {
    /// Record ids waiting (not yet taken for a push).
    public var waiting: Int
    /// More ids changed than the store keeps: the next push says `fullSync: true`.
    public var fullSync: Bool
    /// When the last push was taken.
    public var lastPush: Date?
    /// Pushes taken within the last hour (older ones may be listed too; the machine ignores them).
    public var recentPushes: [Date]
    /// A batch taken for a push and not yet confirmed on the job stream, and when it was taken.
    public var taken: (batch: Int64, at: Date)?
    /// When the oldest hint still waiting arrived.
    public var oldestWaiting: Date?

    public init(
        waiting: Int = 0, fullSync: Bool = false, lastPush: Date? = nil, recentPushes: [Date] = [],
        taken: (batch: Int64, at: Date)? = nil, oldestWaiting: Date? = nil
    ) {
        self.waiting = waiting
        self.fullSync = fullSync
        self.lastPush = lastPush
        self.recentPushes = recentPushes
        self.taken = taken
        self.oldestWaiting = oldestWaiting
    }

    public static func == (a: SyncHintWindow, b: SyncHintWindow) -> Bool {
        a.waiting == b.waiting && a.fullSync == b.fullSync && a.lastPush == b.lastPush
            && a.recentPushes == b.recentPushes && a.taken?.batch == b.taken?.batch && a.taken?.at == b.taken?.at
            && a.oldestWaiting == b.oldestWaiting
    }
    public func hash(into h: inout Hasher) {
        h.combine(waiting)
        h.combine(lastPush)
        h.combine(taken?.batch)
    }
}

/// A batch taken for a push: the ids (nil: `fullSync`), numbered per (app, user, type).
public struct SyncHintBatch: Sendable, Hashable {
    public var key: SyncHintKey
    public var batch: Int64
    /// Sorted by when each id last changed, then by id; nil when the push says `fullSync: true`.
    public var recordIds: [String]?
    public init(key: SyncHintKey, batch: Int64, recordIds: [String]?) {
        self.key = key
        self.batch = batch
        self.recordIds = recordIds
    }
}

/// What waits for one user, per app and type (`GET /v1/sync-hints/{user}`).
public struct SyncHintStatus: Sendable, Hashable, Codable {
    public var app: String
    public var type: String
    /// Record ids waiting, at most `syncHints.maxRecordIds` listed.
    public var recordIds: [String]
    public var fullSync: Bool
    /// The id of the newest hint accepted.
    public var lastHintId: String?
    public var lastPushAt: Date?
    public var pushesLastHour: Int
    /// When the next push may go, when something waits.
    public var nextPushAt: Date?
    /// Ids taken for a push that is not yet on the job stream.
    public var inFlight: Int
    /// A push is taken and not yet on the job stream (its ids are `inFlight`, none for a full sync).
    public var pushing: Bool
    public init(
        app: String, type: String, recordIds: [String], fullSync: Bool, lastHintId: String?, lastPushAt: Date?,
        pushesLastHour: Int, nextPushAt: Date?, inFlight: Int, pushing: Bool = false
    ) {
        self.app = app
        self.type = type
        self.recordIds = recordIds
        self.fullSync = fullSync
        self.lastHintId = lastHintId
        self.lastPushAt = lastPushAt
        self.pushesLastHour = pushesLastHour
        self.nextPushAt = nextPushAt
        self.inFlight = inFlight
        self.pushing = pushing
    }
}

/// What an ack dropped.
public struct SyncHintAckResult: Sendable, Hashable {
    public var dropped: Int
    public var remaining: Int
    public var fullSync: Bool
    public init(dropped: Int, remaining: Int, fullSync: Bool) {
        self.dropped = dropped
        self.remaining = remaining
        self.fullSync = fullSync
    }
}

/// The API's store of sync hints (Redis in `volley api`, in memory in tests).
public protocol SyncHintStore: Sendable {
    /// Stores the hint for each user; answers each user's hint id, in the order of `users`.
    func add(org: OrgID, app: AppName, users: [UserID], type: String, recordIds: [String], now: Date) async throws
        -> [SyncHintID]
    /// Drops the waiting ids of (app, user, type) whose hint id is at most `upTo`.
    func ack(org: OrgID, key: SyncHintKey, upTo: SyncHintID) async throws -> SyncHintAckResult
    /// What waits for `user` in each of `apps`.
    func status(org: OrgID, apps: [AppName], user: UserID, configuration: SyncHintConfiguration, now: Date)
        async throws -> [SyncHintStatus]
}

/// The worker's intake of sync hints from the job stream (blocking, on a lane's thread).
public protocol SyncHintIntake: Sendable {
    func add(org: OrgID, app: AppName, users: [UserID], type: String, recordIds: [String], now: Date) throws
        -> [SyncHintID]
}

/// The silent push a batch becomes: the article's shape, an ordinary job for the user.
public enum SyncHintPush {
    /// Bytes the listed ids may take in the payload (their JSON array). APNs allows 4,096 bytes for a background
    /// push and FCM 4,096 bytes of data; the rest is `aps`, `type` and room to spare. More ids: `fullSync: true`.
    public static let maxIDBytes = 3_072
    /// The push's time to live: a hint a device did not get within the hour is stale (the app syncs on launch).
    public static let ttlSeconds = 3_600

    /// The ids as sent, or nil when they do not fit (the push says `fullSync: true`).
    public static func listed(_ ids: [String]?) -> [String]? {
        guard let ids, !ids.isEmpty else { return nil }
        let bytes = JSONValue.array(ids.map(JSONValue.string)).encoded().count
        return bytes <= maxIDBytes ? ids : nil
    }

    /// The job id of a batch: the same batch always makes the same id, so a batch pushed again after a crash is a
    /// replay of the first submission, never a second push.
    public static func jobID(org: OrgID, batch: SyncHintBatch) -> JobID {
        JobID("synchint-\(fnv(org.rawValue + "\u{1F}" + batch.key.member))-\(batch.batch)")
    }

    /// The silent job: iOS `{"aps": {"content-available": 1}, "type": …, "recordIds": […]}` (or `"fullSync":
    /// true`), background push type, priority 5, `apns-collapse-id` `sync-<type>`; Android a data message with
    /// normal priority and `collapse_key` `sync-<type>` (FCM data values are strings: `recordIds` is the JSON array
    /// as text). No inbox entry, no Salesforce payload.
    public static func job(org: OrgID, batch: SyncHintBatch) -> PushJob {
        var data: [String: JSONValue] = ["type": .string(batch.key.type)]
        if let ids = listed(batch.recordIds) {
            data["recordIds"] = .array(ids.map(JSONValue.string))
        } else {
            data["fullSync"] = .bool(true)
        }
        let notification = Notification(
            data: data, contentAvailable: true, collapseId: "sync-\(batch.key.type)", ttl: ttlSeconds,
            priority: .normal, pushType: "background")
        var job = PushJob(
            id: jobID(org: org, batch: batch), org: org, app: batch.key.app,
            recipients: [RecipientID(batch.key.user.rawValue)], notification: notification)
        job.inbox = false
        job.salesforcePayload = false
        return job
    }

    /// FNV-1a 64, hex: a short stable name for (org, app, user, type) in a job id of safe characters.
    static func fnv(_ s: String) -> String {
        var h: UInt64 = 0xcbf2_9ce4_8422_2325
        for b in s.utf8 {
            h ^= UInt64(b)
            h = h &* 0x0000_0100_0000_01b3
        }
        let hex = String(h, radix: 16)
        return String(repeating: "0", count: 16 - hex.count) + hex
    }
}
