import Foundation
import Logging
import VolleyCore
import VolleyRedis

/// Makes Redis-backed sessions: one connection each, for one engine thread.
public struct RedisPipelineBackend: PipelineBackend {
    public let endpoint: RedisEndpoint
    public let store: StoreConfiguration
    /// This worker's consumer name in the group.
    public let consumer: String
    public let options: RedisClient.Options
    public let logger: Logger

    public init(
        endpoint: RedisEndpoint, store: StoreConfiguration = StoreConfiguration(), consumer: String,
        options: RedisClient.Options = .init(), logger: Logger = Logger(label: "volley.store")
    ) {
        self.endpoint = endpoint
        var store = store
        // On a Redis Cluster the event stream must live in the org's slot, beside the ledger its entries are
        // written with (one transaction), whoever built the configuration.
        if endpoint.isCluster { store.eventStreamPerOrg = true }
        self.store = store
        self.consumer = consumer
        self.options = options
        self.logger = logger
    }

    public func makeSession(name: String, isCancelled: @escaping @Sendable () -> Bool) throws -> any PipelineSession {
        makeRedisSession(name: name, isCancelled: isCancelled)
    }

    public func makeRedisSession(name: String, isCancelled: @escaping @Sendable () -> Bool = { false })
        -> RedisPipelineSession
    {
        let client = RedisClient(
            endpoint: endpoint, options: options, name: name, logger: logger, isCancelled: isCancelled)
        return RedisPipelineSession(client: client, store: store, consumer: consumer, logger: logger)
    }
}

/// Job stream, device registry and outcome ledger on one `RedisClient`. Owned by one thread (the client is).
public final class RedisPipelineSession: PipelineSession, @unchecked Sendable {
    public let client: RedisClient
    public let store: StoreConfiguration
    public let consumer: String
    let logger: Logger
    /// Progress counts not yet written, per progress key: written with the next `record`'s pipeline.
    private var progress: [String: (resolved: Int, done: Int)] = [:]
    /// Live counts not yet written, per counts key: written in the next `record`'s transaction.
    private var counts: [String: [String: Int64]] = [:]
    /// What the next `record` tells on the event stream and in the users' histories (`noteTrail`).
    private var trail: (DeliveryTrail, Date)?
    /// The ledgers whose `_cancelled` and `_paused` marks each `record` looks at (`watchSteering`), and what the
    /// last look saw.
    private var steeringKeys: [String] = []
    public private(set) var steeringSeen = JobSteering.run

    public init(client: RedisClient, store: StoreConfiguration, consumer: String, logger: Logger) {
        self.client = client
        self.store = store
        self.consumer = consumer
        self.logger = logger
    }

    // MARK: - JobStream

    // With `store.streamShards` > 1 every operation below goes to each shard's stream on its own: one XREADGROUP
    // cannot name streams in different Redis Cluster slots (CROSSSLOT). An entry carries its shard in its id.

    public func ensureGroup() throws {
        for shard in store.streamShardIndexes { try ensureGroup(shard: shard) }
    }

    private func ensureGroup(shard: Int) throws {
        let stream = store.jobStream(shard: shard)
        // Look before creating: a worker whose Redis user may not create groups (deploy/redis-acl.conf, where the
        // operator creates them once) starts all the same when the group exists. A missing stream answers an error.
        let info = try client.command(["XINFO", "GROUPS", stream])
        if info.errorMessage == nil, let groups = info.array,
            groups.contains(where: { g in g.fieldPairs.contains { $0.0 == "name" && $0.1 == store.group } })
        {
            return
        }
        if let e = info.errorMessage, e.hasPrefix("NOPERM") {
            throw RedisError(.server, "XINFO GROUPS \(stream): \(e)")
        }
        // `0`: jobs added before the first worker started are delivered too.
        let r = try client.command(["XGROUP", "CREATE", stream, store.group, "0", "MKSTREAM"])
        if let e = r.errorMessage, !e.hasPrefix("BUSYGROUP") {
            throw RedisError(.server, "XGROUP CREATE \(stream) \(store.group): \(e)")
        }
    }

    /// The shard the next read starts at: it moves on by one each read, so a busy shard does not starve the others.
    private var nextReadShard = 0
    /// Longest blocking read on one shard while the others may be receiving jobs (with more than one shard).
    static let shardBlockMillis = 50

