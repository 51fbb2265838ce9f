import Foundation
import Testing
import VolleyCore
import VolleyTestTags

/// The throttle gate's arithmetic (GCRA, virtual scheduling) on integer milliseconds: exact rates that are not
/// whole sends per second, a burst of 0.5 s worth, and state that a crash does not reset.
@Suite(.tags(.unit)) struct ThrottleArithmeticTests {
    let t0: Int64 = 1_800_000_000_000

    /// A sender that asks for a burst whenever the gate says its next slice is free (`lateBy` ms late each time),
    /// for `seconds`; returns the instant (ms from t0) of every push granted.
    func sends(_ perMinute: Int, seconds: Int64, lateBy: Int64 = 0) -> [Int64] {
        let rate = ThrottleRate(perMinute: perMinute)!
        var state: ThrottleState?
        var now = t0
        var out: [Int64] = []
        while now < t0 + seconds * 1000 {
            let (s, g, _) = ThrottleArithmetic.take(state, rate: rate, count: rate.burst, nowMillis: now)
            state = s
            out += Array(repeating: now - t0, count: g.granted)
            let wait = Int64((g.retryAfter * 1000).rounded())
            now += (g.granted == 0 ? max(1, wait) : wait) + lateBy
        }
        return out
    }

    /// The most pushes any window of `width` ms holds (windows start at a push, half-open).
    func busiest(_ times: [Int64], width: Int64) -> Int {
        var best = 0
        var j = 0
        for i in times.indices {
            while j < times.count && times[j] < times[i] + width { j += 1 }
            best = max(best, j - i)
        }
        return best
    }

    func inMinute(_ times: [Int64], _ k: Int64) -> Int {
        times.filter { $0 >= k * 60_000 && $0 < (k + 1) * 60_000 }.count
    }

    @Test func aRateThatIsNotWholeSendsPerSecondIsKeptNotRoundedDown() {
        // OneSignal floors 1,019/min to 16/s = 960/min; the gate keeps 1,019 a minute over ten minutes.
        let times = sends(1019, seconds: 600)
        #expect(times.count >= 10 * 1019 && times.count <= 10 * 1019 + ThrottleRate(perMinute: 1019)!.slice)
        for k in 0..<10 {
            // Any minute: within a slice of the rate (the gate grants a slice at a time), never a 960.
            #expect(abs(inMinute(times, Int64(k)) - 1019) < ThrottleRate(perMinute: 1019)!.slice)
        }
        #expect(busiest(times, width: 60_000) <= 1019 + ThrottleRate(perMinute: 1019)!.slice - 1)
    }

    @Test(arguments: [60, 1200, 6000, 600_000])
    func aWholeRateIsExactInEveryMinuteAndEverySecondHoldsItsShare(perMinute: Int) {
        let times = sends(perMinute, seconds: 180)
        for k in 0..<3 { #expect(inMinute(times, Int64(k)) == perMinute) }
        #expect(busiest(times, width: 60_000) == perMinute)
        // A second holds its share and at most a slice more (slices go every 0.25 s).
        #expect(busiest(times, width: 1000) <= perMinute / 60 + ThrottleRate(perMinute: perMinute)!.slice)
    }

    @Test func aSenderThatWakesLateStillSendsTheFullRate() {
        // 3 ms late on every ask: the half burst the gate keeps in hand absorbs it; no minute falls short.
        let times = sends(1200, seconds: 180, lateBy: 3)
        for k in 0..<3 { #expect(inMinute(times, Int64(k)) == 1200) }
        let fast = sends(600_000, seconds: 120, lateBy: 3)
        for k in 0..<2 {
            let n = inMinute(fast, Int64(k))
            #expect(n >= 600_000 - 6_000 && n <= 600_000 + 6_000) // within 1 %
        }
    }

    @Test func aFreshJobSendsOneSliceAtOnceThenTheRate() {
        let rate = ThrottleRate(perMinute: 1200)!
        #expect(rate.burst == 10 && rate.slice == 5)
        let (s1, g1, keep) = ThrottleArithmetic.take(nil, rate: rate, count: 500, nowMillis: t0)
        #expect(g1.granted == 5)
        #expect(g1.retryAfter == 0.25) // five pushes at 50 ms each
        #expect(keep > 600_000)
        let (_, again, _) = ThrottleArithmetic.take(s1, rate: rate, count: 500, nowMillis: t0)
        #expect(again.granted == 0)
        #expect(again.retryAfter == 0.25)
        let (_, g2, _) = ThrottleArithmetic.take(s1, rate: rate, count: 500, nowMillis: t0 + 250)
        #expect(g2.granted == 5)
    }

    @Test func aSenderThatFellBehindCatchesUpByAtMostABurst() {
        let rate = ThrottleRate(perMinute: 1200)!
        var (s, _, _) = ThrottleArithmetic.take(nil, rate: rate, count: 10, nowMillis: t0)
        // Ten seconds idle (a stalled worker): two hundred pushes' time passed, a burst (10) goes at once.
        let (after, g, _) = ThrottleArithmetic.take(s, rate: rate, count: 500, nowMillis: t0 + 10_000)
        #expect(g.granted == rate.burst)
        s = after
        let (_, none, _) = ThrottleArithmetic.take(s, rate: rate, count: 500, nowMillis: t0 + 10_000)
        #expect(none.granted == 0)
    }

    @Test func theStateIsWhatKeepsTheRateAcrossACrash() {
        // A worker that took slices and died leaves its state in the store: the worker that takes over asks with
        // that state and waits its turn; only a lost state would grant a fresh slice at once.
        let rate = ThrottleRate(perMinute: 120)!
        var s: ThrottleState?
        for i in 0..<3 {
            let (n, g, _) = ThrottleArithmetic.take(s, rate: rate, count: 1, nowMillis: t0 + Int64(i) * 500)
            s = n
            #expect(g.granted == 1)
        }
        let (_, takeover, _) = ThrottleArithmetic.take(s, rate: rate, count: 1, nowMillis: t0 + 1_000)
        #expect(takeover.granted == 0)
        #expect(takeover.retryAfter == 0.5)
        let (_, lost, _) = ThrottleArithmetic.take(nil, rate: rate, count: 1, nowMillis: t0 + 1_000)
        #expect(lost.granted == 1)
    }

    @Test func largeRatesAndLongRunsStayInExactIntegers() {
        let rate = ThrottleRate(perMinute: ThrottleRate.range.upperBound)!
        var s: ThrottleState?
        var now = t0
        var total = 0
        // An hour at 100,000 a second, asked every 50 ms: the anchor moves a minute at a time, the count stays small.
        while now < t0 + 3_600_000 {
            let (n, g, _) = ThrottleArithmetic.take(s, rate: rate, count: 1_000_000, nowMillis: now)
            s = n
            total += g.granted
            now += 50
        }
        #expect(total >= 6_000_000 * 60 - rate.burst && total <= 6_000_000 * 60 + rate.burst)
        #expect((s?.cells ?? .max) < Int64(rate.perMinute))
    }

    @Test func ratesOutsideTheRangeAreRefused() {
        #expect(ThrottleRate(perMinute: 0) == nil)
        #expect(ThrottleRate(perMinute: -5) == nil)
        #expect(ThrottleRate(perMinute: 6_000_001) == nil)
        #expect(ThrottleRate(perMinute: 1)?.burst == 1)
        #expect(ThrottleRate(perMinute: 1)?.slice == 1)
    }
}
