// swift-format-ignore-file: AlwaysUseLowerCamelCase

// The result type's properties are the `--json` keys (snake_case, a contract with users' scripts), named as written.
import Foundation
import Logging
import VolleyCore
import VolleyRedis
import VolleyService
import VolleyStore

/// `volley-bench chaos`: one campaign through one fault, and what came out of it.
///
/// What it does, in order:
/// 1. starts a redis-server (append-only for `redis-restart`) or a Redis Cluster with one replica per primary
///    (`cluster-primary-kill`), a `volley-mock` writing an accept journal (`MockAcceptJournal`: one line per push
///    it took, kept across its own `kill -9`), and `workers` `volley worker` processes;
/// 2. registers `devices` devices (the `e2e` population) and warms every worker up;
/// 3. XADDs one campaign job naming a group of every user, split into shards so every worker sends;
/// 4. when the mock has accepted `triggerShare` of the devices, injects the fault, holds it `seconds`, ends it;
/// 5. waits for the campaign's report and for nothing pending, stops the workers (drain), then reads:
///    the report (accepted, rejected/failed by reason, written and unanswered: `lost`), the journal (pushes per
///    device at the provider and the collapse identity each carried: duplicates, devices that would show the
///    notification twice, devices never reached) and the org's quota counters (used and pending, over the run).
public struct ChaosBench {
    public enum Fault: String, CaseIterable, Sendable, Codable {
        /// `kill -9` the mock; start it again on the same port after `seconds`.
        case providerKill = "provider-kill"
        /// For `seconds`, every connection gets GOAWAY after `stormStreams` requests.
        case providerGoAway = "provider-goaway"
        /// For `seconds`, the `stormStreams`-th request of every connection gets a TCP reset instead of an answer.
        case providerReset = "provider-reset"
        /// SIGSTOP to redis-server for `seconds`, then SIGCONT.
        case redisStop = "redis-stop"
        /// redis-server shut down (SIGTERM; append-only file) and started again after `seconds`.
        case redisRestart = "redis-restart"
        /// `kill -9` one worker; a replacement (a new consumer) starts after `seconds`.
        case workerKill = "worker-kill"
        /// `kill -9` the primary serving the org's slot; its replica takes over; the node starts again after
        /// `seconds` (and rejoins as a replica).
        case clusterPrimaryKill = "cluster-primary-kill"
    }

    public struct Options: Sendable {
        public var fault = Fault.providerKill
        public var seconds = 3.0
        public var devices = 20_000
        public var workers = 2
        /// The fault starts when the mock has accepted this share of the devices.
        public var triggerShare = 0.25
        public var iosShare = 0.6
        public var devicesPerUser = 200
        /// Shards the campaign is split into (`worker.shardSize` is set from it), so that every worker sends.
        public var shards = 4
        public var connections = 2
        public var inFlight = 4000
        /// `worker.unansweredSends` of the workers (nil: the product's default, `resend`).
        public var unansweredSends: String?
        public var recordBatchSize = 512
        /// `worker.reclaimIdleMs` of the workers: how long a killed worker's entries wait for another. nil: 5,000
        /// for `worker-kill` (the run would otherwise wait a minute for the takeover), the product's default for the
        /// other faults (a shorter one would change what a Redis stall does).
        public var reclaimIdleMs: Int?
        /// Requests per connection before the GOAWAY or reset of a storm.
        public var stormStreams = 50
        /// `cluster-node-timeout` of the cluster nodes (`cluster-primary-kill`).
        public var clusterNodeTimeoutMs = 2000
        public var timeoutSeconds = 600.0
        /// Where `volley` and `volley-mock` are (default: next to the running executable).
        public var executableDirectory = volleyExecutableDirectory()
        public var workDirectory: String?
        public var keep = false
        public var progress = true
        public init() {}
    }

