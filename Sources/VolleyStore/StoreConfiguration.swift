import VolleyCore
import VolleyRedis

/// Names and limits of the Redis keys Volley uses. Defaults are a contract with producers and operators.
///
/// Layout (all keys under `prefix`, default `volley`):
/// - `volley:jobs` — job stream (field `job` = JSON); consumer group `volley`.
/// - `volley:dead` — dead letters: the original fields + `reason`, `detail`, `worker`, `sourceEntry`, `deliveries`.
/// - `volley:reports` — one entry per job: `job`, `org`, `report` (JSON of `JobReport`), trimmed to
/// ~`reportsMaxLength`.
/// - `volley:dev:{<org>}:<app>:<user>` — hash `platform:token` → device record JSON
///   (`platform`, `token`, `environment`, `locale`, `user`, `registeredAt`, `lastSeenAt`).
/// - `volley:devtok:{<org>}:<app>` — hash `platform:token` → user (reverse index: unregister or remove by token).
/// - `volley:devusers:{<org>}:<app>` — set of users with at least one device (for `devices list`, SSCAN).
/// - `volley:outcomes:{<org>}:<job>` — hash `platform:token` → recorded terminal outcome other than accepted, plus
///   `_report` (the report, kept from the first completion) and `_published` (set once it is on the report stream);
///   expires `ledgerTTLSeconds` after the last write.
/// - `volley:outcomes:{<org>}:<job>:accepted` — list, one element per recorded batch of accepted devices: each device
///   as `<length>:platform:token\n` (the length in decimal bytes of `platform:token`); same expiry.
/// - `volley:events:{<org>}:<job>` — list of debug events (JSON of `DebugEvent`) of a job sent with `"debug": true`,
///   the first `DebugEvent.maxPerJob`; expires `ledgerTTLSeconds` after the last write, like the ledger.
/// - `volley:progress:{<org>}:<job>` — hash `resolved`, `done`: devices resolved and recorded so far (shards count
///   into their parent), for `volley send --wait`; same expiry.
///
/// With `streamShards` N > 1 the job, dead-letter and report streams are each N streams: shard `i` is the configured
/// name followed by `:{jobs<i>}` (`volley:jobs:{jobs0}`, `volley:dead:{jobs0}`, `volley:reports:{jobs0}`, …). The
/// hash tag puts each shard in its own Redis Cluster slot (3 or 6 shards land one or two per primary of an evenly
/// split 3-primary cluster) and a shard's three streams in the same one. A job id picks its shard
/// (`streamShard(of:)`), so a job, its replays and its report always use the same shard.
///
/// The braces are literal: `{<org>}` is the Redis Cluster hash tag (docs/redis-keys.md).
public struct StoreConfiguration: Sendable, Hashable {
    public var prefix: String
    public var jobStream: String
    public var deadStream: String
    public var reportStream: String
    public var group: String
    public var reportsMaxLength: Int
    public var deadMaxLength: Int
    public var ledgerTTLSeconds: Int
    /// `redis.waitReplicas`: after each outcome record and each ack, `WAIT` for this many replicas (0: no WAIT).
    public var waitReplicas: Int = 0
    /// How long one such `WAIT` may block.
    public var waitTimeoutMillis: Int = 1_000
    /// `worker.streamShards`: how many job streams (and dead-letter and report streams) there are; 1 is the plain
    /// names above.
    public var streamShards: Int = 1
    /// True on a Redis Cluster: the event stream is one stream per org (`eventStream(org:)`), in the org's slot, so
    /// each entry is appended in the transaction that records what it tells (exactly once).
    public var eventStreamPerOrg = false
    /// `events.maxLength`: the event stream is trimmed (approximately) to this many entries per stream.
    public var eventsMaxLength: Int = 1_000_000
    /// `events.maxAgeSeconds`: entries older than this are trimmed (`XADD … MINID`); 0 keeps them by length only.
    public var eventsMaxAgeSeconds: Int = 7 * 86_400
    /// `events.enabled`: false writes no event stream entries (outcomes and counts are kept all the same).
    public var eventsEnabled = true
    /// `events.outcomes`: the stream also gets one entry per device outcome and per user a job skipped (an `XADD`
    /// per device in the record's transaction: off by default, docs/benchmarks.md has its cost).
    public var eventsOutcomes = false
    /// `deliveries.days`: a user's delivery history keeps what happened in this many days
    /// (`deliveryHistoryKey`); 0, the default, keeps none.
    public var deliveryHistoryDays: Int = 0
    /// True when a record tells its outcomes to the event stream or the users' histories.
    public var recordsTrail: Bool { (eventsEnabled && eventsOutcomes) || deliveryHistoryDays > 0 }

