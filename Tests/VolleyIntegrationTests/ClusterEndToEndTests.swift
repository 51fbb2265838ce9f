import Foundation
import Logging
import Testing
import VolleyCore
import VolleyEngine
import VolleyRedis
import VolleyService
import VolleyStore
import VolleyTestDoubles
import VolleyTestSupport
import VolleyTestTags

/// A campaign through a real worker and the real mock, with every Redis command routed on a real Redis Cluster
/// (3 primaries, 3 replicas).
@Suite(.serialized, .tags(.integration)) struct ClusterEndToEndTests {
    @Test func campaignsOfTwoOrgsRunOnACluster() async throws {
        let cluster = try RedisClusterFixture()
        defer { cluster.stop() }
        let mock = try MockServerFixture(
            configuration: #"{"apns": {"unregisteredPrefixes": ["dead"]}, "fcm": {"unregisteredPrefixes": ["dead"]}}"#)
        defer { mock.stop() }
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent(
            "volley-cl-\(UUID().uuidString.prefix(8))")
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: dir) }
        var local = LocalConfiguration(
            mockHost: mock.host, mockPort: mock.port, caFile: mock.caFile,
            apnsKeyFile: mock.apnsKeyFile, apnsKeyID: mock.apnsKeyID, apnsTeamID: mock.apnsTeamID,
            apnsTopic: mock.apnsTopic, serviceAccountFile: mock.serviceAccountFile,
            redisURL: "redis://127.0.0.1:\(cluster.ports[0])")
        local.appName = "app1"
        let configPath = dir.appendingPathComponent("volley.yaml").path
        try local.write(to: configPath)
        var logger = Logger(label: "cluster-e2e")
        logger.logLevel = .warning
        let apps = try PipelineApps.directory(configFile: configPath, logger: logger)
        defer { apps.shutdown() }

        var store = StoreConfiguration()
        store.waitReplicas = 1 // every record and ack waits for the replica
        let options = RedisClient.Options(giveUpAfter: 30)
        let producer = JobProducer(client: cluster.client(name: "producer"), store: store)
        let admin = RedisPipelineBackend(endpoint: cluster.endpoint, store: store, consumer: "admin", options: options)
            .makeRedisSession(name: "admin")
        // Two orgs (two slots, most likely two primaries), 150 users × 2 devices each; every 10th token is
        // unregistered at the mock.
        let orgs: [OrgID] = ["org-a", "org-b"]
        var records: [DeviceImportRecord] = []
        for (o, org) in orgs.enumerated() {
            for u in 0..<150 {
                for d in 0..<2 {
                    let n = u * 2 + d
                    let token =
                        (n % 10 == 0 ? "dead" : "beef") + String(format: "%08x%02x%02x", u, d, o)
                        + String(repeating: "0", count: 52)
                    records.append(
                        DeviceImportRecord(
                            org: org, app: "app1", user: UserID("user\(u)"), platform: n % 3 == 0 ? .android : .ios,
                            token: DeviceToken(token)))
                }
            }
        }
        try admin.register(records)

        let worker = PipelineWorker(
            configuration: WorkerConfiguration(consumer: "cl", inFlight: 300, blockMillis: 100, recordBatch: 50),
            backend: RedisPipelineBackend(endpoint: cluster.endpoint, store: store, consumer: "cl", options: options),
            apps: apps)
        try worker.start()
        defer { worker.drain(deadline: 2) }
        for org in orgs {
            try producer.enqueue(
                PushJob(
                    id: JobID("c-\(org)"), org: org, app: "app1",
                    recipients: (0..<150).map { RecipientID("user\($0)") },
                    notification: VolleyCore.Notification(title: "Hello", body: "Cluster")))
        }
        func reports() -> [JobReport] { (try? producer.allReports()) ?? [] }
        try await waitUntil("the reports of both orgs' jobs", timeout: .seconds(60)) { reports().count >= 2 }
        let all = reports()
        #expect(all.count == 2) // one report per job
        for org in orgs {
            let r = try #require(all.first { $0.job == JobID("c-\(org)") })
            #expect(r.devices == 300)
            #expect(r.accepted == 270)
            #expect(r.rejected == 30)
            #expect(r.tokensRemoved == 30)
            let ledger = try admin.client.checked(["HLEN", store.ledgerKey(org, r.job)]).integer
            #expect(ledger == 32) // 30 rejected + _report + _published
        }
        let s = mock.stats()
        #expect(s.acceptedAPNs + s.acceptedFCM == 540)
        #expect(s.duplicateDeliveries == 0)
        #expect(try admin.counts(org: "org-a", app: "app1").devices == 270)
    }
}