    public struct Result: Sendable, Codable {
        public var fault: String
        public var seconds: Double
        public var devices: Int
        public var workers: Int
        /// `debug` or `release`: the build of the `volley` executable the workers ran.
        public var build: String
        /// Devices the mock had accepted when the fault started, and how long it lasted (injection to its end).
        public var fault_at_accepted: Int
        public var fault_held_s: Double
        /// XADD of the campaign → its report published and nothing pending.
        public var campaign_s: Double
        /// From the campaign's report.
        public var report_devices: Int
        /// Devices that ended neither accepted nor rejected by the provider: the push never arrived (0 is the goal).
        public var lost: Int
        public var accepted: Int
        public var rejected: Int
        public var rejected_by_reason: [String: Int]
        public var failed: Int
        public var failed_by_reason: [String: Int]
        /// Devices whose request was written and never answered, when the report tells them apart
        /// (`transport:written-unanswered`); absent when it does not.
        public var written_unanswered: Int?
        /// Failed for any other reason: the request never reached the provider, or a reason of its own.
        public var failed_other: Int
        /// From the mock's accept journal, campaign devices only.
        public var provider_pushes: Int
        public var provider_devices: Int
        /// Pushes beyond the first per device (the provider took the same device's push again).
        public var duplicate_pushes: Int
        public var duplicated_devices: Int
        /// Devices that got the push more than once without one collapse identity on every copy (`apns-collapse-id`,
        /// FCM's `android.notification.tag`, else the `mid` an app de-duplicates a data message on): their person
        /// sees it twice (0 is the goal). Copies under one identity replace each other on the device.
        public var shown_twice: Int
        /// `worker.unansweredSends` the workers ran with.
        public var unanswered_sends: String
        /// Campaign devices the provider never took a push for.
        public var never_reached: Int
        /// Devices the provider took a push for that the report does not count accepted (the answer was lost).
        public var reached_not_accepted: Int
        /// The org's quota over the campaign (every hour key it touched): `used` added, `pending` left after the
        /// workers drained.
        public var quota_used: Int
        public var quota_pending: Int
        /// `quota_used` = accepted: only delivered notifications count, each device once (docs/recipients.md).
        public var quota_exact: Bool
        /// `worker-kill`: the documented bound on resent devices (`inFlight + recordBatchSize`, one worker).
        public var duplicate_window: Int?
        /// Workers that exited by themselves during the run (not the one `worker-kill` killed).
        public var worker_exits: [String]
        public var command: String
    }

    public let options: Options
    let logger: Logger

    public init(options: Options, logger: Logger = Logger(label: "volley.bench.chaos")) {
        self.options = options
        self.logger = logger
    }

    /// The stage, faults and readings this bench shares with `volley-bench soak`.
    var rig: FaultRig {
        let o = options
        return FaultRig(
            devices: o.devices, iosShare: o.iosShare, devicesPerUser: o.devicesPerUser, workers: o.workers,
            shards: o.shards, connections: o.connections, inFlight: o.inFlight, recordBatchSize: o.recordBatchSize,
            reclaimIdleMs: o.reclaimIdleMs ?? (o.fault == .workerKill ? 5000 : nil), unansweredSends: o.unansweredSends,
            stormStreams: o.stormStreams, clusterNodeTimeoutMs: o.clusterNodeTimeoutMs,
            executableDirectory: o.executableDirectory, workDirectory: o.workDirectory, keep: o.keep,
            progress: o.progress, logger: logger)
    }

    func say(_ s: String) { rig.say(s) }

    // MARK: - run

    public func run(command: String) throws -> Result {
        let rig = rig
        let bench = E2EBench(options: rig.e2eOptions, logger: logger)
        let stage = try rig.makeStage(
            bench, name: "volley-chaos", cluster: options.fault == .clusterPrimaryKill,
            appendOnly: options.fault == .redisRestart)
        defer { stage.stop() }
        return try run(stage: stage, bench: bench, rig: rig, command: command)
    }

