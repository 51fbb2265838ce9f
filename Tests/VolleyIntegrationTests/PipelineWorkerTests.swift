import Foundation
import Testing
import VolleyCore
import VolleyEngine
import VolleyRedis
import VolleyStore
import VolleyTestDoubles
import VolleyTestSupport
import VolleyTestTags

@Suite(.serialized, .tags(.integration)) struct PipelineWorkerTests {
    @Test func jobFlowsEndToEndThroughRegistryAndReport() async throws {
        let h = try EngineHarness()
        defer { h.redis.stop() }
        try h.register(users: 4, devicesPerUser: 3)
        // user1's second device is dead at the provider.
        let dead = "tok-u1-d1-" + String(repeating: "a", count: 16)
        let rejectDead: @Sendable (Device) -> DeliveryOutcome = { d in
            d.token.rawValue == dead ? .rejected(status: 410, reason: "Unregistered", action: .removeToken) : .accepted
        }
        let ios = FakePushSender(platform: .ios, latency: 0.001, outcome: rejectDead)
        let android = FakePushSender(platform: .android, latency: 0.001, outcome: rejectDead)
        let worker = h.worker(["app1": [.ios: ios, .android: android]])
        try worker.start()
        defer { worker.drain(deadline: 1) }

        let job = PushJob(
            id: "job-1", org: "org1", app: "app1",
            recipients: ["user0", "user1", "user2", "user3", "nobody", "user0"],
            notification: VolleyCore.Notification(title: "Hi", body: "There"))
        try h.producer.enqueue(job)
        try await waitUntil("the report of job-1") { (try? h.report(for: "job-1")) != nil }
        let report = try #require(try h.report(for: "job-1"))
        #expect(report.recipients == 6)
        #expect(report.users == 5) // de-duplicated
        #expect(report.noDevices == 1)
        #expect(report.devices == 12)
        #expect(report.accepted == 11)
        #expect(report.rejected == 1)
        #expect(report.rejectedByReason["Unregistered"] == 1)
        #expect(report.tokensRemoved == 1)
        #expect(ios.total + android.total == 12)
        #expect(try h.ledger(job: "job-1").count == 12)
        // The dead token is gone from the registry; the others stay.
        let remaining = try h.admin.records(org: "org1", app: "app1", user: "user1")
        #expect(remaining.count == 2)
        #expect(!remaining.contains { $0.token.rawValue == dead })
        try await waitUntil("no pending stream entries") { (try? h.producer.pendingCount()) == 0 }
    }

    /// APNs 410 says since when a token is invalid: a token registered again after that moment stays.
    @Test func tokenRegisteredAfterThe410TimestampStays() async throws {
        let h = try EngineHarness()
        defer { h.redis.stop() }
        let registeredAt = Date(timeIntervalSince1970: 1_790_000_000)
        let tokens = ["renewed", "stale", "undated"].map { $0 + String(repeating: "c", count: 20) }
        try h.admin.register(
            tokens.map {
                DeviceImportRecord(org: "org1", app: "app1", user: "user0", platform: .ios, token: DeviceToken($0))
            }, now: registeredAt)
        let invalidSince: [String: Date?] = [
            tokens[0]: registeredAt.addingTimeInterval(-60),
            tokens[1]: registeredAt.addingTimeInterval(60), tokens[2]: nil,
        ]
        let ios = FakePushSender(platform: .ios) { d in
            .rejected(
                status: 410,
                reason: OutcomeReason("Unregistered", tokenInvalidSince: invalidSince[d.token.rawValue] ?? nil),
                action: .removeToken)
        }
        let worker = h.worker(["app1": [.ios: ios]])
        try worker.start()
        defer { worker.drain(deadline: 1) }
        try h.producer.enqueue(
            PushJob(
                id: "job-410", org: "org1", app: "app1", recipients: ["user0"],
                notification: VolleyCore.Notification(title: "Hi")))
        try await waitUntil("the report of job-410") { (try? h.report(for: "job-410")) != nil }
        #expect(try h.report(for: "job-410")?.rejected == 3)
        let remaining = try h.admin.records(org: "org1", app: "app1", user: "user0").map(\.token.rawValue)
        #expect(remaining == [tokens[0]])
    }

    @Test func malformedJobsAreDeadLetteredWhileGoodJobsComplete() async throws {
        let h = try EngineHarness()
        defer { h.redis.stop() }
        let ios = FakePushSender(platform: .ios)
        let android = FakePushSender(platform: .android)
        // app2 is only for org2: org1's job through it is refused like an unknown app.
        let worker = h.worker(
            ["app1": [.ios: ios, .android: android], "app2": [.ios: ios]],
            orgs: ["app2": AppOrgs(["org2"])])
        try worker.start()
        defer { worker.drain(deadline: 1) }

        func good(_ i: Int) throws {
            try h.producer.enqueue(
                PushJob(
                    id: JobID("good-\(i)"), org: "org1", app: "app1",
                    devices: explicitDevices(10, prefix: "g\(i)"),
                    notification: VolleyCore.Notification(title: "t", body: "b")))
        }
        let tooMany = (0...PushJob.maxRecipients).map { RecipientID("u\($0)") }
        let enc = JSONEncoder()
        func json(_ job: PushJob) -> String { String(decoding: try! enc.encode(job), as: UTF8.self) }
        try good(0)
        try h.producer.enqueueRaw(fields: ["job": "{not json"])
        try good(1)
        try h.producer.enqueueRaw(fields: ["other": "x"])
        try h.producer.enqueueRaw(fields: [
            "job": json(
                PushJob(
                    org: "org1", app: "nope", devices: explicitDevices(1),
                    notification: VolleyCore.Notification(title: "x")))
        ])
        try good(2)
        try h.producer.enqueueRaw(fields: [
            "job": json(
                PushJob(
                    org: "org1", app: "app1", recipients: tooMany,
                    notification: VolleyCore.Notification(title: "x")))
        ])
        try h.producer.enqueueRaw(fields: [
            "job": json(
                PushJob(
                    org: "org1", app: "app1", devices: explicitDevices(2),
                    notification: VolleyCore.Notification(title: "loud", contentAvailable: true)))
        ])
        try h.producer.enqueueRaw(fields: [
            "job": json(PushJob(org: "org1", app: "app1", notification: VolleyCore.Notification(title: "x")))
        ])
        try h.producer.enqueueRaw(fields: [
            "job": #"{"org":"org1","app":"app1","devices":[{"platform":"blackberry","token":"x"}],"notification":{}}"#
        ])
        try h.producer.enqueueRaw(fields: [
            "job": json(
                PushJob(
                    org: "org1", app: "app2", devices: explicitDevices(1),
                    notification: VolleyCore.Notification(title: "x")))
        ])
        // Keys Volley does not know are named, with the key they probably meant.
        try h.producer.enqueueRaw(fields: [
            "job": #"{"org":"org1","app":"app1","schedule":"2026-12-01T00:00:00Z","#
                + #""devices":[{"platform":"ios","token":"t","enviroment":"sandbox"}],"notification":{"titel":"x"}}"#
        ])
        try good(3)

        try await waitUntil("4 reports and 9 dead letters") {
            ((try? h.producer.allReports().count) ?? 0) == 4 && ((try? h.producer.deadLetters().count) ?? 0) == 9
        }
        let dead = try h.producer.deadLetters()
        let reasons = dead.compactMap { $0["reason"] }.sorted()
        #expect(
            reasons == [
                "invalid-job", "invalid-json", "invalid-json", "invalid-json", "invalid-notification",
                "no-targets", "too-many-recipients", "unknown-app", "unknown-app",
            ])
        let unknownKeys = try #require(dead.first { $0["reason"] == "invalid-job" }?["detail"])
        #expect(
            unknownKeys == "unknown keys 'schedule', 'notification.titel' (did you mean 'title'?), "
                + "'devices[0].enviroment' (did you mean 'environment'?)")
        #expect(dead.contains { $0["reason"] == "unknown-app" && $0["detail"]?.contains("org 'org1' may not") == true })
        #expect(dead.allSatisfy { $0["worker"] == "w1" && $0["sourceEntry"] != nil && $0["detail"] != nil })
        #expect(dead.contains { $0["job"] == "{not json" }) // original fields kept
        // A fault names where it is and what was expected.
        #expect(
            dead.first { $0["job"] == "{not json" }?["detail"]
                == "not valid JSON: expected a key in double quotes at byte 1")
        #expect(
            dead.first { $0["job"]?.contains("blackberry") == true }?["detail"]
                == "wrong type at 'devices[0].platform': expected one of ios, android")
        #expect(dead.contains { $0["other"] == "x" })
        let reports = try h.producer.allReports()
        #expect(Set(reports.map(\.job.rawValue)) == ["good-0", "good-1", "good-2", "good-3"])
        #expect(reports.allSatisfy { $0.accepted == 10 })
        try await waitUntil("no pending stream entries") { (try? h.producer.pendingCount()) == 0 }
        #expect(worker.stats.jobsDeadLettered == 9)
    }

    @Test func redeliveredJobSkipsDevicesWithRecordedOutcomes() async throws {
        let h = try EngineHarness()
        defer { h.redis.stop() }
        let devices = explicitDevices(100)
        // An earlier delivery recorded 60 outcomes (10 of them rejections) before it died.
        var earlier: [(Device, DeliveryOutcome)] = []
        for (i, d) in devices.prefix(60).enumerated() {
            let dev = Device(platform: d.platform, token: d.token)
            earlier.append(
                (dev, i < 10 ? .rejected(status: 400, reason: "BadDeviceToken", action: .removeToken) : .accepted))
        }
        try h.admin.record(org: "org1", job: "job-r", outcomes: earlier)
        let ios = FakePushSender(platform: .ios)
        let android = FakePushSender(platform: .android)
        let worker = h.worker(["app1": [.ios: ios, .android: android]])
        try worker.start()
        defer { worker.drain(deadline: 1) }
        try h.producer.enqueue(
            PushJob(
                id: "job-r", org: "org1", app: "app1", devices: devices,
                notification: VolleyCore.Notification(body: "b")))
        try await waitUntil("the report of job-r") { (try? h.report(for: "job-r")) != nil }
        let report = try #require(try h.report(for: "job-r"))
        #expect(ios.total + android.total == 40)
        #expect(Set(ios.perToken.keys).union(android.perToken.keys) == Set(devices.suffix(40).map(\.token.rawValue)))
        #expect(report.devices == 100)
        #expect(report.alreadyRecorded == 60)
        #expect(report.accepted == 90)
        #expect(report.rejected == 10)
        #expect(try h.ledger(job: "job-r").count == 100)
        // A second delivery of the same job id publishes no second report.
        try h.producer.enqueue(
            PushJob(
                id: "job-r", org: "org1", app: "app1", devices: devices,
                notification: VolleyCore.Notification(body: "b")))
        try await waitUntil("2 jobs completed") { worker.stats.jobsCompleted == 2 }
        #expect(try h.producer.allReports().count == 1)
        #expect(ios.total + android.total == 40)
    }

    /// Accepted devices go to the accepted list and other outcomes to the hash; a redelivery honours both.
    @Test func ledgerListAndHashAreHonouredOnRedelivery() async throws {
        let h = try EngineHarness()
        defer { h.redis.stop() }
        let devices = explicitDevices(60)
        func device(_ d: JobDevice) -> Device { Device(platform: d.platform, token: d.token) }
        // 30 recorded by an earlier delivery: 10 rejected (hash), 20 accepted (list).
        let hashKey = "volley:outcomes:{org1}:job-mixed"
        try h.admin.record(
            org: "org1", job: "job-mixed",
            outcomes: devices[0..<30].enumerated().map { i, d in
                (device(d), i < 10 ? .rejected(status: 410, reason: "Unregistered", action: .removeToken) : .accepted)
            })
        #expect(try h.admin.client.checked(["HLEN", hashKey]).integer == 10)
        #expect(try h.admin.client.checked(["LLEN", hashKey + ":accepted"]).integer == 1)
        #expect((try h.admin.client.checked(["TTL", hashKey + ":accepted"]).integer ?? -1) > 0)
        let ios = FakePushSender(platform: .ios)
        let android = FakePushSender(platform: .android)
        let worker = h.worker(["app1": [.ios: ios, .android: android]])
        try worker.start()
        defer { worker.drain(deadline: 1) }
        try h.producer.enqueue(
            PushJob(
                id: "job-mixed", org: "org1", app: "app1", devices: devices,
                notification: VolleyCore.Notification(body: "b")))
        try await waitUntil("the report of job-mixed") { (try? h.report(for: "job-mixed")) != nil }
        let report = try #require(try h.report(for: "job-mixed"))
        #expect(Set(ios.perToken.keys).union(android.perToken.keys) == Set(devices.suffix(30).map(\.token.rawValue)))
        #expect(report.alreadyRecorded == 30 && report.accepted == 50 && report.rejected == 10)
        // This delivery's 30 accepted devices went to the list, not the hash.
        #expect(try h.admin.client.checked(["HLEN", hashKey]).integer == 12) // + _report, _published
        #expect(try h.ledger(job: "job-mixed").count == 60)
    }

    @Test func firstDeliveryWithoutLedgerSendsWithoutLookingUpOutcomes() async throws {
        let h = try EngineHarness()
        defer { h.redis.stop() }
        /// HMGET calls Redis has served (the ledger look-up is the only HMGET of an explicit-devices job).
        func hmgetCalls() throws -> Int {
            let info = try h.admin.client.checked(["INFO", "commandstats"]).string ?? ""
            guard let line = info.split(whereSeparator: \.isNewline).first(where: { $0.hasPrefix("cmdstat_hmget:") }),
                let calls = line.split(separator: ",").first?.split(separator: "=").last
            else { return 0 }
            return Int(calls) ?? -1
        }
        let ios = FakePushSender(platform: .ios)
        let android = FakePushSender(platform: .android)
        let worker = h.worker(["app1": [.ios: ios, .android: android]])
        try worker.start()
        defer { worker.drain(deadline: 1) }
        // A new job: no ledger, so its 600 devices (3 chunks) are sent without an HMGET.
        try h.producer.enqueue(
            PushJob(
                id: "job-new", org: "org1", app: "app1", devices: explicitDevices(600),
                notification: VolleyCore.Notification(body: "b")))
        try await waitUntil("the report of job-new") { (try? h.report(for: "job-new")) != nil }
        let fresh = try #require(try h.report(for: "job-new"))
        #expect(fresh.accepted == 600 && fresh.alreadyRecorded == 0)
        #expect(ios.total + android.total == 600)
        #expect(try hmgetCalls() == 0)
        #expect(try h.ledger(job: "job-new").count == 600)
        // A job whose ledger exists is looked up chunk by chunk, and what it recorded is not sent again.
        let devices = explicitDevices(600, prefix: "old")
        try h.admin.record(
            org: "org1", job: "job-old",
            outcomes: devices.prefix(100).map {
                (Device(platform: $0.platform, token: $0.token), .accepted)
            })
        try h.producer.enqueue(
            PushJob(
                id: "job-old", org: "org1", app: "app1", devices: devices,
                notification: VolleyCore.Notification(body: "b")))
        try await waitUntil("the report of job-old") { (try? h.report(for: "job-old")) != nil }
        let old = try #require(try h.report(for: "job-old"))
        #expect(old.alreadyRecorded == 100 && old.accepted == 600)
        #expect(ios.total + android.total == 1_100)
        #expect(try hmgetCalls() >= 3)
    }

    @Test func idleEntriesAreReclaimedAndOverDeliveredOnesDeadLettered() async throws {
        let h = try EngineHarness()
        defer { h.redis.stop() }
        let ghost = RedisPipelineBackend(endpoint: h.redis.endpoint, store: h.store, consumer: "ghost")
            .makeRedisSession(name: "ghost")
        try ghost.ensureGroup()
        try h.producer.enqueue(
            PushJob(
                id: "orphan", org: "org1", app: "app1", devices: explicitDevices(5),
                notification: VolleyCore.Notification(title: "t")))
        let taken = try ghost.readNew(count: 10, blockMillis: 10)
        #expect(taken.count == 1)
        // A second orphan, already delivered 9 times.
        let id2 = try h.producer.enqueue(
            PushJob(
                id: "poison", org: "org1", app: "app1", devices: explicitDevices(5),
                notification: VolleyCore.Notification(title: "t")))
        _ = try ghost.readNew(count: 10, blockMillis: 10)
        try ghost.client.checked(["XCLAIM", "volley:jobs", "volley", "ghost", "0", id2.rawValue, "RETRYCOUNT", "9"])

        let sender = FakePushSender(platform: .ios)
        let worker = h.worker(["app1": [.ios: sender, .android: FakePushSender(platform: .android)]]) {
            $0.reclaimIdleMillis = 300
            $0.keepAliveIntervalMillis = 100
        }
        try worker.start()
        defer { worker.drain(deadline: 1) }
        try await waitUntil("the report of orphan") { (try? h.report(for: "orphan")) != nil }
        let report = try #require(try h.report(for: "orphan"))
        #expect(report.deliveries == 2)
        #expect(report.accepted == 5)
        try await waitUntil("a too-many-deliveries dead letter") {
            ((try? h.producer.deadLetters()) ?? []).contains { $0["reason"] == "too-many-deliveries" }
        }
        try await waitUntil("no pending stream entries") { (try? h.producer.pendingCount()) == 0 }
        #expect(worker.stats.reclaimed == 2)
    }

    @Test func longJobIsKeptAliveAndNotReclaimedByASecondWorker() async throws {
        let h = try EngineHarness()
        defer { h.redis.stop() }
        let slow = FakePushSender(platform: .ios, latency: 0.02)
        let slowA = FakePushSender(platform: .android, latency: 0.02)
        // inFlight 20 at 20 ms each: 1,000 devices take ≈ 1 s, far longer than reclaimIdle (250 ms).
        let w1 = h.worker(["app1": [.ios: slow, .android: slowA]], consumer: "w1") {
            $0.inFlight = 20
            $0.concurrentJobs = 1
            $0.reclaimIdleMillis = 250
            $0.keepAliveIntervalMillis = 50
        }
        try w1.start()
        defer { w1.drain(deadline: 1) }
        try h.producer.enqueue(
            PushJob(
                id: "long", org: "org1", app: "app1", devices: explicitDevices(1000),
                notification: VolleyCore.Notification(title: "t")))
        try await waitUntil("the slow sender's first send") { slow.total > 0 }
        let other = FakePushSender(platform: .ios)
        let w2 = h.worker(["app1": [.ios: other, .android: FakePushSender(platform: .android)]], consumer: "w2") {
            $0.reclaimIdleMillis = 250
            $0.reclaimIntervalMillis = 50
        }
        try w2.start()
        defer { w2.drain(deadline: 1) }
        try await waitUntil("the report of long") { (try? h.report(for: "long")) != nil }
        #expect(w2.stats.reclaimed == 0)
        #expect(other.total == 0)
        #expect(try h.report(for: "long")?.deliveries == 1)
    }
}
