/// Per-person content: a job whose push differs per recipient (a Salesforce Notification Builder payload with the
/// user's unseen count and inbox entry, a payload encrypted with the device's key, a template rendered with the
/// user's names). A job whose payload is the same for everyone has no `PersonalContent`, and the campaign path
/// (one payload encoded per platform, shared by every request) stays as it is.

/// What the engine knows of one recipient user when it sends to that user's devices.
public struct RecipientContext: Sendable, Hashable {
    /// The user's unseen count right after this notification was stored in the inbox (the badge).
    public var unseenCount: Int?
    /// The user's attributes from the directory (`{"first_name": "Ada"}`), for templates.
    public var attributes: [String: String]?
    public init(unseenCount: Int? = nil, attributes: [String: String]? = nil) {
        self.unseenCount = unseenCount
        self.attributes = attributes
    }
}

/// Which recipient facts a job's personal content reads; the resolver fetches only those.
public struct RecipientNeeds: Sendable, Hashable {
    public var unseenCount: Bool
    public var attributes: Bool
    /// The chunks are read only to count what earlier deliveries recorded (a cancelled job's report): nothing is
    /// stored in an inbox and no frequency cap is charged.
    public var countOnly = false
    /// A local-time job's delivery: the recipients due by its instant are stored and capped now, the others at
    /// their wave (`LocalTimeGate`); nil for any other job.
    public var localTime: LocalTimeGate?
    public init(unseenCount: Bool = false, attributes: Bool = false) {
        self.unseenCount = unseenCount
        self.attributes = attributes
    }
    public static let none = RecipientNeeds()
    public var isEmpty: Bool { !unseenCount && !attributes }
}

/// One device's own payload. Headers (topic, push type, priority, expiry, collapse id) stay the job's.
public enum PersonalPayload: Sendable, Hashable {
    /// APNs: the whole payload (JSON bytes).
    case apns([UInt8])
    /// FCM: a data message's `data` (every value a string); the job's `android` options are kept, and no
    /// `notification` block is sent (the app builds the notification, as the Salesforce Mobile SDK does).
    case fcmData([String: String])
    /// Either platform: the job's notification with this recipient's texts, encoded as the job's payload is.
    case notification(Notification)
}

/// A payload that could not be made for one device: the device's outcome is `rejected`, nothing is sent.
public struct PersonalPayloadError: Error, Sendable, Hashable, CustomStringConvertible {
    /// Provider-style reason for the report (`PayloadTooLarge`, `InvalidDeviceKey`).
    public var reason: String
    public var message: String
    public init(_ reason: String, _ message: String) {
        self.reason = reason
        self.message = message
    }
    public var description: String { "\(reason): \(message)" }
}

/// A job's per-person content, made once per delivery by a `PersonalContentPlanner`. Called on the engine's lane
/// threads, one device at a time.
public protocol PersonalContent: Sendable {
    /// The recipient facts `payload` reads.
    var needs: RecipientNeeds { get }
    /// What the payloads made so far were (encrypted, trimmed, template names missing), for the job's report.
    var tally: PersonalContentTally { get }
    /// The payload for one device of `recipient`. Throws `PersonalPayloadError` when none can be sent.
    func payload(for device: Device, recipient: RecipientContext) throws(PersonalPayloadError) -> PersonalPayload
}

/// Counts of a job's personal payloads, reported with its outcomes.
public struct PersonalContentTally: Sendable, Hashable, Codable {
    /// Payloads encrypted with the device's key.
    public var encrypted = 0
    /// Payloads whose texts were shortened to fit the provider's limit.
    public var trimmed = 0
    /// Template names a recipient had no value and no fallback for (rendered empty).
    public var templateNamesMissing = 0
    public init() {}
    public var isEmpty: Bool { encrypted == 0 && trimmed == 0 && templateNamesMissing == 0 }
}

/// What the planner decided for one job: the notification prepared per platform (a template's, when the job names
/// one) and the per-person content, if any.
public struct PersonalPlan: Sendable {
    public var notification: Notification
    public var content: (any PersonalContent)?
    public init(notification: Notification, content: (any PersonalContent)?) {
        self.notification = notification
        self.content = content
    }
}

/// Decides per job whether its push is per person. Handed to the engine by the service, which knows the
/// Salesforce payload, the templates and the app settings. `plan` may block (it reads the store) and throws a
/// `JobRejection` for a job that cannot be sent (an unknown template).
public protocol PersonalContentPlanner: Sendable {
    func plan(for job: PushJob, jobID: JobID) throws -> PersonalPlan
}
