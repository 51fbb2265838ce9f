/// A notification as jobs and `volley test-push` give it (camelCase keys: a contract with users).
/// Provider-specific encoding lives in VolleyAPNs / VolleyFCM; this is the platform-neutral input.
public struct Notification: Sendable, Hashable, Codable, JSONReadable, JSONWritable {
    public struct LocalizedText: Sendable, Hashable, Codable, JSONReadable, JSONWritable {
        public var title: String?
        public var subtitle: String?
        public var body: String?
        public init(title: String? = nil, subtitle: String? = nil, body: String? = nil) {
            self.title = title
            self.subtitle = subtitle
            self.body = body
        }

        public init(json: JSONValue, at path: [JSONPathComponent]) throws(JSONFieldError) {
            let o = try JSONObjectReader(json, at: path)
            title = try o.string("title")
            subtitle = try o.string("subtitle")
            body = try o.string("body")
        }

        public init(from decoder: any Decoder) throws { self = try Self.decoded(from: decoder) }

        public var json: JSONValue {
            var o = JSONObjectWriter()
            o.add("title", title)
            o.add("subtitle", subtitle)
            o.add("body", body)
            return o.value
        }

        public func encode(to encoder: any Encoder) throws { try json.encode(to: encoder) }
    }

    public enum Priority: String, Sendable, Hashable, Codable, CaseIterable { case high, normal }

    public var title: String?
    public var subtitle: String?
    public var body: String?
    /// Per-language variants keyed by language code ("es", "pt-BR").
    public var localized: [String: LocalizedText]?
    public var sound: String?
    /// Badge: a number sets it; `badgeIncrement` (OneSignal's "increase") adds to it instead.
    public var badge: Int?
    public var badgeIncrement: Int?
    /// Custom data: at the APNs payload root, FCM `data` (values stringified).
    public var data: [String: JSONValue]?
    /// Silent ("record changed") push: content-available, no alert/sound/badge.
    public var contentAvailable: Bool?
    public var mutableContent: Bool?
    public var category: String?
    public var threadId: String?
    public var collapseId: String?
    public var interruptionLevel: String?
    public var relevanceScore: Double?
    public var targetContentId: String?
    /// Time to live in seconds; 0 = deliver once, now or never.
    public var ttl: Int?
    public var priority: Priority?
    /// APNs push type (alert, background, voip, complication, fileprovider, liveactivity, location, mdm, pushtotalk,
    /// widgets).
    public var pushType: String?
    public var imageUrl: String?
    public var url: String?
    public var channelId: String?
    /// Salesforce-style fields for the in-app inbox and notification types.
    public var type: String?
    public var targetId: String?
    /// Page reference of the navigation target (Salesforce `targetPageRef`, JSON text kept verbatim): in-app only.
    public var targetPageRef: String?
    /// Raw platform payloads passed through (Apex / Connect REST style).
    public var apns: JSONValue?
    public var fcm: JSONValue?
    /// The collapse identity a worker gives a push whose job set no `collapseId`, so that a request resent after its
    /// connection died unanswered replaces the first copy on the device instead of showing beside it (APNs
    /// `apns-collapse-id`, FCM `android.notification.tag`; `MessageTracking.resendCollapseID`). Set by the worker
    /// for `worker.unansweredSends: resend`; never read from a job or written into one, and never FCM's
    /// `collapse_key` (which would change what FCM keeps for an offline device).
    public var resendCollapseId: String?
    /// The identity a device shows the push under: the job's `collapseId`, else the worker's `resendCollapseId`.
    public var displayCollapseId: String? { collapseId ?? resendCollapseId }

    public init(
        title: String? = nil, subtitle: String? = nil, body: String? = nil,
        localized: [String: LocalizedText]? = nil, sound: String? = nil, badge: Int? = nil,
        badgeIncrement: Int? = nil, data: [String: JSONValue]? = nil, contentAvailable: Bool? = nil,
        mutableContent: Bool? = nil, category: String? = nil, threadId: String? = nil,
        collapseId: String? = nil, interruptionLevel: String? = nil, relevanceScore: Double? = nil,
        targetContentId: String? = nil, ttl: Int? = nil, priority: Priority? = nil,
        pushType: String? = nil, imageUrl: String? = nil, url: String? = nil, channelId: String? = nil,
        type: String? = nil, targetId: String? = nil, apns: JSONValue? = nil, fcm: JSONValue? = nil
    ) {
        self.title = title
        self.subtitle = subtitle
        self.body = body
        self.localized = localized
        self.sound = sound
        self.badge = badge
        self.badgeIncrement = badgeIncrement
        self.data = data
        self.contentAvailable = contentAvailable
        self.mutableContent = mutableContent
        self.category = category
        self.threadId = threadId
        self.collapseId = collapseId
        self.interruptionLevel = interruptionLevel
        self.relevanceScore = relevanceScore
        self.targetContentId = targetContentId
        self.ttl = ttl
        self.priority = priority
        self.pushType = pushType
        self.imageUrl = imageUrl
        self.url = url
        self.channelId = channelId
        self.type = type
        self.targetId = targetId
        self.apns = apns
        self.fcm = fcm
    }

