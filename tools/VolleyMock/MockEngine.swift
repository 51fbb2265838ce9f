import Crypto
import CryptoExtras
import Foundation
import Synchronization
import VolleyCore
import VolleyHTTP2
import VolleyHTTP2Server

/// A request as the mock sees it: the transport's server request as is (its fields stay bytes; the APNs hot path
/// reads them directly), so the decision logic runs — and is unit-tested — without sockets.
public typealias MockRequest = HTTP2ServerRequest

extension HTTP2ServerRequest {
    /// A POST on stream 1 (the engine's unit tests).
    public init(path: String, headers: [HTTP2Header] = [], body: [UInt8] = [], streamID: Int32 = 1) {
        self.init(method: "POST", path: path, headers: headers, body: body, streamID: streamID)
    }
}

/// What to do for one request: answer (possibly later), and connection-level actions afterwards.
public struct MockDecision: Sendable {
    /// nil: no answer (the connection is reset instead).
    public var response: HTTP2Response?
    public var delaySeconds: Double = 0
    public var goAway: (lastStreamID: Int32, debugData: [UInt8])?
    public var resetTCP = false
    public var setMaxConcurrentStreams: UInt32?
}

/// Per-connection state, stored in the connection's `userState`. Everything but `counters` is touched only on the
/// connection's queue; `counters` sits behind its own (uncontended) lock so stats can be read from anywhere.
public final class MockConnectionState: @unchecked Sendable {
    public let id: UInt64
    let counters = Mutex(MockCounters())
    /// Verified APNs provider tokens of this connection (the JWT is checked once per distinct token).
    var jwtVerdicts: [String: MockJWT.APNsVerdict] = [:]
    /// The raw bytes of the last `authorization` value and its verdict: the per-request check is one comparison.
    var lastAuthorization: [UInt8] = []
    var lastVerdict: MockJWT.APNsVerdict = .invalid
    /// The last `authorization` value came too soon after the team's previous token (`tokenUpdateLimitSeconds`).
    var lastTooManyUpdates = false
    /// Set at the connection's first authenticated APNs send: it answers every send 429
    /// TooManyProviderTokenUpdates (`refuseProviderTokens(connections:)`).
    var refusesProviderTokens: Bool?
    /// FCM access tokens seen valid on this connection → expiry (unix seconds).
    var accessTokens: [String: Int64] = [:]
    /// The engine's revocation count when `accessTokens` was last valid; a newer count empties it.
    var accessTokenRevocations = 0
    /// The tail of the last FCM body that passed the message's checks (see `MockFCMBodyMemo`).
    var fcmBodies = MockFCMBodyMemo()
    var streams = 0
    var clientCertificate: Bool
    /// True while "one stream until authenticated" holds the connection at 1.
    var limitedToOneStream = false
    var appliedMaxStreams: UInt32
    var configGeneration = -1
    /// Immutable snapshot: reading it per request costs one retain, not a copy of every list in the configuration.
    var snapshot = MockConfigurationSnapshot(MockConfiguration())
    var config: MockConfiguration { snapshot.config }
    var rng: UInt64

    public init(id: UInt64, clientCertificate: Bool, advertisedMaxStreams: UInt32) {
        self.id = id
        self.clientCertificate = clientCertificate
        self.appliedMaxStreams = advertisedMaxStreams
        var generator = SystemRandomNumberGenerator()
        var seed = generator.next()
        if seed == 0 { seed = 0x9e37_79b9_7f4a_7c15 }
        self.rng = seed ^ id
    }

    @inline(__always) func nextRandom() -> UInt64 {
        // xorshift64*: cheap, per connection, good enough for fault rates and ids.
        rng ^= rng >> 12
        rng ^= rng << 25
        rng ^= rng >> 27
        return rng &* 0x2545_F491_4F6C_DD1D
    }
    func nextUnit() -> Double { Double(nextRandom() >> 11) / Double(1 << 53) }

    func uuid() -> String {
        let a = nextRandom()
        let b = nextRandom()
        return String(unsafeUninitializedCapacity: 36) { out in
            let digits: StaticString = "0123456789abcdef"
            let d = digits.utf8Start
            var j = 0
            for i in 0..<16 {
                var byte = UInt8(truncatingIfNeeded: (i < 8 ? a : b) >> (UInt64(i & 7) * 8))
                if i == 6 { byte = byte & 0x0F | 0x40 }
                if i == 8 { byte = byte & 0x3F | 0x80 }
                if i == 4 || i == 6 || i == 8 || i == 10 {
                    out[j] = UInt8(ascii: "-")
                    j += 1
                }
                out[j] = d[Int(byte >> 4)]
                out[j + 1] = d[Int(byte & 15)]
                j += 2
            }
            return j
        }
    }
}

/// The mock's brain: credentials, configuration, shared tables, and the per-request decision. Thread-safe; the
/// per-request path takes no global lock (configuration is re-read only when its generation changes).
public final class MockEngine: Sendable {
    public let credentials: MockCredentials
    let host: String
    let port: Mutex<Int>
    let configState: Mutex<(generation: Int, config: MockConfiguration)>
    let configGeneration = Atomic<Int>(0)
    let duplicates = MockDuplicateTracker()
    /// FCM access tokens issued → expiry (unix seconds). Touched on token requests and on a connection's first sight
    /// of a token only.
    let issuedAccessTokens = Mutex<[String: Int64]>([:])
    let accessTokenCounter = Atomic<UInt64>(0)
    /// APNs signing keys trusted beside the credentials' own (key id → public key): a team's rotated key.
    let additionalAPNsKeys = Mutex<[String: P256.Signing.PublicKey]>([:])
    /// Bumped by `revokeAccessTokens()`; connections drop their cached verdicts when it moves.
    let accessTokenRevocations = Atomic<Int>(0)
    let messageCounter = Atomic<UInt64>(0)
    /// CLOCK_MONOTONIC time of the latest accepted send (see `MockStatsSnapshot.lastAcceptedNanos`).
    let lastAcceptedNanos = Atomic<UInt64>(0)
    let registry = Mutex(Registry())
    /// FCM sends still to answer 429 QUOTA_EXCEEDED (`throttleFCM(sends:retryAfter:)`), and its Retry-After.
    let fcmThrottles = Atomic<Int>(0)
    /// APNs connections still to be refused (`refuseProviderTokens(connections:)`).
    let tokenRefusals = Atomic<Int>(0)
    let fcmThrottleRetryAfter = Atomic<Int>(0)
    /// CLOCK_MONOTONIC time of the first such 429 (0: none yet), and FCM sends arrived per 100 ms after it.
    let fcmThrottledAtNanos = Atomic<UInt64>(0)
    let fcmArrivals = Mutex([Int](repeating: 0, count: MockEngine.arrivalBuckets))
    static let arrivalBuckets = 200
    /// Valid APNs provider tokens seen (any connection): first sight, and which came too soon after the previous one.
    let providerTokens = Mutex(ProviderTokens())
    struct ProviderTokens {
        var firstSeen: [String: Double] = [:]
        var tooSoon: Set<String> = []
        var latest: Double?

