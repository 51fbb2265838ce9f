import Foundation
import Logging
import NIOCore
import NIOPosix
import VolleyHTTP2

/// Redis calls made on NIO's event loops, each written to a connection owned by the calling event loop and answered
/// there: a request that runs on an event loop (as `volley api`'s do) reaches Redis and gets its reply without
/// leaving that thread. The calls of concurrent requests share the connection as one pipeline: each is written at
/// once and all written in one pass of the loop go out in one flush.
///
/// Every connection's state lives on its event loop. A broken connection fails the calls it carried (the caller sees
/// a `RedisError`, which the API answers with 503) and the next call opens a new one. A call whose reply takes
/// longer than the command timeout closes its connection, failing every call on it. Scripts run by EVALSHA; the
/// connection's handler answers Redis's NOSCRIPT (after a restart or SCRIPT FLUSH) by running the script with EVAL,
/// which also loads it again, and that is the only place NOSCRIPT is handled.
public final class RedisEventLoopPipeline: Sendable {
    private let lanes: [ObjectIdentifier: [Lane]]
    private let all: [Lane]

    /// `connections` per event loop of `group`. Nothing connects until the first call.
    public init(
        group: MultiThreadedEventLoopGroup, connections: Int, endpoint: RedisEndpoint,
        options: RedisClient.Options, logger: Logger
    ) {
        var lanes: [ObjectIdentifier: [Lane]] = [:]
        var all: [Lane] = []
        for loop in group.makeIterator() {
            let own = (0..<max(1, connections)).map { _ in
                Lane(eventLoop: loop, endpoint: endpoint, options: options, logger: logger)
            }
            lanes[ObjectIdentifier(loop)] = own
            all += own
        }
        self.lanes = lanes
        self.all = all
    }

    /// Runs `script` (EVALSHA; EVAL when Redis does not have it).
    public func eval(_ script: RedisScript, keys: [String], args: [String]) async throws -> RedisReply {
        var command = RedisCommand()
        // One allocation for the whole command: each argument's bytes plus room for its `$<length>\r\n…\r\n`.
        var bytes = 64 + script.sha1.utf8.count
        for key in keys { bytes += key.utf8.count + 16 }
        for arg in args { bytes += arg.utf8.count + 16 }
        command.reserveCapacity(bytes)
        command.append("EVALSHA")
        command.append(script.sha1)
        RedisCommand.decimal(keys.count) { command.append(bytes: $0) }
        for key in keys { command.append(key) }
        for arg in args { command.append(arg) }
        return try await send(RedisCall.Script(script: script, keys: keys, args: args), command)
    }

    /// Sends one command on a connection of the calling event loop (any loop's when called from elsewhere).
    public func send(_ command: RedisCommand) async throws -> RedisReply {
        try await send(nil, command)
    }

    private func send(_ script: RedisCall.Script?, _ command: RedisCommand) async throws -> RedisReply {
        let lane: Lane
        if let loop = MultiThreadedEventLoopGroup.currentEventLoop, let own = lanes[ObjectIdentifier(loop)] {
            lane = own.count == 1 ? own[0] : own[Int.random(in: 0..<own.count)]
        } else {
            lane = all[Int.random(in: 0..<all.count)]
        }
        // The reply resumes the caller straight from the connection's handler: no promise and future between them.
        return try await withCheckedThrowingContinuation { continuation in
            let call = RedisCall(command: command, reply: .continuation(continuation), script: script)
            if lane.eventLoop.inEventLoop {
                lane.send(call)
            } else {
                lane.eventLoop.execute { lane.send(call) }
            }
        }
    }
}

/// One connection of one event loop; every member is touched on that loop only.
private final class Lane: @unchecked Sendable {
    let eventLoop: any EventLoop
    private let endpoint: RedisEndpoint
    private let options: RedisClient.Options
    private let logger: Logger
    private var connection: (channel: any Channel, handler: RedisCallHandler)?
    private var connecting = false
    /// Calls made while the connection opens.
    private var waiting: [RedisCall] = []
    private var flushScheduled = false

    init(eventLoop: any EventLoop, endpoint: RedisEndpoint, options: RedisClient.Options, logger: Logger) {
        self.eventLoop = eventLoop
        self.endpoint = endpoint
        self.options = options
        self.logger = logger
    }

    func send(_ call: RedisCall) {
        eventLoop.preconditionInEventLoop()
        guard let connection else {
            waiting.append(call)
            connect()
            return
        }
        write(call, on: connection)
    }

    private func write(_ call: RedisCall, on connection: (channel: any Channel, handler: RedisCallHandler)) {
        // Straight into the handler's batch, in the order the replies will come: no trip down the pipeline per call.
        connection.handler.enqueue(call)
        if !flushScheduled {
            flushScheduled = true
            // After the other tasks of this pass of the loop: their calls leave in the same flush.
            let channel = connection.channel
            eventLoop.execute {
                self.flushScheduled = false
                channel.flush()
            }
        }
    }

