import Foundation
import Testing
import VolleyCore
import VolleyEngine
import VolleyTestDoubles
import VolleyTestTags

/// Jobs with a time (`sendAt`) and cancels, on the in-memory backend: a job due later is parked and acknowledged
/// without a send, comes back when promoted, and a cancel before or during the send is honoured.
@Suite(.tags(.unit)) struct ScheduledJobTests {
    let backend = InMemoryBackend()

    func worker(
        _ senders: [Platform: any PushSender], chunkSize: Int = 100, clock: any WallClock = SystemClock(),
        orgZone: TimeZone? = nil
    ) -> PipelineWorker {
        var c = WorkerConfiguration(
            consumer: "w1", concurrentJobs: 1, inFlight: 100, blockMillis: 20,
            reclaimIdleMillis: 60_000, reclaimIntervalMillis: 60_000, maxDeliveries: 5,
            drainDeadlineSeconds: 1, recordBatch: 10, chunkSize: chunkSize)
        if let orgZone { c.orgTimeZones = ["org1": orgZone] }
        return PipelineWorker(
            configuration: c, backend: backend, apps: StaticAppDirectory(["app1": senders]), clock: clock)
    }

    func devices(_ n: Int, user: UserID = "user0") -> [Device] {
        (0..<n).map { Device(platform: .ios, token: DeviceToken("tok-\(user)-\($0)"), user: user) }
    }

    func job(_ id: JobID?, sendAt: Date? = nil) -> PushJob {
        var j = PushJob(
            id: id, org: "org1", app: "app1", recipients: ["user0"],
            notification: VolleyCore.Notification(title: "t", body: "b"))
        j.sendAt = sendAt.map { ScheduledTime(ScheduledTime.utcText($0))! }
        return j
    }

    @Test func aJobDueLaterIsParkedAndSentOnlyOncePromoted() async throws {
        backend.register(org: "org1", app: "app1", user: "user0", devices(3))
        let ios = FakePushSender(platform: .ios)
        let w = worker([.ios: ios])
        try w.start()
        defer { w.drain(deadline: 1) }
        let due = Date().addingTimeInterval(3600)
        let entry = try backend.enqueue(job("js1", sendAt: due))
        try await waitUntil("the entry acknowledged as parked") { backend.ackedEntries == [entry] }
        let parked = try #require(backend.parkedJobs["org1|js1"])
        #expect(abs(parked.timeIntervalSince(due)) < 0.001)
        #expect(ios.total == 0 && backend.allReports.isEmpty && w.stats.jobsParked == 1)

        #expect(backend.promote(now: due) == 1)
        try await waitUntil("the promoted job's report") { backend.allReports.count == 1 }
        #expect(ios.total == 3 && backend.allReports[0].accepted == 3 && backend.allReports[0].job == "js1")
        #expect(backend.parkedJobs.isEmpty && w.stats.jobsParked == 1)
    }

    @Test func aJobWithoutAnIdKeepsItsFirstEntryIdThroughTheSchedule() async throws {
        backend.register(org: "org1", app: "app1", user: "user0", devices(1))
        let ios = FakePushSender(platform: .ios)
        let w = worker([.ios: ios])
        try w.start()
        defer { w.drain(deadline: 1) }
        let entry = try backend.enqueue(job(nil, sendAt: Date().addingTimeInterval(60)))
        try await waitUntil("parked") { !backend.parkedJobs.isEmpty }
        #expect(backend.parkedJobs.keys.first == "org1|\(entry.rawValue)")
        backend.promote(now: Date().addingTimeInterval(61))
        try await waitUntil("the report") { backend.allReports.count == 1 }
        #expect(backend.allReports[0].job.rawValue == entry.rawValue)
    }

    @Test func aSendAtMoreThanAMinutePastIsDeadLetteredNamingTheField() async throws {
        backend.register(org: "org1", app: "app1", user: "user0", devices(1))
        let ios = FakePushSender(platform: .ios)
        let w = worker([.ios: ios])
        try w.start()
        defer { w.drain(deadline: 1) }
        try backend.enqueue(job("late", sendAt: Date().addingTimeInterval(-120)))
        try backend.enqueue(job("far", sendAt: Date().addingTimeInterval(31 * 86_400)))
        try backend.enqueue(job("justNow", sendAt: Date().addingTimeInterval(-30)))
        try await waitUntil("two dead letters and a report") {
            backend.deadLettered.count == 2 && backend.allReports.count == 1
        }
        #expect(backend.deadLettered.allSatisfy { $0.reason == .invalidJob && $0.detail.hasPrefix("sendAt ") })
        #expect(backend.allReports[0].job == "justNow" && ios.total == 1 && backend.parkedJobs.isEmpty)
    }

    @Test func aPromotedJobIsSentHoweverLateItIsRead() async throws {
        backend.register(org: "org1", app: "app1", user: "user0", devices(2))
        let ios = FakePushSender(platform: .ios)
        let w = worker([.ios: ios])
        // As the promoter writes it: due an hour ago (the fleet was down), with its due time.
        var fields = [
            "job": String(decoding: try JSONEncoder().encode(job("old", sendAt: Date() - 3600)), as: UTF8.self)
        ]
        fields["due"] = String(Int64((Date().timeIntervalSince1970 - 3600) * 1000))
        backend.enqueue(fields: fields)
        try w.start()
        defer { w.drain(deadline: 1) }
        try await waitUntil("the report") { backend.allReports.count == 1 }
        #expect(ios.total == 2 && backend.deadLettered.isEmpty)
    }

    @Test func aJobCancelledWhileParkedSendsNothing() async throws {
        backend.register(org: "org1", app: "app1", user: "user0", devices(3))
        let ios = FakePushSender(platform: .ios)
        let w = worker([.ios: ios])
        try w.start()
        defer { w.drain(deadline: 1) }
        try backend.enqueue(job("jc0", sendAt: Date().addingTimeInterval(600)))
        try await waitUntil("parked") { !backend.parkedJobs.isEmpty }
        #expect(backend.cancel(org: "org1", job: "jc0"))
        #expect(backend.promote(now: Date().addingTimeInterval(601)) == 0)
        #expect(ios.total == 0 && backend.allReports.isEmpty)
    }

    @Test func aJobCancelledBeforeItIsReadReportsCancelledWithoutASend() async throws {
        backend.register(org: "org1", app: "app1", user: "user0", devices(3))
        let ios = FakePushSender(platform: .ios)
        let w = worker([.ios: ios])
        // Cancelled while on the stream (or promoted in the same instant as the cancel).
        backend.cancel(org: "org1", job: "jc1")
        let entry = try backend.enqueue(job("jc1"))
        try w.start()
        defer { w.drain(deadline: 1) }
        try await waitUntil("acknowledged") { backend.ackedEntries == [entry] }
        let report = try #require(backend.allReports.first)
        #expect(report.status == "cancelled" && report.accepted == 0 && ios.total == 0)
    }

    @Test func aJobCancelledWhileSendingStopsBetweenChunksAndReportsWhatWent() async throws {
        let users = (0..<200).map { UserID("u\($0)") }
        for u in users { backend.register(org: "org1", app: "app1", user: u, devices(10, user: u)) }
        let backend = self.backend
        // The cancel lands while the second chunk (about users 10…19) is being sent.
        let ios = FakePushSender(platform: .ios) { d in
            if d.token.rawValue == "tok-u15-0" { backend.cancel(org: "org1", job: "jc2") }
            return .accepted
        }
        let w = worker([.ios: ios], chunkSize: 100)
        var j = job("jc2")
        j.recipients = users.map { .id(RecipientID($0.rawValue)) }
        let entry = try backend.enqueue(j)
        try w.start()
        defer { w.drain(deadline: 1) }
        try await waitUntil("acknowledged") { backend.ackedEntries == [entry] }
        let report = try #require(backend.allReports.first)
        #expect(report.status == "cancelled")
        // Whole chunks went (the one the cancel landed in, at most a couple more before a record saw it), and the
        // report counts every one of them.
        #expect(ios.total > 150 && ios.total < 2_000)
        #expect(report.accepted == ios.total)
        #expect(backend.outcomes(org: "org1", job: "jc2").count == ios.total)
    }

    /// A job sent at 09:00 on each recipient's clock, counted from 2026-11-27 08:00 UTC (the local-time tests'
    /// clocks start just after it).
    func nineOClockJob(_ id: JobID) -> PushJob {
        var j = job(id, sendAt: ScheduledTime("2026-11-27T08:00:00Z")!.date)
        j.deliverAtLocalTime = LocalDeliveryTime("09:00")
        return j
    }

    /// Three devices in three zones, 09:00 each: Berlin's goes at once, New York's and Kolkata's wait as waves of the
    /// same job, each sent when its wave comes; the last wave publishes one report counting all three.
    @Test func aLocalTimeJobReachesEachZoneInItsOwnWave() async throws {
        let clock = ManualClock(ScheduledTime("2026-11-27T08:00:05Z")!.date)
        let zones = ["Europe/Berlin", "America/New_York", "Asia/Kolkata"]
        backend.register(
            org: "org1", app: "app1", user: "user0",
            zones.enumerated().map { i, z in
                Device(platform: .ios, token: DeviceToken("tok-\(i)"), user: "user0", timeZone: z)
            })
        let ios = FakePushSender(platform: .ios)
        let w = worker([.ios: ios], clock: clock)
        let j = nineOClockJob("morning")
        try backend.enqueue(j)
        try w.start()
        defer { w.drain(deadline: 1) }
        try await waitUntil("the first delivery acknowledged") { backend.ackedEntries.count == 1 }
        #expect(ios.perToken == ["tok-0": 1] && backend.allReports.isEmpty)
        let newYork = ScheduledTime("2026-11-27T14:00:00Z")!.date
        let kolkata = ScheduledTime("2026-11-28T03:30:00Z")!.date
        #expect(Set(backend.parkedJobs.values) == [newYork, kolkata])

        clock.set(newYork)
        #expect(backend.promote(now: newYork) == 1)
        try await waitUntil("the New York wave acknowledged") { backend.ackedEntries.count == 2 }
        #expect(ios.perToken == ["tok-0": 1, "tok-1": 1] && backend.allReports.isEmpty)

        clock.set(kolkata.addingTimeInterval(0.2))
        #expect(backend.promote(now: kolkata) == 1)
        try await waitUntil("the report") { backend.allReports.count == 1 }
        #expect(ios.perToken == ["tok-0": 1, "tok-1": 1, "tok-2": 1])
        let r = backend.allReports[0]
        #expect(r.job == "morning" && r.devices == 3 && r.accepted == 3 && r.alreadyRecorded == 2)
    }

    /// The zone of a device that registered none comes from its user's directory record (`timeZone` among the
    /// user's attributes, read once per chunk of users), before the org's: Ada's zoneless device waits for Kolkata's
    /// 09:00, her New York device for New York's, and Bob, with no zone anywhere, goes at the org's (Berlin's).
    @Test func aLocalTimeJobPlacesADeviceWithoutAZoneInItsUsersZone() async throws {
        let clock = ManualClock(ScheduledTime("2026-11-27T08:00:05Z")!.date)
        backend.register(
            org: "org1", app: "app1", user: "ada",
            [
                Device(platform: .ios, token: DeviceToken("tok-ada-0"), user: "ada"),
                Device(platform: .ios, token: DeviceToken("tok-ada-1"), user: "ada", timeZone: "America/New_York"),
            ])
        backend.register(
            org: "org1", app: "app1", user: "bob", [Device(platform: .ios, token: DeviceToken("tok-bob"), user: "bob")])
        let attributes = InMemoryUserAttributes()
        attributes.set(org: "org1", user: "ada", ["timeZone": "Asia/Kolkata"])
        let ios = FakePushSender(platform: .ios)
        var c = WorkerConfiguration(
            consumer: "w1", concurrentJobs: 1, inFlight: 100, blockMillis: 20, reclaimIdleMillis: 60_000,
            reclaimIntervalMillis: 60_000, recordBatch: 10, chunkSize: 100)
        c.orgTimeZones = ["org1": TimeZone(identifier: "Europe/Berlin")!]
        let w = PipelineWorker(
            configuration: c, backend: backend, apps: StaticAppDirectory(["app1": [.ios: ios]]),
            resolver: DirectoryRecipientResolver(
                directory: FrequencyCapRunTests.ListDirectory(), inbox: nil, types: nil, attributes: attributes,
                clock: clock),
            clock: clock)
        var j = nineOClockJob("morning")
        j.recipients = ["ada", "bob"]
        try backend.enqueue(j)
        try w.start()
        defer { w.drain(deadline: 1) }
        try await waitUntil("the first delivery acknowledged") { backend.ackedEntries.count == 1 }
        #expect(ios.perToken == ["tok-bob": 1])
        #expect(
            Set(backend.parkedJobs.values) == [
                ScheduledTime("2026-11-27T14:00:00Z")!.date, ScheduledTime("2026-11-28T03:30:00Z")!.date,
            ])
        #expect(attributes.reads >= 1)
    }

    /// Each recipient's inbox entry, unseen count and frequency-cap decision are written at that recipient's wave,
    /// not at the job's first: Berlin's user is stored and counted at once, New York's at New York's 09:00, and
    /// Tokyo's, who has no device, at Tokyo's 09:00 (a wave of its own), so no tray shows the notification hours
    /// before its push. (Before, the first wave stored all three and counted both users with a device.)
    @Test func aLocalTimeJobStoresAndCapsEachRecipientAtTheirOwnWave() async throws {
        let clock = ManualClock(ScheduledTime("2026-11-27T08:00:05Z")!.date)
        backend.register(
            org: "org1", app: "app1", user: "berlin",
            [Device(platform: .ios, token: DeviceToken("tok-b"), user: "berlin", timeZone: "Europe/Berlin")])
        backend.register(
            org: "org1", app: "app1", user: "ny",
            [Device(platform: .ios, token: DeviceToken("tok-ny"), user: "ny", timeZone: "America/New_York")])
        let attributes = InMemoryUserAttributes()
        attributes.set(org: "org1", user: "tokyo", ["timeZone": "Asia/Tokyo"])
        let inbox = FrequencyCapRunTests.RecordingInbox()
        let caps = InMemoryFrequencyCaps()
        var resolver = DirectoryRecipientResolver(
            directory: FrequencyCapRunTests.ListDirectory(), inbox: inbox, types: nil, attributes: attributes,
            clock: clock)
        resolver.frequencyCaps = FrequencyCaps(
            rulebook: FrequencyCapRulebook(
                configured: ["org1": [try FrequencyCapRule.make(window: "30d", max: 10, type: nil, at: "r")]],
                stored: nil, clock: clock),
            store: caps)
        let ios = FakePushSender(platform: .ios)
        let c = WorkerConfiguration(
            consumer: "w1", concurrentJobs: 1, inFlight: 100, blockMillis: 20, reclaimIdleMillis: 60_000,
            reclaimIntervalMillis: 60_000, recordBatch: 10, chunkSize: 100)
        let w = PipelineWorker(
            configuration: c, backend: backend, apps: StaticAppDirectory(["app1": [.ios: ios]]), resolver: resolver,
            clock: clock)
        var j = nineOClockJob("morning")
        j.recipients = ["berlin", "ny", "tokyo"]
        try backend.enqueue(j)
        try w.start()
        defer { w.drain(deadline: 1) }
        func counted(_ user: UserID) -> Int { caps.history(org: "org1", user: user).sends[nil]?.count ?? 0 }

        try await waitUntil("the first delivery acknowledged") { backend.ackedEntries.count == 1 }
        #expect(ios.perToken == ["tok-b": 1])
        #expect(inbox.entries("berlin") == ["morning"] && inbox.entries("ny").isEmpty && inbox.entries("tokyo").isEmpty)
        #expect(counted("berlin") == 1 && counted("ny") == 0)
        let newYork = ScheduledTime("2026-11-27T14:00:00Z")!.date
        let tokyo = ScheduledTime("2026-11-28T00:00:00Z")!.date
        #expect(Set(backend.parkedJobs.values) == [newYork, tokyo])

        clock.set(newYork)
        #expect(backend.promote(now: newYork) == 1)
        try await waitUntil("the New York wave acknowledged") { backend.ackedEntries.count == 2 }
        #expect(ios.perToken == ["tok-b": 1, "tok-ny": 1] && backend.allReports.isEmpty)
        #expect(inbox.entries("ny") == ["morning"] && inbox.entries("tokyo").isEmpty)
        #expect(counted("berlin") == 1 && counted("ny") == 1)

        clock.set(tokyo.addingTimeInterval(0.2))
        #expect(backend.promote(now: tokyo) == 1)
        try await waitUntil("the report") { backend.allReports.count == 1 }
        #expect(inbox.entries("tokyo") == ["morning"] && inbox.entries("berlin") == ["morning"])
        let r = backend.allReports[0]
        #expect(r.devices == 2 && r.accepted == 2 && r.inAppStored == 3 && r.noDevices == 1)
        #expect(counted("berlin") == 1 && counted("ny") == 1 && counted("tokyo") == 0)
    }

    /// The org's zone set through `PUT /v1/time-zone` takes the place of the configuration's: the zoneless device
    /// waits for New York's 09:00 rather than going at Berlin's.
    @Test func theOrgsZoneSetThroughTheAPIReplacesTheConfigurations() async throws {
        let clock = ManualClock(ScheduledTime("2026-11-27T08:00:05Z")!.date)
        backend.register(org: "org1", app: "app1", user: "user0", devices(1))
        backend.setOrgTimeZone("America/New_York", org: "org1")
        let ios = FakePushSender(platform: .ios)
        let w = worker([.ios: ios], clock: clock, orgZone: TimeZone(identifier: "Europe/Berlin")!)
        let j = nineOClockJob("morning")
        try backend.enqueue(j)
        try w.start()
        defer { w.drain(deadline: 1) }
        try await waitUntil("the first delivery acknowledged") { backend.ackedEntries.count == 1 }
        #expect(ios.total == 0)
        #expect(Array(backend.parkedJobs.values) == [ScheduledTime("2026-11-27T14:00:00Z")!.date])
    }

    @Test func aLocalTimeJobCancelledBetweenItsWavesReportsWhatWent() async throws {
        let clock = ManualClock(ScheduledTime("2026-11-27T08:00:05Z")!.date)
        backend.register(
            org: "org1", app: "app1", user: "user0",
            [
                Device(platform: .ios, token: DeviceToken("tok-0"), user: "user0"), // the org's zone: Berlin
                Device(platform: .ios, token: DeviceToken("tok-1"), user: "user0", timeZone: "America/New_York"),
            ])
        let ios = FakePushSender(platform: .ios)
        let w = worker([.ios: ios], clock: clock, orgZone: TimeZone(identifier: "Europe/Berlin")!)
        let j = nineOClockJob("evening")
        try backend.enqueue(j)
        try w.start()
        defer { w.drain(deadline: 1) }
        try await waitUntil("the first delivery acknowledged") { backend.ackedEntries.count == 1 }
        #expect(ios.perToken == ["tok-0": 1])
        backend.cancel(org: "org1", job: "evening")
        clock.set(ScheduledTime("2026-11-27T14:00:00Z")!.date)
        #expect(backend.promote(now: clock.now()) == 1)
        try await waitUntil("the report") { backend.allReports.count == 1 }
        let r = backend.allReports[0]
        #expect(r.status == "cancelled" && r.accepted == 1 && ios.total == 1)
    }
}
