import Synchronization

/// Which API a request was for.
public enum MockProvider: String, Sendable, Hashable, CaseIterable {
    case apns
    case fcm
    /// FCM's OAuth token endpoint (`POST /token`).
    case oauth
}

/// One row of the outcome table: provider, HTTP status, reason (APNs reason, FCM errorCode/status, "" for 200).
public struct MockOutcomeKey: Sendable, Hashable, CustomStringConvertible {
    public var provider: MockProvider
    public var status: Int
    public var reason: String
    public init(_ provider: MockProvider, _ status: Int, _ reason: String) {
        self.provider = provider
        self.status = status
        self.reason = reason
    }
    public var description: String { "\(provider.rawValue) \(status) \(reason)" }
}

/// Hot counters of one connection (or merged over many). Mutated only on the owning connection's queue, under
/// that connection's own lock so that a stats reader on another thread sees consistent values. Successful
/// answers only bump integers; the dictionary is touched for errors only.
public struct MockCounters: Sendable, Equatable {
    public var requests = 0
    public var apnsAccepted = 0
    public var fcmAccepted = 0
    public var fcmValidateOnly = 0
    public var tokenRequests = 0
    public var jwtVerifications = 0
    public var duplicates = 0
    public var errors: [MockOutcomeKey: Int] = [:]
    public var peakConcurrentStreams = 0
    public var refusedStreams = 0
    public init() {}

    mutating func add(_ o: MockCounters) {
        requests += o.requests
        apnsAccepted += o.apnsAccepted
        fcmAccepted += o.fcmAccepted
        fcmValidateOnly += o.fcmValidateOnly
        tokenRequests += o.tokenRequests
        jwtVerifications += o.jwtVerifications
        duplicates += o.duplicates
        for (k, v) in o.errors { errors[k, default: 0] += v }
        refusedStreams += o.refusedStreams
        peakConcurrentStreams = max(peakConcurrentStreams, o.peakConcurrentStreams)
    }
}

/// A snapshot of everything the mock counted (`GET /_mock/stats`, `MockServer.stats()`).
public struct MockStatsSnapshot: Sendable {
    /// Requests to the APNs and FCM APIs and the token endpoint (not `/_mock/*`).
    public var totalRequests: Int
    /// Count per (provider, status, reason), successes included (reason "").
    public var outcomes: [MockOutcomeKey: Int]
    public var acceptedAPNs: Int
    public var acceptedFCM: Int
    public var fcmValidateOnly: Int
    public var connectionsOpened: Int
    public var connectionsOpen: Int
    /// Peak concurrent streams per open connection id (closed connections only feed the overall max).
    public var peakConcurrentStreamsPerConnection: [UInt64: Int]
    public var maxConcurrentStreamsSeen: Int
    public var refusedStreams: Int
    public var jwtVerifications: Int
    public var tokenRequests: Int
    public var duplicateDeliveries: Int
    /// CLOCK_MONOTONIC nanoseconds at which the latest accepted send (APNs or FCM) was accepted; 0: none yet.
    /// Comparable with any process's CLOCK_MONOTONIC on this host (`bench e2e` times its idle probes with it).
    public var lastAcceptedNanos: UInt64 = 0
    /// Distinct valid APNs provider tokens seen, over every connection (one fleet should show one per team and key;
    /// a worker that switches keys shows a new one). The JSON rendering gives their count.
    public var apnsProviderTokens: Set<String> = []

    public func count(_ provider: MockProvider, _ status: Int, _ reason: String = "") -> Int {
        outcomes[MockOutcomeKey(provider, status, reason)] ?? 0
    }

