import Foundation
import VolleyCore
import VolleyRedis

/// The per-org directory in Redis (layout in `RecipientKeys`) and the streaming resolver over it.
///
/// Resolution at campaign scale never loads the user set into this process:
/// 1. the recipient ids' kinds come from one HMGET (≤ 500 ids);
/// 2. the closure of containers (groups, queues, teams, nested to any depth; cycles harmless) is walked level by
///    level, each level's sub-containers found server-side with `SINTER members containers` (small answers);
/// 3. Redis unions every reached member set with the direct user ids into a per-resolution temporary set
///    (`SUNIONSTORE`, de-duplication happens there) and removes containers and inactive users (`SDIFFSTORE`);
/// An org without any directory record resolves recipient ids as user ids.
/// Segments are set operations on the attribute index (`SegmentSets`), `{"all": true}` the app's users with a device
/// (`volley:devusers:{org}:<app>`), both unioned into the same set; `exclude` is resolved the same way into a second
/// set and subtracted with the containers and inactive users.
/// 4. the set is drained `chunkSize` users at a time by `drainScript` (`SPOP` inside a script: exact, each user
///    once, unlike SSCAN, which may repeat elements). The script keeps the batch it popped under the step's name,
///    so a step the client sends again (after a timeout it cannot tell whether Redis ran the first one) answers
///    the same batch instead of popping, and losing, the next one. A redelivered job resolves again from scratch;
///    the outcome ledger skips finished devices.
public final class RedisDirectory: DirectoryResolver, UserAttributeReader, @unchecked Sendable {
    private let redis: SerializedRedis
    /// TTL of a resolution's temporary set (it is deleted when drained; this only bounds leftovers of a crash).
    public var resolutionTTLSeconds = 86_400
    /// Names the device registry's keys (`{"all": true}` reads the app's users with a device).
    let store: StoreConfiguration

    public init(client: RedisClient, store: StoreConfiguration = StoreConfiguration()) {
        redis = SerializedRedis(client)
        self.store = store
    }

    // MARK: import

    public struct ImportCounts: Sendable, Hashable, Codable {
        public var records = 0
        public var users = 0
        public var inactiveUsers = 0
        public var containers = 0
        public var memberships = 0
        /// User records that set attributes (an empty object, which removes them, is not counted).
        public var usersWithAttributes = 0
        public var byKind: [String: Int] = [:]
        public init() {}
    }

    /// Writes records, pipelined. Members are added to what a container already has (a big group may span many
    /// lines); an id imported with another kind takes the new kind. Throws `DirectoryError` for an invalid record.
    @discardableResult
    public func importRecords(_ records: [DirectoryRecord]) throws -> ImportCounts {
        var counts = ImportCounts()
        var commands: [[String]] = []
        commands.reserveCapacity(records.count * 2)
        // Attributes go through the index script after the pipeline, per org (its keys share the org's slot).
        var attributeWrites: [OrgID: [(RecipientID, [String: String])]] = [:]
        for r in records {
            let problems = r.problems()
            if !problems.isEmpty {
                throw DirectoryError("record \(r.kind) \(r.id): " + problems.joined(separator: "; "))
            }
            let k = RecipientKeys(org: r.org)
            counts.records += 1
            counts.byKind[r.kind.rawValue, default: 0] += 1
            commands.append(["HSET", k.kind, r.id.rawValue, r.kind.rawValue])
            if r.kind == .user {
                counts.users += 1
                commands.append(["SREM", k.containers, r.id.rawValue])
                if let attributes = r.attributes {
                    counts.usersWithAttributes += attributes.isEmpty ? 0 : 1
                    attributeWrites[r.org, default: []].append((r.id, attributes))
                } else {
                    commands.append(["SADD", k.attributeUsers, r.id.rawValue])
                }
                if r.active == false {
                    counts.inactiveUsers += 1
                    commands.append(["SADD", k.inactive, r.id.rawValue])
                } else {
                    commands.append(["SREM", k.inactive, r.id.rawValue])
                }
            } else {
                counts.containers += 1
                commands.append(["SADD", k.containers, r.id.rawValue])
                commands.append(["SREM", k.inactive, r.id.rawValue])
                let members = r.members ?? []
                counts.memberships += members.count
                var i = 0
                while i < members.count {
                    let end = min(members.count, i + 1000)
                    commands.append(["SADD", k.members(r.id)] + members[i..<end].map(\.rawValue))
                    i = end
                }
            }
        }
        try redis.with { c in
            let replies = try c.pipeline(commands)
            for (i, reply) in replies.enumerated() { try reply.throwIfError(commands[i].first ?? "") }
            for (org, users) in attributeWrites { try AttributeIndex.write(org: org, users, on: c) }
        }
        return counts
    }

