import Foundation
import VolleyCore
import VolleyRedis
import Yams

/// Volley's configuration: one YAML file (`--config FILE`), every key overridable by a `VOLLEY_*` environment
/// variable, validated at start with one error that lists every problem and names its key.
///
/// The key names under `apps` are a contract with users; keys may be added, never renamed.
public struct VolleyConfiguration: Sendable {
    public var apps: [AppSettings]
    public var redis: RedisSettings
    public var worker: WorkerSettings
    public var quotas: QuotaSettings
    public var inbox: InboxSettings = .init()
    public var devices: DeviceSettings = .init()
    /// `events`: the event stream of device outcomes and interactions (docs/events.md).
    public var events: EventSettings = .init()
    /// `deliveries`: the users' delivery histories (`GET /v1/users/{user}/deliveries`).
    public var deliveries: DeliverySettings = .init()
    /// `syncHints`: how waiting sync hints coalesce into silent pushes.
    public var syncHints: SyncHintConfiguration = .init()
    /// `schedule`: how far ahead a job's `sendAt` may be.
    public var schedule: ScheduleSettings = .init()
    public var log: LogSettings
    public var metrics: MetricsSettings = .init()
    /// The HTTP API process (`volley api`).
    public var api: APISettings = .init()
    /// `console`: the web console `volley api` serves under `/console` (docs/console.md).
    public var console: ConsoleSettings = .init()
    /// `orgs[]`: settings per org (its time zone, its frequency caps).
    public var orgs: [OrgSettings] = []
    /// Where the file was read from (nil when built in code).
    public var sourcePath: String?

    public init(
        apps: [AppSettings] = [], redis: RedisSettings = .init(), worker: WorkerSettings = .init(),
        quotas: QuotaSettings = .init(), log: LogSettings = .init()
    ) {
        self.apps = apps
        self.redis = redis
        self.worker = worker
        self.quotas = quotas
        self.log = log
    }

    public func app(named name: AppName) -> AppSettings? { apps.first { $0.name == name } }

    /// Startup warnings: valid settings that are probably not what the operator meant.
    public var warnings: [String] {
        guard apps.count > 1 else { return [] }
        return apps.filter { !$0.orgsConfigured }.map {
            "apps[\($0.name)].orgs is not set, so every org may send through app '\($0.name)'; "
                + "list the org ids allowed (or [\"*\"] to say so)"
        }
    }
}

/// One org's settings (`orgs[]`).
public struct OrgSettings: Sendable, Hashable {
    /// `orgs[].id`.
    public var id: OrgID
    /// `orgs[].timeZone`: the IANA zone of the org's devices that registered none, for `deliverAtLocalTime`.
    public var timeZone: String?
    /// `orgs[].frequencyCaps`: at most `max` visible notifications per user in each rolling `window`, optionally
    /// per notification `type`. Rules set through `PUT /v1/frequency-caps` replace these for the org.
    public var frequencyCaps: [FrequencyCapRule] = []
}

extension VolleyConfiguration {
    /// Each org's configured frequency caps (orgs without rules left out).
    public var frequencyCaps: [OrgID: [FrequencyCapRule]] {
        var out: [OrgID: [FrequencyCapRule]] = [:]
        for o in orgs where !o.frequencyCaps.isEmpty { out[o.id] = o.frequencyCaps }
        return out
    }
}

/// One connected app: its APNs and/or FCM credentials, and the orgs allowed to send through it.
public struct AppSettings: Sendable, Hashable {
    public var name: AppName
    public var apns: APNSSettings?
    public var fcm: FCMSettings?
    /// `apps[].orgs`: the org ids allowed to use the app, `["*"]` for any (the default).
    public var orgs: AppOrgs = .any
    /// False when the file left `orgs` out (every org may use the app, and startup warns if several apps exist).
    public var orgsConfigured = false
}

public struct APNSSettings: Sendable, Hashable {
    public enum Auth: Sendable, Hashable {
        /// Token auth: `.p8` key, key id, team id.
        case token(keyFile: String, keyId: String, teamId: String)
        /// Certificate auth: PKCS#12 (`certFile` ends in .p12/.pfx) + `certPassword`, or PEM cert + `certKeyFile`.
        case certificate(certFile: String, password: String?, keyFile: String?)
    }
    public var auth: Auth
    public var topic: String
    public var environment: APNSEnvironment
    public var host: String?
    public var port: Int?
    public var caFile: String?
    public var connections: Int
    public var maxStreams: Int
}

public struct FCMSettings: Sendable, Hashable {
    public var serviceAccountFile: String
    /// Default `https://fcm.googleapis.com`.
    public var endpoint: String
    public var caFile: String?
    public var connections: Int
    public var maxStreams: Int
    /// Sends per minute the whole fleet keeps to for this project (FCM's default quota: 600,000).
    public var maxPerMinute: Int = 600_000
}

