import NIOCore
import NIOEmbedded
import Testing
import VolleyTestTags

@testable import VolleyAPI

/// The API's flush at the end of a loop pass, on a channel without a socket: a flush leaves when the loop runs the
/// tasks queued before it, and a close or the handler's removal sends what was flushed first.
@Suite(.tags(.unit)) struct LoopPassFlushHandlerTests {
    static func channel() throws -> EmbeddedChannel {
        let channel = EmbeddedChannel()
        try channel.pipeline.syncOperations.addHandler(LoopPassFlushHandler())
        return channel
    }

    static func written(_ channel: EmbeddedChannel) throws -> [String] {
        var all: [String] = []
        while let buffer = try channel.readOutbound(as: ByteBuffer.self) { all.append(String(buffer: buffer)) }
        return all
    }

    @Test func aFlushLeavesWhenTheLoopRunsItsQueuedTasks() throws {
        let channel = try Self.channel()
        var order: [String] = []
        // A task queued before the flush (another request's) runs first.
        channel.embeddedEventLoop.execute { order.append("task before") }
        channel.write(ByteBuffer(string: "answer 1"), promise: nil)
        channel.flush()
        channel.write(ByteBuffer(string: "answer 2"), promise: nil)
        channel.flush()
        #expect(try Self.written(channel).isEmpty)
        channel.embeddedEventLoop.execute {
            order.append("task after: \((try? Self.written(channel)) ?? [])")
        }
        channel.embeddedEventLoop.run()
        #expect(order == ["task before", "task after: [\"answer 1\", \"answer 2\"]"])
        _ = try channel.finish()
    }

    @Test func aCloseSendsWhatWasFlushedBeforeClosing() throws {
        let channel = try Self.channel()
        channel.write(ByteBuffer(string: "last answer"), promise: nil)
        channel.flush()
        try channel.close().wait()
        #expect(try Self.written(channel) == ["last answer"])
    }

    @Test func removingTheHandlerSendsWhatWasFlushed() throws {
        let channel = try Self.channel()
        channel.write(ByteBuffer(string: "answer"), promise: nil)
        channel.flush()
        let handler = try channel.pipeline.syncOperations.handler(type: LoopPassFlushHandler.self)
        try channel.pipeline.syncOperations.removeHandler(handler).wait()
        #expect(try Self.written(channel) == ["answer"])
        channel.embeddedEventLoop.run()
        #expect(try Self.written(channel).isEmpty)
        _ = try channel.finish()
    }
}
