import Foundation
import MetricsTestKit
import Testing
import VolleyCore
import VolleyEngine
import VolleyTestDoubles
import VolleyTestTags

/// The engine's counters agree with the job's report, and every series of the closed label sets exists at zero
/// before anything happens. A test factory, not the process-wide bootstrap.
@Suite(.tags(.unit)) struct EngineMetricsTests {
    @Test func seriesExistAtZeroBeforeAnyJob() throws {
        let m = TestMetrics()
        _ = EngineMetrics(apps: ["app1", "app2"], factory: m)
        for app in ["app1", "app2"] {
            for provider in ["apns", "fcm"] {
                for outcome in EngineMetrics.deviceOutcomes {
                    let c = try m.expectCounter(
                        "volley_notifications_total", [("provider", provider), ("app", app), ("outcome", outcome)])
                    #expect(c.totalValue == 0)
                }
            }
            for outcome in EngineMetrics.recipientOutcomes {
                _ = try m.expectCounter(
                    "volley_notifications_total", [("provider", "none"), ("app", app), ("outcome", outcome)])
            }
        }
        for reason in ["Unregistered", "TooManyProviderTokenUpdates", "other"] {
            _ = try m.expectCounter("volley_notification_failures_total", [("provider", "apns"), ("reason", reason)])
        }
        for reason in ["UNREGISTERED", "QUOTA_EXCEEDED", "other"] {
            _ = try m.expectCounter("volley_notification_failures_total", [("provider", "fcm"), ("reason", reason)])
        }
        // A provider outage's two endings have series of their own, not `other`.
        for provider in ["apns", "fcm"] {
            for reason in ["transport:provider-unreachable", "transport:written-unanswered"] {
                let c = try m.expectCounter(
                    "volley_notification_failures_total", [("provider", provider), ("reason", reason)])
                #expect(c.totalValue == 0)
            }
        }
        for result in EngineMetrics.jobResults { _ = try m.expectCounter("volley_jobs_total", [("result", result)]) }
        _ = try m.expectCounter("volley_dead_letters_total", [("reason", "too-many-deliveries")])
        #expect(try m.expectGauge("volley_draining").lastValue == 0)
    }

    @Test func countersAfterAJobMatchItsReport() async throws {
        let backend = InMemoryBackend()
        let devices = (0..<30).map {
            Device(platform: $0 % 3 == 0 ? .android : .ios, token: DeviceToken("tok-\($0)"), user: "user0")
        }
        backend.register(org: "org1", app: "app1", user: "user0", devices)
        // Every 5th device is dead, every 7th fails without an answer, the rest are accepted.
        let outcome: @Sendable (Device) -> DeliveryOutcome = { d in
            let n = Int(d.token.rawValue.dropFirst(4)) ?? 0
            if n % 5 == 0 {
                return .rejected(
                    status: 410, reason: d.platform == .ios ? "Unregistered" : "UNREGISTERED", action: .removeToken)
            }
            if n % 7 == 0 { return .failed(reason: "transport:timeout", resendWasSafe: false) }
            return .accepted
        }
        let m = TestMetrics()
        let c = WorkerConfiguration(
            consumer: "w1", concurrentJobs: 1, inFlight: 100, blockMillis: 20, reclaimIdleMillis: 60_000,
            reclaimIntervalMillis: 60_000, recordBatch: 7, chunkSize: 100)
        let w = PipelineWorker(
            configuration: c, backend: backend,
            apps: StaticAppDirectory([
                "app1": [
                    .ios: FakePushSender(platform: .ios, outcome: outcome),
                    .android: FakePushSender(platform: .android, outcome: outcome),
                ]
            ]),
            metrics: EngineMetrics(apps: ["app1"], factory: m))
        try w.start()
        defer { w.drain(deadline: 1) }
        _ = try backend.enqueue(
            PushJob(
                id: "j1", org: "org1", app: "app1", recipients: ["user0", "nobody"],
                notification: VolleyCore.Notification(title: "t")))
        try await waitUntil("the job's report") { backend.allReports.count == 1 }
        let r = try #require(backend.allReports.first)
        #expect(r.accepted > 0 && r.rejected > 0 && r.failed > 0)

        func total(_ outcome: String, provider: String? = nil) throws -> Int {
            var sum: Int64 = 0
            for p in provider.map({ [$0] }) ?? ["apns", "fcm"] {
                sum += try m.expectCounter(
                    "volley_notifications_total", [("provider", p), ("app", "app1"), ("outcome", outcome)]
                ).totalValue
            }
            return Int(sum)
        }
        #expect(try total("accepted") == r.accepted)
        #expect(try total("rejected") == r.rejected)
        #expect(try total("failed") == r.failed)
        #expect(try total("no_devices", provider: "none") == r.noDevices)
        let unregistered =
            try m.expectCounter(
                "volley_notification_failures_total", [("provider", "apns"), ("reason", "Unregistered")]
            )
            .totalValue
            + m.expectCounter("volley_notification_failures_total", [("provider", "fcm"), ("reason", "UNREGISTERED")])
            .totalValue
        #expect(Int(unregistered) == r.rejected)
        let other =
            try m.expectCounter("volley_notification_failures_total", [("provider", "apns"), ("reason", "other")])
            .totalValue
            + m.expectCounter("volley_notification_failures_total", [("provider", "fcm"), ("reason", "other")])
            .totalValue
        #expect(Int(other) == r.failed)
        #expect(try m.expectCounter("volley_jobs_total", [("result", "completed")]).totalValue == 1)
        #expect(try m.expectTimer("volley_job_duration_seconds").values.count == 1)
        #expect(try m.expectTimer("volley_job_queue_wait_seconds").values.count == 1)
    }

    @Test func aDeadLetterIsCountedByReason() async throws {
        let backend = InMemoryBackend()
        let m = TestMetrics()
        let w = PipelineWorker(
            configuration: WorkerConfiguration(consumer: "w1", concurrentJobs: 1, blockMillis: 20),
            backend: backend, apps: StaticAppDirectory([:]), metrics: EngineMetrics(apps: [], factory: m))
        try w.start()
        defer { w.drain(deadline: 1) }
        _ = try backend.enqueue(
            PushJob(id: "j1", org: "org1", app: "nope", recipients: ["u"], notification: .init(title: "t")))
        try await waitUntil("the unknown-app dead letter counted") {
            (try? m.expectCounter("volley_dead_letters_total", [("reason", "unknown-app")]).totalValue) == 1
        }
        #expect(try m.expectCounter("volley_jobs_total", [("result", "dead_lettered")]).totalValue == 1)
        w.drain(deadline: 1)
        #expect(try m.expectGauge("volley_draining").lastValue == 1)
    }
}
