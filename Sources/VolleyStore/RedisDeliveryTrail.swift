import Foundation
import Logging
import VolleyCore
import VolleyRedis

/// The event stream's outcome entries and the users' delivery histories (`DeliveryTrail`): plain commands queued in
/// the transaction that records a batch's outcomes (`RedisPipelineSession.record`, `outcomeCommands`), and one script
/// for the users a chunk skipped (`recordSkipped`), whose entry and count must follow only a new history line.
///
/// A history line is a member of the user's ZSET (`StoreConfiguration.deliveryHistoryKey`), scored by the
/// outcome's Unix milliseconds: `<outcome>␉<platform>␉<device>␉<job>␉<reason>` (tabs between; `-` for no
/// platform or device; the reason last, as the provider gave it). The member names the job, the device and the
/// outcome but not the time, so `ZADD NX` of a line a redelivery writes again adds nothing: a skipped user's entry
/// and count follow only a line that was new. A device's outcome is recorded once by the ledger's transaction, so
/// its entry is not guarded.
public enum DeliveryTrailScript {
    /// KEYS[1] the event stream, KEYS[2] the campaign's live counts, KEYS[3…] the history of each user the batch
    /// names. ARGV[1] '1' events on; [2] the stream's MAXLEN; [3] its MINID cutoff ('' none); [4] the histories'
    /// cutoff (Unix ms: older lines go); [5] their TTL (ms); [6] the counts' TTL (s); [7] org; [8] campaign; [9] app;
    /// [10] at (Unix ms); [11] at (RFC 3339); [12] '1' guarded (skipped users: entry and count only for a new line);
    /// then 7 per line: history key index into KEYS (0: none), user, platform, message id, outcome, reason, member.
    public static let script = RedisScript(
        """
        local events, guarded = ARGV[1] == '1', ARGV[12] == '1'
        local at, touched, counted = ARGV[10], {}, false
        for i = 13, #ARGV, 7 do
          local k, user, platform, mid, outcome, reason, member =
            tonumber(ARGV[i]), ARGV[i + 1], ARGV[i + 2], ARGV[i + 3], ARGV[i + 4], ARGV[i + 5], ARGV[i + 6]
          local new = 1
          if k > 0 then
            new = redis.call('ZADD', KEYS[k], 'NX', at, member)
            touched[k] = true
          end
          if new == 1 or not guarded then
            if guarded then
              redis.call('HINCRBY', KEYS[2], outcome, 1)
              counted = true
            end
            if events then
              local f = {'kind', 'outcome', 'org', ARGV[7], 'job', ARGV[8], 'app', ARGV[9]}
              if user ~= '' then f[#f + 1] = 'user'; f[#f + 1] = user end
              if platform ~= '' then f[#f + 1] = 'platform'; f[#f + 1] = platform end
              f[#f + 1] = 'outcome'; f[#f + 1] = outcome
              if reason ~= '' then f[#f + 1] = 'reason'; f[#f + 1] = reason end
              if mid ~= '' then f[#f + 1] = 'messageId'; f[#f + 1] = mid end
              f[#f + 1] = 'at'; f[#f + 1] = ARGV[11]
              redis.call('XADD', KEYS[1], 'MAXLEN', '~', ARGV[2], '*', unpack(f))
            end
          end
        end
        for k in pairs(touched) do
          redis.call('ZREMRANGEBYSCORE', KEYS[k], '-inf', '(' .. ARGV[4])
          redis.call('PEXPIRE', KEYS[k], ARGV[5])
        end
        if counted then redis.call('EXPIRE', KEYS[2], ARGV[6]) end
        if events and ARGV[3] ~= '' then redis.call('XTRIM', KEYS[1], 'MINID', '~', ARGV[3]) end
        return 1
        """)

