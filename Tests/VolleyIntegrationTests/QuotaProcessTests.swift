import Foundation
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

func pushesSent(_ s: MockStatsSnapshot) -> Int { s.totalRequests - s.tokenRequests }

/// Quota exactness: 4 `volley worker` processes against the real mock, iOS limit 1,000 per hour,
/// 5,000 deliverable devices + 1,000 users without a device, 100 of the devices unregistered at the mock.
@Suite(.serialized, .tags(.integration)) struct QuotaProcessTests {
    @Test func fourWorkerProcessesAcceptExactlyTheHourlyLimit() async throws {
        let w = try MockWorld(mockConfig: #"{"apns": {"unregisteredPrefixes": ["dead"]}, "latencyMs": 2}"#)
        defer { w.stop() }
        // users 0…4,999: one iOS device each; every 50th user's token (100 in all) is dead at the mock, spread over
        // all groups so some are sent before the limit is reached. users 5,000…5,999: none.
        try w.h.register(
            app: "app1", users: 5000, devicesPerUser: 1, platform: { _ in .ios },
            token: { u, _ in
                (u % 50 == 0 ? "dead" : "beef") + String(format: "%08x", u) + String(repeating: "a", count: 52)
            })
        let dir = RedisDirectory(client: w.redis.client(name: "dir"))
        for g in 0..<10 {
            try dir.importRecords([
                DirectoryRecord(
                    org: "org1", kind: .group, id: RecipientID("g\(g)"),
                    members: (0..<600).map { RecipientID("user\(g * 600 + $0)") })
            ])
        }
        var l = w.local
        l.quotaIOS = 1000
        l.worker = ["inFlight": "200", "blockMs": "200", "drainSeconds": "3"]
        let config = w.dir.appendingPathComponent("quota.yaml").path
        try l.write(to: config)
        var procs: [WorkerProcess] = []
        for i in 0..<4 { procs.append(try WorkerProcess(config: config, consumer: "Q\(i)", logDirectory: w.dir)) }
        defer { for p in procs where p.isRunning { p.kill9() } }
        for g in 0..<10 {
            try w.h.producer.enqueue(
                PushJob(
                    id: JobID("c\(g)"), org: "org1", app: "app1", recipients: [RecipientID("g\(g)")],
                    notification: VolleyCore.Notification(title: "Quota", body: "test")))
        }
        try await waitUntil(
            "the reports of c0 to c9: \(procs.first?.log.suffix(1500) ?? "")", timeout: .seconds(90)
        ) { (0..<10).allSatisfy { (try? w.h.report(for: JobID("c\($0)"))) != nil } }
        let reports = try (0..<10).compactMap { try w.h.report(for: JobID("c\($0)")) }
        let accepted = reports.reduce(0) { $0 + $1.accepted }
        let rejected = reports.reduce(0) { $0 + $1.rejected }
        let over = reports.reduce(0) { $0 + $1.quotaExceeded }
        let s = w.mock.stats()
        #expect(s.acceptedAPNs == 1000) // the mock accepted exactly the limit
        #expect(accepted == 1000)
        #expect(accepted + rejected + over == 5000)
        #expect(rejected > 0) // refunds were exercised: dead tokens were charged, then given back
        #expect(s.acceptedAPNs + rejected == pushesSent(s))
        #expect(reports.reduce(0) { $0 + $1.noDevices } == 1000)
        #expect(reports.reduce(0) { $0 + ($1.inAppStored ?? 0) } == 6000)
        #expect(Set(reports.map(\.worker)).count >= 2) // the fleet shared the jobs
        let quota = RedisQuotaStore(client: w.redis.client(name: "q"), defaults: QuotaLimits(ios: 1000, android: 0))
        #expect(try quota.usage(org: "org1").first { $0.platform == .ios }?.used == 1000)
        print(
            "quota test: accepted \(accepted), rejected (unregistered) \(rejected), quota_exceeded \(over), mock "
                + "accepted \(s.acceptedAPNs)"
        )
    }
}
