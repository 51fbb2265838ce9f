import Foundation
import Testing
import VolleyCore
import VolleyTestTags

/// `sendAt`: what is read as an RFC 3339 time, and when a job read from the stream is sent, parked or refused.
@Suite(.tags(.unit)) struct JobScheduleTests {
    @Test(arguments: [
        ("2026-11-27T09:00:00Z", 1_795_770_000.0),
        ("2026-11-27T10:00:00+01:00", 1_795_770_000.0),
        ("2026-11-27T04:00:00-05:00", 1_795_770_000.0),
        ("2026-11-27T14:30:00+05:30", 1_795_770_000.0),
        ("2026-11-27t09:00:00z", 1_795_770_000.0),
        ("2026-11-27T09:00:00.250Z", 1_795_770_000.25),
        ("2024-02-29T00:00:00Z", 1_709_164_800.0),
    ])
    func parsesRFC3339WithAnOffset(_ text: String, _ epoch: Double) throws {
        let t = try #require(ScheduledTime(text))
        #expect(abs(t.date.timeIntervalSince1970 - epoch) < 0.0005)
        #expect(t.text == text) // the caller's text is kept as written
    }

    @Test(arguments: [
        "2026-11-27T09:00:00", // no offset: its instant would depend on where it is read
        "2026-11-27 09:00:00Z", "2026-11-27T09:00Z", "2026-13-01T00:00:00Z", "2026-02-29T00:00:00Z",
        "2026-11-27T24:00:00Z", "2026-11-27T09:00:60Z", "2026-11-27T09:00:00+0100", "2026-11-27T09:00:00.Z",
        "tomorrow", "", "2026-11-27T09:00:00Z ",
    ])
    func refusesAnythingElse(_ text: String) {
        #expect(ScheduledTime(text) == nil)
    }

    @Test func aJobKeepsItsSendAtTextOnTheWayThrough() throws {
        let json =
            #"{"org":"o","app":"a","recipients":["u"],"notification":{"title":"t"},"#
            + #""sendAt":"2026-11-27T10:00:00.5+01:00"}"#
        let job = try JSONDecoder().decode(PushJob.self, from: Data(json.utf8))
        #expect(job.sendAt?.text == "2026-11-27T10:00:00.5+01:00")
        let again = try JSONDecoder().decode(PushJob.self, from: JSONEncoder().encode(job))
        #expect(again.sendAt == job.sendAt)
        #expect(JobKeys.unknownKeys(inJSON: Data(json.utf8)) == [])
    }

    @Test func aSendAtThatIsNotATimeNamesTheField() throws {
        let json = #"{"org":"o","app":"a","recipients":["u"],"notification":{},"sendAt":"9am"}"#
        let parsed = try JSONValue(parsing: Array(json.utf8))
        do throws(JSONFieldError) {
            _ = try PushJob(json: parsed, defaultOrg: nil)
            Issue.record("a sendAt of 9am was read")
        } catch {
            #expect(error.field == "sendAt")
        }
    }

    static let now = Date(timeIntervalSince1970: 1_800_000_000)

    func timing(_ offset: TimeInterval, promoted: Bool = false, maxAheadDays: Int = 30) -> JobTiming {
        let t = ScheduledTime(ScheduledTime.utcText(Self.now.addingTimeInterval(offset)))
        return JobTiming.of(sendAt: t, now: Self.now, maxAheadDays: maxAheadDays, promoted: promoted)
    }

    @Test func noSendAtIsNow() {
        #expect(JobTiming.of(sendAt: nil, now: Self.now, maxAheadDays: 30, promoted: false) == .now)
    }

    @Test func aTimeAheadParksTheJobUntilThen() {
        #expect(timing(3600) == .later(Self.now.addingTimeInterval(3600)))
        #expect(timing(0.5) == .later(Self.now.addingTimeInterval(0.5)))
        #expect(timing(30 * 86_400) == .later(Self.now.addingTimeInterval(30 * 86_400)))
    }

    @Test func aTimeUpToAMinutePastIsSentNow() {
        #expect(timing(0) == .now)
        #expect(timing(-60) == .now)
    }

    @Test func moreThanAMinutePastOrBeyondTheLimitIsRefusedNamingTheField() throws {
        guard case .refused(let past) = timing(-61) else {
            Issue.record("61 s past was not refused")
            return
        }
        #expect(past.reason == .invalidJob && past.message.hasPrefix("sendAt ") && past.message.contains("in the past"))
        guard case .refused(let far) = timing(30 * 86_400 + 1) else {
            Issue.record("31 days was not refused")
            return
        }
        #expect(far.message.hasPrefix("sendAt ") && far.message.contains("schedule.maxAheadDays"))
        #expect(timing(2 * 86_400, maxAheadDays: 1) != .later(Self.now.addingTimeInterval(2 * 86_400)))
    }

    @Test func aPromotedJobIsDueWhateverTheClockSays() {
        // Promoted late (a worker was down): still sent, never refused for being in the past.
        #expect(timing(-3600, promoted: true) == .now)
        #expect(timing(3600, promoted: true) == .now)
    }
}

