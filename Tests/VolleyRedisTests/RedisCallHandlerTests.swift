import NIOCore
import NIOEmbedded
import Testing
import VolleyTestTags

@testable import VolleyRedis

/// The event-loop connection's handler without a socket: RESP written out, replies fed in, each reply to the call it
/// answers, and NOSCRIPT answered by running the script with EVAL, once, in the handler.
@Suite(.tags(.unit)) struct RedisCallHandlerTests {
    static let script = RedisScript("return ARGV[1]")

    /// A channel with the handler, as `RedisEventLoopPipeline` sets it up.
    static func channel() throws -> EmbeddedChannel {
        let channel = EmbeddedChannel()
        try channel.pipeline.syncOperations.addHandler(RedisCallHandler(timeoutSeconds: 5))
        return channel
    }

    /// `args` as a RESP array of bulk strings, as Redis reads commands.
    static func resp(_ args: [String]) -> String {
        "*\(args.count)\r\n" + args.map { "$\($0.utf8.count)\r\n\($0)\r\n" }.joined()
    }

    /// Everything the handler wrote since the last look.
    static func written(_ channel: EmbeddedChannel) throws -> String {
        var all = ""
        while let buffer = try channel.readOutbound(as: ByteBuffer.self) { all += String(buffer: buffer) }
        return all
    }

    static func evalsha(
        _ channel: EmbeddedChannel, keys: [String], args: [String]
    ) throws -> EventLoopFuture<RedisReply> {
        let promise = channel.eventLoop.makePromise(of: RedisReply.self)
        let command = RedisCommand(["EVALSHA", script.sha1, String(keys.count)] + keys + args)
        try channel.writeOutbound(
            RedisCall(
                command: command, reply: .promise(promise), script: .init(script: script, keys: keys, args: args)))
        return promise.futureResult
    }

    static func command(_ channel: EmbeddedChannel, _ args: [String]) throws -> EventLoopFuture<RedisReply> {
        let promise = channel.eventLoop.makePromise(of: RedisReply.self)
        try channel.writeOutbound(RedisCall(command: RedisCommand(args), reply: .promise(promise), script: nil))
        return promise.futureResult
    }

    @Test func theScriptNameIsItsSHA1() {
        // `redis-cli SCRIPT LOAD "return ARGV[1]"` answers this.
        #expect(Self.script.sha1 == "098e0f0d1448c0a81dafe820f66d460eb09263da")
    }

    @Test func callsWrittenBeforeAFlushLeaveAsOneWriteInTheirOrder() async throws {
        let channel = try Self.channel()
        let first = channel.eventLoop.makePromise(of: RedisReply.self)
        let second = channel.eventLoop.makePromise(of: RedisReply.self)
        channel.write(
            RedisCall(command: RedisCommand(["GET", "a"]), reply: .promise(first), script: nil), promise: nil)
        channel.write(
            RedisCall(command: RedisCommand(["SET", "b", "2"]), reply: .promise(second), script: nil), promise: nil)
        #expect(try channel.readOutbound(as: ByteBuffer.self) == nil)
        channel.flush()
        let written = try #require(try channel.readOutbound(as: ByteBuffer.self))
        #expect(String(buffer: written) == Self.resp(["GET", "a"]) + Self.resp(["SET", "b", "2"]))
        #expect(try channel.readOutbound(as: ByteBuffer.self) == nil)
        try channel.writeInbound(ByteBuffer(string: "$1\r\n1\r\n+OK\r\n"))
        #expect(try await first.futureResult.get().string == "1")
        #expect(try await second.futureResult.get().string == "OK")
        _ = try channel.finish()
    }

    @Test func aCallGivenToAHandlerWhoseConnectionClosedFailsAtOnce() async throws {
        let handler = RedisCallHandler(timeoutSeconds: 5)
        let channel = EmbeddedChannel()
        try channel.pipeline.syncOperations.addHandler(handler)
        try await channel.close()
        let promise = channel.eventLoop.makePromise(of: RedisReply.self)
        handler.enqueue(RedisCall(command: RedisCommand(["GET", "a"]), reply: .promise(promise), script: nil))
        await #expect(throws: RedisError.self) { _ = try await promise.futureResult.get() }
    }

    @Test func aNoscriptAnswerRunsTheScriptWithEvalAndAnswersTheCallerOnce() async throws {
        let channel = try Self.channel()
        let reply = try Self.evalsha(channel, keys: ["k"], args: ["hello"])
        #expect(try Self.written(channel) == Self.resp(["EVALSHA", Self.script.sha1, "1", "k", "hello"]))
        try channel.writeInbound(ByteBuffer(string: "-NOSCRIPT No matching script. Please use EVAL.\r\n"))
        #expect(try Self.written(channel) == Self.resp(["EVAL", Self.script.source, "1", "k", "hello"]))
        try channel.writeInbound(ByteBuffer(string: "$5\r\nhello\r\n"))
        #expect(try await reply.get().string == "hello")
        #expect(try Self.written(channel) == "")
        _ = try channel.finish()
    }

    @Test func aCallWrittenBeforeTheReloadKeepsItsOwnReply() async throws {
        let channel = try Self.channel()
        let script = try Self.evalsha(channel, keys: [], args: ["a"])
        let get = try Self.command(channel, ["GET", "k"])
        _ = try Self.written(channel)
        // One read: the NOSCRIPT for the script, then the GET's value.
        try channel.writeInbound(ByteBuffer(string: "-NOSCRIPT No matching script.\r\n$3\r\nbar\r\n"))
        #expect(try await get.get().string == "bar")
        #expect(try Self.written(channel) == Self.resp(["EVAL", Self.script.source, "0", "a"]))
        try channel.writeInbound(ByteBuffer(string: "$1\r\na\r\n"))
        #expect(try await script.get().string == "a")
        _ = try channel.finish()
    }

    @Test func aNoscriptAnswerToTheEvalReachesTheCallerAsItIs() async throws {
        let channel = try Self.channel()
        let reply = try Self.evalsha(channel, keys: [], args: ["a"])
        try channel.writeInbound(ByteBuffer(string: "-NOSCRIPT gone\r\n"))
        _ = try Self.written(channel)
        try channel.writeInbound(ByteBuffer(string: "-NOSCRIPT gone again\r\n"))
        #expect(try await reply.get().errorMessage?.hasPrefix("NOSCRIPT") == true)
        #expect(try Self.written(channel) == "")
        _ = try channel.finish()
    }

    @Test func anErrorReplyReachesOnlyItsCaller() async throws {
        let channel = try Self.channel()
        let bad = try Self.command(channel, ["INCR", "text"])
        let good = try Self.command(channel, ["GET", "k"])
        try channel.writeInbound(ByteBuffer(string: "-ERR value is not an integer\r\n$2\r\nok\r\n"))
        #expect(try await bad.get().errorMessage?.contains("not an integer") == true)
        #expect(try await good.get().string == "ok")
        _ = try channel.finish()
    }

    @Test func aClosedConnectionFailsEveryCallStillWaiting() async throws {
        let channel = try Self.channel()
        let first = try Self.command(channel, ["GET", "a"])
        let second = try Self.evalsha(channel, keys: [], args: ["b"])
        try await channel.close()
        await #expect(throws: RedisError.self) { _ = try await first.get() }
        await #expect(throws: RedisError.self) { _ = try await second.get() }
    }

    @Test func bytesThatAreNotRESPCloseTheConnectionAndFailTheCall() async throws {
        let channel = try Self.channel()
        let call = try Self.command(channel, ["GET", "a"])
        try channel.writeInbound(ByteBuffer(string: "?what\r\n"))
        await #expect(throws: (any Error).self) { _ = try await call.get() }
        #expect(!channel.isActive)
    }
}
