import Foundation

/// One UTC clock hour (4:00:00–4:59:59), the window of Salesforce's hourly push limit
/// ("20,000 iOS and 10,000 Android push notifications per hour, for example 4:00 to 4:59 UTC").
public struct QuotaHour: Sendable, Hashable, Codable, CustomStringConvertible {
    /// Hours since 1970-01-01T00:00Z.
    public let index: Int64

    public init(index: Int64) { self.index = index }
    public init(containing date: Date) {
        index = Int64((date.timeIntervalSince1970 / 3600).rounded(.down))
    }

    public var start: Date { Date(timeIntervalSince1970: TimeInterval(index) * 3600) }
    public var end: Date { Date(timeIntervalSince1970: TimeInterval(index + 1) * 3600) }

    /// `yyyyMMddHH` in UTC: the suffix of the hour's Redis key, readable in `redis-cli`.
    public var label: String {
        var cal = Calendar(identifier: .gregorian)
        cal.timeZone = TimeZone(identifier: "UTC") ?? TimeZone(secondsFromGMT: 0)!
        let c = cal.dateComponents([.year, .month, .day, .hour], from: start)
        func pad(_ v: Int?, _ w: Int) -> String {
            let s = String(v ?? 0)
            return String(repeating: "0", count: max(0, w - s.count)) + s
        }
        return pad(c.year, 4) + pad(c.month, 2) + pad(c.day, 2) + pad(c.hour, 2)
    }

    /// Seconds a counter for this hour must live when written at `now`: to the end of the hour plus `grace`
    /// (so `volley quota show` can still explain the previous hour). Always ≥ 1.
    public func ttlSeconds(at now: Date, grace: Int) -> Int {
        max(1, Int((end.timeIntervalSince(now)).rounded(.up)) + grace)
    }

    public var description: String { label }
}

/// Hourly limits for one org.
public struct QuotaLimits: Sendable, Hashable, Codable {
    public var ios: Int
    public var android: Int
    public init(ios: Int = 20_000, android: Int = 10_000) {
        self.ios = ios
        self.android = android
    }
    public subscript(platform: Platform) -> Int { platform == .ios ? ios : android }
}

/// The answer to a charge: how many pushes may go now.
public struct QuotaGrant: Sendable, Hashable {
    /// Pushes granted (charged as used and pending); send exactly these.
    public var granted: Int
    /// Requested but not granted.
    public var denied: Int
    /// Charges of this hour not yet settled, fleet-wide, after this grant.
    public var pending: Int
    /// The hour charged: settle against it, even if the clock has moved on.
    public var hour: QuotaHour
    /// The limit that applied.
    public var limit: Int

    public init(granted: Int, denied: Int, pending: Int, hour: QuotaHour, limit: Int) {
        self.granted = granted
        self.denied = denied
        self.pending = pending
        self.hour = hour
        self.limit = limit
    }

    /// Denied pushes might still fit once in-flight charges settle (some may be refunded):
    /// retry them later instead of calling them over quota.
    public var shouldRetryDenied: Bool { denied > 0 && pending > 0 }
}

/// Usage of one org and platform in one hour (`volley quota show`).
public struct QuotaUsage: Sendable, Hashable, Codable {
    public var platform: Platform
    public var hour: String
    public var limit: Int
    /// Charged this hour, in-flight included.
    public var used: Int
    /// Charged, not yet settled.
    public var pending: Int
    public var remaining: Int { max(0, limit - used) }
    public init(platform: Platform, hour: String, limit: Int, used: Int, pending: Int) {
        self.platform = platform
        self.hour = hour
        self.limit = limit
        self.used = used
        self.pending = pending
    }
}

/// Per org and platform hourly push quota, shared by every worker (Redis counters, one atomic script): the engine's
/// one quota seam.
///
/// Each delivery of a job charges through its own `QuotaAccount`: `charge` before sending, then `settle` once each
/// granted push has a terminal outcome: delivered ones stay charged, refunded ones (token invalid, failed for
/// good, any non-accepted outcome) are given back. Only deliverable notifications count (Salesforce: "Only
/// deliverable notifications count"). A charge is settled against the hour it went to, even after the top of
/// the hour.
public protocol HourlyQuota: Sendable {
    /// The charges of one delivery of one job. With `adoptingEarlierCharges`, a redelivery takes over what earlier
    /// deliveries of the job charged and never settled (a killed worker's sends in flight): those devices are
    /// sent again now, so each device of a job is charged once however often the job is delivered.
    func account(org: OrgID, job: JobID, delivery: String, adoptingEarlierCharges: Bool) throws -> any QuotaAccount
    /// How long denied pushes wait for in-flight charges to settle.
    var waitPolicy: QuotaWaitPolicy { get }
}

