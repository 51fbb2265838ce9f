import VolleyRedis

/// How many job stream entries wait for the consumer group: the figure behind `volley_stream_lag` and
/// `volley status`, which an autoscaler scales on, so it must read 0 whenever nothing waits.
///
/// Redis 7 reports a group's `lag` in XINFO GROUPS, but not always: after a restart that replayed the append-only
/// file the group's `entries-read` is unknown, and after deletions Redis cannot tell, so `lag` is nil until the
/// group catches up. A missing stream (a restart without persistence, nothing enqueued yet) has nothing waiting.
/// When Redis's figure is 0 it is taken as is; otherwise `waitingScript` looks past the group's last delivered id
/// on the server and counts what it finds, up to `countLimit`.
public enum StreamLag {
    /// Entries counted past the group's position when Redis cannot tell (a higher backlog reads as this).
    public static let countLimit = 10_000

    /// KEYS[1] the stream; ARGV[1] the group's last delivered id, ARGV[2] the most to count. Returns how many
    /// entries come after that id (the entries stay on the server: only the count crosses the wire).
    static let waitingScript = RedisScript(
        """
        return #redis.call('XRANGE', KEYS[1], '(' .. ARGV[1], '+', 'COUNT', tonumber(ARGV[2]))
        """)

    /// The entries of `stream` not yet delivered to `group`: 0 when the stream or the group is missing.
    public static func waiting(client: RedisClient, stream: String, group: String) throws -> Int {
        let reply = try client.command(["XINFO", "GROUPS", stream])
        if let e = reply.errorMessage {
            if e.hasPrefix("ERR no such key") { return 0 }
            throw RedisError(.server, "XINFO GROUPS \(stream): \(e)")
        }
        guard
            let mine = (reply.array ?? []).map({ Dictionary($0.fieldPairs, uniquingKeysWith: { a, _ in a }) })
                .first(where: { $0["name"] == group })
        else { return 0 }
        return try waiting(
            client: client, stream: stream, reportedLag: mine["lag"].flatMap { Int($0) },
            lastDelivered: mine["last-delivered-id"])
    }

    /// As `waiting(client:stream:group:)` from a group's XINFO GROUPS fields already read: Redis's `lag` (nil when
    /// it cannot tell) and `last-delivered-id`.
    public static func waiting(client: RedisClient, stream: String, reportedLag: Int?, lastDelivered: String?) throws
        -> Int
    {
        if reportedLag == 0 { return 0 }
        guard let lastDelivered else { return reportedLag ?? 0 }
        let counted =
            try client.eval(
                waitingScript, keys: [stream], args: [lastDelivered, String(countLimit)]
            ).throwIfError("count waiting entries of \(stream)").integer.map { Int($0) } ?? 0
        // Nothing past the group's position: nothing waits, whatever a stale `lag` says.
        if counted == 0 { return 0 }
        return reportedLag ?? counted
    }
}
