import Crypto
import Foundation
import Testing
import VolleyCore
import VolleyService
import VolleyStore
import VolleyTestDoubles
import VolleyTestSupport
import VolleyTestTags

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// A `volley worker` process's operations endpoint, against real Redis and the mock: `/metrics` agrees with the
/// job reports, `/readyz` follows Redis, SIGHUP reloads the apps without dropping a send.
@Suite(.serialized, .tags(.integration)) struct OperationsProcessTests {
    /// A worker whose endpoint listens on a free loopback port, read from its log.
    struct OperatedWorker {
        let process: WorkerProcess
        let port: Int

        init(_ w: MockWorld, config: String, consumer: String) async throws {
            let p = try WorkerProcess(config: config, consumer: consumer, logDirectory: w.dir)
            try? await waitUntil("the operations endpoint's address in the log", timeout: .seconds(60)) {
                Self.port(in: p.log) != nil || !p.isRunning
            }
            process = p
            port = try #require(Self.port(in: p.log), "no operations endpoint in the log: \(p.log.suffix(2000))")
        }

        static func port(in log: String) -> Int? {
            guard let r = log.range(of: #"address=127\.0\.0\.1:[0-9]+"#, options: .regularExpression) else {
                return nil
            }
            return Int(log[r].split(separator: ":").last ?? "")
        }

        /// One GET on the endpoint; status 0 when it did not answer within 5 s.
        func get(_ path: String) async -> (status: Int, body: String) {
            guard let url = URL(string: "http://127.0.0.1:\(port)\(path)") else { return (0, "") }
            var request = URLRequest(url: url)
            request.timeoutInterval = 5
            guard let (data, response) = try? await URLSession.shared.data(for: request) else { return (0, "") }
            return ((response as? HTTPURLResponse)?.statusCode ?? 0, String(decoding: data, as: UTF8.self))
        }

        func metrics() async -> Scrape { Scrape(await get("/metrics").body) }
    }

    /// A parsed Prometheus text exposition.
    struct Scrape {
        let samples: [String: Double]
        init(_ text: String) {
            var s: [String: Double] = [:]
            for line in text.split(separator: "\n") where !line.hasPrefix("#") {
                guard let space = line.lastIndex(of: " "), let v = Double(line[line.index(after: space)...]) else {
                    continue
                }
                s[String(line[..<space])] = v
            }
            samples = s
        }
        /// The sample of `name` whose labels include `labels` (summed when several match).
        func value(_ name: String, _ labels: [String: String] = [:]) -> Double? {
            var sum: Double?
            for (key, v) in samples {
                let base = key.split(separator: "{", maxSplits: 1).first.map(String.init) ?? key
                guard base == name else { continue }
                if labels.allSatisfy({ key.contains("\($0.key)=\"\($0.value)\"") }) { sum = (sum ?? 0) + v }
            }
            return sum
        }
    }

    func config(_ w: MockWorld, worker: [String: String] = ["blockMs": "200"]) throws -> String {
        var l = w.local
        l.logLevel = "info"
        l.worker = worker
        let path = w.dir.appendingPathComponent("volley-ops.yaml").path
        try l.write(to: path)
        return path
    }

    @Test func metricsAfterAJobAgreeWithItsReport() async throws {
        let w = try MockWorld(
            mockConfig: #"{"apns": {"unregisteredPrefixes": ["dead"]}, "fcm": {"unregisteredPrefixes": ["dead"]}}"#)
        defer { w.stop() }
        // 120 users × 3 devices; every 10th token is dead at the mock.
        try w.h.register(
            users: 120, devicesPerUser: 3, platform: { $0 % 3 == 0 ? .android : .ios },
            token: { u, d in
                ((u * 3 + d) % 10 == 0 ? "dead" : "beef") + String(format: "%08x%02x", u, d)
                    + String(repeating: "0", count: 54)
            })
        let worker = try await OperatedWorker(w, config: try config(w), consumer: "ops-metrics")
        defer { worker.process.kill9() }
        let before = await worker.metrics()
        // Every series of the closed label sets exists, at zero, before the first job.
        for outcome in ["accepted", "rejected", "failed", "quota_exceeded"] {
            #expect(before.value("volley_notifications_total", ["app": "app1", "outcome": outcome]) == 0)
        }
        #expect(
            before.value("volley_notification_failures_total", ["provider": "apns", "reason": "Unregistered"]) == 0)
        #expect(before.value("volley_notification_failures_total", ["provider": "fcm", "reason": "other"]) == 0)
        #expect(before.value("volley_jobs_total", ["result": "dead_lettered"]) == 0)
        #expect(before.value("volley_dead_letters_total", ["reason": "invalid-json"]) == 0)
        #expect(before.value("volley_provider_requests_total", ["provider": "fcm", "status_class": "5xx"]) == 0)
        #expect(before.value("volley_build_info", ["version": VolleyVersion.current]) == 1)
        #expect(before.value("volley_draining") == 0)

        try w.h.producer.enqueue(
            PushJob(
                id: "metrics-job", org: "org1", app: "app1",
                recipients: (0..<120).map { RecipientID("user\($0)") } + ["ghost"],
                notification: VolleyCore.Notification(title: "Hello")))
        try await waitUntil("the report of metrics-job: \(worker.process.log)", timeout: .seconds(60)) {
            (try? w.h.report(for: "metrics-job")) != nil
        }
        let r = try #require(try w.h.report(for: "metrics-job"))
        #expect(r.accepted > 0 && r.rejected > 0)
        // Counters are written before the report is published: one scrape after the report sees them all.
        let after = await worker.metrics()
        func delta(_ name: String, _ labels: [String: String]) -> Int {
            Int((after.value(name, labels) ?? 0) - (before.value(name, labels) ?? 0))
        }
        #expect(delta("volley_notifications_total", ["outcome": "accepted"]) == r.accepted)
        #expect(delta("volley_notifications_total", ["outcome": "rejected"]) == r.rejected)
        #expect(delta("volley_notifications_total", ["outcome": "failed"]) == r.failed)
        #expect(delta("volley_notifications_total", ["outcome": "quota_exceeded"]) == r.quotaExceeded)
        #expect(delta("volley_notifications_total", ["outcome": "no_devices"]) == r.noDevices)
        #expect(delta("volley_notifications_total", ["outcome": "unknown_recipient"]) == r.unknownRecipients)
        #expect(
            delta("volley_notification_failures_total", ["reason": "Unregistered"])
                + delta("volley_notification_failures_total", ["reason": "UNREGISTERED"]) == r.rejected)
        #expect(delta("volley_device_tokens_removed_total", [:]) == r.tokensRemoved)
        #expect(delta("volley_provider_requests_total", ["status_class": "2xx"]) == r.accepted)
        #expect(delta("volley_provider_request_duration_seconds_count", [:]) == r.accepted + r.rejected + r.failed)
        #expect(delta("volley_jobs_total", ["result": "completed"]) == 1)
        #expect(delta("volley_job_duration_seconds_count", [:]) == 1)
        #expect(after.value("volley_stream_pending") != nil)
        #expect(after.value("volley_provider_token_refreshes_total", ["provider": "apns", "result": "success"]) == 1)
    }

    @Test func readyzFollowsRedisAndLivezDoesNot() async throws {
        // Persistent Redis: the stream and its consumer group survive the restart.
        let w = try MockWorld(persistent: true)
        defer { w.stop() }
        let worker = try await OperatedWorker(w, config: try config(w), consumer: "ops-ready")
        defer { worker.process.kill9() }
        try await waitUntil("/readyz to answer 200", timeout: .seconds(30)) {
            await worker.get("/readyz").status == 200
        }
        let ready = await worker.get("/readyz").body
        for check in ["\"redis\"", "\"consumer_group\"", "\"credentials\"", "\"draining\""] {
            #expect(ready.contains(check), "\(ready)")
        }

        w.redis.stop()
        try await waitUntil("/readyz to answer 503 after Redis stopped", timeout: .seconds(5)) {
            await worker.get("/readyz").status == 503
        }
        #expect(await worker.get("/readyz").body.contains("\"status\":\"fail\""))
        // Liveness never depends on Redis.
        let live = await worker.get("/livez")
        #expect(live.status == 200, "\(live.body)")

        try w.redis.start()
        try await waitUntil("/readyz to answer 200 again after Redis came back", timeout: .seconds(30)) {
            await worker.get("/readyz").status == 200
        }
    }

    @Test func sighupRotatesTheAPNsKeyWithoutDroppingASend() async throws {
        // 5 ms per answer: the 3,000-device job is still sending when the signal arrives.
        let w = try MockWorld(mockConfig: #"{"latencyMs": 5}"#)
        defer { w.stop() }
        try w.h.register(
            users: 300, devicesPerUser: 10, platform: { _ in .ios },
            token: { u, d in String(format: "%08x%08x", u, d) + String(repeating: "b", count: 48) })
        let path = try config(w, worker: ["blockMs": "200", "inFlight": "50", "concurrentJobs": "1"])
        let worker = try await OperatedWorker(w, config: path, consumer: "ops-reload")
        defer { worker.process.kill9() }

        try w.h.producer.enqueue(
            PushJob(
                id: "before", org: "org1", app: "app1", recipients: ["user1"],
                notification: VolleyCore.Notification(title: "t")))
        try await waitUntil("the report of before: \(worker.process.log)", timeout: .seconds(60)) {
            (try? w.h.report(for: "before")) != nil
        }
        let tokensBefore = w.mock.stats().apnsProviderTokens
        #expect(tokensBefore.count == 1)

        // The rotated key: a new key of the team with its own key id (as Apple issues one), written to a new file
        // as a Secret update would, and the configuration pointing at it. The mock trusts both keys.
        let newKey = P256.Signing.PrivateKey()
        let newKeyID = "ROTATED001"
        w.mock.server.trustAPNsKey(keyID: newKeyID, publicKey: newKey.publicKey)
        let rotated = w.dir.appendingPathComponent("AuthKey_\(newKeyID).p8").path
        try newKey.pemRepresentation.write(toFile: rotated, atomically: true, encoding: .utf8)
        var l = w.local
        l.logLevel = "info"
        l.worker = ["blockMs": "200", "inFlight": "50", "concurrentJobs": "1"]
        l.apnsKeyFile = rotated
        l.apnsKeyID = newKeyID
        try l.write(to: path)

        try w.h.producer.enqueue(
            PushJob(
                id: "during", org: "org1", app: "app1", recipients: (0..<300).map { RecipientID("user\($0)") },
                notification: VolleyCore.Notification(title: "t")))
        try await actWhen("500 APNs sends accepted", timeout: .seconds(60)) {
            w.mock.stats().acceptedAPNs >= 500
        } then: {
            kill(worker.process.pid, SIGHUP)
        }
        try await waitUntil("a successful reload counted: \(worker.process.log.suffix(2000))", timeout: .seconds(20)) {
            await worker.metrics().value("volley_config_reloads_total", ["result": "success"]) == 1
        }
        try await waitUntil("the report of during: \(worker.process.log)", timeout: .seconds(120)) {
            (try? w.h.report(for: "during")) != nil
        }
        let r = try #require(try w.h.report(for: "during"))
        // Nothing dropped: every device accepted once, none failed, none resent.
        #expect(r.accepted == 3_000 && r.failed == 0 && r.rejected == 0)
        #expect(w.mock.stats().duplicateDeliveries == 0)
        #expect(w.mock.stats().acceptedAPNs == 3_010)
        // The sends after the reload carried a token the mock had not seen: minted with the new key file.
        let tokensAfter = w.mock.stats().apnsProviderTokens
        #expect(!tokensAfter.subtracting(tokensBefore).isEmpty)
        #expect(
            await worker.metrics().value(
                "volley_provider_token_refreshes_total", ["provider": "apns", "result": "success"])
                == 2)

        // An invalid file: nothing changes, every problem is logged by key, the result is counted.
        try "worker:\n  inFlght: 3\nmetrics:\n  port: -1\n".write(toFile: path, atomically: true, encoding: .utf8)
        kill(worker.process.pid, SIGHUP)
        try await waitUntil("an invalid reload counted", timeout: .seconds(20)) {
            await worker.metrics().value("volley_config_reloads_total", ["result": "invalid"]) == 1
        }
        let log = worker.process.log
        #expect(log.contains("key=worker.inFlght") && log.contains("key=metrics.port"), "\(log.suffix(3000))")
        try w.h.producer.enqueue(
            PushJob(
                id: "after", org: "org1", app: "app1", recipients: ["user2"],
                notification: VolleyCore.Notification(title: "t")))
        try await waitUntil("the report of after with 10 accepted", timeout: .seconds(60)) {
            (try? w.h.report(for: "after"))?.accepted == 10
        }
    }
}
