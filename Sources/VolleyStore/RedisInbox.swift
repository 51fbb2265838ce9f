import Foundation
import VolleyCore
import VolleyRedis

/// In-app notifications in Redis (layout in `RecipientKeys`). A notification's content is stored once; each user
/// gets its id in three sorted sets (all, unread, unseen) scored by creation time, so status is two ZCARDs and two
/// ZRANGEs. A campaign's delivery is one script call per chunk of users (pipelined), idempotent per (user, id).
public final class RedisInboxStore: InboxStore, @unchecked Sendable {
    private let redis: SerializedRedis
    private let clock: any WallClock
    public let retention: InboxRetention
    /// Users per delivery script call.
    public var usersPerCall = 500

    public init(client: RedisClient, retention: InboxRetention = InboxRetention(), clock: any WallClock = SystemClock())
    {
        redis = SerializedRedis(client)
        self.retention = retention
        self.clock = clock
    }

    private static func ms(_ d: Date) -> Int64 { Int64((d.timeIntervalSince1970 * 1000).rounded()) }
    private static func date(_ ms: Int64) -> Date { Date(timeIntervalSince1970: Double(ms) / 1000) }

    @discardableResult
    public func deliver(org: OrgID, content: InboxContent, to users: [UserID]) throws -> [Int] {
        if users.isEmpty { return [] }
        let k = RecipientKeys(org: org)
        let now = clock.now()
        let ttl = String(retention.maxAgeSeconds)
        let created = String(Self.ms(content.createdAt))
        let minScore = String(Self.ms(now) - Int64(retention.maxAgeSeconds) * 1000)
        var fields = ["title", content.title, "body", content.body, "created", created]
        if let t = content.type { fields += ["type", t] }
        if let t = content.target { fields += ["target", t] }
        if let t = content.targetPageRef { fields += ["targetPageRef", t] }
        return try redis.with { c in
            // Content first (idempotent HSET), then the per-user entries in script calls of `usersPerCall`.
            let head = try c.pipeline([
                ["HSET", k.inboxContent(content.id)] + fields, ["EXPIRE", k.inboxContent(content.id), ttl],
            ])
            for r in head { try r.throwIfError("inbox content") }
            var unseen: [Int] = []
            unseen.reserveCapacity(users.count)
            var i = 0
            while i < users.count {
                let end = min(users.count, i + usersPerCall)
                let r = try c.eval(
                    RecipientScripts.inboxDeliver,
                    keys: RedisKeyGroups.inboxDeliver(org: org, notification: content.id),
                    args: [k.inboxUserPrefix, content.id, created, String(retention.maxCount), minScore, ttl]
                        + users[i..<end].map(\.rawValue))
                try r.throwIfError("inbox deliver")
                let counts = r.array ?? []
                guard counts.count == end - i else {
                    throw RedisError(
                        .unexpectedReply, "inbox deliver answered \(counts.count) counts for \(end - i) users")
                }
                for n in counts { unseen.append(Int(n.integer ?? 0)) }
                i = end
            }
            return unseen
        }
    }

    public func unseenCounts(org: OrgID, users: [UserID]) throws -> [Int] {
        if users.isEmpty { return [] }
        let k = RecipientKeys(org: org)
        return try redis.with { c in
            try c.pipeline(users.map { ["ZCARD", k.inbox($0, "unseen")] }).map { r in
                try r.throwIfError("inbox unseen count")
                return Int(r.integer ?? 0)
            }
        }
    }

    public func list(org: OrgID, user: UserID, size: Int, before: Date?) throws -> [InboxNotification] {
        try list(org: org, user: user, size: size, before: before, after: nil)
    }

    /// Newest first, strictly between `after` and `before` (each optional), at most `size`.
    public func list(org: OrgID, user: UserID, size: Int, before: Date?, after: Date?) throws -> [InboxNotification] {
        let k = RecipientKeys(org: org)
        let max = before.map { "(" + String(Self.ms($0)) } ?? "+inf"
        let min = after.map { "(" + String(Self.ms($0)) } ?? "-inf"
        let n = Swift.max(1, size)
        return try redis.with { c in
            let ids = try c.checked([
                "ZREVRANGEBYSCORE", k.inbox(user, "all"), max, min, "WITHSCORES", "LIMIT", "0", String(n),
            ])
            let flat = ids.array ?? []
            var entries: [(String, Int64)] = []
            var i = 0
            while i + 1 < flat.count {
                if let id = flat[i].string, let s = flat[i + 1].string, let d = Double(s) {
                    entries.append((id, Int64(d)))
                }
                i += 2
            }
            if entries.isEmpty { return [] }
            var cmds: [[String]] = []
            for (id, _) in entries {
                cmds.append(["HGETALL", k.inboxContent(id)])
                cmds.append(["ZSCORE", k.inbox(user, "unread"), id])
                cmds.append(["ZSCORE", k.inbox(user, "unseen"), id])
            }
            let r = try c.pipeline(cmds)
            var out: [InboxNotification] = []
            for (j, (id, created)) in entries.enumerated() {
                let f = Dictionary(r[3 * j].fieldPairs, uniquingKeysWith: { a, _ in a })
                if f.isEmpty { continue } // content expired: the entry goes with the next trim
                out.append(
                    InboxNotification(
                        id: id, type: f["type"], title: f["title"] ?? "", body: f["body"] ?? "",
                        target: f["target"], targetPageRef: f["targetPageRef"],
                        createdAt: Self.date(created),
                        read: r[3 * j + 1].isNull, seen: r[3 * j + 2].isNull))
            }
            return out
        }
    }

