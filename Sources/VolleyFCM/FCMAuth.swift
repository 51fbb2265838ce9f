import Crypto
import CryptoExtras
import Foundation
import Logging
import VolleyCore
import VolleyHTTP2

/// Why an FCM credential could not be used. Names the app and says what to do.
public struct FCMConfigurationError: Error, Sendable, Hashable, CustomStringConvertible {
    public let app: String
    public let message: String
    /// From the OAuth token endpoint: its HTTP status and `error` (e.g. 400 "invalid_grant"); 0/nil otherwise.
    public var status: Int = 0
    public var oauthError: String?
    /// The token request failed in the transport before reaching the endpoint (worth retrying).
    public var resendIsSafe = false
    /// How the token request failed in the transport, as `transport:<kind>` (nil: the endpoint answered).
    public var transportReason: OutcomeReason?
    public init(app: String, _ message: String) {
        self.app = app
        self.message = message
    }
    public var description: String { "app \(app): \(message)" }

    /// What a send that could not get an access token answers, for the outcome table. The token endpoint refused
    /// the service account (4xx): `oauth:<error>`, fix-app. Its transport cannot be set up for this app (server
    /// certificate not trusted, TLS handshake refused, no h2, bad CA file): the same `transport:<kind>` as the FCM
    /// endpoint's own, fix-app. Unreachable, timed out, 5xx: nothing reached FCM, so the send may be retried.
    public var answer: ProviderAnswer {
        if let oauthError, !resendIsSafe {
            return ProviderAnswer(provider: .fcm, status: status, reason: OutcomeReason("oauth:" + oauthError))
        }
        if let transportReason, OutcomeTable.transportConfigurationReasons.contains(transportReason.rawValue) {
            return ProviderAnswer(provider: .fcm, status: 0, reason: transportReason)
        }
        return ProviderAnswer(provider: .fcm, status: 0, reason: "transport:oauth-token", transportResendIsSafe: true)
    }
}

/// A Google service account key file (the JSON downloaded from the Firebase console).
public struct FCMServiceAccount: Sendable, Hashable {
    public var clientEmail: String
    public var privateKeyPEM: String
    public var tokenURI: String
    public var projectID: String

    public init(clientEmail: String, privateKeyPEM: String, tokenURI: String, projectID: String) {
        self.clientEmail = clientEmail
        self.privateKeyPEM = privateKeyPEM
        self.tokenURI = tokenURI
        self.projectID = projectID
    }

    /// Reads `client_email`, `private_key`, `token_uri`, `project_id`; errors name the file and the key.
    public static func load(file: String, app: String) throws -> FCMServiceAccount {
        guard let data = FileManager.default.contents(atPath: file) else {
            throw FCMConfigurationError(
                app: app, "cannot read FCM service account file \(file): check apps[].fcm.serviceAccountFile")
        }
        guard let object = try? JSONSerialization.jsonObject(with: data) as? [String: Any] else {
            throw FCMConfigurationError(app: app, "FCM service account file \(file) is not a JSON object")
        }
        func field(_ key: String) throws -> String {
            guard let v = object[key] as? String, !v.isEmpty else {
                throw FCMConfigurationError(app: app, "FCM service account file \(file) has no \"\(key)\"")
            }
            return v
        }
        return FCMServiceAccount(
            clientEmail: try field("client_email"), privateKeyPEM: try field("private_key"),
            tokenURI: try field("token_uri"), projectID: try field("project_id"))
    }
}

/// OAuth 2.0 access tokens for FCM from a service account (RFC 7523 JWT bearer grant).
///
/// One refresh in flight at a time: callers that find no fresh token queue behind it and all get the same
/// answer. A token is used until 5 minutes before it expires. After `401 UNAUTHENTICATED` the rejected token
/// is dropped so the next caller refreshes. Thread-safe: state behind one lock, callbacks outside it.
public final class FCMAccessTokenProvider: @unchecked Sendable {
    public static let scope = "https://www.googleapis.com/auth/firebase.messaging"
    /// Use a token until this long before its expiry.
    public static let expiryMarginSeconds: Double = 5 * 60

    public typealias Waiter = @Sendable (Result<String, FCMConfigurationError>) -> Void

    private let app: String
    private let account: FCMServiceAccount
    private let key: _RSA.Signing.PrivateKey
    private let clock: any WallClock
    private let transport: any HTTP2RequestSubmitter
    private let tokenAuthority: String
    private let tokenPath: String
    private let logger: Logger

    private let lock = NSLock()
    private var token: String?
    /// When the cached token stops being used (its expiry minus the margin).
    private var expiresAt: Date = .distantPast
    private var waiters: [Waiter] = []
    private var refreshing = false
    private var requests = 0
    private var failures = 0

    /// `transport` reaches the host of `token_uri` (an `HTTP2ConnectionPool` like the FCM one).
    public init(
        app: String, account: FCMServiceAccount, transport: any HTTP2RequestSubmitter,
        clock: any WallClock = SystemClock(), logger: Logger
    ) throws {
        self.app = app
        self.account = account
        self.transport = transport
        self.clock = clock
        self.logger = logger
        do {
            key = try _RSA.Signing.PrivateKey(pemRepresentation: account.privateKeyPEM)
        } catch {
            throw FCMConfigurationError(app: app, "the service account's private_key is not an RSA PEM key: \(error)")
        }
        let endpoint = try FCMEndpoint(url: account.tokenURI, app: app, what: "token_uri")
        tokenAuthority = endpoint.authority
        tokenPath = endpoint.path
    }

    /// Token requests made so far (tests: single-flight).
    public var tokenRequestCount: Int { lock.withLock { requests } }
    /// Token requests that ended without a token (refused, unreachable).
    public var tokenFailureCount: Int { lock.withLock { failures } }