    /// The script's `EVAL` for a batch: `lines` are (user, platform, device, outcome, reason, message id).
    /// The full source rides in the command (not `EVALSHA`): queued in a MULTI, a script the server does not know
    /// would fail at EXEC after the outcomes were written.
    static func command(
        _ store: StoreConfiguration, _ trail: DeliveryTrail, at: Date, guarded: Bool,
        lines: [(user: UserID?, platform: Platform?, device: DeviceToken?, outcome: String, reason: String?)]
    ) -> RedisCommand {
        let ms = Int64((at.timeIntervalSince1970 * 1000).rounded(.down))
        var historyKeys: [UserID: Int] = [:]
        var keys = [store.eventStream(org: trail.org), store.countsKey(trail.org, trail.campaign)]
        let historyMillis = Int64(store.deliveryHistoryDays) * 86_400_000
        let minID = store.eventsMaxAgeSeconds > 0 ? String(max(0, ms - Int64(store.eventsMaxAgeSeconds) * 1000)) : ""
        var args = [
            store.eventsEnabled ? "1" : "0", String(store.eventsMaxLength), minID, String(ms - historyMillis),
            String(historyMillis), String(store.ledgerTTLSeconds), trail.org.rawValue, trail.campaign.rawValue,
            trail.app.rawValue, String(ms), RFC3339.format(at, .milliseconds), guarded ? "1" : "0",
        ]
        args.reserveCapacity(args.count + 7 * lines.count)
        let job = trail.campaign.rawValue
        for line in lines {
            var index = 0
            if let user = line.user {
                if let k = historyKeys[user] {
                    index = k
                } else {
                    keys.append(store.deliveryHistoryKey(trail.org, user))
                    index = keys.count
                    historyKeys[user] = index
                }
            }
            let device = line.device.map(DeliveryRecord.redacted) ?? "-"
            let platform = line.platform?.rawValue ?? "-"
            args.append(String(index))
            args.append(line.user?.rawValue ?? "")
            args.append(line.platform?.rawValue ?? "")
            args.append(line.device.flatMap { d in trail.tracking.map { $0.messageID(for: d) } } ?? "")
            args.append(line.outcome)
            args.append(line.reason ?? "")
            args.append("\(line.outcome)\t\(platform)\t\(device)\t\(job)\t\(line.reason ?? "")")
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
            if store.eventsEnabled {
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
            guard let user = device.user else { continue }
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
        if store.eventsEnabled, store.eventsMaxAgeSeconds > 0, !outcomes.isEmpty {
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

/// A recorded batch's trail, kept in the job's trail outbox (`StoreConfiguration.trailKey`) by the record's
/// transaction and written out later as event stream entries and history lines (`RedisTrailWriter`). One element per
/// batch: a header line (`v1`, campaign, app, delivery job, Unix ms, tracked `1`/`0`) and a line per device (user,
/// platform, token, outcome, reason), tab-separated, `%`, tab and newline escaped as `%25`, `%09`, `%0A`.
struct TrailBatch {
    var trail: DeliveryTrail
    var at: Date
    var outcomes: [(Device, DeliveryOutcome)]

    static func escaped(_ s: String) -> String {
        guard s.utf8.contains(where: { $0 == 0x25 || $0 == 0x09 || $0 == 0x0A }) else { return s }
        return s.replacingOccurrences(of: "%", with: "%25").replacingOccurrences(of: "\t", with: "%09")
            .replacingOccurrences(of: "\n", with: "%0A")
    }

    static func unescaped(_ s: Substring) -> String {
        guard s.contains("%") else { return String(s) }
        return s.replacingOccurrences(of: "%0A", with: "\n").replacingOccurrences(of: "%09", with: "\t")
            .replacingOccurrences(of: "%25", with: "%")
    }

    /// The outbox element of a batch recorded at `at` by delivery `job`.
    static func encode(_ trail: DeliveryTrail, job: JobID, at: Date, _ outcomes: [(Device, DeliveryOutcome)]) -> String
    {
        var text = "v1\t\(escaped(trail.campaign.rawValue))\t\(escaped(trail.app.rawValue))\t\(escaped(job.rawValue))"
        text += "\t\(Int64((at.timeIntervalSince1970 * 1000).rounded(.down)))\t\(trail.tracking == nil ? 0 : 1)\n"
        text.reserveCapacity(text.utf8.count + outcomes.count * 120)
        for (device, outcome) in outcomes {
            text += escaped(device.user?.rawValue ?? "")
            text += "\t"
            text += device.platform.rawValue
            text += "\t"
            text += escaped(device.token.rawValue)
            text += "\t"
            text += RecordedOutcome(outcome).encoded.map(escaped) ?? "a"
            text += "\n"
        }
        return text
    }

    /// Reads an outbox element of `org`; nil for one it cannot read.
    init?(org: OrgID, decoding text: String) {
        var lines = text.split(separator: "\n", omittingEmptySubsequences: true)[...]
        guard let header = lines.popFirst() else { return nil }
        let h = header.split(separator: "\t", omittingEmptySubsequences: false)
        guard h.count == 6, h[0] == "v1", let ms = Int64(h[4]) else { return nil }
        let job = JobID(Self.unescaped(h[3]))
        trail = DeliveryTrail(
            org: org, campaign: JobID(Self.unescaped(h[1])), app: AppName(Self.unescaped(h[2])),
            tracking: h[5] == "1" ? MessageTracking(org: org, job: job) : nil)
        at = Date(timeIntervalSince1970: Double(ms) / 1000)
        outcomes = []
        outcomes.reserveCapacity(lines.count)
        for line in lines {
            let f = line.split(separator: "\t", maxSplits: 3, omittingEmptySubsequences: false)
            guard f.count == 4, let platform = Platform(rawValue: String(f[1])) else { return nil }
            let outcome: DeliveryOutcome
            if f[3] == "a" {
                outcome = .accepted
            } else {
                guard let recorded = RecordedOutcome(encoded: Self.unescaped(f[3])) else { return nil }
                outcome = recorded.outcome
            }
            let user = f[0].isEmpty ? nil : UserID(Self.unescaped(f[0]))
            outcomes.append((Device(platform: platform, token: DeviceToken(Self.unescaped(f[2])), user: user), outcome))
        }
    }
}

/// Writes the trail outboxes out: each element, in one transaction that takes it off the outbox (`LPOP`) and adds
/// its event stream entries and history lines, so each is written exactly once; `WATCH` on the outbox makes two
/// writers of one job (a reclaimed delivery's and its successor's) take turns, not both write one element.
///
/// The recording delivery asks for its job's outbox after each record (`schedule`), and a writer thread of the
/// worker writes it out of the send path; before the job's report is published the delivery empties it itself
/// (`flush`), so a report is never ahead of its trail. A delivery that finds a ledger left by an earlier one asks
/// for that job's outbox too, so a crash leaves nothing behind.
public final class RedisTrailWriter: @unchecked Sendable {
    private let endpoint: RedisEndpoint
    private let options: RedisClient.Options
    private let store: StoreConfiguration
    private let logger: Logger
    /// This worker's name among a job's trail writers (its consumer name).
    private let writer: String
    private let condition = NSCondition()
    private var waiting: [(OrgID, JobID)] = []
    private var running = false

    public init(
        endpoint: RedisEndpoint, options: RedisClient.Options, store: StoreConfiguration, writer: String,
        logger: Logger
    ) {
        self.writer = writer
        self.endpoint = endpoint
        self.options = options
        self.store = store
        self.logger = logger
    }

    /// Asks the writer thread to write `job`'s outbox out.
    public func schedule(org: OrgID, job: JobID) {
        condition.lock()
        defer { condition.unlock() }
        if !waiting.contains(where: { $0.0 == org && $0.1 == job }) { waiting.append((org, job)) }
        if running {
            condition.signal()
            return
        }
        running = true
        let thread = Thread { [self] in run() }
        thread.name = "volley.trail"
        thread.start()
    }

    /// The thread: writes what is asked for, on its own connection; stops after 5 s with nothing to do. A failure
    /// is retried with the shared back-off (the outbox keeps the element until it is written).
    private func run() {
        let client = RedisClient(endpoint: endpoint, options: options, name: "trail", logger: logger)
        let backoff = ExponentialBackoff(base: 0.05, max: 2)
        var failures = 0
        while true {
            condition.lock()
            if waiting.isEmpty { _ = condition.wait(until: Date().addingTimeInterval(5)) }
            guard !waiting.isEmpty else {
                running = false
                condition.unlock()
                return
            }
            let (org, job) = waiting.removeFirst()
            condition.unlock()
            do {
                try Self.write(client, store: store, org: org, job: job, writer: writer, logger: logger)
                failures = 0
            } catch {
                failures += 1
                logger.warning("writing the event stream and histories failed", metadata: ["error": "\(error)"])
                Thread.sleep(forTimeInterval: backoff.delay(afterFailures: failures))
                schedule(org: org, job: job)
            }
        }
    }

    /// Writes `job`'s outbox out on `client`, element by element, until it is empty. `writer` names this worker
    /// (its consumer): it first moves an element into its own list (`LMOVE`, so no other writer has it and the
    /// recording delivery's pushes to the outbox never disturb the write), then writes it out in the transaction
    /// that takes it off that list, under `WATCH` of the list, which only a recovery of this writer's leftovers
    /// (`recover`) touches. The writers of a job are noted, so a later delivery finds what a dead one took.
    public static func write(
        _ client: RedisClient, store: StoreConfiguration, org: OrgID, job: JobID, writer: String, logger: Logger
    ) throws {
        let outbox = store.trailKey(org, job)
        let mine = store.trailTakenKey(org, job, writer: writer)
        let writers = store.trailWritersKey(org, job)
        let ttl = String(store.ledgerTTLSeconds)
        var noted = false
        while true {
            var taken = try client.command(["LINDEX", mine, "0"]).throwIfError("read trail").string
            if taken == nil {
                var commands = [RedisCommand(["LMOVE", outbox, mine, "LEFT", "RIGHT"])]
                if !noted {
                    commands += [RedisCommand(["SADD", writers, writer]), RedisCommand(["EXPIRE", writers, ttl])]
                }
                let replies = try client.pipeline(commands)
                for r in replies { try r.throwIfError("take trail") }
                noted = true
                taken = replies[0].string
                if taken != nil { _ = try client.command(["EXPIRE", mine, ttl]).throwIfError("take trail") }
            }
            guard let element = taken else { return }
            try writeOut(client, store: store, org: org, list: mine, element: element, job: job, logger: logger)
        }
    }

    /// Writes out what the job's other writers took and did not write (a worker that died between taking an element
    /// and writing it): called by a delivery that finds an earlier delivery's ledger.
    public static func recover(
        _ client: RedisClient, store: StoreConfiguration, org: OrgID, job: JobID, writer: String, logger: Logger
    ) throws {
        let writers = store.trailWritersKey(org, job)
        for other in try client.command(["SMEMBERS", writers]).throwIfError("trail writers").array ?? [] {
            guard let name = other.string, name != writer else { continue }
            let list = store.trailTakenKey(org, job, writer: name)
            while let element = try client.command(["LINDEX", list, "0"]).throwIfError("read trail").string {
                try writeOut(client, store: store, org: org, list: list, element: element, job: job, logger: logger)
            }
            _ = try client.command(["SREM", writers, name]).throwIfError("trail writers")
        }
    }

    /// Writes `element`, the head of `list`, out in the transaction that takes it off `list`, if it is still the
    /// head under `WATCH` (another writer may have written it: then nothing is written twice).
    private static func writeOut(
        _ client: RedisClient, store: StoreConfiguration, org: OrgID, list: String, element: String, job: JobID,
        logger: Logger
    ) throws {
        let read = try client.pipeline([RedisCommand(["WATCH", list]), RedisCommand(["LINDEX", list, "0"])])
        for r in read { try r.throwIfError("read trail") }
        var commands = [RedisCommand(["MULTI"]), RedisCommand(["LPOP", list])]
        if read.last?.string == element {
            if let batch = TrailBatch(org: org, decoding: element) {
                commands += DeliveryTrailScript.outcomeCommands(store, batch.trail, at: batch.at, batch.outcomes)
            } else {
                logger.error("dropping a trail element it cannot read", metadata: ["job": "\(job)"])
            }
        } else {
            // Written by another writer meanwhile: an empty transaction on the list's connection ends the WATCH (a
            // keyless UNWATCH could go to another node's connection on a cluster).
            commands = [RedisCommand(["MULTI"]), RedisCommand(["LLEN", list])]
        }
        commands.append(RedisCommand(["EXEC"]))
        let replies = try client.pipeline(commands)
        for r in replies.dropLast() { try r.throwIfError("write trail") }
        // A nil EXEC: the list changed under the WATCH; the caller reads it again.
        if let exec = replies.last?.array { for r in exec { try r.throwIfError("write trail") } }
    }
}
