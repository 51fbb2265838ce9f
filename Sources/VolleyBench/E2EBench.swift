// swift-format-ignore-file: AlwaysUseLowerCamelCase

// The result types' properties are the `--json` keys (snake_case, a contract with users' scripts), named as written.
import Foundation
import Histogram
import Logging
import VolleyCore
import VolleyRedis
import VolleyService
import VolleyStore

/// `volley-bench e2e`: the whole pipeline under load, from XADD to XACK.
///
/// What it does, in order:
/// 1. starts a redis-server (unix socket, temp dir) and a `volley-mock` unless given (`--redis`, `--mock-endpoints`);
/// 2. writes a Volley YAML pointing at them and loads a device registry (pipelined HSETs through the store's
///    `register`): `devices` devices, `iosShare` of them iOS, `devicesPerUser` per user;
/// 3. starts `workers` `volley worker` processes and warms each one up (TLS handshakes, JWT, OAuth token);
/// 4. idle phase: `probes` targeted one-device jobs, one at a time → enqueue → first accepted push;
/// 5. load phase: XADDs the campaign (jobs of ≤ 500 users) plus a few targeted jobs in one pipeline and polls the
///    mock's accepted counters every `pollMs` until every job is reported and nothing is pending (= XACKed).
///
/// How times are taken (honest, with their resolution):
/// - the load window runs from just before the XADD pipeline to the first poll that sees every report published
///   and XPENDING at 0 (resolution: the 50 ms completion poll);
/// - per-device enqueue → accepted: the mock counts accepted sends; every `pollMs` the bench reads the counter and
///   records the devices accepted since the previous poll at (poll time − XADD time). A device is therefore
///   recorded at most `pollMs` + one stats round trip late, never early;
/// - idle enqueue → first accepted push: the counter is polled every ~0.3 ms after the XADD; resolution ≈ 0.5 ms;
/// - targeted jobs during the campaign: report entry id (Redis clock, ms) − XADD entry id (Redis clock, ms);
/// - CPU: utime + stime of each worker process from /proc over the load window; peak RSS: VmHWM at the end;
/// - Redis commands/s: `INFO stats` total_commands_processed delta over the load window.
public struct E2EBench {
    public struct Options: Sendable {
        public var devices = 100_000
        public var iosShare = 0.6
        public var devicesPerUser = 200
        /// One campaign job naming a group of every user (resolution streams the group; shards share it), instead of
        /// jobs of ≤ 500 user ids.
        public var campaignGroup = true
        public var workers = 1
        public var connections = 2
        public var maxStreams = 1000
        public var inFlight = 4000
        public var shardSize = 50_000
        /// `worker.streamShards`: the job streams producers and workers spread the campaign over.
        public var streamShards = 1
        public var batchSize = 16
        public var blockMs = 1000
        public var recordBatchSize = 512
        public var mockLatencyMs = 0.0
        public var mockMaxStreams = 1000
        public var probes = 100
        public var targetedUnderLoad = 20
        public var pollMs = 10
        public var timeoutSeconds = 900.0
        public var bodyBytes = 300
        public var redisURL: String?
        /// The Redis started for the run also listens on a loopback TCP port, and the workers use it (a cluster is
        /// reached over TCP: comparing with one uses TCP on both sides).
        public var redisTCP = false
        public var mockEndpoints: String?
        public var workDirectory: String?
        public var keep = false
        public var progress = true
        /// Set in the worker processes' environment only (not the mock's, Redis's or the bench's): to measure an
        /// allocator (`LD_PRELOAD`), glibc tunables and the like on the workers alone.
        public var workerEnvironment: [String: String] = [:]
        /// `metrics.enabled` of the workers (each serves its endpoint on a free loopback port).
        public var metricsEnabled = true
        /// `worker.reclaimIdleMs` when set (how long a dead worker's entries wait before another takes them).
        public var reclaimIdleMs: Int?
        /// `--payload`: after the load phase, the plain campaign against this per-person one (`E2EPayloadBench`).
        public var payload: PayloadKind?
        /// Plain/per-person pairs `--payload` runs.
        public var payloadRounds = 2
        /// `--payload encrypted`: distinct device keys, cycled over the devices; nil: one per device.
        public var payloadKeys: Int?
        public init() {}

        /// `KEY=VALUE` entries (`--worker-env`) as a dictionary, the last one winning; nil when an entry has no `=`
        /// or an empty key. A value may itself contain `=` (`GLIBC_TUNABLES=glibc.malloc.tcache_count=0`).
        public static func environment(_ entries: [String]) -> [String: String]? {
            var out: [String: String] = [:]
            for e in entries {
                guard let eq = e.firstIndex(of: "="), eq != e.startIndex else { return nil }
                out[String(e[..<eq])] = String(e[e.index(after: eq)...])
            }
            return out
        }
    }

    public struct WorkerFigures: Sendable, Hashable, Codable {
        public var name: String
        public var cpu_s: Double
        public var peak_rss_mb: Double
    }

