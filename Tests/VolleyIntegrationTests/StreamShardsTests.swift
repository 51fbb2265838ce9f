import Foundation
import Logging
import Testing
import VolleyCore
import VolleyEngine
import VolleyMock
import VolleyRedis
import VolleyService
import VolleyStore
import VolleyTestDoubles
import VolleyTestSupport
import VolleyTestTags

/// Job stream shards (`worker.streamShards` = 3): a campaign split into campaign shard jobs runs through real
/// workers to the real mock, on one redis-server and on a real Redis Cluster.
@Suite(.serialized, .tags(.integration)) struct StreamShardsTests {
    /// One sharded campaign: `users` users with one device each (every 10th token unregistered at the mock), in a
    /// directory group split into campaign shards of `campaignShardSize` users, worked on by `workers` workers.
    struct Campaign {
        var users: Int
        var campaignShardSize: Int
        var workers: Int
    }

    struct Outcome {
        var report: JobReport
        var campaignShardReports: [JobReport]
        var mock: MockStatsSnapshot
        /// Entries on each job stream shard after the run.
        var lengths: [Int]
        /// The job ids the run enqueued: the campaign and its campaign shard jobs.
        var jobIDs: [JobID]
    }

    static func run(
        _ campaign: Campaign, endpoint: RedisEndpoint, redisURL: String, store: StoreConfiguration,
        client: (String) -> RedisClient, mock: MockServerFixture,
        beforeWaiting: (JobProducer) throws -> Void = { _ in }
    ) async throws -> Outcome {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent(
            "volley-shards-\(UUID().uuidString.prefix(8))")
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: dir) }
        var local = LocalConfiguration(
            mockHost: mock.host, mockPort: mock.port, caFile: mock.caFile,
            apnsKeyFile: mock.apnsKeyFile, apnsKeyID: mock.apnsKeyID, apnsTeamID: mock.apnsTeamID,
            apnsTopic: mock.apnsTopic, serviceAccountFile: mock.serviceAccountFile, redisURL: redisURL)
        local.appName = "app1"
        let configPath = dir.appendingPathComponent("volley.yaml").path
        try local.write(to: configPath)
        var logger = Logger(label: "stream-shards")
        logger.logLevel = .warning
        let apps = try PipelineApps.directory(configFile: configPath, logger: logger)
        defer { apps.shutdown() }

        let options = RedisClient.Options(giveUpAfter: 30)
        let admin = RedisPipelineBackend(endpoint: endpoint, store: store, consumer: "admin", options: options)
            .makeRedisSession(name: "admin")
        var records: [DeviceImportRecord] = []
        for u in 0..<campaign.users {
            let token = (u % 10 == 0 ? "dead" : "beef") + String(format: "%08x", u) + String(repeating: "0", count: 52)
            records.append(
                DeviceImportRecord(
                    org: "org1", app: "app1", user: UserID("user\(u)"), platform: u % 3 == 0 ? .android : .ios,
                    token: DeviceToken(token)))
        }
        try admin.register(records)
        try RedisDirectory(client: client("directory")).importRecords([
            DirectoryRecord(
                org: "org1", kind: .group, id: "all", members: (0..<campaign.users).map { RecipientID("user\($0)") })
        ])

        var workers: [PipelineWorker] = []
        for i in 0..<campaign.workers {
            let resolver = DirectoryRecipientResolver(
                directory: RedisDirectory(client: client("w\(i)-dir")), inbox: nil, types: nil,
                shards: RedisShardCoordinator(client: client("w\(i)-shards"), store: store),
                shardSize: campaign.campaignShardSize, usersPerRead: 100)
            let worker = PipelineWorker(
                configuration: WorkerConfiguration(
                    consumer: "w\(i)", concurrentJobs: 2, inFlight: 200, blockMillis: 100, recordBatch: 50),
                backend: RedisPipelineBackend(endpoint: endpoint, store: store, consumer: "w\(i)", options: options),
                apps: apps, resolver: resolver)
            try worker.start()
            workers.append(worker)
        }
        defer { for w in workers { w.drain(deadline: 2) } }

        let producer = JobProducer(client: client("producer"), store: store)
        try producer.enqueue(
            PushJob(
                id: "camp", org: "org1", app: "app1", recipients: ["all"],
                notification: VolleyCore.Notification(title: "Hello", body: "Shards")))
        try beforeWaiting(producer)
        try await waitUntil("the campaign's report", timeout: .seconds(90)) {
            (try? producer.allReports().contains { $0.job == "camp" }) == true
        }
        try await waitUntil("no pending entries", timeout: .seconds(30)) { (try? producer.pendingCount()) == 0 }
        let reports = try producer.allReports()
        let report = try #require(reports.first { $0.job == "camp" })
        let count = (campaign.users + campaign.campaignShardSize - 1) / campaign.campaignShardSize
        let shardJobs = (0..<count).map { ShardRef(parent: "camp", index: $0, count: count).jobID }
        return Outcome(
            report: report, campaignShardReports: reports.filter { shardJobs.contains($0.job) },
            mock: mock.stats(), lengths: try producer.jobStreamLengths(), jobIDs: ["camp"] + shardJobs)
    }

    /// What every run must show: one report each, exact counts, each device sent once, and every job on the job
    /// stream shard of its id (so more than one shard holds jobs). `others`: shards of other entries the test added.
    static func check(_ o: Outcome, _ campaign: Campaign, store: StoreConfiguration, others: [Int] = []) {
        let dead = (campaign.users + 9) / 10
        #expect(o.report.shards == o.jobIDs.count - 1)
        #expect(o.report.users == campaign.users && o.report.devices == campaign.users)
        #expect(o.report.accepted == campaign.users - dead && o.report.rejected == dead)
        #expect(o.report.tokensRemoved == dead)
        #expect(o.campaignShardReports.count == o.jobIDs.count - 1) // one report per campaign shard job
        #expect(o.mock.acceptedAPNs + o.mock.acceptedFCM == campaign.users - dead)
        #expect(o.mock.duplicateDeliveries == 0)
        var expected = [Int](repeating: 0, count: store.streamShards)
        for id in o.jobIDs { expected[store.streamShard(of: id)] += 1 }
        for shard in others { expected[shard] += 1 }
        #expect(o.lengths == expected)
        #expect(expected.filter { $0 > 0 }.count > 1, "jobs on shards \(expected)")
    }

    @Test func aCampaignRunsOverThreeStreamShardsOfOneRedis() async throws {
        let h = try EngineHarness(streamShards: 3)
        defer { h.redis.stop() }
        let mock = try MockServerFixture(
            configuration: #"{"apns": {"unregisteredPrefixes": ["dead"]}, "fcm": {"unregisteredPrefixes": ["dead"]}}"#)
        defer { mock.stop() }
        let campaign = Campaign(users: 600, campaignShardSize: 100, workers: 2)
        var malformed: StreamEntryID?
        let o = try await Self.run(
            campaign, endpoint: h.redis.endpoint, redisURL: h.redis.url, store: h.store,
            client: { h.redis.client(name: $0) }, mock: mock
        ) { producer in
            malformed = try producer.enqueueRaw(fields: ["job": "{not json"], shard: 2)
        }
        Self.check(o, campaign, store: h.store, others: [2])
        #expect(try h.producer.allReports().count == o.jobIDs.count)
        // Each report is on the report stream shard of its job id.
        for id in o.jobIDs {
            let onShard = try h.admin.client.checked(["XRANGE", h.store.reportStream(for: id), "-", "+"])
            let jobs = (onShard.array ?? []).compactMap { $0.array?.last?.fieldPairs.first { $0.0 == "job" }?.1 }
            #expect(jobs.contains(id.rawValue), "\(id) not on \(h.store.reportStream(for: id))")
        }

        // The malformed job's dead letter is on its own shard's dead-letter stream, and status counts it.
        let entry = try #require(malformed)
        try await waitUntil("one dead letter on shard 2") { ((try? h.producer.deadLetters(shard: 2)) ?? []).count == 1 }
        let dead = try h.producer.deadLetters(shard: 2)
        #expect(dead.first?["sourceEntry"] == entry.rawValue && dead.first?["reason"] == "invalid-json")
        #expect(try h.producer.deadLetters(shard: 0).isEmpty && h.producer.deadLetters(shard: 1).isEmpty)
        let status = try RedisFleetStatus(client: h.redis.client(name: "status"), store: h.store, quota: nil).read()
        #expect(status.deadLettersLastHour == ["invalid-json": 1])
        #expect(status.shards.map(\.name) == h.store.jobStreams)
        #expect(status.shards.map(\.length) == o.lengths)
        #expect(status.stream.length == o.jobIDs.count + 1 && status.stream.pending == 0 && status.stream.lag == 0)
        #expect(status.lastMinute.jobs == o.jobIDs.count)
        #expect(Set(status.consumers.map(\.name)) == ["w0", "w1"])
    }

    /// The reader's session: a busy shard does not starve the others, each entry is acknowledged, reclaimed and
    /// kept alive on its own shard, and a shard whose group vanished gets it back.
    @Test func eachShardIsReadInTurnAndEntriesStayOnTheirShard() async throws {
        let h = try EngineHarness(streamShards: 3)
        defer { h.redis.stop() }
        let backend = RedisPipelineBackend(endpoint: h.redis.endpoint, store: h.store, consumer: "a")
        let a = backend.makeRedisSession(name: "a")
        try a.ensureGroup()
        for i in 0..<10 { try h.producer.enqueueRaw(fields: ["job": "busy-\(i)"], shard: 0) }
        let quiet = try h.producer.enqueueRaw(fields: ["job": "quiet"], shard: 2)
        // One free slot per read: the quiet shard's entry comes within one round of the shards.
        var read: [JobEntry] = []
        for _ in 0..<3 { read += try a.readNew(count: 1, blockMillis: 0) }
        #expect(read.count == 3)
        let found = try #require(read.first { $0.fields["job"] == "quiet" })
        #expect(found.entryID == quiet && found.entryID.shard == 2)
        #expect(read.filter { $0.entryID.shard == 0 }.count == 2)
        try a.keepAlive(read.map(\.entryID))

        // Another consumer reclaims an idle entry with its shard; the ack lands on that shard's stream.
        let b = RedisPipelineBackend(endpoint: h.redis.endpoint, store: h.store, consumer: "b").makeRedisSession(
            name: "b")
        let claimed = try b.claimIdle(minIdleMillis: 0, count: 10)
        #expect(Set(claimed.map(\.entryID)) == Set(read.map(\.entryID)))
        #expect(claimed.allSatisfy { $0.deliveryCount == 2 })
        for e in claimed { try b.ack(e.entryID) }
        #expect(try h.producer.pendingCount() == 0)

        // A shard whose stream was deleted: the next read recreates its group and goes on.
        _ = try h.admin.client.checked(["DEL", h.store.jobStream(shard: 1)])
        let late = try h.producer.enqueueRaw(fields: ["job": "late"], shard: 1)
        var rest: [JobEntry] = []
        for _ in 0..<6 { rest += try a.readNew(count: 10, blockMillis: 0) }
        // The 8 busy entries left, and the one added before the group was recreated (groups start at `0`).
        #expect(rest.count == 9)
        #expect(rest.filter { $0.entryID.shard == 0 }.count == 8)
        #expect(rest.contains { $0.entryID == late && $0.entryID.shard == 1 })
        let groups = try h.admin.client.checked(["XINFO", "GROUPS", h.store.jobStream(shard: 1)])
        #expect(groups.array?.count == 1)
    }

    /// `volley send --wait` follows every report stream shard: a position from `lastReportID` skips older reports,
    /// and each new report arrives once whatever shard its job id maps to.
    @Test func followingReportsSeesEveryShardOnce() async throws {
        let h = try EngineHarness(streamShards: 3)
        defer { h.redis.stop() }
        let ios = FakePushSender(platform: .ios, latency: 0.001)
        let worker = h.worker(["app1": [.ios: ios]])
        try worker.start()
        defer { worker.drain(deadline: 1) }
        func send(_ id: String) throws {
            try h.producer.enqueue(
                PushJob(
                    id: JobID(id), org: "org1", app: "app1", devices: explicitDevices(1, prefix: id),
                    notification: VolleyCore.Notification(title: "t")))
        }
        try send("before")
        try await waitUntil("the report of 'before'") { (try? h.report(for: "before")) != nil }
        var position = try h.producer.lastReportID()
        #expect(position.split(separator: ",").count == 3)
        let ids = (0..<9).map { "after-\($0)" }
        #expect(Set(ids.map { h.store.streamShard(of: JobID($0)) }).count > 1)
        for id in ids { try send(id) }
        var seen: [String] = []
        let until = Date().addingTimeInterval(30)
        while seen.count < ids.count, Date() < until {
            let (reports, last) = try h.producer.reports(after: position, blockMillis: 200)
            position = last
            seen += reports.map(\.job.rawValue)
        }
        #expect(seen.sorted() == ids.sorted())
        #expect(try h.producer.reports(after: position, blockMillis: 100).reports.isEmpty)
    }

    @Test func aCampaignRunsOverThreeStreamShardsOfACluster() async throws {
        let cluster = try RedisClusterFixture()
        defer { cluster.stop() }
        let mock = try MockServerFixture(
            configuration: #"{"apns": {"unregisteredPrefixes": ["dead"]}, "fcm": {"unregisteredPrefixes": ["dead"]}}"#)
        defer { mock.stop() }
        var store = StoreConfiguration()
        store.streamShards = 3
        let campaign = Campaign(users: 150, campaignShardSize: 50, workers: 1)
        let o = try await Self.run(
            campaign, endpoint: cluster.endpoint, redisURL: "redis://127.0.0.1:\(cluster.ports[0])", store: store,
            client: { cluster.client(name: $0) }, mock: mock)
        Self.check(o, campaign, store: store)
        // The shards' streams sit on more than one primary.
        let primaries = try Set(store.jobStreams.map { try cluster.primaryPort(of: RedisClusterSlot(key: $0)) })
        #expect(primaries.count > 1)
    }
}
