import Foundation

/// One event of a job sent with `"debug": true`: what happened to one user or device, with the provider's answer.
/// Named as in Salesforce's push notification debug log, so support teams read the names they know.
/// A job keeps at most `DebugEvent.maxPerJob` events (the first ones), for as long as its outcome ledger.
public struct DebugEvent: Sendable, Hashable, Codable {
    /// The event's name. Open vocabulary (a reader decodes names a newer writer adds).
    public struct Name: RawRepresentable, Sendable, Hashable, Codable, CustomStringConvertible {
        public let rawValue: String
        public init(rawValue: String) { self.rawValue = rawValue }
        public init(from decoder: any Decoder) throws {
            rawValue = try decoder.singleValueContainer().decode(String.self)
        }
        public func encode(to encoder: any Encoder) throws {
            var c = encoder.singleValueContainer()
            try c.encode(rawValue)
        }
        public var description: String { rawValue }

        /// The push reached the provider; `answer` says what it said (accepted, or why not).
        public static let sent = Name(rawValue: "PUSH_NOTIFICATION_SENT")
        /// A recipient user has no registered device for the app.
        public static let noDevices = Name(rawValue: "PUSH_NOTIFICATION_NO_DEVICES")
        /// The job's app is not configured, or the org may not use it.
        public static let invalidApp = Name(rawValue: "PUSH_NOTIFICATION_INVALID_APP")
        /// The provider refused the app's credentials, certificate or topic.
        public static let invalidCertificate = Name(rawValue: "PUSH_NOTIFICATION_INVALID_CERTIFICATE")
        /// The notification is invalid (refused before sending, or by the provider).
        public static let invalidNotification = Name(rawValue: "PUSH_NOTIFICATION_INVALID_NOTIFICATION")
        /// Not sent: the notification type is disabled, or the org's hourly quota for the platform is used up.
        public static let notEnabled = Name(rawValue: "PUSH_NOTIFICATION_NOT_ENABLED")
    }

    /// Events kept per job: the first ones, so a campaign's debug log stays small.
    public static let maxPerJob = 1_000

    public var event: Name
    public var at: Date
    public var user: UserID?
    public var platform: Platform?
    /// The token, redacted (prefix and suffix): enough to find it in the registry, not to send to it.
    public var token: String?
    /// The provider's HTTP status, when it answered.
    public var status: Int?
    /// The provider's answer or Volley's reason: `accepted`, `Unregistered`, `BadCertificate`, `Timeout`, ….
    public var answer: String

    public init(
        _ event: Name, at: Date, user: UserID? = nil, platform: Platform? = nil, token: String? = nil,
        status: Int? = nil, answer: String
    ) {
        self.event = event
        self.at = at
        self.user = user
        self.platform = platform
        self.token = token
        self.status = status
        self.answer = answer
    }

    /// The event for one device's terminal outcome.
    public init(device: Device, outcome: DeliveryOutcome, at: Date) {
        var name = Name.sent
        var status: Int?
        let answer: String
        switch outcome {
        case .accepted:
            status = 200
            answer = "accepted"
        case .rejected(let s, let reason, let action):
            switch action {
            case .fixApp: name = .invalidCertificate
            case .invalidNotification: name = .invalidNotification
            case .removeToken, .unknown: name = .sent
            }
            status = s
            answer = reason.rawValue
        case .failed(let reason, _):
            answer = "failed: \(reason.rawValue)"
        case .quotaExceeded:
            name = .notEnabled
            answer = "quota exceeded: the org's hourly \(device.platform) quota is used up"
        case .expired:
            name = .notEnabled
            answer = "expired: the notification's ttl ran out before its send could start"
        }
        self.init(
            name, at: at, user: device.user, platform: device.platform, token: device.token.redacted,
            status: status, answer: answer)
    }
}
