import Foundation
import VolleyCore
import VolleyRedis

/// The fleet's throttle of jobs with `throttlePerMinute`: one hash per job (`volley:throttle:{org}:<job>`, fields
/// `anchor` and `cells`, `ThrottleState`) and one script that reads, decides and writes it atomically, so every
/// worker sending the job — and the one that takes it over after a crash — shares one rate.
///
/// Time is Redis's own (`TIME` inside the script), not the caller's: the gate's instants are then one clock for the
/// whole fleet, and a worker whose clock runs ahead cannot open the gate early for everyone. The caller only gets
/// a duration back (`retryAfter`), which its own clock measures.
public final class RedisThrottle: JobThrottle, @unchecked Sendable {
    private let redis: SerializedRedis
    /// How long a job's gate outlives its arrival time (then a new delivery starts as a fresh job would).
    public let keepMillis: Int64

    public init(client: RedisClient, keepMillis: Int64 = 600_000) {
        redis = SerializedRedis(client)
        self.keepMillis = keepMillis
    }

    public func take(org: OrgID, job: JobID, rate: ThrottleRate, count: Int, now: Date) throws -> ThrottleGrant {
        let reply = try redis.with {
            try $0.eval(
                Self.take, keys: [RecipientKeys(org: org).throttle(job)],
                args: [
                    String(rate.perMinute), String(rate.burst), String(rate.slice), String(max(0, count)),
                    String(keepMillis),
                ])
        }
        try reply.throwIfError("throttle")
        guard let a = reply.array, a.count == 2, let granted = a[0].integer, let wait = a[1].integer else {
            throw RedisError(.unexpectedReply, "throttle: \(reply)")
        }
        return ThrottleGrant(granted: Int(granted), retryAfter: Double(wait) / 1000)
    }

    /// `ThrottleArithmetic.take`, line by line, on Redis's clock. KEYS[1] the job's gate; ARGV perMinute, burst,
    /// slice, count, keep (ms). Returns {granted, wait ms}. Every number stays below 2^53 (the anchor moves a
    /// minute at a time), so Lua's doubles compute it exactly.
    static let take = RedisScript(
        """
        local r, burst, slice = tonumber(ARGV[1]), tonumber(ARGV[2]), tonumber(ARGV[3])
        local count, keep = tonumber(ARGV[4]), tonumber(ARGV[5])
        local minute = 60000
        local t = redis.call('TIME')
        local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
        local tolerance = (burst - 1) * minute
        local s = redis.call('HMGET', KEYS[1], 'anchor', 'cells')
        local anchor, cells = now, burst - slice
        if s[1] and s[2] then anchor, cells = tonumber(s[1]), tonumber(s[2]) end
        local ahead = cells * minute - (now - anchor) * r
        if ahead < 0 then anchor, cells, ahead = now, 0, 0 end
        local granted = 0
        if count > 0 and ahead <= tolerance then
          granted = math.min(count, math.floor((tolerance - ahead) / minute) + 1)
          cells = cells + granted
          ahead = ahead + granted * minute
        end
        while cells >= r do
          cells = cells - r
          anchor = anchor + minute
        end
        local rest = count - granted
        local want = slice
        if rest > 0 and rest < slice then want = rest end
        local wait = ahead - (burst - want) * minute
        if wait < 0 then wait = 0 end
        redis.call('HSET', KEYS[1], 'anchor', string.format('%.0f', anchor), 'cells', string.format('%.0f', cells))
        redis.call('PEXPIRE', KEYS[1], math.floor((ahead + r - 1) / r) + keep)
        return {granted, math.floor((wait + r - 1) / r)}
        """)
}
