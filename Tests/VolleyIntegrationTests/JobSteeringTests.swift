import Foundation
import Logging
import Testing
import VolleyCore
import VolleyMock
import VolleyRedis
import VolleyService
import VolleyStore
import VolleyTestDoubles
import VolleyTestSupport
import VolleyTestTags

/// Pause, resume and cancel of throttled jobs end to end: a `volley worker` process on a real redis-server, sending
/// to the mock over TLS. A cancel takes effect before the next throttle slice; a paused job records what went, is
/// parked, and on its resume sends every other device once.
@Suite(.serialized, .tags(.integration)) struct JobSteeringTests {
    let helpers = ScheduledSendTests()

    func throttled(_ id: JobID, devices n: Int, perMinute: Int) -> PushJob {
        var j = PushJob(
            id: id, org: "org1", app: "app1", devices: helpers.androidDevices(n, prefix: id.rawValue),
            notification: VolleyCore.Notification(title: "Flash sale", body: "Now"))
        j.throttlePerMinute = perMinute
        return j
    }

    func reader(_ w: MockWorld) -> RedisJobStatusReader {
        RedisJobStatusReader(
            lanes: SerialLanes(count: 1, label: "status") { _ in RedisClient(endpoint: w.redis.endpoint) },
            store: w.h.store)
    }

    func settings(_ config: String) throws -> PipelineSettings {
        try PipelineSettings(try VolleyConfiguration.load(path: config))
    }

    /// Enqueues `job` and waits until `pushes` of it have reached the mock: the job is mid-way.
    func sending(_ job: PushJob, _ w: MockWorld, _ a: WorkerProcess, pushes n: Int) async throws {
        try w.h.producer.enqueue(job)
        try await waitUntil("\(n) pushes at the mock: \(a.log.suffix(1500))", timeout: .seconds(60)) {
            pushes(w.mock.stats()) >= n
        }
    }

    @Test func aThrottledJobCancelledMidWaySendsAtMostOneSliceMore() async throws {
        let w = try MockWorld()
        defer { w.stop() }
        let config = try w.writeConfig(worker: helpers.workerKeys())
        let a = try WorkerProcess(config: config, consumer: "A", logDirectory: w.dir)
        defer { if a.isRunning { a.kill9() } }
        // The issue's case: 10,000 devices at 600 a minute (a slice of 2 every 0.2 s), cancelled 5 s in.
        try await sending(throttled("slow-cancel", devices: 10_000, perMinute: 600), w, a, pushes: 50)
        // A job enqueued straight onto the stream (no API record) is steered as `volley jobs` does.
        let answer = try JobCancelCommand.cancel(
            settings: try settings(config), org: "org1", job: "slow-cancel", logger: Logger(label: "t"))
        #expect(answer.cancelled, "\(answer.message)")
        let atCancel = pushes(w.mock.stats())
        try await waitUntil("the report of slow-cancel: \(a.log.suffix(1500))", timeout: .seconds(30)) {
            (try? w.h.report(for: "slow-cancel")) != nil
        }
        let r = try #require(try w.h.report(for: "slow-cancel"))
        let s = w.mock.stats()
        #expect(r.status == "cancelled")
        // The slice being sent when the mark was set may still go; nothing after it.
        #expect(pushes(s) <= atCancel + ThrottleRate(perMinute: 600)!.slice, "\(pushes(s)) after \(atCancel)")
        #expect(r.accepted == s.acceptedFCM && s.duplicateDeliveries == 0)
        let status = try await reader(w).status(org: "org1", job: "slow-cancel")
        #expect(status?.state == "done" && status?.report?.status == "cancelled")
    }

    @Test func aPausedJobIsParkedAndOnItsResumeSendsEveryOtherDeviceOnce() async throws {
        let w = try MockWorld()
        defer { w.stop() }
        let config = try w.writeConfig(worker: helpers.workerKeys())
        let a = try WorkerProcess(config: config, consumer: "A", logDirectory: w.dir)
        defer { if a.isRunning { a.kill9() } }
        try await helpers.started(w)
        // 1,200 a minute: 20 a second, 200 devices in about 10 s.
        try await sending(throttled("pause-me", devices: 200, perMinute: 1_200), w, a, pushes: 30)
        let paused = try JobPauseCommand.pause(
            settings: try settings(config), org: "org1", job: "pause-me", logger: Logger(label: "t"))
        #expect(paused.paused, "\(paused.message)")
        let marked = try await reader(w).status(org: "org1", job: "pause-me")?.state
        #expect(marked == "paused")
        // Parked once what went is recorded: from then on nothing of it can be sent.
        try await waitUntil("pause-me parked: \(a.log.suffix(1500))", timeout: .seconds(30)) {
            try helpers.parked(w, "pause-me")
        }
        let atPark = pushes(w.mock.stats())
        #expect(atPark < 200, "the whole job went before the pause")
        let recorded = try w.h.ledger(job: "pause-me").count
        #expect(recorded == atPark)
        let state = try await reader(w).status(org: "org1", job: "pause-me")?.state
        #expect(state == "paused")
        // `volley status` shows it paused, not scheduled.
        let fleet = try RedisFleetStatus(client: w.redis.client(name: "status"), store: w.h.store, quota: nil).read()
        #expect(fleet.stream.paused == 1 && fleet.stream.scheduled == 0 && fleet.stream.nextDueAt == nil)
        #expect(FleetStatusCommand.text(fleet).contains { $0.hasPrefix("paused      1 jobs") })
        // A job the org does not have is unknown to a resume.
        if case .unknown = try await reader(w).resume(org: "org1", job: "nothing-here", now: Date()) {
        } else {
            Issue.record("an unknown job resumed")
        }
        #expect(pushes(w.mock.stats()) == atPark)

        let resumed = try await reader(w).resume(org: "org1", job: "pause-me", now: Date())
        guard case .changed = resumed else {
            Issue.record("resume answered \(resumed)")
            return
        }
        try await waitUntil("the report of pause-me: \(a.log.suffix(1500))", timeout: .seconds(60)) {
            (try? w.h.report(for: "pause-me")) != nil
        }
        let r = try #require(try w.h.report(for: "pause-me"))
        let s = w.mock.stats()
        #expect(r.status == nil || r.status == "completed", "\(r.status ?? "")")
        #expect(r.accepted == 200 && s.acceptedFCM == 200 && s.duplicateDeliveries == 0)
        let stillParked = try helpers.parked(w, "pause-me")
        #expect(!stillParked)
    }

    @Test func aPausedJobCancelledReportsWhatWentAsCancelled() async throws {
        let w = try MockWorld()
        defer { w.stop() }
        let config = try w.writeConfig(worker: helpers.workerKeys())
        let a = try WorkerProcess(config: config, consumer: "A", logDirectory: w.dir)
        defer { if a.isRunning { a.kill9() } }
        try await helpers.started(w)
        try await sending(throttled("pause-cancel", devices: 200, perMinute: 1_200), w, a, pushes: 10)
        let settings = try settings(config)
        let pause = try JobPauseCommand.pause(
            settings: settings, org: "org1", job: "pause-cancel", logger: Logger(label: "t"))
        #expect(pause.paused, "\(pause.message)")
        try await waitUntil("pause-cancel parked", timeout: .seconds(30)) { try helpers.parked(w, "pause-cancel") }
        let atPark = pushes(w.mock.stats())
        let result = try JobCancelCommand.cancel(
            settings: settings, org: "org1", job: "pause-cancel", logger: Logger(label: "t"))
        #expect(result.cancelled, "\(result.message)")
        try await waitUntil("the report of pause-cancel: \(a.log.suffix(1500))", timeout: .seconds(30)) {
            (try? w.h.report(for: "pause-cancel")) != nil
        }
        let r = try #require(try w.h.report(for: "pause-cancel"))
        #expect(r.status == "cancelled")
        #expect(r.accepted == atPark && pushes(w.mock.stats()) == atPark)
    }
}
