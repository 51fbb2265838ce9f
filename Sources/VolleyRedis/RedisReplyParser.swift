internal import CHiredis

/// Turns RESP bytes, fed as they arrive from a socket, into `RedisReply` values with hiredis's `redisReader` and the
/// same reply conversion the connection uses. For clients that own their socket (an event loop's connection) and
/// for benchmarks and tools. One reader belongs to one connection; it is not safe to share between threads.
public final class RedisReplyReader {
    private let reader: UnsafeMutablePointer<redisReader>

    public init() throws {
        guard let reader = redisReaderCreate() else {
            throw RedisError(.unexpectedReply, "redisReaderCreate failed (out of memory)")
        }
        self.reader = reader
    }

    deinit { redisReaderFree(reader) }

    /// Appends bytes read from the connection.
    public func feed(_ bytes: UnsafeRawBufferPointer) throws {
        guard let base = bytes.baseAddress, bytes.count > 0 else { return }
        let fed = redisReaderFeed(reader, base.assumingMemoryBound(to: CChar.self), bytes.count)
        if fed != REDIS_OK { throw RedisError(.unexpectedReply, "redisReaderFeed failed") }
    }

    /// The next complete reply, or nil until more bytes arrive. Throws when the bytes are not valid RESP; the
    /// connection cannot be trusted after that.
    public func next() throws -> RedisReply? {
        guard let raw = try nextRaw() else { return nil }
        defer { freeReplyObject(raw) }
        return RedisConnection.decode(raw.assumingMemoryBound(to: redisReply.self))
    }

    /// The next complete reply as hiredis built it, or nil until more bytes arrive; the caller frees it with
    /// `freeReplyObject`.
    func nextRaw() throws -> UnsafeMutableRawPointer? {
        var raw: UnsafeMutableRawPointer?
        if redisReaderGetReply(reader, &raw) != REDIS_OK { throw RedisError(.unexpectedReply, "not valid RESP") }
        return raw
    }
}

/// Parses raw RESP bytes into `RedisReply` values. For benchmarks (the reply-parsing cost of an XREADGROUP batch
/// without a socket) and tools.
public enum RedisReplyParser {
    /// Every complete reply in `bytes`. Throws when the bytes are not valid RESP; an incomplete tail is ignored.
    public static func parse(_ bytes: [UInt8]) throws -> [RedisReply] {
        let reader = try RedisReplyReader()
        try bytes.withUnsafeBytes { try reader.feed($0) }
        var out: [RedisReply] = []
        while let reply = try reader.next() { out.append(reply) }
        return out
    }
}