        /// Records a valid token seen at `now`; true when it is a new token less than `limit` seconds after the
        /// previous accepted one (Apple: "Update the authentication token no more than once every 20 minutes").
        mutating func note(_ token: String, now: Double, limit: Int) -> Bool {
            if firstSeen[token] != nil { return tooSoon.contains(token) }
            firstSeen[token] = now
            if limit > 0, let latest, now - latest < Double(limit) {
                tooSoon.insert(token)
                return true
            }
            latest = now
            return false
        }
    }
    let duplicateTrackingAllowed: Bool
    /// Every accepted send, appended to a file as it is accepted (`MockServerOptions.acceptJournal`).
    let acceptJournal: MockAcceptJournal?
    /// The last accepted pushes, when `capturePushes` asks for them (tests read what each device got).
    let captured = Mutex(MockCaptureLog())
    /// `credentials.apnsTopic` as bytes, for the per-request comparison.
    let apnsTopicBytes: [UInt8]
    /// `projects/<project>/messages/`, the start of an accepted answer's `name`.
    let fcmNamePrefixBytes: [UInt8]
    /// Called with the stats JSON/config for `/_mock/*` routes; set by the server.
    struct Registry {
        var open: [UInt64: MockConnectionState] = [:]
        var closedTotals = MockCounters()
        var opened = 0
        var maxStreamsSeen = 0
    }

    public init(
        credentials: MockCredentials, host: String, configuration: MockConfiguration, duplicateTracking: Bool = true,
        acceptJournal: MockAcceptJournal? = nil
    ) {
        self.acceptJournal = acceptJournal
        self.credentials = credentials
        self.host = host
        self.port = Mutex(0)
        self.configState = Mutex((1, configuration))
        self.configGeneration.store(1, ordering: .releasing)
        self.duplicateTrackingAllowed = duplicateTracking
        self.apnsTopicBytes = Array(credentials.apnsTopic.utf8)
        let project = credentials.fcmProjectID
        self.fcmNamePrefixBytes = Array("projects/\(project)/messages/".utf8)
    }

    // MARK: configuration

    public var configuration: MockConfiguration { configState.withLock { $0.config } }

    /// Merges a configuration document (schema: `MockConfiguration`).
    public func applyConfiguration(json: String) throws {
        try configState.withLock { st in
            var c = st.config
            try c.merge(json: json)
            st.config = c
            st.generation += 1
            configGeneration.store(st.generation, ordering: .releasing)
        }
    }

    public func setConfiguration(_ configuration: MockConfiguration) {
        configState.withLock { st in
            st.config = configuration
            st.generation += 1
            configGeneration.store(st.generation, ordering: .releasing)
        }
    }

    @inline(__always) func refreshConfig(_ state: MockConnectionState) {
        let g = configGeneration.load(ordering: .acquiring)
        if g != state.configGeneration {
            let (gen, c) = configState.withLock { ($0.generation, $0.config) }
            state.snapshot = MockConfigurationSnapshot(c)
            state.configGeneration = gen
        }
    }

    // MARK: connections

    /// Registers a new connection; returns its state and the max-streams value to advertise now (nil: keep).
    public func connectionOpened(id: UInt64, clientCertificate: Bool, serverMaxStreams: UInt32) -> (
        MockConnectionState, UInt32?
    ) {
        let state = MockConnectionState(
            id: id, clientCertificate: clientCertificate, advertisedMaxStreams: serverMaxStreams)
        refreshConfig(state)
        var set: UInt32? = nil
        if state.config.oneStreamUntilAuthenticated {
            state.limitedToOneStream = true
            set = 1
        } else if state.config.maxConcurrentStreams != serverMaxStreams {
            set = state.config.maxConcurrentStreams
        }
        if let s = set { state.appliedMaxStreams = s }
        registry.withLock { r in
            r.open[id] = state
            r.opened += 1
        }
        return (state, set)
    }

    public func connectionClosed(_ state: MockConnectionState, peakStreams: Int, refusedStreams: Int) {
        state.counters.withLock { c in
            c.peakConcurrentStreams = max(c.peakConcurrentStreams, peakStreams)
            c.refusedStreams = refusedStreams
        }
        let totals = state.counters.withLock { $0 }
        registry.withLock { r in
            r.open[state.id] = nil
            r.closedTotals.add(totals)
            r.maxStreamsSeen = max(r.maxStreamsSeen, totals.peakConcurrentStreams)
        }
    }

    // MARK: stats

    /// Stamps the latest accepted send (one clock read and one atomic max per accepted request).
    @inline(__always) func noteAccepted() {
        var ts = timespec()
        clock_gettime(CLOCK_MONOTONIC, &ts)
        lastAcceptedNanos.max(UInt64(ts.tv_sec) &* 1_000_000_000 &+ UInt64(ts.tv_nsec), ordering: .relaxed)
    }

    public func stats() -> MockStatsSnapshot {
        let (open, closed, opened, maxSeen) = registry.withLock { r in
            (Array(r.open.values), r.closedTotals, r.opened, r.maxStreamsSeen)
        }
        var total = closed
        var perConnection: [UInt64: Int] = [:]
        var maxStreams = maxSeen
        for s in open {
            let c = s.counters.withLock { $0 }
            total.add(c)
            perConnection[s.id] = c.peakConcurrentStreams
            maxStreams = max(maxStreams, c.peakConcurrentStreams)
        }
        var outcomes = total.errors
        if total.apnsAccepted > 0 { outcomes[MockOutcomeKey(.apns, 200, ""), default: 0] += total.apnsAccepted }
        if total.fcmAccepted + total.fcmValidateOnly > 0 {
            outcomes[MockOutcomeKey(.fcm, 200, ""), default: 0] += total.fcmAccepted + total.fcmValidateOnly
        }
        if total.tokenRequests > 0 {
            let failed = total.errors.filter { $0.key.provider == .oauth }.values.reduce(0, +)
            if total.tokenRequests > failed {
                outcomes[MockOutcomeKey(.oauth, 200, ""), default: 0] += total.tokenRequests - failed
            }
        }
        return MockStatsSnapshot(
            totalRequests: total.requests, outcomes: outcomes, acceptedAPNs: total.apnsAccepted,
            acceptedFCM: total.fcmAccepted, fcmValidateOnly: total.fcmValidateOnly, connectionsOpened: opened,
            connectionsOpen: open.count, peakConcurrentStreamsPerConnection: perConnection,
            maxConcurrentStreamsSeen: maxStreams, refusedStreams: total.refusedStreams,
            jwtVerifications: total.jwtVerifications, tokenRequests: total.tokenRequests,
            duplicateDeliveries: total.duplicates,
            lastAcceptedNanos: lastAcceptedNanos.load(ordering: .relaxed),
            apnsProviderTokens: providerTokens.withLock { Set($0.firstSeen.keys) })
    }

    /// The next `sends` FCM sends (well-formed, authenticated) are answered 429 QUOTA_EXCEEDED with
    /// `Retry-After: retryAfter`; from the first of them, FCM sends arriving are counted per 100 ms
    /// (`fcmArrivalsAfterThrottle`).
    public func throttleFCM(sends: Int, retryAfter: Int) {
        fcmThrottleRetryAfter.store(retryAfter, ordering: .relaxed)
        fcmThrottledAtNanos.store(0, ordering: .relaxed)
        fcmArrivals.withLock { $0 = [Int](repeating: 0, count: Self.arrivalBuckets) }
        fcmThrottles.store(sends, ordering: .releasing)
    }

    /// The next `connections` APNs connections to send with a valid provider token answer every send on them
    /// 429 TooManyProviderTokenUpdates, as APNs does on a connection whose token changed too often: a client must
    /// move to a new connection.
    public func refuseProviderTokens(connections: Int) {
        tokenRefusals.store(connections, ordering: .releasing)
    }

