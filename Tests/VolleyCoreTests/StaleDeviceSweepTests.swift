import Foundation
import Testing
import VolleyCore
import VolleyTestTags

/// When a worker sweeps stale devices, on a manual clock: at once, then once per interval; a full batch asks for the
/// next pass at once; another worker's lease or a failure waits for the interval; 0 days never sweeps.
@Suite(.tags(.unit)) struct StaleDeviceSweepTests {
    let clock = ManualClock(Date(timeIntervalSince1970: 1_800_000_000))

    @Test func sweepsAtOnceThenEveryIntervalWithTheCutoffOfNow() {
        var m = StaleDeviceSweepStateMachine(configuration: .init(staleAfterDays: 270, intervalSeconds: 3_600))
        let start = clock.now()
        #expect(m.tick(now: start) == .sweep(cutoff: start - 270 * 86_400, leaseSeconds: 60))
        #expect(m.swept(now: start + 2, leased: true, more: false) == .wait(until: start + 3_600))
        clock.advance(by: 1_800)
        #expect(m.tick(now: clock.now()) == .wait(until: start + 3_600))
        clock.advance(by: 1_800)
        let now = clock.now()
        #expect(m.tick(now: now) == .sweep(cutoff: now - 270 * 86_400, leaseSeconds: 60))
    }

    @Test func aFullBatchSweepsAgainAtOnceUntilDrained() {
        var m = StaleDeviceSweepStateMachine(configuration: .init(staleAfterDays: 1, intervalSeconds: 600))
        let start = clock.now()
        _ = m.tick(now: start)
        clock.advance(by: 5)
        #expect(
            m.swept(now: clock.now(), leased: true, more: true)
                == .sweep(cutoff: clock.now() - 86_400, leaseSeconds: 60))
        clock.advance(by: 5)
        #expect(m.swept(now: clock.now(), leased: true, more: false) == .wait(until: start + 605))
    }

    @Test func anotherWorkersLeaseOrAFailureWaitsForTheInterval() {
        var m = StaleDeviceSweepStateMachine(configuration: .init(staleAfterDays: 30, intervalSeconds: 900))
        let start = clock.now()
        _ = m.tick(now: start)
        // Another worker holds the lease: `more` says nothing then.
        #expect(m.swept(now: start + 1, leased: false, more: true) == .wait(until: start + 900))
        clock.advance(by: 900)
        _ = m.tick(now: clock.now())
        #expect(m.failed(now: clock.now() + 3) == .wait(until: clock.now() + 903))
        #expect(m.tick(now: clock.now() + 500) == .wait(until: clock.now() + 903))
    }

    /// `devices.staleAfterDays: 0` keeps every device, however long it has not been seen.
    @Test func zeroDaysNeverSweeps() {
        var m = StaleDeviceSweepStateMachine(configuration: .init(staleAfterDays: 0))
        #expect(m.tick(now: clock.now()) == .wait(until: .distantFuture))
        clock.advance(by: 86_400 * 400)
        #expect(m.tick(now: clock.now()) == .wait(until: .distantFuture))
    }
}