public struct RedisSettings: Sendable, Hashable {
    /// `redis://[user:pass@]host:port/db` or `unix:///path/to/sock[?db=N]`.
    public var url: String = "redis://127.0.0.1:6379/0"
    public var connectTimeoutSeconds: Double = 5
    public var commandTimeoutSeconds: Double = 10
    /// `redis.cluster`: seed primaries (`host:port`) of a Redis Cluster; empty for a single Redis. User and password
    /// come from `redis.url` (its host is then not used).
    public var cluster: [String] = []
    /// `redis.waitReplicas`: replicas to `WAIT` for after outcome records and acks (0: none).
    public var waitReplicas: Int = 0
    /// `redis.tls.caFile`, `certFile`, `keyFile` (paths resolved) and `serverName`: how a `rediss://` URL's
    /// connections verify the server and show a client certificate. Only with `rediss://`.
    public var tlsCAFile: String?
    public var tlsServerName: String?
    public var tlsCertFile: String?
    public var tlsKeyFile: String?
    public init() {}

    /// The TLS of every connection: set for a `rediss://` URL, nil otherwise.
    public var tls: RedisTLSSettings? {
        guard url.lowercased().hasPrefix("rediss://") else { return nil }
        return RedisTLSSettings(
            caFile: tlsCAFile, serverName: tlsServerName, certFile: tlsCertFile, keyFile: tlsKeyFile)
    }
}

/// `redis.tls`, for a `rediss://` URL: the CA file (nil: the system trust store), the name the server's
/// certificate must carry (nil: the host connected to) and an optional client certificate and key.
public struct RedisTLSSettings: Sendable, Hashable {
    public var caFile: String?
    public var serverName: String?
    public var certFile: String?
    public var keyFile: String?
}

public struct WorkerSettings: Sendable, Hashable {
    public var stream: String = "volley:jobs"
    public var group: String = "volley"
    /// Default: host name + pid, unique per process.
    public var consumer: String?
    public var deadLetterStream: String = "volley:dead"
    public var reportStream: String = "volley:reports"
    /// XREADGROUP COUNT.
    public var batchSize: Int = 16
    /// XREADGROUP BLOCK, milliseconds.
    public var blockMs: Int = 1000
    /// In-flight device sends per worker process; reading stops while they are all taken.
    public var inFlight: Int = 4000
    /// Pending entries idle longer than this are reclaimed from dead consumers (XAUTOCLAIM).
    public var reclaimIdleMs: Int = 60_000
    /// Entries delivered more often than this are dead-lettered.
    public var maxDeliveries: Int = 5
    /// On SIGTERM: how long to finish in-flight sends before leaving the rest pending.
    public var drainSeconds: Double = 20
    /// Outcomes recorded to Redis per pipelined batch.
    public var recordBatchSize: Int = 512
    /// Jobs resolving to more devices than this are split into shard jobs shared by the fleet.
    public var shardSize: Int = 50_000
    /// Jobs a worker process works on at once (one thread and one Redis connection each).
    public var concurrentJobs: Int = 2
    /// How often to look for idle entries of dead workers to reclaim.
    public var reclaimIntervalMs: Int = 5_000
    /// How often a worker refreshes the idle time of entries it is still working on (default reclaimIdleMs / 3).
    public var keepAliveIntervalMs: Int?
    /// Devices per resolution chunk (users per registry read follow the devices per user seen, at most 500).
    public var chunkSize: Int = 500
    /// Job streams (and dead-letter and report streams) the jobs are spread over by job id; 1: the plain names.
    public var streamShards: Int = 1
    /// When set, the worker holds a Linux PM QoS request (/dev/cpu_dma_latency) that idle CPUs wake within this many
    /// microseconds while it runs (0: idle CPUs poll instead of halting). Unset: the system's own setting.
    public var cpuWakeLatencyUs: Int?
    /// How long a send that never left waits for a connection to its provider (connects failing, the provider
    /// restarting or failing over) before it fails `transport:provider-unreachable`. 120 s rides out a load
    /// balancer's failover (health checks every 10–30 s, a few failed checks before the switch) with room to spare.
    public var providerOutageSeconds: Double = 120
    /// A send written and unanswered when its connection dies: resent under a collapse identity, or failed.
    public var unansweredSends = UnansweredSends.resend
    /// Parsed device keys the worker keeps for the encrypted path (`DeviceKeyCache`), shared by its lanes: each key
    /// is parsed once per worker, not per job, and memory holds at most this many.
    public var deviceKeyCacheSize: Int = 10_000
    public init() {}
}

