import Foundation

// Engagement feedback: what people did with a push (opened it, dismissed it, tapped one of its actions), reported by
// the app with the push's message id (`MessageTracking`) and counted once per device and event into the job's
// counts. The worker names which job a message id's campaign counts for; the API records the interactions.

/// Where the worker writes, once per tracked delivery, which job a message id's campaign counts for.
public protocol MessageTrackingStore: Sendable {
    /// Maps `campaign` (`MessageTracking.campaign`) of `org` to `job` (the job whose counts the interactions go to:
    /// a campaign shard's parent), its `app` and the in-app entry the job stored (`inbox`, nil: none), for as long as
    /// the job's outcome ledger lives. Idempotent: every delivery of the job writes the same.
    func register(org: OrgID, campaign: String, job: JobID, app: AppName, inbox: String?) throws
}

/// What a person did with a push.
public enum InteractionEvent: String, Sendable, Hashable, CaseIterable {
    /// Opened the app from the notification.
    case opened
    /// Dismissed the notification without opening it.
    case dismissed
    /// Tapped one of the notification's action buttons (`actionId`).
    case action
}

/// One reported interaction, checked.
public struct Interaction: Sendable, Hashable {
    public var messageID: MessageID
    public var event: InteractionEvent
    /// The action's id, for `action` only.
    public var actionID: String?
    /// When it happened (what the app said, never later than when it was received).
    public var at: Date
    /// The person: the user token's user, or the `userId` a backend relaying the event gave; nil when unknown.
    public var user: UserID?

    public init(messageID: MessageID, event: InteractionEvent, actionID: String? = nil, at: Date, user: UserID? = nil) {
        self.messageID = messageID
        self.event = event
        self.actionID = actionID
        self.at = at
        self.user = user
    }

    /// What makes a replay the same interaction: the device's message id, the event and the action.
    public var dedupeMember: String {
        "\(messageID.device):\(event.rawValue)" + (actionID.map { ":\($0)" } ?? "")
    }

    /// The minute of `at` since 1970 (floor(ms / 60000)), the bucket of the job's per-minute `opened:<minute>`.
    public var minute: Int64 { Int64((at.timeIntervalSince1970 * 1000).rounded(.down)) / 60_000 }
}

/// How a batch of interactions was taken.
public struct InteractionTally: Sendable, Hashable, Codable {
    /// Counted now.
    public var accepted = 0
    /// Counted before (the same device, event and action): not counted again.
    public var duplicates = 0
    /// Their message id names no campaign of the caller's org (never sent, another org's, expired with its job's
    /// ledger, or another app's when the caller is an app user).
    public var unknown = 0
    public init(accepted: Int = 0, duplicates: Int = 0, unknown: Int = 0) {
        self.accepted = accepted
        self.duplicates = duplicates
        self.unknown = unknown
    }
}

/// How one interaction of a batch was taken.
public enum InteractionResult: Sendable, Hashable {
    case accepted
    case duplicate
    case unknown
}

/// Records interactions: each counted at most once per (message id, event, action) into the job's counts
/// (`opened`, `dismissed`, `action:<id>`, `opened:<minute>`), put on the event stream once, and an `opened` of a
/// notification whose job stored an in-app entry marks that entry read for its user.
public protocol InteractionRecorder: Sendable {
    /// Records `events` of `org`'s pushes. `app`: only campaigns of this app are known (an app user's batch); nil
    /// takes every app of the org (a backend's). Answers each event's result, in order.
    func record(org: OrgID, app: AppName?, _ events: [Interaction]) async throws -> [InteractionResult]
}

extension InteractionTally {
    /// The tally of `results`.
    public init(_ results: [InteractionResult]) {
        self.init()
        for r in results {
            switch r {
            case .accepted: accepted += 1
            case .duplicate: duplicates += 1
            case .unknown: unknown += 1
            }
        }
    }
}

extension JobStatus {
    /// `opened`, `dismissed` and each action's taps from the fields of the job's live counts (`opened`,
    /// `dismissed`, `action:<id>`); left nil where nothing was counted.
    public mutating func addEngagement(fields: [(String, String)]) {
        var taps: [String: Int] = [:]
        for (field, value) in fields {
            guard let n = Int(value) else { continue }
            if field == "opened" {
                opened = n
            } else if field == "dismissed" {
                dismissed = n
            } else if field.hasPrefix("action:") {
                taps[String(field.dropFirst("action:".count))] = n
            }
        }
        if !taps.isEmpty { actions = taps }
    }
}
