import Foundation
import VolleyCore
import VolleyRedis

/// The event stream's outcome entries (`events.outcomes`) and the users' delivery histories (`deliveries.days`), both
/// off by default (`DeliveryTrail`): plain commands queued in the transaction that records a batch's outcomes
/// (`RedisPipelineSession.record`, `outcomeCommands`), so each device is told once, as its outcome is recorded once;
/// and one script for the users a chunk skipped (`recordSkipped`), told once per job and user.
///
/// A history line is a member of the user's ZSET (`StoreConfiguration.deliveryHistoryKey`), scored by the
/// outcome's Unix milliseconds: `<outcome>␉<platform>␉<device>␉<job>␉<reason>` (tabs between; `-` for no
/// platform or device; the reason last, as the provider gave it).
public enum DeliveryTrailScript {
    /// The users a chunk skipped, told once per (job, user, reason): `SADD` to the job's skipped set guards the
    /// count (`capped`, `noDevice`), the event stream entry (with `events.outcomes`) and the history line (with
    /// `deliveries.days`), so a redelivery that resolves the users again tells nothing twice. KEYS[1] the event
    /// stream, KEYS[2] the campaign's live counts, KEYS[3] the job's skipped set, KEYS[4…] each user's history.
    /// ARGV[1] '1' outcome entries on; [2] the stream's MAXLEN; [3] its MINID cutoff ('' none); [4] the histories'
    /// cutoff (Unix ms); [5] their TTL (ms, '0': no history); [6] the counts' and the set's TTL (s); [7] org;
    /// [8] campaign; [9] app; [10] at (Unix ms); [11] at (RFC 3339); [12] the reason (`capped`, `noDevice`); then 3
    /// per user: history key index into KEYS, user, history member.
    public static let script = RedisScript(
        """
        local events, history, reason = ARGV[1] == '1', ARGV[5] ~= '0', ARGV[12]
        local touched, counted = {}, false
        for i = 13, #ARGV, 3 do
          local k, user, member = tonumber(ARGV[i]), ARGV[i + 1], ARGV[i + 2]
          if redis.call('SADD', KEYS[3], reason .. ':' .. user) == 1 then
            redis.call('HINCRBY', KEYS[2], reason, 1)
            counted = true
            if history then
              redis.call('ZADD', KEYS[k], 'NX', ARGV[10], member)
              touched[k] = true
            end
            if events then
              redis.call('XADD', KEYS[1], 'MAXLEN', '~', ARGV[2], '*', 'kind', 'outcome', 'org', ARGV[7],
                'job', ARGV[8], 'app', ARGV[9], 'user', user, 'outcome', reason, 'at', ARGV[11])
            end
          end
        end
        for k in pairs(touched) do
          redis.call('ZREMRANGEBYSCORE', KEYS[k], '-inf', '(' .. ARGV[4])
          redis.call('PEXPIRE', KEYS[k], ARGV[5])
        end
        if counted then
          redis.call('EXPIRE', KEYS[2], ARGV[6])
          redis.call('EXPIRE', KEYS[3], ARGV[6])
          if events and ARGV[3] ~= '' then redis.call('XTRIM', KEYS[1], 'MINID', '~', ARGV[3]) end
        end
        return 1
        """)

    /// The script's `EVAL` for the users a chunk skipped.
    static func skippedCommand(
        _ store: StoreConfiguration, _ trail: DeliveryTrail, at: Date, users: [UserID], reason: SkippedRecipient
    ) -> RedisCommand {
        let ms = Int64((at.timeIntervalSince1970 * 1000).rounded(.down))
        var historyKeys: [UserID: Int] = [:]
        var keys = [
            store.eventStream(org: trail.org), store.countsKey(trail.org, trail.campaign),
            store.skippedKey(trail.org, trail.campaign),
        ]
        let historyMillis = Int64(store.deliveryHistoryDays) * 86_400_000
        let minID = store.eventsMaxAgeSeconds > 0 ? String(max(0, ms - Int64(store.eventsMaxAgeSeconds) * 1000)) : ""
        var args = [
            store.eventsEnabled && store.eventsOutcomes ? "1" : "0", String(store.eventsMaxLength), minID,
            String(ms - historyMillis), String(historyMillis), String(store.ledgerTTLSeconds), trail.org.rawValue,
            trail.campaign.rawValue, trail.app.rawValue, String(ms), RFC3339.format(at, .milliseconds),
            reason.rawValue,
        ]
        args.reserveCapacity(args.count + 3 * users.count)
        let job = trail.campaign.rawValue
        for user in users {
            var index = historyKeys[user] ?? 0
            if index == 0 {
                keys.append(store.deliveryHistoryKey(trail.org, user))
                index = keys.count
                historyKeys[user] = index
            }
            args.append(String(index))
            args.append(user.rawValue)
            args.append("\(reason.rawValue)\t-\t-\t\(job)\t")
        }
        var command = RedisCommand(["EVAL", script.source, String(keys.count)])
        for k in keys { command.append(k) }
        for a in args { command.append(a) }
        return command
    }

