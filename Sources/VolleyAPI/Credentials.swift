import Crypto
import Foundation
import VolleyCore

/// What an API key may do. `send`: push endpoints, jobs, user tokens. `read`: jobs, reports, quota, types.
/// `admin`: everything, including types, settings, devices and keys.
public enum APIRole: String, Sendable, Codable, CaseIterable {
    case send, read, admin

    /// The roles that may send (`send` and `admin`), made once: the job POST asks on every request.
    public static let senders: Set<APIRole> = [.send, .admin]
}

/// One API key as stored: never the key itself, only the SHA-256 of its secret part.
public struct APIKeyRecord: Sendable, Codable, Hashable {
    public var id: String
    public var org: OrgID
    public var role: APIRole
    public var name: String?
    /// Hex SHA-256 of the whole key string.
    public var sha256: String
    public var createdAt: Date
}

/// A freshly made key: `key` is shown once and never stored.
public struct NewAPIKey: Sendable, Codable, Hashable {
    public var id: String
    public var key: String
    public var org: String
    public var role: String
    public var name: String?
}

/// API key format and checks: `vk_<id>_<secret>`, `id` 16 hex characters (the lookup handle), `secret` 32 random
/// bytes in base64url. Only the SHA-256 of the key is stored; a presented key is hashed and compared with the
/// stored digest in constant time, so neither a timing difference nor a leaked database reveals a usable key.
public enum APIKeyFormat {
    public static func generate() -> (id: String, key: String) {
        let id = randomBytes(8).lowercaseHex
        return (id, "vk_\(id)_\(Base64URL.encode(randomBytes(32)))")
    }

    /// The id part of a well-formed key, nil otherwise.
    /// `vk_` + 16 hex digits + `_` + at least 40 characters of secret.
    public static func id(of key: String) -> String? {
        let bytes = key.utf8
        guard bytes.count >= 60, bytes.starts(with: "vk_".utf8) else { return nil }
        let id = bytes.dropFirst(3).prefix(16)
        // At least 60 characters: the bytes less those that continue a multi-byte character.
        guard id.allSatisfy({ hexDigitValue($0) != nil }), bytes.dropFirst(19).first == UInt8(ascii: "_"),
            bytes.count - bytes.lazy.filter({ $0 & 0xC0 == 0x80 }).count >= 60
        else { return nil }
        return String(decoding: id, as: UTF8.self)
    }

    public static func digest(_ key: String) -> String {
        SHA256.hash(data: Data(key.utf8)).withUnsafeBytes { $0.lowercaseHex }
    }

    /// Constant-time comparison of the presented key's digest with the stored one.
    public static func matches(_ key: String, record: APIKeyRecord) -> Bool {
        guard let stored = [UInt8](hex: record.sha256) else { return false }
        return matches(key, digest: stored)
    }

    /// True when `key` hashes to `digest` (a stored SHA-256, as bytes), compared in constant time.
    static func matches(_ key: String, digest: [UInt8]) -> Bool {
        var key = key
        // Hashed from the string's own bytes (made contiguous once if they are not): every API-key request passes here.
        let presented = key.withUTF8 { SHA256.hash(data: UnsafeRawBufferPointer($0)) }
        return presented.withUnsafeBytes { constantTimeEqual($0, digest) }
    }

    /// True when `a` and `b` hold the same bytes, in a time that depends only on their lengths.
    static func constantTimeEqual(_ a: some RandomAccessCollection<UInt8>, _ b: [UInt8]) -> Bool {
        guard a.count == b.count else { return false }
        var diff: UInt8 = 0
        for (x, y) in zip(a, b) { diff |= x ^ y }
        return diff == 0
    }

    static func randomBytes(_ n: Int) -> [UInt8] {
        var g = SystemRandomNumberGenerator()
        return (0..<n).map { _ in UInt8.random(in: 0...255, using: &g) }
    }
}

/// The subject of a user token: a mobile app's user inside one org.
public struct UserTokenClaims: Sendable, Hashable, Codable {
    public var org: OrgID
    public var user: UserID
    public var app: AppName
    /// Expiry, seconds since 1970.
    public var exp: Int64
    public init(org: OrgID, user: UserID, app: AppName, exp: Int64) {
        self.org = org
        self.user = user
        self.app = app
        self.exp = exp
    }
}

/// User tokens: `vut1.<keyId>.<base64url(claims JSON)>.<base64url(HMAC-SHA256)>`, the MAC over everything before
/// the last dot. Verified with the configured keys alone (no Redis round trip); the first key signs and every key
/// verifies, so a new key is added first, becomes the signer, and the old one is dropped after the longest TTL.
public struct UserTokenSigner: Sendable {
    public let keys: [UserTokenKey]
    public init(keys: [UserTokenKey]) { self.keys = keys }

    public struct Failure: Error, Sendable, CustomStringConvertible {
        public let description: String
    }

    public func sign(_ claims: UserTokenClaims) throws -> String {
        guard let key = keys.first else {
            throw Failure(description: "no user-token signing key is configured (api.userTokens.keys)")
        }
        let payload = Base64URL.encode(Array(try JSONEncoder().encode(claims)))
        let head = "vut1.\(key.id).\(payload)"
        return head + "." + Base64URL.encode(mac(head, key))
    }

    /// The claims of a genuine, unexpired token; nil for anything else.
    public func verify(_ token: String, now: Date) -> UserTokenClaims? {
        let parts = token.split(separator: ".", omittingEmptySubsequences: false)
        guard parts.count == 4, parts[0] == "vut1", let key = keys.first(where: { $0.id == parts[1] }),
            let signature = Base64URL.decode(String(parts[3]))
        else { return nil }
        let head = parts[0...2].joined(separator: ".")
        guard APIKeyFormat.constantTimeEqual(mac(head, key), signature),
            let payload = Base64URL.decode(String(parts[2])),
            let claims = try? JSONDecoder().decode(UserTokenClaims.self, from: Data(payload)),
            Double(claims.exp) > now.timeIntervalSince1970
        else { return nil }
        return claims
    }

    private func mac(_ text: String, _ key: UserTokenKey) -> [UInt8] {
        Array(HMAC<SHA256>.authenticationCode(for: Data(text.utf8), using: SymmetricKey(data: key.secret)))
    }
}