public struct QuotaSettings: Sendable, Hashable {
    public var ios: Int = 20_000
    public var android: Int = 10_000
    /// Per-org overrides from the file (Redis overrides set with `volley quota set` win).
    public var orgs: [String: OrgQuota] = [:]
    public struct OrgQuota: Sendable, Hashable {
        public var ios: Int?
        public var android: Int?
    }
    public init() {}
}

/// In-app inbox retention per user: the newest `maxCount`, none older than `maxAgeSeconds`.
public struct InboxSettings: Sendable, Hashable {
    public var maxCount: Int = 200
    public var maxAgeSeconds: Int = 90 * 86_400
    public init() {}
}

/// The event stream (docs/events.md): one entry per device outcome and per interaction.
public struct EventSettings: Sendable, Hashable {
    /// `events.enabled`: false writes no entries (outcomes, counts and histories are kept all the same).
    public var enabled = true
    /// `events.outcomes`: also one entry per device outcome and per user a job skipped (default false: it costs
    /// the record an `XADD` per device; docs/benchmarks.md).
    public var outcomes = false
    /// `events.maxLength`: the stream is trimmed to about this many entries (per org's stream on a cluster).
    public var maxLength = 1_000_000
    /// `events.maxAgeSeconds`: entries older than this are trimmed as new ones come; 0 trims by length only.
    public var maxAgeSeconds = 7 * 86_400
    public init() {}
}

/// The users' delivery histories.
public struct DeliverySettings: Sendable, Hashable {
    /// `deliveries.days`: each user's history keeps the outcomes of this many days (about 170 bytes of Redis memory
    /// per device outcome kept); 0, the default, keeps no history (it costs the record three commands per user).
    public var days = 0
    public init() {}
}

/// `console`: the web console under `/console` on the API's port.
public struct ConsoleSettings: Sendable, Hashable {
    /// `console.enabled`: serve the console (off by default: a deployment opts in).
    public var enabled = false
    /// `console.sessionHours`: how long a sign-in lasts before the console asks for the key again.
    public var sessionHours = 8.0
    public init() {}
}

/// The device registry's hygiene.
public struct DeviceSettings: Sendable, Hashable {
    /// `devices.staleAfterDays`: workers remove devices not registered again for this many days (FCM treats a token
    /// inactive for 270 days as expired); 0 keeps every device.
    public var staleAfterDays: Int = 270
    public init() {}
}

/// Scheduled sends (`sendAt`, docs/scheduling.md).
public struct ScheduleSettings: Sendable, Hashable {
    /// `schedule.maxAheadDays`: a job's `sendAt` may be at most this many days ahead; the API answers 422 beyond,
    /// a worker dead-letters the job.
    public var maxAheadDays: Int = 30
    public init() {}
}

/// The operations endpoint (`/metrics`, `/livez`, `/readyz`) of each worker and API process.
public struct MetricsSettings: Sendable, Hashable {
    /// False: no endpoint, and metrics are not collected at all.
    public var enabled = true
    /// All interfaces by default: Prometheus and the kubelet's probes reach the container from outside.
    public var host = "0.0.0.0"
    /// The worker's port: 9464 by default; 0 picks a free port (logged at start), for several workers on one host.
    public var port = 9464
    /// `metrics.apiPort`: the API process's port, 9465 by default, so a worker and an API on one host both serve
    /// their series; 0 picks a free port.
    public var apiPort = 9465
    public init() {}
}

public struct LogSettings: Sendable, Hashable {
    public enum Format: String, Sendable, Hashable { case text, json }
    public var level: String = "info"
    public var format: Format = .text
    public init() {}
}

/// Startup failure: every problem, each naming its key.
public struct ConfigurationError: Error, CustomStringConvertible, Sendable {
    public let problems: [String]
    public let source: String
    public var description: String {
        "invalid configuration (\(source)): \(problems.count) problem\(problems.count == 1 ? "" : "s")\n"
            + problems.map { "  - \($0)" }.joined(separator: "\n")
    }
}

