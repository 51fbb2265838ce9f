import Foundation
import VolleyRedis

/// A lease one worker of the fleet holds at a time, for work only one of them should do (the stale-device sweep, the
/// recurring schedules' promotion): taken when free, renewed by its holder, lapsing on its own when the holder stops
/// renewing it. The schedule's own promotion takes its lease inside its promotion script instead, per shard.
enum FleetLease {
    /// Takes the lease for `owner`, or renews it when `owner` already holds it: 1 taken, 0 held by another.
    /// KEYS: the lease. ARGV: owner, lease ms.
    static let script = RedisScript(
        """
        local holder = redis.call('GET', KEYS[1])
        if holder == false or holder == ARGV[1] then
          redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
          return 1
        end
        return 0
        """)

    /// True when `owner` holds `key` for the next `seconds` (taken or renewed), false when another worker does.
    static func take(_ client: RedisClient, key: String, owner: String, seconds: Double, what: String) throws -> Bool {
        let r = try client.eval(script, keys: [key], args: [owner, String(max(1, Int(seconds * 1_000)))])
        try r.throwIfError(what)
        return try r.int(what) == 1
    }
}
