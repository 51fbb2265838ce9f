import Foundation
import VolleyCore
import VolleyRedis

/// Frequency caps in Redis (layout in `RecipientKeys`): per user and scope a sorted set of notification ids scored by
/// the time they were admitted, checked and written by one script per chunk of users
/// (`RecipientScripts.frequencyCapAdmit`); and the rules set through the API, one hash for the fleet.
public final class RedisFrequencyCapStore: FrequencyCapStore, FrequencyCapRuleReader, @unchecked Sendable {
    private let redis: SerializedRedis

    public init(client: RedisClient) { redis = SerializedRedis(client) }

    public func admit(org: OrgID, plan: FrequencyCapPlan, users: [UserID], now: Date) throws -> [Bool] {
        if users.isEmpty { return [] }
        let k = RecipientKeys(org: org)
        var args = [String(Int64((now.timeIntervalSince1970 * 1000).rounded())), plan.notification]
        args.append(String(plan.scopes.count))
        for scope in plan.scopes {
            args += [k.frequencyCapPrefix(type: scope.type), String(scope.longestSeconds * 1000)]
            args.append(String(scope.limits.count))
            for l in scope.limits { args += [String(l.windowSeconds * 1000), String(l.max)] }
        }
        args += users.map(\.rawValue)
        let reply = try redis.with {
            try $0.eval(
                RecipientScripts.frequencyCapAdmit, keys: RedisKeyGroups.frequencyCapAdmit(org: org), args: args)
        }
        try reply.throwIfError("frequency caps")
        guard let a = reply.array, a.count == users.count else {
            throw RedisError(.unexpectedReply, "frequency caps answered \(reply) for \(users.count) users")
        }
        return a.map { $0.integer == 1 }
    }

    public func storedRules() throws -> [OrgID: [FrequencyCapRule]] {
        let r = try redis.with { try $0.checked(["HGETALL", RecipientKeys.frequencyCapRules]) }
        var out: [OrgID: [FrequencyCapRule]] = [:]
        for (org, json) in r.fieldPairs {
            // Only the API writes these, after validating them; a field that no longer reads leaves the org on the
            // configuration's rules.
            if let rules = Self.decode(json) { out[OrgID(org)] = rules }
        }
        return out
    }

    public func rules(org: OrgID) throws -> [FrequencyCapRule]? {
        let r = try redis.with { try $0.checked(["HGET", RecipientKeys.frequencyCapRules, org.rawValue]) }
        return r.string.flatMap(Self.decode)
    }

    public func setRules(org: OrgID, _ rules: [FrequencyCapRule]) throws {
        let json = String(decoding: try JSONEncoder.sorted.encode(rules), as: UTF8.self)
        _ = try redis.with { try $0.checked(["HSET", RecipientKeys.frequencyCapRules, org.rawValue, json]) }
    }

    public func removeRules(org: OrgID) throws -> Bool {
        let r = try redis.with { try $0.checked(["HDEL", RecipientKeys.frequencyCapRules, org.rawValue]) }
        return (r.integer ?? 0) > 0
    }

    static func decode(_ json: String) -> [FrequencyCapRule]? {
        try? JSONDecoder().decode([FrequencyCapRule].self, from: Data(json.utf8))
    }
}

extension JSONEncoder {
    fileprivate static let sorted: JSONEncoder = {
        let e = JSONEncoder()
        e.outputFormatting = [.sortedKeys]
        return e
    }()
}

/// `RedisFrequencyCapStore`'s rules on their own serial queue, for the API.
public final class RedisFrequencyCapRepository: FrequencyCapRepository {
    private let lane: SerialLane<RedisFrequencyCapStore>

    public init(client: RedisClient) {
        lane = SerialLane(RedisFrequencyCapStore(client: client), label: "volley.store.frequency-caps")
    }

    public func rules(org: OrgID) async throws -> [FrequencyCapRule]? { try await lane.run { try $0.rules(org: org) } }
    public func setRules(org: OrgID, _ rules: [FrequencyCapRule]) async throws {
        try await lane.run { try $0.setRules(org: org, rules) }
    }
    public func removeRules(org: OrgID) async throws -> Bool { try await lane.run { try $0.removeRules(org: org) } }
}
