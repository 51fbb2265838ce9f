import Foundation
import Metrics
import Synchronization
import VolleyAPNs
import VolleyCore
import VolleyFCM
import VolleyHTTP2

/// Provider-side metrics of a worker. Sends are counted as they answer (`ManagedSender`); what the HTTP/2 pools
/// and token providers count themselves (connections, GOAWAYs, token refreshes) is read when Prometheus scrapes.
public final class ProviderMetrics: @unchecked Sendable {
    public static let statusClasses = ["2xx", "4xx", "5xx", "error"]
    public static let connectionStates = ["ready", "connecting"]
    public static let refreshResults = ["success", "failure"]

    /// One provider's series.
    final class PerProvider: Sendable {
        let inFlight = Atomic<Int>(0)
        let requests: [Counter]
        let duration: Timer
        init(_ p: PushProvider) {
            requests = ProviderMetrics.statusClasses.map {
                Counter(
                    label: "volley_provider_requests_total",
                    dimensions: [("provider", p.rawValue), ("status_class", $0)])
            }
            duration = Timer(label: "volley_provider_request_duration_seconds", dimensions: [("provider", p.rawValue)])
        }

        /// `status_class`: the HTTP status class of the final answer; `error` when none came (or the send never
        /// left, such as an app without credentials).
        func answered(_ outcome: DeliveryOutcome, nanoseconds: UInt64) {
            let index: Int
            switch outcome {
            case .accepted: index = 0
            case .rejected(let status, _, _): index = status >= 500 ? 2 : (status >= 400 ? 1 : 3)
            case .failed, .quotaExceeded, .expired: index = 3
            }
            requests[index].increment()
            duration.recordNanoseconds(Int64(clamping: nanoseconds))
        }
    }

    private let providers: [PushProvider: PerProvider]
    private let inFlightGauges: [PushProvider: Gauge]
    private let connections: [PushProvider: [String: Gauge]]
    private let goAways: [PushProvider: Counter]
    private let unansweredResends: [PushProvider: Counter]
    private let refreshes: [PushProvider: [String: Counter]]

    private struct TrackedPool {
        let provider: PushProvider
        let pool: Weak<HTTP2ConnectionPool>
        /// GOAWAYs already counted.
        var goAways = 0
        /// Unanswered requests resent, already counted.
        var unansweredResends = 0
    }
    /// Token providers seen at the last scrape with what was counted of them. Held strongly while their provider
    /// is current, so a new one can never be mistaken for an old one at the same address.
    private struct TrackedTokens {
        let owner: AnyObject
        var success: Int
        var failure: Int
    }
    private struct Pools {
        var pools: [TrackedPool] = []
        var tokens: [ObjectIdentifier: TrackedTokens] = [:]
    }
    private let pools = Mutex(Pools())

    /// Creates every series at zero.
    public init() {
        providers = Dictionary(uniqueKeysWithValues: PushProvider.allCases.map { ($0, PerProvider($0)) })
        inFlightGauges = Dictionary(
            uniqueKeysWithValues: PushProvider.allCases.map {
                let g = Gauge(label: "volley_inflight_requests", dimensions: [("provider", $0.rawValue)])
                g.record(0)
                return ($0, g)
            })
        connections = Dictionary(
            uniqueKeysWithValues: PushProvider.allCases.map { p in
                (
                    p,
                    Dictionary(
                        uniqueKeysWithValues: Self.connectionStates.map { s in
                            let g = Gauge(
                                label: "volley_provider_connections",
                                dimensions: [("provider", p.rawValue), ("state", s)])
                            g.record(0)
                            return (s, g)
                        })
                )
            })
        goAways = Dictionary(
            uniqueKeysWithValues: PushProvider.allCases.map {
                ($0, Counter(label: "volley_http2_goaway_total", dimensions: [("provider", $0.rawValue)]))
            })
        unansweredResends = Dictionary(
            uniqueKeysWithValues: PushProvider.allCases.map {
                (
                    $0,
                    Counter(label: "volley_http2_unanswered_resends_total", dimensions: [("provider", $0.rawValue)])
                )
            })
        refreshes = Dictionary(
            uniqueKeysWithValues: PushProvider.allCases.map { p in
                (
                    p,
                    Dictionary(
                        uniqueKeysWithValues: Self.refreshResults.map {
                            (
                                $0,
                                Counter(
                                    label: "volley_provider_token_refreshes_total",
                                    dimensions: [("provider", p.rawValue), ("result", $0)])
                            )
                        })
                )
            })
    }

