internal import CHiredis
import Foundation

/// One blocking connection to Redis: a socket (TCP, unix, or TLS for `rediss://`: `RedisSocket`), commands written
/// in their wire form, replies parsed by hiredis's reader. Not thread-safe: owned by exactly one thread or serial
/// queue at a time (the owner never hands it to Swift's cooperative pool, since every call may block for up to
/// `commandTimeout`). After any I/O error the connection is dead (`isBroken`); make a new one (``RedisClient`` does
/// this with backoff).
public final class RedisConnection: @unchecked Sendable {
    private let socket: RedisSocket
    private let reader: RedisReplyReader
    public let endpoint: RedisEndpoint
    public private(set) var isBroken = false
    /// Commands appended and not yet written, in wire form.
    private var outbound: [UInt8] = []
    /// Where bytes read from the socket land before the reader takes them.
    private var inbound = [UInt8](repeating: 0, count: 16 * 1024)
    /// How long one wait for the socket may last (a read's or a write's).
    private var commandTimeout: Double

    /// Connects (with TLS when the endpoint has it), authenticates (`AUTH [user] password`) and selects the
    /// database.
    public init(endpoint: RedisEndpoint, connectTimeout: Double = 2, commandTimeout: Double = 5) throws {
        self.endpoint = endpoint
        _ = RedisConnection.ignoreSIGPIPE
        self.commandTimeout = commandTimeout
        reader = try RedisReplyReader()
        socket = try RedisSocket(endpoint: endpoint, timeout: connectTimeout)
        if let password = endpoint.password {
            let args = endpoint.user.map { ["AUTH", $0, password] } ?? ["AUTH", password]
            let r = try command(args)
            if let e = r.errorMessage {
                throw RedisError(
                    .authentication,
                    "AUTH as \(endpoint.user ?? "default") on \(endpoint) failed: \(e); check the user and "
                        + "password in redis.url"
                )
            }
        }
        if endpoint.database != 0 {
            let r = try command(["SELECT", String(endpoint.database)])
            if let e = r.errorMessage {
                throw RedisError(.authentication, "SELECT \(endpoint.database) on \(endpoint) failed: \(e)")
            }
        }
    }

    /// A write to a socket the server closed raises SIGPIPE, which would kill the process. Ignore it once per
    /// process; the write then fails with EPIPE and the client reconnects.
    private static let ignoreSIGPIPE: Void = { _ = signal(SIGPIPE, SIG_IGN) }()

    /// Changes how long a read or a write may wait (e.g. longer than an XREADGROUP BLOCK).
    public func setCommandTimeout(_ seconds: Double) throws { commandTimeout = seconds }

    /// Runs one command and waits for its reply. Error replies come back as `.error`, not thrown;
    /// thrown errors are connection errors (the connection is then broken).
    public func command(_ args: [String]) throws -> RedisReply {
        try command(RedisCommand(args))
    }

    /// As `command(_:)` for a command built as bytes.
    public func command(_ command: RedisCommand) throws -> RedisReply {
        try append(command)
        try flush()
        return try readReply()
    }

    /// Pipelines `commands` with two windows in flight: window k+1 is written before window k's replies are
    /// read (a plain append-all/get-all degenerates into ping-pong per window).
    /// Replies come back in order, one per command.
    public func pipeline(_ commands: [[String]], window: Int = 256) throws -> [RedisReply] {
        try collectReplies(commands.count, window: window) { try append(RedisCommand(commands[$0])) }
    }

    /// As `pipeline(_:window:)` for commands built as bytes.
    public func pipeline(_ commands: [RedisCommand], window: Int = 256) throws -> [RedisReply] {
        try collectReplies(commands.count, window: window) { try append(commands[$0]) }
    }

    /// The replies of `count` pipelined commands (`append(i)` appends the i-th), in order.
    private func collectReplies(_ count: Int, window: Int, append: (Int) throws -> Void) throws -> [RedisReply] {
        var replies: [RedisReply] = []
        replies.reserveCapacity(count)
        try pipelineWindows(count, window: window, append: append) { replies.append(try readReply()) }
        return replies
    }

    /// As `pipeline`, handing each reply to `visit` instead of collecting them.
    public func pipelineVisit(_ commands: [[String]], window: Int = 256, _ visit: (RedisReply) throws -> Void) throws {
        try pipelineWindows(commands.count, window: window, append: { try append(RedisCommand(commands[$0])) }) {
            try visit(try readReply())
        }
    }

    /// As `pipelineVisit`, handing each reply to `visit` as hiredis parsed it, in place: no `RedisReply` and no
    /// Strings unless the visitor makes them (for replies read by the thousand, like the registry's HVALS).
    /// The view is valid only during the call.
    public func pipelineVisitRaw(_ commands: [[String]], window: Int = 256, _ visit: (RedisRawReply) throws -> Void)
        throws
    {
        try pipelineWindows(commands.count, window: window, append: { try append(RedisCommand(commands[$0])) }) {
            let raw = try readRawReply()
            defer { freeReplyObject(raw) }
            try visit(RedisRawReply(raw))
        }
    }

    /// As `pipelineVisitRaw` for commands built as bytes.
    public func pipelineVisitRaw(_ commands: [RedisCommand], window: Int = 256, _ visit: (RedisRawReply) throws -> Void)
        throws
    {
        try pipelineWindows(commands.count, window: window, append: { try append(commands[$0]) }) {
            let raw = try readRawReply()
            defer { freeReplyObject(raw) }
            try visit(RedisRawReply(raw))
        }
    }