extension VolleyConfiguration {
    static let schema: [String: [String]] = [
        "redis": [
            "url", "connectTimeoutSeconds", "commandTimeoutSeconds", "cluster", "waitReplicas", "tls.caFile",
            "tls.serverName", "tls.certFile", "tls.keyFile",
        ],
        "worker": [
            "stream", "group", "consumer", "deadLetterStream", "reportStream", "batchSize", "blockMs",
            "inFlight", "reclaimIdleMs", "maxDeliveries", "drainSeconds", "recordBatchSize", "shardSize",
            "concurrentJobs", "reclaimIntervalMs", "keepAliveIntervalMs", "chunkSize", "cpuWakeLatencyUs",
            "streamShards", "providerOutageSeconds", "unansweredSends", "deviceKeyCacheSize",
        ],
        "quotas": ["ios", "android"],
        "inbox": ["maxCount", "maxAgeSeconds"],
        "devices": ["staleAfterDays"],
        "events": ["enabled", "outcomes", "maxLength", "maxAgeSeconds"],
        "deliveries": ["days"],
        "console": ["enabled", "sessionHours"],
        "syncHints": ["minIntervalSeconds", "maxPerHour", "maxRecordIds"],
        "schedule": ["maxAheadDays"],
        "log": ["level", "format"],
        "metrics": ["enabled", "host", "port", "apiPort"],
        // Every scalar key the API section reads, and the removed ones, whose environment overrides still stop
        // startup by name.
        "api": (APISettings.keys.union(APISettings.removed.keys).union(APISettings.subsectionKeys)).sorted(),
    ]
    static let appSchema: [String: [String]] = [
        "apns": [
            "keyFile", "keyId", "teamId", "certFile", "certPassword", "certKeyFile", "topic", "environment",
            "host", "port", "caFile", "connections", "maxStreams",
        ],
        "fcm": ["serviceAccountFile", "endpoint", "caFile", "connections", "maxStreams", "maxPerMinute"],
    ]

    /// Reads, overrides from the environment, and validates. Throws `ConfigurationError` listing every problem.
    public static func load(path: String, environment: [String: String] = ProcessInfo.processInfo.environment) throws
        -> VolleyConfiguration
    {
        let url = URL(fileURLWithPath: path)
        let text: String
        do { text = try String(contentsOf: url, encoding: .utf8) } catch {
            throw ConfigurationError(
                problems: ["--config: cannot read \(path): \(error.localizedDescription)"], source: path)
        }
        var config = try parse(
            yaml: text, baseDirectory: url.deletingLastPathComponent(), environment: environment,
            source: path)
        config.sourcePath = path
        return config
    }

    /// Parses YAML text (relative file paths resolve against `baseDirectory`).
    public static func parse(
        yaml text: String, baseDirectory: URL?, environment: [String: String] = [:],
        source: String = "<yaml>"
    ) throws -> VolleyConfiguration {
        let loaded: Any?
        do { loaded = try Yams.load(yaml: text) } catch {
            throw ConfigurationError(problems: ["YAML syntax: \(error)"], source: source)
        }
        var tree: [String: Any]
        if loaded == nil || loaded is NSNull {
            tree = [:]
        } else if let t = loaded as? [String: Any] {
            tree = t
        } else {
            throw ConfigurationError(problems: ["top level: must be a mapping"], source: source)
        }
        _ = EnvironmentOverrides.apply(to: &tree, schema: schema, appSchema: appSchema, environment: environment)
        var r = ConfigReader(baseDirectory: baseDirectory)
        let config = read(tree, &r)
        if !r.problems.isEmpty { throw ConfigurationError(problems: r.problems, source: source) }
        return config
    }

    private static func keys(_ section: String) -> Set<String> { Set(schema[section] ?? []) }

