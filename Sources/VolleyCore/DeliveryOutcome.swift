import Foundation

/// A provider's reason string, open-ended: known values are statics, anything else is kept verbatim.
public struct OutcomeReason: Sendable, Hashable, Codable, CustomStringConvertible, ExpressibleByStringLiteral {
    public let rawValue: String
    /// APNs 410: when the token stopped being valid (the response's `timestamp`). A detail, not part of the
    /// reason's identity (not compared, not encoded): the registry keeps it with the removed token.
    public var tokenInvalidSince: Date? = nil
    public init(_ rawValue: String) { self.rawValue = rawValue }
    public init(_ rawValue: String, tokenInvalidSince: Date?) {
        self.rawValue = rawValue
        self.tokenInvalidSince = tokenInvalidSince
    }
    public static func == (a: OutcomeReason, b: OutcomeReason) -> Bool { a.rawValue == b.rawValue }
    public func hash(into h: inout Hasher) { h.combine(rawValue) }
    public init(stringLiteral value: String) { self.rawValue = value }
    public init(from decoder: any Decoder) throws { rawValue = try decoder.singleValueContainer().decode(String.self) }
    public func encode(to encoder: any Encoder) throws {
        var c = encoder.singleValueContainer()
        try c.encode(rawValue)
    }
    public var description: String { rawValue }
}

/// What to do about a rejection.
public enum RejectionAction: String, Sendable, Hashable, Codable {
    /// The token is dead: remove it from the registry.
    case removeToken = "remove-token"
    /// The notification itself is invalid: a job error, never retried.
    case invalidNotification = "invalid-notification"
    /// The app's credentials or topic are wrong: stop this app's sends until fixed.
    case fixApp = "fix-app"
    /// A reason we do not know: kept verbatim, not retried, counted.
    case unknown = "unknown"
}

/// The terminal outcome of one (job, device) delivery. Every device of a job ends with exactly one.
public enum DeliveryOutcome: Sendable, Hashable, Codable {
    /// The provider accepted it. The ledger and the report record outcomes only, so no message id is kept: an
    /// APNs push's apns-id is `APNSPreparedNotification.apnsID(jobID:token:)` (Volley sets it), and
    /// `volley test-push` shows the provider's id from `attemptOnce`. Building an id String per accepted push was
    /// one in twelve of the worker's allocations (11.6 → 10.6 per push).
    case accepted
    /// The provider said no; `action` says what to do about it.
    case rejected(status: Int, reason: OutcomeReason, action: RejectionAction)
    /// No answer we can act on, after bounded retries (or a non-retryable transport failure).
    case failed(reason: OutcomeReason, resendWasSafe: Bool)
    /// Not sent: the org's hourly quota for this platform is used up (stored in-app).
    case quotaExceeded
    /// Not sent: its send would have started after the notification's `ttl` ran out (counted from when the job
    /// entered the stream), so it would arrive, if at all, after it stopped meaning anything.
    case expired

    /// Short label for reports, metrics and CLI (`accepted`, `remove-token`, `retry`, …).
    public var label: String {
        switch self {
        case .accepted: "accepted"
        case .rejected(_, _, let action): action.rawValue
        case .failed: "failed"
        case .quotaExceeded: "quota_exceeded"
        case .expired: "expired"
        }
    }

    public var isAccepted: Bool { if case .accepted = self { true } else { false } }
}

/// A notification rejected before sending (over size, silent with alert, bad collapse id, …).
///
/// The providers' encoders throw it while preparing a job (the worker then dead-letters the job), and the API runs
/// the same preparation before it accepts a job, answering 400 with `field`.
public struct NotificationError: Error, Sendable, Hashable, CustomStringConvertible {
    public let reason: OutcomeReason
    public let message: String
    /// The notification's field at fault, as a job names it (`ttl`, `collapseId`, `localized.es`); nil for the
    /// notification as a whole (its encoded size, nothing to deliver).
    public let field: String?
    public init(_ reason: OutcomeReason, _ message: String, field: String? = nil) {
        self.reason = reason
        self.message = message
        self.field = field
    }
    public var description: String { "\(reason): \(message)" }
}

/// What becomes of a request written to a provider whose connection died before the answer came (it may have
/// reached the provider or not; nobody can tell).
public enum UnansweredSends: String, Sendable, Hashable, CaseIterable {
    /// Resent on another connection within `worker.providerOutageSeconds`, every push carrying a collapse identity
    /// so that a second arrival replaces the first on the device: none lost, none shown twice.
    case resend
    /// Failed `transport:written-unanswered` (at most once: no device sees it twice, some see it never).
    case fail
}
