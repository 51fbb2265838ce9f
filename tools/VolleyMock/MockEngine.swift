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
}

/// An immutable configuration shared by reference between connections.
final class MockConfigurationSnapshot: Sendable {
    let config: MockConfiguration
    init(_ config: MockConfiguration) { self.config = config }
}
