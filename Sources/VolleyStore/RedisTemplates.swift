import Foundation
import VolleyCore
import VolleyRedis

/// An org's notification templates in Redis (layout in `RecipientKeys`): `volley:templates:{O}` holds each
/// template's `notification` object as it was put, `…:times` its creation and last change. Both carry the org's
/// hash tag, so the put script's two keys share a slot. Blocking: the worker (`TemplateReader`) and the CLI call it
/// directly; the API through `RedisTemplateRepository`.
public final class RedisTemplateStore: TemplateReader, @unchecked Sendable {
    private let redis: SerializedRedis
    public init(client: RedisClient) { redis = SerializedRedis(client) }

    /// KEYS[1] the templates, KEYS[2] their times; ARGV[1] id, ARGV[2] the notification JSON, ARGV[3] now (ms),
    /// ARGV[4] the org's limit. Answers -1 (limit reached, nothing written), 0 (created) or 1 (replaced), and the
    /// creation time: the count check and the write are one step, so racing creations never pass the limit.
    static let putScript = RedisScript(
        """
        local exists = redis.call('HEXISTS', KEYS[1], ARGV[1])
        if exists == 0 and redis.call('HLEN', KEYS[1]) >= tonumber(ARGV[4]) then return {-1, ''} end
        local created = ARGV[3]
        if exists == 1 then
          local t = redis.call('HGET', KEYS[2], ARGV[1])
          if t then created = string.match(t, '^(%d+)') or created end
        end
        redis.call('HSET', KEYS[1], ARGV[1], ARGV[2])
        redis.call('HSET', KEYS[2], ARGV[1], created .. ' ' .. ARGV[3])
        return {exists, created}
        """)

    public func put(org: OrgID, id: String, notification: JSONValue, now: Date, maxCount: Int) throws
        -> TemplatePut
    {
        let nowMS = Self.milliseconds(now)
        let reply = try redis.with {
            try $0.eval(
                Self.putScript, keys: RedisKeyGroups.templatePut(org: org),
                args: [id, notification.jsonText, String(nowMS), String(maxCount)])
        }
        try reply.throwIfError("put template")
        guard let parts = reply.array, parts.count == 2, let state = parts[0].integer else {
            throw RedisError(.unexpectedReply, "put template: \(reply)")
        }
        if state < 0 { return .limitReached }
        let created = parts[1].string.flatMap(Int64.init).map(Self.date) ?? now
        let template = StoredTemplate(
            id: id, notification: notification, createdAt: created, updatedAt: Self.date(nowMS))
        return state == 0 ? .created(template) : .replaced(template)
    }

    public func template(org: OrgID, id: String) throws -> StoredTemplate? {
        let k = RecipientKeys(org: org)
        let r = try redis.with { try $0.pipeline([["HGET", k.templates, id], ["HGET", k.templateTimes, id]]) }
        for x in r { try x.throwIfError("get template") }
        guard let json = r[0].string else { return nil }
        return Self.template(id: id, json: json, times: r[1].string)
    }

    /// True when the template existed.
    public func delete(org: OrgID, id: String) throws -> Bool {
        let k = RecipientKeys(org: org)
        let r = try redis.with { try $0.pipeline([["HDEL", k.templates, id], ["HDEL", k.templateTimes, id]]) }
        return try r[0].int("delete template") == 1
    }

    /// Every template of the org, by id.
    public func list(org: OrgID) throws -> [StoredTemplate] {
        let k = RecipientKeys(org: org)
        let r = try redis.with { try $0.pipeline([["HGETALL", k.templates], ["HGETALL", k.templateTimes]]) }
        for x in r { try x.throwIfError("list templates") }
        let times = Dictionary(r[1].fieldPairs, uniquingKeysWith: { a, _ in a })
        return r[0].fieldPairs.compactMap { id, json in Self.template(id: id, json: json, times: times[id]) }
            .sorted { $0.id < $1.id }
    }

    /// The worker's read: the notification object only, one `HGET`.
    public func notification(org: OrgID, templateID: String) throws -> JSONValue? {
        let r = try redis.with { try $0.checked(["HGET", RecipientKeys(org: org).templates, templateID]) }
        guard let json = r.string else { return nil }
        do { return try JSONValue(parsing: json) } catch {
            throw RedisError(.unexpectedReply, "template \(templateID) is not JSON: \(error)")
        }
    }

    /// A stored record; one that is not JSON (written by hand) is left out of lists and reads as absent.
    static func template(id: String, json: String, times: String?) -> StoredTemplate? {
        guard let notification = try? JSONValue(parsing: json) else { return nil }
        let t = (times ?? "").split(separator: " ").compactMap { Int64($0) }.map(date)
        let created = t.first ?? Date(timeIntervalSince1970: 0)
        return StoredTemplate(
            id: id, notification: notification, createdAt: created, updatedAt: t.count > 1 ? t[1] : created)
    }

    static func milliseconds(_ date: Date) -> Int64 { Int64((date.timeIntervalSince1970 * 1000).rounded(.down)) }
    static func date(_ ms: Int64) -> Date { Date(timeIntervalSince1970: TimeInterval(ms) / 1000) }
}

/// `RedisTemplateStore` on its own serial queue, as the API's handlers call it.
public final class RedisTemplateRepository: TemplateStore {
    private let lane: SerialLane<RedisTemplateStore>

    public init(client: RedisClient) {
        lane = SerialLane(RedisTemplateStore(client: client), label: "volley.store.templates")
    }

    public func put(org: OrgID, id: String, notification: JSONValue, now: Date, maxCount: Int) async throws
        -> TemplatePut
    {
        try await lane.run { try $0.put(org: org, id: id, notification: notification, now: now, maxCount: maxCount) }
    }
    public func template(org: OrgID, id: String) async throws -> StoredTemplate? {
        try await lane.run { try $0.template(org: org, id: id) }
    }
    public func delete(org: OrgID, id: String) async throws -> Bool {
        try await lane.run { try $0.delete(org: org, id: id) }
    }
    public func list(org: OrgID) async throws -> [StoredTemplate] {
        try await lane.run { try $0.list(org: org) }
    }
}

/// `UserAttributeStore` for the API: the directory's attributes on a serial lane of their own.
public final class RedisUserAttributeRepository: UserAttributeStore {
    private let lane: SerialLane<RedisDirectory>

    public init(client: RedisClient) {
        lane = SerialLane(RedisDirectory(client: client), label: "volley.store.attributes")
    }

    public func attributes(org: OrgID, user: UserID) async throws -> [String: String]? {
        try await lane.run { try $0.attributes(org: org, users: [user]).first ?? nil }
    }

    public func setAttributes(org: OrgID, user: UserID, _ attributes: [String: String]) async throws {
        try await lane.run { try $0.setAttributes(org: org, user: user, attributes) }
    }
}