    private static func read(_ tree: [String: Any], _ r: inout ConfigReader) -> VolleyConfiguration {
        r.rejectUnknownKeys(tree, known: Set(schema.keys).union(["apps", "orgs"]), at: "")
        var c = VolleyConfiguration()

        if let s = r.section(tree, "redis", at: "") {
            // The schema's `tls.caFile` … are keys of the `tls` subsection (RedisSettings.readTLS checks them).
            r.rejectUnknownKeys(s, known: keys("redis").filter { !$0.hasPrefix("tls.") }.union(["tls"]), at: "redis")
            if let v = r.string(s, "url", at: "redis") {
                if let problem = RedisURLCheck.problem(v) { r.problem("redis.url", problem) } else { c.redis.url = v }
            }
            if let v = r.double(s, "connectTimeoutSeconds", at: "redis", min: 0.01) {
                c.redis.connectTimeoutSeconds = v
            }
            if let v = r.double(s, "commandTimeoutSeconds", at: "redis", min: 0.01) {
                c.redis.commandTimeoutSeconds = v
            }
            if let v = s["cluster"], !(v is NSNull) { c.redis.cluster = RedisSettings.readSeeds(v, &r) }
            if let v = r.int(s, "waitReplicas", at: "redis", range: 0...16) { c.redis.waitReplicas = v }
            if let t = r.section(s, "tls", at: "redis") { RedisSettings.readTLS(t, into: &c.redis, &r) }
        }
        if let s = r.section(tree, "worker", at: "") {
            let p = "worker"
            r.rejectUnknownKeys(s, known: keys(p), at: p)
            if let v = r.string(s, "stream", at: p) { c.worker.stream = v }
            if let v = r.string(s, "group", at: p) { c.worker.group = v }
            if let v = r.string(s, "consumer", at: p) { c.worker.consumer = v }
            if let v = r.string(s, "deadLetterStream", at: p) { c.worker.deadLetterStream = v }
            if let v = r.string(s, "reportStream", at: p) { c.worker.reportStream = v }
            if let v = r.int(s, "batchSize", at: p, range: 1...10_000) { c.worker.batchSize = v }
            if let v = r.int(s, "blockMs", at: p, range: 1...600_000) { c.worker.blockMs = v }
            if let v = r.int(s, "inFlight", at: p, range: 1...1_000_000) { c.worker.inFlight = v }
            if let v = r.int(s, "reclaimIdleMs", at: p, range: 100...86_400_000) { c.worker.reclaimIdleMs = v }
            if let v = r.int(s, "maxDeliveries", at: p, range: 1...1000) { c.worker.maxDeliveries = v }
            if let v = r.double(s, "drainSeconds", at: p, min: 0) { c.worker.drainSeconds = v }
            if let v = r.int(s, "recordBatchSize", at: p, range: 1...100_000) { c.worker.recordBatchSize = v }
            if let v = r.int(s, "shardSize", at: p, range: 1...100_000_000) { c.worker.shardSize = v }
            if let v = r.int(s, "concurrentJobs", at: p, range: 1...64) { c.worker.concurrentJobs = v }
            if let v = r.int(s, "reclaimIntervalMs", at: p, range: 50...3_600_000) { c.worker.reclaimIntervalMs = v }
            if let v = r.int(s, "keepAliveIntervalMs", at: p, range: 50...3_600_000) {
                c.worker.keepAliveIntervalMs = v
            }
            if let v = r.int(s, "chunkSize", at: p, range: 1...100_000) { c.worker.chunkSize = v }
            if let v = r.int(s, "cpuWakeLatencyUs", at: p, range: 0...1_000_000) { c.worker.cpuWakeLatencyUs = v }
            if let v = r.int(s, "streamShards", at: p, range: 1...1024) { c.worker.streamShards = v }
            if let v = r.int(s, "deviceKeyCacheSize", at: p, range: 2...10_000_000) { c.worker.deviceKeyCacheSize = v }
            if let v = r.double(s, "providerOutageSeconds", at: p, min: 0.001) {
                if v > 86_400 {
                    r.problem("\(p).providerOutageSeconds", "must be at most 86400 (one day), got \(v)")
                } else {
                    c.worker.providerOutageSeconds = v
                }
            }
            if let v = r.string(s, "unansweredSends", at: p) {
                if let u = UnansweredSends(rawValue: v) {
                    c.worker.unansweredSends = u
                } else {
                    r.problem("\(p).unansweredSends", "must be resend or fail, got '\(v)'")
                }
            }
            // A shard's name adds its own hash tag (`:{jobs0}`); a tag already in the name would win and put every
            // shard in one Redis Cluster slot.
            let w = c.worker
            if w.streamShards > 1 {
                for (key, name) in [
                    ("stream", w.stream), ("deadLetterStream", w.deadLetterStream), ("reportStream", w.reportStream),
                ] where name.contains("{") {
                    r.problem(
                        "\(p).\(key)",
                        "must not contain '{' when worker.streamShards is above 1 (each shard adds its own hash tag)")
                }
            }
        }
        if let s = r.section(tree, "quotas", at: "") {
            r.rejectUnknownKeys(s, known: keys("quotas").union(["orgs"]), at: "quotas")
            if let v = r.int(s, "ios", at: "quotas", range: 0...Int(Int32.max)) { c.quotas.ios = v }
            if let v = r.int(s, "android", at: "quotas", range: 0...Int(Int32.max)) { c.quotas.android = v }
            if let orgs = r.section(s, "orgs", at: "quotas") {
                for (org, value) in orgs {
                    let p = "quotas.orgs.\(org)"
                    guard let o = value as? [String: Any] else {
                        r.problem(p, "must be a mapping")
                        continue
                    }
                    r.rejectUnknownKeys(o, known: ["ios", "android"], at: p)
                    c.quotas.orgs[org] = .init(
                        ios: r.int(o, "ios", at: p, range: 0...Int(Int32.max)),
                        android: r.int(o, "android", at: p, range: 0...Int(Int32.max)))
                }
            }
        }
        if let s = r.section(tree, "inbox", at: "") {
            r.rejectUnknownKeys(s, known: keys("inbox"), at: "inbox")
            if let v = r.int(s, "maxCount", at: "inbox", range: 1...100_000) { c.inbox.maxCount = v }
            if let v = r.int(s, "maxAgeSeconds", at: "inbox", range: 60...Int(Int32.max)) { c.inbox.maxAgeSeconds = v }
        }
        if let s = r.section(tree, "devices", at: "") {
            r.rejectUnknownKeys(s, known: keys("devices"), at: "devices")
            if let v = r.int(s, "staleAfterDays", at: "devices", range: 0...3_650) { c.devices.staleAfterDays = v }
        }
        if let s = r.section(tree, "events", at: "") {
            r.rejectUnknownKeys(s, known: keys("events"), at: "events")
            if let v = r.bool(s, "enabled", at: "events") { c.events.enabled = v }
            if let v = r.bool(s, "outcomes", at: "events") { c.events.outcomes = v }
            if let v = r.int(s, "maxLength", at: "events", range: 1_000...Int(Int32.max)) { c.events.maxLength = v }
            if let v = r.int(s, "maxAgeSeconds", at: "events", range: 0...Int(Int32.max)) {
                c.events.maxAgeSeconds = v
            }
        }
        if let s = r.section(tree, "deliveries", at: "") {
            r.rejectUnknownKeys(s, known: keys("deliveries"), at: "deliveries")
            if let v = r.int(s, "days", at: "deliveries", range: 0...90) { c.deliveries.days = v }
        }
        if let s = r.section(tree, "console", at: "") {
            r.rejectUnknownKeys(s, known: keys("console"), at: "console")
            if let v = r.bool(s, "enabled", at: "console") { c.console.enabled = v }
            if let v = r.double(s, "sessionHours", at: "console", min: 0.05) {
                if v > 168 {
                    r.problem("console.sessionHours", "at most 168 (a week)")
                } else {
                    c.console.sessionHours = v
                }
            }
        }
        if let s = r.section(tree, "syncHints", at: "") {
            let p = "syncHints"
            r.rejectUnknownKeys(s, known: keys(p), at: p)
            if let v = r.double(s, "minIntervalSeconds", at: p, min: 1) {
                if v > 86_400 {
                    r.problem("\(p).minIntervalSeconds", "must be at most 86400 (one day), got \(v)")
                } else {
                    c.syncHints.minIntervalSeconds = v
                }
            }
            if let v = r.int(s, "maxPerHour", at: p, range: 1...3_600) { c.syncHints.maxPerHour = v }
            if let v = r.int(s, "maxRecordIds", at: p, range: 1...10_000) { c.syncHints.maxRecordIds = v }
        }
        if let s = r.section(tree, "schedule", at: "") {
            r.rejectUnknownKeys(s, known: keys("schedule"), at: "schedule")
            if let v = r.int(s, "maxAheadDays", at: "schedule", range: 1...3_650) { c.schedule.maxAheadDays = v }
        }
        if let s = r.section(tree, "log", at: "") {
            r.rejectUnknownKeys(s, known: keys("log"), at: "log")
            if let v = r.string(s, "level", at: "log") {
                let levels = ["trace", "debug", "info", "notice", "warning", "error", "critical"]
                if levels.contains(v) {
                    c.log.level = v
                } else {
                    r.problem("log.level", "must be one of \(levels.joined(separator: ", ")), got '\(v)'")
                }
            }
            if let v = r.string(s, "format", at: "log") {
                if let f = LogSettings.Format(rawValue: v) {
                    c.log.format = f
                } else {
                    r.problem("log.format", "must be text or json, got '\(v)'")
                }
            }
        }
        if let s = r.section(tree, "metrics", at: "") {
            r.rejectUnknownKeys(s, known: keys("metrics"), at: "metrics")
            if let v = r.bool(s, "enabled", at: "metrics") { c.metrics.enabled = v }
            if let v = r.string(s, "host", at: "metrics") {
                if v.isEmpty { r.problem("metrics.host", "must not be empty") } else { c.metrics.host = v }
            }
            if let v = r.int(s, "port", at: "metrics", range: 0...65535) { c.metrics.port = v }
            if let v = r.int(s, "apiPort", at: "metrics", range: 0...65535) { c.metrics.apiPort = v }
        }
        if let s = r.section(tree, "api", at: "") { c.api = APISettings.read(s, &r) }
        if let raw = tree["orgs"], !(raw is NSNull) { c.orgs = readOrgs(raw, &r) }
        if let raw = tree["apps"], !(raw is NSNull) {
            guard let list = raw as? [Any] else {
                r.problem("apps", "must be a list of apps")
                return c
            }
            var seen = Set<String>()
            for (i, item) in list.enumerated() {
                let p = "apps[\(i)]"
                guard let app = item as? [String: Any] else {
                    r.problem(p, "must be a mapping")
                    continue
                }
                r.rejectUnknownKeys(app, known: ["name", "apns", "fcm", "orgs"], at: p)
                guard let name = r.string(app, "name", at: p), !name.isEmpty else {
                    r.problem("\(p).name", "required")
                    continue
                }
                if !seen.insert(name).inserted { r.problem("\(p).name", "duplicate app name '\(name)'") }
                let ap = "apps[\(name)]"
                var settings = AppSettings(name: AppName(name), apns: nil, fcm: nil)
                if let a = r.section(app, "apns", at: ap) { settings.apns = readAPNS(a, at: "\(ap).apns", &r) }
                if let f = r.section(app, "fcm", at: ap) { settings.fcm = readFCM(f, at: "\(ap).fcm", &r) }
                if let raw = app["orgs"], !(raw is NSNull) {
                    let ids = (raw as? [Any])?.compactMap { $0 as? String }
                    if let ids, ids.count == (raw as? [Any])?.count, !ids.isEmpty, !ids.contains(where: \.isEmpty) {
                        settings.orgs = AppOrgs(ids)
                        settings.orgsConfigured = true
                    } else {
                        r.problem("\(ap).orgs", "must be a non-empty list of org ids, or [\"*\"] for every org")
                    }
                }
                if settings.apns == nil && settings.fcm == nil && app["apns"] == nil && app["fcm"] == nil {
                    r.problem(ap, "needs an apns or fcm section")
                }
                c.apps.append(settings)
            }
        }
        return c
    }

