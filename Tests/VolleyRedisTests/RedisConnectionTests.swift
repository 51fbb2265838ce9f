import Foundation
import Testing
import VolleyRedis
import VolleyTestDoubles
import VolleyTestSupport
import VolleyTestTags

@Suite(.tags(.integration)) struct RedisEndpointTests {
    @Test func parsesTCPWithUserPasswordAndDatabase() throws {
        let e = try RedisEndpoint(url: "redis://alice:s3cr%40t@cache.internal:6380/2")
        #expect(e.address == .tcp(host: "cache.internal", port: 6380))
        #expect(e.user == "alice")
        #expect(e.password == "s3cr@t")
        #expect(e.database == 2)
        #expect(!e.description.contains("s3cr"))
    }

    @Test func parsesPasswordOnlyAndDefaults() throws {
        let e = try RedisEndpoint(url: "redis://:pw@localhost")
        #expect(e.address == .tcp(host: "localhost", port: 6379))
        #expect(e.user == nil)
        #expect(e.password == "pw")
        #expect(e.database == 0)
    }

    @Test func parsesUnixSocket() throws {
        let e = try RedisEndpoint(url: "unix:///tmp/x/r.sock?db=3")
        #expect(e.address == .unix(path: "/tmp/x/r.sock"))
        #expect(e.database == 3)
    }

    @Test func rediss() throws {
        let e = try RedisEndpoint(url: "rediss://alice:pw@cache.example.com:6380/2")
        #expect(e.address == .tcp(host: "cache.example.com", port: 6380))
        #expect(e.user == "alice" && e.password == "pw" && e.database == 2)
        // TLS with the system trust store and the URL's host as the name to verify, until the configuration says
        // otherwise.
        #expect(e.tls == RedisTLS())
        #expect(e.description == "rediss://alice:***@cache.example.com:6380/2")
        #expect(try RedisEndpoint(url: "redis://cache.example.com").tls == nil)
    }

    @Test(arguments: [
        "localhost:6379", "redis://host:99999", "redis://host/abc", "rediss://host:0", "unix://relative", "http://x",
    ])
    func rejectsMalformed(_ url: String) {
        #expect(throws: RedisError.self) { try RedisEndpoint(url: url) }
    }
}

@Suite(.tags(.integration)) struct RedisCommandTests {
    @Test func wireFormIsARESPArrayOfBulkStrings() {
        #expect(
            String(decoding: RedisCommand(["SET", "k", "v"]).wireBytes, as: UTF8.self)
                == "*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$1\r\nv\r\n")
        #expect(
            String(decoding: RedisCommand(["GET", ""]).wireBytes, as: UTF8.self) == "*2\r\n$3\r\nGET\r\n$0\r\n\r\n")
        // Lengths count bytes, not characters; twelve arguments have a two-digit count.
        #expect(RedisCommand(["é"]).wireBytes == Array("*1\r\n$2\r\né\r\n".utf8))
        #expect(RedisCommand(Array(repeating: "x", count: 12)).wireBytes.starts(with: Array("*12\r\n$1\r\nx".utf8)))
        var joined = RedisCommand(["HSET"])
        joined.append("android", UInt8(ascii: ":"), "t0k")
        #expect(joined.wireBytes == RedisCommand(["HSET", "android:t0k"]).wireBytes)
        #expect(RedisCommand().wireBytes == Array("*0\r\n".utf8))
    }
}

@Suite(.tags(.integration)) struct RedisReplyParserTests {
    @Test func parsesCompleteRepliesAndIgnoresAnIncompleteTail() throws {
        let bytes = Array("+OK\r\n:42\r\n$-1\r\n*2\r\n$1\r\na\r\n$0\r\n\r\n-ERR no\r\n$5\r\nhel".utf8)
        #expect(
            try RedisReplyParser.parse(bytes) == [
                .status("OK"), .integer(42), .null,
                .array([.string("a"), .string("")]), .error("ERR no"),
            ])
        #expect(try RedisReplyParser.parse([]) == [])
    }

    @Test func rejectsBytesThatAreNotRESP() {
        #expect(throws: RedisError.self) { try RedisReplyParser.parse(Array("?what\r\n".utf8)) }
    }
}

