import Foundation
import VolleyCore
import VolleyRedis

// The orgs' default zones set through `/v1/time-zone`: one hash for the fleet (`volley:orgzones`, org → IANA name).
// The API writes it; a worker reads one org's entry when it opens a local-time job (one `HGET` per delivery).

extension RedisPipelineSession {
    public func orgTimeZone(org: OrgID) throws -> String? { try RedisOrgTimeZoneRepository.zone(client, org: org) }
}

/// `OrgTimeZoneRepository` on Redis, for the API: blocking calls on a serial lane of their own.
public final class RedisOrgTimeZoneRepository: OrgTimeZoneRepository {
    /// The org's zone, as the API and the workers read it.
    static func zone(_ client: RedisClient, org: OrgID) throws -> String? {
        let r = try client.command(["HGET", RecipientKeys.orgTimeZones, org.rawValue])
        try r.throwIfError("HGET org time zone")
        return r.string
    }

    private struct Store: Sendable {
        let client: RedisClient
        func zone(org: OrgID) throws -> String? { try RedisOrgTimeZoneRepository.zone(client, org: org) }
        func set(org: OrgID, _ zone: String) throws {
            try client.command(["HSET", RecipientKeys.orgTimeZones, org.rawValue, zone]).throwIfError(
                "HSET org time zone")
        }
        func remove(org: OrgID) throws -> Bool {
            let r = try client.command(["HDEL", RecipientKeys.orgTimeZones, org.rawValue])
            try r.throwIfError("HDEL org time zone")
            return (r.integer ?? 0) > 0
        }
    }

    private let lane: SerialLane<Store>

    public init(client: RedisClient) {
        lane = SerialLane(Store(client: client), label: "volley.store.org-time-zones")
    }

    public func zone(org: OrgID) async throws -> String? { try await lane.run { try $0.zone(org: org) } }
    public func setZone(org: OrgID, _ zone: String) async throws { try await lane.run { try $0.set(org: org, zone) } }
    public func removeZone(org: OrgID) async throws -> Bool { try await lane.run { try $0.remove(org: org) } }
}