    /// `orgs`: a list of `{id, timeZone, frequencyCaps}`; every problem names its key
    /// (`orgs[1].frequencyCaps[0].window`).
    private static func readOrgs(_ raw: Any, _ r: inout ConfigReader) -> [OrgSettings] {
        guard let list = raw as? [Any] else {
            r.problem("orgs", "must be a list of orgs, each with an id (and a timeZone, frequencyCaps)")
            return []
        }
        var out: [OrgSettings] = []
        var seen = Set<String>()
        for (i, item) in list.enumerated() {
            let p = "orgs[\(i)]"
            guard let o = item as? [String: Any] else {
                r.problem(p, "must be a mapping")
                continue
            }
            r.rejectUnknownKeys(o, known: ["id", "timeZone", "frequencyCaps"], at: p)
            guard let id = r.string(o, "id", at: p), !id.isEmpty else {
                r.problem("\(p).id", "required: the org's id")
                continue
            }
            if !seen.insert(id).inserted { r.problem("\(p).id", "duplicate org id '\(id)'") }
            var org = OrgSettings(id: OrgID(id))
            if let z = r.string(o, "timeZone", at: p) {
                if z.isEmpty || TimeZone(identifier: z) == nil {
                    r.problem("\(p).timeZone", "'\(z)' is not an IANA time zone such as Europe/Berlin")
                } else {
                    org.timeZone = z
                }
            }
            if let caps = o["frequencyCaps"], !(caps is NSNull) {
                do {
                    org.frequencyCaps = try readFrequencyCaps(caps, at: "\(p).frequencyCaps")
                } catch {
                    r.problem(error.field, error.message)
                }
            }
            out.append(org)
        }
        return out
    }

