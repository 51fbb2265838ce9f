import Foundation
import HummingbirdCore
import Logging
import NIOCore
import Synchronization

/// How many connections the API serves at once (`api.maxConnections`), checked against the process's file limit.
///
/// Each connection holds a file descriptor; when a process runs out of them `accept` fails, and every listener of the
/// process (the operations endpoint too) stops taking connections. The cap keeps `headroom` descriptors for Redis
/// connections, provider connections of test pushes, the operations endpoint and log files.
public enum ConnectionLimits {
    /// Descriptors kept out of the cap for everything else the process opens.
    public static let headroom = 64
    /// The default cap: at most 4096, and at least `headroom` below the file limit.
    public static let defaultMaximum = 4096

    /// The soft `RLIMIT_NOFILE` of this process; nil when it cannot be read or is unlimited.
    public static func fileLimit() -> Int? {
        var limit = rlimit()
        guard getrlimit(Int32(RLIMIT_NOFILE.rawValue), &limit) == 0, limit.rlim_cur != rlim_t.max else {
            return nil
        }
        return Int(clamping: limit.rlim_cur)
    }

    /// The cap to use: `configured` when it leaves `headroom` under `fileLimit`, else a failure naming
    /// `api.maxConnections`; without `configured`, `min(defaultMaximum, fileLimit − headroom)`.
    public static func cap(configured: Int?, fileLimit: Int?) throws(Failure) -> Int {
        let room = fileLimit.map { $0 - headroom }
        if let room, room < 1 {
            throw Failure(
                "the process may open only \(fileLimit ?? 0) files (ulimit -n); raise it above \(headroom)")
        }
        guard let configured else { return min(defaultMaximum, room ?? defaultMaximum) }
        guard configured >= 1 else { throw Failure("must be at least 1") }
        if let room, configured > room {
            throw Failure(
                "\(configured) does not leave \(headroom) of the process's \(fileLimit ?? 0) file descriptors "
                    + "(ulimit -n) for Redis and the operations endpoint; set at most \(room) or raise the limit")
        }
        return configured
    }

    /// Why the configured cap cannot be used.
    public struct Failure: Error, Sendable, CustomStringConvertible {
        public let key = "api.maxConnections"
        public let message: String
        init(_ message: String) { self.message = message }
        public var description: String { "\(key): \(message)" }
    }
}

/// The API's open connections, counted across event loops, and which of them have not sent a request yet.
///
/// At the cap a new connection makes room by closing the connection that has waited longest without sending a
/// request head (as nginx reuses idle connections when it runs out): a flood of silent connections then costs
/// the clients that send requests nothing, and each silent one lasts at most the header timeout anyway. Only when
/// every connection has sent a request is the new one refused.
final class ConnectionCount: Sendable {
    let cap: Int
    private let state = Mutex(State())

    private struct State: ~Copyable {
        var open = 0
        /// Connections without a request head yet, by identity.
        var silent: [ObjectIdentifier: any Channel] = [:]
        /// `silent`'s keys, oldest first; keys of connections that have since spoken or closed are skipped.
        var order = CircularBuffer<ObjectIdentifier>()
    }

    init(cap: Int) { self.cap = cap }

    /// What to do with a new connection.
    enum Admission {
        case admitted
        /// Admitted in place of this silent connection, which the caller closes.
        case admittedClosing(any Channel)
        /// Over the cap with every connection in use.
        case refused
    }

    /// Counts a new connection (until it closes, whatever the answer) and decides whether it is served.
    func opened(_ channel: any Channel) -> Admission {
        state.withLock { s in
            s.open += 1
            var evicted: (any Channel)?
            if s.open > cap {
                while evicted == nil, let id = s.order.popFirst() { evicted = s.silent.removeValue(forKey: id) }
                guard evicted != nil else { return .refused }
            }
            let id = ObjectIdentifier(channel)
            s.silent[id] = channel
            s.order.append(id)
            // Keys of connections that spoke are left in `order`; drop them once they outnumber the silent ones.
            if s.order.count > 2 * s.silent.count + 64 {
                let live = s.order.filter { s.silent[$0] != nil }
                s.order = CircularBuffer(live)
            }
            return evicted.map { .admittedClosing($0) } ?? .admitted
        }
    }

