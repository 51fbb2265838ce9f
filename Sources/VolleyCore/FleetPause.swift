import Foundation
import Synchronization

/// What a fleet-wide pause applies to: one FCM project, or one APNs app (its topic).
public struct FleetPauseKey: Sendable, Hashable, CustomStringConvertible {
    public var provider: PushProvider
    /// The FCM project id, or the APNs app's topic.
    public var target: String
    public init(provider: PushProvider, target: String) {
        self.provider = provider
        self.target = target
    }
    public var description: String { provider.rawValue + ":" + target }
}

/// Where the fleet keeps its pauses (production: Redis, `RedisFleetStore`). A pause only ever moves later.
public protocol FleetPauseStore: Sendable {
    /// Moves the pause of `key` to `until` unless it is already later; returns the pause afterwards.
    func extendPause(_ key: FleetPauseKey, until: Date) throws -> Date
    /// The pauses of `keys` (absent: none, or over).
    func pauses(_ keys: [FleetPauseKey]) throws -> [FleetPauseKey: Date]
}

/// The pause decisions for one key, without I/O: how long a provider's 429/503 pauses the fleet, and whether a send
/// must wait. Google: "Honor the Retry-After header"; without one, "exponential back-off (1 s, then at least 2 s,
/// then 4 s…)" with each sender delayed "by an additional random amount" (FCM HTTP v1, UNAVAILABLE/QUOTA_EXCEEDED).
public struct FleetPauseStateMachine: Sendable, Hashable {
    public var baseSeconds: Double
    public var maxSeconds: Double
    /// A throttle this long after the last pause ended starts the back-off from `baseSeconds` again.
    public var resetAfterSeconds: Double
    /// The pause in force as this worker knows it (its own throttles and the store's, whichever is later).
    public private(set) var until: Date?
    /// Throttles in a row without a quiet `resetAfterSeconds` in between.
    public private(set) var consecutive = 0

    /// `baseSeconds` doubling up to `maxSeconds`, between half and all of it at random.
    public var backoff: ExponentialBackoff { ExponentialBackoff(base: baseSeconds, max: maxSeconds, jitter: 0.5) }

    public init(baseSeconds: Double = 1, maxSeconds: Double = 60, resetAfterSeconds: Double = 30) {
        self.baseSeconds = baseSeconds
        self.maxSeconds = maxSeconds
        self.resetAfterSeconds = resetAfterSeconds
    }

    /// The provider throttled a send (429 or 503). `retryAfterSeconds`: its Retry-After, if any; `random` in 0..<1
    /// spreads the back-off. Returns the new pause end when it moved later (to publish), else nil.
    public mutating func throttled(retryAfterSeconds: Double?, now: Date, random: Double) -> Date? {
        if let until, now.timeIntervalSince(until) > resetAfterSeconds { consecutive = 0 }
        consecutive += 1
        let seconds: Double
        if let ra = retryAfterSeconds {
            seconds = min(ra, maxSeconds)
        } else {
            // Twenty doublings at most; the cap comes first for any base that is not tiny.
            seconds = backoff.delay(afterFailures: min(consecutive, 21), unit: random)
        }
        let end = now.addingTimeInterval(seconds)
        if let until, until >= end { return nil }
        until = end
        return end
    }

    /// The store's pause (nil: none). Only ever moves the pause later.
    public mutating func sharedRead(_ shared: Date?) {
        guard let shared else { return }
        if until.map({ shared > $0 }) ?? true { until = shared }
    }

    /// Seconds a send must wait now (nil: send).
    public func holdSeconds(now: Date) -> Double? {
        guard let until else { return nil }
        let s = until.timeIntervalSince(now)
        return s > 0 ? s : nil
    }
}

/// One key's pause, shared by the provider (the send path reads it: one atomic load, no lock, no Redis) and the
/// fleet sync (which publishes throttles and reads the store at most `FleetPauses.refreshSeconds` apart).
public final class FleetPauseGate: Sendable {
    public let key: FleetPauseKey
    /// The pause end in milliseconds since 1970; 0 when none was ever set. The send path's one read.
    private let untilMillis = Atomic<Int64>(0)
    private let machine = Mutex(FleetPauseStateMachine())
    private let onThrottle: @Sendable (FleetPauseKey, Date) -> Void

