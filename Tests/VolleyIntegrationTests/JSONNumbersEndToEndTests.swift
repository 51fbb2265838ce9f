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

/// A job's pass-through numbers reach the provider digit for digit, whether the job came through `POST /v1/jobs`
/// or straight onto the stream with `XADD`: integers past 2^53 and past 64 bits, and decimals a `Double` rounds.
@Suite(.serialized, .tags(.integration)) struct JSONNumbersEndToEndTests {
    static let numbers = [
        ("orderId", "9007199254740993"), ("big", "18446744073709551617"), ("ratio", "0.1"), ("tiny", "1e-7"),
        ("negative", "-9223372036854775809"),
    ]
    static let iosToken = "beef" + String(repeating: "7", count: 60)
    static let androidToken = "fcm-numbers-1"

    /// A job to one iOS and one Android device with the numbers in `data`, and a raw APNs payload for the other
    /// iOS device carrying them beside `aps`.
    static func jobs(id: String) -> (data: String, raw: String) {
        let data = numbers.map { #""\#($0.0)":\#($0.1)"# }.joined(separator: ",")
        let devices = #"[{"platform":"ios","token":"\#(iosToken)"},{"platform":"android","token":"\#(androidToken)"}]"#
        let rawToken = "cafe" + String(repeating: "7", count: 60)
        return (
            #"{"id":"\#(id)","app":"app1","devices":\#(devices),"notification":{"title":"N","data":{\#(data)}}}"#,
            #"{"id":"\#(id)-raw","app":"app1","devices":[{"platform":"ios","token":"\#(rawToken)"}],"#
                + #""notification":{"apns":{"aps":{"alert":"N"},\#(data)}}}"#
        )
    }

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
}
