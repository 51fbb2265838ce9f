import Foundation
import VolleyCore
import VolleyRedis
import VolleyStore

/// The API's own Redis keys (under the store prefix, default `volley`). The braces are Redis Cluster hash tags:
/// - `volley:{api}:keys` — hash: key id → `APIKeyRecord` JSON (hashed key, org, role, name).
/// - `volley:{api}:rate:<subject>` — hash `tokens`, `at` (ms): one token bucket per API key or user-token subject;
///   in the credentials' slot, since one script reads the key and takes a token.
/// - `volley:api:job:{<stream>}:<org>:<job>` — hash `body` (SHA-256 of the canonical job), `entry`, `app`,
///   `createdAt`: jobs accepted through the API, for idempotent replays and `GET /v1/jobs/{id}`; expires with the
///   outcome ledger. Tagged with the job stream's slot, since one script checks it and adds the job.
public struct APIKeys: Sendable {
    public let prefix: String
    public init(prefix: String) { self.prefix = prefix }
    public var apiKeys: String { "\(prefix):{api}:keys" }
    func rate(_ subject: String) -> String { "\(prefix):{api}:rate:\(subject)" }
    func job(_ org: OrgID, _ job: JobID, stream: String) -> String {
        "\(prefix):api:job:{\(Self.hashTag(of: stream))}:\(org):\(job)"
    }

    /// The part of `key` Redis Cluster hashes: its first non-empty `{…}`, else the whole key.
    static func hashTag(of key: String) -> Substring {
        if let open = key.firstIndex(of: "{") {
            let rest = key[key.index(after: open)...]
            if let close = rest.firstIndex(of: "}"), close != rest.startIndex { return rest[..<close] }
        }
        return key[...]
    }
}

/// API key administration (`volley keys create|list|revoke`). Blocking, like its client.
public final class APIKeyStore: @unchecked Sendable {
    private let client: RedisClient
    private let keys: APIKeys
    private let lock = NSLock()

    public init(client: RedisClient, prefix: String = "volley") {
        self.client = client
        keys = APIKeys(prefix: prefix)
    }

    static let encoder: JSONEncoder = {
        let e = JSONEncoder()
        e.outputFormatting = [.sortedKeys]
        e.dateEncodingStrategy = .iso8601
        return e
    }()
    static let decoder: JSONDecoder = {
        let d = JSONDecoder()
        d.dateDecodingStrategy = .iso8601
        return d
    }()

    /// Makes a key for `org`; the returned `key` is the only copy.
    public func create(org: OrgID, role: APIRole, name: String?, now: Date = Date()) throws -> NewAPIKey {
        let (id, key) = APIKeyFormat.generate()
        let record = APIKeyRecord(
            id: id, org: org, role: role, name: name, sha256: APIKeyFormat.digest(key), createdAt: now)
        let json = String(decoding: try Self.encoder.encode(record), as: UTF8.self)
        _ = try lock.withLock { try client.checked(["HSET", keys.apiKeys, id, json]) }
        return NewAPIKey(id: id, key: key, org: org.rawValue, role: role.rawValue, name: name)
    }

    /// Every key's record (no secrets), optionally of one org, oldest first.
    public func list(org: OrgID? = nil) throws -> [APIKeyRecord] {
        let r = try lock.withLock { try client.checked(["HGETALL", keys.apiKeys]) }
        return r.fieldPairs.compactMap { try? Self.decoder.decode(APIKeyRecord.self, from: Data($0.1.utf8)) }
            .filter { org == nil || $0.org == org }
            .sorted { ($0.createdAt, $0.id) < ($1.createdAt, $1.id) }
    }

    /// Deletes a key; true when it existed (and belonged to `org`, when given).
    public func revoke(id: String, org: OrgID? = nil) throws -> Bool {
        if let org {
            let r = try lock.withLock { try client.checked(["HGET", keys.apiKeys, id]) }
            guard let json = r.string, let rec = try? Self.decoder.decode(APIKeyRecord.self, from: Data(json.utf8)),
                rec.org == org
            else { return false }
        }
        let r = try lock.withLock { try client.checked(["HDEL", keys.apiKeys, id]) }
        return (r.integer ?? 0) > 0
    }
}

/// The scripts the API runs on its hot path.
enum APIScripts {
    /// Looks up an API key (when ARGV[1] names one) and takes one token from the caller's bucket, in one round trip.
    /// KEYS: keys hash, bucket. ARGV: key id or '', rate per second, burst.
    /// Answers {0} for an unknown key, else {1, record JSON or '', milliseconds to wait (0 = admitted)}.
    /// The clock is Redis's own TIME, so every API process of the fleet shares one view of each bucket.
    static let admit = RedisScript(
        """
        local rec = ''
        if ARGV[1] ~= '' then
          rec = redis.call('HGET', KEYS[1], ARGV[1])
          if not rec then return {0} end
        end
        local rate = tonumber(ARGV[2])
        local burst = tonumber(ARGV[3])
        if rate <= 0 then return {1, rec, 0} end
        local t = redis.call('TIME')
        local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
        local b = redis.call('HMGET', KEYS[2], 'tokens', 'at')
        local tokens = tonumber(b[1]) or burst
        local at = tonumber(b[2]) or now
        if now > at then tokens = math.min(burst, tokens + (now - at) * rate / 1000) end
        local wait = 0
        if tokens >= 1 then
          tokens = tokens - 1
        else
          wait = math.ceil((1 - tokens) * 1000 / rate)
        end
        redis.call('HSET', KEYS[2], 'tokens', tostring(tokens), 'at', tostring(now))
        redis.call('PEXPIRE', KEYS[2], math.ceil(burst * 1000 / rate) + 1000)
        return {1, rec, wait}
        """)

    /// Accepts a job once per (org, id). KEYS: job record, job stream. ARGV: body digest, job JSON, createdAt, app,
    /// record TTL seconds. Answers {0, entry} for a new job, {1, entry} for a replay of the same body, {2} for a
    /// different body under the same id. Checking and XADD happen in one script, so two racing requests with one
    /// key can never both enqueue.
    static let submit = RedisScript(
        """
        local h = redis.call('HGET', KEYS[1], 'body')
        if h then
          if h == ARGV[1] then return {1, redis.call('HGET', KEYS[1], 'entry')} end
          return {2}
        end
        local e = redis.call('XADD', KEYS[2], '*', 'job', ARGV[2])
        redis.call('HSET', KEYS[1], 'body', ARGV[1], 'entry', e, 'createdAt', ARGV[3], 'app', ARGV[4])
        redis.call('EXPIRE', KEYS[1], ARGV[5])
        return {0, e}
        """)

    /// `/readyz`: proves Redis answers and runs scripts.
    static let ping = RedisScript("return 1")
}
