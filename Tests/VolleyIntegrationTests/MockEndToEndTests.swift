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

/// Real Redis + the real mock APNs/FCM server (TLS, HTTP/2) + the real providers.
struct MockWorld {
    let redis: RedisServerFixture
    let mock: MockServerFixture
    let h: EngineHarness
    let dir: URL
    let local: LocalConfiguration

    /// `redisTLS`: the processes this world configures reach Redis over TLS (`rediss://`, trusting the test CA);
    /// the test's own clients keep the unix socket.
    init(mockConfig: String? = nil, persistent: Bool = false, redisArguments: [String] = [], redisTLS: Bool = false)
        throws
    {
        h = try EngineHarness(persistent: persistent, redisArguments: redisArguments, tls: redisTLS)
        redis = h.redis
        mock = try MockServerFixture(configuration: mockConfig)
        dir = FileManager.default.temporaryDirectory.appendingPathComponent("volley-e2e-\(UUID().uuidString.prefix(8))")
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        var l = LocalConfiguration(
            mockHost: mock.host, mockPort: mock.port, caFile: mock.caFile,
            apnsKeyFile: mock.apnsKeyFile, apnsKeyID: mock.apnsKeyID, apnsTeamID: mock.apnsTeamID,
            apnsTopic: mock.apnsTopic, serviceAccountFile: mock.serviceAccountFile,
            redisURL: redis.tlsURL ?? redis.url)
        if let tls = redis.tls { l.redisTLS = ["caFile": tls.caFile] }
        l.appName = "app1"
        // The integration tests run with the event stream's outcome entries and the delivery history on.
        l.events = ["outcomes": "true"]
        l.deliveries = ["days": "7"]
        local = l
    }

    func stop() {
        mock.stop()
        redis.stop()
        try? FileManager.default.removeItem(at: dir)
    }

    func writeConfig(
        worker: [String: String] = [:], quotas: (ios: Int, android: Int)? = nil, logLevel: String? = nil
    ) throws -> String {
        var l = local
        l.worker = worker
        if let logLevel { l.logLevel = logLevel }
        if let quotas {
            l.quotaIOS = quotas.ios
            l.quotaAndroid = quotas.android
        }
        let path = dir.appendingPathComponent("volley-\(UUID().uuidString.prefix(6)).yaml").path
        try l.write(to: path)
        return path
    }

    func apps() throws -> PipelineApps {
        var logger = Logger(label: "e2e")
        logger.logLevel = .warning
        return try PipelineApps.directory(configFile: try writeConfig(), logger: logger)
    }
}

