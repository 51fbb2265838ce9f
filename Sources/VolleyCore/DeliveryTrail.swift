import Foundation

/// What a delivery leaves behind for those who look back at it: each device outcome, and each user it skipped at
/// resolution, as one entry on the event stream (docs/events.md) and one line of the user's delivery history
/// (`GET /v1/users/{user}/deliveries`). Written with the outcomes (`OutcomeLedger.noteTrail`) in the transaction that
/// records them, so each is told exactly once across crashes and redeliveries.
public struct DeliveryTrail: Sendable {
    public let org: OrgID
    /// The job whose counts and report the outcomes go to: the campaign (a shard's parent).
    public let campaign: JobID
    public let app: AppName
    /// The pushes' message ids (nil: the delivery sends none), so a consumer joins outcomes with interactions.
    public let tracking: MessageTracking?

    public init(org: OrgID, campaign: JobID, app: AppName, tracking: MessageTracking?) {
        self.org = org
        self.campaign = campaign
        self.app = app
        self.tracking = tracking
    }
}

/// Why a user of a job's audience got no push at all, as the history and the event stream name it.
public enum SkippedRecipient: String, Sendable, CaseIterable {
    /// A frequency cap held the user (the notification went to the in-app inbox only).
    case capped
    /// The user has no registered device for the job's app.
    case noDevice
}

/// One line of a user's delivery history: one device's outcome of one job, or the user skipped by it.
public struct DeliveryRecord: Sendable, Encodable, Equatable {
    /// The job as its sender names it (a campaign's shards show the campaign).
    public var job: String
    /// When the outcome was recorded, RFC 3339 in UTC with milliseconds.
    public var at: String
    /// `ios` or `android`; absent for a skipped user.
    public var platform: String?
    /// The device token's last 8 characters after `…`; absent for a skipped user.
    public var device: String?
    /// `accepted`, `rejected`, `failed`, `quotaExceeded`, `expired`, `capped` or `noDevice`.
    public var outcome: String
    /// The provider's reason of a rejected or failed push (`BadDeviceToken`, `UNREGISTERED`, …).
    public var reason: String?

    public init(
        job: String, at: String, platform: String? = nil, device: String? = nil, outcome: String, reason: String? = nil
    ) {
        self.job = job
        self.at = at
        self.platform = platform
        self.device = device
        self.outcome = outcome
        self.reason = reason
    }

    /// The history's and the event stream's name of an outcome.
    public static func outcomeName(_ outcome: DeliveryOutcome) -> String {
        switch outcome {
        case .accepted: "accepted"
        case .rejected: "rejected"
        case .failed: "failed"
        case .quotaExceeded: "quotaExceeded"
        case .expired: "expired"
        }
    }

    /// The provider's reason of a rejected or failed outcome.
    public static func reason(_ outcome: DeliveryOutcome) -> String? {
        switch outcome {
        case .rejected(_, let reason, _), .failed(let reason, _): reason.rawValue
        case .accepted, .quotaExceeded, .expired: nil
        }
    }

    /// How the history and the CSV export show a device: `…` and at most the token's last 8 characters, never more
    /// than half of it (a token of 8 characters or fewer shows nothing): enough to match a device a support engineer
    /// holds without handing out tokens that can be pushed to.
    public static func redacted(_ token: DeviceToken) -> String {
        // Tokens are ASCII (hex for APNs, FCM's base64url-like alphabet): counted in bytes, no grapheme walk.
        let t = token.rawValue.utf8
        if t.count <= 8 { return "…" }
        return "…" + (String(t.suffix(min(8, t.count / 2))) ?? "")
    }
}

/// `GET /v1/users/{user}/deliveries` and `volley deliveries --user`: a user's recent notifications, newest first.
public protocol DeliveryHistoryReader: Sendable {
    /// Up to `limit` lines of the user's history recorded at or after `since` (nil: all that are kept), newest first.
    func deliveries(org: OrgID, user: UserID, since: Date?, limit: Int) async throws -> [DeliveryRecord]
}
