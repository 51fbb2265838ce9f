import Foundation
import Testing
import VolleyCore
import VolleyTestTags

@Suite(.tags(.unit)) struct ExponentialBackoffTests {
    @Test func doublesFromTheBaseUpToTheCap() {
        let backoff = ExponentialBackoff(base: 0.05, max: 2)
        let waits = (1...8).map { backoff.delay(afterFailures: $0) }
        #expect(waits == [0.05, 0.1, 0.2, 0.4, 0.8, 1.6, 2, 2])
        // No failure yet counts as the first; a long outage stays at the cap.
        #expect(backoff.delay(afterFailures: 0) == 0.05)
        #expect(backoff.delay(afterFailures: -3) == 0.05)
        #expect(backoff.delay(afterFailures: 5000) == 2)
        #expect(backoff.delay(afterFailures: .max) == 2)
    }

    @Test func withoutJitterTheUnitDoesNotMatter() {
        let backoff = ExponentialBackoff(base: 1, max: 30)
        #expect(backoff.delay(afterFailures: 3, unit: 0) == 4)
        #expect(backoff.delay(afterFailures: 3, unit: 0.73) == 4)
        #expect(backoff.delay(afterFailures: 3, unit: 1) == 4)
    }

    @Test(arguments: [(0.0, 2.0), (0.5, 3.0), (1.0, 4.0), (-1.0, 2.0), (7.0, 4.0)])
    func halfJitterScalesBetweenHalfAndAll(_ unit: Double, _ expected: Double) {
        // Failure 3 of base 1: 4 s before jitter; the unit is clamped into 0...1.
        let backoff = ExponentialBackoff(base: 1, max: 30, jitter: 0.5)
        #expect(backoff.delay(afterFailures: 3, unit: unit) == expected)
    }

    @Test func theCapAppliesBeforeTheJitter() {
        let backoff = ExponentialBackoff(base: 1, max: 30, jitter: 0.5)
        #expect(backoff.delay(afterFailures: 10, unit: 0) == 15)
        #expect(backoff.delay(afterFailures: 10, unit: 1) == 30)
    }

    @Test func aZeroBaseNeverWaits() {
        let backoff = ExponentialBackoff(base: 0, max: 30, jitter: 0.5)
        #expect(backoff.delay(afterFailures: 2000, unit: 1) == 0)
    }

    /// The numbers of the callers in VolleyCore: a delivery's retries and the fleet's pause.
    @Test func callersKeepTheirNumbers() {
        // A delivery's retries: 1 s doubling to 30 s, half jitter (RetryPolicy's defaults).
        let retry = RetryPolicy()
        #expect(retry.delay(afterAttempt: 1, retryAfterSeconds: nil, random: 0) == 0.5)
        #expect(retry.delay(afterAttempt: 3, retryAfterSeconds: nil, random: 1) == 4)
        #expect(retry.delay(afterAttempt: 3, retryAfterSeconds: 10, random: 1) == 10)
        #expect(retry.delay(afterAttempt: 4, retryAfterSeconds: nil, random: 1) == nil)
        #expect(RetryPolicy(maxAttempts: 100).delay(afterAttempt: 60, retryAfterSeconds: nil, random: 1) == 30)
        // The fleet's pause: 1 s doubling to 60 s, half jitter.
        var pause = FleetPauseStateMachine()
        let now = Date(timeIntervalSince1970: 1_800_000_000)
        let ends = (0..<8).compactMap { _ in pause.throttled(retryAfterSeconds: nil, now: now, random: 1) }
        #expect(ends.map { $0.timeIntervalSince(now) } == [1, 2, 4, 8, 16, 32, 60])
    }
}