    public struct Result: Sendable, Codable {
        public var devices: Int
        public var ios: Int
        public var android: Int
        public var users: Int
        public var jobs: Int
        public var workers: Int
        public var connections: Int
        public var in_flight: Int
        public var mock_latency_ms: Double
        public var mock_max_streams: Int
        public var load_seconds: Double
        public var load_rate: Double
        public var duration_s: Double
        /// Devices with a terminal outcome per second, XADD → last XACK.
        public var e2e_rate: Double
        public var accepted: Int
        public var rejected: Int
        public var failed: Int
        public var first_push_ms: Double
        public var accept_latency: LatencySummary
        public var idle_first_push: LatencySummary
        public var first_push_p99_ms: Double
        public var targeted_under_load: LatencySummary
        public var cpu_s: Double
        public var cpu_s_per_100k: Double
        public var e2e_cpu_us: Double
        public var rss_mb: Double
        public var per_worker: [WorkerFigures]
        public var redis_commands_per_s: Double
        public var redis_cpu_s: Double
        /// `INFO CPU` (used_cpu_sys + used_cpu_user) over the load window, one value per Redis node the bench reads:
        /// the single Redis, or each primary of a cluster in its slot order.
        public var redis_node_cpu_s: [Double]
        public var mock_cpu_s: Double
        /// Devices accepted per second, one value per second of the load window.
        public var rate_per_second: [Double]
        public var command: String
        /// `--worker-env` as given, `KEY=VALUE` sorted; absent when none.
        public var worker_env: [String]?
        /// `--payload`: the plain and per-person campaign rates (absent without it).
        public var payload: PayloadFigures? = nil
    }

    public let options: Options
    let logger: Logger

    public init(options: Options, logger: Logger = Logger(label: "volley.bench.e2e")) {
        self.options = options
        self.logger = logger
    }

    /// Everything started for a run; stopped by `stop()`.
    public final class Stage: @unchecked Sendable {
        public var directory: String
        public var redis: BenchRedis?
        /// A Redis Cluster started for the run (`--redis-cluster`), instead of `redis`.
        public var cluster: BenchRedisCluster?
        /// The Redis servers whose `INFO` the bench reads (commands, CPU): the single Redis, or each cluster primary.
        public var redisNodes: [RedisEndpoint] = []
        public var mock: BenchMock?
        public var redisURL: String
        public var endpoints: MockEndpoints
        public var control: MockControl
        public var workers: [BenchChild] = []
        public var configFile: String
        public let keep: Bool

        init(
            directory: String, redis: BenchRedis?, mock: BenchMock?, redisURL: String, endpoints: MockEndpoints,
            control: MockControl, configFile: String, keep: Bool
        ) {
            self.directory = directory
            self.redis = redis
            self.mock = mock
            self.redisURL = redisURL
            self.endpoints = endpoints
            self.control = control
            self.configFile = configFile
            self.keep = keep
        }

        public func stopWorkers() {
            for w in workers where w.isRunning { kill(w.pid, SIGTERM) }
            for w in workers { w.stop(grace: 25) }
            workers = []
        }

        /// Stops the Redis (single or cluster) started for the run, keeping the mock.
        public func stopRedis() {
            redis?.stop()
            redis = nil
            cluster?.stop()
            cluster = nil
        }

        public func stop() {
            stopWorkers()
            mock?.stop()
            stopRedis()
            if !keep { try? FileManager.default.removeItem(atPath: directory) }
        }

        /// The run's configuration read as the workers read it, a client for the bench's own commands and a
        /// producer (on a client of its own) for jobs and reports.
        func clients(logger: Logger) throws -> (settings: PipelineSettings, client: RedisClient, producer: JobProducer)
        {
            let settings = try PipelineSettings(try VolleyConfiguration.load(path: configFile))
            let producer = JobProducer(
                client: settings.client(name: "bench-reports", logger: logger), store: settings.store)
            return (settings, settings.client(name: "bench", logger: logger), producer)
        }
    }

    // MARK: - stage

    /// Starts Redis and the mock (unless given) and writes the Volley configuration.
    public func makeStage() throws -> Stage {
        let o = options
        let dir =
            o.workDirectory
            ?? (NSTemporaryDirectory() + "volley-bench-\(getpid())-\(Int(Date().timeIntervalSince1970))")
        try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
        var redis: BenchRedis?
        var redisURL = o.redisURL ?? ""
        if o.redisURL == nil {
            let r = try BenchRedis(directory: dir, tcpPort: o.redisTCP ? try benchFreePorts(1, bus: false)[0] : nil)
            redis = r
            redisURL = r.url
        }
        var mock: BenchMock?
        do {
            let endpoints: MockEndpoints
            if let file = o.mockEndpoints {
                endpoints = try MockEndpoints(file: file)
            } else {
                let m = try BenchMock(
                    directory: dir, configJSON: mockConfigJSON(latencyMs: o.mockLatencyMs, maxStreams: o.mockMaxStreams)
                )
                mock = m
                endpoints = m.endpoints
            }
            let control = MockControl(endpoints: endpoints, logger: logger)
            if o.mockEndpoints != nil {
                try control.configure(mockConfigJSON(latencyMs: o.mockLatencyMs, maxStreams: o.mockMaxStreams))
            }
            let configFile = dir + "/volley.yaml"
            let target = RedisTarget.single(url: redisURL)
            try yaml(endpoints: endpoints, redis: target).write(toFile: configFile, atomically: true, encoding: .utf8)
            let stage = Stage(
                directory: dir, redis: redis, mock: mock, redisURL: redisURL, endpoints: endpoints,
                control: control, configFile: configFile, keep: o.keep)
            stage.redisNodes = try target.nodes()
            return stage
        } catch {
            // A stage that did not start leaves nothing running behind it.
            mock?.stop()
            redis?.stop()
            throw error
        }
    }

