import Foundation
import VolleyCore

/// API key administration (`volley keys create|list|revoke`) over the stored records. Blocking, like its registry.
public final class APIKeyStore: Sendable {
    private let registry: any APIKeyRegistry

    public init(registry: any APIKeyRegistry) {
        self.registry = registry
    }

    static let encoder: JSONEncoder = {
        let e = JSONEncoder()
        e.outputFormatting = [.sortedKeys]
        e.dateEncodingStrategy = RFC3339.encodingStrategy()
        return e
    }()
    static let decoder: JSONDecoder = {
        let d = JSONDecoder()
        d.dateDecodingStrategy = RFC3339.decodingStrategy
        return d
    }()

    /// Makes a key for `org`; the returned `key` is the only copy.
    public func create(org: OrgID, role: APIRole, name: String?, now: Date = Date()) throws -> NewAPIKey {
        let (id, key) = APIKeyFormat.generate()
        let record = APIKeyRecord(
            id: id, org: org, role: role, name: name, sha256: APIKeyFormat.digest(key), createdAt: now)
        let json = String(decoding: try Self.encoder.encode(record), as: UTF8.self)
        try registry.put(id: id, record: json)
        return NewAPIKey(id: id, key: key, org: org.rawValue, role: role.rawValue, name: name)
    }

    /// Every key's record (no secrets), optionally of one org, oldest first.
    public func list(org: OrgID? = nil) throws -> [APIKeyRecord] {
        try registry.records().values
            .compactMap { try? Self.decoder.decode(APIKeyRecord.self, from: Data($0.utf8)) }
            .filter { org == nil || $0.org == org }
            .sorted { ($0.createdAt, $0.id) < ($1.createdAt, $1.id) }
    }

    /// Deletes a key; true when it existed (and belonged to `org`, when given).
    public func revoke(id: String, org: OrgID? = nil) throws -> Bool {
        if let org {
            guard let json = try registry.record(id: id),
                let rec = try? Self.decoder.decode(APIKeyRecord.self, from: Data(json.utf8)), rec.org == org
            else { return false }
        }
        return try registry.remove(id: id)
    }
}