    /// JSON rendering served at `GET /_mock/stats`:
    /// `{"total_requests":N, "accepted":{"apns":N,"fcm":N}, "fcm_validate_only":N,
    ///   "outcomes":[{"provider":"apns|fcm|oauth","status":410,"reason":"Unregistered","count":N},…],
    ///   "connections_opened":N, "connections_open":N, "peak_concurrent_streams_per_connection":{"<id>":N,…},
    ///   "max_concurrent_streams_seen":N, "refused_streams":N, "jwt_verifications":N, "token_requests":N,
    ///   "duplicate_deliveries":N, "apns_provider_tokens":N, "last_accepted_ns":N}`
    public var json: String {
        var s = "{\"total_requests\":\(totalRequests),"
        s += "\"accepted\":{\"apns\":\(acceptedAPNs),\"fcm\":\(acceptedFCM)},"
        s += "\"fcm_validate_only\":\(fcmValidateOnly),"
        let rows = outcomes.sorted {
            ($0.key.provider.rawValue, $0.key.status, $0.key.reason) < (
                $1.key.provider.rawValue, $1.key.status, $1.key.reason
            )
        }
        s +=
            "\"outcomes\":["
            + rows.map {
                "{\"provider\":\"\($0.key.provider.rawValue)\",\"status\":\($0.key.status),\"reason\":"
                    + "\(MockJSONWriter.quote($0.key.reason)),\"count\":\($0.value)}"
            }.joined(separator: ",") + "],"
        s += "\"connections_opened\":\(connectionsOpened),\"connections_open\":\(connectionsOpen),"
        s +=
            "\"peak_concurrent_streams_per_connection\":{"
            + peakConcurrentStreamsPerConnection.sorted { $0.key < $1.key }
            .map { "\"\($0.key)\":\($0.value)" }.joined(separator: ",") + "},"
        s += "\"max_concurrent_streams_seen\":\(maxConcurrentStreamsSeen),"
        s += "\"refused_streams\":\(refusedStreams),"
        s += "\"jwt_verifications\":\(jwtVerifications),"
        s += "\"token_requests\":\(tokenRequests),"
        s += "\"duplicate_deliveries\":\(duplicateDeliveries),"
        s += "\"apns_provider_tokens\":\(apnsProviderTokens.count),"
        s += "\"last_accepted_ns\":\(lastAcceptedNanos)}"
        return s
    }
}

/// Bounded set of delivery ids seen among accepted sends, striped so that connections on different queues rarely
/// meet on one lock. When a stripe is full it is cleared (the bound matters more than completeness).
final class MockDuplicateTracker: Sendable {
    struct Key: Hashable, Sendable {
        var hi: UInt64
        var lo: UInt64
    }
    final class Stripe: Sendable { let set = Mutex(Set<Key>()) }
    private let stripes: [Stripe]
    private let perStripeLimit: Int

    init(limit: Int = 5_000_000, stripes: Int = 16) {
        self.stripes = (0..<stripes).map { _ in Stripe() }
        self.perStripeLimit = max(1, limit / stripes)
    }

    /// Records `key`; true when it had been seen before.
    func insert(_ key: Key) -> Bool {
        let stripe = stripes[Int(truncatingIfNeeded: (key.lo ^ key.hi) % UInt64(stripes.count))]
        let limit = perStripeLimit
        return stripe.set.withLock { set in
            if set.count >= limit { set.removeAll(keepingCapacity: true) }
            return !set.insert(key).inserted
        }
    }

    func reset() { for s in stripes { s.set.withLock { $0.removeAll() } } }

    /// 128-bit key from a canonical UUID string (apns-id), nil when not a UUID.
    static func key(uuid: Substring) -> Key? {
        var hi: UInt64 = 0
        var lo: UInt64 = 0
        var n = 0
        for c in uuid.utf8 {
            if c == UInt8(ascii: "-") { continue }
            guard let d = hexValue(c) else { return nil }
            if n < 16 { hi = hi << 4 | UInt64(d) } else { lo = lo << 4 | UInt64(d) }
            n += 1
        }
        return n == 32 ? Key(hi: hi, lo: lo) : nil
    }

    /// Two independent FNV-1a style hashes of an arbitrary delivery id.
    static func key(string: Substring) -> Key {
        var a: UInt64 = 0xcbf2_9ce4_8422_2325
        var b: UInt64 = 0x8422_2325_cbf2_9ce4
        for c in string.utf8 {
            a = (a ^ UInt64(c)) &* 0x100_0000_01b3
            b = (b ^ UInt64(c)) &* 0x100_0000_01b3 &+ 0x9e37_79b9_7f4a_7c15
        }
        return Key(hi: a, lo: b)
    }
}

@inline(__always) func hexValue(_ c: UInt8) -> UInt8? {
    switch c {
    case UInt8(ascii: "0")...UInt8(ascii: "9"): return c - UInt8(ascii: "0")
    case UInt8(ascii: "a")...UInt8(ascii: "f"): return c - UInt8(ascii: "a") + 10
    case UInt8(ascii: "A")...UInt8(ascii: "F"): return c - UInt8(ascii: "A") + 10
    default: return nil
    }
}
