import Foundation
import Logging
import NIOPosix
import Testing
import VolleyRedis
import VolleyTestDoubles
import VolleyTestSupport
import VolleyTestTags

/// The API's connections on NIO's event loops against a real redis-server: concurrent calls share each loop's
/// connection as one pipeline, each caller gets its own reply, and a flushed script is run again.
@Suite(.tags(.integration)) struct APIRedisPipelineTests {
    static let echo = RedisScript("redis.call('INCR', KEYS[1]) return ARGV[1]")
    static let failing = RedisScript("return redis.error_reply('refused ' .. ARGV[1])")

    /// The answers of `count` calls made at once, by call number.
    static func concurrently(
        _ count: Int, _ call: @escaping @Sendable (Int) async throws -> String?
    ) async throws -> [Int: String?] {
        try await withThrowingTaskGroup(of: (Int, String?).self) { group in
            for i in 0..<count { group.addTask { (i, try await call(i)) } }
            var all: [Int: String?] = [:]
            for try await (i, answer) in group { all[i] = answer }
            return all
        }
    }

    static func eventLoops(_ endpoint: RedisEndpoint, timeout: Double = 5) -> RedisEventLoopPipeline {
        RedisEventLoopPipeline(
            group: .singleton, connections: 1, endpoint: endpoint, options: .init(commandTimeout: timeout),
            logger: Logger(label: "test"))
    }

    /// The event loops' own connections: concurrent calls from every loop and from outside them each get their own
    /// reply, once.
    @Test func eventLoopCallsEachGetTheirOwnReplyAndRunOnce() async throws {
        let redis = try RedisServerFixture()
        defer { redis.stop() }
        let pipeline = Self.eventLoops(redis.endpoint)
        let answers = try await Self.concurrently(300) { i in
            let call = { try await pipeline.eval(Self.echo, keys: ["calls"], args: ["answer-\(i)"]).string }
            if i % 2 == 0 { return try await call() }
            // Half of them from an event loop, as `volley api`'s requests run.
            return try await MultiThreadedEventLoopGroup.singleton.any().makeFutureWithTask { try await call() }.get()
        }
        #expect(answers.count == 300)
        #expect(answers.allSatisfy { $0.value == "answer-\($0.key)" })
        #expect(try redis.client(name: "check").checked(["GET", "calls"]).string == "300")
    }

    @Test func eventLoopCallsLoadAFlushedScriptAgain() async throws {
        let redis = try RedisServerFixture()
        defer { redis.stop() }
        let pipeline = Self.eventLoops(redis.endpoint)
        #expect(try await pipeline.eval(Self.echo, keys: ["k"], args: ["first"]).string == "first")
        try redis.client(name: "flush").checked(["SCRIPT", "FLUSH"])
        #expect(try await pipeline.eval(Self.echo, keys: ["k"], args: ["again"]).string == "again")
        #expect(
            try await pipeline.eval(Self.failing, keys: [], args: ["x"]).errorMessage?.contains("refused x") == true)
        #expect(try await pipeline.send(RedisCommand(["GET", "k"])).string == "2")
    }

    /// A Redis restart breaks the connection: a call on it fails with a connection error, and the next call opens a
    /// new connection and succeeds.
    @Test func aBrokenConnectionFailsItsCallsAndTheNextCallReconnects() async throws {
        let redis = try RedisServerFixture()
        defer { redis.stop() }
        let pipeline = Self.eventLoops(redis.endpoint)
        #expect(try await pipeline.eval(Self.echo, keys: ["k"], args: ["before"]).string == "before")
        try redis.restart()
        var failures = 0
        try await waitUntil("a call succeeds after the restart") {
            do {
                return try await pipeline.eval(Self.echo, keys: ["k"], args: ["after"]).string == "after"
            } catch let e as RedisError {
                #expect(e.kind == .connection, "\(e)")
                failures += 1
                return false
            }
        }
        #expect(failures <= 2)
    }

    /// A reply later than the command timeout fails the call and closes the connection.
    @Test func aLateReplyFailsTheCall() async throws {
        let redis = try RedisServerFixture()
        defer { redis.stop() }
        let pipeline = Self.eventLoops(redis.endpoint, timeout: 0.3)
        let slow = RedisScript(
            "local t = redis.call('TIME') local e = t[1] * 1e6 + t[2] + 1500000 "
                + "while true do local n = redis.call('TIME') if n[1] * 1e6 + n[2] > e then break end end return 1")
        await #expect(throws: RedisError.self) { _ = try await pipeline.eval(slow, keys: [], args: []) }
        try await waitUntil("Redis answers again") {
            (try? await pipeline.eval(Self.echo, keys: ["k"], args: ["ok"]).string) == "ok"
        }
    }

    /// With a password in the endpoint, each new connection authenticates first.
    @Test func eventLoopConnectionsAuthenticate() async throws {
        let redis = try RedisServerFixture(extraArguments: ["--requirepass", "s3cret"])
        defer { redis.stop() }
        var endpoint = redis.endpoint
        endpoint.password = "s3cret"
        #expect(try await Self.eventLoops(endpoint).eval(Self.echo, keys: ["k"], args: ["in"]).string == "in")
        endpoint.password = "wrong"
        let refused = try await Self.eventLoops(endpoint).eval(Self.echo, keys: ["k"], args: ["in"])
        #expect(refused.errorMessage?.contains("NOAUTH") == true, "\(refused)")
    }
}