    /// Points the stage at another Redis (its workers stopped): rewrites the configuration for `target`, through
    /// the same `yaml(endpoints:redis:)` as the first run, so both runs differ in Redis only.
    public func retarget(_ stage: Stage, to target: RedisTarget) throws {
        try yaml(endpoints: stage.endpoints, redis: target).write(
            toFile: stage.configFile, atomically: true, encoding: .utf8)
        stage.redisURL = target.url
        stage.redisNodes = try target.nodes()
    }

    /// The worker configuration: the knobs the benchmark varies, written the way an operator would. The one place
    /// the workers' and the bench's own Redis and worker settings come from, for every Redis target.
    func yaml(endpoints e: MockEndpoints, redis target: RedisTarget) -> String {
        let o = options
        func q(_ s: String) -> String { "\"" + s.replacingOccurrences(of: "\"", with: "\\\"") + "\"" }
        var redis = "  url: \(q(target.url))"
        if case .cluster(let seeds) = target {
            redis += "\n  cluster:\n" + seeds.map { "    - \(q($0))" }.joined(separator: "\n")
        }
        return """
            apps:
              - name: bench
                apns:
                  keyFile: \(q(e.p8File))
                  keyId: \(q(e.keyID))
                  teamId: \(q(e.teamID))
                  topic: \(q(e.topic))
                  environment: production
                  host: \(q(e.host))
                  port: \(e.port)
                  caFile: \(q(e.caFile))
                  connections: \(o.connections)
                  maxStreams: \(o.maxStreams)
                fcm:
                  serviceAccountFile: \(q(e.serviceAccountFile))
                  endpoint: \(q("https://\(e.host):\(e.port)"))
                  caFile: \(q(e.caFile))
                  connections: \(o.connections)
                  maxStreams: \(o.maxStreams)
                  maxPerMinute: 1000000000
            redis:
            \(redis)
            worker:
              shardSize: \(o.shardSize)
              streamShards: \(o.streamShards)
              inFlight: \(o.inFlight)
              batchSize: \(o.batchSize)
              blockMs: \(o.blockMs)
              recordBatchSize: \(o.recordBatchSize)\(o.reclaimIdleMs.map { "\n  reclaimIdleMs: \($0)" } ?? "")
            quotas:
              ios: 2000000000
              android: 2000000000
            log:
              level: warning
            metrics:
              enabled: \(o.metricsEnabled)
              host: 127.0.0.1
              port: 0
              apiPort: 0

            """
    }

    // MARK: - data

    static let org = OrgID("bench-org")
    /// The group holding every campaign user (`--campaign group`).
    static let campaignGroup = RecipientID("bench-campaign")
    static let app = AppName("bench")

    static func iosToken(_ i: Int, prefix: String = "a") -> DeviceToken {
        let hex = String(i, radix: 16)
        return DeviceToken(prefix + String(repeating: "0", count: 64 - prefix.count - hex.count) + hex)
    }

    static func fcmToken(_ i: Int) -> DeviceToken {
        DeviceToken("bench\(i):APA91b" + String(repeating: "x", count: 130))
    }

    struct Population {
        var users: [String]
        var ios = 0
        var android = 0
    }

