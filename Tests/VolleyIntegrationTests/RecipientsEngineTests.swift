import Foundation
import Testing
import VolleyCore
import VolleyEngine
import VolleyRedis
import VolleyStore
import VolleyTestDoubles
import VolleyTestSupport
import VolleyTestTags

/// Recipients, inbox, types and quotas through the real engine and a real redis-server (fake senders stand in for
/// APNs/FCM here; quotas against the real mock and `volley worker` processes are `QuotaProcessTests`).
@Suite(.serialized, .tags(.integration)) struct RecipientsEngineTests {
    struct Stores {
        let directory: RedisDirectory
        let inbox: RedisInboxStore
        let types: RedisNotificationTypeStore
        let quota: RedisQuotaStore
        var shards: RedisShardCoordinator? = nil
        var shardSize = 50_000
        var resolver: DirectoryRecipientResolver {
            DirectoryRecipientResolver(
                directory: directory, inbox: inbox, types: types, shards: shards, shardSize: shardSize,
                usersPerRead: 100)
        }
    }

    func stores(_ h: EngineHarness, name: String, iosLimit: Int = 20_000) -> Stores {
        Stores(
            directory: RedisDirectory(client: h.redis.client(name: "\(name)-dir")),
            inbox: RedisInboxStore(client: h.redis.client(name: "\(name)-inbox")),
            types: RedisNotificationTypeStore(client: h.redis.client(name: "\(name)-types")),
            quota: RedisQuotaStore(
                client: h.redis.client(name: "\(name)-quota"), defaults: QuotaLimits(ios: iosLimit, android: 10_000)))
    }

    func worker(_ h: EngineHarness, _ s: Stores, apps: [AppName: [Platform: any PushSender]], consumer: String)
        -> PipelineWorker
    {
        let c = WorkerConfiguration(
            consumer: consumer, concurrentJobs: 2, inFlight: 200, blockMillis: 100,
            reclaimIdleMillis: 60_000, reclaimIntervalMillis: 200, maxDeliveries: 5,
            drainDeadlineSeconds: 5, recordBatch: 100, chunkSize: 250)
        let backend = RedisPipelineBackend(
            endpoint: h.redis.endpoint, store: h.store, consumer: consumer, options: .init(giveUpAfter: 30))
        return PipelineWorker(
            configuration: c, backend: backend, apps: StaticAppDirectory(apps), resolver: s.resolver, quota: s.quota)
    }

    @Test func mixedRecipientsReachTheExactDeviceSetOnce() async throws {
        let h = try EngineHarness()
        defer { h.redis.stop() }
        // user0…user9, 2 devices each; user3 and user8 inactive; user9 has no device.
        try h.register(users: 9, devicesPerUser: 2)
        let s = stores(h, name: "t")
        var recs = (0..<10).map {
            DirectoryRecord(
                org: "org1", kind: .user, id: RecipientID("user\($0)"), active: ($0 == 3 || $0 == 8) ? false : nil)
        }
        recs += [
            DirectoryRecord(org: "org1", kind: .group, id: "gA", members: ["user0", "gB"]),
            DirectoryRecord(org: "org1", kind: .group, id: "gB", members: ["user1", "user3", "gC"]),
            DirectoryRecord(org: "org1", kind: .group, id: "gC", members: ["user2", "gA"]), // cycle
            DirectoryRecord(org: "org1", kind: .queue, id: "q1", members: ["user4", "gC"]), // queue with a group
            DirectoryRecord(org: "org1", kind: .accountTeam, id: "001ACC", members: ["user5", "user0"]),
            DirectoryRecord(org: "org1", kind: .opportunityTeam, id: "006OPP", members: ["user6", "user8", "user9"]),
        ]
        try s.directory.importRecords(recs)
        let ios = FakePushSender(platform: .ios)
        let android = FakePushSender(platform: .android)
        let w = worker(h, s, apps: ["app1": [.ios: ios, .android: android]], consumer: "w1")
        try w.start()
        defer { w.drain(deadline: 1) }
        try h.producer.enqueue(
            PushJob(
                id: "mix", org: "org1", app: "app1",
                recipients: ["q1", "gA", "001ACC", "006OPP", "user1", "user3", "ghost", "gB"],
                notification: VolleyCore.Notification(title: "Deal", body: "Closed", type: nil, targetId: "006OPP")))
        try await waitUntil("the report of mix") { (try? h.report(for: "mix")) != nil }
        let r = try #require(try h.report(for: "mix"))
        // Active users reached: 0,1,2,4,5,6,9 (3 and 8 inactive); 9 has no device.
        let expectedUsers = [0, 1, 2, 4, 5, 6]
        let expected = Set(
            expectedUsers.flatMap { u in (0..<2).map { "tok-u\(u)-d\($0)-" + String(repeating: "a", count: 16) } })
        let sent = ios.perToken.merging(android.perToken, uniquingKeysWith: +)
        #expect(Set(sent.keys) == expected)
        #expect(sent.values.allSatisfy { $0 == 1 })
        #expect(r.users == 7 && r.noDevices == 1 && r.devices == 12 && r.accepted == 12)
        #expect(r.unknownRecipients == 1 && r.unknownRecipientIDs == ["ghost"])
        #expect(r.inAppStored == 7)
        // Every reached user has it in the inbox, the one without a device too.
        #expect(try s.inbox.list(org: "org1", user: "user9", size: 10, before: nil).map(\.id) == ["mix"])
        #expect(try s.inbox.list(org: "org1", user: "user3", size: 10, before: nil).isEmpty)
        #expect(try s.inbox.status(org: "org1", user: "user0").unreadCount == 1)
    }

    /// A custom notification reaches an app only when the app is subscribed to its type (the guide: "Notification
    /// Builder push notifications require you to subscribe your connected app to the custom notification types you
    /// plan to send"): an app with no setting for the type pushes and stores nothing, and its report says why.
    @Test func aTypeTheAppIsNotSubscribedToSendsNothing() async throws {
        let h = try EngineHarness()
        defer { h.redis.stop() }
        try h.register(users: 2, devicesPerUser: 1)
        let s = stores(h, name: "u")
        try s.types.setType(org: "org1", NotificationType(id: "deal", name: "Deal"))
        try s.types.setType(org: "org1", NotificationType(id: "ops", name: "Ops"))
        try s.types.setSetting(org: "org1", app: "app1", typeID: "ops", enabled: true, pushEnabled: nil)
        let ios = FakePushSender(platform: .ios)
        let android = FakePushSender(platform: .android)
        let w = worker(h, s, apps: ["app1": [.ios: ios, .android: android]], consumer: "w1")
        try w.start()
        defer { w.drain(deadline: 1) }
        try h.producer.enqueue(
            PushJob(
                id: "unsubscribed", org: "org1", app: "app1", recipients: ["user0", "user1"],
                notification: VolleyCore.Notification(title: "x", body: "y", type: "deal")))
        try h.producer.enqueue(
            PushJob(
                id: "subscribed", org: "org1", app: "app1", recipients: ["user0", "user1"],
                notification: VolleyCore.Notification(title: "x", body: "y", type: "ops")))
        try await waitUntil("the reports of both jobs") {
            (try? h.report(for: "unsubscribed")) != nil && (try? h.report(for: "subscribed")) != nil
        }
        let off = try #require(try h.report(for: "unsubscribed"))
        #expect(off.status == "not_enabled" && off.devices == 0 && off.inAppStored == 0)
        #expect(off.statusDetail?.contains("app app1 is not subscribed to notification type 'deal'") == true)
        let on = try #require(try h.report(for: "subscribed"))
        #expect(on.status == nil && on.devices == 2 && on.inAppStored == 2)
        #expect(ios.total + android.total == 2)
        #expect(try s.inbox.list(org: "org1", user: "user1", size: 10, before: nil).map(\.id) == ["subscribed"])
    }

    @Test func disabledTypeSendsNothingAndPushDisabledStoresInAppOnly() async throws {
        let h = try EngineHarness()
        defer { h.redis.stop() }
        try h.register(users: 4, devicesPerUser: 1)
        let s = stores(h, name: "t")
        try s.directory.importRecords([
            DirectoryRecord(org: "org1", kind: .group, id: "g", members: ["user0", "user1", "user2", "user3"])
        ])
        try s.types.setType(org: "org1", NotificationType(id: "alert", name: "Alert"))
        try s.types.setType(org: "org1", NotificationType(id: "quiet", name: "Quiet"))
        try s.types.setSetting(org: "org1", app: "app1", typeID: "alert", enabled: false, pushEnabled: nil)
        try s.types.setSetting(org: "org1", app: "app1", typeID: "quiet", enabled: true, pushEnabled: false)
        let ios = FakePushSender(platform: .ios)
        let android = FakePushSender(platform: .android)
        let w = worker(h, s, apps: ["app1": [.ios: ios, .android: android]], consumer: "w1")
        try w.start()
        defer { w.drain(deadline: 1) }
        try h.producer.enqueue(
            PushJob(
                id: "off", org: "org1", app: "app1", recipients: ["g"],
                notification: VolleyCore.Notification(title: "x", body: "y", type: "alert")))
        try h.producer.enqueue(
            PushJob(
                id: "inapp", org: "org1", app: "app1", recipients: ["g"],
                notification: VolleyCore.Notification(title: "x", body: "y", type: "quiet")))
        try await waitUntil("the reports of off and inapp") {
            (try? h.report(for: "off")) != nil && (try? h.report(for: "inapp")) != nil
        }
        let off = try #require(try h.report(for: "off"))
        #expect(off.status == "not_enabled" && off.devices == 0 && off.inAppStored == 0)
        let inapp = try #require(try h.report(for: "inapp"))
        #expect(inapp.status == nil && inapp.devices == 0 && inapp.inAppStored == 4 && inapp.users == 4)
        #expect(ios.total + android.total == 0)
        #expect(try s.inbox.list(org: "org1", user: "user2", size: 10, before: nil).map(\.id) == ["inapp"])
    }

    /// A raw platform payload (Apex-style) is push-only; with `inbox: true` it stores what it displays; a raw silent
    /// hint stores nothing either way (it still reaches devices).
    @Test func rawPayloadsArePushOnlyUnlessTheJobAsksForTheInbox() async throws {
        let h = try EngineHarness()
        defer { h.redis.stop() }
        try h.register(users: 2, devicesPerUser: 1)
        let s = stores(h, name: "t")
        try s.directory.importRecords([
            DirectoryRecord(org: "org1", kind: .group, id: "g", members: ["user0", "user1"])
        ])
        let ios = FakePushSender(platform: .ios)
        let android = FakePushSender(platform: .android)
        let w = worker(h, s, apps: ["app1": [.ios: ios, .android: android]], consumer: "w1")
        try w.start()
        defer { w.drain(deadline: 1) }
        let alert: JSONValue = .object([
            "aps": .object([
                "alert": .object([
                    "title": .string("Case escalated"), "body": .string("Acme Corp, priority high"),
                ])
            ])
        ])
        let hint: JSONValue = .object([
            "aps": .object(["content-available": .number(1)]),
            "recordId": .string("001xx"),
        ])
        try h.producer.enqueue(
            PushJob(
                id: "raw-alert", org: "org1", app: "app1", recipients: ["g"],
                notification: VolleyCore.Notification(), apns: alert))
        try h.producer.enqueue(
            PushJob(
                id: "raw-hint", org: "org1", app: "app1", recipients: ["g"],
                notification: VolleyCore.Notification(), apns: hint))
        var kept = PushJob(
            id: "raw-kept", org: "org1", app: "app1", recipients: ["g"], notification: VolleyCore.Notification(),
            apns: alert)
        kept.inbox = true
        try h.producer.enqueue(kept)
        try await waitUntil("the reports of raw-alert, raw-hint and raw-kept") {
            ["raw-alert", "raw-hint", "raw-kept"].allSatisfy { (try? h.report(for: $0)) != nil }
        }
        // Apex-style: pushed to both users' devices, kept in no inbox.
        #expect(try h.report(for: "raw-alert")?.devices == 2)
        #expect(try (h.report(for: "raw-alert")?.inAppStored ?? 0) == 0)
        #expect(try h.report(for: "raw-hint")?.inAppStored == 0)
        #expect(try h.report(for: "raw-hint")?.devices == 2)
        // A raw job that asks for the inbox stores what its alert shows.
        #expect(try h.report(for: "raw-kept")?.inAppStored == 2)
        let stored = try s.inbox.list(org: "org1", user: "user1", size: 10, before: nil)
        #expect(stored.map(\.id) == ["raw-kept"])
        #expect(stored.first?.title == "Case escalated" && stored.first?.body == "Acme Corp, priority high")
    }

    @Test func quotaAdmitsExactlyTheLimitAcrossWorkersWithRefunds() async throws {
        let h = try EngineHarness()
        defer { h.redis.stop() }
        // 6 groups of 1,000 users; users 0…4,999 have one iOS device, 5,000…5,999 none. 100 tokens are dead.
        try h.register(users: 5000, devicesPerUser: 1, platform: { _ in .ios })
        let setup = stores(h, name: "setup")
        for g in 0..<6 {
            try setup.directory.importRecords([
                DirectoryRecord(
                    org: "org1", kind: .group, id: RecipientID("g\(g)"),
                    members: (g * 1000..<(g + 1) * 1000).map { RecipientID("user\($0)") })
            ])
        }
        let dead: @Sendable (Device) -> DeliveryOutcome = { d in
            let u = Int(d.token.rawValue.dropFirst(5).prefix { $0 != "-" }) ?? 0
            return u % 50 == 7 ? .rejected(status: 410, reason: "Unregistered", action: .removeToken) : .accepted
        }
        var workers: [PipelineWorker] = []
        var senders: [FakePushSender] = []
        for i in 0..<3 {
            let ios = FakePushSender(platform: .ios, latency: 0.002, outcome: dead)
            senders.append(ios)
            let w = worker(h, stores(h, name: "w\(i)", iosLimit: 1000), apps: ["app1": [.ios: ios]], consumer: "w\(i)")
            try w.start()
            workers.append(w)
        }
        defer { for w in workers { w.drain(deadline: 1) } }
        for g in 0..<6 {
            try h.producer.enqueue(
                PushJob(
                    id: JobID("q\(g)"), org: "org1", app: "app1", recipients: [RecipientID("g\(g)")],
                    notification: VolleyCore.Notification(title: "t", body: "b")))
        }
        try await waitUntil("the reports of q0 to q5", timeout: .seconds(60)) {
            (0..<6).allSatisfy { (try? h.report(for: JobID("q\($0)"))) != nil }
        }
        let reports = try (0..<6).compactMap { try h.report(for: JobID("q\($0)")) }
        let accepted = reports.reduce(0) { $0 + $1.accepted }
        let rejected = reports.reduce(0) { $0 + $1.rejected }
        let over = reports.reduce(0) { $0 + $1.quotaExceeded }
        #expect(accepted == 1000)
        #expect(accepted + rejected + over == 5000)
        #expect(reports.reduce(0) { $0 + $1.noDevices } == 1000)
        #expect(reports.reduce(0) { $0 + ($1.inAppStored ?? 0) } == 6000)
        #expect(senders.reduce(0) { $0 + $1.total } == accepted + rejected)
        let usage = try setup.quota.usage(org: "org1").first { $0.platform == .ios }
        #expect(usage?.used == 1000 && usage?.pending == 0)
        // Over-quota users still have the notification in-app.
        #expect(try setup.inbox.status(org: "org1", user: "user4999").unreadCount == 1)
    }

    @Test func campaignSplitIntoShardsIsSharedByThreeWorkersWithOneParentReport() async throws {
        let h = try EngineHarness()
        defer { h.redis.stop() }
        try h.register(users: 2500, devicesPerUser: 1)
        let setup = stores(h, name: "setup")
        try setup.directory.importRecords([
            DirectoryRecord(
                org: "org1", kind: .group, id: "all",
                members: (0..<2600).map { RecipientID("user\($0)") })
        ])
        var workers: [PipelineWorker] = []
        var senders: [FakePushSender] = []
        for i in 0..<3 {
            let ios = FakePushSender(platform: .ios, latency: 0.001)
            let android = FakePushSender(platform: .android, latency: 0.001)
            senders += [ios, android]
            var s = stores(h, name: "w\(i)")
            s.shards = RedisShardCoordinator(client: h.redis.client(name: "w\(i)-shards"), jobStream: h.store.jobStream)
            s.shardSize = 1000
            let w = worker(h, s, apps: ["app1": [.ios: ios, .android: android]], consumer: "w\(i)")
            try w.start()
            workers.append(w)
        }
        defer { for w in workers { w.drain(deadline: 1) } }
        try h.producer.enqueue(
            PushJob(
                id: "camp", org: "org1", app: "app1", recipients: ["all", "ghost"],
                notification: VolleyCore.Notification(title: "Big", body: "Sale")))
        try await waitUntil("the report of camp", timeout: .seconds(60)) { (try? h.report(for: "camp")) != nil }
        let r = try #require(try h.report(for: "camp"))
        #expect(r.shards == 3)
        #expect(r.users == 2600 && r.devices == 2500 && r.accepted == 2500 && r.noDevices == 100)
        #expect(r.inAppStored == 2600 && r.unknownRecipients == 1)
        let shardReports = try h.producer.allReports().filter { $0.job.rawValue.hasPrefix("camp.s") }
        #expect(Set(shardReports.map(\.job)) == ["camp.s0", "camp.s1", "camp.s2"])
        #expect(try h.producer.allReports().filter { $0.job == "camp" }.count == 1)
        var sent: [String: Int] = [:]
        for s in senders { sent.merge(s.perToken, uniquingKeysWith: +) }
        #expect(sent.count == 2500 && sent.values.allSatisfy { $0 == 1 })
        // Split by shardSize: 1,000 + 1,000 + 600 users, each shard its own job on the stream (any worker takes it).
        #expect(shardReports.map(\.users).sorted() == [600, 1000, 1000])
        try await waitUntil("no pending stream entries") { (try? h.producer.pendingCount()) == 0 }
    }
}