    /// Takes one of the refusals `refuseProviderTokens` asked for.
    private func takeTokenRefusal() -> Bool {
        var left = tokenRefusals.load(ordering: .acquiring)
        while left > 0 {
            let (exchanged, original) = tokenRefusals.compareExchange(
                expected: left, desired: left - 1, ordering: .acquiringAndReleasing)
            if exchanged { return true }
            left = original
        }
        return false
    }

    /// FCM sends that arrived in each 100 ms after the first throttled one (20 s), and when it was answered
    /// (CLOCK_MONOTONIC ns; 0: not yet).
    public var fcmArrivalsAfterThrottle: (throttledAtNanos: UInt64, per100ms: [Int]) {
        (fcmThrottledAtNanos.load(ordering: .acquiring), fcmArrivals.withLock { $0 })
    }

    private func noteFCMArrival() {
        let t0 = fcmThrottledAtNanos.load(ordering: .relaxed)
        if t0 == 0 { return }
        let elapsed = MockEngine.monotonicNanos() &- t0
        let bucket = Int(elapsed / 100_000_000)
        if bucket >= 0 && bucket < Self.arrivalBuckets { fcmArrivals.withLock { $0[bucket] += 1 } }
    }

    /// Takes one of the throttles `throttleFCM` asked for.
    private func takeFCMThrottle() -> Int? {
        var left = fcmThrottles.load(ordering: .acquiring)
        while left > 0 {
            let (exchanged, original) = fcmThrottles.compareExchange(
                expected: left, desired: left - 1, ordering: .acquiringAndReleasing)
            if exchanged {
                _ = fcmThrottledAtNanos.compareExchange(
                    expected: 0, desired: MockEngine.monotonicNanos(), ordering: .acquiringAndReleasing)
                return fcmThrottleRetryAfter.load(ordering: .relaxed)
            }
            left = original
        }
        return nil
    }

    static func monotonicNanos() -> UInt64 {
        var ts = timespec()
        clock_gettime(CLOCK_MONOTONIC, &ts)
        return UInt64(ts.tv_sec) * 1_000_000_000 + UInt64(ts.tv_nsec)
    }

    /// The accepted pushes kept by `capturePushes`, oldest first.
    public func capturedPushes() -> [MockCapturedPush] { captured.withLock { $0.pushes } }

    public func resetStats() {
        let open = registry.withLock { r -> [MockConnectionState] in
            r.closedTotals = MockCounters()
            r.opened = r.open.count
            r.maxStreamsSeen = 0
            return Array(r.open.values)
        }
        for s in open { s.counters.withLock { $0 = MockCounters() } }
        duplicates.reset()
        captured.withLock { $0 = MockCaptureLog() }
        lastAcceptedNanos.store(0, ordering: .relaxed)
        providerTokens.withLock { $0 = ProviderTokens() }
    }

    /// Trusts another APNs signing key of the team, as Apple does for each key a team creates: tests rotate to it.
    public func trustAPNsKey(keyID: String, publicKey: P256.Signing.PublicKey) {
        additionalAPNsKeys.withLock { $0[keyID] = publicKey }
    }

    /// Revokes every FCM access token issued so far, as Google does when a token is withdrawn early: the next send
    /// with one gets 401 UNAUTHENTICATED. Lets tests exercise the refresh path without waiting for an expiry.
    public func revokeAccessTokens() {
        issuedAccessTokens.withLock { $0.removeAll() }
        accessTokenRevocations.add(1, ordering: .relaxed)
    }

    // MARK: the decision

    /// Decides the answer to one request. Call on the connection's queue (it mutates `state`).
    public func process(_ req: MockRequest, state: MockConnectionState, now: Double = Date().timeIntervalSince1970)
        -> MockDecision
    {
        // The fields stay bytes for the whole decision (one pass picks out the ones the mock reads).
        req.fields.withUnsafeFields { fields in process(req, MockRawFields(fields), state: state, now: now) }
    }

    private func process(_ req: MockRequest, _ raw: MockRawFields, state: MockConnectionState, now: Double)
        -> MockDecision
    {
        let path = raw.path
        if MockBytes.hasPrefix(path, "/_mock/") { return admin(req) }
        refreshConfig(state)
        let snapshot = state.snapshot
        let config = snapshot.config
        var decision = MockDecision()
        if !state.limitedToOneStream, state.appliedMaxStreams != config.maxConcurrentStreams {
            state.appliedMaxStreams = config.maxConcurrentStreams
            decision.setMaxConcurrentStreams = config.maxConcurrentStreams
        }
        state.streams += 1
        let n = state.streams
        let provider: MockProvider
        if MockBytes.hasPrefix(path, "/3/device") {
            provider = .apns
        } else if MockBytes.hasPrefix(path, "/v1/projects/") {
            provider = .fcm
        } else if MockBytes.equal(path, "/token") || MockBytes.hasPrefix(path, "/token?") {
            provider = .oauth
        } else {
            provider = .apns
        }

        if config.resetAfterStreams > 0, n == config.resetAfterStreams {
            state.counters.withLock { c in
                c.requests += 1
                c.errors[MockOutcomeKey(provider, 0, "TCPReset"), default: 0] += 1
            }
            decision.response = nil
            decision.resetTCP = true
            return decision
        }

        var authenticated = false
        switch provider {
        case .apns:
            decision.response = apns(req, raw, state: state, config: config, now: now, authenticated: &authenticated)
        case .fcm:
            decision.response = fcm(req, raw, state: state, config: config, now: now, authenticated: &authenticated)
        case .oauth:
            decision.response = oauth(req, state: state, config: config, now: now, authenticated: &authenticated)
        }
        if authenticated, state.limitedToOneStream {
            state.limitedToOneStream = false
            state.appliedMaxStreams = config.maxConcurrentStreams
            decision.setMaxConcurrentStreams = config.maxConcurrentStreams
        }
        if config.goAwayAfterStreams > 0, n == config.goAwayAfterStreams {
            let debug = config.goAwayReason.map { Array("{\"reason\":\(MockJSONWriter.quote($0))}".utf8) } ?? []
            decision.goAway = (req.streamID, debug)
        }
        if config.latencyMs > 0 || config.latencyJitterMs > 0 {
            decision.delaySeconds = (config.latencyMs + config.latencyJitterMs * state.nextUnit()) / 1000
        }
        return decision
    }

    // MARK: APNs

    static let pushTypes: Set<String> = [
        "alert", "background", "location", "voip", "complication", "fileprovider", "mdm", "liveactivity",
        "pushtotalk", "widgets", "controls",
    ]
    static func isPushType(_ s: String) -> Bool {
        switch s {
        case "alert", "background", "location", "voip", "complication", "fileprovider", "mdm", "liveactivity",
            "pushtotalk", "widgets", "controls":
            return true
        default: return false
        }
    }
    static let pushTypeBytes: [[UInt8]] = [
        "alert", "background", "location", "voip", "complication", "fileprovider", "mdm", "liveactivity",
        "pushtotalk", "widgets", "controls",
    ].map { Array($0.utf8) }
    static func isPushType(_ s: UnsafeBufferPointer<UInt8>) -> Bool {
        pushTypeBytes.contains { MockBytes.equal(s, $0) }
    }
    static let topicSuffixes = [
        ".voip", ".complication", ".pushkit.fileprovider", ".push-type.liveactivity",
        ".location-query", ".voip-ptt", ".push-type.widgets",
    ]

