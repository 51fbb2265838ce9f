import Crypto
import Foundation
import VolleyCore

/// The console's signed cookies and form tokens. A session names the API key it was opened with by the key's id,
/// never the key: each page reads that key's record again (so a revoked key ends its sessions within
/// `api.keyCacheSeconds`), and the HMAC proves the console issued the cookie. Nothing is stored in Redis.
///
/// - Session cookie `volley_console`: `s1.<key id>.<expiry, Unix seconds>.<nonce>.<HMAC>`.
/// - CSRF token of a session: the HMAC of its nonce under a label of its own; every console form carries it as `csrf`.
/// - Sign-in form: a random `volley_login` cookie and, in the form, its HMAC (a double-submit token), so a page on
///   another site cannot sign a browser in under the attacker's key.
///
/// The MAC key is derived (HKDF-SHA-256, its own label) from the first `api.userTokens.keys` secret, so every API
/// replica accepts the others' sessions; without one, each process draws its own and sessions end at its restart.
public struct ConsoleSessions: Sendable {
    public static let sessionCookie = "volley_console"
    public static let loginCookie = "volley_login"

    /// What a verified session cookie says.
    public struct Session: Sendable, Hashable {
        public var keyID: String
        public var expires: Int64
        public var nonce: String
    }

    let key: SymmetricKey
    /// How long a session lasts, seconds (`console.sessionHours`).
    public let lifetime: Double
    /// True when the key came from `api.userTokens.keys` (shared by replicas), false when drawn by this process.
    public let shared: Bool

    public init(userTokenKeys: [UserTokenKey], lifetime: Double) {
        self.lifetime = lifetime
        if let first = userTokenKeys.first {
            key = HKDF<SHA256>.deriveKey(
                inputKeyMaterial: SymmetricKey(data: first.secret), info: Data("volley console session v1".utf8),
                outputByteCount: 32)
            shared = true
        } else {
            key = SymmetricKey(size: .bits256)
            shared = false
        }
    }

    /// A new session for API key `keyID`, from `now` for `lifetime`.
    public func issue(keyID: String, now: Date) -> String {
        let expires = Int64(now.timeIntervalSince1970 + lifetime)
        let head = "s1.\(keyID).\(expires).\(Self.nonce())"
        return head + "." + mac("session|" + head)
    }

    /// The session a cookie value carries when the console issued it and it has not expired; nil otherwise.
    public func verify(_ cookie: String, now: Date) -> Session? {
        let parts = cookie.split(separator: ".", omittingEmptySubsequences: false)
        guard parts.count == 5, parts[0] == "s1", let expires = Int64(parts[2]), !parts[1].isEmpty,
            !parts[3].isEmpty
        else { return nil }
        let head = parts[0...3].joined(separator: ".")
        guard Self.equal(mac("session|" + head), String(parts[4])),
            Double(expires) > now.timeIntervalSince1970
        else { return nil }
        return Session(keyID: String(parts[1]), expires: expires, nonce: String(parts[3]))
    }

    /// The CSRF token every form of `session` carries.
    public func csrf(for session: Session) -> String { mac("csrf|" + session.nonce) }

    /// True when `token` is `session`'s CSRF token (compared in constant time).
    public func checkCSRF(_ token: String?, session: Session) -> Bool {
        guard let token else { return false }
        return Self.equal(csrf(for: session), token)
    }

    /// A nonce for the sign-in cookie, and the token its form carries.
    public func loginNonce() -> String { Self.nonce() }
    public func loginToken(nonce: String) -> String { mac("login|" + nonce) }
    public func checkLogin(token: String?, nonce: String?) -> Bool {
        guard let token, let nonce, !nonce.isEmpty else { return false }
        return Self.equal(loginToken(nonce: nonce), token)
    }

    private func mac(_ text: String) -> String {
        Base64URL.encode(Array(HMAC<SHA256>.authenticationCode(for: Data(text.utf8), using: key)))
    }

    private static func nonce() -> String {
        var g = SystemRandomNumberGenerator()
        return Base64URL.encode((0..<16).map { _ in UInt8.random(in: 0...255, using: &g) })
    }

    private static func equal(_ a: String, _ b: String) -> Bool {
        APIKeyFormat.constantTimeEqual(Array(a.utf8), Array(b.utf8))
    }
}

/// A form body (`application/x-www-form-urlencoded`) as the console's pages post it.
public struct ConsoleForm: Sendable, Hashable {
    public var values: [String: [String]]

    public init(values: [String: [String]] = [:]) { self.values = values }

    /// Decodes `a=1&b=x+y&b=%3C`; a field named twice keeps both values in order.
    public init(encoded: String) {
        var values: [String: [String]] = [:]
        for pair in encoded.split(separator: "&", omittingEmptySubsequences: true) {
            let kv = pair.split(separator: "=", maxSplits: 1, omittingEmptySubsequences: false)
            let name = Self.decode(kv[0])
            let value = kv.count > 1 ? Self.decode(kv[1]) : ""
            values[name, default: []].append(value)
        }
        self.values = values
    }

    /// The first value of `name`, nil when absent.
    public subscript(_ name: String) -> String? { values[name]?.first }

    /// The first value of `name` with surrounding blanks removed, nil when absent or empty.
    public func text(_ name: String) -> String? {
        guard let v = self[name]?.trimmingCharacters(in: .whitespacesAndNewlines), !v.isEmpty else { return nil }
        return v
    }

    /// True for a checked checkbox.
    public func checked(_ name: String) -> Bool { self[name] != nil }

    private static func decode(_ s: Substring) -> String {
        let spaced = s.replacingOccurrences(of: "+", with: " ")
        return spaced.removingPercentEncoding ?? spaced
    }
}