    private static func readFrequencyCaps(_ raw: Any, at p: String) throws(FrequencyCapError) -> [FrequencyCapRule] {
        guard let list = raw as? [Any] else {
            throw FrequencyCapError(p, "must be a list of rules such as {window: 1h, max: 3}")
        }
        var rules: [FrequencyCapRule] = []
        for (i, item) in list.enumerated() {
            let rp = "\(p)[\(i)]"
            guard let o = item as? [String: Any] else { throw FrequencyCapError(rp, "must be a mapping") }
            if let unknown = o.keys.sorted().first(where: { !["window", "max", "type"].contains($0) }) {
                throw FrequencyCapError("\(rp).\(unknown)", "unknown key; a rule has window, max and type")
            }
            if let w = o["window"], !(w is String) {
                throw FrequencyCapError("\(rp).window", "must be a string such as 30m, 1h or 7d")
            }
            var max: Int?
            if let m = o["max"], !(m is NSNull) {
                guard let n = m as? Int, !(m is Bool) else {
                    throw FrequencyCapError("\(rp).max", "must be a whole number")
                }
                max = n
            }
            if let t = o["type"], !(t is NSNull), !(t is String) {
                throw FrequencyCapError("\(rp).type", "must be a string (a notification type)")
            }
            rules.append(
                try FrequencyCapRule.make(
                    window: o["window"] as? String, max: max, type: o["type"] as? String, at: rp))
        }
        try FrequencyCapRule.check(rules, at: p)
        return rules
    }