    func apnsError(
        _ state: MockConnectionState, _ status: Int, _ reason: String, apnsID: String?, now: Double,
        retryAfter: Int? = nil
    ) -> HTTP2Response {
        state.counters.withLock { c in
            c.requests += 1
            c.errors[MockOutcomeKey(.apns, status, reason), default: 0] += 1
        }
        var body = "{\"reason\":\(MockJSONWriter.quote(reason))"
        if status == 410 { body += ",\"timestamp\":\(Int64(now * 1000))" }
        body += "}"
        var headers = [HTTP2Header("apns-id", apnsID ?? state.uuid()), HTTP2Header("content-type", "application/json")]
        if let ra = retryAfter { headers.append(HTTP2Header("retry-after", String(ra))) }
        return HTTP2Response(status: status, headers: headers, body: Array(body.utf8))
    }

    /// The APNs rules on the request's bytes. Every byte comparison is against an ASCII constant with no
    /// character that has a canonical equivalent elsewhere, so it decides exactly what the String comparison it
    /// replaces decided; the topic (free text) falls back to Strings when its bytes differ.
    func apns(
        _ req: MockRequest, _ raw: MockRawFields, state: MockConnectionState, config: MockConfiguration, now: Double,
        authenticated: inout Bool
    ) -> HTTP2Response {
        let apnsIDBytes = raw.apnsID
        if let id = apnsIDBytes, !Self.isUUID(id) {
            return apnsError(state, 400, "BadMessageId", apnsID: nil, now: now)
        }
        // Decoded only when present (echoed in the answer).
        let apnsID = apnsIDBytes.map { String(decoding: $0, as: UTF8.self) }
        guard let method = raw.method, MockBytes.equal(method, "POST") else {
            return apnsError(state, 405, "MethodNotAllowed", apnsID: apnsID, now: now)
        }
        let path = raw.path
        let prefixLength = "/3/device/".utf8.count
        guard MockBytes.hasPrefix(path, "/3/device/") || MockBytes.equal(path, "/3/device") else {
            return apnsError(state, 404, "BadPath", apnsID: apnsID, now: now)
        }
        let token =
            path.count > prefixLength
            ? UnsafeBufferPointer(rebasing: path[prefixLength...]) : UnsafeBufferPointer(start: nil, count: 0)
        if token.isEmpty { return apnsError(state, 400, "MissingDeviceToken", apnsID: apnsID, now: now) }
        for c in token where hexValue(c) == nil {
            return apnsError(state, 400, "BadDeviceToken", apnsID: apnsID, now: now)
        }

        // Provider authentication: certificate connections need no JWT; token connections need a valid ES256 JWT.
        if !state.clientCertificate {
            let verdict: MockJWT.APNsVerdict
            if let auth = raw.authorization, MockBytes.equal(auth, state.lastAuthorization) {
                // The common case: the bytes of the last value, which passed the length check below.
                verdict = state.lastVerdict
            } else {
                guard let auth = raw.authorization, MockBytes.decodedCount(auth) > 7 else {
                    return apnsError(state, 403, "MissingProviderToken", apnsID: apnsID, now: now)
                }
                let authString = String(decoding: auth, as: UTF8.self)
                if let v = state.jwtVerdicts[authString] {
                    verdict = v
                } else {
                    let scheme = authString.prefix(7)
                    if scheme.lowercased() != "bearer " {
                        verdict = .invalid
                    } else {
                        // The credentials' key first, then any other key of the team the tests trusted.
                        let teamID = credentials.apnsTeamID
                        let keys =
                            [(credentials.apnsKeyID, credentials.apnsPublicKey)]
                            + additionalAPNsKeys.withLock { $0.map { ($0.key, $0.value) } }
                        verdict =
                            keys.lazy.map {
                                MockJWT.verifyAPNs(
                                    authString.dropFirst(7), key: $0.1, keyID: $0.0, teamID: teamID)
                            }.first { $0 != .invalid } ?? .invalid
                    }
                    state.counters.withLock { $0.jwtVerifications += 1 }
                    if state.jwtVerdicts.count > 1024 { state.jwtVerdicts.removeAll() }
                    state.jwtVerdicts[authString] = verdict
                }
                state.lastAuthorization = Array(auth)
                state.lastVerdict = verdict
                // Once per connection and token: the team-wide record of distinct tokens.
                if case .valid = verdict {
                    let limit = config.tokenUpdateLimitSeconds
                    state.lastTooManyUpdates = providerTokens.withLock {
                        $0.note(String(decoding: auth, as: UTF8.self), now: now, limit: limit)
                    }
                }
            }
            guard case .valid(let iat) = verdict else {
                return apnsError(state, 403, "InvalidProviderToken", apnsID: apnsID, now: now)
            }
            if Int64(now) - iat > Int64(config.jwtMaxAgeSeconds) {
                return apnsError(state, 403, "ExpiredProviderToken", apnsID: apnsID, now: now)
            }
            if state.refusesProviderTokens == nil { state.refusesProviderTokens = takeTokenRefusal() }
            if state.lastTooManyUpdates || state.refusesProviderTokens == true {
                return apnsError(state, 429, "TooManyProviderTokenUpdates", apnsID: apnsID, now: now)
            }
        }

        guard let topicBytes = raw.topic else { return apnsError(state, 400, "MissingTopic", apnsID: apnsID, now: now) }
        if !MockBytes.equal(topicBytes, apnsTopicBytes) {
            let topic = String(decoding: topicBytes, as: UTF8.self)
            let accepted = credentials.apnsTopic
            var ok = topic == accepted
            if !ok, topic.hasPrefix(accepted) {
                let rest = topic.dropFirst(accepted.utf8.count)
                ok = Self.topicSuffixes.contains(where: { rest == $0 })
            }
            if !ok {
                return apnsError(
                    state, 400, state.clientCertificate ? "TopicDisallowed" : "DeviceTokenNotForTopic",
                    apnsID: apnsID, now: now)
            }
        }
        let pushType = raw.pushType
        if let pt = pushType, !Self.isPushType(pt) {
            return apnsError(state, 400, "InvalidPushType", apnsID: apnsID, now: now)
        }
        if let p = raw.priority {
            let ten = MockBytes.equal(p, "10")
            guard ten || MockBytes.equal(p, "5") || MockBytes.equal(p, "1") else {
                return apnsError(state, 400, "BadPriority", apnsID: apnsID, now: now)
            }
            if ten, let pt = pushType, MockBytes.equal(pt, "background") {
                return apnsError(state, 400, "BadPriority", apnsID: apnsID, now: now)
            }
        }
        if let e = raw.expiration {
            guard !e.isEmpty, e.count <= 19, e.allSatisfy({ $0 >= 0x30 && $0 <= 0x39 }) else {
                return apnsError(state, 400, "BadExpirationDate", apnsID: apnsID, now: now)
            }
        }
        if let c = raw.collapseID, MockBytes.decodedCount(c) > 64 {
            return apnsError(state, 400, "BadCollapseId", apnsID: apnsID, now: now)
        }
        if req.body.isEmpty { return apnsError(state, 400, "PayloadEmpty", apnsID: apnsID, now: now) }
        let limit = pushType.map { MockBytes.equal($0, "voip") } == true ? 5120 : 4096
        if req.body.count > limit { return apnsError(state, 413, "PayloadTooLarge", apnsID: apnsID, now: now) }
        guard MockJSONValidator.validate(req.body) == .object else {
            return apnsError(state, 400, "BadPayload", apnsID: apnsID, now: now)
        }
        // The request is well-formed and authenticated from here on.
        authenticated = true

        if !config.apns.isEmpty, let m = config.apns.match(String(decoding: token, as: UTF8.self)[...]) {
            switch m {
            case .unregistered: return apnsError(state, 410, "Unregistered", apnsID: apnsID, now: now)
            case .invalid: return apnsError(state, 400, "BadDeviceToken", apnsID: apnsID, now: now)
            case .reason(let r):
                return apnsError(state, r.status, r.reason, apnsID: apnsID, now: now, retryAfter: r.retryAfter)
            }
        }
        if config.errorRate > 0, !config.errorStatuses.isEmpty, state.nextUnit() < config.errorRate {
            let s = config.errorStatuses[Int(state.nextRandom() % UInt64(config.errorStatuses.count))]
            let reason = s == 429 ? "TooManyRequests" : s == 500 ? "InternalServerError" : "ServiceUnavailable"
            return apnsError(state, s, reason, apnsID: apnsID, now: now)
        }
        var duplicate = false
        if config.duplicateTracking, duplicateTrackingAllowed, let id = apnsID,
            let key = MockDuplicateTracker.key(uuid: id[...])
        {
            duplicate = duplicates.insert(key)
        }
        state.counters.withLock { c in
            c.requests += 1
            c.apnsAccepted += 1
            if duplicate { c.duplicates += 1 }
        }
        noteAccepted()
        acceptJournal?.recordAPNs(token: token, apnsID: apnsIDBytes)
        if config.capturePushes > 0 {
            var headers: [String: String] = [:]
            for (name, value) in [
                ("apns-push-type", raw.pushType), ("apns-priority", raw.priority), ("apns-expiration", raw.expiration),
                ("apns-collapse-id", raw.collapseID), ("apns-topic", raw.topic),
            ] {
                if let value { headers[name] = String(decoding: value, as: UTF8.self) }
            }
            let push = MockCapturedPush(
                provider: .apns, token: String(decoding: token, as: UTF8.self), headers: headers, body: req.body)
            captured.withLock { $0.append(push, keep: config.capturePushes) }
        }
        // Never indexed (RFC 7541 §6.2.3): a value unique per response would only churn both HPACK tables.
        return HTTP2Response(status: 200, headers: [HTTP2Header("apns-id", apnsID ?? state.uuid(), sensitive: true)])
    }

