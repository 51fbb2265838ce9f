import Foundation
import Testing
import VolleyRedis
import VolleyTestSupport

@testable import VolleyAPI

/// The API's auto-pipeline on a real redis-server: concurrent calls share pipelines on few connections, and each
/// caller gets its own reply.
@Suite struct APIRedisPipelineTests {
    static let echo = RedisScript("redis.call('INCR', KEYS[1]) return ARGV[1]")
    static let failing = RedisScript("return redis.error_reply('refused ' .. ARGV[1])")

    @Test func concurrentCallsEachGetTheirOwnReplyAndRunOnce() async throws {
        let redis = try RedisServerFixture()
        defer { redis.stop() }
        let pipeline = RedisAutoPipeline(connections: 2) { n in redis.client(name: "pipeline-\(n)") }
        let answers = try await withThrowingTaskGroup(of: (Int, String?).self) { group in
            for i in 0..<300 {
                group.addTask {
                    let r = try await pipeline.eval(Self.echo, keys: ["calls"], args: ["answer-\(i)"])
                    return (i, r.string)
                }
            }
            var all: [Int: String?] = [:]
            for try await (i, answer) in group { all[i] = answer }
            return all
        }
        #expect(answers.count == 300)
        #expect(answers.allSatisfy { $0.value == "answer-\($0.key)" })
        #expect(try redis.client(name: "check").checked(["GET", "calls"]).string == "300")
    }

    @Test func aFlushedScriptIsLoadedAgainAndAnErrorReachesOnlyItsCaller() async throws {
        let redis = try RedisServerFixture()
        defer { redis.stop() }
        let pipeline = RedisAutoPipeline(connections: 1) { n in redis.client(name: "pipeline-\(n)") }
        #expect(try await pipeline.eval(Self.echo, keys: ["k"], args: ["first"]).string == "first")
        try redis.client(name: "flush").checked(["SCRIPT", "FLUSH"])
        #expect(try await pipeline.eval(Self.echo, keys: ["k"], args: ["again"]).string == "again")
        async let bad = pipeline.eval(Self.failing, keys: [], args: ["x"])
        async let good = pipeline.eval(Self.echo, keys: ["k"], args: ["fine"])
        let (b, g) = try await (bad, good)
        #expect(b.errorMessage?.contains("refused x") == true)
        #expect(g.string == "fine")
        #expect(try await pipeline.command(["GET", "k"]).string == "3")
    }
}
