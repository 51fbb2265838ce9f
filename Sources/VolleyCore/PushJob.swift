import Foundation

/// A device named explicitly by a job (`devices: [{platform, token}]`).
public struct JobDevice: Sendable, Hashable, Codable, JSONReadable, JSONWritable {
    public var platform: Platform
    public var token: DeviceToken
    public var environment: APNSEnvironment?
    public init(platform: Platform, token: DeviceToken, environment: APNSEnvironment? = nil) {
        self.platform = platform
        self.token = token
        self.environment = environment
    }

    public init(json: JSONValue, at path: [JSONPathComponent]) throws(JSONFieldError) {
        let o = try JSONObjectReader(json, at: path)
        platform = try o.required(o.oneOf("platform", Platform.self), "platform")
        token = DeviceToken(try o.required(o.string("token"), "token"))
        environment = try o.oneOf("environment", APNSEnvironment.self)
    }

    public init(from decoder: any Decoder) throws { self = try Self.decoded(from: decoder) }

    public var json: JSONValue {
        var o = JSONObjectWriter()
        o.add("platform", platform.rawValue)
        o.add("token", token.rawValue)
        o.add("environment", environment?.rawValue)
        return o.value
    }

    public func encode(to encoder: any Encoder) throws { try json.encode(to: encoder) }
}

/// A job as it travels on the job stream (field `job`, JSON). A contract with producers:
/// `id` (idempotency key; default the stream entry id), `org`, `app`, `recipients` (≤ 500 entries: directory ids,
/// `{"segment": "<id>"}`, `{"all": true}`) less `exclude`, and/or `devices`, `notification`, optional raw `apns` /
/// `fcm` payloads passed through, optional `platforms` targeting.
public struct PushJob: Sendable, Hashable, Codable, JSONReadable, JSONWritable {
    /// Salesforce's customNotificationAction allows at most 500 recipients per call.
    public static let maxRecipients = 500

    public var id: JobID?
    public var org: OrgID
    public var app: AppName
    /// Directory ids (users, groups, queues, teams), segments and `all`, in the order given (`RecipientEntry`).
    public var recipients: [RecipientEntry]?
    /// Entries whose users get nothing from this job, though `recipients` reach them: ids and segments, at most
    /// `maxRecipients`. Explicit `devices` are not affected.
    public var exclude: [RecipientEntry]?
    public var devices: [JobDevice]?
    public var notification: Notification
    public var apns: JSONValue?
    public var fcm: JSONValue?
    public var platforms: [Platform]?
    /// Set on shard jobs a campaign was split into (their users come from the parent's shard list).
    public var shard: ShardRef?
    /// Records debug events per user and device (`DebugEvent`), read with `volley events --job ID`.
    public var debug: Bool?
    /// False: a job whose notification names a `type` keeps Volley's own payload instead of the Salesforce
    /// Notification Builder payload (`oid`, `uid`, `nid`, `notifType`, badge = unseen count).
    public var salesforcePayload: Bool?
    /// False: nothing is stored in the recipients' in-app inboxes (push only).
    public var inbox: Bool?
    /// The inbox entry's id (`nid`): jobs that send one notification through several apps share it, so each user's
    /// inbox holds it once. Default: the job id.
    public var notificationId: String?
    /// A stored template (`/v1/templates/{id}`) whose `notification` this job sends, instead of its own.
    public var templateId: String?
    /// Values for a template's `{{ message.custom_data.* }}` names: an object of at most `maxCustomDataBytes`.
    public var customData: JSONValue?
    public static let maxCustomDataBytes = 2048
    /// The most of this job's pushes the whole fleet sends in any minute (`ThrottleRate.range`); nil: as fast as
    /// the lanes' credits allow.
    public var throttlePerMinute: Int?
    /// False: the org's frequency caps neither hold this job's notification back nor count it (OneSignal's
    /// `enable_frequency_cap`). Absent or true: the caps apply to a visible notification.
    public var enableFrequencyCap: Bool?
    /// When to send: RFC 3339 with an offset, at most `schedule.maxAheadDays` ahead. A later job is parked in the
    /// schedule and comes back to the stream when due (docs/scheduling.md).
    public var sendAt: ScheduledTime?
    /// Each device gets the notification at this wall-clock time in its own zone, at the first such moment after
    /// `sendAt` (or after the job was added); the devices due later wait as the job's waves (docs/scheduling.md).
    public var deliverAtLocalTime: LocalDeliveryTime?
    /// False: the job's pushes carry no message id (`mid`), so the app cannot report opens, dismissals and taps of
    /// them. Absent or true: every visible push carries one.
    public var tracking: Bool?