    public init(
        prefix: String = "volley", jobStream: String? = nil, deadStream: String? = nil,
        reportStream: String? = nil, group: String = "volley", reportsMaxLength: Int = 100_000,
        deadMaxLength: Int = 100_000, ledgerTTLSeconds: Int = 7 * 86_400
    ) {
        self.prefix = prefix
        self.jobStream = jobStream ?? "\(prefix):jobs"
        self.deadStream = deadStream ?? "\(prefix):dead"
        self.reportStream = reportStream ?? "\(prefix):reports"
        self.group = group
        self.reportsMaxLength = reportsMaxLength
        self.deadMaxLength = deadMaxLength
        self.ledgerTTLSeconds = ledgerTTLSeconds
    }

    // MARK: - Job stream shards

    /// Shard indexes, `0..<streamShards`.
    public var streamShardIndexes: Range<Int> { 0..<max(1, streamShards) }

    /// The job stream shard of a job id: CRC16 (the Redis Cluster hash) of the id's bytes, modulo `streamShards`.
    /// Stable across processes and versions, so a replay of a job id lands on the stream of its first submission.
    public func streamShard(of job: JobID) -> Int {
        let n = max(1, streamShards)
        return n == 1 ? 0 : Int(RedisClusterSlot.crc16(job.rawValue)) % n
    }

    /// Shard `shard` of the job stream: `jobStream` itself with one shard, else `jobStream:{jobs<shard>}`.
    public func jobStream(shard: Int) -> String { Self.shardName(jobStream, shard: shard, of: streamShards) }
    /// Shard `shard` of the dead-letter stream (the dead letters of that job stream shard).
    public func deadStream(shard: Int) -> String { Self.shardName(deadStream, shard: shard, of: streamShards) }
    /// Shard `shard` of the report stream (reports of the jobs whose id maps to that shard).
    public func reportStream(shard: Int) -> String { Self.shardName(reportStream, shard: shard, of: streamShards) }
    /// The job stream a job with this id is enqueued on.
    public func jobStream(for job: JobID) -> String { jobStream(shard: streamShard(of: job)) }
    /// The report stream a job's report is published on.
    public func reportStream(for job: JobID) -> String { reportStream(shard: streamShard(of: job)) }
    /// Every job stream shard, in shard order.
    public var jobStreams: [String] { streamShardIndexes.map { jobStream(shard: $0) } }
    /// Every dead-letter stream shard, in shard order.
    public var deadStreams: [String] { streamShardIndexes.map { deadStream(shard: $0) } }
    /// Every report stream shard, in shard order.
    public var reportStreams: [String] { streamShardIndexes.map { reportStream(shard: $0) } }

    /// The engagement event stream (docs/events.md): `volley:events` on one Redis node; on a cluster
    /// `volley:events:{<org>}`, one per org in the slot of the org's ledgers.
    public func eventStream(org: OrgID) -> String {
        eventStreamPerOrg ? "\(prefix):events:{\(org)}" : "\(prefix):events"
    }

    static func shardName(_ base: String, shard: Int, of count: Int) -> String {
        count <= 1 ? base : "\(base):{jobs\(shard)}"
    }

