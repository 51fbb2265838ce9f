import Foundation
import Testing
import VolleyCore
import VolleyTestTags

/// When a worker promotes due scheduled runs, on a manual clock: at once, then every interval; a full batch asks
/// for the next pass at once; another worker's lease or a failure waits for the interval.
@Suite(.tags(.unit)) struct RecurringPromotionTests {
    let clock = ManualClock(Date(timeIntervalSince1970: 1_800_000_000))

    @Test func promotesAtOnceThenEveryIntervalUpToNow() {
        var m = RecurringPromotionStateMachine(configuration: .init(intervalSeconds: 0.5, leaseSeconds: 10))
        let start = clock.now()
        #expect(m.tick(now: start) == .promote(dueBy: start, leaseSeconds: 10))
        #expect(m.promoted(now: start + 0.1, leased: true, more: false) == .wait(until: start + 0.5))
        clock.advance(by: 0.3)
        #expect(m.tick(now: clock.now()) == .wait(until: start + 0.5))
        clock.advance(by: 0.2)
        #expect(m.tick(now: clock.now()) == .promote(dueBy: clock.now(), leaseSeconds: 10))
    }

    @Test func aFullBatchPromotesTheNextAtOnceButNotUnderAnotherWorkersLease() {
        var m = RecurringPromotionStateMachine()
        let start = clock.now()
        _ = m.tick(now: start)
        #expect(
            m.promoted(now: start + 0.2, leased: true, more: true) == .promote(dueBy: start + 0.2, leaseSeconds: 10))
        #expect(m.promoted(now: start + 0.3, leased: false, more: true) == .wait(until: start + 0.7))
        #expect(m.failed(now: start + 1) == .wait(until: start + 1.5))
    }
}
