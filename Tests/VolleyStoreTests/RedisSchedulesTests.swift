import Foundation
import Testing
import VolleyCore
import VolleyRedis
import VolleyTestSupport
import VolleyTestTags

@testable import VolleyStore

/// Promotion of due runs on a real redis-server: by score, once per run whatever dies in between, advancing to the
/// next run; a paused schedule waits; the throttle's gate keeps its state for the worker that takes over.
@Suite(.tags(.integration)) struct RedisSchedulesTests {
    let org = OrgID("o1")

    func schedule(_ id: String, start: Date, frequency: ScheduleRecurrence.Frequency) -> Schedule {
        Schedule(
            id: id, org: org,
            job: .object([
                "app": .string("app1"), "recipients": .array([.string("u1")]),
                "notification": .object(["title": .string("Hi")]),
            ]),
            recurrence: ScheduleRecurrence(start: start, frequency: frequency, timeZone: TimeZone(identifier: "UTC")!),
            createdAt: start)
    }

    func stream(_ c: RedisClient) throws -> [String] {
        (try c.checked(["XRANGE", "volley:jobs", "-", "+"]).array ?? []).compactMap {
            $0.array?[1].array?[1].string
        }
    }

    @Test func aDueRunIsSubmittedOnceEvenWhenThePromoterDiedBeforeAdvancing() throws {
        let fx = try RedisServerFixture()
        defer { fx.stop() }
        let store = RedisSchedules(client: fx.client(name: "s"))
        let start = Date(timeIntervalSince1970: 1_900_000_000)
        guard case .created = try store.create(schedule("daily", start: start, frequency: .daily), now: start) else {
            Issue.record("not created")
            return
        }
        // Not due yet: nothing promoted.
        let early = try store.promoteDue(dueBy: start - 1, now: start - 1, leaseSeconds: 5, owner: "a")
        #expect(early.leased && early.promoted.isEmpty)
        // A promoter submitted the run and died before advancing: the schedule still names the run.
        let job = Schedule.runJobID(schedule: "daily", run: start)
        let entry = try fx.client(name: "x").eval(
            APIScripts.submit,
            keys: [APIKeys(prefix: "volley").job(org, job, stream: "volley:jobs"), "volley:jobs"],
            args: [
                "schedule:daily:\(Int64(start.timeIntervalSince1970 * 1000))",
                schedule("daily", start: start, frequency: .daily).runJob(at: start).jsonText, "t", "app1", "60",
            ])
        #expect(entry.array?.first?.integer == 0)
        // Another worker's pass (the lease of the dead one expired): the run is answered as a replay, not added.
        let other = RedisSchedules(client: fx.client(name: "s2"))
        let r = try other.promoteDue(dueBy: start + 1, now: start + 1, leaseSeconds: 5, owner: "b")
        #expect(r.leased == false) // a's lease is still held
        _ = try fx.client(name: "l").checked(["DEL", "volley:sched-lease"])
        let taken = try other.promoteDue(dueBy: start + 1, now: start + 1, leaseSeconds: 5, owner: "b")
        #expect(taken.promoted.map(\.job) == [job])
        #expect(taken.promoted.first?.replayed == true)
        #expect(try stream(fx.client(name: "y")).count == 1)
        let state = try #require(try store.schedule(org: org, id: "daily"))
        #expect(state.nextRunAt == start + 86_400)
        #expect(state.lastRunJob == job)
        // The same pass again finds nothing due.
        #expect(try other.promoteDue(dueBy: start + 2, now: start + 2, leaseSeconds: 5, owner: "b").promoted.isEmpty)
        // The next day's run is a new job with its own id.
        let next = try other.promoteDue(dueBy: start + 86_400, now: start + 86_400, leaseSeconds: 5, owner: "b")
        #expect(next.promoted.map(\.job) == [Schedule.runJobID(schedule: "daily", run: start + 86_400)])
        #expect(try stream(fx.client(name: "z")).count == 2)
        let run = try PushJob(json: JSONValue(parsing: try stream(fx.client(name: "w"))[1]), defaultOrg: nil)
        #expect(run.id == Schedule.runJobID(schedule: "daily", run: start + 86_400))
        #expect(run.org == org)
    }

    @Test func aStartUpToAMinutePastRunsAtOnce() throws {
        let fx = try RedisServerFixture()
        defer { fx.stop() }
        let store = RedisSchedules(client: fx.client(name: "s"))
        let start = Date(timeIntervalSince1970: 1_900_000_000)
        guard
            case .created(let state) = try store.create(
                schedule("late", start: start, frequency: .once), now: start + 30)
        else {
            Issue.record("not created")
            return
        }
        #expect(state.nextRunAt == start)
        let r = try store.promoteDue(dueBy: start + 30, now: start + 30, leaseSeconds: 5, owner: "a")
        #expect(r.promoted.map(\.job) == [Schedule.runJobID(schedule: "late", run: start)])
        #expect(try store.schedule(org: org, id: "late")?.nextRunAt == nil)
    }

    @Test func aPausedScheduleIsNotPromotedAndResumesFromItsNextRun() throws {
        let fx = try RedisServerFixture()
        defer { fx.stop() }
        let store = RedisSchedules(client: fx.client(name: "s"))
        let start = Date(timeIntervalSince1970: 1_900_000_000)
        _ = try store.create(schedule("d", start: start, frequency: .daily), now: start)
        _ = try store.setPaused(org: org, id: "d", paused: true, now: start)
        #expect(try store.promoteDue(dueBy: start + 10, now: start + 10, leaseSeconds: 5, owner: "a").promoted.isEmpty)
        // Resumed three days later: the missed runs are not sent; the next is the one after now.
        let resumed = try #require(try store.setPaused(org: org, id: "d", paused: false, now: start + 3 * 86_400 + 5))
        #expect(resumed.nextRunAt == start + 4 * 86_400)
        #expect(try store.list(org: org).map(\.schedule.id) == ["d"])
        #expect(try store.delete(org: org, id: "d"))
        #expect(try store.schedule(org: org, id: "d") == nil)
        #expect(try store.list(org: org).isEmpty)
    }

    @Test func theThrottleGateIsSharedAndSurvivesTheWorkerThatUsedIt() throws {
        let fx = try RedisServerFixture()
        defer { fx.stop() }
        let rate = ThrottleRate(perMinute: 120)! // burst 2, slice 1, one every 0.5 s
        let first = RedisThrottle(client: fx.client(name: "a"))
        let g1 = try first.take(org: org, job: "j", rate: rate, count: 10, now: Date())
        #expect(g1.granted == 1)
        // Another worker (another connection), at once: the gate's state is in Redis, so it waits its turn.
        let second = RedisThrottle(client: fx.client(name: "b"))
        let g2 = try second.take(org: org, job: "j", rate: rate, count: 10, now: Date())
        #expect(g2.granted == 0)
        #expect(g2.retryAfter > 0.3 && g2.retryAfter <= 0.5)
        // Another job has its own gate.
        #expect(try second.take(org: org, job: "other", rate: rate, count: 10, now: Date()).granted == 1)
        let ttl = try fx.client(name: "c").checked(["PTTL", "volley:throttle:{o1}:j"]).integer ?? 0
        #expect(ttl > 600_000 && ttl <= 601_000)
    }
}