    /// One notification of the user's inbox, or nil when the user has none with this id (or its content expired).
    public func notification(org: OrgID, user: UserID, id: String) throws -> InboxNotification? {
        let k = RecipientKeys(org: org)
        let r = try redis.with { c in
            try c.pipeline([
                ["ZSCORE", k.inbox(user, "all"), id], ["HGETALL", k.inboxContent(id)],
                ["ZSCORE", k.inbox(user, "unread"), id], ["ZSCORE", k.inbox(user, "unseen"), id],
            ])
        }
        for x in r { try x.throwIfError("inbox notification") }
        guard let s = r[0].string, let created = Double(s) else { return nil }
        let f = Dictionary(r[1].fieldPairs, uniquingKeysWith: { a, _ in a })
        if f.isEmpty { return nil }
        return InboxNotification(
            id: id, type: f["type"], title: f["title"] ?? "", body: f["body"] ?? "", target: f["target"],
            targetPageRef: f["targetPageRef"], createdAt: Self.date(Int64(created)), read: r[2].isNull,
            seen: r[3].isNull)
    }

    public func status(org: OrgID, user: UserID) throws -> InboxStatus {
        let k = RecipientKeys(org: org)
        let r = try redis.with { c in
            try c.pipeline([
                ["ZCARD", k.inbox(user, "unread")], ["ZCARD", k.inbox(user, "unseen")],
                ["ZRANGE", k.inbox(user, "unread"), "0", "0", "WITHSCORES"],
                ["ZRANGE", k.inbox(user, "unseen"), "0", "0", "WITHSCORES"],
                ["ZRANGE", k.inbox(user, "all"), "-1", "-1", "WITHSCORES"],
            ])
        }
        for x in r { try x.throwIfError("inbox status") }
        func oldest(_ reply: RedisReply) -> Date? {
            guard let a = reply.array, a.count == 2, let s = a[1].string, let d = Double(s) else { return nil }
            return Self.date(Int64(d))
        }
        return InboxStatus(
            unreadCount: try r[0].int("ZCARD"), unseenCount: try r[1].int("ZCARD"),
            oldestUnread: oldest(r[2]), oldestUnseen: oldest(r[3]), lastActivity: oldest(r[4]))
    }

    /// Status over the notifications whose type `includes` accepts (nil type: a plain push). Reads the user's
    /// whole inbox (at most `retention.maxCount` entries) and each one's type in one pipeline.
    public func status(org: OrgID, user: UserID, includes: (String?) -> Bool) throws -> InboxStatus {
        let k = RecipientKeys(org: org)
        let sets = try redis.with { c in
            try c.pipeline([
                ["ZRANGE", k.inbox(user, "all"), "0", "-1", "WITHSCORES"],
                ["ZRANGE", k.inbox(user, "unread"), "0", "-1"],
                ["ZRANGE", k.inbox(user, "unseen"), "0", "-1"],
            ])
        }
        for x in sets { try x.throwIfError("inbox status") }
        var entries: [(id: String, created: Int64)] = []
        let flat = sets[0].array ?? []
        var i = 0
        while i + 1 < flat.count {
            if let id = flat[i].string, let s = flat[i + 1].string, let d = Double(s) { entries.append((id, Int64(d))) }
            i += 2
        }
        if entries.isEmpty {
            return InboxStatus(unreadCount: 0, unseenCount: 0, oldestUnread: nil, oldestUnseen: nil, lastActivity: nil)
        }
        let typeReplies = try redis.with { c in
            try c.pipeline(entries.map { ["HMGET", k.inboxContent($0.id), "type", "created"] })
        }
        let unread = Set((sets[1].array ?? []).compactMap(\.string))
        let unseen = Set((sets[2].array ?? []).compactMap(\.string))
        var st = InboxStatus(unreadCount: 0, unseenCount: 0, oldestUnread: nil, oldestUnseen: nil, lastActivity: nil)
        for (e, reply) in zip(entries, typeReplies) {
            try reply.throwIfError("inbox status")
            let fields = reply.array ?? []
            // Expired content (no `created`) is not shown by `list`, so it is not counted either.
            guard fields.count == 2, !fields[1].isNull, includes(fields[0].string) else { continue }
            let created = Self.date(e.created)
            if unread.contains(e.id) {
                st.unreadCount += 1
                st.oldestUnread = min(st.oldestUnread ?? created, created)
            }
            if unseen.contains(e.id) {
                st.unseenCount += 1
                st.oldestUnseen = min(st.oldestUnseen ?? created, created)
            }
            st.lastActivity = max(st.lastActivity ?? created, created)
        }
        return st
    }

    @discardableResult
    public func mark(org: OrgID, user: UserID, _ mark: InboxMark) throws -> Int {
        func flag(_ b: Bool?) -> String { b.map { $0 ? "1" : "0" } ?? "-" }
        var args = [flag(mark.read), flag(mark.seen)]
        switch mark.selection {
        case .ids(let ids): args += ["ids", "0"] + ids
        case .before(let d): args += ["before", String(Self.ms(d))]
        }
        let r = try redis.with {
            try $0.eval(
                RecipientScripts.inboxMark,
                keys: RedisKeyGroups.inboxMark(org: org, user: user),
                args: args)
        }
        return try r.int("inbox mark")
    }
}
