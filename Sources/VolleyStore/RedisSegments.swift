import Foundation
import VolleyCore
import VolleyRedis

/// An org's segments in Redis: `volley:segments:{O}` holds each segment's definition (`{"filters", "match"}`, as
/// `Segment.definitionJSON` writes it). Counting runs the segment's set operations on the attribute index into
/// scratch sets under the index's prefix (`SegmentSets`), as a job's resolution does, and deletes them. Blocking: the
/// CLI calls it directly; the API through `RedisSegmentRepository`.
public final class RedisSegmentStore: @unchecked Sendable {
    private let redis: SerializedRedis
    /// TTL of a count's scratch sets (deleted when the count is made; this only bounds leftovers of a crash).
    public var scratchTTLSeconds = 3600

    public init(client: RedisClient) { redis = SerializedRedis(client) }

    /// KEYS[1] the segments; ARGV[1] id, ARGV[2] the definition JSON, ARGV[3] the org's limit. Answers -1 (limit
    /// reached, nothing written), 0 (created) or 1 (replaced): the count check and the write are one step.
    static let putScript = RedisScript(
        """
        local exists = redis.call('HEXISTS', KEYS[1], ARGV[1])
        if exists == 0 and redis.call('HLEN', KEYS[1]) >= tonumber(ARGV[3]) then return -1 end
        redis.call('HSET', KEYS[1], ARGV[1], ARGV[2])
        return exists
        """)

    public func put(org: OrgID, _ segment: Segment, maxCount: Int) throws -> SegmentPut {
        let reply = try redis.with {
            try $0.eval(
                Self.putScript, keys: [RecipientKeys(org: org).segments],
                args: [segment.id.rawValue, segment.definitionJSON.jsonText, String(maxCount)])
        }
        switch try reply.int("put segment") {
        case ..<0: return .limitReached
        case 0: return .created(segment)
        default: return .replaced(segment)
        }
    }

    public func segment(org: OrgID, id: SegmentID) throws -> Segment? {
        let r = try redis.with { try $0.checked(["HGET", RecipientKeys(org: org).segments, id.rawValue]) }
        return r.string.flatMap { Self.segment(id: id, json: $0) }
    }

    /// True when the segment existed.
    public func delete(org: OrgID, id: SegmentID) throws -> Bool {
        let r = try redis.with { try $0.checked(["HDEL", RecipientKeys(org: org).segments, id.rawValue]) }
        return try r.int("delete segment") == 1
    }

    /// Every segment of the org, by id.
    public func list(org: OrgID) throws -> [Segment] {
        let r = try redis.with { try $0.checked(["HGETALL", RecipientKeys(org: org).segments]) }
        return r.fieldPairs.compactMap { id, json in Self.segment(id: SegmentID(id), json: json) }
            .sorted { $0.id.rawValue < $1.id.rawValue }
    }

    /// How many active users match the segment now; nil when the org has no segment `id`.
    public func count(org: OrgID, id: SegmentID) throws -> Int? {
        guard let segment = try segment(org: org, id: id) else { return nil }
        return try count(org: org, segment)
    }

    /// How many active users match `segment` now (the set a job naming it would resolve to).
    public func count(org: OrgID, _ segment: Segment) throws -> Int {
        let k = RecipientKeys(org: org)
        let scratch = k.segmentCountScratch(UUID().uuidString)
        let result = scratch + ":users"
        return try redis.with { c in
            // One pass: the segment's set less containers and inactive users, counted and dropped.
            let e = try SegmentSets(keys: k, scratch: scratch, ttlSeconds: scratchTTLSeconds).expression(segment, on: c)
            let commands = [
                ["SDIFFSTORE", result, e.base] + e.minus + [k.containers, k.inactive], ["SCARD", result],
                ["DEL", result] + e.temporary,
            ]
            let replies = try c.pipeline(commands)
            for (i, r) in replies.enumerated() { try r.throwIfError(commands[i].first ?? "") }
            return try replies[1].int("SCARD")
        }
    }

    /// A stored definition; one that does not read (written by hand) is left out of lists and reads as absent.
    static func segment(id: SegmentID, json: String) -> Segment? {
        guard let value = try? JSONValue(parsing: json) else { return nil }
        return try? Segment(id: id, json: value)
    }
}

/// `RedisSegmentStore` on its own serial queue, as the API's handlers call it.
public final class RedisSegmentRepository: SegmentStore {
    private let lane: SerialLane<RedisSegmentStore>

    public init(client: RedisClient) {
        lane = SerialLane(RedisSegmentStore(client: client), label: "volley.store.segments")
    }

    public func put(org: OrgID, _ segment: Segment, maxCount: Int) async throws -> SegmentPut {
        try await lane.run { try $0.put(org: org, segment, maxCount: maxCount) }
    }
    public func segment(org: OrgID, id: SegmentID) async throws -> Segment? {
        try await lane.run { try $0.segment(org: org, id: id) }
    }
    public func delete(org: OrgID, id: SegmentID) async throws -> Bool {
        try await lane.run { try $0.delete(org: org, id: id) }
    }
    public func list(org: OrgID) async throws -> [Segment] {
        try await lane.run { try $0.list(org: org) }
    }
    public func count(org: OrgID, id: SegmentID) async throws -> Int? {
        try await lane.run { try $0.count(org: org, id: id) }
    }
}
