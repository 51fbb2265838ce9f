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

/// Scheduled sends end to end: `volley worker` processes on a real redis-server, sending to the mock. A job with a
/// `sendAt` is parked by the worker that reads it and promoted back by whichever worker holds the lease; a cancel
/// before it is due sends nothing, one while it sends stops it.
@Suite(.serialized, .tags(.integration)) struct ScheduledSendTests {
    func workerKeys() -> [String: String] { ["blockMs": "100", "reclaimIdleMs": "1500", "drainSeconds": "2"] }

    func job(_ id: JobID, devices: [JobDevice], sendAt: Date?) -> PushJob {
        var j = PushJob(
            id: id, org: "org1", app: "app1", devices: devices,
            notification: VolleyCore.Notification(title: "Later", body: "now"))
        j.sendAt = sendAt.map { ScheduledTime(ScheduledTime.utcText($0))! }
        return j
    }

    /// Android devices (any token is one), so the mock's capture names them.
    func androidDevices(_ n: Int, prefix: String) -> [JobDevice] {
        (0..<n).map {
            JobDevice(platform: .android, token: DeviceToken("\(prefix)-\($0)-" + String(repeating: "b", count: 20)))
        }
    }

    /// Waits for the fleet to run: a worker's promoter has taken the schedule's lease (it starts with the worker's
    /// reader), so a job's time counts from a running fleet, not from a process still starting.
    func started(_ w: MockWorld) async throws {
        try await waitUntil("a worker running (the promotion lease taken)", timeout: .seconds(60)) {
            try w.h.admin.client.checked(["GET", w.h.store.scheduleLeaseKey(shard: 0)]).string != nil
        }
    }

    /// When the mock accepted its latest push, on the wall clock: its monotonic stamp, carried over by the time since
    /// (the test's own polling, on a loaded machine, does not count).
    func lastArrival(_ w: MockWorld) -> Date {
        var ts = timespec()
        clock_gettime(CLOCK_MONOTONIC, &ts)
        let now = UInt64(ts.tv_sec) * 1_000_000_000 + UInt64(ts.tv_nsec)
        let last = w.mock.stats().lastAcceptedNanos
        return Date().addingTimeInterval(-Double(now &- last) / 1e9)
    }

    func parked(_ w: MockWorld, _ job: JobID) throws -> Bool {
        let member = StoreConfiguration.scheduleMember(org: "org1", job: job)
        return try w.h.admin.client.checked(["ZSCORE", w.h.store.scheduleKey(shard: 0), member]).string != nil
    }

    @Test func aScheduledJobArrivesWithinASecondOfItsTimeAndNotBefore() async throws {
        let w = try MockWorld()
        defer { w.stop() }
        let config = try w.writeConfig(worker: workerKeys(), logLevel: "info")
        let a = try WorkerProcess(config: config, consumer: "A", logDirectory: w.dir)
        defer { if a.isRunning { a.kill9() } }
        let b = try WorkerProcess(config: config, consumer: "B", logDirectory: w.dir)
        defer { if b.isRunning { b.kill9() } }
        try await started(w)
        // Six seconds ahead: the worker that reads the job parks it long before its time even on a loaded machine.
        let due = Date().addingTimeInterval(6)
        try w.h.producer.enqueue(job("at-1", devices: androidDevices(2, prefix: "at"), sendAt: due))
        try await waitUntil(
            "at-1 at the mock: \(a.log.suffix(1500))", timeout: .seconds(30), interval: .milliseconds(5)
        ) {
            w.mock.stats().acceptedFCM >= 2
        }
        // The workers' logs say it waited (the parked state itself is transient: the test's own polling may be
        // late to see it on a loaded machine, the log line is not).
        #expect((a.log + b.log).contains("job parked until its time"), "\(a.log.suffix(1500))\n\(b.log.suffix(1500))")
        let arrived = lastArrival(w)
        print("sendAt: at the mock \(Int(arrived.timeIntervalSince(due) * 1000)) ms after its time")
        #expect(arrived >= due, "sent \(due.timeIntervalSince(arrived)) s early")
        // The promoter sleeps until the earliest due time, so the push follows its time closely; the bound here
        // leaves room for a test machine running every other suite at once (the one-second p99 at scale is
        // `volley-bench schedule`'s figure).
        #expect(arrived.timeIntervalSince(due) < 2, "sent \(arrived.timeIntervalSince(due)) s after its time")
        try await waitUntil("the report of at-1", timeout: .seconds(10)) { (try? w.h.report(for: "at-1")) != nil }
        let r = try #require(try w.h.report(for: "at-1"))
        #expect(r.accepted == 2 && w.mock.stats().duplicateDeliveries == 0 && w.mock.stats().acceptedFCM == 2)
        #expect(try !self.parked(w, "at-1"))
    }

    @Test func aJobCancelledBeforeItsTimeSendsNothing() async throws {
        let w = try MockWorld(mockConfig: #"{"capturePushes": 100}"#)
        defer { w.stop() }
        let config = try w.writeConfig(worker: workerKeys())
        let a = try WorkerProcess(config: config, consumer: "A", logDirectory: w.dir)
        defer { if a.isRunning { a.kill9() } }
        try await started(w)
        let now = Date()
        try w.h.producer.enqueue(job("cancel-me", devices: androidDevices(3, prefix: "cx"), sendAt: now + 8))
        // A second job, due after the first: once it has arrived, the first one's time has passed too. Both are
        // parked for seconds, so a test slowed by a loaded machine still sees them parked and cancels in time.
        try w.h.producer.enqueue(job("keep-me", devices: androidDevices(1, prefix: "kp"), sendAt: now + 9))
        try await waitUntil("both parked: \(a.log.suffix(1500))", timeout: .seconds(8)) {
            try self.parked(w, "cancel-me") && self.parked(w, "keep-me")
        }
        let settings = try PipelineSettings(try VolleyConfiguration.load(path: config))
        let result = try JobCancelCommand.cancel(
            settings: settings, org: "org1", job: "cancel-me", logger: Logger(label: "test"))
        #expect(result.cancelled && result.message.contains("nothing was sent"), "\(result.message)")
        try await waitUntil("the report of keep-me", timeout: .seconds(30)) {
            (try? w.h.report(for: "keep-me")) != nil
        }
        let tokens = w.mock.capturedPushes().map(\.token)
        #expect(tokens.count == 1 && tokens.allSatisfy { $0.hasPrefix("kp-") }, "\(tokens)")
        #expect(try w.h.report(for: "cancel-me") == nil)
        // A second cancel finds nothing parked; the job is marked, and would send nothing if it ever came.
        let again = try JobCancelCommand.cancel(
            settings: settings, org: "org1", job: "cancel-me", logger: Logger(label: "test"))
        #expect(again.cancelled)
    }

    @Test func aJobCancelledWhileItSendsStopsAndReportsWhatWent() async throws {
        // 40 ms per answer and 100 in flight (about 2,500 a second), so the campaign is mid-way when it is cancelled.
        let w = try MockWorld(mockConfig: #"{"latencyMs": 40}"#)
        defer { w.stop() }
        try w.registerCampaign()
        var keys = workerKeys()
        keys["inFlight"] = "100"
        keys["recordBatchSize"] = "100"
        let config = try w.writeConfig(worker: keys)
        let a = try WorkerProcess(config: config, consumer: "A", logDirectory: w.dir)
        defer { if a.isRunning { a.kill9() } }
        try w.h.producer.enqueue(
            PushJob(
                id: "stop-me", org: "org1", app: "app1", recipients: (0..<500).map { RecipientID("user\($0)") },
                notification: VolleyCore.Notification(title: "Sale", body: "Today only")))
        try await waitUntil("1,000 pushes at the mock: \(a.log.suffix(1500))", timeout: .seconds(60)) {
            pushes(w.mock.stats()) >= 1_000
        }
        let settings = try PipelineSettings(try VolleyConfiguration.load(path: config))
        let result = try JobCancelCommand.cancel(
            settings: settings, org: "org1", job: "stop-me", logger: Logger(label: "test"))
        #expect(result.cancelled, "\(result.message)")
        try await waitUntil("the report of stop-me: \(a.log.suffix(1500))", timeout: .seconds(60)) {
            (try? w.h.report(for: "stop-me")) != nil
        }
        let r = try #require(try w.h.report(for: "stop-me"))
        let s = w.mock.stats()
        #expect(r.status == "cancelled")
        #expect(r.accepted < 20_000, "the whole campaign went")
        // Everything that went is in the report, once.
        #expect(r.accepted == s.acceptedAPNs + s.acceptedFCM && s.duplicateDeliveries == 0)
        #expect(try w.h.ledger(job: "stop-me").count == r.accepted)
    }

    /// Three devices in Berlin, Kolkata and New York, and one without a zone whose user's directory record says
    /// Kolkata; one `HH:MM` for all, picked so Berlin's is the coming minute: Berlin's device is sent at that minute,
    /// the other three wait as waves due at their own 09:00-style instants, and the job's status says so.
    /// The worker holding the promotion lease is killed just before a 20,000-device campaign falls due: the other
    /// takes the lease once it lapses, promotes the campaign once, and every device is sent once.
    @Test func killingThePromotingWorkerLosesNothingAndSendsNothingTwice() async throws {
        let w = try MockWorld()
        defer { w.stop() }
        try w.registerCampaign()
        var keys = workerKeys()
        keys["inFlight"] = "400"
        let config = try w.writeConfig(worker: keys)
        var workers: [String: WorkerProcess] = [:]
        for name in ["A", "B"] {
            workers[name] = try WorkerProcess(config: config, consumer: name, logDirectory: w.dir)
        }
        defer { for p in workers.values where p.isRunning { p.kill9() } }
        try await started(w)
        let due = Date().addingTimeInterval(8)
        var job = PushJob(
            id: "campaign-at", org: "org1", app: "app1", recipients: (0..<500).map { RecipientID("user\($0)") },
            notification: VolleyCore.Notification(title: "Sale", body: "Starts now"))
        job.sendAt = ScheduledTime(ScheduledTime.utcText(due))
        try w.h.producer.enqueue(job)
        try await waitUntil("campaign-at parked", timeout: .seconds(7)) { try self.parked(w, "campaign-at") }
        // The lease names its holder (`<consumer>-<random>`): kill that worker half a second before the time.
        var holder = ""
        try await waitUntil("a promotion lease", timeout: .seconds(10)) {
            holder = try w.h.admin.client.checked(["GET", w.h.store.scheduleLeaseKey(shard: 0)]).string ?? ""
            return !holder.isEmpty
        }
        let name = try #require(workers.keys.first { holder.hasPrefix("\($0)-") }, "lease holder \(holder)")
        try await waitUntil("half a second before the campaign's time", timeout: .seconds(15)) {
            Date() >= due.addingTimeInterval(-0.5)
        }
        workers[name]?.kill9()
        let survivor = workers.first { $0.key != name }!.value
        try await waitUntil("the report of campaign-at: \(survivor.log.suffix(1500))", timeout: .seconds(90)) {
            (try? w.h.report(for: "campaign-at")) != nil
        }
        let r = try #require(try w.h.report(for: "campaign-at"))
        let s = w.mock.stats()
        #expect(r.accepted == 20_000 && r.devices == 20_000)
        #expect(s.acceptedAPNs + s.acceptedFCM == 20_000 && s.duplicateDeliveries == 0)
        #expect(try !self.parked(w, "campaign-at"))
        // Sent once the lease lapsed (3 s) and the survivor took it: late, never early.
        #expect(r.startedAt >= due.addingTimeInterval(-0.05))
    }
}

/// A local-time job end to end. A suite of its own: it waits for Berlin's next whole minute (up to 65 s on the wall
/// clock), and beside the other scheduled sends rather than after them that wait costs the integration lane nothing.
@Suite(.tags(.integration)) struct LocalTimeSendTests {
    let helpers = ScheduledSendTests()

    @Test func aLocalTimeJobReachesTheZoneDueNowAndTheOthersWaitForTheirOwnTime() async throws {
        let w = try MockWorld(mockConfig: #"{"capturePushes": 100}"#)
        defer { w.stop() }
        let zones = ["Europe/Berlin", "Asia/Kolkata", "America/New_York"]
        try w.h.admin.register(
            zones.enumerated().map { i, z in
                DeviceImportRecord(
                    org: "org1", app: "app1", user: "user0", platform: .android,
                    token: DeviceToken("lt-\(i)-" + String(repeating: "c", count: 20)), timeZone: z)
            }
                // A device that registered no zone: its user's directory record places it in Kolkata.
                + [
                    DeviceImportRecord(
                        org: "org1", app: "app1", user: "user1", platform: .android,
                        token: DeviceToken("lt-dir-" + String(repeating: "c", count: 20)))
                ])
        try RedisDirectory(client: w.redis.client(name: "dir")).importRecords([
            DirectoryRecord(org: "org1", kind: .user, id: "user0"),
            DirectoryRecord(org: "org1", kind: .user, id: "user1", attributes: ["timeZone": "Asia/Kolkata"]),
        ])
        let config = try w.writeConfig(worker: helpers.workerKeys())
        let a = try WorkerProcess(config: config, consumer: "A", logDirectory: w.dir)
        defer { if a.isRunning { a.kill9() } }
        try await helpers.started(w)
        // Berlin's next whole minute, at least 5 s away.
        let berlin = TimeZone(identifier: "Europe/Berlin")!
        let now = Date()
        var target = (now.timeIntervalSince1970 / 60).rounded(.up) * 60
        if target - now.timeIntervalSince1970 < 5 { target += 60 }
        let wall = Int(target) + berlin.secondsFromGMT(for: Date(timeIntervalSince1970: target))
        let hhmm = String(format: "%02d:%02d", (wall % 86_400) / 3_600, (wall % 3_600) / 60)
        let time = try #require(LocalDeliveryTime(hhmm))
        var job = PushJob(
            id: "local-1", org: "org1", app: "app1", recipients: ["user0", "user1"],
            notification: VolleyCore.Notification(title: "Good morning"))
        job.deliverAtLocalTime = time
        let entry = try w.h.producer.enqueue(job)
        let reference = Date(timeIntervalSince1970: Double(entry.rawValue.split(separator: "-")[0])! / 1000)
        let due = zones.map { time.due(in: TimeZone(identifier: $0)!, after: reference) }
        #expect(due[0] == Date(timeIntervalSince1970: target))

        try await waitUntil(
            "Berlin's device at the mock: \(a.log.suffix(1500))", timeout: .seconds(75), interval: .milliseconds(5)
        ) { !w.mock.capturedPushes().isEmpty }
        let arrived = helpers.lastArrival(w)
        #expect(arrived >= due[0], "sent \(due[0].timeIntervalSince(arrived)) s early")
        #expect(arrived.timeIntervalSince(due[0]) < 1, "sent \(arrived.timeIntervalSince(due[0])) s late")
        #expect(w.mock.capturedPushes().map(\.token) == ["lt-0-" + String(repeating: "c", count: 20)])

        // The others wait: the job reads scheduled, due at New York's time, two devices waiting.
        let reader = RedisJobStatusReader(
            lanes: SerialLanes(count: 1, label: "status") { _ in RedisClient(endpoint: w.redis.endpoint) },
            store: w.h.store)
        var status: JobStatus?
        try await waitUntil("local-1 waiting for three devices", timeout: .seconds(10)) {
            status = try await reader.status(org: "org1", job: "local-1")
            return status?.waiting == 3
        }
        #expect(status?.state == "scheduled")
        #expect(status?.dueAt == ScheduledTime.utcText(min(due[1], due[2])))
        // Each wave is parked at its own instant.
        let parked = try w.h.admin.client.checked(["ZRANGE", w.h.store.scheduleKey(shard: 0), "0", "-1", "WITHSCORES"])
        let scores = (parked.array ?? []).enumerated().filter { $0.offset % 2 == 1 }.compactMap {
            $0.element.string.flatMap(Double.init)
        }
        #expect(Set(scores) == Set([due[1], due[2]].map { ($0.timeIntervalSince1970 * 1000).rounded(.up) }))
        #expect(try w.h.report(for: "local-1") == nil)
    }
}