    /// Replaces one user's attributes (empty: removes them), as the import does for a user record, and moves the
    /// user's entries in the attribute index in the same step.
    public func setAttributes(org: OrgID, user: UserID, _ attributes: [String: String]) throws {
        try redis.with { try AttributeIndex.write(org: org, [(RecipientID(user.rawValue), attributes)], on: $0) }
    }

    public struct ReindexCounts: Sendable, Hashable, Codable {
        /// Users whose stored attributes were indexed again.
        public var users = 0
        /// (user, attribute value) entries indexed.
        public var values = 0
        /// Users the org's known-users set holds afterwards (directory user records and users with attributes).
        public var knownUsers = 0
        public init() {}
    }

    /// Rebuilds the org's attribute index from the stored attributes and directory users (`volley segments
    /// reindex`): clears every index key the index's names and values sets list, then indexes each user's stored
    /// attributes again, `pageSize` users per step (`HSCAN`). For data written before the index existed, or after
    /// the attributes hash was changed by hand. While it runs, segments resolve against a partial index.
    @discardableResult
    public func reindexAttributes(
        org: OrgID, pageSize: Int = 500, progress: (ReindexCounts) -> Void = { _ in }
    ) throws -> ReindexCounts {
        let k = RecipientKeys(org: org)
        var counts = ReindexCounts()
        try redis.with { c in
            let names = (try c.checked(["SMEMBERS", k.attributeNames]).array ?? []).compactMap(\.string)
            for name in names {
                try Self.scan(c, ["SSCAN", k.attributeValues(name)], pageSize: pageSize) { values in
                    let keys = values.map { k.attributeEquals(name, $0) }
                    if !keys.isEmpty { _ = try c.checked(["DEL"] + keys) }
                }
                _ = try c.checked([
                    "DEL", k.attributeValues(name), k.attributeHas(name), k.attributeScores(name, .number),
                    k.attributeScores(name, .instant),
                ])
            }
            _ = try c.checked(["DEL", k.attributeNames, k.attributeUsers])
            // Directory users: every id of kind user.
            try Self.scan(c, ["HSCAN", k.kind], pageSize: pageSize) { pairs in
                var users: [String] = []
                var i = 0
                while i + 1 < pairs.count {
                    if pairs[i + 1] == DirectoryKind.user.rawValue { users.append(pairs[i]) }
                    i += 2
                }
                if !users.isEmpty { _ = try c.checked(["SADD", k.attributeUsers] + users) }
            }
            try Self.scan(c, ["HSCAN", k.attributes], pageSize: pageSize) { pairs in
                var batch: [(RecipientID, [String: String])] = []
                var i = 0
                while i + 1 < pairs.count {
                    let read = Self.attributes(json: pairs[i + 1])
                    if let read {
                        batch.append((RecipientID(pairs[i]), read))
                        counts.values += read.count
                    }
                    i += 2
                }
                counts.users += batch.count
                try AttributeIndex.write(org: org, batch, rebuild: true, on: c)
                progress(counts)
            }
            counts.knownUsers = try c.checked(["SCARD", k.attributeUsers]).int("SCARD")
        }
        return counts
    }

