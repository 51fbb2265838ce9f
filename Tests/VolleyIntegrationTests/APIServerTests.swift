import Foundation
import Logging
import Testing
import VolleyAPI
import VolleyCore
import VolleyRedis
import VolleyService
import VolleyStore
import VolleyTestDoubles
import VolleyTestSupport
import VolleyTestTags

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// A `volley api` server in this process on a free port, on a real Redis, answering a real HTTP client.
final class RunningAPI: @unchecked Sendable {
    let server: APIServer
    let task: Task<Void, any Error>
    let port: Int
    let base: String

    /// Starts the server from the config file and waits until it listens.
    init(configFile: String) async throws {
        let c = try VolleyConfiguration.load(path: configFile)
        var logger = Logger(label: "api-test")
        // Cancelling the server task at the end logs the listener's shutdown as errors: not this test's subject.
        logger.logLevel = .critical
        server = try APIRunner.server(configuration: c, logger: logger)
        let listening = NSLockBox<Int?>(nil)
        let app = server.application(onListening: { port in listening.set(port) })
        task = Task { try await app.runService() }
        // A generous bound: in a parallel run on a loaded machine the server's start waits for CPU.
        try await waitUntil("the API to listen", timeout: .seconds(120)) { listening.get() != nil }
        port = listening.get() ?? 0
        base = "http://127.0.0.1:\(port)"
    }

    func stop() async {
        task.cancel()
        _ = try? await task.value
    }

    struct Answer {
        var status: Int
        var body: Data
        var headers: [String: String]
        var json: [String: Any] { (try? JSONSerialization.jsonObject(with: body)) as? [String: Any] ?? [:] }
        var field: String? { json["field"] as? String }
        var text: String { String(decoding: body, as: UTF8.self) }
    }

