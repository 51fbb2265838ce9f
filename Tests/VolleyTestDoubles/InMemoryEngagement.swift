import Foundation
import VolleyCore

/// The in-memory twin of the engagement stores (`RedisMessageTracking` and `RedisInteractionRecorder`), and the test
/// oracle of the counting script: campaign mappings, the counted-interaction sets, the jobs' counts and the event
/// stream's entries, as the script writes them.
public final class InMemoryEngagement: MessageTrackingStore, InteractionRecorder, @unchecked Sendable {
    public struct Mapping: Sendable, Hashable {
        public var job: JobID
        public var app: AppName
        public var inbox: String?
        public init(job: JobID, app: AppName, inbox: String?) {
            self.job = job
            self.app = app
            self.inbox = inbox
        }
    }

    private struct State {
        var mappings: [String: Mapping] = [:]
        var engaged: [String: Set<String>] = [:]
        var counts: [String: [String: Int]] = [:]
        var stream: [[String: String]] = []
    }
    private let state = Locked(State())
    private let inbox: (any InboxRepository)?
    public let outage: StoreOutageSwitch

    public init(inbox: (any InboxRepository)? = nil, outage: StoreOutageSwitch = StoreOutageSwitch()) {
        self.inbox = inbox
        self.outage = outage
    }

    private static func key(_ org: OrgID, _ id: String) -> String { "\(org.rawValue)\u{1}\(id)" }

    public func register(org: OrgID, campaign: String, job: JobID, app: AppName, inbox: String?) throws {
        state.withLock { $0.mappings[Self.key(org, campaign)] = Mapping(job: job, app: app, inbox: inbox) }
    }

    /// The mapping of `campaign` in `org`.
    public func mapping(org: OrgID, campaign: String) -> Mapping? {
        state.withLock { $0.mappings[Self.key(org, campaign)] }
    }

    /// The counts of `job` in `org` (`opened`, `dismissed`, `action:<id>`, `opened:<minute>`).
    public func counts(org: OrgID, job: JobID) -> [String: Int] {
        state.withLock { $0.counts[Self.key(org, job.rawValue)] ?? [:] }
    }

    /// The event stream's entries so far, oldest first.
    public var streamEntries: [[String: String]] { state.withLock { $0.stream } }

    public func record(org: OrgID, app: AppName?, _ events: [Interaction]) async throws -> [InteractionResult] {
        try outage.check()
        var marks: [UserID: [String]] = [:]
        let results = state.withLock { s -> [InteractionResult] in
            events.map { e in
                guard let m = s.mappings[Self.key(org, e.messageID.campaign)], app == nil || m.app == app else {
                    return .unknown
                }
                let result: InteractionResult
                if s.engaged[Self.key(org, e.messageID.campaign), default: []].insert(e.dedupeMember).inserted {
                    let counts = Self.key(org, m.job.rawValue)
                    if let action = e.actionID, e.event == .action {
                        s.counts[counts, default: [:]]["action:\(action)", default: 0] += 1
                    } else {
                        s.counts[counts, default: [:]][e.event.rawValue, default: 0] += 1
                        if e.event == .opened { s.counts[counts, default: [:]]["opened:\(e.minute)", default: 0] += 1 }
                    }
                    var entry = [
                        "kind": "interaction", "org": org.rawValue, "job": m.job.rawValue,
                        "messageId": e.messageID.description, "event": e.event.rawValue,
                        "at": RFC3339.format(e.at, .milliseconds),
                    ]
                    entry["actionId"] = e.actionID
                    entry["user"] = e.user?.rawValue
                    s.stream.append(entry)
                    result = .accepted
                } else {
                    result = .duplicate
                }
                if e.event == .opened, let user = e.user, let entry = m.inbox {
                    marks[user, default: []].append(entry)
                }
                return result
            }
        }
        for (user, entries) in marks {
            try await inbox?.mark(org: org, user: user, InboxMark(.ids(Array(Set(entries))), read: true, seen: true))
        }
        return results
    }
}