    /// Walks a `SSCAN` or `HSCAN` (`command` without its cursor) page by page; `visit` gets each page's elements.
    static func scan(
        _ c: RedisClient, _ command: [String], pageSize: Int, _ visit: ([String]) throws -> Void
    ) throws {
        var cursor = "0"
        repeat {
            let r = try c.checked(command + [cursor, "COUNT", String(max(1, pageSize))])
            guard let parts = r.array, parts.count == 2 else {
                throw RedisError(.unexpectedReply, "\(command.first ?? "SCAN") returned \(r)")
            }
            cursor = parts[0].string ?? "0"
            let elements = (parts[1].array ?? []).compactMap(\.string)
            if !elements.isEmpty { try visit(elements) }
        } while cursor != "0"
    }

    /// Removes a container's members (before re-importing it whole).
    public func clearMembers(org: OrgID, id: RecipientID) throws {
        _ = try redis.with { try $0.checked(["DEL", RecipientKeys(org: org).members(id)]) }
    }

    // MARK: lookups

    public func kinds(org: OrgID, ids: [RecipientID]) throws -> [DirectoryKind?] {
        if ids.isEmpty { return [] }
        let k = RecipientKeys(org: org)
        let reply = try redis.with { try $0.checked(["HMGET", k.kind] + ids.map(\.rawValue)) }
        guard let a = reply.array, a.count == ids.count else {
            throw RedisError(.unexpectedReply, "HMGET kinds: \(reply)")
        }
        return a.map { $0.string.flatMap(DirectoryKind.init(rawValue:)) }
    }

    public struct Entry: Sendable, Hashable {
        public var id: RecipientID
        public var kind: DirectoryKind?
        public var active: Bool
        public var directMembers: Int
        public var sampleMembers: [RecipientID]
        public var resolvedUsers: Int
        public var sampleUsers: [UserID]
        public var nestedContainers: Int
    }

    /// What one id is and resolves to (`volley directory show`). Resolution runs server-side into a temporary set.
    public func show(org: OrgID, id: RecipientID, sample: Int = 10) throws -> Entry {
        let k = RecipientKeys(org: org)
        let kind = try kinds(org: org, ids: [id]).first ?? nil
        let (directMembers, sampleMembers, inactive): (Int, [RecipientID], Bool) = try redis.with { c in
            let r = try c.pipeline([
                ["SCARD", k.members(id)], ["SRANDMEMBER", k.members(id), String(sample)],
                ["SISMEMBER", k.inactive, id.rawValue],
            ])
            return (
                try r[0].int("SCARD"), (r[1].array ?? []).compactMap { $0.string.map(RecipientID.init) },
                try r[2].int("SISMEMBER") == 1
            )
        }
        let scope = "show:\(UUID().uuidString)"
        let (count, closure) = try prepare(org: org, recipients: [id], scope: scope)
        let tmp = k.resolution(scope)
        let users: [UserID] = try redis.with { c in
            let r = try c.pipeline([["SRANDMEMBER", tmp, String(sample)], ["DEL", tmp]])
            return (r[0].array ?? []).compactMap { $0.string.map(UserID.init) }
        }
        return Entry(
            id: id, kind: kind, active: !inactive, directMembers: directMembers, sampleMembers: sampleMembers,
            resolvedUsers: count.users, sampleUsers: users.sorted { $0.rawValue < $1.rawValue },
            nestedContainers: max(0, closure - (kind?.isContainer == true ? 1 : 0)))
    }

    // MARK: attributes

    /// Every user's attributes in one `HMGET` (one round trip per chunk of users).
    public func attributes(org: OrgID, users: [UserID]) throws -> [[String: String]?] {
        if users.isEmpty { return [] }
        let command = Self.attributesRead(org: org, users: users)
        let reply = try redis.with { try $0.checked(command) }
        return try Self.attributes(from: reply, count: users.count)
    }

    /// The read of `users`' attributes, for a caller that sends it in a pipeline of its own.
    public static func attributesRead(org: OrgID, users: [UserID]) -> [String] {
        ["HMGET", RecipientKeys(org: org).attributes] + users.map(\.rawValue)
    }

    /// `attributesRead`'s reply, one entry per user. A stored value that is not an object of strings (written by
    /// hand) reads as no attributes: one bad record must not stop a campaign.
    public static func attributes(from reply: RedisReply, count: Int) throws -> [[String: String]?] {
        try reply.throwIfError("HMGET attributes")
        guard let values = reply.array, values.count == count else {
            throw RedisError(.unexpectedReply, "HMGET attributes: \(reply)")
        }
        return values.map { $0.string.flatMap(Self.attributes(json:)) }
    }

