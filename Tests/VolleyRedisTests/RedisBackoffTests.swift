import Testing
import VolleyTestTags

@testable import VolleyRedis

/// How long a client waits between attempts to reach Redis: `initialBackoff` doubling up to `maxBackoff`, no jitter.
@Suite(.tags(.unit)) struct RedisBackoffTests {
    @Test func reconnectWaitsDoubleUpToTheCap() {
        let backoff = RedisClient.Options().backoff
        let waits = (1...9).map { backoff.delay(afterFailures: $0, unit: 0.3) }
        #expect(waits == [0.05, 0.1, 0.2, 0.4, 0.8, 1.6, 2, 2, 2])
        let fast = RedisClient.Options(initialBackoff: 0.01, maxBackoff: 0.05).backoff
        #expect((1...5).map { fast.delay(afterFailures: $0) } == [0.01, 0.02, 0.04, 0.05, 0.05])
    }
}