    /// Registers the campaign population (users `u<i>`), the probe users (`t<i>`, one iOS device each) and the
    /// warm-up user (`w`, one device per platform). Two loader threads, pipelined batches of 2,000 devices.
    func load(stage: Stage, settings: PipelineSettings) throws -> (Population, Double) {
        let o = options
        let perUser = max(1, o.devicesPerUser)
        let userCount = (o.devices + perUser - 1) / perUser
        let iosPerMille = Int((o.iosShare * 1000).rounded())
        let started = benchNow()
        // `--payload encrypted`: every campaign device registers a key, half of them for OAEP.
        let keys = o.payload == .encrypted ? try benchKeys(count: o.payloadKeys ?? o.devices) : nil
        let named = o.payload == .personalized
        let threads = 2
        final class Shared: @unchecked Sendable {
            let lock = NSLock()
            var firstError: Error?
            var counts: [(Int, Int)]
            init(_ n: Int) { counts = [(Int, Int)](repeating: (0, 0), count: n) }
        }
        let shared = Shared(threads)
        let group = DispatchGroup()
        for t in 0..<threads {
            group.enter()
            let box = Handoff2(settings)
            Thread {
                defer { group.leave() }
                do {
                    let session = DeviceCommands.session(box.value)
                    let directory = RedisDirectory(
                        client: box.value.client(name: "bench-directory", logger: Logger(label: "bench")))
                    var batch: [DeviceImportRecord] = []
                    batch.reserveCapacity(2000)
                    var ios = 0
                    var android = 0
                    var d = t * 2000
                    while d < o.devices {
                        let end = min(o.devices, d + 2000)
                        for i in d..<end {
                            let user = UserID("u\(i / perUser)")
                            let publicKey = keys?.key(i)
                            let cipher = keys == nil || i % 2 == 1 ? nil : "RSA_OAEP_SHA256"
                            if i % 1000 < iosPerMille {
                                batch.append(
                                    DeviceImportRecord(
                                        org: Self.org, app: Self.app, user: user, platform: .ios,
                                        token: Self.iosToken(i), rsaPublicKey: publicKey, cipherName: cipher))
                                ios += 1
                            } else {
                                batch.append(
                                    DeviceImportRecord(
                                        org: Self.org, app: Self.app, user: user, platform: .android,
                                        token: Self.fcmToken(i), rsaPublicKey: publicKey, cipherName: cipher))
                                android += 1
                            }
                        }
                        try session.register(batch)
                        // The directory: every campaign user, and the group the campaign job names. With
                        // `--payload personalized` nine users in ten have a `first_name` (the tenth gets the
                        // template's fallback).
                        var seenUsers = Set<UserID>()
                        var dir: [DirectoryRecord] = []
                        for r in batch where seenUsers.insert(r.user).inserted {
                            let n = dir.count
                            let attributes = named && n % 10 != 9 ? ["first_name": "Name\(r.user.rawValue)"] : nil
                            dir.append(
                                DirectoryRecord(
                                    org: Self.org, kind: .user, id: RecipientID(r.user.rawValue), active: true,
                                    attributes: attributes))
                        }
                        dir.append(
                            DirectoryRecord(
                                org: Self.org, kind: .group, id: Self.campaignGroup,
                                members: dir.map(\.id)))
                        try directory.importRecords(dir)
                        batch.removeAll(keepingCapacity: true)
                        d += threads * 2000
                    }
                    if t == 0 {
                        var extra: [DeviceImportRecord] = []
                        for p in 0..<max(1, o.probes) {
                            extra.append(
                                DeviceImportRecord(
                                    org: Self.org, app: Self.app, user: UserID("t\(p)"), platform: .ios,
                                    token: Self.iosToken(p, prefix: "c")))
                        }
                        extra.append(
                            DeviceImportRecord(
                                org: Self.org, app: Self.app, user: UserID("w"), platform: .ios,
                                token: Self.iosToken(0, prefix: "d")))
                        extra.append(
                            DeviceImportRecord(
                                org: Self.org, app: Self.app, user: UserID("w"), platform: .android,
                                token: Self.fcmToken(999_999_999)))
                        try session.register(extra)
                        try directory.importRecords(
                            extra.map {
                                DirectoryRecord(
                                    org: Self.org, kind: .user, id: RecipientID($0.user.rawValue), active: true)
                            })
                    }
                    shared.lock.withLock { shared.counts[t] = (ios, android) }
                } catch {
                    shared.lock.withLock { if shared.firstError == nil { shared.firstError = error } }
                }
            }.start()
        }
        group.wait()
        if let e = shared.firstError { throw BenchError("loading devices failed: \(e)") }
        let seconds = benchNow() - started
        var pop = Population(users: (0..<userCount).map { "u\($0)" })
        for (i, a) in shared.counts {
            pop.ios += i
            pop.android += a
        }
        return (pop, seconds)
    }

    static let jobEncoder: JSONEncoder = {
        let e = JSONEncoder()
        e.outputFormatting = [.sortedKeys]
        return e
    }()

    func notificationBody() -> String {
        // Title + body sized so the APNs payload is about `bodyBytes` bytes.
        let n = max(10, options.bodyBytes - 90)
        let words = "Volley benchmark campaign: your weekly summary is ready, open the app to see the details. "
        var s = ""
        while s.count < n { s += words }
        return String(s.prefix(n))
    }

    func job(id: String, users: [String]) throws -> String {
        var o = JobSubmission.Options(org: Self.org.rawValue, app: Self.app.rawValue)
        o.users = users
        o.title = "Volley"
        o.body = notificationBody()
        o.id = id
        let job = try JobSubmission.buildJob(o)
        return String(decoding: try Self.jobEncoder.encode(job), as: UTF8.self)
    }

    // MARK: - workers

    func startWorkers(stage: Stage, count: Int) throws {
        let exe = volleyExecutablePath()
        var env = ProcessInfo.processInfo.environment
        env["VOLLEY_LOG_LEVEL"] = "warning"
        for (k, v) in options.workerEnvironment { env[k] = v }
        for i in 0..<count {
            let w = try BenchChild(
                name: "worker-\(i)", executable: exe,
                arguments: ["worker", "--config", stage.configFile, "--consumer", "bench-\(i)"],
                logFile: stage.directory + "/worker-\(i).log", environment: env)
            stage.workers.append(w)
        }
    }