    private static func readAPNS(_ a: [String: Any], at p: String, _ r: inout ConfigReader) -> APNSSettings? {
        r.rejectUnknownKeys(a, known: Set(appSchema["apns"] ?? []), at: p)
        let keyFile = r.file(a, "keyFile", at: p)
        let certFile = r.file(a, "certFile", at: p)
        let keyId = r.string(a, "keyId", at: p)
        let teamId = r.string(a, "teamId", at: p)
        let certPassword = r.string(a, "certPassword", at: p)
        let certKeyFile = r.file(a, "certKeyFile", at: p)
        let topic = r.string(a, "topic", at: p)
        var auth: APNSSettings.Auth?
        switch (keyFile, certFile) {
        case (let k?, nil):
            if keyId == nil { r.problem("\(p).keyId", "required with keyFile (the 10-character key id)") }
            if teamId == nil { r.problem("\(p).teamId", "required with keyFile (the 10-character team id)") }
            if let keyId, let teamId { auth = .token(keyFile: k, keyId: keyId, teamId: teamId) }
        case (nil, let c?):
            auth = .certificate(certFile: c, password: certPassword, keyFile: certKeyFile)
        case (_?, _?):
            r.problem(p, "set either keyFile (token auth) or certFile (certificate auth), not both")
        case (nil, nil):
            r.problem(p, "needs keyFile + keyId + teamId (token auth) or certFile (+ certPassword) (certificate auth)")
        }
        if topic == nil { r.problem("\(p).topic", "required (the app's bundle id)") }
        var environment = APNSEnvironment.production
        if let e = r.string(a, "environment", at: p) {
            if let env = APNSEnvironment(rawValue: e) {
                environment = env
            } else {
                r.problem("\(p).environment", "must be production or sandbox, got '\(e)'")
            }
        }
        let port = r.int(a, "port", at: p, range: 1...65535)
        let caFile = r.file(a, "caFile", at: p)
        let host = r.host(a, "host", at: p)
        let connections = r.int(a, "connections", at: p, range: 1...256) ?? 2
        let maxStreams = r.int(a, "maxStreams", at: p, range: 1...100_000) ?? 1000
        guard let auth, let topic else { return nil }
        return APNSSettings(
            auth: auth, topic: topic, environment: environment, host: host, port: port,
            caFile: caFile, connections: connections, maxStreams: maxStreams)
    }

    private static func readFCM(_ f: [String: Any], at p: String, _ r: inout ConfigReader) -> FCMSettings? {
        r.rejectUnknownKeys(f, known: Set(appSchema["fcm"] ?? []), at: p)
        let file = r.file(f, "serviceAccountFile", at: p)
        if f["serviceAccountFile"] == nil {
            r.problem("\(p).serviceAccountFile", "required (the service-account JSON)")
        }
        var endpoint = "https://fcm.googleapis.com"
        if let e = r.string(f, "endpoint", at: p) {
            if let u = URL(string: e), u.scheme == "https", u.host != nil {
                endpoint = e
            } else {
                r.problem("\(p).endpoint", "must be an https URL such as https://fcm.googleapis.com, got '\(e)'")
            }
        }
        let caFile = r.file(f, "caFile", at: p)
        let connections = r.int(f, "connections", at: p, range: 1...256) ?? 4
        let maxStreams = r.int(f, "maxStreams", at: p, range: 1...100_000) ?? 100
        let maxPerMinute = r.int(f, "maxPerMinute", at: p, range: 60...1_000_000_000) ?? 600_000
        guard let file else { return nil }
        return FCMSettings(
            serviceAccountFile: file, endpoint: endpoint, caFile: caFile, connections: connections,
            maxStreams: maxStreams, maxPerMinute: maxPerMinute)
    }
}

/// The check of `redis.url`: the Redis wrapper's own parser decides, so every form a client takes passes
/// (`unix://user:pass@/path` included), and a URL that names no host is refused. The message never repeats the
/// user or the password.
enum RedisURLCheck {
    static func problem(_ url: String) -> String? {
        let shape =
            "must look like redis://[user:pass@]host:port/db, rediss://… (TLS) or "
            + "unix://[user:pass@]/path/to/redis.sock"
        let shown = RedisEndpoint.redactURL(url)
        guard let endpoint = try? RedisEndpoint(url: url) else { return "\(shape), got '\(shown)'" }
        if case .tcp = endpoint.address, URL(string: url)?.host?.isEmpty != false {
            return "\(shape): no host in '\(shown)'"
        }
        return nil
    }
}
