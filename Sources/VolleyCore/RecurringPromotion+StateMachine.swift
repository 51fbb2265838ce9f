import Foundation

/// When a worker promotes the due runs of recurring schedules to the job stream, decided on a clock.
///
/// Every worker runs this machine and at most one of them promotes at a time: a pass takes a short lease in Redis
/// first; a worker that does not get it tries again after the interval, so a promoting worker that dies is
/// replaced within a lease. A pass promotes at most a batch of due schedules per org; a full batch asks for the
/// next pass at once (`more`), so a backlog drains in batches without holding the lease long.
public struct RecurringPromotionStateMachine: Sendable {
    public struct Configuration: Sendable, Hashable {
        /// How often a worker looks for due runs: a run is promoted at most this long after it is due.
        public var intervalSeconds: Double
        /// The lease a pass holds; a pass must finish within it.
        public var leaseSeconds: Double

        public init(intervalSeconds: Double = 0.5, leaseSeconds: Double = 10) {
            self.intervalSeconds = intervalSeconds
            self.leaseSeconds = leaseSeconds
        }
    }

    public enum Action: Sendable, Hashable {
        /// Nothing to do until `until`.
        case wait(until: Date)
        /// Take the lease for `leaseSeconds` and promote the runs due by `dueBy`.
        case promote(dueBy: Date, leaseSeconds: Double)
    }

    public let configuration: Configuration
    private var nextAttempt: Date?

    public init(configuration: Configuration = Configuration()) {
        self.configuration = configuration
    }

    /// What to do at `now`: promote when the interval has passed (at once on the first tick), else wait.
    public mutating func tick(now: Date) -> Action {
        if let next = nextAttempt, now < next { return .wait(until: next) }
        nextAttempt = now.addingTimeInterval(configuration.intervalSeconds)
        return .promote(dueBy: now, leaseSeconds: configuration.leaseSeconds)
    }

    /// A pass ended. `leased` false: another worker held the lease. `more`: a batch was full, so the next pass
    /// follows at once; otherwise the next one waits for the interval.
    public mutating func promoted(now: Date, leased: Bool, more: Bool) -> Action {
        if leased && more {
            nextAttempt = now.addingTimeInterval(configuration.intervalSeconds)
            return .promote(dueBy: now, leaseSeconds: configuration.leaseSeconds)
        }
        return .wait(until: nextAttempt ?? now.addingTimeInterval(configuration.intervalSeconds))
    }

    /// A pass failed (Redis unavailable): try again after the interval.
    public mutating func failed(now: Date) -> Action {
        let next = now.addingTimeInterval(configuration.intervalSeconds)
        nextAttempt = next
        return .wait(until: next)
    }
}