    /// One stored attributes value; nil when it is not a JSON object of strings.
    static func attributes(json text: String) -> [String: String]? {
        guard let json = try? JSONValue(parsing: text), let object = json.objectValue else { return nil }
        var out: [String: String] = [:]
        out.reserveCapacity(object.count)
        for (key, v) in object {
            guard let s = v.stringValue else { return nil }
            out[key] = s
        }
        return out
    }

    // MARK: resolution

    public func open(org: OrgID, recipients: [RecipientID], scope: String) throws -> any UserBatches {
        try open(org: org, audience: Audience(include: recipients.map(RecipientEntry.id), app: ""), scope: scope)
    }

    public func open(org: OrgID, audience: Audience, scope: String) throws -> any UserBatches {
        let (summary, _) = try prepare(org: org, audience: audience, scope: scope)
        let k = RecipientKeys(org: org)
        return Batches(
            directory: self, keys: RedisKeyGroups.directoryDrain(org: org, scope: scope), summary: summary,
            description: k.resolution(scope))
    }

    /// One step of a resolution's drain. KEYS[1] the resolution set, KEYS[2] its last batch (a hash: `step`,
    /// `batch`); ARGV[1] the step's name (unique per drain and step), ARGV[2] how many users, ARGV[3] the TTL.
    /// The same step sent twice answers the same batch: every command the client sends again after a lost or
    /// timed-out connection must be safe to repeat, and a bare SPOP is not (the first one's users would be lost).
    /// The last batch is dropped with the set when the drain ends.
    static let drainScript = RedisScript(
        """
        if redis.call('HGET', KEYS[2], 'step') == ARGV[1] then
          return cjson.decode(redis.call('HGET', KEYS[2], 'batch'))
        end
        local users = redis.call('SPOP', KEYS[1], tonumber(ARGV[2]))
        if #users == 0 then
          redis.call('DEL', KEYS[2])
          return users
        end
        redis.call('HSET', KEYS[2], 'step', ARGV[1], 'batch', cjson.encode(users))
        redis.call('EXPIRE', KEYS[2], ARGV[3])
        return users
        """)

    /// Runs one drain step (`drainScript`); `step` names it, so sending it again answers the same users.
    func drainStep(keys: [String], step: String, max: Int) throws -> [UserID] {
        let reply = try redis.with {
            try $0.eval(
                Self.drainScript, keys: keys, args: [step, String(Swift.max(1, max)), String(resolutionTTLSeconds)])
        }
        try reply.throwIfError("drain \(keys.first ?? "")")
        return (reply.array ?? []).compactMap { $0.string.map(UserID.init) }
    }

    /// Drains a resolution in chunks of `chunkSize` (convenience over `open`).
    @discardableResult
    public func resolve(
        org: OrgID, recipients: [RecipientID], scope: String, chunkSize: Int,
        _ body: ([UserID]) throws -> Void
    ) throws -> ResolutionSummary {
        let b = try open(org: org, recipients: recipients, scope: scope)
        while let users = try b.next(max: chunkSize) { try body(users) }
        return b.summary
    }

    final class Batches: UserBatches {
        let directory: RedisDirectory
        let keys: [String]
        let summary: ResolutionSummary
        let description: String
        /// Names this drain's steps: two deliveries of one job draining the same set never answer each other's
        /// batches.
        let drainID = UUID().uuidString
        var step = 0
        var done = false
        var drained = 0
        init(directory: RedisDirectory, keys: [String], summary: ResolutionSummary, description: String) {
            self.directory = directory
            self.keys = keys
            self.summary = summary
            self.description = description
        }
        func next(max: Int) throws -> [UserID]? {
            if done { return nil }
            step += 1
            let users = try directory.drainStep(keys: keys, step: "\(drainID):\(step)", max: max)
            if users.isEmpty {
                done = true
                // The set is gone before every user came out: Redis lost it (a restart without persistence, a
                // failover to a replica that had not received it, eviction). Fail the run so the job is redelivered
                // and resolved again; never finish it short.
                if drained < summary.users {
                    throw DirectoryError(
                        "resolution \(description) vanished after \(drained) of \(summary.users) users: Redis lost "
                            + "the key (restart without persistence, failover or eviction); the job will be resolved "
                            + "again on redelivery"
                    )
                }
                return nil
            }
            drained += users.count
            return users
        }
    }