    func run(stage: E2EBench.Stage, bench: E2EBench, rig: FaultRig, command: String) throws -> Result {
        let o = options
        let (settings, client, producer) = try stage.clients(logger: logger)

        say("chaos \(o.fault.rawValue) \(o.seconds) s: loading \(grouped(Double(o.devices))) devices…")
        let (pop, _) = try bench.load(stage: stage, settings: settings)
        for i in 0..<o.workers { try rig.startWorker(stage, consumer: "bench-\(i)") }
        try bench.warmUp(stage: stage, producer: producer, client: client)

        let hour = QuotaHour(containing: Date())
        let hours = [hour, QuotaHour(index: hour.index + 1)]
        let quota0 = try FaultRig.quota(client, hours: hours)
        try stage.control.resetStats()
        let campaign = "chaos-\(UUID().uuidString.prefix(8).lowercased())"
        let json = try bench.job(id: campaign, users: [E2EBench.campaignGroup.rawValue])
        say("\(o.workers) worker(s) warm; campaign \(campaign): \(grouped(Double(pop.ios + pop.android))) devices")
        let journal = FaultRig.journal(stage.directory)
        let journalStart = FaultRig.fileSize(journal)
        let t0 = benchNow()
        _ = try client.checked(["XADD", settings.store.jobStream(for: JobID(campaign)), "*", "job", json])

        // Trigger: the mock has accepted the share of the campaign. Read from the journal's new lines (a stat and a
        // read of what was appended): the mock's stats endpoint answers late while it is busy with the campaign.
        let trigger = max(1, Int((Double(o.devices) * o.triggerShare).rounded()))
        let watch = try JournalWatch(path: journal, from: journalStart)
        var atFault = 0
        while true {
            atFault = watch.linesAppended()
            if atFault >= trigger { break }
            if benchNow() - t0 > o.timeoutSeconds {
                throw BenchError(
                    "the mock accepted \(atFault) of \(trigger) devices before the fault; logs in \(stage.directory)")
            }
            for w in stage.workers where !w.isRunning {
                throw BenchError("\(w.name) exited before the fault:\n\(w.logTail())")
            }
            usleep(1_000)
        }
        say("fault \(o.fault.rawValue) at \(atFault) accepted, for \(o.seconds) s…")
        let f0 = benchNow()
        let injected = try rig.begin(o.fault, stage)
        usleep(UInt32(max(0, o.seconds) * 1_000_000))
        try rig.end(injected, stage, replacement: "bench-replacement")
        let held = benchNow() - f0
        say(String(format: "fault over after %.1f s; waiting for the report…", held))

        // The report of the campaign (a sharded campaign's parent report counts every shard) and nothing pending.
        var report: (JobReport, [String: Any])?
        var exited: [String] = []
        var lastProgress = benchNow()
        while true {
            for w in stage.workers where !w.isRunning && !exited.contains(w.name) {
                exited.append(w.name)
                say("  \(w.name) exited by itself (status \(w.process.terminationStatus)): \(w.logTail(3))")
            }
            if !stage.workers.contains(where: \.isRunning) {
                throw BenchError("every worker exited; logs in \(stage.directory) (use --keep)")
            }
            if report == nil { report = try? FaultRig.findReport(client, settings.store, job: campaign) }
            if report != nil, (try? producer.pendingCount()) == 0 { break }
            if benchNow() - t0 > o.timeoutSeconds {
                throw BenchError(
                    "no report for \(campaign) after \(Int(o.timeoutSeconds)) s; logs in \(stage.directory) "
                        + "(use --keep)")
            }
            if benchNow() - lastProgress > 5 {
                lastProgress = benchNow()
                say(
                    String(
                        format: "  %.0f s, mock accepted %@", benchNow() - t0,
                        (try? stage.control.counts().accepted).map { grouped(Double($0)) } ?? "?"))
            }
            usleep(100_000)
        }
        let campaignSeconds = benchNow() - t0
        // Outcomes and quota settle before a worker exits (drain): read the quota after.
        stage.stopWorkers()
        let quota = try FaultRig.quota(client, hours: hours).since(quota0)
        guard let found = report else { throw BenchError("no report for \(campaign)") }
        let (rep, raw) = found

        let seen = FaultRig.JournalTally(
            try FaultRig.identities(journal: journal, from: 0, to: nil, of: rig.campaignTokens()))
        let unanswered = Self.writtenUnanswered(rep, raw: raw)
        return Result(
            fault: o.fault.rawValue, seconds: o.seconds, devices: pop.ios + pop.android, workers: o.workers,
            build: rig.buildName, fault_at_accepted: atFault, fault_held_s: held, campaign_s: campaignSeconds,
            report_devices: rep.devices, lost: max(0, pop.ios + pop.android - rep.accepted - rep.rejected),
            accepted: rep.accepted, rejected: rep.rejected,
            rejected_by_reason: rep.rejectedByReason, failed: rep.failed, failed_by_reason: rep.failedByReason,
            written_unanswered: unanswered, failed_other: rep.failed - (unanswered ?? 0),
            provider_pushes: seen.pushes, provider_devices: seen.devices, duplicate_pushes: seen.duplicatePushes,
            duplicated_devices: seen.duplicatedDevices, shown_twice: seen.shownTwice,
            unanswered_sends: o.unansweredSends ?? UnansweredSends.resend.rawValue,
            never_reached: max(0, pop.ios + pop.android - seen.devices),
            reached_not_accepted: max(0, seen.devices - rep.accepted),
            quota_used: quota.used, quota_pending: quota.pending, quota_exact: quota.used == rep.accepted,
            duplicate_window: o.fault == .workerKill ? o.inFlight + o.recordBatchSize : nil, worker_exits: exited,
            command: command)
    }

