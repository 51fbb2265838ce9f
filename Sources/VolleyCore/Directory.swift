import Foundation

/// What a directory id is. The directory decides: a job's `recipients` may mix all kinds.
/// (Salesforce `customNotificationAction.recipientIds`: UserId, GroupId, QueueId, AccountId, OpportunityId.)
public enum DirectoryKind: String, Sendable, Hashable, Codable, CaseIterable, CustomStringConvertible {
    case user
    case group
    case queue
    case accountTeam
    case opportunityTeam

    /// Kinds with members (everything but a user).
    public var isContainer: Bool { self != .user }
    public var description: String { rawValue }
}

/// One line of `volley directory import`: `{"org","kind","id","active","members","attributes"}`.
public struct DirectoryRecord: Sendable, Hashable, Codable {
    public var org: OrgID
    public var kind: DirectoryKind
    public var id: RecipientID
    /// Users only; default true.
    public var active: Bool?
    /// Containers only: user ids (groups and queues may also name groups).
    public var members: [RecipientID]?
    /// Users only: the values templates name (`{"first_name": "Ada"}`), within `UserAttributes`' limits. Given, they
    /// replace the user's attributes (`{}` removes them); absent, the stored ones stay.
    public var attributes: [String: String]?

    /// The keys a record may carry; any other refuses the line, naming the key.
    public static let keys: Set<String> = ["org", "kind", "id", "active", "members", "attributes"]

    public init(
        org: OrgID, kind: DirectoryKind, id: RecipientID, active: Bool? = nil, members: [RecipientID]? = nil,
        attributes: [String: String]? = nil
    ) {
        self.org = org
        self.kind = kind
        self.id = id
        self.active = active
        self.members = members
        self.attributes = attributes
    }

    /// Problems that make the record unusable (empty id, members on a user, …), each saying what to fix.
    public func problems() -> [String] {
        var out: [String] = []
        if org.rawValue.isEmpty { out.append("org: must not be empty") }
        if id.rawValue.isEmpty { out.append("id: must not be empty") }
        if kind == .user, let m = members, !m.isEmpty { out.append("members: a user has no members (id \(id))") }
        if kind.isContainer, active != nil { out.append("active: only users have an active flag (id \(id))") }
        if let attributes {
            if kind.isContainer {
                out.append("attributes: only users have attributes (id \(id))")
            } else {
                out += UserAttributes.problems(attributes).map { "\($0) (id \(id))" }
            }
        }
        if let m = members, m.contains(where: { $0.rawValue.isEmpty }) {
            out.append("members: empty member id in \(id)")
        }
        return out
    }
}

/// What one resolution produced, for the job's report. User ids themselves are streamed, never collected here.
public struct ResolutionSummary: Sendable, Hashable, Codable {
    /// Distinct active users reached (after de-duplication across all recipients).
    public var users: Int
    /// Recipient ids the directory does not know (reported, not fatal).
    public var unknown: [RecipientID]
    /// Containers (groups, queues, teams) visited, nested ones included.
    public var containers: Int
    /// Recipient ids that name an inactive user directly.
    public var inactive: [RecipientID]

    public init(users: Int = 0, unknown: [RecipientID] = [], containers: Int = 0, inactive: [RecipientID] = []) {
        self.users = users
        self.unknown = unknown
        self.containers = containers
        self.inactive = inactive
    }
}

/// One resolution in progress: distinct active users handed out in batches, never held whole in memory.
public protocol UserBatches: AnyObject {
    /// Known once the resolution is prepared: users (total), unknown ids, containers, inactive direct users.
    var summary: ResolutionSummary { get }
    /// The next at most `max` users, each exactly once per resolution; nil when done.
    func next(max: Int) throws -> [UserID]?
}

/// Resolves recipient ids (users, groups, queues, account and opportunity teams, mixed) to distinct active users.
/// `scope` names the resolution (the job id or shard), so a redelivery restarts it from scratch.
public protocol DirectoryResolver: Sendable {
    func open(org: OrgID, recipients: [RecipientID], scope: String) throws -> any UserBatches
    /// A job's whole audience: its `recipients` (ids, segments, `all` of the app's users with a device) less its
    /// `exclude`, de-duplicated, containers and inactive users removed. Entries it cannot resolve (an unknown id, a
    /// segment the org does not have) go to the summary's `unknown` (`RecipientEntry.description`).
    func open(org: OrgID, audience: Audience, scope: String) throws -> any UserBatches
}

