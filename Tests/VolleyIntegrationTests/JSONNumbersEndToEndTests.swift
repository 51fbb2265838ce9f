import Foundation
import Logging
import Testing
import VolleyCore
import VolleyEngine
import VolleyMock
import VolleyService
import VolleyStore
import VolleyTestDoubles
import VolleyTestSupport
import VolleyTestTags

/// A job's pass-through numbers reach the provider digit for digit from every producer: `POST /v1/jobs`, `XADD`,
/// `volley send`, the `/v1` job written from its decoded form, the Connect push (with and without an
/// `Idempotency-Key`), a schedule's run and the shard jobs a campaign is split into. Integers past 2^53 and past
/// 64 bits, decimals a `Double` rounds, an exponent and 42 digits. (The custom notification action and sync hints
/// carry no numbers of their own: text fields, record ids.)
@Suite(.serialized, .tags(.integration)) struct JSONNumbersEndToEndTests {
    static let numbers = [
        ("orderId", "9007199254740993"), ("big", "18446744073709551617"), ("ratio", "0.1"), ("tiny", "1e-7"),
        ("negative", "-9223372036854775809"), ("long", "123456789012345678901234567890123456789012"),
    ]
    static let iosToken = "beef" + String(repeating: "7", count: 60)
    static let androidToken = "fcm-numbers-1"

    /// A job to one iOS and one Android device with the numbers in `data`, and a raw APNs payload for the other
    /// iOS device carrying them beside `aps`.
    static func jobs(id: String) -> (data: String, raw: String) {
        let data = members
        let devices = #"[{"platform":"ios","token":"\#(iosToken)"},{"platform":"android","token":"\#(androidToken)"}]"#
        let rawToken = "cafe" + String(repeating: "7", count: 60)
        return (
            #"{"id":"\#(id)","app":"app1","devices":\#(devices),"notification":{"title":"N","data":{\#(data)}}}"#,
            #"{"id":"\#(id)-raw","app":"app1","devices":[{"platform":"ios","token":"\#(rawToken)"}],"#
                + #""notification":{"apns":{"aps":{"alert":"N"},\#(data)}}}"#
        )
    }

    /// The numbers as JSON object members, `"orderId":9007199254740993,…`.
    static var members: String { numbers.map { #""\#($0.0)":\#($0.1)"# }.joined(separator: ",") }

    /// Every captured push of `job`'s devices carries each number's text: as a JSON number on APNs, as the
    /// number's text in a string on FCM (whose data values are strings).
    static func expectNumbersArrived(_ pushes: [MockCapturedPush], tokens: Set<String>) throws {
        let mine = pushes.filter { tokens.contains($0.token) }
        #expect(Set(mine.map(\.token)) == tokens)
        for push in mine {
            let body = try #require(push.json, "\(push.token): not JSON")
            for (key, text) in numbers {
                switch push.provider {
                case .apns:
                    #expect(body[key] == .number(try #require(JSONNumber(text: text))), "\(key) in \(push.token)")
                    #expect(String(decoding: push.body, as: UTF8.self).contains(#""\#(key)":\#(text)"#))
                default:
                    #expect(body["message"]?["data"]?[key] == .string(text), "\(key) in \(push.token)")
                }
            }
        }
    }

    @Test func numbersReachTheMockUnchangedThroughTheAPIAndThroughXADD() async throws {
        let w = try MockWorld(mockConfig: #"{"capturePushes": 100}"#)
        defer { w.stop() }
        let apps = try w.apps()
        defer { apps.shutdown() }
        let worker = PipelineWorker(
            configuration: WorkerConfiguration(consumer: "numbers", inFlight: 16, blockMillis: 50),
            backend: RedisPipelineBackend(endpoint: w.redis.endpoint, consumer: "numbers"), apps: apps)
        try worker.start()
        defer { worker.drain(deadline: 2) }

        // Straight onto the stream, as a producer other than Volley writes it.
        let xadd = Self.jobs(id: "num-xadd")
        try w.h.producer.enqueueRaw(fields: [
            "job": xadd.data.replacingOccurrences(of: #""app""#, with: #""org":"orgA","app""#)
        ])
        try w.h.producer.enqueueRaw(fields: [
            "job": xadd.raw.replacingOccurrences(of: #""app""#, with: #""org":"orgA","app""#)
        ])
        for id in ["num-xadd", "num-xadd-raw"] {
            try await waitUntil("the report of \(id)", timeout: .seconds(30)) {
                (try? w.h.report(for: JobID(id))) != nil
            }
            #expect(try w.h.report(for: JobID(id))?.accepted == (id.hasSuffix("raw") ? 1 : 2))
        }
        let rawToken = "cafe" + String(repeating: "7", count: 60)
        try Self.expectNumbersArrived(w.mock.capturedPushes(), tokens: [Self.iosToken, Self.androidToken, rawToken])

        // Through the API: the body is accepted as sent and the same numbers arrive.
        w.mock.resetStats()
        let api = try await RunningAPI(configFile: try APIServerTests.config(w))
        let send = try APIServerTests.key(w, org: "orgA", role: .send)
        let viaAPI = Self.jobs(id: "num-api")
        for body in [viaAPI.data, viaAPI.raw] {
            let answer = try await api.call("POST", "/v1/jobs", token: send, json: body)
            #expect(answer.status == 202, "\(answer.text)")
        }
        for id in ["num-api", "num-api-raw"] {
            try await waitUntil("the report of \(id)", timeout: .seconds(30)) {
                (try? w.h.report(for: JobID(id))) != nil
            }
        }
        try Self.expectNumbersArrived(w.mock.capturedPushes(), tokens: [Self.iosToken, Self.androidToken, rawToken])
        await api.stop()
    }

    /// `volley send --notification`, a `/v1` job written from its decoded form (`"id": null`), the Connect push with
    /// and without an `Idempotency-Key` (its payload is the APNs payload and, as strings, the FCM data), a
    /// schedule's run, and the shard jobs a `volley worker` splits a campaign into (`shardSize` 1).
    @Test func numbersReachTheMockUnchangedFromEveryOtherProducer() async throws {
        let w = try MockWorld(mockConfig: #"{"capturePushes": 100}"#)
        defer { w.stop() }
        func tokens(_ name: String) -> (ios: String, android: String) {
            let hex = Array(name.utf8).map { String($0, radix: 16) }.joined()
            return (hex + String(repeating: "7", count: 64 - hex.count), "fcm-numbers-\(name)")
        }
        func devices(_ name: String) -> String {
            let t = tokens(name)
            return #"[{"platform":"ios","token":"\#(t.ios)"},{"platform":"android","token":"\#(t.android)"}]"#
        }
        // Users for the Connect push and for the campaign split into one shard per user.
        let connect = tokens("connect")
        let shards = tokens("shards")
        func device(_ user: UserID, _ platform: Platform, _ token: String) -> DeviceImportRecord {
            DeviceImportRecord(org: "orgA", app: "app1", user: user, platform: platform, token: DeviceToken(token))
        }
        try w.h.admin.register([
            device("num-c", .ios, connect.ios), device("num-c", .android, connect.android),
            device("num-s0", .ios, shards.ios), device("num-s1", .android, shards.android),
        ])
        let api = try await RunningAPI(configFile: try APIServerTests.config(w))
        let send = try APIServerTests.key(w, org: "orgA", role: .send)
        let notification = #"{"title":"N","data":{\#(Self.members)}}"#

        // `volley send`: the notification as JSON, the job built and enqueued as the command does.
        var options = JobSubmission.Options(org: "orgA", app: "app1")
        options.tokens = ["ios:\(tokens("send").ios)", "android:\(tokens("send").android)"]
        options.notificationJSON = notification
        options.id = "num-send"
        var logger = Logger(label: "numbers")
        logger.logLevel = .warning
        let settings = PipelineSettings(endpoint: w.redis.endpoint, store: w.h.store)
        _ = try JobSubmission.submit(
            try JobSubmission.buildJob(options), settings: settings, waitSeconds: nil, logger: logger)

        // `/v1/jobs` with `"id": null`: the entry is written from the decoded job, under the Idempotency-Key.
        let null = try await api.call(
            "POST", "/v1/jobs", token: send,
            json: #"{"id":null,"app":"app1","devices":\#(devices("null")),"notification":\#(notification)}"#,
            headers: ["Idempotency-Key": "num-null"])
        #expect(null.status == 202, "\(null.text)")

        // The Connect push, submitted once under its key and enqueued straight without one.
        let push = #"{"appName":"app1","userIds":["num-c"],"payload":{"aps":{"alert":"N"},\#(Self.members)}}"#
        for headers in [["Idempotency-Key": "num-connect"], [:]] {
            let answer = try await api.call(
                "POST", "/services/data/v60.0/connect/notifications/push", token: send, json: push, headers: headers)
            #expect(answer.status == 202, "\(answer.text)")
        }

        // A schedule whose one run falls due a moment from now, and a campaign of two users.
        let run = Date(timeIntervalSince1970: (Date().timeIntervalSince1970 + 2).rounded(.up))
        let schedule = try await api.call(
            "POST", "/v1/schedules", token: send,
            json: #"{"id":"num-schedule","start":"\#(RFC3339.format(run))","frequency":"once","timeZone":"UTC","#
                + #""job":{"app":"app1","devices":\#(devices("schedule")),"notification":\#(notification)}}"#)
        #expect(schedule.status == 201, "\(schedule.text)")
        let campaign = try await api.call(
            "POST", "/v1/jobs", token: send,
            json: #"{"id":"num-shards","app":"app1","recipients":["num-s0","num-s1"],"notification":\#(notification)}"#)
        #expect(campaign.status == 202, "\(campaign.text)")

        let worker = try WorkerProcess(
            config: try w.writeConfig(worker: ["blockMs": "100", "shardSize": "1"]), consumer: "numbers-w",
            logDirectory: w.dir)
        defer { if worker.isRunning { worker.kill9() } }
        // Each producer's two devices; the Connect push's twice.
        let expected = ["send", "null", "connect", "schedule", "shards"].map { ($0, tokens($0)) }
        try await waitUntil("every producer's pushes: \(worker.log.suffix(1500))", timeout: .seconds(60)) {
            let seen = w.mock.capturedPushes().map(\.token)
            return expected.allSatisfy { name, t in
                let times = name == "connect" ? 2 : 1
                return seen.filter { $0 == t.ios }.count >= times && seen.filter { $0 == t.android }.count >= times
            }
        }
        for (name, t) in expected {
            let pushes = w.mock.capturedPushes().filter { $0.token == t.ios || $0.token == t.android }
            #expect(pushes.count == (name == "connect" ? 4 : 2), "\(name)")
            try Self.expectNumbersArrived(pushes, tokens: [t.ios, t.android])
        }
        #expect(try w.h.report(for: Schedule.runJobID(schedule: "num-schedule", run: run))?.accepted == 2)
        // The campaign went out as two shard jobs, written by the worker.
        try await waitUntil("the campaign's report", timeout: .seconds(30)) {
            (try? w.h.report(for: "num-shards")) != nil
        }
        #expect(try w.h.report(for: "num-shards")?.shards == 2)
        await api.stop()
    }
}
