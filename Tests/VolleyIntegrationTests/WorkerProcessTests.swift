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

/// A `volley worker` child process. Stopped with SIGKILL (children of the test process inherit its blocked signal
/// mask; the worker unblocks SIGTERM/SIGINT itself, so SIGTERM is tested explicitly).
final class WorkerProcess: @unchecked Sendable {
    let process = Process()
    let logFile: String

    /// The `volley` executable built next to the test bundle (`swift build` builds it).
    static func binary() throws -> String {
        let candidates = [
            URL(fileURLWithPath: CommandLine.arguments[0]).deletingLastPathComponent().appendingPathComponent("volley")
                .path,
            Bundle.main.bundleURL.deletingLastPathComponent().appendingPathComponent("volley").path,
            FileManager.default.currentDirectoryPath + "/.build/debug/volley",
        ]
        for c in candidates where FileManager.default.isExecutableFile(atPath: c) { return c }
        throw RedisError(
            .invalidEndpoint,
            "volley executable not found next to the tests (looked in \(candidates)); run `swift build` first")
    }

    init(config: String, consumer: String, logDirectory: URL) throws {
        logFile = logDirectory.appendingPathComponent("worker-\(consumer).log").path
        FileManager.default.createFile(atPath: logFile, contents: nil)
        process.executableURL = URL(fileURLWithPath: try WorkerProcess.binary())
        process.arguments = ["worker", "--config", config, "--consumer", consumer]
        let log = try FileHandle(forWritingTo: URL(fileURLWithPath: logFile))
        process.standardOutput = log
        process.standardError = log
        try process.run()
    }

    var pid: Int32 { process.processIdentifier }
    func kill9() {
        kill(pid, SIGKILL)
        process.waitUntilExit()
    }
    func terminate() { kill(pid, SIGTERM) }
    var isRunning: Bool { process.isRunning }
    var log: String { (try? String(contentsOfFile: logFile, encoding: .utf8)) ?? "" }
}

extension MockWorld {
    /// The campaign of the process tests: 500 users (`user0`…) × 40 devices, half iOS, half Android.
    func registerCampaign() throws {
        try h.register(
            app: "app1", users: 500, devicesPerUser: 40, platform: { $0 % 2 == 0 ? .ios : .android },
            token: { u, d in String(format: "%08x%08x", u, d) + String(repeating: "a", count: 48) })
    }
}

/// Push requests the mock received (its total also counts FCM OAuth token requests).
func pushes(_ s: MockStatsSnapshot) -> Int { s.totalRequests - s.tokenRequests }