/// The quota charges of one delivery of one job. Used from one thread at a time (the job's lane).
public protocol QuotaAccount: AnyObject {
    /// Charges `count` pushes to `platform`; the grant says how many may go now.
    func charge(platform: Platform, count: Int) throws -> QuotaGrant
    /// Takes pushes that reached a terminal outcome off this delivery's charges (no I/O). The ledger write of
    /// their outcomes releases them from the job's unsettled charges in the same transaction, so a redelivery
    /// never adopts the charge of a recorded device; `settle` then updates the hour's counters.
    func settlement(platform: Platform, delivered: Int, refunded: Int) -> QuotaSettlement
    /// Settles the hour's counters for a settlement whose outcomes are recorded.
    func settle(_ settlement: QuotaSettlement) throws
}

/// What one batch's terminal pushes settle of a delivery's charges, per hour charged.
public struct QuotaSettlement: Sendable, Hashable {
    public struct Part: Sendable, Hashable {
        public var platform: Platform
        public var hour: QuotaHour
        public var delivered: Int
        public var refunded: Int
        public init(platform: Platform, hour: QuotaHour, delivered: Int, refunded: Int) {
            self.platform = platform
            self.hour = hour
            self.delivered = delivered
            self.refunded = refunded
        }
    }
    /// The delivery whose charges these are (as its quota account names it).
    public var delivery: String
    public var parts: [Part]
    public init(delivery: String, parts: [Part] = []) {
        self.delivery = delivery
        self.parts = parts
    }
    public var isEmpty: Bool { parts.isEmpty }
    public mutating func append(_ other: QuotaSettlement) { parts += other.parts }
}

/// Charges not yet settled, per hour, oldest first: where each settle must land.
public struct OutstandingCharges: Sendable {
    public private(set) var hours: [(hour: QuotaHour, count: Int)] = []
    public init() {}

    public var total: Int { hours.reduce(0) { $0 + $1.count } }

    public mutating func add(_ count: Int, hour: QuotaHour) {
        guard count > 0 else { return }
        if let last = hours.last, last.hour == hour {
            hours[hours.count - 1].count += count
        } else {
            hours.append((hour, count))
        }
    }

    /// Takes up to `delivered + refunded` charges, oldest hour first, refunds before deliveries. Returns the parts
    /// per hour, and what could not be matched to a charge (more settled than charged).
    public mutating func take(delivered: Int, refunded: Int)
        -> (parts: [(hour: QuotaHour, delivered: Int, refunded: Int)], unmatched: (delivered: Int, refunded: Int))
    {
        var refundLeft = max(0, refunded)
        var deliveredLeft = max(0, delivered)
        var parts: [(hour: QuotaHour, delivered: Int, refunded: Int)] = []
        while refundLeft > 0 || deliveredLeft > 0, !hours.isEmpty {
            let r = min(refundLeft, hours[0].count)
            let d = min(deliveredLeft, hours[0].count - r)
            parts.append((hours[0].hour, d, r))
            refundLeft -= r
            deliveredLeft -= d
            hours[0].count -= r + d
            if hours[0].count == 0 { hours.removeFirst() }
        }
        return (parts, (deliveredLeft, refundLeft))
    }

    /// Takes up to `count` charges, oldest first (prepaid charges a redelivery adopted).
    public mutating func take(upTo count: Int) -> [(hour: QuotaHour, count: Int)] {
        var left = max(0, count)
        var out: [(hour: QuotaHour, count: Int)] = []
        while left > 0, !hours.isEmpty {
            let n = min(left, hours[0].count)
            out.append((hours[0].hour, n))
            left -= n
            hours[0].count -= n
            if hours[0].count == 0 { hours.removeFirst() }
        }
        return out
    }
}

/// How long a denied push waits for in-flight charges to settle before it counts as over quota.
/// Bounded, so the pending charges of a crashed worker (never settled) cannot block anyone for long.
public struct QuotaWaitPolicy: Sendable, Hashable {
    public var maxWait: TimeInterval
    public var pollInterval: TimeInterval
    public init(maxWait: TimeInterval = 5, pollInterval: TimeInterval = 0.05) {
        self.maxWait = maxWait
        self.pollInterval = pollInterval
    }
}