@Suite(.serialized, .tags(.integration)) struct MockEndToEndTests {
    @Test func jobFlowsToTheMockForIOSAndAndroid() async throws {
        let w = try MockWorld(
            mockConfig: #"{"apns": {"unregisteredPrefixes": ["dead"]}, "fcm": {"unregisteredPrefixes": ["dead"]}}"#)
        defer { w.stop() }
        // 200 users × 3 devices; every 10th device token starts with "dead" (unregistered at the mock).
        try w.h.register(
            users: 200, devicesPerUser: 3, platform: { $0 % 3 == 0 ? .android : .ios },
            token: { u, d in
                ((u * 3 + d) % 10 == 0 ? "dead" : "beef") + String(format: "%08x%02x", u, d)
                    + String(repeating: "0", count: 54)
            })
        let apps = try w.apps()
        defer { apps.shutdown() }
        let worker = PipelineWorker(
            configuration: WorkerConfiguration(consumer: "e2e", inFlight: 300, blockMillis: 100),
            backend: RedisPipelineBackend(endpoint: w.redis.endpoint, consumer: "e2e"), apps: apps)
        try worker.start()
        defer { worker.drain(deadline: 2) }
        let users = (0..<200).map { RecipientID("user\($0)") } + ["ghost"]
        try w.h.producer.enqueue(
            PushJob(
                id: "e2e-1", org: "org1", app: "app1", recipients: users,
                notification: VolleyCore.Notification(title: "Hello", body: "World")))
        try await waitUntil("the report of e2e-1", timeout: .seconds(30)) { (try? w.h.report(for: "e2e-1")) != nil }
        let r = try #require(try w.h.report(for: "e2e-1"))
        let s = w.mock.stats()
        #expect(r.devices == 600)
        #expect(r.noDevices == 1)
        #expect(r.accepted == s.acceptedAPNs + s.acceptedFCM)
        print("e2e report:", ReportFormatting.json(r))
        #expect(r.accepted == 540)
        #expect(r.rejected == 60)
        #expect(r.tokensRemoved == 60)
        #expect(r.byPlatform["android"] == 200)
        #expect(r.byPlatform["ios"] == 400)
        #expect(s.acceptedFCM == 180)
        #expect(s.acceptedAPNs == 360)
        #expect(s.duplicateDeliveries == 0)
        // Unregistered tokens are gone from the registry.
        let (_, devicesLeft) = try w.h.admin.counts(org: "org1", app: "app1")
        #expect(devicesLeft == 540)
        // A silent hint to explicit devices on both platforms.
        try w.h.producer.enqueue(
            PushJob(
                id: "hint", org: "org1", app: "app1",
                devices: [
                    JobDevice(platform: .ios, token: DeviceToken("beef" + String(repeating: "1", count: 60))),
                    JobDevice(platform: .android, token: DeviceToken("live-android-1")),
                ],
                notification: VolleyCore.Notification(data: ["recordId": .string("001xx")], contentAvailable: true)))
        try await waitUntil("the report of hint", timeout: .seconds(30)) { (try? w.h.report(for: "hint")) != nil }
        #expect(try w.h.report(for: "hint")?.accepted == 2)
    }

    /// From the stream, what the API refuses at the door is a dead letter naming the field: a `ttl` over 28 days
    /// (the providers' own preparation) and a `priority` that is neither a name nor a whole number (OneSignal's rule:
    /// 10 high, any other normal).
    @Test func aJobOverTheTTLCapOrWithAnUnknownPriorityIsDeadLettered() async throws {
        let w = try MockWorld()
        defer { w.stop() }
        let apps = try w.apps()
        defer { apps.shutdown() }
        let worker = PipelineWorker(
            configuration: WorkerConfiguration(consumer: "caps", inFlight: 10, blockMillis: 100),
            backend: RedisPipelineBackend(endpoint: w.redis.endpoint, consumer: "caps"), apps: apps)
        try worker.start()
        defer { worker.drain(deadline: 2) }
        let token = "beef" + String(repeating: "7", count: 60)
        let devices = #""devices":[{"platform":"ios","token":"\#(token)"}]"#
        try w.h.producer.enqueueRaw(fields: [
            "job": #"{"id":"long","org":"org1","app":"app1",\#(devices),"notification":{"title":"x","ttl":2419201}}"#
        ])
        try w.h.producer.enqueueRaw(fields: [
            "job": #"{"id":"urgent","org":"org1","app":"app1",\#(devices),"notification":{"title":"x","priority":7.5}}"#
        ])
        try await waitUntil("2 dead letters") { ((try? w.h.producer.deadLetters().count) ?? 0) == 2 }
        let dead = try w.h.producer.deadLetters()
        let long = try #require(dead.first { $0["job"]?.contains("2419201") == true })
        #expect(long["reason"] == "invalid-notification")
        #expect(long["detail"]?.contains("ttl 2419201 is over the maximum of 2419200 seconds") == true, "\(long)")
        let urgent = try #require(dead.first { $0["job"]?.contains("\"priority\":7.5") == true })
        #expect(urgent["detail"]?.contains("notification.priority") == true, "\(urgent)")
        #expect(w.mock.stats().totalRequests == 0)
    }
}
