import Foundation

/// When a worker moves due jobs from the schedule back onto the job stream, decided on a clock.
///
/// Every worker runs this machine; one at a time promotes. A promotion pass is one script per job stream shard that
/// takes or renews a short lease (`SET`-style, owner and expiry) and, when this worker holds it, moves the due jobs
/// (`ZRANGEBYSCORE … LIMIT 0 batch`) onto the stream, so its cost follows the jobs promoted, never the jobs waiting.
/// The holder goes round again at once while a pass fills its batch, else sleeps until the earliest due time or
/// `tick`, whichever comes first: a job parked after the pass is seen within `tick`. A worker without the lease
/// tries again within half the lease, so a holder that died is replaced within `leaseSeconds` (+ half of it).
///
/// The recurring schedules' pass (a lease of its own, then a range per org) keeps its own cadence: at most once a
/// `tick` while its lease is held, at once again while it finds more due than it took, within half the lease when
/// another worker holds it. A pass of due jobs every few milliseconds therefore does not bring a recurring pass
/// with it each time.
public struct SchedulePromotionStateMachine: Sendable {
    public struct Configuration: Sendable, Hashable {
        /// The longest a lease holder sleeps between passes: the bound on how late a freshly parked job is seen.
        public var tickSeconds: Double
        /// How long a lease lasts without renewal.
        public var leaseSeconds: Double
        /// Jobs moved per script.
        public var batch: Int
        /// After a failed pass (Redis unavailable).
        public var retrySeconds: Double

        public init(tickSeconds: Double = 0.25, leaseSeconds: Double = 3, batch: Int = 500, retrySeconds: Double = 1) {
            self.tickSeconds = tickSeconds
            self.leaseSeconds = leaseSeconds
            self.batch = batch
            self.retrySeconds = retrySeconds
        }
    }

    public enum Action: Sendable, Hashable {
        /// Nothing to do until `until`.
        case wait(until: Date)
        /// Take or renew the lease for `leaseSeconds` and move at most `batch` jobs due at or before `now` per shard.
        /// `recurring`: run the recurring schedules' pass too (`passed(_:recurring:now:)` then takes its result).
        case promote(now: Date, batch: Int, leaseSeconds: Double, recurring: Bool)
    }

    /// What a pass found.
    public struct Pass: Sendable, Hashable {
        /// False: another worker holds the lease (nothing was moved).
        public var leased: Bool
        /// Jobs moved onto the stream, over all shards.
        public var promoted: Int
        /// True when some shard's pass filled its batch (more may be due).
        public var full: Bool
        /// The earliest due time still waiting, over all shards (nil: nothing waits).
        public var nextDue: Date?

        public init(leased: Bool, promoted: Int = 0, full: Bool = false, nextDue: Date? = nil) {
            self.leased = leased
            self.promoted = promoted
            self.full = full
            self.nextDue = nextDue
        }
    }

    /// What a recurring schedules' pass found.
    public struct RecurringPass: Sendable, Hashable {
        /// False: another worker holds the recurring schedules' lease.
        public var leased: Bool
        /// True when some org had more schedules due than the pass took.
        public var more: Bool

        public init(leased: Bool, more: Bool = false) {
            self.leased = leased
            self.more = more
        }
    }

    public let configuration: Configuration
    /// The due jobs' lease.
    public private(set) var holdsLease = false
    /// When the recurring schedules' pass runs next (at the first pass after it).
    public private(set) var recurringAt = Date.distantPast

    public init(configuration: Configuration = Configuration()) { self.configuration = configuration }

    /// The first pass: at once.
    public mutating func started(now: Date) -> Action { promote(now) }

    /// A wait ended.
    public mutating func waited(now: Date) -> Action { promote(now) }

    /// A pass ended: `pass` for the due jobs, `recurring` for the recurring schedules when the pass ran them.
    public mutating func passed(_ pass: Pass, recurring: RecurringPass? = nil, now: Date) -> Action {
        holdsLease = pass.leased
        let tick = now.addingTimeInterval(configuration.tickSeconds)
        let halfLease = now.addingTimeInterval(configuration.leaseSeconds / 2)
        if let recurring {
            recurringAt = !recurring.leased ? halfLease : recurring.more ? now : tick
        }
        let jobsAt: Date
        if !pass.leased {
            jobsAt = halfLease
        } else if pass.full {
            jobsAt = now
        } else {
            jobsAt = min(pass.nextDue ?? tick, tick)
        }
        let next = min(jobsAt, recurringAt)
        return next <= now ? promote(now) : .wait(until: next)
    }

    /// A pass failed: try again after `retrySeconds`. The lease is not assumed held.
    public mutating func failed(now: Date) -> Action {
        holdsLease = false
        return .wait(until: now.addingTimeInterval(configuration.retrySeconds))
    }

    private func promote(_ now: Date) -> Action {
        .promote(
            now: now, batch: configuration.batch, leaseSeconds: configuration.leaseSeconds,
            recurring: recurringAt <= now)
    }
}
