internal import CHiredis

/// Parses raw RESP bytes into `RedisReply` values with hiredis's `redisReader` and the same reply conversion the
/// connection uses. For benchmarks (the reply-parsing cost of an XREADGROUP batch without a socket) and tools.
public enum RedisReplyParser {
    /// Every complete reply in `bytes`. Throws when the bytes are not valid RESP; an incomplete tail is ignored.
    public static func parse(_ bytes: [UInt8]) throws -> [RedisReply] {
        guard let reader = redisReaderCreate() else {
            throw RedisError(.unexpectedReply, "redisReaderCreate failed (out of memory)")
        }
        defer { redisReaderFree(reader) }
        if bytes.isEmpty { return [] }
        let fed = bytes.withUnsafeBufferPointer { buf in
            buf.withMemoryRebound(to: CChar.self) { redisReaderFeed(reader, $0.baseAddress, $0.count) }
        }
        if fed != REDIS_OK { throw RedisError(.unexpectedReply, "redisReaderFeed failed") }
        var out: [RedisReply] = []
        while true {
            var raw: UnsafeMutableRawPointer?
            if redisReaderGetReply(reader, &raw) != REDIS_OK {
                throw RedisError(.unexpectedReply, "not valid RESP")
            }
            guard let raw else { break }
            defer { freeReplyObject(raw) }
            out.append(RedisConnection.decode(raw.assumingMemoryBound(to: redisReply.self)))
        }
        return out
    }
}
