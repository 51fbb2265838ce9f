import Foundation

/// Bounded exponential backoff with jitter for `OutcomeDecision.retry`, shared by both senders.
/// Google: "1 s, then at least 2 s, then 4 s… delay each one independently by an additional random amount";
/// "Honor the Retry-After header" (Google, FCM HTTP v1 error handling).
public struct RetryPolicy: Sendable, Hashable {
    /// Total attempts including the first send (so `maxAttempts - 1` retries).
    public var maxAttempts: Int
    /// Delay before the first retry; doubles each time.
    public var baseDelaySeconds: Double
    public var maxDelaySeconds: Double
    /// A Retry-After longer than this ends the retries (the job would hold a worker too long).
    public var maxRetryAfterSeconds: Double

    public init(
        maxAttempts: Int = 4, baseDelaySeconds: Double = 1, maxDelaySeconds: Double = 30,
        maxRetryAfterSeconds: Double = 120
    ) {
        self.maxAttempts = maxAttempts
        self.baseDelaySeconds = baseDelaySeconds
        self.maxDelaySeconds = maxDelaySeconds
        self.maxRetryAfterSeconds = maxRetryAfterSeconds
    }

    /// The back-off between attempts: `baseDelaySeconds` doubling up to `maxDelaySeconds`, half fixed and half
    /// random (never less than half of it, and a burst of retries is spread).
    public var backoff: ExponentialBackoff {
        ExponentialBackoff(base: baseDelaySeconds, max: maxDelaySeconds, jitter: 0.5)
    }

    /// Delay before attempt number `attempt + 1` (attempt counts sends made so far, ≥ 1), or nil when the
    /// retries are used up or Retry-After asks for more than we wait. `random` in 0..<1 supplies the jitter:
    /// the delay is between half and all of `base × 2^(attempt − 1)` (capped), and never less than Retry-After.
    public func delay(afterAttempt attempt: Int, retryAfterSeconds: Double?, random: Double) -> Double? {
        guard attempt < maxAttempts else { return nil }
        let jittered = backoff.delay(afterFailures: attempt, unit: random)
        if let ra = retryAfterSeconds {
            if ra > maxRetryAfterSeconds { return nil }
            return max(ra, jittered)
        }
        return jittered
    }
}

/// The Retry-After header (RFC 9110 §10.2.3): `delay-seconds` (the form Google uses) or an `HTTP-date`.
public enum RetryAfter {
    /// Seconds to wait from `now` for the header value `value`: delta-seconds as given, an HTTP-date less `now`
    /// (0 when it is past). nil when the value is neither: the back-off applies alone.
    public static func seconds(_ value: String, now: Date) -> Double? {
        let v = value.trimmingCharacters(in: .whitespaces)
        if let s = Double(v) { return s >= 0 && s.isFinite ? s : nil }
        guard let date = httpDate(v, now: now) else { return nil }
        return max(0, date.timeIntervalSince(now))
    }

    private static let months = ["Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"]

    /// An HTTP-date in any of the three forms a recipient must accept (RFC 9110 §5.6.7):
    /// `Sun, 06 Nov 1994 08:49:37 GMT` (IMF-fixdate), `Sunday, 06-Nov-94 08:49:37 GMT` (RFC 850, two-digit year) and
    /// `Sun Nov  6 08:49:37 1994` (asctime). The weekday is not checked. `now` places a two-digit year.
    public static func httpDate(_ value: String, now: Date) -> Date? {
        let parts = value.split(separator: " ", omittingEmptySubsequences: true)
        let day: Substring
        let month: Substring
        let year: Substring
        let time: Substring
        switch parts.count {
        case 6 where parts[0].hasSuffix(",") && parts[5] == "GMT":
            (day, month, year, time) = (parts[1], parts[2], parts[3], parts[4])
        case 4 where parts[0].hasSuffix(",") && parts[3] == "GMT":
            let date = parts[1].split(separator: "-", omittingEmptySubsequences: false)
            guard date.count == 3 else { return nil }
            (day, month, year, time) = (date[0], date[1], date[2], parts[2])
        case 5 where !parts[0].hasSuffix(","):
            (month, day, time, year) = (parts[1], parts[2], parts[3], parts[4])
        default:
            return nil
        }
        let clock = time.split(separator: ":", omittingEmptySubsequences: false)
        guard let m = months.firstIndex(where: { $0 == month }), let d = number(day, digits: 1...2),
            var y = number(year, digits: 2...4), year.count != 3, clock.count == 3,
            let hh = number(clock[0], digits: 2...2), let mm = number(clock[1], digits: 2...2),
            let ss = number(clock[2], digits: 2...2),
            (1...31).contains(d), hh < 24, mm < 60, ss < 61
        else { return nil }
        if year.count == 2 {
            // RFC 9110 §5.6.7: a two-digit year more than 50 years in the future is the latest past year with
            // the same last two digits.
            let thisYear = Int(now.timeIntervalSince1970 / 31_556_952) + 1970
            y += thisYear - thisYear % 100
            if y > thisYear + 50 { y -= 100 }
        }
        let days = CivilDate.days(year: y, month: m + 1, day: d)
        return Date(timeIntervalSince1970: Double(days * 86_400 + hh * 3600 + mm * 60 + ss))
    }

    private static func number(_ s: Substring, digits: ClosedRange<Int>) -> Int? {
        guard digits.contains(s.utf8.count), s.utf8.allSatisfy({ $0 >= 0x30 && $0 <= 0x39 }) else { return nil }
        return Int(s)
    }
}