    init(key: FleetPauseKey, onThrottle: @escaping @Sendable (FleetPauseKey, Date) -> Void) {
        self.key = key
        self.onThrottle = onThrottle
    }

    /// Seconds a send must wait (nil: send now). Reads the clock only while a pause was ever set.
    @inlinable public func holdSeconds(clock: any WallClock) -> Double? {
        let until = loadUntilMillis()
        if until == 0 { return nil }
        let remaining = Double(until) / 1000 - clock.now().timeIntervalSince1970
        return remaining > 0 ? remaining : nil
    }

    @usableFromInline func loadUntilMillis() -> Int64 { untilMillis.load(ordering: .relaxed) }

    /// The provider answered 429 or 503 (`retryAfter`: the header as received). Pauses this worker at once and hands
    /// the new end to the fleet sync to publish.
    public func throttled(retryAfter: String?, clock: any WallClock) {
        let now = clock.now()
        let seconds = retryAfter.flatMap { RetryAfter.seconds($0, now: now) }
        let jitter = Double(UInt64.random(in: 0...UInt64.max) >> 11) * 0x1p-53
        let moved = machine.withLock { m -> Date? in
            let end = m.throttled(retryAfterSeconds: seconds, now: now, random: jitter)
            if let until = m.until { store(until) }
            return end
        }
        if let moved { onThrottle(key, moved) }
    }

    /// The store's pause for this key (nil: none).
    public func sharedRead(_ shared: Date?) {
        machine.withLock { m in
            m.sharedRead(shared)
            if let until = m.until { store(until) }
        }
    }

    private func store(_ until: Date) {
        untilMillis.store(Int64((until.timeIntervalSince1970 * 1000).rounded(.up)), ordering: .relaxed)
    }
}

/// Every pause gate of a worker process, made by the composition root and handed to the providers; the fleet sync
/// (`volley worker`) publishes throttles and refreshes every gate from the store.
public final class FleetPauses: Sendable {
    /// How old the local copy of the fleet's pauses may be.
    public static let refreshSeconds = 0.25
    private let gates = Mutex<[FleetPauseKey: FleetPauseGate]>([:])
    private let budgets = Mutex<[FleetPauseKey: FleetBudgetGate]>([:])
    private let onThrottle: @Sendable (FleetPauseKey, Date) -> Void
    private let wake: @Sendable () -> Void

    /// `onThrottle`: called (on the answering thread) with a pause that moved later, to publish it. `wake`: a budget
    /// wants a refill.
    public init(
        onThrottle: @escaping @Sendable (FleetPauseKey, Date) -> Void, wake: @escaping @Sendable () -> Void = {}
    ) {
        self.onThrottle = onThrottle
        self.wake = wake
    }

    /// The fleet's send budget for `key` (the first caller's `perMinute` decides).
    public func budget(for key: FleetPauseKey, perMinute: Int) -> FleetBudgetGate {
        budgets.withLock { b in
            if let gate = b[key] { return gate }
            let gate = FleetBudgetGate(key: key, perMinute: perMinute, wake: wake)
            b[key] = gate
            return gate
        }
    }

    public var allBudgets: [FleetBudgetGate] { budgets.withLock { Array($0.values) } }

    public func gate(for key: FleetPauseKey) -> FleetPauseGate {
        gates.withLock { g in
            if let gate = g[key] { return gate }
            let gate = FleetPauseGate(key: key, onThrottle: onThrottle)
            g[key] = gate
            return gate
        }
    }

    public var all: [FleetPauseGate] { gates.withLock { Array($0.values) } }
}

extension FleetPauseGate {
    /// Whether a send must wait for the fleet's pause, and how long. A send held since `heldSince` for longer than
    /// `policy.maxRetryAfterSeconds` goes anyway (its own retries then decide), so holding stays within the retry
    /// budget a Retry-After would have had.
    package func hold(policy: RetryPolicy, clock: any WallClock, heldSince: Date?) -> Double? {
        guard let seconds = holdSeconds(clock: clock) else { return nil }
        if let heldSince, clock.now().timeIntervalSince(heldSince) > policy.maxRetryAfterSeconds { return nil }
        // A little spread, so held sends do not all come back in the same millisecond.
        return seconds + Double.random(in: 0...0.05)
    }
}