    /// Writes `count` commands (`append(i)` appends the i-th) a window at a time, one window ahead of the replies,
    /// and calls `readOne` once per command.
    private func pipelineWindows(_ count: Int, window: Int, append: (Int) throws -> Void, readOne: () throws -> Void)
        throws
    {
        if count == 0 { return }
        let w = max(1, window)
        var sentUpTo = 0 // commands appended and flushed
        var readUpTo = 0
        func sendWindow() throws {
            let end = min(count, sentUpTo + w)
            for i in sentUpTo..<end { try append(i) }
            try flush()
            sentUpTo = end
        }
        try sendWindow()
        while readUpTo < count {
            let windowEnd = min(count, readUpTo + w)
            if sentUpTo < count { try sendWindow() }
            while readUpTo < windowEnd {
                try readOne()
                readUpTo += 1
            }
        }
    }

    // MARK: - I/O

    /// Appends the command's wire bytes to what the next flush writes.
    private func append(_ command: RedisCommand) throws {
        guard !isBroken else { throw RedisError(.connection, "connection to \(endpoint) is broken") }
        command.appendWireBytes(to: &outbound)
    }

    private func flush() throws {
        defer { outbound.removeAll(keepingCapacity: true) }
        do {
            try outbound.withUnsafeBytes { try socket.write($0, timeout: commandTimeout) }
        } catch let e as RedisError {
            throw broken(e)
        }
    }

    private func readReply() throws -> RedisReply {
        let raw = try readRawReply()
        defer { freeReplyObject(raw) }
        return RedisConnection.decode(raw.assumingMemoryBound(to: redisReply.self))
    }

    /// The next reply as hiredis's reader built it, reading from the socket until one is whole; the caller frees it.
    private func readRawReply() throws -> UnsafeMutableRawPointer {
        guard !isBroken else { throw RedisError(.connection, "connection to \(endpoint) is broken") }
        do {
            while true {
                if let raw = try reader.nextRaw() { return raw }
                let n = try inbound.withUnsafeMutableBytes { try socket.read(into: $0, timeout: commandTimeout) }
                try inbound.withUnsafeBytes { try reader.feed(UnsafeRawBufferPointer(rebasing: $0[..<n])) }
            }
        } catch let e as RedisError {
            throw broken(e)
        }
    }

    static func decode(_ r: UnsafeMutablePointer<redisReply>) -> RedisReply {
        let p = r.pointee
        switch p.type {
        case REDIS_REPLY_STRING:
            return .string(string(p.str, p.len))
        case REDIS_REPLY_STATUS:
            return .status(string(p.str, p.len))
        case REDIS_REPLY_ERROR:
            return .error(string(p.str, p.len))
        case REDIS_REPLY_INTEGER:
            return .integer(Int64(p.integer))
        case REDIS_REPLY_NIL:
            return .null
        case REDIS_REPLY_ARRAY:
            var out: [RedisReply] = []
            out.reserveCapacity(Int(p.elements))
            for i in 0..<Int(p.elements) {
                if let e = p.element[i] { out.append(decode(e)) } else { out.append(.null) }
            }
            return .array(out)
        default:
            return .error("unknown hiredis reply type \(p.type)")
        }
    }

    private static func string(_ ptr: UnsafeMutablePointer<CChar>?, _ len: Int) -> String {
        guard let ptr, len > 0 else { return "" }
        let buf = UnsafeRawBufferPointer(start: ptr, count: len)
        return String(decoding: buf, as: UTF8.self)
    }

    /// Marks the connection dead. A reply that is not valid RESP leaves the stream unusable, like a lost
    /// connection, and is reported as one so that the client reconnects.
    private func broken(_ e: RedisError) -> RedisError {
        isBroken = true
        if e.kind == .unexpectedReply { return RedisError(.connection, "read reply on \(endpoint): \(e.message)") }
        return e
    }
}

/// One hiredis reply, read in place (see `RedisConnection.pipelineVisitRaw`): valid only inside the visitor.
public struct RedisRawReply {
    private let reply: UnsafeMutablePointer<redisReply>
    init(_ raw: UnsafeMutableRawPointer) { reply = raw.assumingMemoryBound(to: redisReply.self) }

    /// The reply as a value (kept past the visitor's call).
    var value: RedisReply { RedisConnection.decode(reply) }

    /// The error text when the reply is an error.
    public var errorMessage: String? {
        guard reply.pointee.type == REDIS_REPLY_ERROR else { return nil }
        return String(decoding: bytesOrEmpty, as: UTF8.self)
    }

    /// Elements of an array reply (0 for any other type).
    public var count: Int { reply.pointee.type == REDIS_REPLY_ARRAY ? Int(reply.pointee.elements) : 0 }

    /// Element `i` of an array reply; nil out of range.
    public subscript(i: Int) -> RedisRawReply? {
        guard i >= 0, i < count, let e = reply.pointee.element[i] else { return nil }
        return RedisRawReply(UnsafeMutableRawPointer(e))
    }

    /// The bytes of a string or status reply; nil for other types.
    public var bytes: UnsafeRawBufferPointer? {
        let t = reply.pointee.type
        guard t == REDIS_REPLY_STRING || t == REDIS_REPLY_STATUS else { return nil }
        return bytesOrEmpty
    }

    private var bytesOrEmpty: UnsafeRawBufferPointer {
        guard let p = reply.pointee.str, reply.pointee.len > 0 else {
            return UnsafeRawBufferPointer(start: nil, count: 0)
        }
        return UnsafeRawBufferPointer(start: p, count: Int(reply.pointee.len))
    }
}
