import Foundation
import Testing
import VolleyCore
import VolleyEngine
import VolleyTestDoubles
import VolleyTestTags

/// The steps of a delivery (accept, send chunk by chunk, await, publish and acknowledge; dead-letter; abandon on
/// drain) against the in-memory backend: no Redis, no provider, only the engine's own threads.
@Suite(.tags(.unit)) struct JobRunStepTests {
    let backend = InMemoryBackend()

    func worker(
        _ senders: [Platform: any PushSender], drainSeconds: Double = 1,
        resolver: any RecipientResolver = UserRecipientResolver()
    ) -> PipelineWorker {
        let c = WorkerConfiguration(
            consumer: "w1", concurrentJobs: 1, inFlight: 100, blockMillis: 20,
            reclaimIdleMillis: 60_000, reclaimIntervalMillis: 60_000, maxDeliveries: 5,
            drainDeadlineSeconds: drainSeconds, recordBatch: 10, chunkSize: 100)
        return PipelineWorker(
            configuration: c, backend: backend, apps: StaticAppDirectory(["app1": senders]), resolver: resolver)
    }

    func devices(_ n: Int, user: UserID = "user0") -> [Device] {
        (0..<n).map { Device(platform: .ios, token: DeviceToken("tok-\(user)-\($0)"), user: user) }
    }

    func job(_ id: JobID, recipients: [RecipientID] = ["user0"]) -> PushJob {
        PushJob(
            id: id, org: "org1", app: "app1", recipients: recipients,
            notification: VolleyCore.Notification(title: "t", body: "b"))
    }

    @Test func firstDeliverySendsEveryDevicePublishesThenAcknowledges() async throws {
        backend.register(org: "org1", app: "app1", user: "user0", devices(3))
        let ios = FakePushSender(platform: .ios)
        let w = worker([.ios: ios])
        try w.start()
        defer { w.drain(deadline: 1) }
        let entry = try backend.enqueue(job("j1"))
        try await waitUntil("the job's entry acknowledged") { backend.ackedEntries == [entry] }
        let report = try #require(backend.allReports.first)
        #expect(report.accepted == 3 && report.devices == 3 && report.deliveries == 1)
        #expect(ios.total == 3)
        #expect(backend.outcomes(org: "org1", job: "j1").count == 3)
        // A first delivery with no ledger never looks outcomes up.
        #expect(backend.lookups == 0)
    }

    @Test func redeliverySendsOnlyWhatIsNotRecorded() async throws {
        let all = devices(3)
        backend.register(org: "org1", app: "app1", user: "user0", all)
        backend.seedLedger(
            org: "org1", job: "j2",
            [
                (all[0], .accepted), (all[1], .rejected(status: 410, reason: "Unregistered", action: .removeToken)),
            ])
        let ios = FakePushSender(platform: .ios)
        let w = worker([.ios: ios])
        try w.start()
        defer { w.drain(deadline: 1) }
        try backend.enqueue(job("j2"))
        try await waitUntil("the job's report") { !backend.allReports.isEmpty }
        let report = try #require(backend.allReports.first)
        #expect(Set(ios.perToken.keys) == [all[2].token.rawValue])
        #expect(report.alreadyRecorded == 2 && report.accepted == 2 && report.rejected == 1)
        #expect(backend.lookups > 0)
    }

    @Test func reportedBeforeTheAckIsAcknowledgedWithoutSending() async throws {
        backend.register(org: "org1", app: "app1", user: "user0", devices(3))
        var earlier = JobReport(job: "j3", entry: nil, org: "org1", app: "app1", startedAt: Date())
        earlier.accepted = 3
        backend.seedReport(earlier)
        let ios = FakePushSender(platform: .ios)
        let w = worker([.ios: ios])
        try w.start()
        defer { w.drain(deadline: 1) }
        let entry = try backend.enqueue(job("j3"))
        try await waitUntil("the job's entry acknowledged") { backend.ackedEntries == [entry] }
        #expect(ios.total == 0)
        #expect(backend.allReports.isEmpty)
        #expect(w.stats.jobsCompleted == 1)
    }

    @Test func badEntryIsDeadLetteredAndTheNextJobCompletes() async throws {
        backend.register(org: "org1", app: "app1", user: "user0", devices(2))
        let ios = FakePushSender(platform: .ios)
        let w = worker([.ios: ios])
        try w.start()
        defer { w.drain(deadline: 1) }
        let bad = backend.enqueue(fields: [
            "job": #"{"org": "org1", "app": "app1", "recipients": ["user0"], "#
                + #""notification": {"title": "t"}, "schedule": "tomorrow"}"#
        ])
        let good = try backend.enqueue(job("j4"))
        try await waitUntil("both entries acknowledged") { backend.ackedEntries.count == 2 }
        let dead = try #require(backend.deadLettered.first)
        #expect(dead.entry.entryID == bad && dead.reason == .invalidJob && dead.detail.contains("'schedule'"))
        #expect(backend.ackedEntries.contains(good) && backend.allReports.map(\.job) == ["j4"])
        #expect(w.stats.jobsDeadLettered == 1 && w.stats.jobsCompleted == 1)
    }

    @Test func drainLeavesAnUnfinishedJobPendingWithItsOutcomesRecorded() async throws {
        let all = devices(10)
        backend.register(org: "org1", app: "app1", user: "user0", all)
        // The first four answer; the provider never answers the rest.
        let answered = Set(all.prefix(4).map(\.token))
        let sender = PartlyAnsweringSender(answered: answered)
        let w = worker([.ios: sender], drainSeconds: 0.2)
        try w.start()
        let entry = try backend.enqueue(job("j5"))
        // Outcomes are recorded in batches of 10: these four wait in the lane's mailbox until the drain.
        try await waitUntil("10 sends, 4 answered") { sender.sent == 10 && sender.answeredCount == 4 }
        w.drain()
        #expect(backend.pendingCount == 1 && !backend.ackedEntries.contains(entry))
        #expect(backend.allReports.isEmpty)
        #expect(Set(backend.outcomes(org: "org1", job: "j5").keys) == Set(all.prefix(4).map(InMemoryBackend.field)))
        #expect(w.stats.jobsAbandoned == 1)
    }
}