    static func isUUID(_ s: String) -> Bool {
        var s = s
        return s.withUTF8 { isUUID($0) }
    }

    static func isUUID(_ s: UnsafeBufferPointer<UInt8>) -> Bool {
        guard s.count == 36 else { return false }
        for (i, c) in s.enumerated() {
            if i == 8 || i == 13 || i == 18 || i == 23 {
                if c != UInt8(ascii: "-") { return false }
            } else if hexValue(c) == nil {
                return false
            }
        }
        return true
    }

    // MARK: FCM OAuth token endpoint

    func oauthError(_ state: MockConnectionState, _ status: Int, _ error: String, _ description: String)
        -> HTTP2Response
    {
        state.counters.withLock { c in
            c.requests += 1
            c.tokenRequests += 1
            c.errors[MockOutcomeKey(.oauth, status, error), default: 0] += 1
        }
        let body =
            "{\"error\":\(MockJSONWriter.quote(error)),\"error_description\":\(MockJSONWriter.quote(description))}"
        return HTTP2Response(
            status: status, headers: [HTTP2Header("content-type", "application/json; charset=utf-8")],
            body: Array(body.utf8))
    }

    static func formValue(_ body: [UInt8], _ name: String) -> String? {
        for pair in body.split(separator: UInt8(ascii: "&")) {
            guard let eq = pair.firstIndex(of: UInt8(ascii: "=")) else { continue }
            if percentDecode(pair[pair.startIndex..<eq]) == name { return percentDecode(pair[(eq + 1)...]) }
        }
        return nil
    }

    static func percentDecode(_ bytes: ArraySlice<UInt8>) -> String {
        var out: [UInt8] = []
        out.reserveCapacity(bytes.count)
        var i = bytes.startIndex
        while i < bytes.endIndex {
            let c = bytes[i]
            if c == UInt8(ascii: "+") {
                out.append(0x20)
                i += 1
                continue
            }
            if c == UInt8(ascii: "%"), i + 2 < bytes.endIndex + 0, let h = hexValue(bytes[i + 1]),
                let l = hexValue(bytes[i + 2])
            {
                out.append(h << 4 | l)
                i += 3
                continue
            }
            out.append(c)
            i += 1
        }
        return String(decoding: out, as: UTF8.self)
    }

    func oauth(
        _ req: MockRequest, state: MockConnectionState, config: MockConfiguration, now: Double,
        authenticated: inout Bool
    ) -> HTTP2Response {
        guard req.method == "POST" else {
            return oauthError(state, 405, "invalid_request", "Method not allowed; use POST.")
        }
        guard let grant = Self.formValue(req.body, "grant_type") else {
            return oauthError(state, 400, "invalid_request", "Missing required parameter: grant_type")
        }
        guard grant == "urn:ietf:params:oauth:grant-type:jwt-bearer" else {
            return oauthError(state, 400, "unsupported_grant_type", "Invalid grant_type: \(grant)")
        }
        guard let assertion = Self.formValue(req.body, "assertion") else {
            return oauthError(state, 400, "invalid_request", "Missing required parameter: assertion")
        }
        let p = port.withLock { $0 }
        let audiences = [
            credentials.tokenURI(host: host, port: p), credentials.tokenURI(host: "localhost", port: p),
            credentials.tokenURI(host: "127.0.0.1", port: p),
        ]
        if let problem = MockJWT.verifyFCMAssertion(
            assertion[...], key: credentials.fcmPublicKey,
            clientEmail: credentials.fcmClientEmail, audiences: audiences,
            now: Int64(now))
        {
            return oauthError(state, 400, "invalid_grant", problem)
        }
        authenticated = true
        let n = accessTokenCounter.add(1, ordering: .relaxed).newValue
        let token = "ya29.mock-\(n)-\(String(state.nextRandom(), radix: 16))\(String(state.nextRandom(), radix: 16))"
        let lifetime = config.accessTokenLifetimeSeconds
        let expiry = Int64(now) + Int64(lifetime)
        issuedAccessTokens.withLock { $0[token] = expiry }
        state.accessTokens[token] = expiry
        state.counters.withLock { c in
            c.requests += 1
            c.tokenRequests += 1
        }
        let body = "{\"access_token\":\"\(token)\",\"expires_in\":\(lifetime),\"token_type\":\"Bearer\"}"
        return HTTP2Response(
            status: 200, headers: [HTTP2Header("content-type", "application/json; charset=utf-8")],
            body: Array(body.utf8))
    }

    // MARK: FCM send

