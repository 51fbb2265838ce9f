import Foundation
import Logging
import Testing
import VolleyCore
import VolleyEngine
import VolleyTestDoubles
import VolleyTestTags

@Suite(.tags(.unit)) struct JobLogTests {
    @Test func jobLinesCarryJobEntryOrgAppAndFailuresAreCountedPerReason() async throws {
        let backend = InMemoryBackend()
        let devices = (0..<6).map { Device(platform: .ios, token: DeviceToken("tok-\($0)"), user: "user0") }
        backend.register(org: "org1", app: "app1", user: "user0", devices)
        let ios = FakePushSender(platform: .ios) { d in
            switch d.token.rawValue {
            case "tok-0", "tok-1": .rejected(status: 410, reason: "Unregistered", action: .removeToken)
            case "tok-2": .failed(reason: "Timeout", resendWasSafe: false)
            default: .accepted
            }
        }
        let log = CapturedLog()
        let c = WorkerConfiguration(
            consumer: "w1", concurrentJobs: 1, inFlight: 100, blockMillis: 20, reclaimIdleMillis: 60_000,
            reclaimIntervalMillis: 60_000, maxDeliveries: 5, drainDeadlineSeconds: 1, recordBatch: 10, chunkSize: 100)
        let w = PipelineWorker(
            configuration: c, backend: backend, apps: StaticAppDirectory(["app1": [.ios: ios]]), logger: log.logger)
        try w.start()
        defer { w.drain(deadline: 1) }
        let entry = try backend.enqueue(
            PushJob(
                id: "j-log", org: "org1", app: "app1", recipients: ["user0"],
                notification: VolleyCore.Notification(title: "t")))
        try await waitUntil("the job's entry acknowledged") { backend.ackedEntries == [entry] }
        try await waitUntil("the job done line") { log.lines.contains { $0.message == "job done" } }
        let aboutJob = log.lines.filter { $0.metadata["job"] != nil }
        // One summary line, not a line per failed device.
        #expect(aboutJob.map(\.message) == ["job done"])
        let done = try #require(aboutJob.first?.metadata)
        #expect(done["job"]?.description == "j-log")
        #expect(done["entry"]?.description == entry.rawValue)
        #expect(done["org"]?.description == "org1")
        #expect(done["app"]?.description == "app1")
        #expect(done["rejectedByReason"] == .dictionary(["Unregistered": "2"]))
        #expect(done["failedByReason"] == .dictionary(["Timeout": "1"]))
        #expect(done["accepted"]?.description == "3")
    }

    @Test func aDeadLetteredJobsLineNamesItsOrgAndApp() async throws {
        let backend = InMemoryBackend()
        let log = CapturedLog()
        let w = PipelineWorker(
            configuration: WorkerConfiguration(consumer: "w1", concurrentJobs: 1, blockMillis: 20),
            backend: backend, apps: StaticAppDirectory([:]), logger: log.logger)
        try w.start()
        defer { w.drain(deadline: 1) }
        try backend.enqueue(
            PushJob(
                id: "j-app", org: "org9", app: "missing", recipients: ["u"],
                notification: VolleyCore.Notification(title: "t")))
        try await waitUntil("the job dead-lettered line") { log.lines.contains { $0.message == "job dead-lettered" } }
        let line = try #require(log.lines.first { $0.message == "job dead-lettered" }?.metadata)
        #expect(line["org"]?.description == "org9")
        #expect(line["app"]?.description == "missing")
        #expect(line["job"]?.description == "j-app")
    }
}