    private func connect() {
        guard !connecting else { return }
        connecting = true
        let timeout = options.commandTimeout
        let denials = options.permissionDenials
        let logger = self.logger
        let handler = NIOLoopBound(
            RedisCallHandler(timeoutSeconds: timeout, denials: denials, logger: logger), eventLoop: eventLoop)
        let endpoint = self.endpoint
        let bootstrap = ClientBootstrap(group: eventLoop)
            .connectTimeout(.milliseconds(Int64(options.connectTimeout * 1000)))
            .channelOption(.socketOption(.so_keepalive), value: 1)
            .channelInitializer { channel in
                channel.eventLoop.makeCompletedFuture {
                    // `rediss://`: TLS under the calls, verifying the server as every Redis connection does.
                    if let tls = endpoint.tls {
                        try channel.pipeline.syncOperations.addHandler(
                            TLSChannelHandler(client: try tls.trust(), serverName: tls.serverName(for: endpoint)))
                    }
                    try channel.pipeline.syncOperations.addHandler(handler.value)
                }
            }
        let connected: EventLoopFuture<any Channel>
        switch endpoint.address {
        case .tcp(let host, let port): connected = bootstrap.connect(host: host, port: port)
        case .unix(let path): connected = bootstrap.connect(unixDomainSocketPath: path)
        }
        connected.whenComplete { result in
            self.connecting = false
            let calls = self.waiting
            self.waiting = []
            switch result {
            case .success(let channel):
                let connection = (channel: channel, handler: handler.value)
                self.connection = connection
                channel.closeFuture.whenComplete { _ in
                    if self.connection?.channel === channel { self.connection = nil }
                }
                // AUTH and SELECT go first; a refusal fails them, and the calls after them get Redis's own
                // NOAUTH errors, which the API reports as a store failure.
                for call in self.handshake() + calls { self.write(call, on: connection) }
            case .failure(let error):
                let failure = RedisError(.connection, "cannot connect to Redis at \(self.endpoint): \(error)")
                for call in calls { call.reply.fail(failure) }
            }
        }
    }

    private func handshake() -> [RedisCall] {
        var out: [RedisCall] = []
        func add(_ args: [String], _ what: String) {
            let promise = eventLoop.makePromise(of: RedisReply.self)
            promise.futureResult.whenComplete { result in
                let message: String? =
                    switch result {
                    case .success(let reply): reply.errorMessage
                    case .failure(let error): "\(error)"
                    }
                if let message { self.logger.error("Redis \(what) failed: \(message)") }
            }
            out.append(RedisCall(command: RedisCommand(args), reply: .promise(promise), script: nil))
        }
        if let password = endpoint.password {
            add(["AUTH"] + (endpoint.user.map { [$0] } ?? []) + [password], "AUTH")
        }
        if endpoint.database != 0 { add(["SELECT", String(endpoint.database)], "SELECT") }
        return out
    }
}

/// A command and where its reply goes.
struct RedisCall: Sendable {
    /// What an EVALSHA runs, to run it with EVAL when Redis answers NOSCRIPT.
    struct Script: Sendable {
        var script: RedisScript
        var keys: [String]
        var args: [String]
    }

    /// Where the reply goes: the caller's continuation, or a promise (the connection's own AUTH and SELECT).
    enum Reply: Sendable {
        case continuation(CheckedContinuation<RedisReply, any Error>)
        case promise(EventLoopPromise<RedisReply>)

        func succeed(_ reply: RedisReply) {
            switch self {
            case .continuation(let c): c.resume(returning: reply)
            case .promise(let p): p.succeed(reply)
            }
        }

        func fail(_ error: any Error) {
            switch self {
            case .continuation(let c): c.resume(throwing: error)
            case .promise(let p): p.fail(error)
            }
        }
    }

    var command: RedisCommand
    var reply: Reply
    var script: Script?
}

/// Writes calls as RESP and hands each reply, in order, to the call it answers. Any failure (a broken socket,
/// bytes that are not RESP, a reply late by more than the command timeout) closes the channel and fails every call
/// still waiting.
///
/// Calls reach it as outbound writes or, from the lane that owns the connection, by `enqueue`; either way their
/// bytes gather in one buffer, in the order of the calls waiting for replies, and leave at the next flush as one
/// write.
///
/// NOSCRIPT is decided here, once for every caller: an EVALSHA answered NOSCRIPT is written again as EVAL (which
/// runs the script and puts it back in Redis's cache), and the call waits for that reply instead, behind the calls
/// already written. A NOSCRIPT answer to the EVAL itself is handed to the caller as it is.
final class RedisCallHandler: ChannelDuplexHandler {
    typealias InboundIn = ByteBuffer
    typealias OutboundIn = RedisCall
    typealias OutboundOut = ByteBuffer

    private struct Pending {
        var reply: RedisCall.Reply
        var script: RedisCall.Script?
        var sentAt: NIODeadline
        /// To name the command and key of a NOPERM answer.
        var command: RedisCommand
    }