    /// The connection sent a whole request head: it is in use, and no longer closed to make room.
    func spoke(_ channel: any Channel) {
        _ = state.withLock { $0.silent.removeValue(forKey: ObjectIdentifier(channel)) }
    }

    func closed(_ channel: any Channel) {
        state.withLock { s in
            s.open -= 1
            s.silent.removeValue(forKey: ObjectIdentifier(channel))
        }
    }

    var current: Int { state.withLock { $0.open } }
}

/// Wraps the API's child channel (HTTP/1.1, or TLS then HTTP/1.1) with the connection cap. Beyond
/// `api.maxConnections` a new connection takes the place of the longest-silent one; when none is silent it is
/// answered 503 and closed at once, without a pipeline or a task, so the accept loop keeps taking and shedding
/// connections instead of letting them queue in the kernel's backlog.
struct CappedChildChannel<Base: ServerChildChannel>: ServerChildChannel {
    struct Value: ServerChildChannelValue {
        let channel: any Channel
        /// Nil for a refused connection.
        let served: Base.Value?
    }

    let base: Base
    let count: ConnectionCount

    /// Sent to a connection over the cap before it is closed. Plain HTTP/1.1: on a TLS listener the client sees a
    /// failed handshake instead, which is as clear a refusal.
    static var refusal: String {
        "HTTP/1.1 503 Service Unavailable\r\nConnection: close\r\nRetry-After: 1\r\nContent-Length: 0\r\n\r\n"
    }

    func setup(channel: any Channel, logger: Logger) -> EventLoopFuture<Value> {
        let admission = count.opened(channel)
        let count = self.count
        channel.closeFuture.whenComplete { _ in count.closed(channel) }
        switch admission {
        case .refused:
            let buffer = channel.allocator.buffer(string: Self.refusal)
            channel.writeAndFlush(buffer).whenComplete { _ in channel.close(promise: nil) }
            return channel.eventLoop.makeSucceededFuture(Value(channel: channel, served: nil))
        case .admittedClosing(let silent):
            silent.close(promise: nil)
        case .admitted:
            break
        }
        return base.setup(channel: channel, logger: logger).map { Value(channel: channel, served: $0) }
    }

    func handle(value: Value, logger: Logger) async {
        guard let served = value.served else { return }
        await base.handle(value: served, logger: logger)
    }
}

/// Closes a connection that has not delivered a whole request head within `api.headerTimeoutSeconds` of opening
/// (a client that connects and says nothing, sends half a header, or stalls in the TLS handshake), and tells the
/// connection count when the head arrives.
///
/// It sits after the HTTP/1.1 decoder, so its first read is a complete request head: the deadline is then cancelled
/// and the handler leaves the pipeline. Between later requests on a keep-alive connection the idle timeout
/// (`api.idleTimeoutSeconds`, Hummingbird's own handler) applies.
final class RequestHeadTimeoutHandler: ChannelInboundHandler, RemovableChannelHandler {
    /// Any request part: only its arrival counts.
    typealias InboundIn = Any
    typealias InboundOut = Any

    private let timeout: TimeAmount
    private let connections: ConnectionCount?
    private var deadline: Scheduled<Void>?
    private var headSeen = false

    init(timeout: TimeAmount, connections: ConnectionCount? = nil) {
        self.timeout = timeout
        self.connections = connections
    }

    func handlerAdded(context: ChannelHandlerContext) {
        if context.channel.isActive { arm(context) }
    }

    func channelActive(context: ChannelHandlerContext) {
        arm(context)
        context.fireChannelActive()
    }

    func handlerRemoved(context: ChannelHandlerContext) {
        deadline?.cancel()
        deadline = nil
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        if !headSeen {
            headSeen = true
            deadline?.cancel()
            deadline = nil
            connections?.spoke(context.channel)
            context.fireChannelRead(data)
            context.pipeline.syncOperations.removeHandler(context: context, promise: nil)
            return
        }
        context.fireChannelRead(data)
    }

    private func arm(_ context: ChannelHandlerContext) {
        guard deadline == nil, !headSeen else { return }
        let channel = context.channel
        deadline = context.eventLoop.scheduleTask(in: timeout) { channel.close(promise: nil) }
    }
}

extension TimeAmount {
    /// Whole milliseconds of `seconds` (configuration values are seconds, possibly fractional).
    static func fromSeconds(_ seconds: Double) -> TimeAmount { .milliseconds(Int64((seconds * 1000).rounded())) }
}
