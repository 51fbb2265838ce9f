/// How long to wait after failures in a row: `base × 2^(n − 1)` after the n-th, capped at `max`, then spread by
/// `jitter`. Every back-off in Volley is one of these: a delivery's retries (`RetryPolicy`), the fleet's pause
/// (`FleetPauseStateMachine`), the HTTP/2 pool's reconnects, the Redis client's reconnects and the cluster router's
/// pauses. A pure function of its inputs: the caller supplies the random unit, so a state machine draws it from
/// its injected random source and a test chooses it.
public struct ExponentialBackoff: Sendable, Hashable {
    /// The wait after the first failure, before jitter.
    public var base: Double
    /// The longest wait, before jitter.
    public var max: Double
    /// The share of the wait that is random, in 0...1: the wait is scaled into [1 − jitter, 1] of itself by the
    /// random unit. 0.5 waits between half and all of it, so a burst of failures does not come back in step
    /// (Google: "delay each one independently by an additional random amount"); 0 waits exactly.
    public var jitter: Double

    public init(base: Double, max: Double, jitter: Double = 0) {
        self.base = base
        self.max = max
        self.jitter = jitter
    }

    /// The wait after `failures` failures in a row (values below 1 count as 1). `unit` in 0...1 (clamped) is the
    /// random draw the jitter scales by; it does not matter when `jitter` is 0.
    public func delay(afterFailures failures: Int, unit: Double = 0) -> Double {
        // 2^1023 is the largest power of two a Double holds: beyond it the cap decides anyway.
        let doublings = Swift.min(Swift.max(failures, 1) - 1, 1023)
        let full = Swift.min(max, base * Double(sign: .plus, exponent: doublings, significand: 1))
        let u = Swift.min(Swift.max(unit, 0), 1)
        return full * ((1 - jitter) + jitter * u)
    }
}