    // MARK: - readings

    /// Counts the lines appended to the journal since `from` (a byte offset), reading only what is new.
    final class JournalWatch {
        let handle: FileHandle
        var lines = 0

        init(path: String, from offset: UInt64) throws {
            guard let h = FileHandle(forReadingAtPath: path) else { throw BenchError("cannot read \(path)") }
            try h.seek(toOffset: offset)
            handle = h
        }

        deinit { try? handle.close() }

        func linesAppended() -> Int {
            if let data = try? handle.readToEnd() {
                lines += data.reduce(0) { $0 + ($1 == UInt8(ascii: "\n") ? 1 : 0) }
            }
            return lines
        }
    }

    /// Written and unanswered: the failure reason `transport:written-unanswered`, or a report field naming
    /// "unanswered"; nil when the report has neither.
    static func writtenUnanswered(_ rep: JobReport, raw: [String: Any]) -> Int? {
        if let n = rep.failedByReason["transport:written-unanswered"] { return n }
        for (k, v) in raw where k.lowercased().contains("unanswered") {
            if let n = v as? Int { return n }
        }
        return nil
    }

    /// Pushes that show twice on the device: more than one, and not every one under the same identity (`-`: none).
    static func showsTwice(_ identities: [Substring]) -> Bool {
        guard identities.count > 1 else { return false }
        return identities[0] == "-" || identities.contains { $0 != identities[0] }
    }

    // MARK: - output