extension JobRunStepTests {
    @Test func aDeliveryThatFailsRecordsTheOutcomesItHoldsBeforeItGivesUp() async throws {
        // One user per chunk: user0's four devices are sent, then reading user1's devices fails.
        backend.register(org: "org1", app: "app1", user: "user0", devices(4, user: "user0"))
        backend.register(org: "org1", app: "app1", user: "user1", devices(4, user: "user1"))
        backend.failDeviceReads(after: 1, "HVALS devices: OOM command not allowed")
        let sender = PartlyAnsweringSender(answered: Set(devices(4, user: "user0").map(\.token)))
        let w = worker([.ios: sender], drainSeconds: 30, resolver: UserRecipientResolver(usersPerRead: 1))
        try w.start()
        defer { w.drain(deadline: 1) }
        let entry = try backend.enqueue(job("j6", recipients: ["user0", "user1"]))
        try await waitUntil("the delivery given up") { w.stats.jobsAbandoned == 1 }
        // Outcomes are recorded in batches of 10: the four answers were held in the lane's mailbox, and are recorded
        // before the entry is left pending, so its redelivery does not send them again.
        #expect(
            Set(backend.outcomes(org: "org1", job: "j6").keys)
                == Set(devices(4, user: "user0").map(InMemoryBackend.field)))
        #expect(sender.sent == 4)
        #expect(backend.pendingCount == 1 && !backend.ackedEntries.contains(entry) && backend.allReports.isEmpty)
    }
}

/// Answers `accepted` for the tokens in `answered` and never answers the others (a provider gone silent).
final class PartlyAnsweringSender: PushSender, @unchecked Sendable {
    struct Prepared: PreparedNotification {
        var platform: Platform { .ios }
        var payloadBytes: Int { 0 }
    }
    let platform = Platform.ios
    let answered: Set<DeviceToken>
    private let lock = NSLock()
    private var count = 0
    private var answers = 0
    init(answered: Set<DeviceToken>) { self.answered = answered }
    var sent: Int { lock.withLock { count } }
    /// Answers handed to the receiver so far.
    var answeredCount: Int { lock.withLock { answers } }

    func prepare(_ notification: VolleyCore.Notification, jobID: JobID, tracking: MessageTracking?) throws
        -> any PreparedNotification
    {
        Prepared()
    }

    func personalized(
        _ prepared: any PreparedNotification, for device: Device, with payload: PersonalPayload
    ) throws(PersonalPayloadError) -> any PreparedNotification {
        prepared
    }

    func send(_ prepared: any PreparedNotification, to device: Device, jobID: JobID, receiver: any DeliveryReceiver) {
        lock.withLock { count += 1 }
        if answered.contains(device.token) {
            DispatchQueue.global().async { [self] in
                receiver.delivered(device, .accepted)
                lock.withLock { answers += 1 }
            }
        }
    }
}
