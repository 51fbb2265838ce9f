import VolleyCore

/// Runtime behaviour of the mock: fault injection and limits. Loaded from `--config FILE` at start and merged at run
/// time from `POST /_mock/config` (same JSON). Merging: every key present replaces that setting (lists and maps are
/// replaced whole, not appended); absent keys keep their value; `"replace": true` first resets everything to defaults.
///
/// Schema (every key optional):
/// ```
/// {
///   "replace": false,                       // true: start from defaults before applying this document
///   "apns": {
///     "unregisteredTokens": ["<hex>", …],    // 410 {"reason":"Unregistered","timestamp":<ms>}
///     "unregisteredPrefixes": ["dead", …],   // any token starting with one of these → 410 Unregistered
///     "invalidTokens": ["<hex>", …],         // 400 BadDeviceToken
///     "invalidPrefixes": ["bad0", …],        // 400 BadDeviceToken
///     "tokenReasons": {"<hex>": {"status": 429, "reason": "TooManyRequests"}, …},   // exact answer per token
///     "reasonPrefixes": {"<prefix>": {"status": 503, "reason": "ServiceUnavailable"}, …},
///     "jwtMaxAgeSeconds": 3600,             // iat older than this → 403 ExpiredProviderToken
///     "tokenUpdateLimitSeconds": 0,         // > 0: a provider token first seen less than this after the previous
///                                           // one (any connection) → 429 TooManyProviderTokenUpdates (Apple: 1200)
///     "oneStreamUntilAuthenticated": false  // start connections at max streams 1; raise after the first 200
///   },
///   "fcm": {
///     "unregisteredTokens": [...], "unregisteredPrefixes": [...],   // 404 NOT_FOUND / UNREGISTERED
///     "invalidTokens": [...], "invalidPrefixes": [...],             // 400 INVALID_ARGUMENT (message.token)
///     "tokenReasons": {"<token>": {"reason": "QUOTA_EXCEEDED", "status": 429, "retryAfter": 30}, …},
///     "reasonPrefixes": {"<prefix>": {"reason": "SENDER_ID_MISMATCH"}, …},
///         // reason = FCM errorCode (UNREGISTERED, INVALID_ARGUMENT, SENDER_ID_MISMATCH, QUOTA_EXCEEDED,
///         // UNAVAILABLE, INTERNAL, THIRD_PARTY_AUTH_ERROR); status defaults to Google's for that code
///     "accessTokenLifetimeSeconds": 3600      // expires_in of /token answers
///   },
///   "errorRate": 0.0,                       // 0…1: share of otherwise-valid sends answered with an injected error
///   "errorStatuses": [429, 500, 503],       // picked uniformly; APNs TooManyRequests/InternalServerError/
///                                           // ServiceUnavailable, FCM QUOTA_EXCEEDED/INTERNAL/UNAVAILABLE
///   "retryAfterSeconds": 1,                 // Retry-After on injected FCM 429/503 (and APNs 429/503)
///   "latencyMs": 0, "latencyJitterMs": 0,   // answer after latency + uniform(0…jitter) ms (timer, no blocking)
///   "goAwayAfterStreams": 0,                // 0 = off; after the Nth request on a connection:
///                                           // GOAWAY(last=that stream, NO_ERROR)
///   "goAwayReason": "Shutdown",             // JSON debug data {"reason":…} on that GOAWAY; null = no debug data
///   "resetAfterStreams": 0,                 // 0 = off; the Mth request on a connection gets no answer: TCP reset
///   "maxConcurrentStreams": 1000,           // advertised SETTINGS_MAX_CONCURRENT_STREAMS (applied to open
///                                           // connections too)
///   "duplicateTracking": true,              // count duplicate apns-id / x-volley-delivery-id among accepted sends
///   "capturePushes": 0                      // keep the last N accepted pushes (token, headers, body, when) for
///                                           // `GET /_mock/pushes[?offset=K&limit=N&compact=1]` (`accepted_at`:
///                                           // seconds since 1970) and `MockServer.capturedPushes()`
/// }
/// ```
public struct MockConfiguration: Sendable, Equatable {
    public struct Reason: Sendable, Equatable {
        public var status: Int
        public var reason: String
        public var retryAfter: Int?
        public init(status: Int, reason: String, retryAfter: Int? = nil) {
            self.status = status
            self.reason = reason
            self.retryAfter = retryAfter
        }
    }