extension DirectoryResolver {
    /// A resolver of directory ids only: the audience's ids less its excluded ids; a segment or `all` is reported
    /// unknown.
    public func open(org: OrgID, audience: Audience, scope: String) throws -> any UserBatches {
        if audience.isPlainIDs, audience.exclude.isEmpty {
            return try open(org: org, recipients: audience.include.compactMap(\.recipientID), scope: scope)
        }
        let excluded = Set(audience.exclude.compactMap(\.recipientID))
        let ids = audience.include.compactMap(\.recipientID).filter { !excluded.contains($0) }
        let inner = try open(org: org, recipients: ids, scope: scope)
        let unresolved = (audience.include + audience.exclude).filter { $0.recipientID == nil }
        return UnresolvedEntries(inner, unknown: unresolved.map { RecipientID($0.description) })
    }
}

/// A resolution with entries its resolver could not answer added to the summary's unknown ids.
final class UnresolvedEntries: UserBatches {
    let inner: any UserBatches
    let summary: ResolutionSummary
    init(_ inner: any UserBatches, unknown: [RecipientID]) {
        self.inner = inner
        var s = inner.summary
        s.unknown += unknown
        summary = s
    }
    func next(max: Int) throws -> [UserID]? { try inner.next(max: max) }
}

/// Walks the container graph breadth-first from `roots`, asking `children` for one level at a time
/// (so an implementation can pipeline a level's lookups). Cycles and diamonds are harmless: each
/// container is expanded once. Returns every container reached, roots included, in visit order.
public enum ContainerClosure {
    public static func compute(
        roots: [RecipientID], maxContainers: Int = 1_000_000,
        children: ([RecipientID]) throws -> [[RecipientID]]
    ) throws -> [RecipientID] {
        var seen = Set<RecipientID>()
        var order: [RecipientID] = []
        var frontier: [RecipientID] = []
        for r in roots where seen.insert(r).inserted {
            frontier.append(r)
            order.append(r)
        }
        while !frontier.isEmpty {
            let kids = try children(frontier)
            var next: [RecipientID] = []
            for list in kids {
                for k in list where seen.insert(k).inserted {
                    next.append(k)
                    order.append(k)
                    if order.count > maxContainers {
                        throw DirectoryError(
                            "more than \(maxContainers) nested containers reached from \(roots.count) recipients; "
                                + "check the directory for a runaway import"
                        )
                    }
                }
            }
            frontier = next
        }
        return order
    }
}

/// A directory problem that says what to do.
public struct DirectoryError: Error, Sendable, Hashable, CustomStringConvertible {
    public let message: String
    public init(_ message: String) { self.message = message }
    public var description: String { message }
}

/// What resolving a job's recipients found besides its devices, for the report. Complete once the cursor has
/// returned its last chunk.
public struct RecipientFacts: Sendable, Hashable {
    /// Set when the job's notification type is disabled for its app (or unknown): nothing is sent or stored.
    public var notEnabledReason: String?
    /// Users whose in-app inbox received the notification (nil: the resolver keeps no inbox).
    public var inAppStored: Int?
    /// Recipient ids the directory did not know.
    public var unknownRecipientIDs: [RecipientID] = []
    /// > 0 when the job was split into this many shard jobs: the run acknowledges without a report of its own
    /// (the last shard publishes the parent's).
    public var shardedInto = 0
    /// Users the org's frequency caps held back (`JobReport.capped`); nil when no cap applied to the job.
    public var frequencyCapped: Int?
    public init(
        notEnabledReason: String? = nil, inAppStored: Int? = nil, unknownRecipientIDs: [RecipientID] = [],
        shardedInto: Int = 0
    ) {
        self.notEnabledReason = notEnabledReason
        self.inAppStored = inAppStored
        self.unknownRecipientIDs = unknownRecipientIDs
        self.shardedInto = shardedInto
    }
}