/// The cluster changes under a running campaign: a primary dies and its replica is promoted, or the org's slot moves
/// to another primary; the worker carries on.
@Suite(.serialized, .tags(.integration)) struct ClusterFailoverTests {
    @Test func aPrimaryKilledMidCampaignLosesNoDevice() async throws {
        let cluster = try RedisClusterFixture()
        defer { cluster.stop() }
        let store = StoreConfiguration()
        let producer = JobProducer(client: cluster.client(name: "producer"), store: store)
        let ios = FakePushSender(platform: .ios, latency: 0.002)
        let android = FakePushSender(platform: .android, latency: 0.002)
        let config = WorkerConfiguration(
            consumer: "fo", concurrentJobs: 1, inFlight: 200, blockMillis: 100, reclaimIdleMillis: 60_000,
            reclaimIntervalMillis: 200, recordBatch: 100, chunkSize: 250)
        let worker = PipelineWorker(
            configuration: config,
            backend: RedisPipelineBackend(endpoint: cluster.endpoint, store: store, consumer: "fo"),
            apps: StaticAppDirectory(["app1": [.ios: ios, .android: android]]))
        try worker.start()
        defer { worker.drain(deadline: 1) }
        let devices = explicitDevices(6_000)
        try producer.enqueue(
            PushJob(
                id: "failover", org: "org1", app: "app1", devices: devices,
                notification: VolleyCore.Notification(title: "t")))
        // The primary holding the org's registry and ledger crashes.
        let victim = try cluster.primaryPort(of: RedisClusterSlot(key: "org1"))
        try await actWhen("1,000 sends") {
            ios.total + android.total > 1_000
        } then: {
            cluster.kill(port: victim)
        }
        try await waitUntil("the report of failover", timeout: .seconds(90)) {
            (try? producer.allReports().first { $0.job == "failover" }) != nil
        }
        let report = try #require(try producer.allReports().first { $0.job == "failover" })
        #expect(report.devices == 6_000)
        #expect(report.accepted == 6_000)
        #expect(try cluster.primaryPort(of: RedisClusterSlot(key: "org1")) != victim) // the replica took over
        // Every device was sent; a resend stays within the worker's in-flight window.
        var sent = ios.perToken
        sent.merge(android.perToken) { $0 + $1 }
        #expect(sent.count == 6_000)
        let resent = sent.values.reduce(0) { $0 + $1 - 1 }
        #expect(resent <= config.inFlight + config.recordBatch)
        try await waitUntil("no pending stream entries", timeout: .seconds(30)) { (try? producer.pendingCount()) == 0 }
    }

    @Test func aSlotReshardedMidCampaignLosesNoDevice() async throws {
        let cluster = try RedisClusterFixture()
        defer { cluster.stop() }
        let store = StoreConfiguration()
        let producer = JobProducer(client: cluster.client(name: "producer"), store: store)
        let ios = FakePushSender(platform: .ios, latency: 0.002)
        let android = FakePushSender(platform: .android, latency: 0.002)
        let config = WorkerConfiguration(
            consumer: "rs", concurrentJobs: 1, inFlight: 200, blockMillis: 100, reclaimIdleMillis: 60_000,
            reclaimIntervalMillis: 200, recordBatch: 100, chunkSize: 250)
        let worker = PipelineWorker(
            configuration: config,
            backend: RedisPipelineBackend(endpoint: cluster.endpoint, store: store, consumer: "rs"),
            apps: StaticAppDirectory(["app1": [.ios: ios, .android: android]]))
        try worker.start()
        defer { worker.drain(deadline: 1) }
        try producer.enqueue(
            PushJob(
                id: "reshard", org: "org1", app: "app1", devices: explicitDevices(6_000),
                notification: VolleyCore.Notification(title: "t")))
        // The org's slot moves to another primary while the job writes its ledger there (ASK during the move,
        // MOVED after it).
        let slot = RedisClusterSlot(key: "org1")
        let source = try cluster.primaryPort(of: slot)
        let target = try #require(try cluster.primaryPorts().first { $0 != source })
        try await actWhen("1,000 sends") {
            ios.total + android.total > 1_000
        } then: {
            _ = try cluster.beginMigration(slot, to: target)
        }
        try await actWhen("2,500 sends") {
            ios.total + android.total > 2_500
        } then: {
            try cluster.finishMigration(slot, from: source, to: target)
        }
        try await waitUntil("the report of reshard", timeout: .seconds(60)) {
            (try? producer.allReports().first { $0.job == "reshard" }) != nil
        }
        let report = try #require(try producer.allReports().first { $0.job == "reshard" })
        #expect(report.devices == 6_000)
        #expect(report.accepted == 6_000)
        #expect(try cluster.primaryPort(of: slot) == target)
        var sent = ios.perToken
        sent.merge(android.perToken) { $0 + $1 }
        #expect(sent.count == 6_000)
        #expect(sent.values.allSatisfy { $0 == 1 }) // no crash: nothing is sent twice
        try await waitUntil("no pending stream entries", timeout: .seconds(30)) { (try? producer.pendingCount()) == 0 }
    }
}