    /// Human-readable summary.
    public static func table(_ r: Result) -> String {
        func n(_ v: Int) -> String { grouped(Double(v)) }
        func reasons(_ d: [String: Int]) -> String {
            d.isEmpty ? "none" : d.sorted { $0.key < $1.key }.map { "\($0.key) \(n($0.value))" }.joined(separator: ", ")
        }
        var rows: [(String, String)] = [
            (
                "fault",
                "\(r.fault) for \(String(format: "%g", r.seconds)) s, at \(n(r.fault_at_accepted)) accepted "
                    + "(held \(String(format: "%.1f", r.fault_held_s)) s)"
            ),
            ("setup", "\(n(r.devices)) devices, \(r.workers) worker(s), \(r.build) build"),
            ("campaign", String(format: "%.1f s XADD → report", r.campaign_s)),
            (
                "report",
                "devices \(n(r.report_devices)), accepted \(n(r.accepted)), rejected \(n(r.rejected)), "
                    + "failed \(n(r.failed))"
            ),
            ("failed by reason", reasons(r.failed_by_reason)),
            ("written, unanswered", r.written_unanswered.map(n) ?? "not told apart by this build"),
            ("rejected by reason", reasons(r.rejected_by_reason)),
            (
                "at the provider",
                "\(n(r.provider_pushes)) pushes to \(n(r.provider_devices)) devices; "
                    + "never reached \(n(r.never_reached)); reached, not reported accepted \(n(r.reached_not_accepted))"
            ),
            ("lost", "\(n(r.lost)) devices neither accepted nor rejected (unanswered sends: \(r.unanswered_sends))"),
            (
                "duplicates",
                "\(n(r.duplicate_pushes)) pushes (\(n(r.duplicated_devices)) devices), shown twice on "
                    + "\(n(r.shown_twice)) devices" + (r.duplicate_window.map { " — window \(n($0))" } ?? "")
            ),
            (
                "quota",
                "used \(n(r.quota_used)) for \(n(r.accepted)) accepted, pending \(n(r.quota_pending)): "
                    + (r.quota_exact ? "exact" : "NOT exact")
            ),
        ]
        if !r.worker_exits.isEmpty { rows.append(("workers exited", r.worker_exits.joined(separator: ", "))) }
        rows.append(("command", r.command))
        let w = rows.map(\.0.count).max() ?? 0
        return rows.map { $0.0.padding(toLength: w, withPad: " ", startingAt: 0) + "  " + $0.1 }.joined(separator: "\n")
    }
}

/// What the fault benches share: `volley-bench chaos` (one campaign through one fault) and `volley-bench soak` (many
/// campaigns through faults on a timetable). The stage, whose mock writes an accept journal; workers started as
/// consumers of their own; each fault begun and ended; and the readings that say what reached the provider and what
/// the org's quota counted.
struct FaultRig: Sendable {
    var devices: Int
    var iosShare: Double
    var devicesPerUser: Int
    var workers: Int
    /// Shards each campaign is split into (`worker.shardSize` is set from it), so that every worker sends.
    var shards: Int
    var connections: Int
    var inFlight: Int
    var recordBatchSize: Int
    /// `worker.reclaimIdleMs` of the workers (nil: the product's default).
    var reclaimIdleMs: Int?
    /// `worker.unansweredSends` of the workers (nil: the product's default, `resend`).
    var unansweredSends: String?
    /// Requests per connection before the GOAWAY or reset of a storm.
    var stormStreams: Int
    var clusterNodeTimeoutMs: Int
    var executableDirectory: String
    var workDirectory: String?
    var keep: Bool
    var progress: Bool
    /// Probe users (`t<i>`, one iOS device each) registered beside the campaign population.
    var probes = 1
    let logger: Logger

    /// The campaign population (the `e2e` bench's: users `u<i>` in one group) and the workers' settings.
    var e2eOptions: E2EBench.Options {
        var e = E2EBench.Options()
        e.devices = devices
        e.iosShare = iosShare
        e.devicesPerUser = devicesPerUser
        e.workers = workers
        e.connections = connections
        e.inFlight = inFlight
        e.recordBatchSize = recordBatchSize
        e.reclaimIdleMs = reclaimIdleMs
        e.probes = probes
        let users = (devices + max(1, devicesPerUser) - 1) / max(1, devicesPerUser)
        e.shardSize = max(1, (users + max(1, shards) - 1) / max(1, shards))
        e.workDirectory = workDirectory
        e.keep = keep
        e.progress = progress
        return e
    }

    /// `debug` or `release`: the build of the `volley` executable the workers run.
    var buildName: String {
        let dir = executableDirectory
        if dir.hasSuffix("/release") || dir.contains("/release/") { return "release" }
        if dir.hasSuffix("/debug") || dir.contains("/debug/") { return "debug" }
        return "unknown"
    }

    func say(_ s: String) { if progress { stderrLine(s + "\n") } }

    // MARK: - stage