/// The promoter's decisions on a manual clock: when it goes round, how it shares the work through its lease.
@Suite(.tags(.unit)) struct SchedulePromotionTests {
    typealias Machine = SchedulePromotionStateMachine
    let clock = ManualClock()
    let config = Machine.Configuration(tickSeconds: 0.25, leaseSeconds: 3, batch: 500, retrySeconds: 1)

    /// The pass `config` asks for at `now`: 500 jobs a shard under a 3 s lease, with or without the recurring pass.
    func promotion(at now: Date, recurring: Bool = true) -> Machine.Action {
        .promote(now: now, batch: 500, leaseSeconds: 3, recurring: recurring)
    }
    /// A recurring schedules' pass that held its lease and took every schedule due.
    let held = Machine.RecurringPass(leased: true)

    @Test func promotesAtOnceWhenStarted() {
        var m = Machine(configuration: config)
        #expect(m.started(now: clock.now()) == promotion(at: clock.now()))
    }

    @Test func sleepsUntilTheEarliestDueTimeOrTheTickWhicheverIsFirst() {
        var m = Machine(configuration: config)
        _ = m.started(now: clock.now())
        let now = clock.now()
        let soon = now.addingTimeInterval(0.1)
        #expect(
            m.passed(.init(leased: true, promoted: 3, nextDue: soon), recurring: held, now: now) == .wait(until: soon))
        #expect(m.holdsLease)
        let later = now.addingTimeInterval(3600)
        #expect(
            m.passed(.init(leased: true, nextDue: later), recurring: held, now: now)
                == .wait(until: now.addingTimeInterval(0.25)))
        #expect(m.passed(.init(leased: true), recurring: held, now: now) == .wait(until: now.addingTimeInterval(0.25)))
    }

    @Test func aFullBatchGoesRoundAgainAtOnce() {
        var m = Machine(configuration: config)
        _ = m.started(now: clock.now())
        clock.advance(by: 0.01)
        let pass = Machine.Pass(leased: true, promoted: 500, full: true, nextDue: clock.now())
        #expect(
            m.passed(pass, now: clock.now()) == promotion(at: clock.now())
        )
    }

    @Test func aJobDueByTheEndOfThePassIsPromotedAtOnce() {
        var m = Machine(configuration: config)
        _ = m.started(now: clock.now())
        let due = clock.now()
        clock.advance(by: 0.05) // the pass took 50 ms; a job fell due meanwhile
        #expect(
            m.passed(.init(leased: true, nextDue: due), now: clock.now())
                == promotion(at: clock.now()))
    }

    @Test func withoutTheLeaseItTriesAgainWithinHalfTheLease() {
        var m = Machine(configuration: config)
        _ = m.started(now: clock.now())
        let now = clock.now()
        #expect(
            m.passed(.init(leased: false), recurring: .init(leased: false), now: now)
                == .wait(until: now.addingTimeInterval(1.5)))
        #expect(!m.holdsLease)
        // The holder died: its lease runs out within 3 s, so a second try after it finds the lease free.
        clock.advance(by: 1.5)
        #expect(m.waited(now: clock.now()) == promotion(at: clock.now()))
    }

    @Test func theHolderRenewsWellWithinItsLease() {
        // Every wait of a holder is at most a tick, far inside the lease: it never lapses while the holder lives.
        var m = Machine(configuration: config)
        _ = m.started(now: clock.now())
        for _ in 0..<100 {
            let now = clock.now()
            guard case .wait(let until) = m.passed(.init(leased: true, nextDue: nil), recurring: held, now: now) else {
                Issue.record("a holder with nothing due did not wait")
                return
            }
            #expect(until.timeIntervalSince(now) <= config.leaseSeconds / 2)
            clock.set(until)
            #expect(
                m.waited(now: clock.now()) == promotion(at: clock.now()))
        }
    }

    @Test func theRecurringPassKeepsItsOwnCadenceWhileJobsFallDueEveryFewMilliseconds() {
        var m = Machine(configuration: config)
        guard case .promote(_, _, _, true) = m.started(now: clock.now()) else {
            Issue.record("the first pass does not run the recurring schedules")
            return
        }
        var recurringPasses = 0
        var passes = 0
        var action = m.passed(.init(leased: true), recurring: .init(leased: true), now: clock.now())
        let start = clock.now()
        // One second of jobs due every 2 ms: each wait ends at the next due time.
        while clock.now().timeIntervalSince(start) < 1 {
            switch action {
            case .wait(let until):
                clock.set(until)
                action = m.waited(now: clock.now())
            case .promote(let now, _, _, let recurring):
                passes += 1
                if recurring { recurringPasses += 1 }
                clock.advance(by: 0.0005)
                action = m.passed(
                    .init(leased: true, promoted: 1, nextDue: now.addingTimeInterval(0.002)),
                    recurring: recurring ? .init(leased: true) : nil, now: clock.now())
            }
        }
        #expect(passes >= 300)
        // Once a tick (0.25 s): four in the second, not one per pass.
        #expect((3...5).contains(recurringPasses))
    }

    @Test func recurringSchedulesStillDueGoRoundAgainAtOnce() {
        var m = Machine(configuration: config)
        _ = m.started(now: clock.now())
        clock.advance(by: 0.01)
        let now = clock.now()
        #expect(
            m.passed(.init(leased: true), recurring: .init(leased: true, more: true), now: now)
                == promotion(at: now))
        #expect(
            m.passed(.init(leased: true), recurring: .init(leased: true), now: now)
                == .wait(until: now.addingTimeInterval(0.25)))
    }

    @Test func withoutTheRecurringLeaseItTriesThatPassWithinHalfTheLease() {
        var m = Machine(configuration: config)
        _ = m.started(now: clock.now())
        let now = clock.now()
        // This worker holds the jobs' lease, another the recurring schedules': jobs every tick, the recurring
        // schedules' lease tried again after 1.5 s.
        #expect(
            m.passed(.init(leased: true), recurring: .init(leased: false), now: now)
                == .wait(until: now.addingTimeInterval(0.25)))
        #expect(m.recurringAt == now.addingTimeInterval(1.5))
        clock.advance(by: 0.25)
        #expect(m.waited(now: clock.now()) == promotion(at: clock.now(), recurring: false))
        clock.set(now.addingTimeInterval(1.5))
        #expect(m.waited(now: clock.now()) == promotion(at: clock.now()))
        // Neither lease held: both tried again within half the lease.
        let later = clock.now()
        #expect(
            m.passed(.init(leased: false), recurring: .init(leased: false), now: later)
                == .wait(until: later.addingTimeInterval(1.5)))
    }

    @Test func aFailedPassRetriesAfterAPause() {
        var m = Machine(configuration: config)
        _ = m.started(now: clock.now())
        let now = clock.now()
        #expect(m.failed(now: now) == .wait(until: now.addingTimeInterval(1)))
        #expect(!m.holdsLease)
    }
}