    /// Builds the resolution's temporary set; returns the summary (users = its size) and the containers reached.
    func prepare(org: OrgID, recipients: [RecipientID], scope: String) throws -> (ResolutionSummary, Int) {
        try prepare(org: org, audience: Audience(include: recipients.map(RecipientEntry.id), app: ""), scope: scope)
    }

    /// Builds the resolution's temporary set for an audience: the included ids' users and containers' members, the
    /// included segments' users and (`all`) the app's users with a device, less the excluded ids' and segments'
    /// users, containers and inactive users. One pipeline for plain ids; each segment adds its own steps. Returns the
    /// summary (users = the set's size) and the containers reached from the included ids.
    func prepare(org: OrgID, audience: Audience, scope: String) throws -> (ResolutionSummary, Int) {
        let k = RecipientKeys(org: org)
        var summary = ResolutionSummary()
        var seen = Set<RecipientID>()
        let ids = audience.include.compactMap(\.recipientID).filter { seen.insert($0).inserted }
        seen = []
        let excludedIDs = audience.exclude.compactMap(\.recipientID).filter { seen.insert($0).inserted }
        var kinds = try self.kinds(org: org, ids: ids + excludedIDs)
        // An org that never imported a directory keeps the plain meaning: recipients are user ids.
        if kinds.contains(where: { $0 == nil }),
            try redis.with({ try $0.checked(["EXISTS", k.kind]) }).integer == 0
        {
            kinds = kinds.map { $0 ?? .user }
        }
        var users: [RecipientID] = []
        var roots: [RecipientID] = []
        var excludedUsers: [RecipientID] = []
        var excludedRoots: [RecipientID] = []
        for (n, (id, kind)) in zip(ids + excludedIDs, kinds).enumerated() {
            let excluded = n >= ids.count
            switch kind {
            case nil: if !summary.unknown.contains(id) { summary.unknown.append(id) }
            case .user?: if excluded { excludedUsers.append(id) } else { users.append(id) }
            case _?: if excluded { excludedRoots.append(id) } else { roots.append(id) }
            }
        }
        let closure = try containerClosure(k, roots: roots)
        let excludedClosure = try containerClosure(k, roots: excludedRoots)
        summary.containers = closure.count
        var segmentIDs: [SegmentID] = []
        for entry in audience.include + audience.exclude {
            if let id = entry.segmentID, !segmentIDs.contains(id) { segmentIDs.append(id) }
        }
        let segments = try self.segments(org: org, ids: segmentIDs)
        for id in segmentIDs where segments[id] == nil {
            summary.unknown.append(RecipientID(RecipientEntry.segment(id).description))
        }
        func segmentsOf(_ entries: [RecipientEntry]) -> [Segment] {
            var out: [Segment] = []
            for e in entries {
                if let id = e.segmentID, let s = segments[id], !out.contains(where: { $0.id == id }) { out.append(s) }
            }
            return out
        }
        let included = segmentsOf(audience.include)
        let excludedSegments = segmentsOf(audience.exclude)
        let excludes = !excludedUsers.isEmpty || !excludedClosure.isEmpty || !excludedSegments.isEmpty
        let tmp = k.resolution(scope)
        let exclusion = k.resolutionExclusion(scope)
        let ttl = String(resolutionTTLSeconds)
        var commands: [[String]] = [["DEL", tmp, k.resolutionLastBatch(scope), exclusion]]
        func union(into set: String, containers: [RecipientID], users: [RecipientID]) {
            var i = 0
            while i < containers.count {
                let end = min(containers.count, i + 256)
                commands.append(["SUNIONSTORE", set, set] + containers[i..<end].map { k.members($0) })
                i = end
            }
            i = 0
            while i < users.count {
                let end = min(users.count, i + 1000)
                commands.append(["SADD", set] + users[i..<end].map(\.rawValue))
                i = end
            }
            if !containers.isEmpty || !users.isEmpty { commands.append(["EXPIRE", set, ttl]) }
        }
        // One source alone (a segment, or the app's users) is not copied first: the last SDIFFSTORE, which removes
        // containers, inactive and excluded users anyway, builds the resolution from it in one pass.
        let all = audience.include.contains(.all)
        let alone = users.isEmpty && closure.isEmpty && included.count + (all ? 1 : 0) == 1
        var source = SegmentSets.Expression(base: tmp)
        if !alone {
            union(into: tmp, containers: closure, users: users)
            if all { commands.append(["SUNIONSTORE", tmp, tmp, store.usersKey(org, audience.app)]) }
        } else if all {
            source.base = store.usersKey(org, audience.app)
        }
        union(into: exclusion, containers: excludedClosure, users: excludedUsers)
        let replies: [RedisReply] = try redis.with { c in
            var n = 0
            for (list, set) in [(included, tmp), (excludedSegments, exclusion)] {
                for segment in list {
                    if !commands.isEmpty {
                        try SegmentSets.run(commands, on: c)
                        commands = []
                    }
                    let sets = SegmentSets(
                        keys: k, scratch: k.resolutionScratch(scope, n), ttlSeconds: resolutionTTLSeconds)
                    if alone, set == tmp {
                        source = try sets.expression(segment, on: c)
                    } else {
                        try sets.add(segment, to: set, on: c)
                    }
                    n += 1
                }
            }
            commands.append(
                ["SDIFFSTORE", tmp, source.base] + source.minus + [k.containers, k.inactive]
                    + (excludes ? [exclusion] : []))
            if excludes { commands.append(["DEL", exclusion]) }
            if !source.temporary.isEmpty { commands.append(["DEL"] + source.temporary) }
            commands.append(["EXPIRE", tmp, ttl])
            commands.append(["SCARD", tmp])
            if !users.isEmpty { commands.append(["SMISMEMBER", k.inactive] + users.map(\.rawValue)) }
            let replies = try c.pipeline(commands)
            for (j, r) in replies.enumerated() { try r.throwIfError(commands[j].first ?? "") }
            return replies
        }
        let cardIndex = users.isEmpty ? replies.count - 1 : replies.count - 2
        summary.users = try replies[cardIndex].int("SCARD")
        if !users.isEmpty, let flags = replies[replies.count - 1].array {
            for (u, f) in zip(users, flags) where f.integer == 1 { summary.inactive.append(u) }
        }
        return (summary, closure.count)
    }