    public func readNew(count: Int, blockMillis: Int) throws -> [JobEntry] {
        let shards = store.streamShardIndexes.count
        if shards == 1 { return try readNew(shard: 0, count: count, blockMillis: blockMillis) }
        // Without blocking, each shard in turn until `count` entries are read; when all are empty, block briefly on
        // the next one (a job on another shard waits at most that long).
        let first = nextReadShard
        nextReadShard = (nextReadShard + 1) % shards
        var out: [JobEntry] = []
        for k in 0..<shards where out.count < count {
            out += try readNew(shard: (first + k) % shards, count: count - out.count, blockMillis: nil)
        }
        if !out.isEmpty || blockMillis <= 0 { return out }
        return try readNew(shard: first, count: count, blockMillis: min(blockMillis, Self.shardBlockMillis))
    }

    /// XREADGROUP on one shard; `blockMillis` nil reads without BLOCK.
    private func readNew(shard: Int, count: Int, blockMillis: Int?) throws -> [JobEntry] {
        let stream = store.jobStream(shard: shard)
        var args = ["XREADGROUP", "GROUP", store.group, consumer, "COUNT", String(max(1, count))]
        if let blockMillis { args += ["BLOCK", String(max(0, blockMillis))] }
        args += ["STREAMS", stream, ">"]
        // The socket timeout must outlast BLOCK, or hiredis reports a blocking read as timed out.
        let timeout = Double(blockMillis ?? 0) / 1000 + client.options.commandTimeout
        var r = try client.command(args, timeout: timeout)
        if let e = r.errorMessage, e.hasPrefix("NOGROUP") {
            // The stream or group vanished (Redis restarted without persistence, or someone deleted it).
            logger.warning("job stream group missing, recreating", metadata: ["stream": "\(stream)"])
            try ensureGroup(shard: shard)
            r = try client.command(args, timeout: timeout)
        }
        try r.throwIfError("XREADGROUP \(stream)")
        guard let streams = r.array else { return [] } // nil reply: BLOCK timed out
        var out: [JobEntry] = []
        for s in streams {
            guard let pair = s.array, pair.count == 2, let entries = pair[1].array else { continue }
            for e in entries {
                if let entry = Self.entry(e, deliveryCount: 1, shard: shard) { out.append(entry) }
            }
        }
        return out
    }

    /// Where each shard's XAUTOCLAIM scan continues.
    private var autoclaimCursors: [Int: String] = [:]

    public func claimIdle(minIdleMillis: Int, count: Int) throws -> [JobEntry] {
        let shards = store.streamShardIndexes.count
        let first = nextReadShard
        var out: [JobEntry] = []
        for k in 0..<shards where out.count < count {
            out += try claimIdle(shard: (first + k) % shards, minIdleMillis: minIdleMillis, count: count - out.count)
        }
        return out
    }

    private func claimIdle(shard: Int, minIdleMillis: Int, count: Int) throws -> [JobEntry] {
        let stream = store.jobStream(shard: shard)
        let r = try client.command([
            "XAUTOCLAIM", stream, store.group, consumer, String(minIdleMillis),
            autoclaimCursors[shard] ?? "0-0", "COUNT", String(max(1, count)),
        ])
        if let e = r.errorMessage, e.hasPrefix("NOGROUP") {
            try ensureGroup(shard: shard)
            return []
        }
        try r.throwIfError("XAUTOCLAIM \(stream)")
        // Redis 7: [next-cursor, [[id, [f, v, …]], …], [deleted ids]] (Redis 6.2 had no third element).
        guard let parts = r.array, parts.count >= 2 else {
            throw RedisError(.unexpectedReply, "XAUTOCLAIM returned \(r)")
        }
        autoclaimCursors[shard] = parts[0].string ?? "0-0"
        var claimed: [JobEntry] = []
        for e in parts[1].array ?? [] {
            if let entry = Self.entry(e, deliveryCount: 0, shard: shard) { claimed.append(entry) }
        }
        if parts.count >= 3, let deleted = parts[2].array, !deleted.isEmpty {
            let ids = deleted.compactMap(\.string)
            if !ids.isEmpty { _ = try client.command(["XACK", stream, store.group] + ids) }
        }
        if claimed.isEmpty { return [] }
        // Delivery counts (XAUTOCLAIM incremented them) from XPENDING, pipelined.
        let pending = try client.pipeline(
            claimed.map {
                ["XPENDING", stream, store.group, $0.entryID.rawValue, $0.entryID.rawValue, "1"]
            })
        for i in claimed.indices {
            if let row = pending[i].array?.first?.array, row.count >= 4, let n = row[3].integer {
                claimed[i].deliveryCount = Int(n)
            } else {
                claimed[i].deliveryCount = 2
            }
        }
        return claimed
    }