    // Every per-org key carries the org as its hash tag (`{org}`), so the keys one script or transaction touches
    // live in one Redis Cluster slot (docs/redis-keys.md).
    func deviceKey(_ org: OrgID, _ app: AppName, _ user: UserID) -> String { deviceKeyPrefix(org, app) + user.rawValue }
    func deviceKeyPrefix(_ org: OrgID, _ app: AppName) -> String { "\(prefix):dev:{\(org)}:\(app):" }
    public func tokenIndexKey(_ org: OrgID, _ app: AppName) -> String { "\(prefix):devtok:{\(org)}:\(app)" }
    func usersKey(_ org: OrgID, _ app: AppName) -> String { "\(prefix):devusers:{\(org)}:\(app)" }
    /// The outcome ledger's hash of a job.
    public func ledgerKey(_ org: OrgID, _ job: JobID) -> String { "\(prefix):outcomes:{\(org)}:\(job)" }
    func acceptedKey(_ org: OrgID, _ job: JobID) -> String { "\(prefix):outcomes:{\(org)}:\(job):accepted" }
    func debugEventsKey(_ org: OrgID, _ job: JobID) -> String { "\(prefix):events:{\(org)}:\(job)" }
    /// The parts of a paused job parked until its resume: `<job stream shard>␟<schedule member>` (SET, the ledger's
    /// TTL). The resume and the cancel bring each back.
    func pausedPartsKey(_ org: OrgID, _ job: JobID) -> String { "\(prefix):paused:{\(org)}:\(job)" }
    /// A job's live counts (HASH: outcome, `<platform>:<outcome>`, `reason:<reason>`, `accepted:<unix minute>`;
    /// engagement adds `opened`, `dismissed`, `action:<id>`, `opened:<unix minute>`); the ledger's TTL. A shard
    /// counts into its campaign.
    public func countsKey(_ org: OrgID, _ job: JobID) -> String { "\(prefix):counts:{\(org)}:\(job)" }
    func progressKey(_ org: OrgID, _ job: JobID) -> String { "\(prefix):progress:{\(org)}:\(job)" }
    /// The users a job skipped, told once each (SET of `<reason>:<user>`): what makes a redelivery's skips count and
    /// tell nothing twice; the ledger's TTL.
    func skippedKey(_ org: OrgID, _ job: JobID) -> String { "\(prefix):skipped:{\(org)}:\(job)" }
    /// A user's delivery history (ZSET, score the outcome's Unix milliseconds, member
    /// `<outcome>␉<platform>␉<device>␉<job>␉<reason>` as `DeliveryTrailScript` writes it); lines older than
    /// `deliveryHistoryDays` are trimmed as lines are added, and the key expires that long after its last line.
    public func deliveryHistoryKey(_ org: OrgID, _ user: UserID) -> String {
        "\(prefix):deliveries:{\(org)}:\(user)"
    }
    static func deviceField(_ platform: Platform, _ token: DeviceToken) -> String {
        // Built with one allocation (interpolation sizes its buffer by guess and may grow it): twice per device.
        var field = platform.rawValue
        field.reserveCapacity(platform.rawValue.utf8.count + 1 + token.rawValue.utf8.count)
        field.append(":")
        field.append(token.rawValue)
        return field
    }

    /// Appends `deviceField(platform, token)` to `command` as one argument, without making the String.
    static func appendDeviceField(_ platform: Platform, _ token: DeviceToken, to command: inout RedisCommand) {
        command.append(platform.rawValue, UInt8(ascii: ":"), token.rawValue)
    }

    /// Appends one accepted-list entry, `<length>:platform:token\n`, to a batch.
    static func appendAcceptedEntry(_ platform: Platform, _ token: DeviceToken, to batch: inout [UInt8]) {
        var p = platform.rawValue
        var t = token.rawValue
        p.withUTF8 { pb in
            t.withUTF8 { tb in
                RedisCommand.decimal(pb.count + 1 + tb.count) { batch.append(contentsOf: $0) }
                batch.append(UInt8(ascii: ":"))
                batch.append(contentsOf: pb)
                batch.append(UInt8(ascii: ":"))
                batch.append(contentsOf: tb)
                batch.append(UInt8(ascii: "\n"))
            }
        }
    }

    /// The `platform:token` fields of one accepted-list element; nil when it is not in that form.
    static func acceptedFields(_ element: String) -> [String]? {
        var out: [String] = []
        var element = element
        let ok = element.withUTF8 { b -> Bool in
            var at = 0
            while at < b.count {
                var length = 0
                var digits = 0
                while at < b.count, b[at] >= 48, b[at] <= 57, digits < 9 {
                    length = length * 10 + Int(b[at] - 48)
                    at += 1
                    digits += 1
                }
                guard digits > 0, at < b.count, b[at] == UInt8(ascii: ":"), at + 1 + length + 1 <= b.count,
                    b[at + 1 + length] == UInt8(ascii: "\n")
                else { return false }
                let field = UnsafeBufferPointer(rebasing: b[(at + 1)..<(at + 1 + length)])
                out.append(String(decoding: field, as: UTF8.self))
                at += length + 2
            }
            return true
        }
        return ok ? out : nil
    }
}