    /// Sends warm-up jobs (one iOS + one Android device) until every worker has reported one, so TLS sessions, the
    /// JWT and the OAuth token exist before anything is measured.
    func warmUp(stage: Stage, producer: JobProducer, client: RedisClient) throws {
        let names = Set(stage.workers.indices.map { "bench-\($0)" })
        var seen = Set<String>()
        var position = try producer.lastReportID()
        var n = 0
        let until = benchNow() + 60
        while seen != names {
            if benchNow() > until {
                throw BenchError(
                    "workers did not all answer warm-up jobs within 60 s (seen \(seen.sorted())): \n"
                        + stage.workers.map { "\($0.name): \($0.logTail(5))" }.joined(separator: "\n"))
            }
            for w in stage.workers where !w.isRunning { throw BenchError("\(w.name) exited:\n\(w.logTail())") }
            // Several in one go so they spread over the workers.
            var cmds: [[String]] = []
            for _ in 0..<max(2, stage.workers.count * 2) {
                n += 1
                let id = "warm-\(n)"
                cmds.append([
                    "XADD", producer.store.jobStream(for: JobID(id)), "*", "job", try job(id: id, users: ["w"]),
                ])
            }
            for r in try client.pipeline(cmds) { try r.throwIfError("XADD warm-up") }
            let (reports, last) = try producer.reports(after: position, blockMillis: 2000, count: 1000)
            position = last
            for r in reports {
                seen.insert(r.worker)
                if r.accepted < r.devices {
                    logger.warning(
                        "warm-up job not fully accepted", metadata: ["report": "\(ReportFormatting.json(r))"])
                }
            }
        }
        // Let the remaining warm-up jobs finish.
        let deadline = benchNow() + 30
        while try producer.pendingCount() > 0 || streamLag(client, producer.store) > 0 {
            if benchNow() > deadline { break }
            usleep(20_000)
        }
    }

    /// Entries never delivered to the group, summed over the job stream shards.
    func streamLag(_ client: RedisClient, _ store: StoreConfiguration) throws -> Int {
        try store.jobStreams.reduce(0) { $0 + (try streamLag(client, stream: $1, group: store.group)) }
    }

    /// Reports on the report stream shards.
    func reportCount(_ client: RedisClient, _ store: StoreConfiguration) throws -> Int {
        try store.reportStreams.reduce(0) { $0 + Int(try client.checked(["XLEN", $1]).integer ?? 0) }
    }

    func streamLag(_ client: RedisClient, stream: String, group: String) throws -> Int {
        // Entries never delivered to the group (Redis 7 XINFO GROUPS "lag"; falls back to 0).
        let r = try client.command(["XINFO", "GROUPS", stream])
        for g in r.array ?? [] {
            let pairs = g.array ?? []
            var name = ""
            var lag = 0
            var i = 0
            while i + 1 < pairs.count {
                let k = pairs[i].string ?? ""
                if k == "name" { name = pairs[i + 1].string ?? "" }
                if k == "lag" { lag = Int(pairs[i + 1].integer ?? 0) }
                i += 2
            }
            if name == group { return lag }
        }
        return 0
    }

    static func summary(_ h: Histogram<UInt64>) -> LatencySummary {
        if h.totalCount == 0 { return .empty }
        return LatencySummary(
            count: Int(h.totalCount), p50_ms: Double(h.valueAtPercentile(50)) / 1000,
            p90_ms: Double(h.valueAtPercentile(90)) / 1000, p99_ms: Double(h.valueAtPercentile(99)) / 1000,
            max_ms: Double(h.max) / 1000)
    }

    static func newHistogram() -> Histogram<UInt64> {
        Histogram<UInt64>(
            lowestDiscernibleValue: 1, highestTrackableValue: 3_600_000_000, numberOfSignificantValueDigits: .three)
    }

    /// Idle phase: one targeted job (one iOS device) at a time; enqueue → the mock accepting its push. The mock
    /// stamps each accepted send with CLOCK_MONOTONIC (`last_accepted_ns`), the clock of the XADD stamp here, so
    /// nothing polls the mock while a probe is under way (polling it every 0.3 ms instead would keep
    /// both cores busy in the "idle" phase). A mock without the stamp is polled as before.
    func probe(stage: Stage, producer: JobProducer, client: RedisClient) throws -> LatencySummary {
        var h = Self.newHistogram()
        var position = try producer.lastReportID()
        let stamped = try stage.control.lastAcceptedNanos() != nil
        for p in 0..<options.probes {
            let id = "probe-\(p)-\(UUID().uuidString.prefix(8))"
            let json = try job(id: id, users: ["t\(p)"])
            let base = stamped ? 0 : try stage.control.counts().accepted
            let t0 = benchNow()
            _ = try client.checked(["XADD", producer.store.jobStream(for: JobID(id)), "*", "job", json])
            var t1 = 0.0
            while !stamped && benchNow() - t0 < 10 {
                if try stage.control.counts().accepted > base {
                    t1 = benchNow()
                    break
                }
                usleep(300)
            }
            // Wait for its report so probes never overlap.
            let (_, last) = try producer.reports(after: position, blockMillis: 5000, count: 10)
            position = last
            if stamped, let ns = try stage.control.lastAcceptedNanos(), Double(ns) / 1e9 > t0 { t1 = Double(ns) / 1e9 }
            if t1 > 0 { _ = h.record(UInt64(max(1, (t1 - t0) * 1e6))) }
        }
        return Self.summary(h)
    }