    /// Redis (one server, append-only with `appendOnly`, or a cluster of 3 primaries with one replica each), the
    /// mock with its journal, and the configuration: the `e2e` bench's, then `extraYAML` (sections of its own).
    func makeStage(
        _ bench: E2EBench, name: String, cluster: Bool, appendOnly: Bool, extraYAML: String = ""
    ) throws -> E2EBench.Stage {
        let dir =
            workDirectory ?? (NSTemporaryDirectory() + "\(name)-\(getpid())-\(Int(Date().timeIntervalSince1970))")
        try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
        var redis: BenchRedis?
        var redisCluster: BenchRedisCluster?
        let target: RedisTarget
        if cluster {
            let c = try BenchRedisCluster(
                directory: dir + "/cluster", primaries: 3, replicas: 1, nodeTimeoutMs: clusterNodeTimeoutMs)
            redisCluster = c
            target = .cluster(seeds: c.seeds)
        } else {
            let r = try BenchRedis(directory: dir, appendOnly: appendOnly)
            redis = r
            target = .single(url: r.url)
        }
        let mock: BenchMock
        do {
            mock = try startMock(directory: dir)
        } catch {
            redis?.stop()
            redisCluster?.stop()
            throw error
        }
        let configFile = dir + "/volley.yaml"
        let stage = E2EBench.Stage(
            directory: dir, redis: redis, mock: mock, redisURL: target.url, endpoints: mock.endpoints,
            control: MockControl(endpoints: mock.endpoints, logger: logger), configFile: configFile, keep: keep)
        stage.cluster = redisCluster
        do {
            try (bench.yaml(endpoints: mock.endpoints, redis: target) + extraYAML).write(
                toFile: configFile, atomically: true, encoding: .utf8)
        } catch {
            stage.stop()
            throw error
        }
        return stage
    }

    /// The mock's accept journal in the run's folder (every mock of the run appends to it).
    static func journal(_ directory: String) -> String { directory + "/accepted.journal" }

    /// A mock answering at once, appending to the run's journal; on `port` (0: a free one).
    func startMock(directory: String, port: Int = 0, logName: String = "mock.log") throws -> BenchMock {
        try BenchMock(
            directory: directory, configJSON: mockConfigJSON(latencyMs: 0, maxStreams: 1000), port: port,
            acceptJournal: Self.journal(directory), executableDirectory: executableDirectory, logName: logName)
    }

    /// A `volley worker` reading as `consumer`, logging to `<consumer>.log` in the run's folder.
    func startWorker(_ stage: E2EBench.Stage, consumer: String) throws {
        var env = ProcessInfo.processInfo.environment
        env["VOLLEY_LOG_LEVEL"] = "warning"
        if let u = unansweredSends { env["VOLLEY_WORKER_UNANSWERED_SENDS"] = u }
        let w = try BenchChild(
            name: consumer, executable: executableDirectory + "/volley",
            arguments: ["worker", "--config", stage.configFile, "--consumer", consumer],
            logFile: stage.directory + "/\(consumer).log", environment: env)
        stage.workers.append(w)
    }

    // MARK: - faults

    /// A fault begun and not yet ended: what `end` needs, and what was done (`detail`).
    struct Injected: Sendable {
        var fault: ChaosBench.Fault
        var detail: String
        /// `cluster-primary-kill`: the node killed.
        var clusterPort: Int?
    }