    /// XCLAIM … JUSTID resets idle time without counting a delivery; the script only touches entries still owned
    /// by this consumer, so an entry another worker already reclaimed is not stolen back. KEYS[1] the job stream;
    /// ARGV[1] the group, ARGV[2] the consumer (names, not keys: a cluster routes by KEYS), ARGV[3..] entry ids.
    static let keepAliveScript = RedisScript(
        """
        local n = 0
        for i = 3, #ARGV do
          local p = redis.call('XPENDING', KEYS[1], ARGV[1], ARGV[i], ARGV[i], 1)
          if p[1] and p[1][2] == ARGV[2] then
            redis.call('XCLAIM', KEYS[1], ARGV[1], ARGV[2], 0, ARGV[i], 'JUSTID')
            n = n + 1
          end
        end
        return n
        """)

    public func keepAlive(_ entries: [StreamEntryID]) throws {
        if entries.isEmpty { return }
        for (shard, ids) in Dictionary(grouping: entries, by: \.shard).sorted(by: { $0.key < $1.key }) {
            try client.eval(
                Self.keepAliveScript, keys: RedisKeyGroups.keepAlive(stream: store.jobStream(shard: shard)),
                args: [store.group, consumer] + ids.map(\.rawValue)
            ).throwIfError("keep-alive")
        }
    }

    public func ack(_ entry: StreamEntryID) throws {
        let stream = store.jobStream(shard: entry.shard)
        try client.checked(["XACK", stream, store.group, entry.rawValue])
        try waitForReplicas(after: stream)
    }

    /// `redis.waitReplicas`: narrows what a failover can lose to what the replicas have not acknowledged yet. A WAIT
    /// that times out is logged, not failed: the write is on the primary, and redelivery covers its loss.
    private func waitForReplicas(after key: String) throws {
        guard store.waitReplicas > 0 else { return }
        let acked = try client.waitReplicas(
            store.waitReplicas, timeoutMillis: store.waitTimeoutMillis, afterWritingTo: key)
        if acked < store.waitReplicas {
            logger.warning(
                "fewer replicas acknowledged than redis.waitReplicas",
                metadata: ["wanted": "\(store.waitReplicas)", "acknowledged": "\(acked)"])
        }
    }

    /// The dead letter goes to the dead-letter stream of the entry's own shard.
    public func deadLetter(_ entry: JobEntry, reason: JobRejection.Reason, detail: String) throws {
        let shard = entry.entryID.shard
        var args = ["XADD", store.deadStream(shard: shard), "MAXLEN", "~", String(store.deadMaxLength), "*"]
        for (k, v) in entry.fields.sorted(by: { $0.key < $1.key }) { args += [k, v] }
        args += [
            "reason", reason.rawValue, "detail", detail, "worker", consumer,
            "sourceEntry", entry.entryID.rawValue, "deliveries", String(entry.deliveryCount),
        ]
        // The dead letter first, then the ack: on a Redis Cluster the two streams may be on different nodes, and an
        // ack must never land without its dead letter.
        try client.command(args).throwIfError("dead-letter \(entry.entryID)")
        try client.checked(["XACK", store.jobStream(shard: shard), store.group, entry.entryID.rawValue])
    }

    static func entry(_ reply: RedisReply, deliveryCount: Int, shard: Int = 0) -> JobEntry? {
        guard let e = reply.array, e.count == 2, let id = e[0].string else { return nil }
        var fields: [String: String] = [:]
        for (k, v) in e[1].fieldPairs { fields[k] = v }
        return JobEntry(entryID: StreamEntryID(id, shard: shard), fields: fields, deliveryCount: deliveryCount)
    }

