import Foundation

/// Bounded exponential backoff with jitter for `OutcomeDecision.retry`, shared by both senders.
/// Google: "1 s, then at least 2 s, then 4 s… delay each one independently by an additional random amount";
/// "Honor the Retry-After header" (apns-fcm-facts §3.6).
public struct RetryPolicy: Sendable, Hashable {
    /// Total attempts including the first send (so `maxAttempts - 1` retries).
    public var maxAttempts: Int
    /// Delay before the first retry; doubles each time.
    public var baseDelaySeconds: Double
    public var maxDelaySeconds: Double
    /// A Retry-After longer than this ends the retries (the job would hold a worker too long).
    public var maxRetryAfterSeconds: Double

    public init(maxAttempts: Int = 4, baseDelaySeconds: Double = 1, maxDelaySeconds: Double = 30,
                maxRetryAfterSeconds: Double = 120) {
        self.maxAttempts = maxAttempts; self.baseDelaySeconds = baseDelaySeconds
        self.maxDelaySeconds = maxDelaySeconds; self.maxRetryAfterSeconds = maxRetryAfterSeconds
    }

    /// Delay before attempt number `attempt + 1` (attempt counts sends made so far, ≥ 1), or nil when the
    /// retries are used up or Retry-After asks for more than we wait. `random` in 0..<1 supplies the jitter.
    public func delay(afterAttempt attempt: Int, retryAfterSeconds: Double?, random: Double) -> Double? {
        guard attempt < maxAttempts else { return nil }
        let exponent = Double(max(0, attempt - 1))
        let backoff = min(maxDelaySeconds, baseDelaySeconds * pow2(exponent))
        // Half fixed, half random: never less than half the backoff, spreads a burst of retries.
        let jittered = backoff * (0.5 + 0.5 * min(max(random, 0), 1))
        if let ra = retryAfterSeconds {
            if ra > maxRetryAfterSeconds { return nil }
            return max(ra, jittered)
        }
        return jittered
    }

    private func pow2(_ e: Double) -> Double {
        var r = 1.0
        var i = 0.0
        while i < e { r *= 2; i += 1 }
        return r
    }
}

/// Parses a Retry-After header value given as delta-seconds (RFC 9110 §10.2.3), the form Google uses.
/// An HTTP-date is not parsed (nil): the backoff applies instead.
public func parseRetryAfter(_ value: String?) -> Double? {
    guard let v = value?.trimmingCharacters(in: .whitespaces), !v.isEmpty else { return nil }
    if let s = Double(v), s >= 0 { return s }
    return nil
}