    /// Begins the fault (the first half of each `ChaosBench.Fault`'s description).
    func begin(_ fault: ChaosBench.Fault, _ stage: E2EBench.Stage) throws -> Injected {
        switch fault {
        case .providerKill:
            guard let mock = stage.mock else { throw BenchError("provider-kill needs the mock the run started") }
            kill(mock.child.pid, SIGKILL)
            mock.child.process.waitUntilExit()
            return Injected(fault: fault, detail: "kill -9 volley-mock (pid \(mock.child.pid))")
        case .providerGoAway:
            try stage.control.configure("{\"goAwayAfterStreams\":\(stormStreams)}")
            return Injected(fault: fault, detail: "GOAWAY after \(stormStreams) requests per connection")
        case .providerReset:
            try stage.control.configure("{\"resetAfterStreams\":\(stormStreams)}")
            return Injected(fault: fault, detail: "TCP reset at request \(stormStreams) of every connection")
        case .redisStop:
            guard let redis = stage.redis else { throw BenchError("redis-stop needs the Redis the run started") }
            kill(redis.child.pid, SIGSTOP)
            return Injected(fault: fault, detail: "SIGSTOP redis-server")
        case .redisRestart:
            guard let redis = stage.redis else { throw BenchError("redis-restart needs the Redis the run started") }
            redis.shutDown()
            return Injected(fault: fault, detail: "redis-server shut down")
        case .workerKill:
            // The most recently started worker: the first ones run the whole run, so their memory can be followed.
            guard let victim = stage.workers.last(where: { $0.isRunning }) else {
                throw BenchError("worker-kill: no worker running")
            }
            kill(victim.pid, SIGKILL)
            victim.process.waitUntilExit()
            stage.workers.removeAll { $0 === victim }
            return Injected(fault: fault, detail: "kill -9 \(victim.name) (pid \(victim.pid))")
        case .clusterPrimaryKill:
            guard let cluster = stage.cluster else {
                throw BenchError("cluster-primary-kill needs the cluster the run started")
            }
            let port = try cluster.primary(for: RecipientKeys(org: E2EBench.org).quotaLimits)
            say("  killing primary 127.0.0.1:\(port) (serves the org's slot)")
            cluster.kill9(port: port)
            return Injected(
                fault: fault, detail: "kill -9 primary 127.0.0.1:\(port) (serves the org's slot)", clusterPort: port)
        }
    }

    /// Ends a fault `begin` started: the provider, Redis or a worker (as `replacement`) back. Returns when the fault
    /// is over (the service may still be recovering).
    func end(_ injected: Injected, _ stage: E2EBench.Stage, replacement: String) throws {
        switch injected.fault {
        case .providerKill:
            stage.mock = try startMock(
                directory: stage.directory, port: stage.endpoints.port, logName: "mock.restarted.log")
        case .providerGoAway:
            try stage.control.configure("{\"goAwayAfterStreams\":0}")
        case .providerReset:
            try stage.control.configure("{\"resetAfterStreams\":0}")
        case .redisStop:
            if let redis = stage.redis { kill(redis.child.pid, SIGCONT) }
        case .redisRestart:
            try stage.redis?.start()
        case .workerKill:
            try startWorker(stage, consumer: replacement)
        case .clusterPrimaryKill:
            guard let cluster = stage.cluster, let port = injected.clusterPort else { return }
            let key = RecipientKeys(org: E2EBench.org).quotaLimits
            // The node has no persistence: back before its replica took over, it would serve its slots empty.
            let until = benchNow() + 60
            while (try? cluster.primary(for: key)) == port || (try? cluster.primary(for: key)) == nil {
                if benchNow() > until { throw BenchError("no replica took over from 127.0.0.1:\(port) in 60 s") }
                usleep(100_000)
            }
            say("  a replica took over; restarting 127.0.0.1:\(port)")
            try cluster.restart(port: port)
        }
    }

    // MARK: - readings

    static func fileSize(_ path: String) -> UInt64 {
        ((try? FileManager.default.attributesOfItem(atPath: path))?[.size] as? NSNumber)?.uint64Value ?? 0
    }

    /// A job's report as published (typed, and as raw JSON for fields this build does not know).
    static func findReport(_ client: RedisClient, _ store: StoreConfiguration, job: String) throws -> (
        JobReport, [String: Any]
    )? {
        for stream in store.reportStreams {
            for e in try client.checked(["XRANGE", stream, "-", "+"]).array ?? [] {
                guard let entry = e.array, entry.count == 2,
                    let json = entry[1].fieldPairs.first(where: { $0.0 == "report" })?.1,
                    let rep = try? ReportCoding.decoder.decode(JobReport.self, from: Data(json.utf8)),
                    rep.job.rawValue == job
                else { continue }
                let raw = (try? JSONSerialization.jsonObject(with: Data(json.utf8)) as? [String: Any]) ?? [:]
                return (rep, raw)
            }
        }
        return nil
    }

