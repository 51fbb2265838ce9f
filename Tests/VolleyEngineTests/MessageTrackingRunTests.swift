import Foundation
import Testing
import VolleyCore
import VolleyEngine
import VolleyTestDoubles
import VolleyTestTags

/// Which deliveries carry message ids, against the in-memory backend: a visible push is prepared with its job's ids
/// and the campaign mapped to the job its interactions count for (a shard's parent, with the shard's own in-app
/// entry), once before anything is sent; `"tracking": false`, a silent push and a worker without a tracking store
/// carry none and register nothing.
@Suite(.tags(.unit)) struct MessageTrackingRunTests {
    let backend = InMemoryBackend()

    func run(_ job: PushJob, tracking: InMemoryEngagement?) async throws -> FakePushSender {
        backend.register(
            org: "org1", app: "app1", user: "ada", [Device(platform: .ios, token: DeviceToken("tok-ada"), user: "ada")])
        let ios = FakePushSender(platform: .ios)
        let c = WorkerConfiguration(
            consumer: "w1", concurrentJobs: 1, inFlight: 10, blockMillis: 20, reclaimIdleMillis: 60_000,
            reclaimIntervalMillis: 60_000, maxDeliveries: 5, drainDeadlineSeconds: 1, recordBatch: 10, chunkSize: 10)
        let w = PipelineWorker(configuration: c, backend: backend, apps: StaticAppDirectory(["app1": [.ios: ios]]))
        w.messageTracking = tracking
        try w.start()
        defer { w.drain(deadline: 1) }
        try backend.enqueue(job)
        try await waitUntil("the job's report") { !backend.allReports.isEmpty }
        return ios
    }

    func job(_ id: JobID, _ n: VolleyCore.Notification = .init(title: "Sale")) -> PushJob {
        PushJob(id: id, org: "org1", app: "app1", recipients: ["ada"], notification: n)
    }

    @Test func aVisiblePushIsTrackedAndItsCampaignMapped() async throws {
        let store = InMemoryEngagement()
        let ios = try await run(job("c-1"), tracking: store)
        let expected = MessageTracking(org: "org1", job: "c-1")
        #expect(ios.preparedTracking == [expected])
        #expect(
            store.mapping(org: "org1", campaign: expected.campaign)
                == InMemoryEngagement.Mapping(job: "c-1", app: "app1", inbox: "c-1"))
    }

    @Test func aShardCountsIntoItsCampaignWithItsOwnEntry() async throws {
        let store = InMemoryEngagement()
        var shard = job("c-2.s1")
        shard.shard = ShardRef(parent: "c-2", index: 1, count: 2)
        shard.notificationId = nil
        let ios = try await run(shard, tracking: store)
        let expected = MessageTracking(org: "org1", job: "c-2.s1")
        #expect(ios.preparedTracking == [expected])
        #expect(store.mapping(org: "org1", campaign: expected.campaign)?.job == "c-2")
        #expect(store.mapping(org: "org1", campaign: expected.campaign)?.inbox == "c-2.s1")
    }

    @Test(arguments: ["off", "silent", "no store"])
    func untrackedDeliveriesCarryNoIDs(_ why: String) async throws {
        let store = InMemoryEngagement()
        var j = job("c-3", why == "silent" ? .init(contentAvailable: true) : .init(title: "Sale"))
        if why == "off" { j.tracking = false }
        let ios = try await run(j, tracking: why == "no store" ? nil : store)
        #expect(ios.preparedTracking == [nil])
        #expect(store.mapping(org: "org1", campaign: MessageTracking(org: "org1", job: "c-3").campaign) == nil)
    }
}
