import Testing
import VolleyRedis
import VolleyTestTags

private let a = RedisClusterNode(host: "10.0.0.1", port: 7000)
private let b = RedisClusterNode(host: "10.0.0.2", port: 7001)
private let c = RedisClusterNode(host: "10.0.0.3", port: 7002)

private func threeShards() -> RedisClusterTopology {
    RedisClusterTopology(ranges: [
        .init(slots: 0...5460, primary: a), .init(slots: 5461...10922, primary: b),
        .init(slots: 10923...16383, primary: c),
    ])
}

private func slot(_ n: Int) -> RedisClusterSlot {
    guard let s = RedisClusterSlot(rawValue: n) else { preconditionFailure("slot \(n) out of range") }
    return s
}

@Suite(.tags(.unit)) struct RedisClusterRouterTests {
    @Test func parsesClusterSlots() throws {
        let reply = RedisReply.array([
            .array([
                .integer(0), .integer(5460), .array([.string("127.0.0.1"), .integer(7000), .string("id1")]),
                .array([.string("127.0.0.1"), .integer(7003), .string("id4")]),
            ]),
            .array([.integer(5461), .integer(16383), .array([.string(""), .integer(7001), .string("id2")])]),
        ])
        let t = try RedisClusterTopology(clusterSlots: reply, queried: RedisClusterNode(host: "seed", port: 1))
        #expect(t.ranges.count == 2)
        #expect(t.ranges[0].primary == RedisClusterNode(host: "127.0.0.1", port: 7000))
        #expect(t.ranges[1].primary == RedisClusterNode(host: "seed", port: 7001)) // empty host: the queried node
        #expect(throws: RedisError.self) {
            try RedisClusterTopology(clusterSlots: .array([.array([.integer(5)])]), queried: a)
        }
        #expect(throws: RedisError.self) {
            try RedisClusterTopology(
                clusterSlots: .array([.array([.integer(0), .integer(16384), .array([.string("h"), .integer(1)])])]),
                queried: a)
        }
    }

    @Test func routesEveryCommandByItsFirstKey() {
        var r = RedisClusterRouter()
        r.topologyLoaded(threeShards(), at: 0)
        #expect(r.node(for: RedisCommand(["GET", "foo"])) == c) // 12182
        #expect(r.node(for: RedisCommand(["HSET", "bar", "f", "v"])) == a) // 5061
        #expect(r.node(for: RedisCommand(["EVALSHA", "sha", "1", "hello", "x"])) == a) // 866
        #expect(r.node(for: RedisCommand(["EVALSHA", "sha", "0", "hello"])) == nil)
        #expect(r.node(for: RedisCommand(["XREADGROUP", "GROUP", "g", "c", "COUNT", "1", "STREAMS", "foo", ">"])) == c)
        #expect(r.node(for: RedisCommand(["XGROUP", "CREATE", "somekey", "g", "0"])) == c) // 11058
        #expect(r.node(for: RedisCommand(["XINFO", "GROUPS", "bar"])) == a)
        #expect(r.node(for: RedisCommand(["SCRIPT", "LOAD", "return 1"])) == nil)
        #expect(r.node(for: RedisCommand(["MULTI"])) == nil)
        #expect(
            RedisClusterRouter.slot(of: RedisCommand(["GET", "{user1000}.following"]))
                == RedisClusterSlot(key: "user1000"))
    }

    @Test func movedUpdatesTheSlotAndAsksForAThrottledRefresh() {
        var r = RedisClusterRouter(policy: .init(refreshInterval: 1))
        r.topologyLoaded(threeShards(), at: 100)
        #expect(!r.shouldRefresh(at: 100))
        let d = r.replied(.error("MOVED 12182 10.0.0.2:7001"), attempt: 0, random: 0.5)
        #expect(d == .redirect(b, asking: false))
        #expect(r.node(for: slot(12182)) == b)
        #expect(r.node(for: slot(12183)) == c) // only that slot moves until the map is reloaded
        #expect(r.isStale)
        #expect(!r.shouldRefresh(at: 100.5)) // at most one reload per interval
        #expect(r.shouldRefresh(at: 101))
        r.topologyLoaded(threeShards(), at: 101)
        #expect(!r.isStale)
        #expect(r.node(for: slot(12182)) == c)
    }

    @Test func askRedirectsOnceWithAskingAndKeepsTheMap() {
        var r = RedisClusterRouter()
        r.topologyLoaded(threeShards(), at: 0)
        #expect(r.replied(.error("ASK 866 10.0.0.3:7002"), attempt: 0, random: 0) == .redirect(c, asking: true))
        #expect(r.node(for: slot(866)) == a)
        #expect(!r.isStale)
    }

    @Test func redirectionsAreBounded() {
        var r = RedisClusterRouter(policy: .init(maxRedirects: 2))
        r.topologyLoaded(threeShards(), at: 0)
        #expect(r.replied(.error("MOVED 1 10.0.0.2:7001"), attempt: 1, random: 0) == .redirect(b, asking: false))
        #expect(r.replied(.error("MOVED 1 10.0.0.3:7002"), attempt: 2, random: 0) == .answer)
        #expect(r.replied(.error("MOVED nonsense"), attempt: 0, random: 0) == .answer)
    }

    @Test(arguments: ["TRYAGAIN Multiple keys request during rehashing of slot", "CLUSTERDOWN The cluster is down"])
    func transientErrorsRetryWithJitteredGrowingPauses(message: String) {
        var r = RedisClusterRouter(policy: .init(maxRetries: 4, firstPause: 0.1, maxPause: 0.5))
        r.topologyLoaded(threeShards(), at: 0)
        #expect(r.replied(.error(message), attempt: 0, random: 1) == .retry(after: 0.1))
        #expect(r.replied(.error(message), attempt: 0, random: 0) == .retry(after: 0.05))
        #expect(r.replied(.error(message), attempt: 2, random: 1) == .retry(after: 0.4))
        #expect(r.replied(.error(message), attempt: 3, random: 1) == .retry(after: 0.5)) // capped
        #expect(r.replied(.error(message), attempt: 4, random: 1) == .answer) // bounded: the error goes back
    }

    @Test func otherRepliesAreAnswers() {
        var r = RedisClusterRouter()
        r.topologyLoaded(threeShards(), at: 0)
        #expect(r.replied(.integer(1), attempt: 0, random: 0) == .answer)
        #expect(r.replied(.error("NOSCRIPT No matching script. Please use EVAL."), attempt: 0, random: 0) == .answer)
        #expect(
            r.replied(.error("CROSSSLOT Keys in request don't hash to the same slot"), attempt: 0, random: 0)
                == .answer)
    }

    @Test func aLostNodeMakesTheMapStale() {
        var r = RedisClusterRouter(policy: .init(refreshInterval: 5))
        #expect(r.shouldRefresh(at: 0)) // no map yet
        r.topologyLoaded(threeShards(), at: 0)
        r.nodeFailed()
        #expect(!r.shouldRefresh(at: 1))
        #expect(r.shouldRefresh(at: 5))
    }

    @Test func parsesNodeAddresses() {
        #expect(RedisClusterNode(address: "127.0.0.1:7000") == RedisClusterNode(host: "127.0.0.1", port: 7000))
        #expect(RedisClusterNode(address: "[::1]:7000") == RedisClusterNode(host: "::1", port: 7000))
        #expect(RedisClusterNode(address: "nohost") == nil)
        #expect(RedisClusterNode(address: ":7000") == nil)
        #expect(RedisClusterNode(address: "h:0") == nil)
    }
}