    func fcm(
        _ req: MockRequest, _ raw: MockRawFields, state: MockConnectionState, config: MockConfiguration,
        now: Double, authenticated: inout Bool
    ) -> HTTP2Response {
        // /v1/projects/<project>/messages:send
        let rest = req.path.dropFirst("/v1/projects/".utf8.count)
        guard let slash = rest.firstIndex(of: "/"), rest[slash...] == "/messages:send" else {
            return fcmError(state, 404, status: "NOT_FOUND", message: "Requested entity was not found.", errorCode: nil)
        }
        let project = rest[..<slash]
        guard req.method == "POST" else {
            return fcmError(state, 405, status: "METHOD_NOT_ALLOWED", message: "Method not allowed.", errorCode: nil)
        }
        guard let auth = req.header("authorization"), auth.utf8.count > 7, auth.prefix(7).lowercased() == "bearer "
        else {
            return fcmError(
                state, 401, status: "UNAUTHENTICATED",
                message:
                    "Request is missing required authentication credential. Expected OAuth 2 access token, login "
                    + "cookie or other valid authentication credential. See "
                    + "https://developers.google.com/identity/sign-in/web/devconsole-project.",
                errorCode: nil)
        }
        let token = String(auth.dropFirst(7))
        let revocations = accessTokenRevocations.load(ordering: .relaxed)
        if state.accessTokenRevocations != revocations {
            state.accessTokens.removeAll()
            state.accessTokenRevocations = revocations
        }
        var expiry = state.accessTokens[token]
        if expiry == nil {
            expiry = issuedAccessTokens.withLock { $0[token] }
            if let e = expiry { state.accessTokens[token] = e }
        }
        guard let exp = expiry, Double(exp) > now else {
            return fcmError(
                state, 401, status: "UNAUTHENTICATED",
                message:
                    "Request had invalid authentication credentials. Expected OAuth 2 access token, login cookie "
                    + "or other valid authentication credential. See "
                    + "https://developers.google.com/identity/sign-in/web/devconsole-project.",
                errorCode: nil)
        }
        guard project == credentials.fcmProjectID else {
            return fcmError(
                state, 403, status: "PERMISSION_DENIED",
                message:
                    "Permission 'cloudmessaging.messages.create' denied on resource "
                    + "'//cloudresourcemanager.googleapis.com/projects/\(project)' (or it may not exist).",
                errorCode: nil)
        }
        authenticated = true
        // A campaign's next body: the same message after another token, whose checks are already known to pass.
        let known = req.body.withUnsafeBufferPointer { b in
            state.fcmBodies.match(b).map {
                (target: String(decoding: $0.token, as: UTF8.self), validateOnly: $0.validateOnly)
            }
        }
        if let known {
            return fcmAccept(
                req, state: state, config: config, now: now, validateOnly: known.validateOnly, target: known.target)
        }
        guard let doc = JSONValue.parse(req.body), case .object = doc else {
            return fcmError(
                state, 400, status: "INVALID_ARGUMENT",
                message: "Invalid JSON payload received. Unexpected token.", errorCode: nil)
        }
        guard let message = doc["message"], case .object = message else {
            return fcmError(
                state, 400, status: "INVALID_ARGUMENT", message: "Request contains an invalid argument.",
                errorCode: "INVALID_ARGUMENT", field: ("message", "message is required"))
        }
        let target = message["token"]?.stringValue
        let hasTopic = message["topic"]?.stringValue != nil || message["condition"]?.stringValue != nil
        if target == nil && !hasTopic {
            return fcmError(
                state, 400, status: "INVALID_ARGUMENT", message: "Recipient of the message is not set.",
                errorCode: "INVALID_ARGUMENT", field: ("message.token", "Recipient of the message is not set."))
        }
        if let t = target, t.isEmpty || t.utf8.contains(where: { $0 <= 0x20 || $0 >= 0x7F }) {
            return invalidToken(state)
        }
        if let data = message["data"] {
            guard let members = data.objectValue else {
                return fcmError(
                    state, 400, status: "INVALID_ARGUMENT",
                    message:
                        "Invalid value at 'message.data' "
                        + "(type.googleapis.com/google.firebase.fcm.v1.Message.DataEntry), must be an object",
                    errorCode: "INVALID_ARGUMENT", field: ("message.data", "Invalid value"))
            }
            var size = 0
            for (i, (k, v)) in members.sorted(by: { $0.key < $1.key }).enumerated() {
                guard let s = v.stringValue else {
                    return fcmError(
                        state, 400, status: "INVALID_ARGUMENT",
                        message: "Invalid value at 'message.data[\(i)].value' (TYPE_STRING), \(v.jsonText)",
                        errorCode: nil,
                        field: (
                            "message.data[\(i)].value",
                            "Invalid value at 'message.data[\(i)].value' (TYPE_STRING), \(v.jsonText)"
                        ))
                }
                size += k.utf8.count + s.utf8.count
            }
            if size > 4096 {
                return fcmError(
                    state, 400, status: "INVALID_ARGUMENT", message: "Message is too big",
                    errorCode: "INVALID_ARGUMENT", field: ("message.data", "Message is too big"))
            }
        }
        if let android = message["android"] {
            if let p = android["priority"] {
                guard let s = p.stringValue, s == "HIGH" || s == "NORMAL" else {
                    return fcmError(
                        state, 400, status: "INVALID_ARGUMENT",
                        message:
                            "Invalid value at 'message.android.priority' "
                            + "(type.googleapis.com/google.firebase.fcm.v1.AndroidMessagePriority), \(p.jsonText)",
                        errorCode: nil, field: ("message.android.priority", "Invalid value"))
                }
            }
            if let ttl = android["ttl"] {
                guard let s = ttl.stringValue, Self.isDuration(s) else {
                    return fcmError(
                        state, 400, status: "INVALID_ARGUMENT",
                        message:
                            "Invalid value at 'message.android.ttl' "
                            + "(type.googleapis.com/google.protobuf.Duration), \(ttl.jsonText)",
                        errorCode: nil, field: ("message.android.ttl", "Invalid value"))
                }
            }
        }
        let validateOnly = doc["validate_only"]?.boolValue == true
        req.body.withUnsafeBufferPointer { state.fcmBodies.remember($0, validateOnly: validateOnly) }
        return fcmAccept(req, state: state, config: config, now: now, validateOnly: validateOnly, target: target)
    }