    /// Commands processed (summed) and CPU seconds (`INFO CPU` used_cpu_sys + used_cpu_user) of each Redis node of
    /// the stage, read over a connection of its own to each node.
    func redisInfo(_ stage: Stage) throws -> (commands: Int, cpu: [Double]) {
        var commands = 0
        var cpu: [Double] = []
        for node in stage.redisNodes {
            let c = try RedisConnection(endpoint: node, connectTimeout: 2, commandTimeout: 5)
            let text = try c.command(["INFO", "all"]).string ?? ""
            var seconds = 0.0
            for line in text.split(whereSeparator: { $0.isNewline }) {
                let parts = line.split(separator: ":", maxSplits: 1)
                guard parts.count == 2 else { continue }
                switch parts[0] {
                case "total_commands_processed": commands += Int(parts[1]) ?? 0
                case "used_cpu_sys", "used_cpu_user": seconds += Double(parts[1]) ?? 0
                default: break
                }
            }
            cpu.append(seconds)
        }
        return (commands, cpu)
    }

    // MARK: - run

    /// Runs the whole benchmark on a stage made by `makeStage()` (kept running for `--compare`).
    public func run(stage: Stage, command: String) throws -> Result {
        let o = options
        let (settings, client, producer) = try stage.clients(logger: logger)

        if o.progress {
            stderrLine(
                "loading \(grouped(Double(o.devices))) devices (\(Int(o.iosShare * 100))% iOS, \(o.devicesPerUser) "
                    + "per user)…\n"
            )
        }
        let (pop, loadSeconds) = try load(stage: stage, settings: settings)
        if o.progress {
            stderrLine(
                String(
                    format: "loaded in %.1f s (%@ devices/s)\n", loadSeconds, grouped(Double(o.devices) / loadSeconds)))
        }

        try startWorkers(stage: stage, count: o.workers)
        try warmUp(stage: stage, producer: producer, client: client)
        if o.progress {
            stderrLine("\(o.workers) worker(s) warm; idle probes: \(o.probes) targeted jobs one at a time…\n")
        }
        let idle = try probe(stage: stage, producer: producer, client: client)

        // Load phase.
        var jobs: [(id: String, json: String)] = []
        var i = 0
        var jn = 0
        let runTag = UUID().uuidString.prefix(6)
        if o.campaignGroup {
            jobs.append(
                (
                    "campaign-\(runTag)-group",
                    try job(id: "campaign-\(runTag)-group", users: [Self.campaignGroup.rawValue])
                ))
            i = pop.users.count
        }
        while i < pop.users.count {
            let end = min(pop.users.count, i + PushJob.maxRecipients)
            jobs.append(
                ("campaign-\(runTag)-\(jn)", try job(id: "campaign-\(runTag)-\(jn)", users: Array(pop.users[i..<end]))))
            i = end
            jn += 1
        }
        let targeted = min(o.targetedUnderLoad, o.probes)
        for t in 0..<targeted {
            // Interleave targeted jobs among the campaign's.
            let at = min(jobs.count, (t + 1) * max(1, jobs.count) / (targeted + 1) + t)
            jobs.insert(("targeted-\(runTag)-\(t)", try job(id: "targeted-\(runTag)-\(t)", users: ["t\(t)"])), at: at)
        }
        let expectedDevices = pop.ios + pop.android + targeted
        try stage.control.resetStats()
        let reportsBase = try reportCount(client, settings.store)
        let info0 = try redisInfo(stage)
        let mockPID = stage.mock?.child.pid
        let mock0 = mockPID.flatMap { ProcessSample.read(pid: $0) }
        let w0 = stage.workers.map { $0.sample() }

        if o.progress {
            stderrLine(
                "load: \(jobs.count) jobs (\(jobs.count - targeted) campaign, \(targeted) targeted), "
                    + "\(grouped(Double(expectedDevices))) devices\n"
            )
        }
        let t0 = benchNow()
        let xaddReplies = try client.pipeline(
            jobs.map { ["XADD", settings.store.jobStream(for: JobID($0.id)), "*", "job", $0.json] }, window: 64)
        var entryMillis: [String: Int] = [:]
        for (j, r) in zip(jobs, xaddReplies) {
            guard let id = try r.throwIfError("XADD").string else { continue }
            entryMillis[j.id] = Int(id.split(separator: "-").first ?? "0") ?? 0
        }
        var hist = Self.newHistogram()
        var lastAccepted = 0
        var firstPush = 0.0
        var series: [(Double, Int)] = []
        var lastCheck = 0.0
        var lastProgress = t0
        var tDone = 0.0
        let pollInterval = UInt32(max(1, o.pollMs) * 1000)
        while true {
            let now = benchNow()
            let c = try stage.control.counts()
            if c.accepted > lastAccepted {
                if firstPush == 0 { firstPush = now - t0 }
                _ = hist.record(UInt64(max(1, (now - t0) * 1e6)), count: UInt64(c.accepted - lastAccepted))
                lastAccepted = c.accepted
            }
            series.append((now - t0, c.accepted))
            if now - lastCheck >= 0.05 {
                lastCheck = now
                let reports = try reportCount(client, settings.store) - reportsBase
                if reports >= jobs.count, try producer.pendingCount() == 0 {
                    tDone = benchNow()
                    break
                }
                if o.progress && now - lastProgress >= 1 {
                    lastProgress = now
                    let el = now - t0
                    stderrLine(
                        String(
                            format: "\r  %6.1f s  accepted %@ / %@  %@ devices/s  jobs reported %d / %d   ",
                            el, grouped(Double(c.accepted)), grouped(Double(expectedDevices)),
                            grouped(Double(c.accepted) / el), reports, jobs.count))
                }
            }
            for w in stage.workers where !w.isRunning {
                throw BenchError("\(w.name) exited during the run:\n\(w.logTail())")
            }
            if now - t0 > o.timeoutSeconds {
                throw BenchError(
                    "timed out after \(Int(o.timeoutSeconds)) s with \(c.accepted) accepted; logs in "
                        + "\(stage.directory) (use --keep)"
                )
            }
            usleep(pollInterval)
        }
        let duration = tDone - t0
        if o.progress { stderrLine("\n") }
        let w1 = stage.workers.map { $0.sample() }
        let info1 = try redisInfo(stage)
        let nodeCPU = zip(info1.cpu, info0.cpu).map { max(0, $0 - $1) }
        let mock1 = mockPID.flatMap { ProcessSample.read(pid: $0) }
        // A final count: a device accepted between the last poll and the completion check.
        let final = try stage.control.counts()
        if final.accepted > lastAccepted {
            _ = hist.record(UInt64(max(1, duration * 1e6)), count: UInt64(final.accepted - lastAccepted))
        }

        // Reports of the load phase: outcome totals and targeted-job latency from the report entry ids.
        var accepted = 0
        var rejected = 0
        var failed = 0
        var devices = 0
        var targetedHist = Self.newHistogram()
        var reps: [RedisReply] = []
        for stream in settings.store.reportStreams {
            reps += try client.checked(["XRANGE", stream, "-", "+"]).array ?? []
        }
        let wanted = Set(jobs.map(\.id))
        for e in reps {
            guard let entry = e.array, entry.count == 2, let rid = entry[0].string,
                let json = entry[1].fieldPairs.first(where: { $0.0 == "report" })?.1,
                let rep = try? ReportCoding.decoder.decode(JobReport.self, from: Data(json.utf8)),
                wanted.contains(rep.job.rawValue)
            else { continue }
            accepted += rep.accepted
            rejected += rep.rejected
            failed += rep.failed
            devices += rep.devices
            if rep.job.rawValue.hasPrefix("targeted-"), let xadd = entryMillis[rep.job.rawValue],
                let rms = Int(rid.split(separator: "-").first ?? "0")
            {
                _ = targetedHist.record(UInt64(max(1, (rms - xadd) * 1000)))
            }
        }

        var perWorker: [WorkerFigures] = []
        var cpu = 0.0
        var rss = 0.0
        for (k, w) in stage.workers.enumerated() {
            let c = max(0, (w1[k]?.cpuSeconds ?? 0) - (w0[k]?.cpuSeconds ?? 0))
            let peak = w1[k]?.peakRSSMB ?? 0
            perWorker.append(WorkerFigures(name: w.name, cpu_s: c, peak_rss_mb: peak))
            cpu += c
            rss = max(rss, peak)
        }
        // Accepted per second over the window.
        var perSecond: [Double] = []
        var sec = 1.0
        var prev = 0
        for (t, a) in series {
            while t >= sec {
                perSecond.append(Double(a - prev))
                prev = a
                sec += 1
            }
        }
        // The last, partial second, scaled to a rate and rounded like the whole seconds (none when the run ended on a
        // whole second).
        if let last = series.last, last.0 > sec - 1, final.accepted > prev {
            perSecond.append((Double(final.accepted - prev) / max(0.001, last.0 - (sec - 1))).rounded())
        }
        let notifications = max(1, devices)
        var payload: PayloadFigures?
        if let kind = o.payload {
            if o.progress { stderrLine("payload: plain against \(kind.rawValue), \(o.payloadRounds) round(s)…\n") }
            try preparePayload(kind, settings: settings)
            payload = try measurePayload(
                kind, settings: settings, client: client, producer: producer, workers: stage.workers,
                keys: kind == .encrypted ? min(o.payloadKeys ?? o.devices, o.devices) : nil)
        }
        return Result(
            devices: o.devices, ios: pop.ios, android: pop.android, users: pop.users.count, jobs: jobs.count,
            workers: o.workers, connections: o.connections, in_flight: o.inFlight, mock_latency_ms: o.mockLatencyMs,
            mock_max_streams: o.mockMaxStreams, load_seconds: loadSeconds, load_rate: Double(o.devices) / loadSeconds,
            duration_s: duration, e2e_rate: Double(devices) / duration, accepted: accepted, rejected: rejected,
            failed: failed, first_push_ms: firstPush * 1000, accept_latency: Self.summary(hist), idle_first_push: idle,
            first_push_p99_ms: idle.p99_ms, targeted_under_load: Self.summary(targetedHist), cpu_s: cpu,
            cpu_s_per_100k: cpu / Double(notifications) * 100_000, e2e_cpu_us: cpu / Double(notifications) * 1e6,
            rss_mb: rss, per_worker: perWorker,
            redis_commands_per_s: Double(info1.commands - info0.commands) / duration,
            redis_cpu_s: nodeCPU.reduce(0, +), redis_node_cpu_s: nodeCPU,
            mock_cpu_s: max(0, (mock1?.cpuSeconds ?? 0) - (mock0?.cpuSeconds ?? 0)),
            rate_per_second: perSecond, command: command,
            worker_env: o.workerEnvironment.isEmpty
                ? nil
                : o.workerEnvironment.map { "\($0.key)=\($0.value)" }.sorted(),
            payload: payload)
    }