    // MARK: - DeviceRegistry

    public func devices(org: OrgID, app: AppName, users: [UserID]) throws -> [[Device]] {
        if users.isEmpty { return [] }
        var out: [[Device]] = []
        var visited = 0
        // HVALS, not HGETALL: the field name is the token, which the record carries too, so the fields are not
        // read at all (half the reply elements hiredis allocates and frees, and the tokens' bytes twice on the wire).
        // Read in place: each record's JSON goes from hiredis's buffer straight into a Device (no value Strings).
        // By index: on a Redis Cluster each node's replies arrive on their own.
        try client.pipelineVisitRawIndexed(
            users.map { ["HVALS", store.deviceKey(org, app, $0)] },
            restart: {
                out = [[Device]](repeating: [], count: users.count)
                visited = 0
            }
        ) { index, r in
            if let e = r.errorMessage { throw RedisError(.server, "HVALS devices: \(e)") }
            guard index < users.count else {
                throw RedisError(
                    .unexpectedReply,
                    "HVALS devices: more replies than the \(users.count) users asked for")
            }
            let user = users[index]
            var list: [Device] = []
            list.reserveCapacity(r.count)
            for k in 0..<r.count {
                guard let json = r[k]?.bytes else { continue }
                if let d = DeviceRecordReader.device(fromJSONBytes: json) {
                    list.append(d)
                    continue
                }
                guard let rec = try? DeviceRecord.decoder.decode(DeviceRecord.self, from: Data(json)) else {
                    logger.warning("skipping unreadable device record", metadata: ["user": "\(user)"])
                    continue
                }
                list.append(rec.device)
            }
            out[index] = list
            visited += 1
        }
        guard visited == users.count else {
            throw RedisError(.unexpectedReply, "HVALS devices: \(visited) replies for \(users.count) users")
        }
        return out
    }

    /// Removes a token from its user's hash, the token index, the last-seen index and (when the user has no device
    /// left) the user set.
    /// ARGV holds pairs: the device field, then the second the token became invalid ('' when unknown). A token whose
    /// record was registered after that second stays (APNs: "the token has been invalid since the timestamp";
    /// an app that registered it again since has a valid token).
    static let removeScript = RedisScript(
        """
        local removed = 0
        for i = 1, #ARGV, 2 do
          local field = ARGV[i]
          local since = tonumber(ARGV[i + 1])
          local user = redis.call('HGET', KEYS[1], field)
          if user then
            local devKey = KEYS[3] .. user
            local keep = false
            if since then
              local record = redis.call('HGET', devKey, field)
              if record then
                local ok, decoded = pcall(cjson.decode, record)
                keep = ok and type(decoded.registeredAt) == 'number' and decoded.registeredAt > since
              end
            end
            if not keep then
              removed = removed + redis.call('HDEL', devKey, field)
              redis.call('HDEL', KEYS[1], field)
              if redis.call('HLEN', devKey) == 0 then redis.call('SREM', KEYS[2], user) end
              redis.call('ZREM', KEYS[4], field)
            end
          else
            redis.call('ZREM', KEYS[4], field)
          end
        end
        return removed
        """)

    @discardableResult
    public func remove(org: OrgID, app: AppName, tokens: [DeadToken]) throws -> Int {
        if tokens.isEmpty { return 0 }
        var args: [String] = []
        args.reserveCapacity(tokens.count * 2)
        for t in tokens {
            args.append(StoreConfiguration.deviceField(t.device.platform, t.device.token))
            args.append(t.invalidSince.map { String($0.timeIntervalSince1970) } ?? "")
        }
        let r = try client.eval(
            Self.removeScript,
            keys: RedisKeyGroups.removeTokens(store, org: org, app: app),
            args: args)
        try r.throwIfError("remove tokens")
        return Int(r.integer ?? 0)
    }

    // MARK: - OutcomeLedger

    /// The accepted devices of the job whose chunks are being looked up, read incrementally: the list only grows
    /// (one element per recorded batch), so each look-up reads the elements added since the last one. A delivery
    /// that is still running elsewhere keeps recording; each chunk sees what was recorded until just before it.
    private var accepted: (key: String, elements: Int, fields: Set<String>)?