    /// A recorded batch's trail, as plain commands queued in the record's transaction (MULTI/EXEC makes them
    /// atomic with the outcomes, so no script is needed): one `XADD` per device, and per user of the batch one
    /// `ZADD` of their lines, the trim of lines older than the kept days and the key's expiry; the stream's age trim
    /// once per batch. A device's outcome is recorded once by the ledger, so nothing is guarded.
    static func outcomeCommands(
        _ store: StoreConfiguration, _ trail: DeliveryTrail, at: Date, _ outcomes: [(Device, DeliveryOutcome)]
    ) -> [RedisCommand] {
        let ms = Int64((at.timeIntervalSince1970 * 1000).rounded(.down))
        let score = String(ms)
        let atText = RFC3339.format(at, .milliseconds)
        let stream = store.eventStream(org: trail.org)
        let maxLength = String(store.eventsMaxLength)
        let job = trail.campaign.rawValue
        var commands: [RedisCommand] = []
        commands.reserveCapacity(outcomes.count + 8)
        var lines: [UserID: RedisCommand] = [:]
        var users: [UserID] = []
        var mid: [UInt8] = []
        for i in outcomes.indices {
            let device = outcomes[i].0
            let outcome = outcomes[i].1
            let name = DeliveryRecord.outcomeName(outcome)
            let reason = DeliveryRecord.reason(outcome)
            if store.eventsEnabled && store.eventsOutcomes {
                var xadd = RedisCommand()
                xadd.reserveCapacity(256)
                for a in ["XADD", stream, "MAXLEN", "~", maxLength, "*", "kind", "outcome", "org"] { xadd.append(a) }
                xadd.append(trail.org.rawValue)
                xadd.append("job")
                xadd.append(job)
                xadd.append("app")
                xadd.append(trail.app.rawValue)
                if let user = device.user {
                    xadd.append("user")
                    xadd.append(user.rawValue)
                }
                xadd.append("platform")
                xadd.append(device.platform.rawValue)
                xadd.append("outcome")
                xadd.append(name)
                if let reason {
                    xadd.append("reason")
                    xadd.append(reason)
                }
                if let tracking = trail.tracking {
                    mid.removeAll(keepingCapacity: true)
                    tracking.appendMessageID(for: device.token, to: &mid)
                    xadd.append("messageId")
                    mid.withUnsafeBufferPointer { xadd.append(bytes: $0) }
                }
                xadd.append("at")
                xadd.append(atText)
                commands.append(xadd)
            }
            guard store.deliveryHistoryDays > 0, let user = device.user else { continue }
            if lines[user] == nil {
                users.append(user)
                lines[user] = RedisCommand(["ZADD", store.deliveryHistoryKey(trail.org, user), "NX"])
            }
            lines[user]?.append(score)
            let shown = DeliveryRecord.redacted(device.token)
            lines[user]?.append("\(name)\t\(device.platform.rawValue)\t\(shown)\t\(job)\t\(reason ?? "")")
        }
        let historyMillis = Int64(store.deliveryHistoryDays) * 86_400_000
        let cutoff = "(" + String(ms - historyMillis)
        let ttl = String(historyMillis)
        for user in users {
            guard let zadd = lines[user] else { continue }
            let key = store.deliveryHistoryKey(trail.org, user)
            commands += [
                zadd, RedisCommand(["ZREMRANGEBYSCORE", key, "-inf", cutoff]), RedisCommand(["PEXPIRE", key, ttl]),
            ]
        }
        if store.eventsEnabled, store.eventsOutcomes, store.eventsMaxAgeSeconds > 0, !outcomes.isEmpty {
            let minID = String(max(0, ms - Int64(store.eventsMaxAgeSeconds) * 1000))
            commands.append(RedisCommand(["XTRIM", stream, "MINID", "~", minID]))
        }
        return commands
    }

    /// A history line from its member and score; nil for a member it cannot read.
    static func record(member: String, score: Double) -> DeliveryRecord? {
        let parts = member.split(separator: "\t", maxSplits: 4, omittingEmptySubsequences: false)
        guard parts.count == 5 else { return nil }
        let at = Date(timeIntervalSince1970: score / 1000)
        return DeliveryRecord(
            job: String(parts[3]), at: RFC3339.format(at, .milliseconds),
            platform: parts[1] == "-" ? nil : String(parts[1]), device: parts[2] == "-" ? nil : String(parts[2]),
            outcome: String(parts[0]), reason: parts[4].isEmpty ? nil : String(parts[4]))
    }
}

/// Reads users' delivery histories (the API's `GET /v1/users/{user}/deliveries`, the CLI's `volley deliveries`).
public final class RedisDeliveryHistory: DeliveryHistoryReader {
    private let lanes: SerialLanes<RedisClient>
    private let store: StoreConfiguration
    private let clock: any WallClock

    public init(lanes: SerialLanes<RedisClient>, store: StoreConfiguration, clock: any WallClock) {
        self.lanes = lanes
        self.store = store
        self.clock = clock
    }

    public func deliveries(org: OrgID, user: UserID, since: Date?, limit: Int) async throws -> [DeliveryRecord] {
        let store = self.store
        let now = clock.now()
        return try await lanes.run {
            try Self.read($0, store: store, org: org, user: user, since: since, limit: limit, now: now)
        }
    }

    /// The lines recorded at or after `since` (and within the days kept before `now`), newest first, at most `limit`.
    public static func read(
        _ client: RedisClient, store: StoreConfiguration, org: OrgID, user: UserID, since: Date?, limit: Int,
        now: Date
    ) throws -> [DeliveryRecord] {
        let kept = now.addingTimeInterval(-Double(store.deliveryHistoryDays) * 86_400)
        let from = max(since ?? kept, kept)
        let min = String(Int64((from.timeIntervalSince1970 * 1000).rounded(.up)))
        let reply = try client.checked([
            "ZRANGE", store.deliveryHistoryKey(org, user), "+inf", min, "BYSCORE", "REV", "LIMIT", "0",
            String(max(0, limit)), "WITHSCORES",
        ])
        let items = reply.array ?? []
        var out: [DeliveryRecord] = []
        out.reserveCapacity(items.count / 2)
        var i = 0
        while i + 1 < items.count {
            if let member = items[i].string, let score = items[i + 1].string.flatMap(Double.init),
                let r = DeliveryTrailScript.record(member: member, score: score)
            {
                out.append(r)
            }
            i += 2
        }
        return out
    }
}
