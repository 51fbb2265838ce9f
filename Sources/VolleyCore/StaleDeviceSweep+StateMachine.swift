import Foundation

/// When a worker removes the devices not seen for `devices.staleAfterDays`, decided on a clock.
///
/// FCM treats a token inactive for 270 days as expired and refuses sends to it (`UNREGISTERED`, Firebase *Manage
/// registration tokens*), and an app that stopped registering a token has usually been deleted; sending to such
/// devices costs a request each and tells nothing. The registry keeps, per (org, app), a sorted set of each device's
/// last registration time, so finding the stale ones is a range read of the oldest entries, never a scan of the
/// keyspace.
///
/// Every worker runs this machine, and at most one of them sweeps at a time: a sweep takes a short lease in Redis
/// first (`SET … NX PX`); a worker that does not get it waits for the next interval. A sweep removes at most a
/// batch per (org, app) per pass; a pass that filled a batch asks for the next pass at once (`more`), so a backlog
/// drains in batches without holding the lease long.
public struct StaleDeviceSweepStateMachine: Sendable {
    public struct Configuration: Sendable, Hashable {
        /// `devices.staleAfterDays`: devices whose last registration is older are removed; 0 turns sweeping off.
        public var staleAfterDays: Int
        /// How often a worker tries to sweep.
        public var intervalSeconds: Double
        /// The lease a sweep holds; a pass must finish within it.
        public var leaseSeconds: Double

        public init(staleAfterDays: Int, intervalSeconds: Double = 3_600, leaseSeconds: Double = 60) {
            self.staleAfterDays = staleAfterDays
            self.intervalSeconds = intervalSeconds
            self.leaseSeconds = leaseSeconds
        }
    }

    public enum Action: Sendable, Hashable {
        /// Nothing to do until `until`.
        case wait(until: Date)
        /// Take the lease for `leaseSeconds` and remove devices last registered at or before `cutoff`.
        case sweep(cutoff: Date, leaseSeconds: Double)
    }

    public let configuration: Configuration
    private var nextAttempt: Date?

    public init(configuration: Configuration) {
        self.configuration = configuration
    }

    /// What to do at `now`: sweep when the interval has passed (at once on the first tick), else wait.
    public mutating func tick(now: Date) -> Action {
        guard configuration.staleAfterDays > 0 else { return .wait(until: .distantFuture) }
        if let next = nextAttempt, now < next { return .wait(until: next) }
        nextAttempt = now.addingTimeInterval(configuration.intervalSeconds)
        return .sweep(cutoff: cutoff(now: now), leaseSeconds: configuration.leaseSeconds)
    }

    /// A sweep ended. `leased` false: another worker held the lease. `more`: a batch was full, so the next pass
    /// follows at once (under a fresh lease); otherwise the next sweep waits for the interval.
    public mutating func swept(now: Date, leased: Bool, more: Bool) -> Action {
        if leased && more {
            nextAttempt = now.addingTimeInterval(configuration.intervalSeconds)
            return .sweep(cutoff: cutoff(now: now), leaseSeconds: configuration.leaseSeconds)
        }
        let next = nextAttempt ?? now.addingTimeInterval(configuration.intervalSeconds)
        return .wait(until: next)
    }

    /// A sweep failed (Redis unavailable): try again after the interval.
    public mutating func failed(now: Date) -> Action {
        nextAttempt = now.addingTimeInterval(configuration.intervalSeconds)
        return .wait(until: nextAttempt ?? now)
    }

    /// Devices last registered at or before this are stale.
    public func cutoff(now: Date) -> Date {
        now.addingTimeInterval(-Double(configuration.staleAfterDays) * 86_400)
    }
}