    /// The org's quota counters per platform and hour, `used` and `pending`, in one order for every reading.
    struct QuotaReading: Sendable, Hashable {
        var used: [Int]
        var pending: [Int]

        /// What was added since `earlier` (a reading of the same hours), summed.
        func since(_ earlier: QuotaReading) -> (used: Int, pending: Int) {
            (
                zip(used, earlier.used).reduce(0) { $0 + $1.0 - $1.1 },
                zip(pending, earlier.pending).reduce(0) { $0 + $1.0 - $1.1 }
            )
        }
    }

    /// `used` and `pending` of the org's quota per platform and hour of `hours`.
    static func quota(_ client: RedisClient, hours: [QuotaHour]) throws -> QuotaReading {
        let keys = RecipientKeys(org: E2EBench.org)
        var reading = QuotaReading(used: [], pending: [])
        for hour in hours {
            for p in [Platform.ios, Platform.android] {
                let v = try client.checked(["HMGET", keys.quota(p, hour), "used", "pending"]).array ?? []
                reading.used.append(v.first.flatMap { $0.integer.map(Int.init) ?? $0.string.flatMap { Int($0) } } ?? 0)
                reading.pending.append(
                    v.count > 1 ? (v[1].integer.map(Int.init) ?? v[1].string.flatMap { Int($0) } ?? 0) : 0)
            }
        }
        return reading
    }

    /// The campaign population's device tokens (what `E2EBench.load` registers for `devices` and `iosShare`).
    func campaignTokens() -> Set<String> {
        var tokens = Set<String>()
        tokens.reserveCapacity(devices)
        for i in 0..<devices { tokens.insert(campaignToken(i)) }
        return tokens
    }

    /// The token of the population's device `i`.
    func campaignToken(_ i: Int) -> String {
        i % 1000 < Int((iosShare * 1000).rounded()) ? E2EBench.iosToken(i).rawValue : E2EBench.fcmToken(i).rawValue
    }

    /// The identities of the pushes to `tokens` in the journal's bytes `from` up to `to` (nil: its end).
    static func identities(journal path: String, from: UInt64, to: UInt64?, of tokens: Set<String>) throws -> [String:
        [Substring]]
    {
        guard let handle = FileHandle(forReadingAtPath: path) else {
            throw BenchError("no accept journal at \(path)")
        }
        defer { try? handle.close() }
        try handle.seek(toOffset: from)
        let data: Data?
        if let to {
            data = to > from ? try handle.read(upToCount: Int(to - from)) : nil
        } else {
            data = try handle.readToEnd()
        }
        return identities(lines: String(decoding: data ?? Data(), as: UTF8.self), of: tokens)
    }

    /// The identity of each push per device of `tokens` in journal lines, in the order the provider took them
    /// (other devices left out): an APNs line's fourth field (`apns-collapse-id`), an FCM line's third.
    static func identities(lines: String, of tokens: Set<String>) -> [String: [Substring]] {
        var identities: [String: [Substring]] = [:]
        for line in lines.split(separator: "\n") {
            let parts = line.split(separator: " ")
            guard parts.count >= 2 else { continue }
            let token = String(parts[1])
            guard tokens.contains(token) else { continue }
            let at = parts[0] == "apns" ? 3 : 2
            identities[token, default: []].append(parts.count > at ? parts[at] : "-")
        }
        return identities
    }

    /// What the provider took, per device, from the identities of its pushes.
    struct JournalTally: Sendable, Hashable {
        var pushes = 0
        var devices = 0
        /// Pushes beyond the first per device.
        var duplicatePushes: Int { pushes - devices }
        var duplicatedDevices = 0
        /// Devices that got copies without one identity on every one (`ChaosBench.showsTwice`).
        var shownTwice = 0

        init() {}

        init(_ identities: [String: [Substring]]) {
            devices = identities.count
            for list in identities.values {
                pushes += list.count
                if list.count > 1 { duplicatedDevices += 1 }
                if ChaosBench.showsTwice(list) { shownTwice += 1 }
            }
        }
    }
}
