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

/// Debug events and `volley status` on a real Redis, the real mock (TLS, HTTP/2) and a worker.
@Suite(.serialized, .tags(.integration)) struct DebugEventsTests {
    /// Token of user u's device d: every 10th device is unregistered at the mock.
    static func token(_ u: Int, _ d: Int) -> String {
        ((u * 3 + d) % 10 == 0 ? "dead" : "beef") + String(format: "%08x%02x", u, d) + String(repeating: "0", count: 54)
    }

    @Test func debugJobRecordsEventsWithTheProvidersAnswerAndStatusSeesTheFleet() async throws {
        let w = try MockWorld(
            mockConfig: #"{"apns": {"unregisteredPrefixes": ["dead"]}, "fcm": {"unregisteredPrefixes": ["dead"]}}"#)
        defer { w.stop() }
        try w.h.register(users: 10, devicesPerUser: 3, platform: { $0 % 3 == 0 ? .android : .ios }, token: Self.token)
        let apps = try w.apps()
        defer { apps.shutdown() }
        let worker = PipelineWorker(
            configuration: WorkerConfiguration(consumer: "dbg", inFlight: 100, blockMillis: 100),
            backend: RedisPipelineBackend(endpoint: w.redis.endpoint, consumer: "dbg"), apps: apps)
        try worker.start()
        defer { worker.drain(deadline: 2) }
        let users = (0..<10).map { RecipientID("user\($0)") } + ["ghost"]
        var job = PushJob(
            id: "dbg-1", org: "org1", app: "app1", recipients: users,
            notification: VolleyCore.Notification(title: "Hello", body: "World"))
        job.debug = true
        try w.h.producer.enqueue(job)
        var plain = job
        plain.id = "plain-1"
        plain.debug = nil
        try w.h.producer.enqueue(plain)
        var wrongApp = job
        wrongApp.id = "dbg-noapp"
        wrongApp.app = "nope"
        try w.h.producer.enqueue(wrongApp)
        try await waitUntil("the report of plain-1", timeout: .seconds(30)) { (try? w.h.report(for: "plain-1")) != nil }
        try await waitUntil("the report of dbg-1", timeout: .seconds(30)) { (try? w.h.report(for: "dbg-1")) != nil }
        let report = try #require(try w.h.report(for: "dbg-1"))
        // `send --wait`'s progress counters: every resolved device is done once the report is out.
        let progress = try w.h.producer.progress(org: "org1", job: "dbg-1")
        #expect(progress.resolved == 30)
        #expect(progress.done == 30)

        let reader = RedisDebugEvents(client: w.redis.client(name: "events"))
        let events = try reader.events(org: "org1", job: "dbg-1")
        let sent = events.filter { $0.event == .sent }
        #expect(sent.count == 30)
        #expect(sent.filter { $0.answer == "accepted" && $0.status == 200 }.count == report.accepted)
        let unregistered = sent.filter { $0.status != 200 }
        #expect(unregistered.count == report.rejected)
        #expect(unregistered.count == 3)
        #expect(unregistered.allSatisfy { ["Unregistered", "UNREGISTERED"].contains($0.answer) })
        #expect(unregistered.allSatisfy { $0.user != nil && $0.token?.hasPrefix("dead") == true })
        // Tokens are stored redacted, never whole.
        #expect(sent.allSatisfy { ($0.token?.count ?? 0) < 64 })
        let noDevices = events.filter { $0.event == .noDevices }
        #expect(noDevices.map(\.user) == ["ghost"])
        #expect(try reader.events(org: "org1", job: "plain-1").isEmpty)
        #expect(try reader.orgs(job: "dbg-1") == ["org1"])
        // The events expire with the job's ledger.
        let ttl = try w.h.admin.client.checked(["TTL", "volley:events:{org1}:dbg-1"]).integer ?? -1
        let ledgerTTL = try w.h.admin.client.checked(["TTL", "volley:outcomes:{org1}:dbg-1"]).integer ?? -1
        #expect(ttl > 0 && abs(ttl - ledgerTTL) <= 5)

        // An unknown app is dead-lettered with a PUSH_NOTIFICATION_INVALID_APP event.
        try await waitUntil("one debug event of dbg-noapp", timeout: .seconds(30)) {
            ((try? reader.events(org: "org1", job: "dbg-noapp")) ?? []).count == 1
        }
        let invalid = try reader.events(org: "org1", job: "dbg-noapp")
        #expect(invalid.first?.event == .invalidApp)
        #expect(invalid.first?.answer.contains("nope") == true)

        // The CLI's renderings.
        let found = [DebugEventsCommand.Found(org: "org1", events: events)]
        let text = DebugEventsCommand.text(found, job: "dbg-1")
        #expect(text.last == "31 events: PUSH_NOTIFICATION_NO_DEVICES 1, PUSH_NOTIFICATION_SENT 30")
        #expect(DebugEventsCommand.json(found).count == 31)

        // `volley status` sees the worker, the reports of the last minute and the dead letter.
        let quota = RedisQuotaStore(client: w.redis.client(name: "quota"), defaults: QuotaLimits(ios: 100, android: 50))
        _ = try quota.charge(org: "orgQ", platform: .android, count: 40)
        _ = try quota.charge(org: "orgR", platform: .ios, count: 10)
        let status = try RedisFleetStatus(
            client: w.redis.client(name: "status"), store: StoreConfiguration(), quota: quota
        ).read()
        #expect(status.consumers.map(\.name) == ["dbg"])
        #expect(status.stream.length == 3)
        #expect(status.stream.lag == 0)
        #expect(status.stream.pending == 0)
        #expect(status.stream.oldestPendingAgeSeconds == nil)
        #expect(status.lastMinute.jobs == 2)
        #expect(status.lastMinute.devices == 60)
        #expect(status.deadLettersLastHour == ["unknown-app": 1])
        #expect(status.quotas.map(\.org) == ["orgQ", "orgR"])
        #expect(status.quotas.first?.used == 40)
        #expect(status.quotas.first?.limit == 50)
        let lines = FleetStatusCommand.text(status)
        #expect(lines.contains { $0.hasPrefix("dead letters, last hour: unknown-app 1") })
        #expect(lines.contains { $0.contains("dbg") })
    }

    @Test func debugEventsAreCappedPerJob() async throws {
        let w = try MockWorld()
        defer { w.stop() }
        let apps = try w.apps()
        defer { apps.shutdown() }
        let worker = PipelineWorker(
            configuration: WorkerConfiguration(consumer: "cap", inFlight: 400, blockMillis: 100),
            backend: RedisPipelineBackend(endpoint: w.redis.endpoint, consumer: "cap"), apps: apps)
        try worker.start()
        defer { worker.drain(deadline: 2) }
        var job = PushJob(
            id: "cap-1", org: "org1", app: "app1",
            devices: (0..<1_200).map {
                $0 % 2 == 0
                    ? JobDevice(platform: .ios, token: DeviceToken(String(format: "beef%060x", $0)))
                    : JobDevice(platform: .android, token: DeviceToken("android-\($0)"))
            },
            notification: VolleyCore.Notification(title: "Hello"))
        job.debug = true
        try w.h.producer.enqueue(job)
        try await waitUntil("the report of cap-1", timeout: .seconds(60)) { (try? w.h.report(for: "cap-1")) != nil }
        #expect(try w.h.report(for: "cap-1")?.devices == 1_200)
        let events = try RedisDebugEvents(client: w.redis.client(name: "events")).events(org: "org1", job: "cap-1")
        #expect(events.count == DebugEvent.maxPerJob)
    }

    @Test func outcomesMapToTheGuidesEventNames() {
        let d = Device(platform: .ios, token: DeviceToken(String(repeating: "a", count: 64)), user: "u1")
        let now = Date(timeIntervalSince1970: 1_800_000_000)
        let cases: [(DeliveryOutcome, DebugEvent.Name, Int?, String)] = [
            (.accepted, .sent, 200, "accepted"),
            (.rejected(status: 410, reason: "Unregistered", action: .removeToken), .sent, 410, "Unregistered"),
            (
                .rejected(status: 403, reason: "BadCertificate", action: .fixApp), .invalidCertificate, 403,
                "BadCertificate"
            ),
            (
                .rejected(status: 413, reason: "PayloadTooLarge", action: .invalidNotification),
                .invalidNotification, 413, "PayloadTooLarge"
            ),
            (.failed(reason: "Timeout", resendWasSafe: false), .sent, nil, "failed: Timeout"),
        ]
        for (outcome, name, status, answer) in cases {
            let e = DebugEvent(device: d, outcome: outcome, at: now)
            #expect(e.event == name)
            #expect(e.status == status)
            #expect(e.answer == answer)
            #expect(e.user == "u1")
            #expect(e.token != d.token.rawValue)
        }
        #expect(DebugEvent(device: d, outcome: .quotaExceeded, at: now).event == .notEnabled)
    }
}
