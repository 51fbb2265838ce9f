import Foundation
import Logging
import Testing
import VolleyConnect
import VolleyCore
import VolleyEngine
import VolleyRedis
import VolleyStore
import VolleyTestDoubles
import VolleyTestSupport
import VolleyTestTags

/// The Salesforce-compatible resources in front of the real engine on a real redis-server (fake senders stand in
/// for APNs and FCM): what the action and the Connect push write, a worker delivers and stores, and the
/// Notifications resources then list, mark and count.
@Suite(.serialized, .tags(.integration)) struct ConnectEngineTests {
    final class IDs: @unchecked Sendable {
        private let lock = NSLock()
        private var n = 0
        func next() -> JobID {
            lock.withLock {
                n += 1
                return JobID("job-\(n)")
            }
        }
    }

    /// One operation of `service`, answered as the API answers it (Salesforce's error array for a failure).
    func call(
        _ service: ConnectService, _ operation: (ConnectService) async throws -> ConnectResponse
    ) async throws -> (status: Int, json: Any?) {
        let r = await service.answer("test") { try await operation(service) }
        return (r.status, r.body.isEmpty ? nil : try JSONSerialization.jsonObject(with: r.body))
    }

    @Test func actionAndPushReachDevicesAndTheUsersInboxes() async throws {
        let h = try EngineHarness()
        defer { h.redis.stop() }
        // user0 and user2 on iOS, user1 and user3 on Android.
        try h.register(users: 4, devicesPerUser: 1)
        let directory = RedisDirectory(client: h.redis.client(name: "dir"))
        try directory.importRecords(
            (0..<4).map { DirectoryRecord(org: "org1", kind: .user, id: RecipientID("user\($0)")) } + [
                DirectoryRecord(org: "org1", kind: .group, id: "00Gall", members: ["user0", "user1", "user2", "user3"])
            ])
        let types = RedisNotificationTypeStore(client: h.redis.client(name: "types"))
        try types.setType(org: "org1", NotificationType(id: "0MLdeal", name: "Deal won"))
        try types.setType(org: "org1", NotificationType(id: "0MLquiet", name: "Quiet"))
        for t in ["0MLdeal", "0MLquiet"] {
            try types.setSetting(org: "org1", app: "app1", typeID: t, enabled: true, pushEnabled: nil)
        }
        let ids = IDs()
        let jobsClient = h.redis.client(name: "api-jobs")
        let service = ConnectService(
            types: RedisNotificationTypeRepository(client: h.redis.client(name: "api-types")),
            inbox: RedisInboxRepository(store: RedisInboxStore(client: h.redis.client(name: "api-inbox"))),
            jobs: RedisJobSubmitter(
                redis: .lanes(SerialLanes(count: 1, label: "test.jobs") { _ in jobsClient }),
                store: h.store),
            options: .init(apps: { $0 == "org1" ? ["app1"] : [] }, newJobID: { ids.next() }),
            logger: Logger(label: "connect"))
        let backend = ConnectCaller(org: "org1")
        // The org turns the quiet type's mobile channel off: stored in-app, not pushed.
        #expect(
            try await call(service) {
                try await $0.setOrgSetting(
                    caller: backend, typeOrID: "0MLquiet", body: Data(#"{"mobileEnabled": false}"#.utf8))
            }.status == 200)

        let ios = FakePushSender(platform: .ios)
        let android = FakePushSender(platform: .android)
        let inbox = RedisInboxStore(client: h.redis.client(name: "inbox"))
        let c = WorkerConfiguration(
            consumer: "w1", concurrentJobs: 2, inFlight: 200, blockMillis: 100, reclaimIdleMillis: 60_000,
            reclaimIntervalMillis: 200, maxDeliveries: 5, drainDeadlineSeconds: 5, recordBatch: 100, chunkSize: 250)
        let w = PipelineWorker(
            configuration: c,
            backend: RedisPipelineBackend(
                endpoint: h.redis.endpoint, store: h.store, consumer: "w1", options: .init(giveUpAfter: 30)),
            apps: StaticAppDirectory(["app1": [.ios: ios, .android: android]]),
            resolver: DirectoryRecipientResolver(directory: directory, inbox: inbox, types: types, usersPerRead: 100))
        try w.start()
        defer { w.drain(deadline: 1) }

        let actionBody = """
            {"inputs": [
              {"customNotifTypeId": "0MLdeal", "recipientIds": ["00Gall", "user0"], "title": "Deal won",
               "body": "Acme signed", "targetId": "006X"},
              {"customNotifTypeId": "0MLquiet", "recipientIds": ["user2"], "title": "FYI", "body": "Quiet",
               "targetPageRef": {"type": "standard__recordPage"}}
            ]}
            """
        let action = try await call(service) {
            try await $0.customNotificationAction(caller: backend, body: Data(actionBody.utf8))
        }
        #expect(action.status == 200)
        #expect((action.json as? [[String: Any]])?.map { $0["isSuccess"] as? Bool } == [true, true])
        let pushBody = #"{"appName": "app1", "userIds": ["user1"], "payload": "{ 'aps':{ 'alert': 'test' } }"}"#
        let push = try await call(service) { try await $0.push(caller: backend, body: Data(pushBody.utf8)) }
        #expect(push.status == 202 && (push.json as? [String: Any])?["id"] as? String == "job-3")

        // The action's jobs are named by notification and app; the Connect push's is its own.
        try await waitUntil("the reports of job-1:app1, job-2:app1 and job-3") {
            ["job-1:app1", "job-2:app1", "job-3"].allSatisfy { (try? h.report(for: $0)) != nil }
        }
        let deal = try #require(try h.report(for: "job-1:app1"))
        #expect(deal.users == 4 && deal.accepted == 4 && deal.inAppStored == 4)
        let quiet = try #require(try h.report(for: "job-2:app1"))
        #expect(quiet.devices == 0 && quiet.inAppStored == 1)
        // The Connect push is push-only (Apex-style): delivered, not stored.
        let pushed = try #require(try h.report(for: "job-3"))
        #expect(pushed.devices == 1 && pushed.accepted == 1 && (pushed.inAppStored ?? 0) == 0)
        #expect(ios.total == 2 && android.total == 3)

        // user2 lists both notifications of the action, reads one, and the counts follow.
        let user2 = ConnectCaller(org: "org1", user: "user2", app: "app1")
        let list = try await call(service) { try await $0.listNotifications(caller: user2, query: []) }
        let items = try #require((list.json as? [String: Any])?["notifications"] as? [[String: Any]])
        #expect(Set(items.compactMap { $0["id"] as? String }) == ["job-1", "job-2"])
        let quietItem = try #require(items.first { $0["id"] as? String == "job-2" })
        #expect(quietItem["targetPageRef"] as? String == #"{"type":"standard__recordPage"}"#)
        #expect(quietItem["messageTitle"] as? String == "FYI" && quietItem["type"] as? String == "0MLquiet")
        var status = try #require(try await call(service) { try await $0.notificationStatus(caller: user2) }.json)
        #expect((status as? [String: Any])?["unreadCount"] as? Int == 2)
        #expect(
            try await call(service) {
                try await $0.markNotification(
                    caller: user2, id: "job-1", query: [], body: Data(#"{"read": "true"}"#.utf8))
            }.status == 200)
        status = try #require(try await call(service) { try await $0.notificationStatus(caller: user2) }.json)
        #expect((status as? [String: Any])?["unreadCount"] as? Int == 1)
        #expect((status as? [String: Any])?["unseenCount"] as? Int == 1)

        // user1 has the deal in-app, not the Connect push's alert; another org sees none of it.
        let user1 = ConnectCaller(org: "org1", user: "user1", app: "app1")
        let one = try await call(service) { try await $0.notification(caller: user1, id: "job-1", query: []) }
        #expect(one.status == 200 && (one.json as? [String: Any])?["messageBody"] as? String == "Acme signed")
        #expect(
            try await call(service) { try await $0.notification(caller: user1, id: "job-3", query: []) }.status == 404)
        let stranger = ConnectCaller(org: "org2", user: "user1", app: "app1")
        #expect(
            try await call(service) { try await $0.notification(caller: stranger, id: "job-1", query: []) }.status
                == 404)
    }
}