    private var pending = CircularBuffer<Pending>()
    private let reader: RedisReplyReader?
    private let timeout: TimeAmount
    private var watchdog: RepeatedTask?
    private let denials: RedisPermissionDenials?
    private let logger: Logger
    /// True from the handler's addition to a pipeline until its connection closes: a call outside that time is
    /// refused at once, as no reply will come for it.
    private var accepting = false
    /// Commands written since the last flush, and the promises of the writes that brought them.
    private var batch = ByteBuffer()
    private var batchPromises: [EventLoopPromise<Void>] = []

    init(timeoutSeconds: Double, denials: RedisPermissionDenials? = nil, logger: Logger = Logger(label: "volley.redis"))
    {
        self.denials = denials
        self.logger = logger
        reader = try? RedisReplyReader()
        timeout = .milliseconds(Int64(max(0.001, timeoutSeconds) * 1000))
    }

    func handlerAdded(context: ChannelHandlerContext) {
        accepting = true
        batch = context.channel.allocator.buffer(capacity: 1024)
        let loopBound = NIOLoopBound((self, context), eventLoop: context.eventLoop)
        let interval = min(timeout, .seconds(1))
        watchdog = context.eventLoop.scheduleRepeatedTask(initialDelay: interval, delay: interval) { _ in
            let (handler, context) = loopBound.value
            if let oldest = handler.pending.first, oldest.sentAt + handler.timeout < .now() {
                handler.failAll(RedisError(.connection, "Redis did not answer within the command timeout"))
                context.close(promise: nil)
            }
        }
    }

    func handlerRemoved(context: ChannelHandlerContext) {
        accepting = false
        watchdog?.cancel()
        failAll(RedisError(.connection, "the Redis connection closed"))
    }

    /// Adds `call` to the batch the next flush writes. On the channel's event loop only. A handler whose connection
    /// closed fails the call at once.
    func enqueue(_ call: RedisCall) {
        guard accepting else {
            call.reply.fail(RedisError(.connection, "the Redis connection closed"))
            return
        }
        pending.append(Pending(reply: call.reply, script: call.script, sentAt: .now(), command: call.command))
        call.command.writeWireBytes(into: &batch)
    }

    func write(context: ChannelHandlerContext, data: NIOAny, promise: EventLoopPromise<Void>?) {
        enqueue(unwrapOutboundIn(data))
        guard let promise else { return }
        if !accepting {
            promise.fail(RedisError(.connection, "the Redis connection closed"))
        } else {
            batchPromises.append(promise)
        }
    }

    func flush(context: ChannelHandlerContext) {
        writeBatch(context: context)
        context.flush()
    }

    /// Passes the batch on as one buffer; the next call starts a new one.
    private func writeBatch(context: ChannelHandlerContext) {
        let promises = batchPromises
        batchPromises = []
        guard batch.readableBytes > 0 else {
            for p in promises { p.succeed() }
            return
        }
        var promise: EventLoopPromise<Void>?
        if !promises.isEmpty {
            let all = context.eventLoop.makePromise(of: Void.self)
            for p in promises { all.futureResult.cascade(to: p) }
            promise = all
        }
        let out = batch
        // `clear` on a buffer still shared with the write gives it new storage, so the written bytes stay as they are.
        batch.clear()
        context.write(wrapOutboundOut(out), promise: promise)
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        let buffer = unwrapInboundIn(data)
        do {
            guard let reader else { throw RedisError(.unexpectedReply, "no reply reader (out of memory)") }
            try buffer.withUnsafeReadableBytes { try reader.feed($0) }
            var rewritten = false
            while let reply = try reader.next() {
                guard let call = pending.popFirst() else {
                    throw RedisError(.unexpectedReply, "Redis sent a reply nobody asked for")
                }
                if let script = call.script, let e = reply.errorMessage, e.hasPrefix("NOSCRIPT") {
                    var eval = RedisCommand()
                    eval.append("EVAL")
                    eval.append(script.script.source)
                    RedisCommand.decimal(script.keys.count) { eval.append(bytes: $0) }
                    for key in script.keys { eval.append(key) }
                    for arg in script.args { eval.append(arg) }
                    enqueue(RedisCall(command: eval, reply: call.reply, script: nil))
                    rewritten = true
                } else if let e = reply.errorMessage, RedisPermissionDenials.isRefusal(e) {
                    call.reply.succeed(
                        RedisPermissionDenials.annotate(
                            reply, command: call.command, denials: denials, logger: logger))
                } else {
                    call.reply.succeed(reply)
                }
            }
            if rewritten { flush(context: context) }
        } catch {
            failAll(error)
            context.close(promise: nil)
        }
    }

    func channelInactive(context: ChannelHandlerContext) {
        accepting = false
        failAll(RedisError(.connection, "the Redis connection closed"))
        context.fireChannelInactive()
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        failAll(RedisError(.connection, "Redis connection: \(error)"))
        context.close(promise: nil)
    }

    private func failAll(_ error: any Error) {
        while let call = pending.popFirst() { call.reply.fail(error) }
        let promises = batchPromises
        batchPromises = []
        batch.clear()
        for p in promises { p.fail(error) }
    }
}
