import Foundation
import VolleyCore

/// The directory in memory, the twin of VolleyStore's `RedisDirectory` behind the same protocols: users, containers
/// (nested, cycles harmless), inactive users, attributes, segments and the apps' users with a device. A job's audience
/// is resolved by evaluating `Segment.matches` user by user over the org's known users, the rule the Redis index
/// answers with set operations, so the two can be compared.
public final class InMemoryDirectory: DirectoryResolver, UserAttributeReader, UserAttributeStore, @unchecked Sendable {
    struct Org {
        var kinds: [RecipientID: DirectoryKind] = [:]
        var members: [RecipientID: Set<RecipientID>] = [:]
        var inactive: Set<RecipientID> = []
        var attributes: [UserID: [String: String]] = [:]
        /// Directory user records and users given attributes: what `notExists` is relative to.
        var known: Set<UserID> = []
        var deviceUsers: [AppName: Set<UserID>] = [:]
        var segments: [SegmentID: Segment] = [:]
    }
    private let state = Locked<[OrgID: Org]>([:])

    public init() {}

    /// Adds records as `volley directory import` does: members are added, attributes (when given) replace.
    public func importRecords(_ records: [DirectoryRecord]) {
        state.withLock { all in
            for r in records {
                var o = all[r.org] ?? Org()
                o.kinds[r.id] = r.kind
                if r.kind == .user {
                    let user = UserID(r.id.rawValue)
                    o.known.insert(user)
                    if r.active == false { o.inactive.insert(r.id) } else { o.inactive.remove(r.id) }
                    if let a = r.attributes { o.attributes[user] = a.isEmpty ? nil : a }
                } else {
                    o.members[r.id, default: []].formUnion(r.members ?? [])
                    o.inactive.remove(r.id)
                }
                all[r.org] = o
            }
        }
    }

    /// `user` has a device in `app` (what `{"all": true}` reaches).
    public func addDeviceUser(org: OrgID, app: AppName, _ user: UserID) {
        state.withLock { $0[org, default: Org()].deviceUsers[app, default: []].insert(user) }
    }

    public func putSegment(org: OrgID, _ segment: Segment) {
        state.withLock { $0[org, default: Org()].segments[segment.id] = segment }
    }

    public func removeSegment(org: OrgID, id: SegmentID) -> Bool {
        state.withLock { $0[org]?.segments.removeValue(forKey: id) != nil }
    }

    public func segments(org: OrgID) -> [Segment] {
        state.withLock { ($0[org]?.segments.values).map(Array.init) ?? [] }.sorted { $0.id.rawValue < $1.id.rawValue }
    }

    // MARK: attributes

    public func attributes(org: OrgID, users: [UserID]) throws -> [[String: String]?] {
        state.withLock { all in users.map { all[org]?.attributes[$0] } }
    }

    public func attributes(org: OrgID, user: UserID) async throws -> [String: String]? {
        state.withLock { $0[org]?.attributes[user] }
    }

    public func setAttributes(org: OrgID, user: UserID, _ attributes: [String: String]) async throws {
        write(org: org, user: user, attributes)
    }

    /// Replaces one user's attributes (empty: removes them), as `PUT /v1/users/{user}/attributes` does.
    public func write(org: OrgID, user: UserID, _ attributes: [String: String]) {
        state.withLock { all in
            var o = all[org] ?? Org()
            o.attributes[user] = attributes.isEmpty ? nil : attributes
            o.known.insert(user)
            all[org] = o
        }
    }

    // MARK: resolution

    /// The active users `segment` matches now.
    public func count(org: OrgID, _ segment: Segment) -> Int {
        state.withLock { all in
            let o = all[org] ?? Org()
            return Self.segmentUsers(o, segment).filter { !o.inactive.contains(RecipientID($0.rawValue)) }.count
        }
    }

    public func open(org: OrgID, recipients: [RecipientID], scope: String) throws -> any UserBatches {
        try open(org: org, audience: Audience(include: recipients.map(RecipientEntry.id), app: ""), scope: scope)
    }

    public func open(org: OrgID, audience: Audience, scope: String) throws -> any UserBatches {
        let (users, summary) = resolve(org: org, audience: audience)
        return Batches(users.sorted { $0.rawValue < $1.rawValue }, summary: summary)
    }

