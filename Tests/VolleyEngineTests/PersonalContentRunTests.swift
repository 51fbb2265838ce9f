import Foundation
import Synchronization
import Testing
import VolleyCore
import VolleyEngine
import VolleyTestDoubles
import VolleyTestTags

/// A job whose push is per person, against the in-memory backend: each device is sent its own payload made from
/// what the resolver knows of its user, a device whose payload cannot be made is rejected without a send, the
/// report counts the payloads, and a job whose payload is shared never asks for per-person content.
@Suite(.tags(.unit)) struct PersonalContentRunTests {
    let backend = InMemoryBackend()

    /// The user resolver's chunks, with each user's unseen count set to the length of the user's id (so each user's
    /// badge differs and is known to the test).
    final class CountingResolver: RecipientResolver {
        let needsSeen = Mutex<[RecipientNeeds]>([])
        var shards: (any ShardCoordinator)? { nil }
        func cursor(for job: PushJob, session: any PipelineSession, needs: RecipientNeeds) throws -> any DeviceCursor {
            needsSeen.withLock { $0.append(needs) }
            return Cursor(inner: try UserRecipientResolver(usersPerRead: 2).cursor(for: job, session: session))
        }
        final class Cursor: DeviceCursor {
            let inner: any DeviceCursor
            init(inner: any DeviceCursor) { self.inner = inner }
            var facts: RecipientFacts { inner.facts }
            func next(max: Int) throws -> DeviceChunk? {
                guard var chunk = try inner.next(max: max) else { return nil }
                for d in chunk.devices {
                    if let u = d.user { chunk.recipients[u] = RecipientContext(unseenCount: u.rawValue.count) }
                }
                return chunk
            }
        }
    }

    /// Per device: an APNs payload naming the user and the badge; a user named `broken` has none.
    struct BadgeContent: PersonalContent {
        var needs: RecipientNeeds { RecipientNeeds(unseenCount: true) }
        var tally: PersonalContentTally {
            var t = PersonalContentTally()
            t.encrypted = 5
            return t
        }
        func payload(for device: Device, recipient: RecipientContext) throws(PersonalPayloadError) -> PersonalPayload {
            if device.user == "broken" { throw PersonalPayloadError("InvalidDeviceKey", "the key does not parse") }
            return .apns(Array("\(device.user?.rawValue ?? "-"):\(recipient.unseenCount ?? -1)".utf8))
        }
    }

    struct Planner: PersonalContentPlanner {
        func plan(for job: PushJob, jobID: JobID) throws -> PersonalPlan {
            PersonalPlan(
                notification: job.effectiveNotification,
                content: job.notification.type == nil ? nil : BadgeContent())
        }
    }

    func worker(_ ios: FakePushSender, resolver: CountingResolver) -> PipelineWorker {
        let c = WorkerConfiguration(
            consumer: "w1", concurrentJobs: 1, inFlight: 100, blockMillis: 20, reclaimIdleMillis: 60_000,
            reclaimIntervalMillis: 60_000, maxDeliveries: 5, drainDeadlineSeconds: 1, recordBatch: 10, chunkSize: 100)
        return PipelineWorker(
            configuration: c, backend: backend, apps: StaticAppDirectory(["app1": [.ios: ios]]), resolver: resolver,
            personalContent: Planner())
    }

    func register(_ users: [UserID]) {
        for u in users {
            backend.register(
                org: "org1", app: "app1", user: u,
                (0..<2).map { Device(platform: .ios, token: DeviceToken("tok-\(u)-\($0)"), user: u) })
        }
    }

    @Test func eachDeviceGetsItsUsersOwnPayload() async throws {
        register(["ada", "grace", "broken"])
        let ios = FakePushSender(platform: .ios)
        let resolver = CountingResolver()
        let w = worker(ios, resolver: resolver)
        try w.start()
        defer { w.drain(deadline: 1) }
        try backend.enqueue(
            PushJob(
                id: "p1", org: "org1", app: "app1", recipients: ["ada", "grace", "broken"],
                notification: VolleyCore.Notification(title: "t", type: "0MLdeal")))
        try await waitUntil("the job's report") { !backend.allReports.isEmpty }
        let report = try #require(backend.allReports.first)
        #expect(report.devices == 6 && report.accepted == 4 && report.rejected == 2)
        #expect(report.rejectedByReason == ["InvalidDeviceKey": 2])
        #expect(report.personalContent?.encrypted == 5)
        #expect(resolver.needsSeen.withLock { $0 } == [RecipientNeeds(unseenCount: true)])
        let payloads = ios.personalPayloads
        for user in ["ada", "grace"] {
            for d in 0..<2 {
                #expect(payloads["tok-\(user)-\(d)"] == .apns(Array("\(user):\(user.count)".utf8)))
            }
        }
        // Nothing was sent to the devices whose payload could not be made.
        #expect(ios.perToken["tok-broken-0"] == nil && ios.perToken["tok-broken-1"] == nil)
    }

    @Test func aSharedPayloadAsksForNoRecipientFacts() async throws {
        register(["ada"])
        let ios = FakePushSender(platform: .ios)
        let resolver = CountingResolver()
        let w = worker(ios, resolver: resolver)
        try w.start()
        defer { w.drain(deadline: 1) }
        try backend.enqueue(
            PushJob(
                id: "p2", org: "org1", app: "app1", recipients: ["ada"],
                notification: VolleyCore.Notification(title: "t")))
        try await waitUntil("the job's report") { !backend.allReports.isEmpty }
        let report = try #require(backend.allReports.first)
        #expect(report.accepted == 2 && report.personalContent == nil)
        #expect(resolver.needsSeen.withLock { $0 } == [.none])
        #expect(ios.personalPayloads.isEmpty && ios.total == 2)
    }
}