@Suite(.serialized, .tags(.integration)) struct WorkerProcessTests {
    static let devices = 20_000
    static let inFlight = 400
    static let recordBatch = 200

    func workerKeys() -> [String: String] {
        [
            "inFlight": "\(Self.inFlight)", "recordBatchSize": "\(Self.recordBatch)", "reclaimIdleMs": "1500",
            "blockMs": "200", "drainSeconds": "3",
        ]
    }

    /// The event stream holds one `outcome` entry per device of `job`, each with its own message id.
    func expectEachOutcomeToldOnce(_ w: MockWorld, job: String) throws {
        var told: Set<String> = []
        var entries = 0
        for f in try eventStream(w.h.admin.client) {
            guard f["kind"] == "outcome", f["job"] == job else { continue }
            entries += 1
            told.insert(f["messageId"] ?? "")
        }
        #expect(entries == Self.devices && told.count == Self.devices && !told.contains(""), "\(entries) entries")
    }

    @Test func killedWorkerIsReclaimedWithBoundedDuplicates() async throws {
        // 10 ms per answer, so the 20,000-device job is mid-way when the worker is killed.
        let w = try MockWorld(mockConfig: #"{"latencyMs": 10}"#)
        defer { w.stop() }
        try w.registerCampaign()
        // The hourly limits are exactly the campaign's devices per platform: a device charged twice (sent by A,
        // not recorded, resent by B) would push others over quota.
        let config = try w.writeConfig(worker: workerKeys(), quotas: (Self.devices / 2, Self.devices / 2))
        let a = try WorkerProcess(config: config, consumer: "A", logDirectory: w.dir)
        defer { if a.isRunning { a.kill9() } }
        try w.h.producer.enqueue(
            PushJob(
                id: "campaign", org: "org1", app: "app1",
                recipients: (0..<500).map { RecipientID("user\($0)") },
                notification: VolleyCore.Notification(title: "Sale", body: "Today only")))
        try await actWhen("5,000 requests from worker A: \(a.log.suffix(2000))", timeout: .seconds(60)) {
            w.mock.stats().totalRequests >= 5_000
        } then: {
            a.kill9()
        }
        // The mock may still be reading what A wrote before it died: wait until its count has not moved for 200 ms.
        var sentByA = pushes(w.mock.stats())
        var lastChange = Date()
        try? await waitUntil("the mock's count to settle", timeout: .seconds(10)) {
            let now = pushes(w.mock.stats())
            if now != sentByA {
                sentByA = now
                lastChange = Date()
            }
            return Date().timeIntervalSince(lastChange) > 0.2
        }
        #expect(sentByA < Self.devices, "worker A finished before it was killed; the test proves nothing")
        let recordedByA = try w.h.ledger(job: "campaign").count

        let b = try WorkerProcess(config: config, consumer: "B", logDirectory: w.dir)
        defer { if b.isRunning { b.kill9() } }
        try await waitUntil("the report of campaign: no report: \(b.log.suffix(2000))", timeout: .seconds(90)) {
            (try? w.h.report(for: "campaign")) != nil
        }
        let r = try #require(try w.h.report(for: "campaign"))
        let s = w.mock.stats()
        let ledger = try w.h.ledger(job: "campaign")
        // Every device ends with exactly one terminal outcome.
        #expect(ledger.count == Self.devices)
        #expect(r.devices == Self.devices)
        #expect(r.accepted + r.rejected + r.failed == Self.devices)
        #expect(r.accepted == Self.devices)
        #expect(r.quotaExceeded == 0)
        #expect(r.deliveries == 2)
        // The quota counted each device once: used is the campaign's devices. A batch A recorded but was killed
        // before settling the hour for stays pending (at most one batch), never charged twice. Summed over this
        // hour and the one before, in case the run crossed the top of the hour.
        let hour = QuotaHour(containing: Date())
        for platform in [Platform.ios, .android] {
            var used: Int64 = 0
            var pending: Int64 = 0
            for h in [QuotaHour(index: hour.index - 1), hour] {
                let counters =
                    try w.h.admin.client.checked([
                        "HMGET", RecipientKeys(org: "org1").quota(platform, h),
                        "used", "pending",
                    ]).array ?? []
                used += counters.first?.integer ?? 0
                pending += counters.last?.integer ?? 0
            }
            #expect(used == Int64(Self.devices / 2), "\(platform) used")
            #expect(pending <= Int64(Self.recordBatch), "\(platform) pending")
        }
        #expect(r.alreadyRecorded == recordedByA)
        // The event stream tells each device's outcome once, across the crash and the redelivery.
        try expectEachOutcomeToldOnce(w, job: "campaign")
        // Duplicates: what A had sent but not recorded when it died; bounded by in-flight + one record batch.
        // (The mock's own duplicate counter sees APNs apns-id repeats only, so count resends from the totals.)
        let resent = pushes(s) - Self.devices
        print(
            "kill -9 figures: sentByA=\(sentByA) recordedByA=\(recordedByA) resent=\(resent) "
                + "apnsDuplicatesSeenByMock=\(s.duplicateDeliveries) window=\(Self.inFlight + Self.recordBatch)"
        )
        #expect(resent == sentByA - recordedByA)
        #expect(resent <= Self.inFlight + Self.recordBatch)
        #expect(s.duplicateDeliveries <= resent)
        try await waitUntil("no pending stream entries") { (try? w.h.producer.pendingCount()) == 0 }
    }

    @Test func sigtermDrainsWithinDeadlineAndAnotherWorkerFinishes() async throws {
        // A slow mock (30 ms per response) so the job is still running when SIGTERM arrives.
        let w = try MockWorld(mockConfig: #"{"latencyMs": 30}"#)
        defer { w.stop() }
        try w.registerCampaign()
        var keys = workerKeys()
        keys["inFlight"] = "200"
        keys["drainSeconds"] = "1"
        let config = try w.writeConfig(worker: keys)
        let a = try WorkerProcess(config: config, consumer: "A", logDirectory: w.dir)
        defer { if a.isRunning { a.kill9() } }
        // One small job first: it must complete and be acknowledged before the drain.
        try w.h.producer.enqueue(
            PushJob(
                id: "small", org: "org1", app: "app1", recipients: ["user1"],
                notification: VolleyCore.Notification(title: "t")))
        try await waitUntil("the report of small: \(a.log.suffix(2000))", timeout: .seconds(60)) {
            (try? w.h.report(for: "small")) != nil
        }
        try w.h.producer.enqueue(
            PushJob(
                id: "big", org: "org1", app: "app1",
                recipients: (0..<500).map { RecipientID("user\($0)") },
                notification: VolleyCore.Notification(title: "t")))
        var sigterm = Date()
        try await actWhen("1,000 requests at the mock", timeout: .seconds(60)) {
            w.mock.stats().totalRequests >= 1_000
        } then: {
            sigterm = Date()
            a.terminate()
        }
        try await waitUntil("worker A to exit after SIGTERM: \(a.log.suffix(2000))", timeout: .seconds(15)) {
            !a.isRunning
        }
        #expect(a.process.terminationStatus == 0)
        #expect(Date().timeIntervalSince(sigterm) < 1 + 5 + 3) // drainSeconds + grace + process teardown
        #expect(try w.h.report(for: "big") == nil)
        #expect(try w.h.producer.pendingCount() == 1)
        let recordedByA = try w.h.ledger(job: "big").count
        let sentByA = pushes(w.mock.stats()) - 40

        let b = try WorkerProcess(config: config, consumer: "B", logDirectory: w.dir)
        defer { if b.isRunning { b.kill9() } }
        try await waitUntil("the report of big: \(b.log.suffix(2000))", timeout: .seconds(120)) {
            (try? w.h.report(for: "big")) != nil
        }
        let r = try #require(try w.h.report(for: "big"))
        #expect(r.accepted == Self.devices)
        #expect(r.alreadyRecorded == recordedByA)
        try expectEachOutcomeToldOnce(w, job: "big")
        #expect(recordedByA == sentByA) // a graceful drain records everything it sent
        #expect(w.mock.stats().duplicateDeliveries == 0)
        #expect(try w.h.ledger(job: "big").count == Self.devices)
    }
}
