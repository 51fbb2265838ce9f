import Foundation
import Testing
import VolleyRedis
import VolleyTestSupport
import VolleyTestTags

/// `RedisClient` routing on a real 3-primary, 3-replica cluster. One test starts one cluster (a few seconds) and
/// checks each behaviour on it in turn.
@Suite(.tags(.integration)) struct RedisClusterClientTests {
    @Test func routesOnARealCluster() throws {
        let fx = try RedisClusterFixture()
        defer { fx.stop() }
        try pipelinesAreSplitPerPrimaryAndAnsweredInOrder(fx)
        try scriptsAreLoadedAgainAfterAFlush(fx)
        try followsAskDuringAMigrationAndMovedAfterIt(fx)
        try aBlockingReadGoesToTheStreamsNode(fx)
        try waitAsksThePrimaryThatTookTheWrites(fx)
    }

    func waitAsksThePrimaryThatTookTheWrites(_ fx: RedisClusterFixture) throws {
        let client = fx.client()
        for key in ["w:1", "w:2", "w:3", "w:4"] {
            _ = try client.checked(["SET", key, "v"])
            #expect(try client.waitReplicas(1, timeoutMillis: 5_000, afterWritingTo: key) == 1)
        }
    }

    func pipelinesAreSplitPerPrimaryAndAnsweredInOrder(_ fx: RedisClusterFixture) throws {
        let client = fx.client()
        try client.connect()
        #expect(client.clusterPrimaries.count == 3)
        let n = 300
        let set = try client.pipeline((0..<n).map { ["SET", "order:\($0)", "v\($0)"] })
        #expect(set.allSatisfy { $0.string == "OK" })
        // Reads interleaved with a transaction whose keys share a slot: the replies come back in command order.
        var commands: [[String]] = (0..<n).map { ["GET", "order:\($0)"] }
        commands.insert(contentsOf: [["MULTI"], ["INCR", "{tx}:a"], ["INCR", "{tx}:b"], ["EXEC"]], at: 150)
        let replies = try client.pipeline(commands)
        #expect(replies.count == n + 4)
        for i in 0..<150 { #expect(replies[i].string == "v\(i)") }
        #expect(replies[153].array == [.integer(1), .integer(1)])
        for i in 150..<n { #expect(replies[i + 4].string == "v\(i)") }
        // The keys really are spread: every primary holds some.
        for port in try fx.primaryPorts() {
            #expect((try fx.command(port, ["DBSIZE"]).integer ?? 0) > 0)
        }
    }

    func scriptsAreLoadedAgainAfterAFlush(_ fx: RedisClusterFixture) throws {
        let client = fx.client()
        let script = RedisScript("return redis.call('INCRBY', KEYS[1], ARGV[1])")
        #expect(try client.eval(script, keys: ["{s}:n"], args: ["2"]).integer == 2)
        for port in try fx.primaryPorts() { _ = try fx.command(port, ["SCRIPT", "FLUSH"]) }
        #expect(try client.eval(script, keys: ["{s}:n"], args: ["3"]).integer == 5) // NOSCRIPT, loaded, run
        #expect(try client.eval(script, keys: ["other"], args: ["1"]).integer == 1)
    }

    func followsAskDuringAMigrationAndMovedAfterIt(_ fx: RedisClusterFixture) throws {
        let client = fx.client()
        let key = "{mig}:present"
        let slot = RedisClusterSlot(key: key)
        #expect(try client.command(["SET", key, "1"]).string == "OK")
        let source = try fx.primaryPort(of: slot)
        guard let target = try fx.primaryPorts().first(where: { $0 != source }) else {
            Issue.record("one primary only")
            return
        }
        _ = try fx.beginMigration(slot, to: target)
        // A key still on the source is served there; a new key of the slot is created on the target (ASK).
        #expect(try client.command(["GET", key]).string == "1")
        #expect(try client.command(["SET", "{mig}:new", "2"]).string == "OK")
        #expect(try client.command(["GET", "{mig}:new"]).string == "2")
        try fx.finishMigration(slot, from: source, to: target)
        // The client's map still names the source: MOVED sends it to the target and the map follows.
        #expect(try client.pipeline([["GET", key], ["GET", "{mig}:new"]]).map(\.string) == ["1", "2"])
        #expect(try fx.command(target, ["EXISTS", key]).integer == 1)
    }

    func aBlockingReadGoesToTheStreamsNode(_ fx: RedisClusterFixture) throws {
        let client = fx.client()
        _ = try client.checked(["XADD", "{q}:jobs", "*", "f", "v"])
        _ = try client.command(["XGROUP", "CREATE", "{q}:jobs", "g", "0"])
        let r = try client.command(
            ["XREADGROUP", "GROUP", "g", "c", "COUNT", "10", "BLOCK", "100", "STREAMS", "{q}:jobs", ">"],
            timeout: 2)
        #expect(r.array?.first?.array?[1].array?.count == 1)
    }
}