    public init(
        id: JobID? = nil, org: OrgID, app: AppName, recipients: [RecipientID]? = nil,
        devices: [JobDevice]? = nil, notification: Notification, apns: JSONValue? = nil,
        fcm: JSONValue? = nil, platforms: [Platform]? = nil
    ) {
        self.id = id
        self.org = org
        self.app = app
        self.recipients = recipients?.map(RecipientEntry.id)
        self.devices = devices
        self.notification = notification
        self.apns = apns
        self.fcm = fcm
        self.platforms = platforms
    }

    /// A job read from its JSON: the one decoding of a job, for workers, producers and the API (`Codable` goes
    /// through it too). A job without `org` takes `defaultOrg` (the API's caller), else `org` is required.
    public init(json: JSONValue, at path: [JSONPathComponent] = [], defaultOrg: OrgID?) throws(JSONFieldError) {
        let o = try JSONObjectReader(json, at: path)
        id = try o.string("id").map(JobID.init)
        org = try o.required(o.string("org").map(OrgID.init) ?? defaultOrg, "org")
        app = AppName(try o.required(o.string("app"), "app"))
        recipients = try RecipientEntry.list(o, "recipients", allowsAll: true)
        exclude = try RecipientEntry.list(o, "exclude", allowsAll: false)
        devices = try o.array("devices") { (v, at) throws(JSONFieldError) in try JobDevice(json: v, at: at) }
        templateId = try o.string("templateId")
        // A templated job takes its notification from the template; one of its own is required otherwise.
        if templateId != nil, o.value("notification") == nil {
            notification = Notification()
        } else {
            notification = try Notification(
                json: o.required(o.value("notification"), "notification"), at: path + [.key("notification")])
        }
        apns = o.value("apns")
        fcm = o.value("fcm")
        platforms = try o.array("platforms") { (v, at) throws(JSONFieldError) in
            guard case .string(let s) = v, let p = Platform(rawValue: s) else {
                throw JSONFieldError(path: at, problem: .expected("one of ios, android"))
            }
            return p
        }
        shard = try o.value("shard").map { (v) throws(JSONFieldError) in
            try ShardRef(json: v, at: path + [.key("shard")])
        }
        debug = try o.bool("debug")
        salesforcePayload = try o.bool("salesforcePayload")
        inbox = try o.bool("inbox")
        notificationId = try o.string("notificationId")
        customData = o.value("customData")
        throttlePerMinute = try o.int("throttlePerMinute")
        enableFrequencyCap = try o.bool("enableFrequencyCap")
        sendAt = try o.string("sendAt").map { (text) throws(JSONFieldError) in
            guard let t = ScheduledTime(text) else {
                throw JSONFieldError(
                    path: path + [.key("sendAt")],
                    problem: .expected("an RFC 3339 time with an offset, such as 2026-11-27T09:00:00Z or +02:00"))
            }
            return t
        }
        deliverAtLocalTime = try o.string("deliverAtLocalTime").map { (text) throws(JSONFieldError) in
            guard let t = LocalDeliveryTime(text) else {
                throw JSONFieldError(
                    path: path + [.key("deliverAtLocalTime")],
                    problem: .expected("a wall-clock time HH:MM, such as 09:00"))
            }
            return t
        }
        tracking = try o.bool("tracking")
    }

    public init(json: JSONValue, at path: [JSONPathComponent]) throws(JSONFieldError) {
        try self.init(json: json, at: path, defaultOrg: nil)
    }

    public init(from decoder: any Decoder) throws { self = try Self.decoded(from: decoder) }

    /// The one writing of a job, the inverse of `init(json:at:defaultOrg:)`: every producer puts `jsonText` on the
    /// job stream, so a number in `data`, `apns`, `fcm` or `customData` reaches the worker as the text it was given
    /// (`Codable` writes this value too).
    public var json: JSONValue {
        var o = JSONObjectWriter()
        o.add("id", id?.rawValue)
        o.add("org", org.rawValue)
        o.add("app", app.rawValue)
        o.add("recipients", recipients)
        o.add("exclude", exclude)
        o.add("devices", devices)
        o.add("notification", notification)
        o.add("apns", apns)
        o.add("fcm", fcm)
        o.add("platforms", platforms?.map(\.rawValue))
        o.add("shard", shard)
        o.add("debug", debug)
        o.add("salesforcePayload", salesforcePayload)
        o.add("inbox", inbox)
        o.add("notificationId", notificationId)
        o.add("templateId", templateId)
        o.add("customData", customData)
        o.add("throttlePerMinute", throttlePerMinute)
        o.add("enableFrequencyCap", enableFrequencyCap)
        o.add("sendAt", sendAt?.text)
        o.add("deliverAtLocalTime", deliverAtLocalTime?.description)
        o.add("tracking", tracking)
        return o.value
    }