    /// Human-readable summary table.
    public static func table(_ r: Result) -> String {
        func f(_ v: Double, _ d: Int = 1) -> String { String(format: "%.\(d)f", v) }
        func lat(_ l: LatencySummary) -> String {
            l.count == 0
                ? "-"
                : "p50 \(f(l.p50_ms)) / p90 \(f(l.p90_ms)) / p99 \(f(l.p99_ms)) / max \(f(l.max_ms)) ms (n=\(l.count))"
        }
        var rows: [(String, String)] = [
            (
                "devices",
                "\(grouped(Double(r.devices))) (\(grouped(Double(r.ios))) iOS, \(grouped(Double(r.android))) "
                    + "Android), \(grouped(Double(r.users))) users, \(r.jobs) jobs"
            ),
            (
                "setup",
                "\(r.workers) worker(s), \(r.connections) connection(s)/provider, inFlight \(r.in_flight), mock "
                    + "latency \(f(r.mock_latency_ms, 0)) ms, max streams \(r.mock_max_streams)"
            ),
            ("registry load", "\(f(r.load_seconds)) s (\(grouped(r.load_rate)) devices/s)"),
            ("XADD → last XACK", "\(f(r.duration_s, 2)) s"),
            ("throughput", "\(grouped(r.e2e_rate)) devices/s"),
            ("outcomes", "accepted \(grouped(Double(r.accepted))), rejected \(r.rejected), failed \(r.failed)"),
            ("enqueue → first accepted push (load)", "\(f(r.first_push_ms)) ms"),
            ("enqueue → accepted per device", lat(r.accept_latency)),
            ("enqueue → first push, idle", lat(r.idle_first_push)),
            ("targeted job enqueue → report, under load", lat(r.targeted_under_load)),
            (
                "worker CPU",
                "\(f(r.cpu_s, 2)) s total, \(f(r.cpu_s_per_100k, 2)) s per 100,000 notifications "
                    + "(\(f(r.e2e_cpu_us, 2)) µs each)"
            ),
            ("peak RSS per worker", r.per_worker.map { "\($0.name) \(f($0.peak_rss_mb)) MB" }.joined(separator: ", ")),
            ("Redis", "\(grouped(r.redis_commands_per_s)) commands/s, \(f(r.redis_cpu_s, 2)) CPU s"),
            ("mock CPU", "\(f(r.mock_cpu_s, 2)) s"),
            ("rate per second", r.rate_per_second.map { grouped($0) }.joined(separator: " ")),
        ]
        if let env = r.worker_env { rows.insert(("worker environment", env.joined(separator: " ")), at: 2) }
        if let p = r.payload {
            rows.append(
                (
                    "plain vs \(p.payload)",
                    "\(grouped(p.plain_rate)) vs \(grouped(p.payload_rate)) devices/s "
                        + "(median of \(p.plain_rates.count)): \(f(p.payload_vs_plain, 2))×"
                ))
            rows.append(
                (
                    "worker CPU per device",
                    "\(f(p.plain_worker_cpu_us_per_device, 1)) vs \(f(p.payload_worker_cpu_us_per_device, 1)) µs"
                        + (p.payload_keys.map { ", \(grouped(Double($0))) distinct device keys" } ?? "")
                ))
        }
        let w = rows.map(\.0.count).max() ?? 0
        return rows.map { $0.0.padding(toLength: w, withPad: " ", startingAt: 0) + "  " + $0.1 }.joined(separator: "\n")
    }
}

/// Hands a value to the thread that will use it.
final class Handoff2<T>: @unchecked Sendable {
    let value: T
    init(_ value: T) { self.value = value }
}