    public struct TokenRules: Sendable, Equatable {
        public var unregisteredTokens: Set<String> = []
        public var unregisteredPrefixes: [String] = []
        public var invalidTokens: Set<String> = []
        public var invalidPrefixes: [String] = []
        public var tokenReasons: [String: Reason] = [:]
        public var reasonPrefixes: [(String, Reason)] = []
        public init() {}

        public static func == (a: TokenRules, b: TokenRules) -> Bool {
            a.unregisteredTokens == b.unregisteredTokens && a.unregisteredPrefixes == b.unregisteredPrefixes
                && a.invalidTokens == b.invalidTokens && a.invalidPrefixes == b.invalidPrefixes
                && a.tokenReasons == b.tokenReasons && a.reasonPrefixes.count == b.reasonPrefixes.count
                && zip(a.reasonPrefixes, b.reasonPrefixes).allSatisfy { $0.0 == $1.0 && $0.1 == $1.1 }
        }

        /// True when no rule can match: lets the hot path skip every lookup.
        public var isEmpty: Bool {
            unregisteredTokens.isEmpty && unregisteredPrefixes.isEmpty && invalidTokens.isEmpty
                && invalidPrefixes.isEmpty && tokenReasons.isEmpty && reasonPrefixes.isEmpty
        }

        enum Match {
            case unregistered, invalid
            case reason(Reason)
        }

        func match(_ token: Substring) -> Match? {
            if isEmpty { return nil }
            if !tokenReasons.isEmpty, let r = tokenReasons[String(token)] { return .reason(r) }
            if !unregisteredTokens.isEmpty, unregisteredTokens.contains(String(token)) { return .unregistered }
            if !invalidTokens.isEmpty, invalidTokens.contains(String(token)) { return .invalid }
            for p in unregisteredPrefixes where token.hasPrefix(p) { return .unregistered }
            for p in invalidPrefixes where token.hasPrefix(p) { return .invalid }
            for (p, r) in reasonPrefixes where token.hasPrefix(p) { return .reason(r) }
            return nil
        }
    }

    public var apns = TokenRules()
    public var fcm = TokenRules()
    public var jwtMaxAgeSeconds: Int = 3600
    public var tokenUpdateLimitSeconds: Int = 0
    public var oneStreamUntilAuthenticated = false
    public var accessTokenLifetimeSeconds: Int = 3600
    public var errorRate: Double = 0
    public var errorStatuses: [Int] = [429, 500, 503]
    public var retryAfterSeconds: Int = 1
    public var latencyMs: Double = 0
    public var latencyJitterMs: Double = 0
    public var goAwayAfterStreams: Int = 0
    public var goAwayReason: String? = "Shutdown"
    public var resetAfterStreams: Int = 0
    public var maxConcurrentStreams: UInt32 = 1000
    public var duplicateTracking = true
    /// How many accepted pushes (APNs and FCM) the mock keeps, newest last, for tests to read what a device got.
    public var capturePushes = 0

    public init() {}