    public func encode(to encoder: any Encoder) throws { try json.encode(to: encoder) }

    /// The job's throttle, once `validate()` has passed (nil: not throttled).
    public var throttle: ThrottleRate? { throttlePerMinute.flatMap(ThrottleRate.init(perMinute:)) }

    /// The notification with the job-level `apns` / `fcm` pass-through payloads folded in.
    public var effectiveNotification: Notification {
        var n = notification
        if let apns { n.apns = apns }
        if let fcm { n.fcm = fcm }
        return n
    }

    /// True when `platform` is targeted (no `platforms` = all).
    public func targets(_ platform: Platform) -> Bool {
        guard let platforms, !platforms.isEmpty else { return true }
        return platforms.contains(platform)
    }

    /// Structural checks that need no configuration. Throws `JobRejection`.
    public func validate() throws {
        let r = recipients ?? []
        let d = devices ?? []
        if r.count > PushJob.maxRecipients {
            throw JobRejection(
                .tooManyRecipients, "\(r.count) recipients; at most \(PushJob.maxRecipients) per job",
                field: "recipients")
        }
        if let x = exclude, x.count > PushJob.maxRecipients {
            throw JobRejection(
                .tooManyRecipients, "exclude has \(x.count) entries; at most \(PushJob.maxRecipients) per job",
                field: "exclude")
        }
        if r.isEmpty && d.isEmpty {
            throw JobRejection(.noTargets, "job names neither recipients nor devices", field: "recipients")
        }
        if org.rawValue.isEmpty { throw JobRejection(.invalidJob, "org is empty", field: "org") }
        if let id, id.rawValue.isEmpty { throw JobRejection(.invalidJob, "id is empty", field: "id") }
        if let notificationId, notificationId.isEmpty {
            throw JobRejection(.invalidJob, "notificationId is empty", field: "notificationId")
        }
        if let templateId, templateId.isEmpty {
            throw JobRejection(.invalidJob, "templateId is empty", field: "templateId")
        }
        if let throttlePerMinute, ThrottleRate(perMinute: throttlePerMinute) == nil {
            throw JobRejection(
                .invalidJob,
                "throttlePerMinute \(throttlePerMinute) is outside \(ThrottleRate.range.lowerBound)"
                    + "...\(ThrottleRate.range.upperBound) pushes per minute", field: "throttlePerMinute")
        }
        if let customData {
            guard customData.objectValue != nil else {
                throw JobRejection(.invalidJob, "customData must be a JSON object", field: "customData")
            }
            let bytes = customData.encoded().count
            if bytes > PushJob.maxCustomDataBytes {
                throw JobRejection(
                    .invalidJob, "customData is \(bytes) bytes; at most \(PushJob.maxCustomDataBytes)",
                    field: "customData")
            }
        }
    }

    /// Whether the recipients' in-app inboxes keep this job's notification. Salesforce's Apex push "does not retain
    /// notification payloads for subsequent use": a job whose content is only a raw `apns` / `fcm` payload (the
    /// Connect push resource, Apex-style jobs) is push-only. A job with text of its own (`title`, `subtitle`,
    /// `body`, `localized`) is stored, raw platform overrides or not. `inbox` decides over both when given.
    /// (The type's app settings may still keep a notification out of the inbox: `DeliveryPolicy.storesInbox`.)
    public var storesInbox: Bool {
        if let inbox { return inbox }
        let n = notification
        let ownText = n.title != nil || n.subtitle != nil || n.body != nil || n.localized?.isEmpty == false
        let raw = apns != nil || fcm != nil || n.apns != nil || n.fcm != nil
        return ownText || !raw
    }

    /// The id of the inbox entry this job stores and its pushes name (`nid`).
    public func inboxEntryID(jobID: JobID) -> String { notificationId ?? jobID.rawValue }
}