    public func recordedOutcomes(org: OrgID, job: JobID, devices: [Device]) throws -> [RecordedOutcome?] {
        if devices.isEmpty { return [] }
        var hmget = RedisCommand(["HMGET", store.ledgerKey(org, job)])
        hmget.reserveCapacity(devices.count * 96)
        for d in devices { StoreConfiguration.appendDeviceField(d.platform, d.token, to: &hmget) }
        let acceptedKey = store.acceptedKey(org, job)
        if accepted?.key != acceptedKey { accepted = (acceptedKey, 0, []) }
        var seen = accepted?.elements ?? 0
        var replies = try client.pipeline([
            hmget, RedisCommand(["LLEN", acceptedKey]),
            RedisCommand(["LRANGE", acceptedKey, String(seen), "-1"]),
        ])
        for r in replies { try r.throwIfError("read ledger") }
        guard replies.count == 3, let a = replies[0].array, a.count == devices.count,
            let length = replies[1].integer
        else {
            throw RedisError(
                .unexpectedReply,
                "HMGET ledger returned \(replies.first.map(elementCount) ?? -1) values for "
                    + "\(devices.count) devices, LLEN \(replies.count > 1 ? replies[1].description : "none")")
        }
        if length < seen {
            // The list is shorter than what this session read of it (it expired and a new delivery started it again).
            seen = 0
            accepted = (acceptedKey, 0, [])
            replies[2] = try client.command(["LRANGE", acceptedKey, "0", "-1"]).throwIfError("read ledger")
        }
        var fields = accepted?.fields ?? []
        for element in replies[2].array ?? [] {
            guard let s = element.string, let batch = StoreConfiguration.acceptedFields(s) else {
                throw RedisError(
                    .unexpectedReply,
                    "\(acceptedKey) holds an element that is not a batch of accepted devices")
            }
            fields.formUnion(batch)
            seen += 1
        }
        accepted = (acceptedKey, seen, fields)
        return zip(devices, a).map { d, v in
            if let r = v.string.flatMap({ RecordedOutcome(encoded: $0) }) { return r }
            // A field String per device only when there is a list to look in.
            if fields.isEmpty { return nil }
            let field = StoreConfiguration.deviceField(d.platform, d.token)
            return fields.contains(field) ? RecordedOutcome(.accepted) : nil
        }
    }

