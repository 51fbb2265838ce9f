import Foundation

/// A job's `throttlePerMinute`: the most of its pushes the whole fleet sends in a minute.
///
/// The rate is exact, not rounded to whole sends per second: 1,019/min is one push every 60/1,019 s, so a minute
/// holds 1,019 of them. The gate (`ThrottleArithmetic`, virtual scheduling — GCRA) lets a sender that fell behind
/// catch up by at most `burst` pushes, 0.5 s worth: any 60 s then holds at most the rate and a burst, under 1 %.
public struct ThrottleRate: Sendable, Hashable, CustomStringConvertible {
    /// Pushes per minute, fleet-wide.
    public let perMinute: Int

    /// The accepted values of `throttlePerMinute`: one a minute up to 100,000 a second.
    public static let range = 1...6_000_000

    /// nil when `perMinute` is outside `range`.
    public init?(perMinute: Int) {
        guard Self.range.contains(perMinute) else { return nil }
        self.perMinute = perMinute
    }

    /// How far the gate lets a sender that fell behind catch up at once: 1/120 of the rate (0.5 s worth), at least
    /// 1, so the window that starts as a stalled sender catches up still holds the rate within 1 %, with room for
    /// the network's jitter.
    public var burst: Int { max(1, perMinute / 120) }

    /// How many pushes a sender asks for at a time: half a burst (0.25 s worth), at least 1, so a sender that wakes
    /// a little late still finds its slice waiting (the other half absorbs the lateness), one round trip a slice.
    public var slice: Int { max(1, burst / 2) }

    public var description: String { "\(perMinute)/min" }
}

/// What the gate answered: how many pushes may go now, and when to ask again for the next slice.
public struct ThrottleGrant: Sendable, Hashable {
    /// Pushes granted now: send exactly these.
    public var granted: Int
    /// From the answer, how long until the next slice (`ThrottleRate.slice`, or what is left of the request when
    /// that is less) is free.
    public var retryAfter: TimeInterval

    public init(granted: Int, retryAfter: TimeInterval) {
        self.granted = granted
        self.retryAfter = retryAfter
    }
}

/// The gate's state for one job: its theoretical arrival time (the instant the next push would be due if the
/// job sent exactly at its rate) as `anchorMillis + cells × 60,000 / perMinute` ms. Kept as an anchor and a count
/// of whole pushes, never as a fraction of a millisecond, so the arithmetic is exact in integers; the anchor moves
/// a minute at a time (`cells` less `perMinute`) to keep the numbers small.
public struct ThrottleState: Sendable, Hashable {
    public var anchorMillis: Int64
    public var cells: Int64
    public init(anchorMillis: Int64, cells: Int64) {
        self.anchorMillis = anchorMillis
        self.cells = cells
    }
}

/// The gate's arithmetic (generic cell rate algorithm, virtual scheduling), shared by the Redis script
/// (`RedisThrottle`, which mirrors it line by line) and the in-memory gate of the tests.
///
/// Scaled time: one millisecond is `perMinute` units and one push is 60,000 units, so every quantity is an
/// integer. A push is allowed at `now` while the theoretical arrival time is at most `burst − 1` pushes ahead of
/// `now`. A fresh job starts with `burst − slice` pushes' worth already ahead: its first slice goes at once and the
/// next ones follow at the rate, so the first minute holds exactly `perMinute`, not a burst more.
public enum ThrottleArithmetic {
    static let minute: Int64 = 60_000

    /// Takes up to `count` pushes at `nowMillis` from `state` (nil: a fresh job). Returns the new state, the grant
    /// and how long (ms) the state must be kept: until its arrival time passes, plus `keepMillis`.
    public static func take(
        _ state: ThrottleState?, rate: ThrottleRate, count: Int, nowMillis: Int64, keepMillis: Int64 = 600_000
    ) -> (state: ThrottleState, grant: ThrottleGrant, keepMillis: Int64) {
        let r = Int64(rate.perMinute)
        let burst = Int64(rate.burst)
        let slice = Int64(rate.slice)
        let tolerance = (burst - 1) * minute
        var s = state ?? ThrottleState(anchorMillis: nowMillis, cells: burst - slice)
        // How far ahead of now the arrival time is, in scaled units; behind (idle): start again from now.
        var ahead = s.cells * minute - (nowMillis - s.anchorMillis) * r
        if ahead < 0 {
            s = ThrottleState(anchorMillis: nowMillis, cells: 0)
            ahead = 0
        }
        var granted: Int64 = 0
        if count > 0 && ahead <= tolerance {
            granted = min(Int64(count), (tolerance - ahead) / minute + 1)
            s.cells += granted
            ahead += granted * minute
        }
        while s.cells >= r {
            s.cells -= r
            s.anchorMillis += minute
        }
        // The next slice (or the rest of the request) is free once `ahead` has fallen to `burst − want` pushes.
        let rest = Int64(count) - granted
        let want = rest > 0 ? min(rest, slice) : slice
        let wait = max(0, ahead - (burst - want) * minute)
        let waitMillis = (wait + r - 1) / r
        let keep = (ahead + r - 1) / r + keepMillis
        return (s, ThrottleGrant(granted: Int(granted), retryAfter: Double(waitMillis) / 1000), keep)
    }
}

/// The fleet's throttle of jobs that carry `throttlePerMinute`: the engine's one throttle seam. The state of each
/// job's gate lives in the store (Redis for the fleet), so every worker sending the job — and a worker that
/// takes it over after a crash — shares one rate.
public protocol JobThrottle: Sendable {
    /// Takes up to `count` of the job's pushes at `rate`. `now` is the caller's clock; a store with a clock of
    /// its own (Redis's `TIME`, one clock for the whole fleet) may use that instead. The grant's `retryAfter` is a
    /// duration, so it holds on any clock.
    func take(org: OrgID, job: JobID, rate: ThrottleRate, count: Int, now: Date) throws -> ThrottleGrant
}