    func call(
        _ method: String, _ path: String, token: String? = nil, json: String? = nil, body: Data? = nil,
        headers: [String: String] = [:]
    ) async throws -> Answer {
        var request = URLRequest(url: try #require(URL(string: base + path)))
        request.httpMethod = method
        if let token { request.setValue("Bearer \(token)", forHTTPHeaderField: "Authorization") }
        if let json {
            request.httpBody = Data(json.utf8)
            request.setValue("application/json", forHTTPHeaderField: "Content-Type")
        }
        if let body { request.httpBody = body }
        for (k, v) in headers { request.setValue(v, forHTTPHeaderField: k) }
        let (data, response) = try await URLSession.shared.data(for: request)
        let http = try #require(response as? HTTPURLResponse)
        var h: [String: String] = [:]
        for (k, v) in http.allHeaderFields { h["\(k)".lowercased()] = "\(v)" }
        return Answer(status: http.statusCode, body: data, headers: h)
    }
}

final class NSLockBox<T>: @unchecked Sendable {
    private var value: T
    private let lock = NSLock()
    init(_ value: T) { self.value = value }
    func get() -> T { lock.withLock { value } }
    func set(_ v: T) { lock.withLock { value = v } }
}

/// Real Redis, the real mock, a real `volley worker` process and the API in process.
@Suite(.serialized, .tags(.integration)) struct APIServerTests {
    static let tokenKeys = """
          userTokens:
            keys:
              - id: k2
                secret: "\(Data(repeating: 2, count: 32).base64EncodedString())"
              - id: k1
                secret: "\(Data(repeating: 1, count: 32).base64EncodedString())"
        """

    /// The world's config with app1 limited to orgA, and an `api` section.
    static func config(_ w: MockWorld, rate: (Double, Int) = (1000, 1000), extra: String = "") throws -> String {
        var yaml = w.local.yaml.replacingOccurrences(
            of: "  - name: app1\n", with: "  - name: app1\n    orgs: [\"orgA\", \"orgC\"]\n")
        yaml += """
            api:
              host: 127.0.0.1
              port: 0
              drainSeconds: 0
              maxBodyBytes: 65536
              rateLimit:
                requestsPerSecond: \(rate.0)
                burst: \(rate.1)
            \(tokenKeys)
            \(extra)
            """
        let path = w.dir.appendingPathComponent("api-\(UUID().uuidString.prefix(6)).yaml").path
        try yaml.write(toFile: path, atomically: true, encoding: .utf8)
        return path
    }

    static func key(_ w: MockWorld, org: String, role: APIRole) throws -> String {
        try APIKeyStore(client: w.redis.client(name: "keys")).create(org: OrgID(org), role: role, name: nil).key
    }

    static func userToken(_ api: RunningAPI, key: String, user: String, app: String = "app1") async throws -> String {
        let a = try await api.call(
            "POST", "/v1/user-tokens", token: key, json: #"{"userId":"\#(user)","appName":"\#(app)","ttlSeconds":600}"#)
        #expect(a.status == 201, "\(a.text)")
        return try #require(a.json["token"] as? String)
    }

    static func streamLength(_ w: MockWorld) throws -> Int64 {
        try w.redis.client(name: "xlen").checked(["XLEN", "volley:jobs"]).integer ?? -1
    }

    @Test func aJobThroughTheAPIReachesTheMockAndReportsDone() async throws {
        let w = try MockWorld()
        defer { w.stop() }
        let api = try await RunningAPI(configFile: try Self.config(w))
        let send = try Self.key(w, org: "orgA", role: .send)
        let user = try await Self.userToken(api, key: send, user: "005A")
        let iosToken = "beef" + String(repeating: "1", count: 60)
        let put = try await api.call(
            "PUT", "/v1/devices", token: user, json: #"{"platform":"ios","token":"\#(iosToken)","locale":"en-US"}"#)
        #expect(put.status == 200, "\(put.text)")
        let android = try await api.call(
            "PUT", "/v1/devices", token: user, json: #"{"platform":"android","token":"fcm-token-1"}"#)
        #expect(android.status == 200)

        let job = #"{"app":"app1","recipients":["005A"],"notification":{"title":"Hi","body":"there"}}"#
        let first = try await api.call("POST", "/v1/jobs", token: send, json: job, headers: ["Idempotency-Key": "j-1"])
        #expect(first.status == 202, "\(first.text)")
        #expect(first.json["id"] as? String == "j-1")
        #expect(try await api.call("GET", "/v1/jobs/j-1", token: send).json["state"] as? String == "queued")
        // Same body again: the first answer. Another body under the same key: 422, and nothing more enqueued.
        let replay = try await api.call("POST", "/v1/jobs", token: send, json: job, headers: ["Idempotency-Key": "j-1"])
        #expect(replay.status == 202)
        #expect(replay.json["entry"] as? String == first.json["entry"] as? String)
        #expect(replay.headers["idempotent-replayed"] == "true")
        let other = try await api.call(
            "POST", "/v1/jobs", token: send, json: job.replacingOccurrences(of: "Hi", with: "Yo"),
            headers: ["Idempotency-Key": "j-1"])
        #expect(other.status == 422)
        #expect(other.field == "Idempotency-Key")
        #expect(try Self.streamLength(w) == 1)

        let worker = try WorkerProcess(
            config: try w.writeConfig(worker: ["blockMs": "100"]), consumer: "api-w", logDirectory: w.dir)
        defer { if worker.isRunning { worker.kill9() } }
        var state = ""
        var last = RunningAPI.Answer(status: 0, body: Data(), headers: [:])
        let until = Date().addingTimeInterval(60)
        while Date() < until, state != "done" {
            last = try await api.call("GET", "/v1/jobs/j-1", token: send)
            state = last.json["state"] as? String ?? ""
            if state != "done" { try await Task.sleep(for: .milliseconds(50)) }
        }
        #expect(state == "done", "\(last.text) \(worker.log.suffix(1500))")
        let report = try #require(last.json["report"] as? [String: Any])
        #expect(report["accepted"] as? Int == 2)
        #expect(w.mock.stats().acceptedAPNs == 1)
        #expect(w.mock.stats().acceptedFCM == 1)

        // Not a debug job: no events, but a known job. Another org does not see it; an unknown job is 404.
        let events = try await api.call("GET", "/v1/jobs/j-1/events", token: send)
        #expect(events.status == 200)
        #expect((events.json["events"] as? [Any])?.isEmpty == true)
        let readerB = try Self.key(w, org: "orgB", role: .read)
        #expect(try await api.call("GET", "/v1/jobs/j-1/events", token: readerB).status == 404)
        #expect(try await api.call("GET", "/v1/jobs/nope/events", token: send).status == 404)

        // The user unregisters the iOS device; an admin sees what is left.
        let del = try await api.call("DELETE", "/v1/devices/ios/\(iosToken)", token: user)
        #expect(del.status == 204)
        let admin = try Self.key(w, org: "orgA", role: .admin)
        let devices = try await api.call("GET", "/v1/users/005A/devices", token: admin)
        #expect(devices.status == 200)
        #expect((devices.json["devices"] as? [[String: Any]])?.map { $0["platform"] as? String } == ["android"])
        await api.stop()
    }

    /// queued → running → dead-lettered, driven by hand on the stream as a worker would move the entry.
    @Test func jobStatesFollowTheStreamAndTheDeadLetters() async throws {
        let w = try MockWorld()
        defer { w.stop() }
        let api = try await RunningAPI(configFile: try Self.config(w))
        let send = try Self.key(w, org: "orgA", role: .send)
        let job = #"{"app":"app1","recipients":["005A"],"notification":{"title":"Hi"}}"#
        let posted = try await api.call("POST", "/v1/jobs", token: send, json: job, headers: ["Idempotency-Key": "s-1"])
        let entry = try #require(posted.json["entry"] as? String)
        func state() async throws -> [String: Any] { try await api.call("GET", "/v1/jobs/s-1", token: send).json }
        #expect(try await state()["state"] as? String == "queued")
        let redis = w.redis.client(name: "stream")
        _ = try redis.checked(["XGROUP", "CREATE", "volley:jobs", "volley", "0"])
        #expect(try await state()["state"] as? String == "queued")
        _ = try redis.checked(["XREADGROUP", "GROUP", "volley", "w1", "COUNT", "1", "STREAMS", "volley:jobs", ">"])
        #expect(try await state()["state"] as? String == "running")
        _ = try redis.checked([
            "XADD", "volley:dead", "*", "job", "{}", "reason", "invalid-notification", "detail", "payload too large",
            "sourceEntry", entry,
        ])
        _ = try redis.checked(["XACK", "volley:jobs", "volley", entry])
        let dead = try await state()
        #expect(dead["state"] as? String == "dead-lettered")
        #expect(dead["reason"] as? String == "invalid-notification")
        #expect(try await api.call("GET", "/v1/jobs/nope", token: send).status == 404)
        // Without the header the body's id is the idempotency key.
        let withID = job.replacingOccurrences(of: "{\"app\"", with: "{\"id\":\"b-1\",\"app\"")
        #expect(try await api.call("POST", "/v1/jobs", token: send, json: withID).json["id"] as? String == "b-1")
        #expect(
            try await api.call("POST", "/v1/jobs", token: send, json: withID).headers["idempotent-replayed"] == "true")
        await api.stop()
    }

    @Test func anotherOrgGets404ForEveryKindOfResource() async throws {
        let w = try MockWorld()
        defer { w.stop() }
        let api = try await RunningAPI(configFile: try Self.config(w))
        let adminA = try Self.key(w, org: "orgA", role: .admin)
        let adminB = try Self.key(w, org: "orgB", role: .admin)
        let adminC = try Self.key(w, org: "orgC", role: .admin)
        let userA = try await Self.userToken(api, key: adminA, user: "005A")
        let token = "a1" + String(repeating: "0", count: 62)
        #expect(
            try await api.call("PUT", "/v1/devices", token: userA, json: #"{"platform":"ios","token":"\#(token)"}"#)
                .status == 200)
        let job = #"{"app":"app1","recipients":["005A"],"notification":{"title":"A"}}"#
        #expect(
            try await api.call("POST", "/v1/jobs", token: adminA, json: job, headers: ["Idempotency-Key": "a-1"])
                .status == 202)
        #expect(
            try await api.call("PUT", "/v1/types/deal", token: adminA, json: #"{"name":"Deal closed"}"#).status == 200)

        // Jobs: org B cannot see A's job, nor replay into its id.
        let job404 = try await api.call("GET", "/v1/jobs/a-1", token: adminB)
        #expect(job404.status == 404)
        // Apps: org B may not push through app1 (orgs: orgA, orgC), nor mint user tokens for it.
        let push = try await api.call("POST", "/v1/jobs", token: adminB, json: job)
        #expect(push.status == 404)
        #expect(push.field == "app")
        let mint = try await api.call(
            "POST", "/v1/user-tokens", token: adminB, json: #"{"userId":"005A","appName":"app1"}"#)
        #expect(mint.status == 404)
        let testPush = try await api.call(
            "POST", "/v1/test-push", token: adminB, json: #"{"app":"app1","platform":"ios","token":"\#(token)"}"#)
        #expect(testPush.status == 404)
        // Devices: B's admin sees no devices of A's user; a user of org C (same app) cannot unregister A's token.
        #expect(try await api.call("GET", "/v1/users/005A/devices", token: adminB).status == 404)
        let userC = try await Self.userToken(api, key: adminC, user: "005A")
        #expect(try await api.call("DELETE", "/v1/devices/ios/\(token)", token: userC).status == 404)
        #expect(try await api.call("GET", "/v1/users/005A/devices", token: adminA).status == 200)
        // Types.
        #expect(try await api.call("GET", "/v1/types/deal", token: adminB).status == 404)
        #expect(try await api.call("DELETE", "/v1/types/deal", token: adminB).status == 404)
        #expect(try await api.call("GET", "/v1/types/deal", token: adminA).status == 200)
        // Quota: each org sees its own.
        #expect(try await api.call("GET", "/v1/quota", token: adminB).json["org"] as? String == "orgB")
        #expect(try Self.streamLength(w) == 1)
        await api.stop()
    }

    @Test func credentialsAndRolesAreChecked() async throws {
        let w = try MockWorld()
        defer { w.stop() }
        let api = try await RunningAPI(configFile: try Self.config(w))
        let read = try Self.key(w, org: "orgA", role: .read)
        let send = try Self.key(w, org: "orgA", role: .send)
        let job = #"{"app":"app1","recipients":["u"],"notification":{"title":"x"}}"#
        let none = try await api.call("POST", "/v1/jobs", json: job)
        #expect(none.status == 401)
        #expect(none.headers["www-authenticate"] == "Bearer")
        #expect(none.headers["content-type"] == "application/problem+json")
        #expect(
            try await api.call(
                "POST", "/v1/jobs", token: "vk_0123456789abcdef_" + String(repeating: "x", count: 43),
                json: job
            ).status == 401)
        // A key with a valid id but the wrong secret.
        let forged = String(send.prefix(20)) + String(repeating: "A", count: send.count - 20)
        #expect(try await api.call("GET", "/v1/quota", token: forged).status == 401)
        #expect(try await api.call("POST", "/v1/jobs", token: read, json: job).status == 403)
        #expect(try await api.call("GET", "/v1/quota", token: read).status == 200)
        let user = try await Self.userToken(api, key: send, user: "005A")
        #expect(try await api.call("POST", "/v1/jobs", token: user, json: job).status == 403)
        #expect(
            try await api.call("PUT", "/v1/devices", token: send, json: #"{"platform":"ios","token":"t"}"#)
                .status == 403)
        #expect(try await api.call("PUT", "/v1/types/x", token: send, json: #"{"name":"x"}"#).status == 403)
        // A user token signed with a key the server does not have.
        let stranger = try UserTokenSigner(keys: [UserTokenKey(id: "k2", secret: Array(repeating: 5, count: 32))])
            .sign(
                UserTokenClaims(org: "orgA", user: "005A", app: "app1", exp: Int64(Date().timeIntervalSince1970) + 60))
        #expect(
            try await api.call("PUT", "/v1/devices", token: stranger, json: #"{"platform":"ios","token":"t"}"#)
                .status == 401)
        #expect(try Self.streamLength(w) == 0)
        await api.stop()
    }

    /// A process keeps a key's record for `api.keyCacheSeconds`: a revoked key works until then, and never after.
    /// With 0, revocation takes effect on the next request.
    @Test func aRevokedKeyStopsWorkingWithinTheKeyCacheTime() async throws {
        let w = try MockWorld()
        defer { w.stop() }
        let cached = try await RunningAPI(configFile: try Self.config(w, extra: "  keyCacheSeconds: 1"))
        let uncached = try await RunningAPI(configFile: try Self.config(w, extra: "  keyCacheSeconds: 0"))
        let read = try Self.key(w, org: "orgA", role: .read)
        #expect(try await cached.call("GET", "/v1/quota", token: read).status == 200)
        #expect(try await uncached.call("GET", "/v1/quota", token: read).status == 200)
        let revokedAt = ContinuousClock.now
        let id = try #require(APIKeyFormat.id(of: read))
        #expect(try APIKeyStore(client: w.redis.client(name: "keys")).revoke(id: id))
        #expect(try await uncached.call("GET", "/v1/quota", token: read).status == 401)
        let stillCached = try await cached.call("GET", "/v1/quota", token: read).status
        #expect(stillCached == 200 || ContinuousClock.now - revokedAt >= .seconds(1))
        try await waitUntil("the revoked key answers 401", timeout: .seconds(5)) {
            try await cached.call("GET", "/v1/quota", token: read).status == 401
        }
        #expect(ContinuousClock.now - revokedAt < .seconds(3))
        await cached.stop()
        await uncached.stop()
    }

    @Test func badInputGets4xxNamingTheFieldAndWritesNothing() async throws {
        let w = try MockWorld()
        defer { w.stop() }
        let api = try await RunningAPI(configFile: try Self.config(w))
        let send = try Self.key(w, org: "orgA", role: .send)
        func post(_ json: String) async throws -> RunningAPI.Answer {
            try await api.call("POST", "/v1/jobs", token: send, json: json)
        }
        let cases: [(String, Int, String)] = [
            (#"{"app":"app1","#, 400, "body"),
            (#"[1,2]"#, 400, "body"),
            (#"{"app":"app1","recipients":["u"],"notification":{"badge":"three"}}"#, 400, "notification.badge"),
            (#"{"app":"app1","recipients":"u","notification":{}}"#, 400, "recipients"),
            (#"{"app":"app1","recipients":["u"],"notification":{},"priority":"high"}"#, 400, "priority"),
            (#"{"app":"app1","recipients":["u"],"notification":{"titel":"x"}}"#, 400, "notification.titel"),
            (#"{"app":"app1","notification":{"title":"x"}}"#, 400, "recipients"),
            (#"{"recipients":["u"],"notification":{"title":"x"}}"#, 400, "app"),
            (#"{"app":"app1","org":"orgB","recipients":["u"],"notification":{}}"#, 400, "org"),
            (#"{"app":"app1","recipients":["u"],"notification":{},"platforms":["web"]}"#, 400, "platforms[0]"),
        ]
        for (body, status, field) in cases {
            let a = try await post(body)
            #expect(a.status == status, "\(body) → \(a.text)")
            #expect(a.field == field, "\(body) → \(a.text)")
        }
        let many = (0...500).map { "\"u\($0)\"" }.joined(separator: ",")
        let tooMany = try await post(#"{"app":"app1","recipients":[\#(many)],"notification":{"title":"x"}}"#)
        #expect(tooMany.status == 400)
        #expect(tooMany.field == "recipients")
        let big = try await post(
            #"{"app":"app1","recipients":["u"],"notification":{"title":"\#(String(repeating: "x", count: 70_000))"}}"#)
        #expect(big.status == 413)
        #expect(big.field == "body")
        let user = try await Self.userToken(api, key: send, user: "005A")
        let device = try await api.call("PUT", "/v1/devices", token: user, json: #"{"platform":"web","token":"t"}"#)
        #expect(device.status == 400)
        #expect(device.field == "platform")
        let ttl = try await api.call(
            "POST", "/v1/user-tokens", token: send, json: #"{"userId":"u","appName":"app1","ttlSeconds":90000}"#)
        #expect(ttl.field == "ttlSeconds")
        #expect(try Self.streamLength(w) == 0)
        let devices = try w.h.admin.counts(org: "orgA", app: "app1")
        #expect(devices.devices == 0)
        await api.stop()
    }

    @Test func rateLimitAnswers429WithRetryAfter() async throws {
        let w = try MockWorld()
        defer { w.stop() }
        let api = try await RunningAPI(configFile: try Self.config(w, rate: (0.5, 3)))
        let read = try Self.key(w, org: "orgA", role: .read)
        var statuses: [Int] = []
        for _ in 0..<4 { statuses.append(try await api.call("GET", "/v1/quota", token: read).status) }
        #expect(statuses == [200, 200, 200, 429])
        let limited = try await api.call("GET", "/v1/quota", token: read)
        #expect(limited.status == 429)
        #expect(Int(limited.headers["retry-after"] ?? "") ?? 0 >= 1)
        // Another key has its own bucket.
        let other = try Self.key(w, org: "orgA", role: .read)
        #expect(try await api.call("GET", "/v1/quota", token: other).status == 200)
        await api.stop()
    }

    @Test func healthTypesQuotaAndTestPush() async throws {
        let w = try MockWorld()
        defer { w.stop() }
        let api = try await RunningAPI(configFile: try Self.config(w))
        #expect(try await api.call("GET", "/livez").status == 200)
        #expect(try await api.call("GET", "/readyz").status == 200)
        let doc = try await api.call("GET", "/openapi.yaml")
        #expect(doc.text == OpenAPIDocument.yaml)
        let admin = try Self.key(w, org: "orgA", role: .admin)
        #expect(
            try await api.call("PUT", "/v1/types/deal", token: admin, json: #"{"name":"Deal","mobile":"yes"}"#)
                .field == "mobile")
        let put = try await api.call("PUT", "/v1/types/deal", token: admin, json: #"{"name":"Deal","desktop":true}"#)
        #expect(put.status == 200)
        let list = try await api.call("GET", "/v1/types", token: admin)
        #expect((list.json["types"] as? [[String: Any]])?.first?["desktop"] as? Bool == true)
        #expect(try await api.call("DELETE", "/v1/types/deal", token: admin).status == 204)
        #expect(try await api.call("GET", "/v1/types/deal", token: admin).status == 404)

        let token = "beef" + String(repeating: "2", count: 60)
        let push = try await api.call(
            "POST", "/v1/test-push", token: admin,
            json: #"{"app":"app1","platform":"ios","token":"\#(token)","notification":{"title":"Test"}}"#)
        #expect(push.status == 200, "\(push.text)")
        #expect(push.json["outcome"] as? String == "accepted")
        #expect(w.mock.stats().acceptedAPNs == 1)
        let quota = try await api.call("GET", "/v1/quota", token: admin)
        let ios = (quota.json["platforms"] as? [String: Any])?["ios"] as? [String: Any]
        #expect(ios?["used"] as? Int == 1)

        api.server.beginDraining()
        #expect(try await api.call("GET", "/readyz").status == 503)
        await api.stop()
    }
}

/// `POST /v1/jobs` and `GET /v1/jobs/{id}` with `worker.streamShards: 3`: the job and its idempotency record go to
/// the shard of its id, a replay finds them there, and a worker process reading every shard finishes it.
@Suite(.serialized, .tags(.integration)) struct APIStreamShardsTests {
    @Test func aJobGoesToTheShardOfItsIDAndItsStatusIsReadThere() async throws {
        let w = try MockWorld()
        defer { w.stop() }
        let api = try await RunningAPI(configFile: try APIServerTests.config(w, extra: "worker:\n  streamShards: 3"))
        let send = try APIServerTests.key(w, org: "orgA", role: .send)
        var store = StoreConfiguration()
        store.streamShards = 3
        let ids = ["sh-1", "sh-2", "sh-3", "sh-4", "sh-5", "sh-6"]
        for id in ids {
            let n = ids.firstIndex(of: id) ?? 0
            let token = "beef" + String(repeating: "2", count: 56) + String(format: "%04d", n)
            let job =
                #"{"app":"app1","devices":[{"platform":"ios","token":"\#(token)"}],"notification":{"title":"Hi"}}"#
            let key = ["Idempotency-Key": id]
            let first = try await api.call("POST", "/v1/jobs", token: send, json: job, headers: key)
            #expect(first.status == 202, "\(first.text)")
            let replay = try await api.call("POST", "/v1/jobs", token: send, json: job, headers: key)
            #expect(replay.headers["idempotent-replayed"] == "true")
            #expect(replay.json["entry"] as? String == first.json["entry"] as? String)
            #expect(try await api.call("GET", "/v1/jobs/\(id)", token: send).json["state"] as? String == "queued")
        }
        let client = w.redis.client(name: "xlen")
        var expected = [Int64](repeating: 0, count: 3)
        for id in ids { expected[store.streamShard(of: JobID(id))] += 1 }
        let lengths = try store.jobStreams.map { try client.checked(["XLEN", $0]).integer ?? -1 }
        #expect(lengths == expected)
        #expect(expected.filter { $0 > 0 }.count > 1)
        #expect(try client.checked(["EXISTS", "volley:jobs"]).integer == 0)

        let worker = try WorkerProcess(
            config: try w.writeConfig(worker: ["blockMs": "100", "streamShards": "3"]), consumer: "api-sh",
            logDirectory: w.dir)
        defer { if worker.isRunning { worker.kill9() } }
        for id in ids {
            var state = ""
            let until = Date().addingTimeInterval(60)
            while Date() < until, state != "done" {
                state = try await api.call("GET", "/v1/jobs/\(id)", token: send).json["state"] as? String ?? ""
                if state != "done" { try await Task.sleep(for: .milliseconds(50)) }
            }
            #expect(state == "done", "\(id): \(worker.log.suffix(1500))")
        }
        #expect(w.mock.stats().acceptedAPNs == ids.count)
        await api.stop()
    }
}