    /// Applies a configuration document (see the type's comment). Throws with a message naming the bad key.
    public mutating func merge(json text: String) throws {
        guard let doc = JSONValue.parse(text), case .object(let members) = doc else {
            throw MockConfigurationError("configuration must be a JSON object")
        }
        if doc["replace"]?.boolValue == true { self = MockConfiguration() }
        for (key, value) in members {
            switch key {
            case "replace": break
            case "apns":
                try Self.mergeRules(
                    &apns, value, provider: "apns",
                    extra: { k, v in
                        switch k {
                        case "jwtMaxAgeSeconds": self.jwtMaxAgeSeconds = try Self.int(v, k)
                        case "tokenUpdateLimitSeconds": self.tokenUpdateLimitSeconds = try Self.int(v, k)
                        case "oneStreamUntilAuthenticated": self.oneStreamUntilAuthenticated = try Self.bool(v, k)
                        default: return false
                        }
                        return true
                    }, defaultStatus: { _ in 400 })
            case "fcm":
                try Self.mergeRules(
                    &fcm, value, provider: "fcm",
                    extra: { k, v in
                        switch k {
                        case "accessTokenLifetimeSeconds": self.accessTokenLifetimeSeconds = try Self.int(v, k)
                        default: return false
                        }
                        return true
                    }, defaultStatus: { FCMErrorCode.httpStatus(for: $0) })
            case "jwtMaxAgeSeconds": jwtMaxAgeSeconds = try Self.int(value, key)
            case "oneStreamUntilAuthenticated": oneStreamUntilAuthenticated = try Self.bool(value, key)
            case "accessTokenLifetimeSeconds": accessTokenLifetimeSeconds = try Self.int(value, key)
            case "errorRate":
                guard let d = value.doubleValue, d >= 0, d <= 1 else {
                    throw MockConfigurationError("errorRate must be a number in 0…1")
                }
                errorRate = d
            case "errorStatuses":
                guard let a = value.arrayValue else {
                    throw MockConfigurationError("errorStatuses must be an array of 429/500/503")
                }
                errorStatuses = try a.map {
                    guard let s = $0.intValue, [429, 500, 503].contains(s) else {
                        throw MockConfigurationError("errorStatuses entries must be 429, 500 or 503")
                    }
                    return s
                }
            case "retryAfterSeconds": retryAfterSeconds = try Self.int(value, key)
            case "latencyMs": latencyMs = try Self.double(value, key)
            case "latencyJitterMs": latencyJitterMs = try Self.double(value, key)
            case "goAwayAfterStreams": goAwayAfterStreams = try Self.int(value, key)
            case "goAwayReason":
                if case .null = value {
                    goAwayReason = nil
                } else {
                    guard let s = value.stringValue else {
                        throw MockConfigurationError("goAwayReason must be a string or null")
                    }
                    goAwayReason = s
                }
            case "resetAfterStreams": resetAfterStreams = try Self.int(value, key)
            case "maxConcurrentStreams":
                let n = try Self.int(value, key)
                guard n >= 1, n <= Int(UInt32.max) else {
                    throw MockConfigurationError("maxConcurrentStreams must be ≥ 1")
                }
                maxConcurrentStreams = UInt32(n)
            case "duplicateTracking": duplicateTracking = try Self.bool(value, key)
            case "capturePushes": capturePushes = try Self.int(value, key)
            default:
                throw MockConfigurationError("unknown configuration key \"\(key)\"")
            }
        }
    }

    static func int(_ v: JSONValue, _ key: String) throws -> Int {
        guard let i = v.intValue, i >= 0 else { throw MockConfigurationError("\(key) must be a non-negative integer") }
        return i
    }
    static func double(_ v: JSONValue, _ key: String) throws -> Double {
        guard let d = v.doubleValue, d >= 0, d.isFinite else {
            throw MockConfigurationError("\(key) must be a non-negative number")
        }
        return d
    }
    static func bool(_ v: JSONValue, _ key: String) throws -> Bool {
        guard let b = v.boolValue else { throw MockConfigurationError("\(key) must be true or false") }
        return b
    }
    static func strings(_ v: JSONValue, _ key: String) throws -> [String] {
        guard let a = v.arrayValue else { throw MockConfigurationError("\(key) must be an array of strings") }
        return try a.map {
            guard let s = $0.stringValue else { throw MockConfigurationError("\(key) must be an array of strings") }
            return s
        }
    }
    static func reason(_ v: JSONValue, _ key: String, defaultStatus: (String) -> Int) throws -> Reason {
        guard let r = v["reason"]?.stringValue else {
            throw MockConfigurationError(
                "\(key) entries need {\"reason\": String, \"status\"?: Int, \"retryAfter\"?: Int}")
        }
        let status = v["status"]?.intValue ?? defaultStatus(r)
        guard status >= 200, status <= 599 else {
            throw MockConfigurationError("\(key): status must be an HTTP status")
        }
        return Reason(status: status, reason: r, retryAfter: v["retryAfter"]?.intValue)
    }