/// Why a job was dead-lettered. Open vocabulary: known reasons are statics.
public struct JobRejection: Error, Sendable, Hashable, CustomStringConvertible {
    public struct Reason: Sendable, Hashable, CustomStringConvertible {
        public let rawValue: String
        public init(_ rawValue: String) { self.rawValue = rawValue }
        public static let invalidJSON = Reason("invalid-json")
        public static let invalidJob = Reason("invalid-job")
        public static let unknownApp = Reason("unknown-app")
        public static let tooManyRecipients = Reason("too-many-recipients")
        public static let noTargets = Reason("no-targets")
        public static let invalidNotification = Reason("invalid-notification")
        public static let tooManyDeliveries = Reason("too-many-deliveries")
        public var description: String { rawValue }
    }
    public let reason: Reason
    public let message: String
    /// The job's field the rejection is about (`throttlePerMinute`, `exclude`), when one is: what the API names.
    public let field: String?
    public init(_ reason: Reason, _ message: String, field: String? = nil) {
        self.reason = reason
        self.message = message
        self.field = field
    }
    public var description: String { "\(reason): \(message)" }
}

/// One entry read from the job stream.
public struct JobEntry: Sendable, Hashable {
    public var entryID: StreamEntryID
    /// The entry's fields as stored (the job JSON is in `job`).
    public var fields: [String: String]
    /// How many times the group delivered it (1 for a first read).
    public var deliveryCount: Int
    public init(entryID: StreamEntryID, fields: [String: String], deliveryCount: Int) {
        self.entryID = entryID
        self.fields = fields
        self.deliveryCount = deliveryCount
    }
}

/// A per-job delivery report (written to the report stream; `volley send --wait` prints it).
public struct JobReport: Sendable, Hashable, Codable {
    public var job: JobID
    public var entry: StreamEntryID?
    public var org: OrgID
    public var app: AppName
    /// Recipient ids named by the job.
    public var recipients: Int = 0
    /// Users the recipients resolved to.
    public var users: Int = 0
    /// Devices targeted (after platform filtering), including ones already done on an earlier delivery.
    public var devices: Int = 0
    public var accepted: Int = 0
    public var rejected: Int = 0
    public var rejectedByReason: [String: Int] = [:]
    public var failed: Int = 0
    public var failedByReason: [String: Int] = [:]
    public var tokensRemoved: Int = 0
    /// Users with no registered device (the Salesforce guide's PUSH_NOTIFICATION_NO_DEVICES): not errors.
    public var noDevices: Int = 0
    public var quotaExceeded: Int = 0
    /// Devices not sent because the notification's `ttl` ran out first (nil: none; absent in older reports).
    public var expired: Int?
    public var unknownRecipients: Int = 0
    /// Recipient ids the directory does not know (not fatal).
    public var unknownRecipientIDs: [String]?
    /// Users whose in-app inbox received the notification (pushed or not).
    public var inAppStored: Int?
    /// Users the org's frequency caps held back: the notification went to their inboxes and to none of their
    /// devices. nil when no cap applied to the job (no rule for its org and type, a silent push, or
    /// `enableFrequencyCap: false`).
    public var capped: Int?
    /// "not_enabled" when the job's notification type is disabled for its app (nothing sent or stored).
    public var status: String?
    public var statusDetail: String?
    /// The shards a campaign was split into (parent report), or the parent of a shard.
    public var shards: Int?
    /// Devices skipped because an earlier delivery of this job already recorded their outcome.
    public var alreadyRecorded: Int = 0
    /// Per-person payloads: how many were encrypted with the device's key, shortened to fit, or rendered with a
    /// template name missing (nil for a job whose payload is shared).
    public var personalContent: PersonalContentTally?
    public var byPlatform: [String: Int] = [:]
    public var deliveries: Int = 1
    public var worker: String = ""
    public var startedAt: Date
    public var finishedAt: Date?

    public init(job: JobID, entry: StreamEntryID?, org: OrgID, app: AppName, startedAt: Date) {
        self.job = job
        self.entry = entry
        self.org = org
        self.app = app
        self.startedAt = startedAt
    }

    /// Adds `count` accepted outcomes on `platform` (the common case, counted per batch rather than per outcome).
    public mutating func countAccepted(_ count: Int, platform: Platform) {
        guard count > 0 else { return }
        byPlatform[platform.rawValue, default: 0] += count
        accepted += count
    }

    /// Adds one terminal outcome to the counts.
    public mutating func count(_ outcome: DeliveryOutcome, platform: Platform) {
        byPlatform[platform.rawValue, default: 0] += 1
        switch outcome {
        case .accepted: accepted += 1
        case .rejected(_, let reason, let action):
            rejected += 1
            rejectedByReason[reason.rawValue, default: 0] += 1
            if action == .removeToken { tokensRemoved += 1 }
        case .failed(let reason, _):
            failed += 1
            failedByReason[reason.rawValue, default: 0] += 1
        case .quotaExceeded: quotaExceeded += 1
        case .expired: expired = (expired ?? 0) + 1
        }
    }
}
