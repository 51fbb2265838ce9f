import Foundation
import VolleyCore
import VolleyRedis

/// The registry's last-seen index and the removal of stale devices (`devices.staleAfterDays`).
///
/// - `volley:devseen:{<org>}:<app>` — sorted set: `platform:token` → the device's last registration (seconds since
///   1970). Registration writes it beside the device record, so the oldest devices of an app are a range read.
/// - `volley:devseen-apps` — set of `<org>\u{1F}<app>` that have such a sorted set: what a sweep walks.
/// - `volley:devseen-lease` — the sweep's lease (`StaleDeviceSweepStateMachine`): the worker holding it, expiring.
extension StoreConfiguration {
    func lastSeenKey(_ org: OrgID, _ app: AppName) -> String { "\(prefix):devseen:{\(org)}:\(app)" }
    var lastSeenAppsKey: String { "\(prefix):devseen-apps" }
    var staleSweepLeaseKey: String { "\(prefix):devseen-lease" }
    static func lastSeenAppsMember(_ org: OrgID, _ app: AppName) -> String { "\(org)\u{1F}\(app)" }
}

/// What one sweep pass did.
public struct StaleDeviceSweepResult: Sendable, Hashable {
    /// False when another worker held the lease (nothing was read).
    public var leased: Bool
    /// Devices removed from the registry.
    public var removed: Int
    /// True when an app had a full batch of stale entries: more may be left.
    public var more: Bool

    public init(leased: Bool, removed: Int = 0, more: Bool = false) {
        self.leased = leased
        self.removed = removed
        self.more = more
    }
}

extension RedisPipelineSession {
    /// Removes up to ARGV[2] devices of one (org, app) last registered at or before ARGV[1], and their last-seen
    /// entries, in one step: a device registered again meanwhile has a newer score and is not in the range.
    /// KEYS: token index, users set, device key prefix, last-seen set. Answers {removed, entries read}.
    static let staleRemoveScript = RedisScript(
        """
        local fields = redis.call('ZRANGEBYSCORE', KEYS[4], '-inf', ARGV[1], 'LIMIT', 0, tonumber(ARGV[2]))
        local removed = 0
        for _, field in ipairs(fields) do
          local user = redis.call('HGET', KEYS[1], field)
          if user then
            local devKey = KEYS[3] .. user
            removed = removed + redis.call('HDEL', devKey, field)
            redis.call('HDEL', KEYS[1], field)
            if redis.call('HLEN', devKey) == 0 then redis.call('SREM', KEYS[2], user) end
          end
          redis.call('ZREM', KEYS[4], field)
        end
        return {removed, #fields}
        """)

    /// One sweep pass: under the lease (`leaseSeconds`, held by `owner`), removes per (org, app) at most `batch`
    /// devices last registered at or before `cutoff`. Entries of devices already removed otherwise (unregistered,
    /// refused by the provider) leave the index with them (`removeScript`); any left behind is dropped as it comes up,
    /// without counting.
    public func sweepStaleDevices(
        cutoff: Date, leaseSeconds: Double, owner: String, batch: Int = 1_000
    ) throws -> StaleDeviceSweepResult {
        guard
            try FleetLease.take(
                client, key: store.staleSweepLeaseKey, owner: owner, seconds: leaseSeconds, what: "stale device lease")
        else { return StaleDeviceSweepResult(leased: false) }
        let apps = try client.checked(["SMEMBERS", store.lastSeenAppsKey]).array?.compactMap(\.string) ?? []
        var result = StaleDeviceSweepResult(leased: true)
        let cutoffText = String(cutoff.timeIntervalSince1970)
        for member in apps.sorted() {
            let parts = member.split(separator: "\u{1F}", maxSplits: 1, omittingEmptySubsequences: false)
            guard parts.count == 2 else { continue }
            let (org, app) = (OrgID(String(parts[0])), AppName(String(parts[1])))
            let r = try client.eval(
                Self.staleRemoveScript,
                keys: RedisKeyGroups.removeTokens(store, org: org, app: app),
                args: [cutoffText, String(batch)])
            try r.throwIfError("remove stale devices")
            let counts = r.array?.compactMap(\.integer) ?? []
            guard counts.count == 2 else { throw RedisError(.unexpectedReply, "stale removal returned \(r)") }
            result.removed += Int(counts[0])
            if Int(counts[1]) >= batch { result.more = true }
        }
        return result
    }
}