    /// The one decoding of a notification (`Codable` goes through it too).
    public init(json: JSONValue, at path: [JSONPathComponent]) throws(JSONFieldError) {
        let o = try JSONObjectReader(json, at: path)
        title = try o.string("title")
        subtitle = try o.string("subtitle")
        body = try o.string("body")
        if let texts = try o.object("localized") {
            var localized: [String: LocalizedText] = [:]
            for (language, text) in texts {
                if case .null = text { continue }
                localized[language] = try LocalizedText(json: text, at: path + [.key("localized"), .key(language)])
            }
            self.localized = localized
        }
        sound = try o.string("sound")
        badge = try o.int("badge")
        badgeIncrement = try o.int("badgeIncrement")
        data = try o.object("data")
        contentAvailable = try o.bool("contentAvailable")
        mutableContent = try o.bool("mutableContent")
        category = try o.string("category")
        threadId = try o.string("threadId")
        collapseId = try o.string("collapseId")
        interruptionLevel = try o.string("interruptionLevel").map(Self.interruptionLevel(spelled:))
        relevanceScore = try o.double("relevanceScore")
        targetContentId = try o.string("targetContentId")
        ttl = try o.int("ttl")
        priority = try Self.priority(o)
        pushType = try o.string("pushType")
        imageUrl = try o.string("imageUrl")
        url = try o.string("url")
        channelId = try o.string("channelId")
        type = try o.string("type")
        targetId = try o.string("targetId")
        targetPageRef = try o.string("targetPageRef")
        apns = o.value("apns")
        fcm = o.value("fcm")
    }

    public init(from decoder: any Decoder) throws { self = try Self.decoded(from: decoder) }

    /// The one writing of a notification, the inverse of `init(json:at:)`: `data`, `apns` and `fcm` keep their
    /// numbers' text (`Codable` writes this value too).
    public var json: JSONValue {
        var o = JSONObjectWriter()
        o.add("title", title)
        o.add("subtitle", subtitle)
        o.add("body", body)
        o.add("localized", localized.map { $0.mapValues(\.json) })
        o.add("sound", sound)
        o.add("badge", badge)
        o.add("badgeIncrement", badgeIncrement)
        o.add("data", data)
        o.add("contentAvailable", contentAvailable)
        o.add("mutableContent", mutableContent)
        o.add("category", category)
        o.add("threadId", threadId)
        o.add("collapseId", collapseId)
        o.add("interruptionLevel", interruptionLevel)
        o.add("relevanceScore", relevanceScore)
        o.add("targetContentId", targetContentId)
        o.add("ttl", ttl)
        o.add("priority", priority?.rawValue)
        o.add("pushType", pushType)
        o.add("imageUrl", imageUrl)
        o.add("url", url)
        o.add("channelId", channelId)
        o.add("type", type)
        o.add("targetId", targetId)
        o.add("targetPageRef", targetPageRef)
        o.add("apns", apns)
        o.add("fcm", fcm)
        return o.value
    }

    public func encode(to encoder: any Encoder) throws { try json.encode(to: encoder) }

    /// APNs's interruption level for a spelling a job may use: OneSignal writes `time_sensitive` where APNs writes
    /// `time-sensitive`. Any other value is kept as given (the APNs encoder refuses one it does not know).
    public static func interruptionLevel(spelled s: String) -> String {
        s == "time_sensitive" ? "time-sensitive" : s
    }

    /// `priority` as Volley (`"high"`, `"normal"`) or OneSignal spells it. OneSignal's rule, from its push body
    /// parameters: "The value of 10 assigns high priority to the notification … Values other than 10 set the
    /// notification to normal priority". So any whole number is taken, 10 as high and every other as normal (5 is
    /// APNs's own number for normal); a number with a fraction, or outside a 64-bit integer, is refused naming
    /// `priority`.
    static func priority(_ o: JSONObjectReader) throws(JSONFieldError) -> Priority? {
        switch o.value("priority") {
        case nil: return nil
        case .number(let n)?:
            guard let value = n.intValue else {
                throw o.fault("priority", "high, normal, or a whole number (OneSignal's: 10 high, any other normal)")
            }
            return value == 10 ? .high : .normal
        default: return try o.oneOf("priority", Priority.self)
        }
    }

    /// OneSignal's default time to live: a job without `ttl` is kept this long by APNs and FCM (3 days).
    public static let defaultTTLSeconds = 259_200
    /// The longest time to live a job may ask for: FCM's maximum, 28 days (OneSignal's cap).
    public static let maxTTLSeconds = 2_419_200

    /// The time to live the providers are given, in seconds: the job's `ttl` (0 = now or never), or
    /// `defaultTTLSeconds` without one. A negative `ttl` or one above `maxTTLSeconds` throws, naming `ttl`, with the
    /// provider's own reason code (`reason`).
    public func effectiveTTL(reason: OutcomeReason) throws(NotificationError) -> Int {
        guard let ttl else { return Self.defaultTTLSeconds }
        guard ttl >= 0 else { throw NotificationError(reason, "ttl \(ttl) must be 0 or more seconds", field: "ttl") }
        guard ttl <= Self.maxTTLSeconds else {
            throw NotificationError(
                reason, "ttl \(ttl) is over the maximum of \(Self.maxTTLSeconds) seconds (28 days)", field: "ttl")
        }
        return ttl
    }

    /// True when this is a silent (background) push.
    public var isSilent: Bool {
        contentAvailable == true && title == nil && body == nil && sound == nil && badge == nil
    }
}