    /// The audience's users and the resolution's summary.
    public func resolve(org: OrgID, audience: Audience) -> (Set<UserID>, ResolutionSummary) {
        state.withLock { all in
            let o = all[org] ?? Org()
            var summary = ResolutionSummary()
            let plain = o.kinds.isEmpty
            func users(_ entries: [RecipientEntry], counting: Bool) -> Set<UserID> {
                var out = Set<UserID>()
                for e in entries {
                    switch e {
                    case .id(let id):
                        switch plain ? .user : o.kinds[id] {
                        case nil: if !summary.unknown.contains(id) { summary.unknown.append(id) }
                        case .user?:
                            out.insert(UserID(id.rawValue))
                            if counting, o.inactive.contains(id), !summary.inactive.contains(id) {
                                summary.inactive.append(id)
                            }
                        case _?:
                            let (reached, containers) = Self.closure(o, id)
                            out.formUnion(reached)
                            if counting { summary.containers += containers }
                        }
                    case .segment(let id):
                        if let s = o.segments[id] {
                            out.formUnion(Self.segmentUsers(o, s))
                        } else {
                            let name = RecipientID(e.description)
                            if !summary.unknown.contains(name) { summary.unknown.append(name) }
                        }
                    case .all:
                        out.formUnion(o.deviceUsers[audience.app] ?? [])
                    }
                }
                return out
            }
            var reached = users(audience.include, counting: true)
            reached.subtract(users(audience.exclude, counting: false))
            reached = reached.filter {
                let id = RecipientID($0.rawValue)
                return !o.inactive.contains(id) && (o.kinds[id]?.isContainer != true)
            }
            summary.users = reached.count
            return (reached, summary)
        }
    }

    /// The users a container reaches (nested containers expanded once) and the containers visited.
    static func closure(_ o: Org, _ root: RecipientID) -> (Set<UserID>, Int) {
        var seen: Set<RecipientID> = [root]
        var frontier = [root]
        var users = Set<UserID>()
        while let next = frontier.popLast() {
            for m in o.members[next] ?? [] {
                if o.kinds[m]?.isContainer == true {
                    if seen.insert(m).inserted { frontier.append(m) }
                } else {
                    users.insert(UserID(m.rawValue))
                }
            }
        }
        return (users, seen.count)
    }

    /// The org's known users the segment matches (inactive ones included, as the index holds them).
    static func segmentUsers(_ o: Org, _ segment: Segment) -> Set<UserID> {
        Set(o.known.filter { segment.matches(o.attributes[$0]) })
    }

    final class Batches: UserBatches {
        var rest: ArraySlice<UserID>
        let summary: ResolutionSummary
        init(_ users: [UserID], summary: ResolutionSummary) {
            rest = users[...]
            self.summary = summary
        }
        func next(max: Int) throws -> [UserID]? {
            if rest.isEmpty { return nil }
            let take = rest.prefix(Swift.max(1, max))
            rest = rest.dropFirst(take.count)
            return Array(take)
        }
    }
}

/// `SegmentStore` over an `InMemoryDirectory`: definitions kept there, counts made by it.
public final class InMemorySegmentStore: SegmentStore {
    public let directory: InMemoryDirectory
    public init(directory: InMemoryDirectory) { self.directory = directory }

    public func put(org: OrgID, _ segment: Segment, maxCount: Int) async throws -> SegmentPut {
        let existing = directory.segments(org: org)
        if existing.contains(where: { $0.id == segment.id }) {
            directory.putSegment(org: org, segment)
            return .replaced(segment)
        }
        guard existing.count < maxCount else { return .limitReached }
        directory.putSegment(org: org, segment)
        return .created(segment)
    }
    public func segment(org: OrgID, id: SegmentID) async throws -> Segment? {
        directory.segments(org: org).first { $0.id == id }
    }
    public func delete(org: OrgID, id: SegmentID) async throws -> Bool { directory.removeSegment(org: org, id: id) }
    public func list(org: OrgID) async throws -> [Segment] { directory.segments(org: org) }
    public func count(org: OrgID, id: SegmentID) async throws -> Int? {
        guard let s = try await segment(org: org, id: id) else { return nil }
        return directory.count(org: org, s)
    }
}