    func of(_ platform: Platform) -> PerProvider {
        // Both providers exist (made in `init` for every case).
        providers[platform == .ios ? .apns : .fcm] ?? PerProvider(.apns)
    }

    /// Wraps the pool factory so the pools it makes are counted under the provider that asked for them (an FCM
    /// pool serves `fcm.googleapis.com`; its OAuth pool counts as FCM too).
    func transportFactory(_ provider: PushProvider, _ make: @escaping HTTP2SubmitterFactory) -> HTTP2SubmitterFactory {
        { [weak self] config in
            let submitter = try make(config)
            if let self, let pool = submitter as? HTTP2ConnectionPool {
                self.pools.withLock { $0.pools.append(TrackedPool(provider: provider, pool: Weak(pool))) }
            }
            return submitter
        }
    }

    /// Refreshes what is read rather than counted: in-flight sends, connections, GOAWAYs, unanswered requests
    /// resent, token refreshes.
    /// `senders` are the current providers (a replaced provider's counts stop with it).
    public func refresh(senders: [any PushSender]) {
        for (p, g) in inFlightGauges { g.record(providers[p]?.inFlight.load(ordering: .relaxed) ?? 0) }
        var poolIncrements: [(Counter, Int)] = []
        var ready = [PushProvider: Int]()
        var connecting = [PushProvider: Int]()
        var refreshIncrements: [(Counter, Int)] = []
        pools.withLock { s in
            s.pools.removeAll { $0.pool.value == nil }
            for i in s.pools.indices {
                guard let pool = s.pools[i].pool.value else { continue }
                let provider = s.pools[i].provider
                let st = pool.statistics
                ready[provider, default: 0] += st.connectionsReady
                connecting[provider, default: 0] += max(
                    0, st.connectionsOpened - st.connectionsClosed - st.connectionsReady)
                let delta = st.goAwaysReceived - s.pools[i].goAways
                if delta > 0, let c = goAways[provider] { poolIncrements.append((c, delta)) }
                s.pools[i].goAways = st.goAwaysReceived
                let resent = st.unansweredResends - s.pools[i].unansweredResends
                if resent > 0, let c = unansweredResends[provider] { poolIncrements.append((c, resent)) }
                s.pools[i].unansweredResends = st.unansweredResends
            }
            var seen: [ObjectIdentifier: TrackedTokens] = [:]
            for sender in senders {
                let counts: (PushProvider, AnyObject, Int, Int)?
                if let a = sender as? APNSProvider, let t = a.tokenProvider {
                    counts = (.apns, t, t.mintCount, 0)
                } else if let f = sender as? FCMProvider {
                    let failures = f.tokens.tokenFailureCount
                    counts = (.fcm, f.tokens, f.tokens.tokenRequestCount - failures, failures)
                } else {
                    counts = nil
                }
                guard let (provider, owner, success, failure) = counts else { continue }
                let id = ObjectIdentifier(owner)
                if seen[id] != nil { continue } // apps sharing a team and key share one token provider
                let last = s.tokens[id] ?? TrackedTokens(owner: owner, success: 0, failure: 0)
                if success > last.success, let c = refreshes[provider]?["success"] {
                    refreshIncrements.append((c, success - last.success))
                }
                if failure > last.failure, let c = refreshes[provider]?["failure"] {
                    refreshIncrements.append((c, failure - last.failure))
                }
                seen[id] = TrackedTokens(owner: owner, success: success, failure: failure)
            }
            s.tokens = seen
        }
        for p in PushProvider.allCases {
            connections[p]?["ready"]?.record(ready[p] ?? 0)
            connections[p]?["connecting"]?.record(connecting[p] ?? 0)
        }
        for (c, n) in poolIncrements { c.increment(by: n) }
        for (c, n) in refreshIncrements { c.increment(by: n) }
    }
}

struct Weak<T: AnyObject>: @unchecked Sendable {
    weak var value: T?
    init(_ value: T) { self.value = value }
}
