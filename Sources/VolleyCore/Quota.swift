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
    public init(ios: Int = 20_000, android: Int = 10_000) { self.ios = ios; self.android = android }
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
        self.granted = granted; self.denied = denied; self.pending = pending; self.hour = hour; self.limit = limit
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
        self.platform = platform; self.hour = hour; self.limit = limit; self.used = used; self.pending = pending
    }
}

/// Per org and platform hourly push quota, shared by every worker (Redis counters, one atomic script).
///
/// Protocol: `charge` before sending, then `settle` once each granted push has a terminal outcome:
/// delivered ones stay charged, refunded ones (token invalid, failed for good, any non-accepted outcome) are
/// given back. Only deliverable notifications count (Salesforce: "Only deliverable notifications count").
/// Implementations remember which hour each charge went to, so a settle after the top of the hour lands in
/// the hour that was charged.
public protocol HourlyQuota: Sendable {
    func charge(org: OrgID, platform: Platform, count: Int) throws -> QuotaGrant
    func settle(org: OrgID, platform: Platform, delivered: Int, refunded: Int) throws
    /// How long denied pushes wait for in-flight charges to settle.
    var waitPolicy: QuotaWaitPolicy { get }
}

/// How long a denied push waits for in-flight charges to settle before it counts as over quota.
/// Bounded, so the pending charges of a crashed worker (never settled) cannot block anyone for long.
public struct QuotaWaitPolicy: Sendable, Hashable {
    public var maxWait: TimeInterval
    public var pollInterval: TimeInterval
    public init(maxWait: TimeInterval = 5, pollInterval: TimeInterval = 0.05) {
        self.maxWait = maxWait; self.pollInterval = pollInterval
    }
}
