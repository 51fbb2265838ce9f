import Foundation
import Logging
import Testing
import VolleyCore
import VolleyEngine
import VolleyRedis
import VolleyStore
import VolleyTestDoubles
import VolleyTestSupport
import VolleyTestTags

@Suite(.serialized, .tags(.integration)) struct ResilienceTests {
    @Test func redisRestartedMidJobLosesNothing() async throws {
        let h = try EngineHarness(persistent: true)
        defer { h.redis.stop() }
        let ios = FakePushSender(platform: .ios, latency: 0.002)
        let android = FakePushSender(platform: .android, latency: 0.002)
        let worker = h.worker(["app1": [.ios: ios, .android: android]]) {
            $0.inFlight = 200
            $0.concurrentJobs = 1
        }
        try worker.start()
        defer { worker.drain(deadline: 1) }
        let devices = explicitDevices(20_000)
        try h.producer.enqueue(
            PushJob(
                id: "big", org: "org1", app: "app1", devices: devices,
                notification: VolleyCore.Notification(title: "t")))
        try await actWhen("4,000 sends") {
            ios.total + android.total > 4_000
        } then: {
            try h.redis.restart()
        }
        try await waitUntil("the report of big", timeout: .seconds(60)) { (try? h.report(for: "big")) != nil }
        let report = try #require(try h.report(for: "big"))
        #expect(report.devices == 20_000)
        #expect(report.accepted == 20_000)
        let ledger = try h.ledger(job: "big")
        #expect(ledger.count == 20_000)
        // Every device was sent at least once; the restart cannot cause a resend (outcomes are held until recorded).
        var sent = ios.perToken
        sent.merge(android.perToken) { $0 + $1 }
        #expect(sent.count == 20_000)
        #expect(sent.values.allSatisfy { $0 == 1 })
        try await waitUntil("no pending stream entries") { (try? h.producer.pendingCount()) == 0 }
    }

    @Test func drainLeavesUnfinishedJobPendingForAnotherWorker() async throws {
        let h = try EngineHarness()
        defer { h.redis.stop() }
        // Worker 1 is slow: 2,000 devices at 50 in flight × 20 ms ≈ 0.8 s; it drains after a 0.2 s deadline.
        let slowI = FakePushSender(platform: .ios, latency: 0.02)
        let slowA = FakePushSender(platform: .android, latency: 0.02)
        let w1 = h.worker(["app1": [.ios: slowI, .android: slowA]], consumer: "w1") {
            $0.inFlight = 50
            $0.concurrentJobs = 1
            $0.recordBatch = 20
        }
        try w1.start()
        try h.producer.enqueue(
            PushJob(
                id: "quick", org: "org1", app: "app1", devices: explicitDevices(4, prefix: "q"),
                notification: VolleyCore.Notification(title: "t")))
        try await waitUntil("the report of quick") { (try? h.report(for: "quick")) != nil }
        try h.producer.enqueue(
            PushJob(
                id: "drained", org: "org1", app: "app1", devices: explicitDevices(2_000),
                notification: VolleyCore.Notification(title: "t")))
        var drained = false
        try await actWhen("100 sends of the slow job") {
            slowI.total + slowA.total > 100
        } then: {
            drained = w1.drain(deadline: 0.2)
        }
        #expect(drained)
        let firstSends = slowI.total + slowA.total - 4 // minus the quick job's 4 devices
        #expect(firstSends < 2_000)
        #expect(try h.report(for: "drained") == nil) // not acked, no report
        #expect(try h.producer.pendingCount() == 1)
        let recordedByFirst = try h.ledger(job: "drained").count
        #expect(recordedByFirst == firstSends) // everything that finished was recorded

        let fastI = FakePushSender(platform: .ios)
        let fastA = FakePushSender(platform: .android)
        let w2 = h.worker(["app1": [.ios: fastI, .android: fastA]], consumer: "w2") {
            $0.reclaimIdleMillis = 200
            $0.reclaimIntervalMillis = 50
        }
        try w2.start()
        defer { w2.drain(deadline: 1) }
        try await waitUntil("the report of drained") { (try? h.report(for: "drained")) != nil }
        let report = try #require(try h.report(for: "drained"))
        #expect(report.accepted == 2_000)
        #expect(report.alreadyRecorded == recordedByFirst)
        #expect(fastI.total + fastA.total == 2_000 - recordedByFirst) // no duplicates after a graceful drain
        #expect(try h.ledger(job: "drained").count == 2_000)
    }

    @Test func redisStalledMidCampaignSendsEveryDeviceOnce() async throws {
        let h = try EngineHarness()
        defer { h.redis.stop() }
        // 4,000 users in one group, one device each, resolved 100 users at a time.
        try h.register(users: 4_000, devicesPerUser: 1)
        let log = CapturedLog()
        // Every client times out after 0.3 s: the stall outlasts it, as a 10.5 s stall outlasts the default 10 s, so
        // commands in flight when it begins are sent again once Redis answers.
        let options = RedisClient.Options(
            connectTimeout: 0.3, commandTimeout: 0.3, initialBackoff: 0.02, maxBackoff: 0.1, giveUpAfter: 30)
        let directory = RedisDirectory(
            client: RedisClient(endpoint: h.redis.endpoint, options: options, name: "dir", logger: log.logger))
        var records = (0..<4_000).map { DirectoryRecord(org: "org1", kind: .user, id: RecipientID("user\($0)")) }
        records.append(
            DirectoryRecord(
                org: "org1", kind: .group, id: "all", members: (0..<4_000).map { RecipientID("user\($0)") }))
        try directory.importRecords(records)
        let ios = FakePushSender(platform: .ios, latency: 0.002)
        let android = FakePushSender(platform: .android, latency: 0.002)
        let c = WorkerConfiguration(
            consumer: "w1", concurrentJobs: 1, inFlight: 200, blockMillis: 100, reclaimIdleMillis: 60_000,
            reclaimIntervalMillis: 200, maxDeliveries: 5, drainDeadlineSeconds: 5, recordBatch: 100, chunkSize: 100)
        let worker = PipelineWorker(
            configuration: c,
            backend: RedisPipelineBackend(
                endpoint: h.redis.endpoint, store: h.store, consumer: "w1", options: options, logger: log.logger),
            apps: StaticAppDirectory(["app1": [.ios: ios, .android: android]]),
            resolver: DirectoryRecipientResolver(directory: directory, inbox: nil, types: nil, usersPerRead: 100))
        try worker.start()
        defer { worker.drain(deadline: 1) }
        try h.producer.enqueue(
            PushJob(
                id: "stall", org: "org1", app: "app1", recipients: ["all"],
                notification: VolleyCore.Notification(title: "t")))
        try await actWhen("1,000 sends") {
            ios.total + android.total > 1_000
        } then: {
            h.redis.pause()
        }
        try await actWhen("a command timed out in the stall") {
            log.contains("redis connection lost")
        } then: {
            h.redis.resume()
        }
        try await waitUntil("the report of stall", timeout: .seconds(60)) { (try? h.report(for: "stall")) != nil }
        let report = try #require(try h.report(for: "stall"))
        #expect(report.users == 4_000 && report.devices == 4_000 && report.accepted == 4_000)
        #expect(report.deliveries == 1, "the delivery did not give up")
        var sent = ios.perToken
        sent.merge(android.perToken) { $0 + $1 }
        #expect(sent.count == 4_000)
        #expect(sent.values.allSatisfy { $0 == 1 }, "no device was sent twice")
        #expect(try h.ledger(job: "stall").count == 4_000)
        try await waitUntil("no pending stream entries") { (try? h.producer.pendingCount()) == 0 }
    }
}