    static func mergeRules(
        _ rules: inout TokenRules, _ value: JSONValue, provider: String,
        extra: (String, JSONValue) throws -> Bool, defaultStatus: (String) -> Int
    ) throws {
        guard let members = value.objectValue else { throw MockConfigurationError("\(provider) must be an object") }
        for (k, v) in members {
            let name = provider + "." + k
            switch k {
            case "unregisteredTokens": rules.unregisteredTokens = Set(try strings(v, name))
            case "unregisteredPrefixes": rules.unregisteredPrefixes = try strings(v, name)
            case "invalidTokens": rules.invalidTokens = Set(try strings(v, name))
            case "invalidPrefixes": rules.invalidPrefixes = try strings(v, name)
            case "tokenReasons":
                guard let m = v.objectValue else { throw MockConfigurationError("\(name) must be an object") }
                var out: [String: Reason] = [:]
                for (t, r) in m { out[t] = try reason(r, name, defaultStatus: defaultStatus) }
                rules.tokenReasons = out
            case "reasonPrefixes":
                guard let m = v.objectValue else { throw MockConfigurationError("\(name) must be an object") }
                // The longest prefix is tried first: a more specific rule wins over a general one.
                rules.reasonPrefixes = try m.sorted { ($0.key.count, $1.key) > ($1.key.count, $0.key) }.map {
                    ($0.key, try reason($0.value, name, defaultStatus: defaultStatus))
                }
            default:
                guard try extra(k, v) else { throw MockConfigurationError("unknown configuration key \"\(name)\"") }
            }
        }
    }

    /// The configuration as a JSON document in the same schema (what `GET /_mock/config` answers).
    public var json: String {
        func rules(_ r: TokenRules) -> [String: JSONValue] {
            func reasonJSON(_ x: Reason) -> JSONValue {
                var m: [String: JSONValue] = ["status": .number(JSONNumber(x.status)), "reason": .string(x.reason)]
                if let ra = x.retryAfter { m["retryAfter"] = .number(JSONNumber(ra)) }
                return .object(m)
            }
            return [
                "unregisteredTokens": .array(r.unregisteredTokens.sorted().map { .string($0) }),
                "unregisteredPrefixes": .array(r.unregisteredPrefixes.map { .string($0) }),
                "invalidTokens": .array(r.invalidTokens.sorted().map { .string($0) }),
                "invalidPrefixes": .array(r.invalidPrefixes.map { .string($0) }),
                "tokenReasons": .object(r.tokenReasons.mapValues(reasonJSON)),
                "reasonPrefixes": .object(
                    Dictionary(r.reasonPrefixes.map { ($0.0, reasonJSON($0.1)) }, uniquingKeysWith: { a, _ in a })),
            ]
        }
        func n(_ i: some BinaryInteger) -> JSONValue { .number(JSONNumber(i)) }
        let doc: JSONValue = .object([
            "apns": .object(
                rules(apns).merging(
                    [
                        "jwtMaxAgeSeconds": n(jwtMaxAgeSeconds),
                        "tokenUpdateLimitSeconds": n(tokenUpdateLimitSeconds),
                        "oneStreamUntilAuthenticated": .bool(oneStreamUntilAuthenticated),
                    ], uniquingKeysWith: { a, _ in a })),
            "fcm": .object(
                rules(fcm).merging(
                    ["accessTokenLifetimeSeconds": n(accessTokenLifetimeSeconds)], uniquingKeysWith: { a, _ in a })),
            "errorRate": .number(JSONNumber(errorRate)),
            "errorStatuses": .array(errorStatuses.map(n)),
            "retryAfterSeconds": n(retryAfterSeconds),
            "latencyMs": .number(JSONNumber(latencyMs)),
            "latencyJitterMs": .number(JSONNumber(latencyJitterMs)),
            "goAwayAfterStreams": n(goAwayAfterStreams),
            "goAwayReason": goAwayReason.map { .string($0) } ?? .null,
            "resetAfterStreams": n(resetAfterStreams),
            "maxConcurrentStreams": n(maxConcurrentStreams),
            "duplicateTracking": .bool(duplicateTracking),
            "capturePushes": n(capturePushes),
        ])
        return doc.jsonText
    }
}

public struct MockConfigurationError: Error, CustomStringConvertible, Sendable {
    public let description: String
    public init(_ description: String) { self.description = description }
}
