import Foundation
import Logging
import NIOPosix
import Testing
import VolleyCore
import VolleyRedis
import VolleyService
import VolleyTestDoubles
import VolleyTestSupport
import VolleyTestTags

/// Redis over TLS (`rediss://`) against a real redis-server with `tls-port` and a test CA: a campaign and the API
/// with nothing but the TLS port to reach Redis by, a Redis Cluster whose nodes speak only TLS, client certificates,
/// and the refusals: a CA that did not sign the server's certificate, a name the certificate does not carry, a file
/// that is not a CA.
@Suite(.serialized, .tags(.integration)) struct RedisTLSTests {
    static func tlsEndpoint(_ redis: RedisServerFixture, caFile: String? = nil, serverName: String? = nil) throws
        -> RedisEndpoint
    {
        var e = try RedisEndpoint(url: try #require(redis.tlsURL))
        e.tls = RedisTLS(files: .init(caFile: caFile ?? redis.tls?.caFile), serverName: serverName)
        return e
    }

    @Test func aCampaignAndTheAPIRunOverTLS() async throws {
        let w = try MockWorld(redisTLS: true)
        defer { w.stop() }
        // The processes' configuration names only the TLS port (the server has no plain TCP port).
        #expect(w.local.redisURL.hasPrefix("rediss://localhost:"))
        let api = try await RunningAPI(configFile: try APIServerTests.config(w))
        let send = try APIServerTests.key(w, org: "orgA", role: .send)
        try w.h.register(
            org: "orgA", users: 20, devicesPerUser: 5,
            token: { u, d in String(format: "%08x%08x", u, d) + String(repeating: "a", count: 48) })
        let worker = try WorkerProcess(
            config: try w.writeConfig(worker: ["blockMs": "100"]), consumer: "tls", logDirectory: w.dir)
        defer { if worker.isRunning { worker.kill9() } }
        // The API's writes: a device through a user token (the event loops' connections and the blocking lanes).
        let user = try await APIServerTests.userToken(api, key: send, user: "user0")
        let put = try await api.call(
            "PUT", "/v1/devices", token: user, json: #"{"platform":"android","token":"fcm-over-tls-1"}"#)
        #expect(put.status == 200, "\(put.text)")
        let recipients = (0..<20).map { "\"user\($0)\"" }.joined(separator: ",")
        let posted = try await api.call(
            "POST", "/v1/jobs", token: send,
            json: #"{"app":"app1","recipients":[\#(recipients)],"notification":{"title":"Over TLS"}}"#,
            headers: ["Idempotency-Key": "tls-1"])
        #expect(posted.status == 202, "\(posted.text)")
        try await waitUntil("tls-1 done: \(worker.log.suffix(1500))", timeout: .seconds(60)) {
            try await api.call("GET", "/v1/jobs/tls-1", token: send).json["state"] as? String == "done"
        }
        let status = try await api.call("GET", "/v1/jobs/tls-1", token: send)
        let counts = status.json["report"] as? [String: Any]
        #expect(counts?["accepted"] as? Int == 101, "\(status.text)")
        #expect(w.mock.stats().totalRequests - w.mock.stats().tokenRequests == 101)
        await api.stop()
    }

    @Test func aClusterOfTLSNodesIsReachedOverTLS() throws {
        let cluster = try RedisClusterFixture(tls: true)
        defer { cluster.stop() }
        let client = RedisClient(endpoint: cluster.endpoint, options: .init(giveUpAfter: 10), name: "tls-cluster")
        try client.connect()
        #expect(client.clusterPrimaries.count == 3)
        // Keys in every primary's slots, written and read back through one pipeline each way.
        let keys = (0..<60).map { "tls-key-\($0)" }
        _ = try client.pipeline(keys.map { ["SET", $0, "v-\($0)"] })
        let replies = try client.pipeline(keys.map { ["GET", $0] })
        #expect(replies.map(\.string) == keys.map { "v-\($0)" })
    }

    @Test func aClientCertificateIsShownWhenTheServerAsksForOne() throws {
        let redis = try RedisServerFixture(extraArguments: ["--tls-auth-clients", "yes"], tls: true)
        defer { redis.stop() }
        let material = try #require(redis.tls)
        var without = try Self.tlsEndpoint(redis)
        #expect(throws: RedisError.self) {
            _ = try RedisConnection(endpoint: without, connectTimeout: 2).command(["PING"])
        }
        without.tls?.files.certFile = material.clientCertificateFile
        without.tls?.files.keyFile = material.clientKeyFile
        let reply = try RedisConnection(endpoint: without, connectTimeout: 2).command(["PING"])
        #expect(reply.string == "PONG")
    }

    @Test func theEventLoopsConnectionsSpeakTLS() async throws {
        let redis = try RedisServerFixture(tls: true)
        defer { redis.stop() }
        let group = MultiThreadedEventLoopGroup(numberOfThreads: 1)
        let pipeline = RedisEventLoopPipeline(
            group: group, connections: 1, endpoint: try Self.tlsEndpoint(redis), options: .init(),
            logger: Logger(label: "tls-test"))
        let set = try await pipeline.send(RedisCommand(["SET", "k", "over tls"]))
        #expect(set.string == "OK")
        #expect(try await pipeline.send(RedisCommand(["GET", "k"])).string == "over tls")
        // A wrong CA fails the call; nothing is sent in the clear.
        let other = try RedisTestTLS(directory: redis.directory.appendingPathComponent("other-ca").path)
        let refused = RedisEventLoopPipeline(
            group: group, connections: 1, endpoint: try Self.tlsEndpoint(redis, caFile: other.caFile), options: .init(),
            logger: Logger(label: "tls-test"))
        await #expect(throws: RedisError.self) { _ = try await refused.send(RedisCommand(["GET", "k"])) }
        try await group.shutdownGracefully()
    }

    @Test func aWrongCAOrNameIsRefusedNamingTheKeyAndNotRetried() throws {
        let redis = try RedisServerFixture(tls: true)
        defer { redis.stop() }
        let other = try RedisTestTLS(directory: redis.directory.appendingPathComponent("other-ca").path)
        var endpoint = try Self.tlsEndpoint(redis, caFile: other.caFile)
        endpoint.password = "hunter2-secret"
        let client = RedisClient(endpoint: endpoint, options: .init(giveUpAfter: 30), name: "wrong-ca")
        let started = ContinuousClock.now
        let error = try #require(throws: RedisError.self) { try client.connect() }
        #expect(error.kind == .certificate)
        #expect(error.message.contains("redis.tls.caFile") && error.message.contains("verification failed"))
        #expect(!error.message.contains("hunter2"))
        // Refused at once, not retried for `giveUpAfter`.
        #expect(ContinuousClock.now - started < .seconds(10))
        // The right CA and a name the certificate does not carry.
        let misnamed = try Self.tlsEndpoint(redis, serverName: "redis.example.com")
        let named = try #require(throws: RedisError.self) {
            _ = try RedisConnection(endpoint: misnamed, connectTimeout: 2)
        }
        #expect(named.kind == .certificate && named.message.contains("redis.example.com"), "\(named)")
    }

    @Test func aWrongCAStopsTheWorkerAtStartupNamingTheKey() async throws {
        let w = try MockWorld(redisTLS: true)
        defer { w.stop() }
        let other = try RedisTestTLS(directory: w.dir.appendingPathComponent("other-ca").path)
        var l = w.local
        l.redisURL = l.redisURL.replacingOccurrences(of: "rediss://", with: "rediss://:hunter2-secret@")
        l.redisTLS = ["caFile": other.caFile]
        let config = w.dir.appendingPathComponent("wrong-ca.yaml").path
        try l.write(to: config)
        let worker = try WorkerProcess(config: config, consumer: "wrong-ca", logDirectory: w.dir)
        defer { if worker.isRunning { worker.kill9() } }
        try await waitUntil("the worker to exit: \(worker.log.suffix(1500))", timeout: .seconds(30)) {
            !worker.isRunning
        }
        #expect(worker.process.terminationStatus != 0)
        #expect(worker.log.contains("redis.tls.caFile"), "\(worker.log.suffix(1500))")
        #expect(!worker.log.contains("hunter2"))
        // The API too: it starts without a Redis it cannot reach yet, but not with one it must not trust.
        let apiConfig = w.dir.appendingPathComponent("wrong-ca-api.yaml").path
        try (l.yaml + "api:\n  host: 127.0.0.1\n  port: 0\n").write(
            toFile: apiConfig, atomically: true, encoding: .utf8)
        let api = try APIProcess(config: apiConfig, logDirectory: w.dir)
        defer { if api.process.isRunning { api.stop() } }
        try await waitUntil("the API to exit: \(api.log.suffix(1500))", timeout: .seconds(30)) {
            !api.process.isRunning
        }
        #expect(api.process.terminationStatus != 0)
        #expect(api.log.contains("redis.tls.caFile"), "\(api.log.suffix(1500))")
        #expect(!api.log.contains("hunter2"))
        // A file that is not a CA stops the configuration's load, naming the key.
        let garbage = w.dir.appendingPathComponent("not-a-ca.pem").path
        try "not a certificate\n".write(toFile: garbage, atomically: true, encoding: .utf8)
        l.redisTLS = ["caFile": garbage]
        try l.write(to: config)
        let problem = try #require(throws: ConfigurationError.self) { _ = try VolleyConfiguration.load(path: config) }
        #expect(problem.problems.contains { $0.hasPrefix("redis.tls.caFile:") }, "\(problem)")
        // TLS keys without rediss:// would do nothing: refused.
        l.redisURL = w.redis.url
        l.redisTLS = ["caFile": other.caFile]
        try l.write(to: config)
        let plain = try #require(throws: ConfigurationError.self) { _ = try VolleyConfiguration.load(path: config) }
        #expect(plain.problems.contains { $0.hasPrefix("redis.tls:") }, "\(plain)")
    }
}