    /// Accepted devices go to the job's accepted list, one element per batch (RPUSH of one argument: Redis stores a
    /// string per batch, not a hash entry per device); the rare other outcomes go to the ledger hash.
    public func record(
        org: OrgID, job: JobID, outcomes: [(Device, DeliveryOutcome)], releasing settlement: QuotaSettlement?
    ) throws {
        if outcomes.isEmpty { return }
        let key = store.ledgerKey(org, job)
        let acceptedKey = store.acceptedKey(org, job)
        let ttl = String(store.ledgerTTLSeconds)
        var batch: [UInt8] = []
        var hset = RedisCommand(["HSET", key])
        var others = 0
        for i in outcomes.indices { // by index: no copy of each (device, outcome) pair
            if case .accepted = outcomes[i].1 {
                if batch.isEmpty { batch.reserveCapacity(outcomes.count * 80) }
                StoreConfiguration.appendAcceptedEntry(outcomes[i].0.platform, outcomes[i].0.token, to: &batch)
                continue
            }
            guard let encoded = RecordedOutcome(outcomes[i].1).encoded else { continue }
            StoreConfiguration.appendDeviceField(outcomes[i].0.platform, outcomes[i].0.token, to: &hset)
            hset.append(encoded)
            others += 1
        }
        var commands: [RedisCommand] = []
        // The pause and cancel marks ride on this round trip (first, before any MULTI): they cost a running job
        // nothing more than a command per record.
        commands += JobSteeringMarks.commands(for: steeringKeys)
        if !batch.isEmpty {
            var rpush = RedisCommand(["RPUSH", acceptedKey])
            batch.withUnsafeBufferPointer { rpush.append(bytes: $0) }
            commands += [rpush, RedisCommand(["EXPIRE", acceptedKey, ttl])]
        }
        if others > 0 { commands += [hset, RedisCommand(["EXPIRE", key, ttl])] }
        for (progressKey, p) in progress {
            commands += [
                RedisCommand(["HINCRBY", progressKey, "resolved", String(p.resolved)]),
                RedisCommand(["HINCRBY", progressKey, "done", String(p.done)]),
                RedisCommand(["EXPIRE", progressKey, ttl]),
            ]
        }
        progress.removeAll(keepingCapacity: true)
        for (countsKey, fields) in counts {
            for (field, n) in fields.sorted(by: { $0.key < $1.key }) where n != 0 {
                commands.append(RedisCommand(["HINCRBY", countsKey, field, String(n)]))
            }
            commands.append(RedisCommand(["EXPIRE", countsKey, ttl]))
        }
        let counted = !counts.isEmpty
        counts.removeAll(keepingCapacity: true)
        var trailing = false
        defer { trail = nil }
        if let (trail, at) = self.trail, store.recordsTrail {
            trailing = true
            commands += DeliveryTrailScript.outcomeCommands(store, trail, at: at, outcomes)
        }
        let settling = settlement.map { !$0.isEmpty } ?? false
        let transaction = settling || counted || trailing
        if transaction {
            // The outcomes, their live counts and the release of their quota charges land together or not at all
            // (MULTI/EXEC): a redelivery adopts only the charges of devices it will send again, and counts only
            // what it records.
            commands.insert(RedisCommand(["MULTI"]), at: 2 * steeringKeys.count)
        }
        if let settlement, settling { commands += Self.chargeReleases(org: org, job: job, settlement) }
        if transaction { commands.append(RedisCommand(["EXEC"])) }
        let replies = try client.pipeline(commands)
        for r in replies { try r.throwIfError("record outcomes") }
        if !steeringKeys.isEmpty {
            steeringSeen = JobSteeringMarks.steering(from: replies.prefix(2 * steeringKeys.count))
        }
        // EXEC answers with each queued command's reply: an error there fails the record too.
        if transaction, let exec = replies.last?.array { for r in exec { try r.throwIfError("record outcomes") } }
        try waitForReplicas(after: key)
    }

    /// Takes a settlement's pushes off the job's unsettled charges (`volley:quota:{O}:job:<job>`): with the outcomes
    /// that settle them (`record`), or alone for pushes charged and never sent (`releaseCharges`).
    static func chargeReleases(org: OrgID, job: JobID, _ settlement: QuotaSettlement) -> [RedisCommand] {
        let charges = RecipientKeys(org: org).quotaCharges(job)
        return settlement.parts.filter { $0.delivered + $0.refunded > 0 }.map { p in
            let field = RedisQuotaStore.chargeField(delivery: settlement.delivery, platform: p.platform, hour: p.hour)
            return RedisCommand(["HINCRBY", charges, field, String(-(p.delivered + p.refunded))])
        }
    }

    public func ledgerState(org: OrgID, job: JobID) throws -> LedgerState {
        let key = store.ledgerKey(org, job)
        // One slot (RedisKeyGroups.recordTransaction): the ledger and its accepted list.
        let replies = try client.pipeline(
            [
                RedisCommand(["HEXISTS", key, "_published"]),
                RedisCommand(["EXISTS", key, store.acceptedKey(org, job)]),
            ] + JobSteeringMarks.commands(for: [key]))
        for r in replies { try r.throwIfError("ledger state") }
        guard replies.count == 4, let reported = replies[0].integer, let exists = replies[1].integer else {
            throw RedisError(.unexpectedReply, "HEXISTS/EXISTS ledger: \(replies)")
        }
        if reported == 1 { return .reported }
        switch JobSteeringMarks.steering(from: replies[2...]) {
        case .cancelled: return .cancelled
        case .paused: return .paused
        case .run: return exists > 0 ? .partial : .empty
        }
    }

    public func watchSteering(org: OrgID, jobs: [JobID]) {
        steeringKeys = jobs.map { store.ledgerKey(org, $0) }
        steeringSeen = .run
    }

    @discardableResult
    public func checkSteering() throws -> JobSteering {
        if steeringKeys.isEmpty { return steeringSeen }
        let replies = try client.pipeline(JobSteeringMarks.commands(for: steeringKeys))
        for r in replies { try r.throwIfError("pause and cancel marks") }
        steeringSeen = JobSteeringMarks.steering(from: replies[...])
        return steeringSeen
    }

