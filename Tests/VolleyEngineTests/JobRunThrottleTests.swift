import Foundation
import Testing
import VolleyCore
import VolleyTestDoubles
import VolleyTestTags

@testable import VolleyEngine

/// A throttled job's delivery, driven action by action on a manual clock with the in-memory gate (the Redis
/// gate's arithmetic): slices granted and sent at the rate, the quota charged per slice when it goes, one gate
/// round trip per slice, the rate held across a worker that dies mid-job, a drain that stops a waiting lane.
@Suite(.tags(.unit)) struct JobRunThrottleTests {
    typealias Machine = JobRun.StateMachine

    let clock = ManualClock(Date(timeIntervalSince1970: 1_800_000_000))
    let org = OrgID("o1")
    let job = JobID("j1")

    func devices(_ n: Int, from first: Int = 0) -> [Device] {
        (first..<(first + n)).map { Device(platform: $0 % 3 == 0 ? .android : .ios, token: DeviceToken("d-\($0)")) }
    }

    /// What a driven delivery did: each send's instant and devices, each charge.
    struct Trace {
        var sends: [(at: Date, count: Int)] = []
        var charges: [(at: Date, platform: Platform, count: Int)] = []
        var expired: [(at: Date, count: Int)] = []
        /// Looks at the pause and cancel marks, and devices whose charges were given back.
        var steeringChecks = 0
        var released = 0
        var final: Machine.Action?
        var sent: Int { sends.reduce(0) { $0 + $1.count } }

        /// The most pushes any one-second window (half-open, starting at a send) holds.
        func busiestSecond() -> Int {
            var best = 0
            for s in sends {
                let n = sends.filter { $0.at >= s.at && $0.at < s.at.addingTimeInterval(1) }.reduce(0) { $0 + $1.count }
                best = max(best, n)
            }
            return best
        }
    }

    /// Drives one delivery of `all` in chunks of `chunk` through `gate` until it finishes, or until `stopAfter`
    /// pushes were sent (a worker killed there: its machine is dropped). Outcomes come back at once.
    func drive(
        _ m: inout Machine, _ all: [Device], chunk: Int, gate: InMemoryThrottle, rate: ThrottleRate,
        stopAfter: Int = .max, trace: inout Trace, drainAt: Date? = nil, expiresAt: Date? = nil,
        steering: (Date) -> JobSteering = { _ in .run }
    ) throws {
        var chunks = stride(from: 0, to: all.count, by: chunk).map { Array(all[$0..<min(all.count, $0 + chunk)]) }
        var action = m.deliveryOpened(throttle: rate, expiresAt: expiresAt)
        var steps = 0
        while steps < 1_000_000 {
            steps += 1
            if let drainAt, clock.now() >= drainAt {
                m.drainBegan(DrainDeadlines(beganAt: drainAt, deadline: 0, grace: 1))
            }
            switch action {
            case .takeChunk:
                if chunks.isEmpty {
                    action = m.devicesExhausted(outstanding: 0, now: clock.now())
                } else {
                    let c = chunks.removeFirst()
                    action = m.chunkResolved(c, recorded: Array(repeating: nil, count: c.count), now: clock.now())
                }
            case .throttle(let count):
                let g = try gate.take(org: org, job: job, rate: rate, count: count, now: clock.now())
                action = m.throttleAnswered(granted: g.granted, retryAfter: g.retryAfter, now: clock.now())
            case .waitForThrottle(let until):
                #expect(until > clock.now())
                clock.set(until)
                action = m.throttleWaitEnded(now: clock.now())
            case .charge(let platform, let count):
                trace.charges.append((clock.now(), platform, count))
                action = m.quotaGranted(count: count, now: clock.now())
            case .reserveCredits(let upTo, _):
                action = m.creditsReserved(upTo, now: clock.now())
            case .send(let slice):
                if trace.sent >= stopAfter {
                    return
                }
                trace.sends.append((clock.now(), slice.count))
                action = m.devicesSent(now: clock.now())
            case .expire(let late):
                trace.expired.append((clock.now(), late.count))
                action = m.devicesExpired(now: clock.now())
            case .recordReadyOutcomes:
                m.steeringSeen(steering(clock.now()))
                action = m.outcomesRecorded()
            case .checkSteering:
                trace.steeringChecks += 1
                action = m.steeringChecked(steering(clock.now()), now: clock.now())
            case .releaseUnsent(let devices):
                trace.released += devices.count
                action = m.unsentReleased(now: clock.now())
            case .stopSending:
                action = m.sendingStopped(outstanding: 0, now: clock.now())
            case .awaitOutcomes:
                action = m.outcomesAwaited(outstanding: 0, now: clock.now())
            case .recordRemaining:
                action = m.remainingRecorded(outstanding: 0, shardedInto: 0)
            case .publishReport:
                action = m.reportPublished()
            case .acknowledge, .abandon, .deadLetter, .openDelivery, .waitForQuota, .refuseOverQuota, .park, .parkWaves,
                .parkPaused:
                trace.final = action
                return
            }
        }
        Issue.record("the delivery did not finish")
    }

    func opened(quota: QuotaWaitPolicy? = nil, deliveryCount: Int = 1) -> Machine {
        var m = Machine(quotaWait: quota)
        _ = m.ledgerRead(.empty, deliveryCount: deliveryCount)
        return m
    }

    @Test func threeThousandDevicesAt1200AMinuteGoTwentyASecondAndEndInAbout150Seconds() throws {
        let gate = InMemoryThrottle()
        let rate = ThrottleRate(perMinute: 1200)!
        var m = opened()
        var trace = Trace()
        let start = clock.now()
        try drive(&m, devices(3000), chunk: 500, gate: gate, rate: rate, trace: &trace)
        #expect(trace.final == .acknowledge(.completed))
        #expect(trace.sent == 3000)
        // Twenty a second: slices of 5 every 0.25 s (a window may hold a slice more when a lane wakes late).
        #expect(trace.busiestSecond() <= 20 + rate.slice)
        let took = trace.sends.last!.at.timeIntervalSince(start)
        #expect(took >= 149 && took <= 150)
        // One round trip per slice of five, not one per device.
        #expect(gate.asks <= 3000 / rate.slice + 10)
    }

    @Test func tenThousandDevicesAt600AMinuteCancelledFiveSecondsInSendAtMostOneSliceMore() throws {
        let gate = InMemoryThrottle()
        let rate = ThrottleRate(perMinute: 600)!
        var m = opened(quota: QuotaWaitPolicy())
        var trace = Trace()
        let cancelAt = clock.now().addingTimeInterval(5)
        try drive(
            &m, devices(10_000), chunk: 500, gate: gate, rate: rate, trace: &trace,
            steering: { $0 >= cancelAt ? .cancelled : .run })
        #expect(trace.final == .acknowledge(.completed))
        #expect(m.cancelled)
        let after = trace.sends.filter { $0.at >= cancelAt }.reduce(0) { $0 + $1.count }
        #expect(after <= rate.slice, "\(after) pushes after the cancel")
        #expect(trace.sent <= 50 + rate.slice)
        // Slices are charged when granted: none was charged and left unsent.
        #expect(trace.charges.reduce(0) { $0 + $1.count } == trace.sent)
    }

    @Test func pausedSixtySecondsAndResumedEveryDeviceGoesOnceAndNoMinuteIsOverTheRate() throws {
        let gate = InMemoryThrottle()
        let rate = ThrottleRate(perMinute: 600)!
        let all = devices(1_000)
        let start = clock.now()
        let pauseAt = start.addingTimeInterval(5)
        var first = opened()
        var before = Trace()
        try drive(
            &first, all, chunk: 500, gate: gate, rate: rate, trace: &before,
            steering: { $0 >= pauseAt ? .paused : .run })
        #expect(before.final == .parkPaused)
        // Resumed 60 s later: the next delivery skips what went (the ledger) and goes on through the same gate.
        clock.set(pauseAt.addingTimeInterval(60))
        var second = opened(deliveryCount: 1)
        var after = Trace()
        try drive(&second, Array(all[before.sent...]), chunk: 500, gate: gate, rate: rate, trace: &after)
        #expect(after.final == .acknowledge(.completed))
        #expect(before.sent + after.sent == all.count)
        #expect(before.sends.allSatisfy { $0.at <= pauseAt })
        #expect(after.sends.allSatisfy { $0.at >= pauseAt.addingTimeInterval(60) })
        // Every whole minute from the first send holds at most the rate.
        var perMinute: [Int: Int] = [:]
        for s in before.sends + after.sends {
            perMinute[Int(s.at.timeIntervalSince(start) / 60), default: 0] += s.count
        }
        #expect(perMinute.values.allSatisfy { $0 <= 600 }, "\(perMinute.sorted { $0.key < $1.key })")
    }

    @Test func aThrottledJobIsChargedPerSliceWhenTheSliceGoes() throws {
        let gate = InMemoryThrottle()
        let rate = ThrottleRate(perMinute: 600)! // slice 2, one every 0.2 s
        var m = opened(quota: QuotaWaitPolicy())
        var trace = Trace()
        try drive(&m, devices(40), chunk: 40, gate: gate, rate: rate, trace: &trace)
        #expect(trace.final == .acknowledge(.completed))
        #expect(trace.charges.reduce(0) { $0 + $1.count } == 40)
        #expect(trace.charges.allSatisfy { $0.count <= rate.slice })
        // Each slice is charged at the instant it is sent, not the chunk's forty at the start.
        for s in trace.sends {
            #expect(trace.charges.contains { $0.at == s.at })
        }
        #expect(trace.charges.last!.at.timeIntervalSince(trace.charges.first!.at) >= 3.5)
    }

    @Test func aWorkerKilledMidJobLeavesTheRateToTheOneThatTakesOver() throws {
        let gate = InMemoryThrottle()
        let rate = ThrottleRate(perMinute: 1200)!
        let all = devices(200)
        var first = opened()
        var before = Trace()
        try drive(&first, all, chunk: 100, gate: gate, rate: rate, stopAfter: 60, trace: &before)
        #expect(before.sent == 60)
        // The redelivery starts at once, on the same gate (Redis's state survives the worker).
        var second = opened(deliveryCount: 2)
        var after = Trace()
        try drive(&second, Array(all[60...]), chunk: 100, gate: gate, rate: rate, trace: &after)
        #expect(after.final == .acknowledge(.completed))
        var both = Trace()
        both.sends = before.sends + after.sends
        #expect(both.busiestSecond() <= 20 + rate.slice)
        let took = after.sends.last!.at.timeIntervalSince(before.sends.first!.at)
        #expect(took >= 9.4) // 200 pushes at 20 a second, the first slice at once
    }

    @Test func aDrainStopsALaneWaitingForItsNextSlice() throws {
        let gate = InMemoryThrottle()
        let rate = ThrottleRate(perMinute: 60)! // one a second
        var m = opened()
        var trace = Trace()
        try drive(
            &m, devices(10), chunk: 10, gate: gate, rate: rate, trace: &trace,
            drainAt: clock.now().addingTimeInterval(3.5))
        #expect(trace.sent == 4)
        guard case .abandon = trace.final else {
            Issue.record("expected abandon, got \(String(describing: trace.final))")
            return
        }
    }

    @Test func devicesWhoseSliceWouldStartAfterTheTTLExpireAtOnceNotOneByOne() throws {
        let gate = InMemoryThrottle()
        let rate = ThrottleRate(perMinute: 60)! // one a second
        var m = opened()
        var trace = Trace()
        let start = clock.now()
        try drive(
            &m, devices(30), chunk: 30, gate: gate, rate: rate, trace: &trace,
            expiresAt: start.addingTimeInterval(5.5))
        #expect(trace.final == .acknowledge(.completed))
        // Sends at 0 … 5 s; the next slice would start at 6 s, after the notification expired: the other 24 end
        // `expired` then, at 5 s, without waiting for their turns.
        #expect(trace.sent == 6)
        #expect(trace.expired.map(\.count) == [24])
        #expect(trace.expired.first?.at == start.addingTimeInterval(5))
        #expect(gate.asks == 6)
    }

    @Test func aChunkResolvedAfterTheTTLIsExpiredWithoutASendOrACharge() {
        var m = opened(quota: QuotaWaitPolicy())
        let expiresAt = clock.now().addingTimeInterval(-1)
        #expect(m.deliveryOpened(expiresAt: expiresAt) == .takeChunk)
        let d = devices(5)
        #expect(m.chunkResolved(d, recorded: Array(repeating: nil, count: 5), now: clock.now()) == .expire(d))
        #expect(m.devicesExpired(now: clock.now()) == .recordReadyOutcomes)
    }

    @Test func aJobWithoutAThrottleNeverAsksTheGate() {
        var m = opened()
        #expect(m.deliveryOpened() == .takeChunk)
        let d = devices(5)
        let action = m.chunkResolved(d, recorded: Array(repeating: nil, count: 5), now: clock.now())
        guard case .reserveCredits(let upTo, _) = action else {
            Issue.record("expected reserveCredits, got \(action)")
            return
        }
        #expect(upTo == 5)
    }
}