@Suite(.tags(.integration)) struct RedisConnectionTests {
    @Test func pipelinesThousandsOfCommandsInOrder() throws {
        let redis = try RedisServerFixture()
        defer { redis.stop() }
        let c = try RedisConnection(endpoint: redis.endpoint)
        let n = 10_000
        let cmds = (0..<n).map { ["RPUSH", "list", "v\($0)"] }
        let replies = try c.pipeline(cmds, window: 300)
        #expect(replies.count == n)
        #expect(replies.first == .integer(1))
        #expect(replies.last == .integer(Int64(n)))
        #expect(try c.command(["LINDEX", "list", "4999"]) == .string("v4999"))
        // Error replies are values, not thrown, and do not break the pipeline.
        let mixed = try c.pipeline([["SET", "k", "1"], ["INCR", "list"], ["GET", "k"]])
        #expect(mixed[1].errorMessage?.hasPrefix("WRONGTYPE") == true)
        #expect(mixed[2] == .string("1"))
    }

    /// Commands are sent in their wire form as built here (the connection writes the bytes, nothing formats them):
    /// the server must read back every byte of binary-looking, empty, multi-byte and CRLF-carrying arguments.
    @Test func sendsArgumentsByteExact() throws {
        let redis = try RedisServerFixture()
        defer { redis.stop() }
        let c = try RedisConnection(endpoint: redis.endpoint)
        let values = ["", "a\r\nb", "$3\r\n*1", "é漢🎉", String(repeating: "x", count: 100_000), "\u{0}nul"]
        var set = RedisCommand(["MSET"])
        for (i, v) in values.enumerated() {
            set.append("k\(i)")
            set.append(v)
        }
        #expect(set.count == 1 + 2 * values.count)
        #expect(try c.command(set) == .status("OK"))
        let got = try c.command(["MGET"] + values.indices.map { "k\($0)" })
        #expect(got == .array(values.map { .string($0) }))
        // An argument joined from two parts is the same argument as the joined String.
        var joined = RedisCommand(["SET"])
        joined.append("ios", UInt8(ascii: ":"), "tok")
        joined.append("v")
        #expect(try c.pipeline([joined]) == [.status("OK")])
        #expect(try c.command(["GET", "ios:tok"]) == .string("v"))
    }

    /// The in-place reader sees what `pipeline` decodes: arrays, bulk strings, nil elements, errors, in order.
    @Test func rawVisitorSeesWhatPipelineDecodes() throws {
        let redis = try RedisServerFixture()
        defer { redis.stop() }
        let c = try RedisConnection(endpoint: redis.endpoint)
        _ = try c.pipeline([["HSET", "h", "a", "1", "b", "two"], ["SET", "s", "x"]])
        let cmds = [["HGETALL", "h"], ["HGETALL", "missing"], ["MGET", "s", "nope"], ["INCR", "h"], ["GET", "s"]]
        let decoded = try c.pipeline(cmds)
        var seen: [String] = []
        try c.pipelineVisitRaw(cmds, window: 2) { r in
            if let e = r.errorMessage {
                seen.append("error:" + e.prefix(9))
                return
            }
            if let b = r.bytes {
                seen.append("string:" + String(decoding: b, as: UTF8.self))
                return
            }
            let items = (0..<r.count).map { i in r[i]?.bytes.map { String(decoding: $0, as: UTF8.self) } ?? "nil" }
            seen.append("array:" + items.joined(separator: ","))
        }
        #expect(seen.count == decoded.count)
        #expect(Set(seen[0].dropFirst(6).split(separator: ",")) == ["a", "1", "b", "two"])
        #expect(seen[1...] == ["array:", "array:x,nil", "error:WRONGTYPE", "string:x"])
        #expect(decoded[3].errorMessage?.hasPrefix("WRONGTYPE") == true)
    }

    /// A server that stops answering fails the call once a wait passes the command timeout, whether the connection
    /// was reading a reply or writing a command, and the connection is broken (its client makes a new one).
    @Test func aSilentServerFailsTheCallWithinTheCommandTimeout() throws {
        let redis = try RedisServerFixture()
        defer { redis.stop() }
        let c = try RedisConnection(endpoint: redis.endpoint, connectTimeout: 1, commandTimeout: 0.3)
        #expect(try c.command(["PING"]) == .status("PONG"))
        redis.pause()
        defer { redis.resume() }
        let started = ContinuousClock.now
        let error = try #require(throws: RedisError.self) { _ = try c.command(["PING"]) }
        let waited = ContinuousClock.now - started
        #expect(error.kind == .connection && error.message.contains("timed out"), "\(error)")
        #expect(waited >= .milliseconds(250) && waited < .seconds(5), "\(waited)")
        #expect(c.isBroken)
        #expect(throws: RedisError.self) { _ = try c.command(["PING"]) }
    }

    @Test func reconnectsAfterServerRestart() throws {
        let redis = try RedisServerFixture()
        defer { redis.stop() }
        let client = redis.client()
        try client.checked(["SET", "a", "1"])
        try redis.restart()
        // The old socket is dead; the client reconnects and runs the command on the new server.
        let r = try client.command(["SET", "a", "2"])
        #expect(r == .status("OK"))
        #expect(try client.command(["GET", "a"]) == .string("2"))
        #expect(client.reconnects >= 1)
    }

    @Test func waitsForRedisToComeBack() async throws {
        let redis = try RedisServerFixture()
        defer { redis.stop() }
        let client = redis.client()
        try client.checked(["PING"])
        redis.stop()
        let restarter = Thread {
            usleep(300_000)
            try? redis.start()
        }
        restarter.start()
        // The command waits for the server to come back: off the cooperative pool.
        #expect(try await blocking { try client.command(["PING"]) } == .status("PONG"))
    }

    @Test func authenticatesWithACLUser() throws {
        let redis = try RedisServerFixture(extraArguments: [
            "--user", "default", "off",
            "--user", "volley", "on", ">hunter2", "~*", "&*", "+@all",
        ])
        defer { redis.stop() }
        let good = try RedisEndpoint(url: "unix://volley:hunter2@\(redis.socketPath)")
        let c = try RedisConnection(endpoint: good)
        #expect(try c.command(["ACL", "WHOAMI"]) == .string("volley"))
        let bad = try RedisEndpoint(url: "unix://volley:wrong@\(redis.socketPath)")
        #expect { try RedisConnection(endpoint: bad) } throws: { ($0 as? RedisError)?.kind == .authentication }
    }

    @Test func selectsDatabase() throws {
        let redis = try RedisServerFixture()
        defer { redis.stop() }
        let c5 = try RedisConnection(endpoint: RedisEndpoint.unix(redis.socketPath, database: 5))
        _ = try c5.command(["SET", "only-in-5", "x"])
        let c0 = try RedisConnection(endpoint: redis.endpoint)
        #expect(try c0.command(["EXISTS", "only-in-5"]) == .integer(0))
        #expect(try c5.command(["EXISTS", "only-in-5"]) == .integer(1))
    }

    @Test func reloadsScriptAfterNOSCRIPT() throws {
        let redis = try RedisServerFixture()
        defer { redis.stop() }
        let client = redis.client()
        let script = RedisScript("return redis.call('INCRBY', KEYS[1], ARGV[1])")
        #expect(try client.eval(script, keys: ["n"], args: ["2"]) == .integer(2))
        try client.checked(["SCRIPT", "FLUSH"])
        #expect(try client.eval(script, keys: ["n"], args: ["3"]) == .integer(5))
        // And across a restart (scripts are not persisted).
        try redis.restart()
        #expect(try client.eval(script, keys: ["n"], args: ["1"]) == .integer(1))
    }
}