    /// What a send decides after its message passed the checks: token rules, injected errors, then the accepted
    /// answer.
    func fcmAccept(
        _ req: MockRequest, state: MockConnectionState, config: MockConfiguration, now: Double,
        validateOnly: Bool, target: String?
    ) -> HTTP2Response {
        if !validateOnly {
            noteFCMArrival()
            if fcmThrottles.load(ordering: .relaxed) > 0, let ra = takeFCMThrottle() {
                return fcmError(
                    state, 429, status: FCMErrorCode.googleStatus(forHTTP: 429),
                    message: FCMErrorCode.message(for: "QUOTA_EXCEEDED"), errorCode: "QUOTA_EXCEEDED", retryAfter: ra)
            }
        }
        if !config.fcm.isEmpty, let t = target, let m = config.fcm.match(t[...]) {
            switch m {
            case .unregistered:
                return fcmError(
                    state, 404, status: "NOT_FOUND", message: "Requested entity was not found.",
                    errorCode: "UNREGISTERED")
            case .invalid: return invalidToken(state)
            case .reason(let r):
                if r.reason == "INVALID_ARGUMENT" { return invalidToken(state) }
                return fcmError(
                    state, r.status, status: FCMErrorCode.googleStatus(forHTTP: r.status),
                    message: FCMErrorCode.message(for: r.reason), errorCode: r.reason, retryAfter: r.retryAfter)
            }
        }
        if config.errorRate > 0, !config.errorStatuses.isEmpty, state.nextUnit() < config.errorRate {
            let s = config.errorStatuses[Int(state.nextRandom() % UInt64(config.errorStatuses.count))]
            let code = s == 429 ? "QUOTA_EXCEEDED" : s == 500 ? "INTERNAL" : "UNAVAILABLE"
            return fcmError(
                state, s, status: FCMErrorCode.googleStatus(forHTTP: s), message: FCMErrorCode.message(for: code),
                errorCode: code, retryAfter: s == 500 ? nil : config.retryAfterSeconds)
        }
        var duplicate = false
        if !validateOnly, config.duplicateTracking, duplicateTrackingAllowed,
            let id = req.header("x-volley-delivery-id")
        {
            duplicate = duplicates.insert(MockDuplicateTracker.key(string: id[...]))
        }
        state.counters.withLock { c in
            c.requests += 1
            if validateOnly { c.fcmValidateOnly += 1 } else { c.fcmAccepted += 1 }
            if duplicate { c.duplicates += 1 }
        }
        if !validateOnly {
            noteAccepted()
            acceptJournal?.recordFCM(token: target ?? "-")
        }
        if !validateOnly, config.capturePushes > 0 {
            let push = MockCapturedPush(provider: .fcm, token: target ?? "", headers: [:], body: req.body)
            captured.withLock { $0.append(push, keep: config.capturePushes) }
        }
        // {"name":"projects/<project>/messages/<id>"}, id "0:<unix µs>%<counter, hex>" (or Google's validate_only id).
        var body: [UInt8] = []
        body.reserveCapacity(fcmNamePrefixBytes.count + 48)
        body.append(contentsOf: #"{"name":""#.utf8)
        body.append(contentsOf: fcmNamePrefixBytes)
        if validateOnly {
            body.append(contentsOf: "fake_message_id".utf8)
        } else {
            body.append(contentsOf: "0:".utf8)
            MockBytes.appendDecimal(Int64(now * 1_000_000), to: &body)
            body.append(UInt8(ascii: "%"))
            MockBytes.appendHex(messageCounter.add(1, ordering: .relaxed).newValue, to: &body)
        }
        body.append(contentsOf: #""}"#.utf8)
        return HTTP2Response(
            status: 200, headers: [HTTP2Header("content-type", "application/json; charset=UTF-8")],
            body: body)
    }

    static func isDuration(_ s: String) -> Bool {
        var s = s
        return s.withUTF8 { isDuration($0) }
    }

    static func isDuration(_ u: UnsafeBufferPointer<UInt8>) -> Bool {
        // ^\d+(\.\d+)?s$
        guard u.count >= 2, u.last == UInt8(ascii: "s") else { return false }
        var i = 0
        let digits = { (from: Int) -> Int in
            var j = from
            while j < u.count - 1, u[j] >= 0x30, u[j] <= 0x39 { j += 1 }
            return j
        }
        let a = digits(i)
        guard a > i else { return false }
        i = a
        if i == u.count - 1 { return true }
        guard u[i] == UInt8(ascii: ".") else { return false }
        let b = digits(i + 1)
        return b > i + 1 && b == u.count - 1
    }

    func invalidToken(_ state: MockConnectionState) -> HTTP2Response {
        fcmError(
            state, 400, status: "INVALID_ARGUMENT",
            message: "The registration token is not a valid FCM registration token",
            errorCode: "INVALID_ARGUMENT",
            field: ("message.token", "The registration token is not a valid FCM registration token"))
    }

    /// Google's error shape: {"error":{"code","message","status","details":[FcmError, BadRequest?]}}.
    func fcmError(
        _ state: MockConnectionState, _ code: Int, status: String, message: String, errorCode: String?,
        field: (String, String)? = nil, retryAfter: Int? = nil
    ) -> HTTP2Response {
        state.counters.withLock { c in
            c.requests += 1
            c.errors[MockOutcomeKey(.fcm, code, errorCode ?? status), default: 0] += 1
        }
        var details: [String] = []
        if let e = errorCode {
            details.append(
                "{\"@type\":\"type.googleapis.com/google.firebase.fcm.v1.FcmError\",\"errorCode\":"
                    + "\(MockJSONWriter.quote(e))}"
            )
        }
        if let (f, d) = field {
            details.append(
                "{\"@type\":\"type.googleapis.com/google.rpc.BadRequest\",\"fieldViolations\":[{\"field\":"
                    + "\(MockJSONWriter.quote(f)),\"description\":\(MockJSONWriter.quote(d))}]}"
            )
        }
        var body =
            "{\"error\":{\"code\":\(code),\"message\":\(MockJSONWriter.quote(message)),\"status\":"
            + "\(MockJSONWriter.quote(status))"
        if !details.isEmpty { body += ",\"details\":[" + details.joined(separator: ",") + "]" }
        body += "}}"
        var headers = [HTTP2Header("content-type", "application/json; charset=UTF-8")]
        if let ra = retryAfter { headers.append(HTTP2Header("retry-after", String(ra))) }
        return HTTP2Response(status: code, headers: headers, body: Array(body.utf8))
    }

    // MARK: admin

    /// A request path and its query's `name=value` pairs (no percent-decoding: the admin routes' values are plain).
    static func splitQuery(_ full: String) -> (String, [String: String]) {
        guard let q = full.firstIndex(of: "?") else { return (full, [:]) }
        var out: [String: String] = [:]
        for pair in full[full.index(after: q)...].split(separator: "&") {
            let kv = pair.split(separator: "=", maxSplits: 1)
            out[String(kv[0])] = kv.count > 1 ? String(kv[1]) : ""
        }
        return (String(full[..<q]), out)
    }

    func admin(_ req: MockRequest) -> MockDecision {
        var d = MockDecision()
        let json = [HTTP2Header("content-type", "application/json")]
        // `/_mock/pushes?offset=K&limit=N&compact=1`: a page of the captured pushes (a client may cap a response's
        // size); `compact` keeps the token and the time only.
        let (path, query) = Self.splitQuery(req.path)
        switch (req.method, path) {
        case ("GET", "/_mock/stats"):
            d.response = HTTP2Response(status: 200, headers: json, body: Array(stats().json.utf8))
        case ("GET", "/_mock/pushes"):
            let all = capturedPushes()
            let offset = min(all.count, max(0, query["offset"].flatMap { Int($0) } ?? 0))
            let limit = max(0, query["limit"].flatMap { Int($0) } ?? all.count)
            let compact = query["compact"] == "1"
            let pushes = all[offset..<min(all.count, offset + min(limit, all.count - offset))].map { p -> JSONValue in
                if compact {
                    return .object([
                        "token": .string(p.token),
                        "accepted_at": .number(JSONNumber(p.acceptedAt.timeIntervalSince1970)),
                    ])
                }
                return .object([
                    "provider": .string(p.provider.rawValue), "token": .string(p.token),
                    "headers": .object(p.headers.mapValues { .string($0) }),
                    "body": .string(String(decoding: p.body, as: UTF8.self)),
                    "accepted_at": .number(JSONNumber(p.acceptedAt.timeIntervalSince1970)),
                ])
            }
            d.response = HTTP2Response(status: 200, headers: json, body: JSONValue.array(pushes).encoded())
        case ("POST", "/_mock/reset-stats"):
            resetStats()
            d.response = HTTP2Response(status: 200, headers: json, body: Array("{\"ok\":true}".utf8))
        case ("GET", "/_mock/config"):
            d.response = HTTP2Response(status: 200, headers: json, body: Array(configuration.json.utf8))
        case ("POST", "/_mock/config"):
            do {
                try applyConfiguration(json: String(decoding: req.body, as: UTF8.self))
                d.response = HTTP2Response(status: 200, headers: json, body: Array(configuration.json.utf8))
            } catch {
                let body = "{\"error\":\(MockJSONWriter.quote(String(describing: error)))}"
                d.response = HTTP2Response(status: 400, headers: json, body: Array(body.utf8))
            }
        default:
            d.response = HTTP2Response(
                status: 404, headers: json, body: Array("{\"error\":\"unknown /_mock route\"}".utf8))
        }
        return d
    }
}

/// FCM error codes → Google HTTP status and canonical status names.
enum FCMErrorCode {
    static func httpStatus(for code: String) -> Int {
        switch code {
        case "UNREGISTERED": return 404
        case "INVALID_ARGUMENT": return 400
        case "SENDER_ID_MISMATCH": return 403
        case "QUOTA_EXCEEDED": return 429
        case "UNAVAILABLE": return 503
        case "INTERNAL": return 500
        case "THIRD_PARTY_AUTH_ERROR", "APNS_AUTH_ERROR": return 401
        default: return 500
        }
    }
    static func googleStatus(forHTTP status: Int) -> String {
        switch status {
        case 400: return "INVALID_ARGUMENT"
        case 401: return "UNAUTHENTICATED"
        case 403: return "PERMISSION_DENIED"
        case 404: return "NOT_FOUND"
        case 429: return "RESOURCE_EXHAUSTED"
        case 500: return "INTERNAL"
        case 503: return "UNAVAILABLE"
        default: return "UNKNOWN"
        }
    }
    static func message(for code: String) -> String {
        switch code {
        case "UNREGISTERED": return "Requested entity was not found."
        case "SENDER_ID_MISMATCH": return "SenderId mismatch"
        case "QUOTA_EXCEEDED":
            return "Quota exceeded for quota metric 'Messages sent' and limit 'Messages sent per minute'."
        case "UNAVAILABLE": return "The service is currently unavailable."
        case "INTERNAL": return "Internal error encountered."
        case "THIRD_PARTY_AUTH_ERROR", "APNS_AUTH_ERROR": return "Auth error from APNS or Web Push Service"
        default: return "Request contains an invalid argument."
        }
    }
}

/// An immutable configuration shared by reference between connections.
final class MockConfigurationSnapshot: Sendable {
    let config: MockConfiguration
    init(_ config: MockConfiguration) { self.config = config }
}

/// The fields the mock reads, picked out of a request in one pass (last occurrence wins, as before). Views into the
/// request's `HTTP2HeaderBlock`: valid only inside its `withUnsafeFields`.
struct MockRawFields {
    var method: UnsafeBufferPointer<UInt8>?
    var path = UnsafeBufferPointer<UInt8>(start: nil, count: 0)
    var authorization, topic, pushType, priority, expiration, collapseID, apnsID: UnsafeBufferPointer<UInt8>?
    /// How many `authorization` fields the request has (`header(_:)` reads the first, `authorization` is the last).
    var authorizationCount = 0

    init(_ fields: HTTP2HeaderBlock.UnsafeFields) {
        for f in fields {
            let n = f.name
            switch n.count {
            case 5 where MockBytes.equal(n, ":path"): path = f.value
            case 7 where MockBytes.equal(n, ":method"): method = f.value
            case 7 where MockBytes.equal(n, "apns-id"): apnsID = f.value
            case 10 where MockBytes.equal(n, "apns-topic"): topic = f.value
            case 13 where MockBytes.equal(n, "authorization"):
                authorization = f.value
                authorizationCount += 1
            case 13 where MockBytes.equal(n, "apns-priority"): priority = f.value
            case 14 where MockBytes.equal(n, "apns-push-type"): pushType = f.value
            case 15 where MockBytes.equal(n, "apns-expiration"): expiration = f.value
            case 16 where MockBytes.equal(n, "apns-collapse-id"): collapseID = f.value
            default: break
            }
        }
    }
}

/// Byte helpers that answer exactly what the String operations they replace answered.
enum MockBytes {
    @inline(__always) static func equal(_ a: UnsafeBufferPointer<UInt8>, _ b: StaticString) -> Bool {
        let n = b.utf8CodeUnitCount
        guard a.count == n else { return false }
        let p = b.utf8Start
        for i in 0..<n where a[i] != p[i] { return false }
        return true
    }

    /// Eight bytes at a time (provider tokens are ~190 bytes and compared per request).
    static func equal(_ a: UnsafeBufferPointer<UInt8>, _ b: [UInt8]) -> Bool {
        guard a.count == b.count else { return false }
        if a.isEmpty { return true }
        return b.withUnsafeBufferPointer { bb in
            guard let pa = a.baseAddress, let pb = bb.baseAddress else { return false }
            let n = a.count
            var i = 0
            while i + 8 <= n {
                if UnsafeRawPointer(pa + i).loadUnaligned(as: UInt64.self)
                    != UnsafeRawPointer(pb + i).loadUnaligned(as: UInt64.self)
                {
                    return false
                }
                i += 8
            }
            while i < n {
                if pa[i] != pb[i] { return false }
                i += 1
            }
            return true
        }
    }

    /// `String(decoding: a).hasPrefix(prefix)` for an ASCII prefix. Only when a non-ASCII scalar follows the prefix
    /// can the String answer differ (a combining mark joins the prefix's last character); that case decodes.
    static func hasPrefix(_ a: UnsafeBufferPointer<UInt8>, _ prefix: StaticString) -> Bool {
        let n = prefix.utf8CodeUnitCount
        guard a.count >= n else { return false }
        let p = prefix.utf8Start
        for i in 0..<n where a[i] != p[i] { return false }
        if a.count == n || a[n] < 0x80 { return true }
        return String(decoding: a, as: UTF8.self).hasPrefix(prefix.description)
    }

    /// Appends `v` in decimal (as `String(v)` writes it).
    static func appendDecimal(_ v: Int64, to out: inout [UInt8]) {
        if v < 0 { out.append(UInt8(ascii: "-")) }
        appendDigits(v.magnitude, radix: 10, to: &out)
    }

    /// Appends `v` in lowercase hexadecimal (as `String(v, radix: 16)` writes it).
    static func appendHex(_ v: UInt64, to out: inout [UInt8]) { appendDigits(v, radix: 16, to: &out) }

    private static func appendDigits(_ v: UInt64, radix: UInt64, to out: inout [UInt8]) {
        let digits: StaticString = "0123456789abcdef"
        var buffer: (UInt64, UInt64, UInt64, UInt64, UInt64, UInt64, UInt64, UInt64) = (0, 0, 0, 0, 0, 0, 0, 0)
        withUnsafeMutableBytes(of: &buffer) { tmp in
            var n = v
            var k = tmp.count
            repeat {
                k -= 1
                tmp[k] = digits.utf8Start[Int(n % radix)]
                n /= radix
            } while n > 0
            out.append(contentsOf: tmp[k...])
        }
    }

    /// `String(decoding: a).utf8.count` (invalid UTF-8 is repaired with U+FFFD, which changes the count).
    static func decodedCount(_ a: UnsafeBufferPointer<UInt8>) -> Int {
        for c in a where c >= 0x80 { return String(decoding: a, as: UTF8.self).utf8.count }
        return a.count
    }
}

/// One accepted push as the mock received it.
public struct MockCapturedPush: Sendable {
    public var provider: MockProvider
    /// The APNs device token (hex, from the path) or the FCM registration token (`message.token`).
    public var token: String
    /// APNs: `apns-push-type`, `apns-priority`, `apns-expiration`, `apns-collapse-id`, `apns-topic` when sent.
    public var headers: [String: String]
    public var body: [UInt8]
    /// When the mock accepted it (the test's window counts: pushes per second of a throttled job).
    public var acceptedAt = Date()
    /// The body as a JSON tree (nil when it is not JSON, which an accepted push never is).
    public var json: JSONValue? { JSONValue.parse(body) }
}

/// The last `keep` accepted pushes.
struct MockCaptureLog {
    private(set) var pushes: [MockCapturedPush] = []
    mutating func append(_ push: MockCapturedPush, keep: Int) {
        pushes.append(push)
        if pushes.count > keep { pushes.removeFirst(pushes.count - keep) }
    }
}
