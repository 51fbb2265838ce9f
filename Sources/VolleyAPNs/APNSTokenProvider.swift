import Crypto
import Foundation
import VolleyCore

/// Why an APNs credential could not be used. Names the app and says what to do.
public struct APNSConfigurationError: Error, Sendable, Hashable, CustomStringConvertible {
    public let app: String
    public let message: String
    public init(app: String, _ message: String) {
        self.app = app
        self.message = message
    }
    public var description: String { "app \(app): \(message)" }
}

/// The APNs provider token (ES256 JWT) for one (team, key), shared by every connection of the process.
///
/// Cadence (Apple, "Establishing a token-based connection to APNs"): refresh no more than once every
/// 20 minutes and no less than once every 60 minutes. We mint after 50 minutes of age, and on
/// `403 ExpiredProviderToken` only if the current token is at least 20 minutes old — so a storm of
/// ExpiredProviderToken answers cannot cause `429 TooManyProviderTokenUpdates`.
/// Thread-safe: state behind one lock; signing (~50 µs) happens at most once per refresh.
public final class APNSTokenProvider: @unchecked Sendable {
    public let teamID: String
    public let keyID: String
    /// Age after which the next use mints a new token.
    public let refreshAfterSeconds: Double
    /// Minimum age before any refresh, including forced ones.
    public let minimumIntervalSeconds: Double

    private let key: P256.Signing.PrivateKey
    private let clock: any WallClock
    private let lock = NSLock()
    /// The current token, replaced as a whole on refresh: a lookup hands out a reference, nothing is copied.
    private var current: APNSAuthorization?
    private var token: String? { current?.value }
    private var issuedAt: Date = .distantPast
    private var mints = 0

    public init(
        p8PEM: String, keyID: String, teamID: String, clock: any WallClock = SystemClock(),
        refreshAfterSeconds: Double = 50 * 60, minimumIntervalSeconds: Double = 20 * 60
    ) throws {
        self.key = try P256.Signing.PrivateKey(pemRepresentation: p8PEM)
        self.keyID = keyID
        self.teamID = teamID
        self.clock = clock
        self.refreshAfterSeconds = refreshAfterSeconds
        self.minimumIntervalSeconds = minimumIntervalSeconds
    }

    /// How many tokens were minted so far (for tests and metrics).
    public var mintCount: Int { lock.withLock { mints } }

    /// The `authorization` header value ("bearer <jwt>"), minting when none exists or it is ≥ 50 min old.
    public func authorization() throws -> String {
        try currentAuthorization().value
    }

    /// The same as `authorization()`, as the minted object (no allocation when cached; its identity changes on
    /// refresh).
    func currentAuthorization() throws -> APNSAuthorization {
        let now = clock.now()
        lock.lock()
        defer { lock.unlock() }
        if let current, now.timeIntervalSince(issuedAt) < refreshAfterSeconds { return current }
        return try mintLocked(now: now)
    }

    /// After `ExpiredProviderToken` for `rejected` (the header value that was sent): returns true when a
    /// newer token is ready to resend with — either another send already refreshed it, or the current one
    /// is old enough (≥ 20 min) to be replaced now. False means: keep the token, back off.
    public func refreshAfterRejection(of rejected: String) -> Bool {
        lock.withLock {
            if token != rejected { return token != nil }
            let now = clock.now()
            guard now.timeIntervalSince(issuedAt) >= minimumIntervalSeconds else { return false }
            return (try? mintLocked(now: now)) != nil
        }
    }

    @discardableResult
    private func mintLocked(now: Date) throws -> APNSAuthorization {
        let iat = Int(now.timeIntervalSince1970)
        let header = #"{"alg":"ES256","kid":"\#(keyID)"}"#
        let claims = #"{"iss":"\#(teamID)","iat":\#(iat)}"#
        let signingInput = Base64URL.encode(Array(header.utf8)) + "." + Base64URL.encode(Array(claims.utf8))
        let signature = try key.signature(for: Array(signingInput.utf8))
        let jwt = signingInput + "." + Base64URL.encode(Array(signature.rawRepresentation))
        let value = APNSAuthorization("bearer " + jwt)
        current = value
        issuedAt = now
        mints += 1
        return value
    }
}

/// One minted `authorization` header value ("bearer <jwt>"). Immutable; a refresh replaces the whole object, so its
/// identity tells the provider when to re-encode its request prefix.
final class APNSAuthorization: Sendable {
    let value: String
    init(_ value: String) { self.value = value }
}

/// One `APNSTokenProvider` per (team, key) for the whole process. Owned by the composition root and
/// passed to every APNs sender, so two apps of one team share the token (Apple: "avoid generating multiple
/// tokens for the same TeamID").
public final class APNSTokenRegistry: @unchecked Sendable {
    private let lock = NSLock()
    private var providers: [String: APNSTokenProvider] = [:]
    private let clock: any WallClock
    public init(clock: any WallClock = SystemClock()) { self.clock = clock }

    public func provider(app: String, keyFile: String, keyID: String, teamID: String) throws -> APNSTokenProvider {
        try lock.withLock {
            let k = teamID + "/" + keyID
            if let p = providers[k] { return p }
            guard let pem = try? String(contentsOfFile: keyFile, encoding: .utf8) else {
                throw APNSConfigurationError(
                    app: app, "cannot read APNs key file \(keyFile): check apps[].apns.keyFile")
            }
            let p: APNSTokenProvider
            do {
                p = try APNSTokenProvider(p8PEM: pem, keyID: keyID, teamID: teamID, clock: clock)
            } catch {
                throw APNSConfigurationError(
                    app: app,
                    "APNs key file \(keyFile) is not a PKCS#8 P-256 private key (.p8 from Apple): \(error)")
            }
            providers[k] = p
            return p
        }
    }
}

enum Base64URL {
    static func encode(_ bytes: [UInt8]) -> String {
        var s = Data(bytes).base64EncodedString()
        s = s.replacingOccurrences(of: "+", with: "-").replacingOccurrences(of: "/", with: "_")
        while s.hasSuffix("=") { s.removeLast() }
        return s
    }
}