    /// Every container reached from `roots`, level by level (`SINTER members containers`, pipelined).
    private func containerClosure(_ k: RecipientKeys, roots: [RecipientID]) throws -> [RecipientID] {
        if roots.isEmpty { return [] }
        return try ContainerClosure.compute(roots: roots) { level in
            try redis.with { c in
                let replies = try c.pipeline(level.map { ["SINTER", k.members($0), k.containers] })
                return try replies.map { r in
                    try r.throwIfError("SINTER")
                    return (r.array ?? []).compactMap { $0.string.map(RecipientID.init) }
                }
            }
        }
    }

    // MARK: segments

    /// The org's segments of `ids` (one `HMGET`); a stored definition that no longer reads (written by hand) is left
    /// out, as an unknown segment.
    public func segments(org: OrgID, ids: [SegmentID]) throws -> [SegmentID: Segment] {
        if ids.isEmpty { return [:] }
        let reply = try redis.with {
            try $0.checked(["HMGET", RecipientKeys(org: org).segments] + ids.map(\.rawValue))
        }
        guard let values = reply.array, values.count == ids.count else {
            throw RedisError(.unexpectedReply, "HMGET segments: \(reply)")
        }
        var out: [SegmentID: Segment] = [:]
        for (id, value) in zip(ids, values) {
            if let text = value.string, let s = RedisSegmentStore.segment(id: id, json: text) { out[id] = s }
        }
        return out
    }
}
