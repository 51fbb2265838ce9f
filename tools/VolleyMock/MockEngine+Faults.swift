import Crypto
import Foundation

// Faults a test or a benchmark asks for on top of the configuration: FCM quota throttles, refused APNs provider
// tokens, a rotated APNs key, revoked FCM access tokens.

extension MockEngine {
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
    func takeTokenRefusal() -> Bool {
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

    func noteFCMArrival() {
        let t0 = fcmThrottledAtNanos.load(ordering: .relaxed)
        if t0 == 0 { return }
        let elapsed = MockEngine.monotonicNanos() &- t0
        let bucket = Int(elapsed / 100_000_000)
        if bucket >= 0 && bucket < Self.arrivalBuckets { fcmArrivals.withLock { $0[bucket] += 1 } }
    }

    /// Takes one of the throttles `throttleFCM` asked for.
    func takeFCMThrottle() -> Int? {
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
}