    /// Calls `completion` with "Bearer <token>" — at once when cached, else after the (single) refresh.
    public func authorization(_ completion: @escaping Waiter) {
        let now = clock.now()
        let action: (cached: String?, start: Bool) = lock.withLock {
            if let token, now < expiresAt { return (token, false) }
            waiters.append(completion)
            if refreshing { return (nil, false) }
            refreshing = true
            requests += 1
            return (nil, true)
        }
        if let cached = action.cached {
            completion(.success(cached))
            return
        }
        if action.start { refresh(now: now) }
    }

    /// The cached "Bearer <token>" when it is still fresh; nil means: call `authorization(_:)`.
    func cachedAuthorization() -> String? {
        let now = clock.now()
        return lock.withLock { () -> String? in
            if let token, now < expiresAt { return token }
            return nil
        }
    }

    /// After 401 for `rejected`: forget it (unless another refresh already replaced it).
    public func invalidate(_ rejected: String) {
        lock.withLock { if token == rejected { token = nil } }
    }

    /// The signed JWT assertion (RS256) for the token exchange.
    public func assertion(now: Date) throws -> String {
        let iat = Int(now.timeIntervalSince1970)
        let header = #"{"alg":"RS256","typ":"JWT"}"#
        let claims =
            "{\"iss\":\(jsonString(account.clientEmail)),\"scope\":\(jsonString(Self.scope)),"
            + "\"aud\":\(jsonString(account.tokenURI)),\"iat\":\(iat),\"exp\":\(iat + 3600)}"
        let input = Base64URL.encode(Array(header.utf8)) + "." + Base64URL.encode(Array(claims.utf8))
        let signature = try key.signature(for: Array(input.utf8), padding: .insecurePKCS1v1_5)
        return input + "." + Base64URL.encode(Array(signature.rawRepresentation))
    }

    private func refresh(now: Date) {
        let jwt: String
        do { jwt = try assertion(now: now) } catch {
            finish(.failure(FCMConfigurationError(app: app, "cannot sign the OAuth assertion: \(error)")), expiresIn: 0)
            return
        }
        let body = "grant_type=" + formEncode("urn:ietf:params:oauth:grant-type:jwt-bearer") + "&assertion=" + jwt
        let request = HTTP2Request(
            method: "POST", authority: tokenAuthority, path: tokenPath,
            headers: [HTTP2Header("content-type", "application/x-www-form-urlencoded")],
            body: Array(body.utf8))
        transport.submit(request) { [self] result in
            switch result {
            case .failure(let error):
                var e = FCMConfigurationError(app: app, "OAuth token request to \(account.tokenURI) failed: \(error)")
                e.resendIsSafe = error.resendIsSafe
                e.transportReason = OutcomeReason("transport:" + error.kind.rawValue)
                finish(.failure(e), expiresIn: 0)
            case .success(let response):
                let json = (try? JSONSerialization.jsonObject(with: Data(response.body))) as? [String: Any]
                if response.status == 200, let access = json?["access_token"] as? String {
                    let expiresIn = (json?["expires_in"] as? NSNumber)?.doubleValue ?? 3600
                    finish(.success("Bearer " + access), expiresIn: expiresIn)
                } else {
                    let detail =
                        (json?["error_description"] as? String) ?? (json?["error"] as? String)
                        ?? "HTTP \(response.status)"
                    var e = FCMConfigurationError(
                        app: app,
                        "the OAuth token endpoint refused the service account \(account.clientEmail): \(detail)")
                    e.status = response.status
                    e.oauthError = (json?["error"] as? String) ?? "oauth_error"
                    // A 5xx from the token endpoint is transient; a 4xx means the credentials are wrong.
                    e.resendIsSafe = response.status >= 500
                    finish(.failure(e), expiresIn: 0)
                }
            }
        }
    }

    private func finish(_ result: Result<String, FCMConfigurationError>, expiresIn: Double) {
        let ready: [Waiter] = lock.withLock {
            if case .success(let t) = result {
                token = t
                // Refresh 5 minutes before expiry; for unusually short-lived tokens, at half their life.
                let margin = min(Self.expiryMarginSeconds, expiresIn / 2)
                expiresAt = clock.now().addingTimeInterval(expiresIn - margin)
            } else {
                failures += 1
            }
            refreshing = false
            let w = waiters
            waiters = []
            return w
        }
        if case .failure(let e) = result { logger.error("\(e)") }
        for w in ready { w(result) }
    }

    private func jsonString(_ s: String) -> String {
        let data = (try? JSONEncoder().encode(s)) ?? Data("\"\"".utf8)
        return String(decoding: data, as: UTF8.self)
    }

    private func formEncode(_ s: String) -> String {
        var allowed = CharacterSet.alphanumerics
        allowed.insert(charactersIn: "-._~")
        return s.addingPercentEncoding(withAllowedCharacters: allowed) ?? s
    }
}

/// host, port, path of an https URL (token_uri, endpoint).
struct FCMEndpoint: Sendable, Hashable {
    var host: String
    var port: Int
    var path: String
    var authority: String { port == 443 ? host : "\(host):\(port)" }

    init(url: String, app: String, what: String) throws {
        guard let u = URLComponents(string: url), u.scheme == "https", let host = u.host, !host.isEmpty else {
            throw FCMConfigurationError(app: app, "\(what) \(url) is not an https URL")
        }
        self.host = host
        self.port = u.port ?? 443
        self.path = u.percentEncodedPath.isEmpty ? "/" : u.percentEncodedPath
        if let q = u.percentEncodedQuery { self.path += "?" + q }
    }
}