    public func releaseCharges(org: OrgID, job: JobID, _ settlement: QuotaSettlement) throws {
        let commands = Self.chargeReleases(org: org, job: job, settlement)
        if commands.isEmpty { return }
        for r in try client.pipeline(commands) { try r.throwIfError("release unsent charges") }
    }

    /// The report goes through the job's ledger (an outbox): `HSETNX _report` keeps the first completion's report,
    /// and the script answers it until `_published` is set. The ledger lives in the org's slot and the report stream
    /// elsewhere, so one script cannot write both on a Redis Cluster. KEYS[1] the ledger; ARGV[1] this delivery's
    /// report JSON, ARGV[2] ttl seconds, ARGV[3] '1' when the report says cancelled. Returns the report to publish,
    /// nil when it is on the stream already, or 0 when the job was cancelled after the delivery last looked and the
    /// report does not say so (a cancel answered 200 is never followed by a report that says otherwise).
    static let publishScript = RedisScript(
        """
        if redis.call('HEXISTS', KEYS[1], '_published') == 1 then return false end
        if ARGV[3] ~= '1' and redis.call('HEXISTS', KEYS[1], '_report') == 0
          and redis.call('HEXISTS', KEYS[1], '_cancelled') == 1 then return 0 end
        redis.call('HSETNX', KEYS[1], '_report', ARGV[1])
        redis.call('EXPIRE', KEYS[1], ARGV[2])
        return redis.call('HGET', KEYS[1], '_report')
        """)

    /// Publishes the report kept in the ledger, then marks it published. A crash between the XADD and the mark
    /// publishes it again on redelivery (at most one duplicate entry per crash, same `job`); a crash before the XADD
    /// loses nothing, since `ledgerState` reports `.partial` until the mark is set.
    @discardableResult
    public func publish(_ report: JobReport) throws -> Bool {
        let json = String(decoding: try ReportCoding.encoder.encode(report), as: UTF8.self)
        let ledger = store.ledgerKey(report.org, report.job)
        let r = try client.eval(
            Self.publishScript, keys: RedisKeyGroups.publish(store, org: report.org, job: report.job),
            args: [json, String(store.ledgerTTLSeconds), report.status == "cancelled" ? "1" : "0"])
        try r.throwIfError("publish report")
        if r.integer == 0 { throw CancelledBeforeReport() }
        guard let kept = r.string else { return false }
        try client.checked([
            "XADD", store.reportStream(for: report.job), "MAXLEN", "~", String(store.reportsMaxLength), "*",
            "job", report.job.rawValue, "org", report.org.rawValue, "report", kept,
        ])
        try client.checked(["HSET", ledger, "_published", "1"])
        return true
    }

    public func noteTrail(_ trail: DeliveryTrail, at: Date) {
        self.trail = (trail, at)
    }

    public func recordSkipped(_ trail: DeliveryTrail, users: [UserID], reason: SkippedRecipient, at: Date) throws {
        if users.isEmpty { return }
        let command = DeliveryTrailScript.skippedCommand(store, trail, at: at, users: users, reason: reason)
        try client.command(command).throwIfError("record skipped users")
    }

    public func noteCounts(org: OrgID, job: JobID, _ add: [String: Int64]) {
        counts[store.countsKey(org, job), default: [:]].merge(add, uniquingKeysWith: +)
    }

    public func noteProgress(org: OrgID, job: JobID, resolved: Int, done: Int) {
        progress[store.progressKey(org, job), default: (0, 0)].resolved += resolved
        progress[store.progressKey(org, job), default: (0, 0)].done += done
    }

    public func recordDebugEvents(org: OrgID, job: JobID, _ events: [DebugEvent]) throws {
        let commands = try RedisDebugEvents.appendCommands(
            events, key: store.debugEventsKey(org, job), ttlSeconds: store.ledgerTTLSeconds)
        for r in try client.pipeline(commands) { try r.throwIfError("record debug events") }
    }
}

private func elementCount(_ r: RedisReply) -> Int { r.array?.count ?? -1 }
