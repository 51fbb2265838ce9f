import Foundation
import Testing
import VolleyCore
import VolleyRedis
import VolleyTestSupport
import VolleyTestTags

@testable import VolleyStore

/// The job stream's lag (`volley_stream_lag`, `volley status`) against a real redis-server that restarts: 0
/// whenever nothing waits, the count of waiting entries when Redis itself cannot tell.
@Suite(.tags(.integration)) struct StreamLagTests {
    func redisLag(_ c: RedisClient) throws -> RedisReply? {
        let groups = try c.checked(["XINFO", "GROUPS", "s"]).array ?? []
        guard let g = groups.first?.array, let i = g.firstIndex(where: { $0.string == "lag" }) else { return nil }
        return g[i + 1]
    }

    func deliverAndAck(_ c: RedisClient) throws {
        let r = try c.checked(["XREADGROUP", "GROUP", "g", "w", "COUNT", "100", "STREAMS", "s", ">"])
        let ids = (r.array?.first?.array?[1].array ?? []).compactMap { $0.array?.first?.string }
        if !ids.isEmpty { try c.checked(["XACK", "s", "g"] + ids) }
    }

    @Test func aPersistentRestartLeavesTheLagToBeCounted() throws {
        let fx = try RedisServerFixture(persistent: true)
        defer { fx.stop() }
        var c = fx.client()
        try c.checked(["XGROUP", "CREATE", "s", "g", "0", "MKSTREAM"])
        #expect(try StreamLag.waiting(client: c, stream: "s", group: "g") == 0)
        try c.checked(["XADD", "s", "*", "job", "a"])
        try deliverAndAck(c)
        try c.checked(["XADD", "s", "*", "job", "b"])
        #expect(try StreamLag.waiting(client: c, stream: "s", group: "g") == 1)
        try fx.restart()
        c = fx.client()
        // Replayed from the append-only file: one entry waits still.
        #expect(try StreamLag.waiting(client: c, stream: "s", group: "g") == 1)
        try deliverAndAck(c)
        #expect(try StreamLag.waiting(client: c, stream: "s", group: "g") == 0)
    }

    @Test func aDeletedEntryLeavesNothingWaiting() throws {
        let fx = try RedisServerFixture()
        defer { fx.stop() }
        let c = fx.client()
        try c.checked(["XGROUP", "CREATE", "s", "g", "0", "MKSTREAM"])
        try c.checked(["XADD", "s", "*", "job", "a"])
        try deliverAndAck(c)
        let b = try #require(try c.checked(["XADD", "s", "*", "job", "b"]).string)
        try c.checked(["XDEL", "s", b])
        // After a deletion past the group's position Redis cannot tell the lag; nothing waits all the same.
        #expect(try redisLag(c)?.isNull == true)
        #expect(try StreamLag.waiting(client: c, stream: "s", group: "g") == 0)
    }

    @Test func aRestartWithoutPersistenceLeavesNothingWaiting() throws {
        let fx = try RedisServerFixture()
        defer { fx.stop() }
        var c = fx.client()
        try c.checked(["XGROUP", "CREATE", "s", "g", "0", "MKSTREAM"])
        try c.checked(["XADD", "s", "*", "job", "a"])
        #expect(try StreamLag.waiting(client: c, stream: "s", group: "g") == 1)
        try fx.restart()
        c = fx.client()
        #expect(try StreamLag.waiting(client: c, stream: "s", group: "g") == 0)
    }
}
