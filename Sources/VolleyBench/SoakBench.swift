// swift-format-ignore-file: AlwaysUseLowerCamelCase

// The result types' properties are the `--json` keys (snake_case, a contract with users' scripts), named as written.
import Foundation
import Logging
import Synchronization
import VolleyCore
import VolleyRedis
import VolleyService
import VolleyStore

/// `volley-bench soak`: everything at once for `minutes` minutes, faults on a timetable, and each process's memory,
/// open files and threads minute by minute.
///
/// What it does, in order:
/// 1. starts a redis-server (with `cluster`, a Redis Cluster of 3 primaries with one replica each), a `volley-mock`
///    writing an accept journal and `workers` `volley worker` processes as `volley-bench chaos` does (`FaultRig`),
///    and a `volley api`; registers `devices` devices in one group (the `e2e` population) and warms the workers up;
/// 2. for `minutes` minutes, together:
///    - campaigns: one job naming the group, XADDed and split into `shards` shards so every worker sends; the next
///      starts once the previous one has reported, and at most every `campaignEvery` seconds;
///    - API traffic through curl every `apiEvery` seconds (`SoakTraffic`): a user token minted, a device registered
///      with it, a job to the last few of those users, the previous job's status;
///    - sync hints for ten probe users every `hintEvery` seconds, added to the store as `volley-bench hints` adds
///      them (the workers' flushers push them);
///    - a recurring schedule every `scheduleEvery` seconds, followed until its first run is promoted, then deleted;
///    - faults on a timetable (`SoakPlan.faultTimetable`): the mock killed and restarted, a GOAWAY storm, a worker
///      killed and a replacement started, and with `cluster` the primary serving the org's slot killed; each waits
///      (up to 30 s) for a campaign a quarter of whose devices the mock has taken, so that it meets requests in
///      flight;
///    - at minute 0, 1, …, `minutes`: RSS, open file descriptors and threads of every process (`ProcessSample`);
/// 3. waits for the last campaign, every API job and schedule run and the hints still waiting, stops the workers
///    (drain) and reads: each campaign's report and its stretch of the journal (lost, duplicated, shown twice, as
///    the chaos bench reads its campaign), the org's quota against the accepted pushes of every job of the run, and
///    each process's growth between minute 10 (minute 1 in a run shorter than 11 minutes) and the last minute.
///
/// Campaigns run one at a time, so the journal's lines between a campaign's XADD and its report are that
/// campaign's: the campaign devices get nothing else (API jobs, hints and schedule runs go to other users).
public struct SoakBench {
    public struct Options: Sendable {
        public var minutes = 60
        /// Devices of every campaign (the same population each time).
        public var devices = 5_000
        public var workers = 2
        /// A Redis Cluster (3 primaries, one replica each) instead of one redis-server; adds the failover fault.
        public var cluster = false
        /// Seconds between faults (0: none).
        public var faultEvery = 120.0
        /// A campaign starts at most this often; the next one waits for the previous one's report.
        public var campaignEvery = 15.0
        public var apiEvery = 2.0
        public var hintEvery = 2.0
        public var scheduleEvery = 60.0
        public var shards = 4
        /// Waiting for the last jobs after the run, and for a failing Redis during it.
        public var timeoutSeconds = 600.0
        public var clusterNodeTimeoutMs = 2000
        /// Where `volley` and `volley-mock` are (default: next to the running executable).
        public var executableDirectory = volleyExecutableDirectory()
        public var workDirectory: String?
        public var keep = false
        public var progress = true
        /// Requested (SIGINT, SIGTERM): the run stops between two steps, stops every process it started, and throws.
        public var stop = SoakStop()
        public init() {}
    }

    /// One process at one minute.
    public struct Usage: Sendable, Hashable, Codable {
        public var rss_kb: Int
        public var fds: Int
        public var threads: Int
    }

    /// Every process running at a minute, by label (`ProcessLabels`): `redis-server` (or `redis-cluster-<port>`),
    /// `volley-mock`, the workers by consumer name, `volley-api`.
    public struct Minute: Sendable, Hashable, Codable {
        public var minute: Int
        /// When it was taken, seconds after the run's start.
        public var at_s: Double
        public var processes: [String: Usage]
    }

    /// Growth of one figure between two minutes, per process.
    public struct Growth<Value: Sendable & Hashable & Codable & Comparable>: Sendable, Hashable, Codable {
        public var from_minute: Int
        public var to_minute: Int
        /// The run is shorter than 11 minutes: measured from minute 1, not minute 10.
        public var short_run: Bool
        public var per_process: [String: Value]
        /// The largest of `per_process` and whose it is; absent when no process ran at both minutes.
        public var max: Value?
        public var max_process: String?
        /// Processes not running at both minutes (killed by a fault, restarted, or started later): not compared.
        public var unmeasured: [String]
    }

    /// A fault as injected.
    public struct FaultRecord: Sendable, Hashable, Codable {
        public var fault: String
        /// Seconds after the run's start.
        public var at_s: Double
        /// From the fault's start to its end (the mock or worker started again, the node restarted).
        public var held_s: Double
        public var detail: String
        /// Why the fault could not be injected (absent when it was).
        public var error: String?
    }

    public struct Result: Sendable, Codable {
        /// Campaign devices that ended neither accepted nor rejected by the provider, over every campaign (a campaign
        /// without a report counts all its devices): 0 is the goal.
        public var lost: Int
        /// Campaign devices that got a campaign's push more than once without one collapse identity on every copy,
        /// from the journal (`ChaosBench.showsTwice`), over every campaign: 0 is the goal.
        public var shown_twice: Int
        /// `quota_used` = `jobs_accepted`: the org's hourly quota counted each accepted push of the run once.
        public var quota_exact: Bool
        public var rss_growth_pct: Growth<Double>
        /// Open file descriptors at the last minute minus at the first compared minute.
        public var fd_growth: Growth<Int>
        public var minutes: [Minute]
        public var campaigns: Int
        /// Devices the campaigns named (campaigns × devices).
        public var devices_sent: Int
        public var faults: [FaultRecord]
        public var api_requests: Int
        /// Answers outside 2xx, and requests curl got no answer to (status `000`).
        public var api_errors: Int
        public var api_errors_by_status: [String: Int]
        /// Users named by the sync hints added (one per user per call, as `volley_sync_hints_received_total`).
        public var sync_hints: Int
        public var sync_hint_errors: Int
        /// Sync-hint pushes the workers made of them (their jobs' reports).
        public var sync_hint_pushes: Int
        /// Schedule runs that were promoted and reported, of `schedules_created`.
        public var schedule_runs: Int
        public var schedules_created: Int
        public var run_minutes: Int
        public var devices_per_campaign: Int
        public var workers: Int
        public var cluster: Bool
        public var build: String
        /// Over every campaign, from their reports.
        public var accepted: Int
        public var rejected: Int
        public var failed: Int
        public var failed_by_reason: [String: Int]
        /// From the journal, over every campaign: pushes beyond the first per device, devices pushed more than once,
        /// devices never reached.
        public var duplicate_pushes: Int
        public var duplicated_devices: Int
        public var never_reached: Int
        public var campaign_s_max: Double
        /// Campaigns without a report when the run gave up waiting.
        public var unfinished_campaigns: [String]
        /// The org's quota over the run (every hour key it touched): `used` added, `pending` left after the drain.
        public var quota_used: Int
        public var quota_pending: Int
        /// Accepted pushes of every job reported in the run: campaigns, API jobs, sync-hint pushes, schedule runs.
        public var jobs_accepted: Int
        /// Jobs posted to the API (202) and schedule runs expected.
        public var api_jobs: Int
        /// Devices of API jobs and schedule runs neither accepted nor rejected.
        public var api_jobs_lost: Int
        /// API jobs and schedule runs without a report when the run gave up waiting.
        public var unreported_jobs: [String]
        /// Workers that exited by themselves (not the ones a fault killed).
        public var worker_exits: [String]
        public var duration_s: Double
        public var command: String
    }

    public let options: Options
    let logger: Logger
    let clock: any WallClock

    public init(
        options: Options, logger: Logger = Logger(label: "volley.bench.soak"), clock: any WallClock = SystemClock()
    ) {
        self.options = options
        self.logger = logger
        self.clock = clock
    }

    /// Probe users the run registers (`t<i>`, one iOS device each): sync hints go to `t0`…`t9`, schedule runs to
    /// `t10`…`t14`, so neither touches a campaign device.
    static let probeUsers = 15

    var rig: FaultRig {
        let o = options
        var rig = FaultRig(
            devices: o.devices, iosShare: 0.6, devicesPerUser: 200, workers: o.workers, shards: o.shards,
            connections: 2, inFlight: 4000, recordBatchSize: 512,
            // A killed worker's entries go to another within 5 s, not the product's minute.
            reclaimIdleMs: 5000, unansweredSends: nil, stormStreams: 50, clusterNodeTimeoutMs: o.clusterNodeTimeoutMs,
            executableDirectory: o.executableDirectory, workDirectory: o.workDirectory, keep: o.keep,
            progress: o.progress, logger: logger)
        rig.probes = Self.probeUsers
        return rig
    }

    /// How long each fault lasts: the mock and a worker are back after 3 s (the chaos figures' middle case); the
    /// GOAWAY storm lasts 10 s, so that every connection of every worker meets it; a killed primary's node starts
    /// again 3 s after its kill, and not before its replica took over.
    static func hold(_ fault: ChaosBench.Fault) -> Double { fault == .providerGoAway ? 10 : 3 }

    /// The faults in the order they take turns. With `cluster` the failover comes first: a short run on a cluster
    /// meets it.
    static func faultKinds(cluster: Bool) -> [ChaosBench.Fault] {
        (cluster ? [.clusterPrimaryKill] : []) + [.providerKill, .providerGoAway, .workerKill]
    }

    /// The run's sections beyond the `e2e` bench's configuration: the API (no rate limit: the soak's own traffic
    /// only; user tokens signed with `secret`) and sync-hint rules short enough that pushes go out during the run
    /// and the last hints within seconds of its end (the defaults, 180 s and 3 an hour, hold most for an hour).
    static func extraYAML(apiPort: Int, secret: String) -> String {
        """
        api:
          host: 127.0.0.1
          port: \(apiPort)
          drainSeconds: 0
          rateLimit: {requestsPerSecond: 0, burst: 1}
          userTokens:
            keys: [{id: soak, secret: "\(secret)"}]
        syncHints:
          minIntervalSeconds: 5
          maxPerHour: 720

        """
    }

    func say(_ s: String) { if options.progress { stderrLine(s + "\n") } }

    func checkStop() throws {
        if options.stop.requested { throw BenchError("soak interrupted; every process it started was stopped") }
    }

    /// A campaign of the run: its id, its stretch of the journal, its report.
    struct Campaign {
        var id: String
        var journalFrom: UInt64
        var journalTo: UInt64?
        var started: Double
        var seconds: Double?
    }

    // MARK: - run

    public func run(command: String) throws -> Result {
        let o = options
        guard let curl = which("curl") else { throw BenchError("curl not found: apt-get install -y curl") }
        let rig = rig
        let bench = E2EBench(options: rig.e2eOptions, logger: logger)
        let apiPort = try APIBench.freePort()
        let secret = Data((0..<32).map { _ in UInt8.random(in: 0...255) }).base64EncodedString()
        let stage = try rig.makeStage(
            bench, name: "volley-soak", cluster: o.cluster, appendOnly: false,
            extraYAML: Self.extraYAML(apiPort: apiPort, secret: secret))
        defer { stage.stop() }

        let (settings, client, producer) = try stage.clients(logger: logger)
        say(
            "soak \(o.minutes) min: \(o.cluster ? "Redis Cluster" : "redis-server"), \(o.workers) worker(s); loading "
                + "\(grouped(Double(o.devices))) devices…")
        let (pop, _) = try bench.load(stage: stage, settings: settings)
        for i in 0..<o.workers { try rig.startWorker(stage, consumer: "bench-\(i)") }
        try bench.warmUp(stage: stage, producer: producer, client: client)
        let volley = o.executableDirectory + "/volley"
        let key = try APIBench.createKey(
            volley: volley, config: stage.configFile, org: E2EBench.org.rawValue, role: "send", dir: stage.directory)
        let api = try APIBench.startAPI(
            volley: volley, config: stage.configFile, port: apiPort, dir: stage.directory, curl: curl)
        defer { api.stop(grace: 5) }

        let start = clock.now()
        let t0 = benchNow()
        let hour0 = QuotaHour(containing: start)
        // Every hour the run and its wait for the last jobs can touch.
        let hourCount = (o.minutes + Int(o.timeoutSeconds / 60)) / 60 + 2
        let hours = (0...hourCount).map { QuotaHour(index: hour0.index + Int64($0)) }
        let quota0 = try FaultRig.quota(client, hours: hours)
        var cursor = try producer.lastReportID()
        let runTag = UUID().uuidString.prefix(6).lowercased()
        let traffic = SoakTraffic(
            settings: settings, clock: clock, logger: logger, curl: curl, base: "http://127.0.0.1:\(apiPort)",
            key: key, directory: stage.directory, runTag: String(runTag),
            until: start.addingTimeInterval(Double(o.minutes) * 60), apiEvery: o.apiEvery, hintEvery: o.hintEvery,
            scheduleEvery: o.scheduleEvery)
        traffic.start()
        defer { traffic.join() }
        say(
            "workers warm, API up; the run starts: campaigns, API, sync hints, schedules"
                + (o.faultEvery > 0 ? ", a fault every \(Int(o.faultEvery)) s" : ""))

        var plan = SoakPlan(
            start: start, minutes: o.minutes,
            faults: SoakPlan.faultTimetable(
                minutes: o.minutes, every: o.faultEvery, kinds: Self.faultKinds(cluster: o.cluster), hold: Self.hold),
            campaignEvery: o.campaignEvery)
        let journal = FaultRig.journal(stage.directory)
        var reports: [String: JobReport] = [:]
        var campaigns: [Campaign] = []
        var current: Int?
        var minutes: [Minute] = []
        var labels = ProcessLabels()
        var faults: [FaultRecord] = []
        var open: (injected: FaultRig.Injected, at: Double)?
        var replacements = 0
        var exited: [String] = []
        var failingSince: Double?
        // The running campaign's lines in the journal, until a quarter of its devices are there (as the chaos bench
        // triggers its fault).
        var sending: ChaosBench.JournalWatch?
        let sendingAt = max(1, o.devices / 4)

        /// Reads the reports published since the last read; closes the running campaign once its report is in.
        /// A failing Redis (a failover) is waited out up to `timeoutSeconds`.
        func readReports() throws {
            do {
                let (new, last) = try producer.reports(after: cursor, blockMillis: 100, count: 1000)
                cursor = last
                for r in new { reports[r.job.rawValue] = r }
                failingSince = nil
            } catch {
                let since = failingSince ?? benchNow()
                failingSince = since
                if benchNow() - since > o.timeoutSeconds {
                    throw BenchError("Redis failed for \(Int(o.timeoutSeconds)) s: \(error)")
                }
                usleep(100_000)
            }
            if let c = current, reports[campaigns[c].id] != nil {
                campaigns[c].journalTo = FaultRig.fileSize(journal)
                campaigns[c].seconds = benchNow() - campaigns[c].started
                current = nil
                plan.campaignFinished()
            }
        }

        func checkWorkers() throws {
            for w in stage.workers where !w.isRunning && !exited.contains(w.name) {
                exited.append(w.name)
                say("  \(w.name) exited by itself (status \(w.process.terminationStatus)): \(w.logTail(3))")
            }
            if !stage.workers.contains(where: \.isRunning) {
                throw BenchError("every worker exited; logs in \(stage.directory) (use --keep)")
            }
        }

        run: while true {
            try checkStop()
            for action in plan.due(now: clock.now()) {
                let at = benchNow() - t0
                switch action {
                case .sample(let minute):
                    minutes.append(Self.sample(minute: minute, at: at, stage: stage, api: api, labels: &labels))
                    if minute > 0 {
                        say(
                            "  minute \(minute): \(campaigns.count) campaign(s), \(faults.count) fault(s), API "
                                + "\(traffic.counts.requests) requests (\(traffic.counts.errors) errors)")
                    }
                case .beginFault(let i):
                    let planned = plan.faults[i]
                    do {
                        open = (try rig.begin(planned.fault, stage), at)
                        say(String(format: "  %.0f s: %@", at, planned.fault.rawValue))
                    } catch {
                        faults.append(
                            FaultRecord(
                                fault: planned.fault.rawValue, at_s: at, held_s: 0, detail: "not injected",
                                error: "\(error)"))
                        plan.faultFailed()
                    }
                case .endFault:
                    guard let injected = open else { break }
                    replacements += injected.injected.fault == .workerKill ? 1 : 0
                    try rig.end(injected.injected, stage, replacement: "bench-r\(replacements)")
                    faults.append(
                        FaultRecord(
                            fault: injected.injected.fault.rawValue, at_s: injected.at,
                            held_s: benchNow() - t0 - injected.at, detail: injected.injected.detail))
                    open = nil
                case .startCampaign:
                    let id = "soak-\(runTag)-c\(campaigns.count + 1)"
                    do {
                        let json = try bench.job(id: id, users: [E2EBench.campaignGroup.rawValue])
                        let from = FaultRig.fileSize(journal)
                        _ = try client.checked(["XADD", settings.store.jobStream(for: JobID(id)), "*", "job", json])
                        campaigns.append(Campaign(id: id, journalFrom: from, started: benchNow()))
                        current = campaigns.count - 1
                        sending = try? ChaosBench.JournalWatch(path: journal, from: from)
                    } catch {
                        say("  campaign \(id) not added: \(error)")
                        plan.campaignFinished()
                    }
                case .finish:
                    break run
                }
            }
            try readReports()
            if current == nil {
                sending = nil
            } else if let watch = sending, watch.linesAppended() >= sendingAt {
                plan.campaignSending()
                sending = nil
            }
            try checkWorkers()
        }

        say("the \(o.minutes) minutes are over; waiting for the last campaign, API jobs, schedule runs and hints…")
        traffic.join()
        let counts = traffic.counts
        let hintStore = RedisSyncHintStore(client: client)
        let deadline = benchNow() + o.timeoutSeconds
        var quiet = 0
        while true {
            try checkStop()
            try readReports()
            try checkWorkers()
            let missing = counts.expectedJobs.filter { reports[$0] == nil }
            let waitingHints = (try? hintStore.backlog(org: E2EBench.org).waiting) ?? 1
            let busy = (try? producer.pendingCount() + bench.streamLag(client, settings.store)) ?? 1
            quiet = current == nil && missing.isEmpty && waitingHints == 0 && busy == 0 ? quiet + 1 : 0
            // Three quiet reads in a row: a hint batch taken by a flusher is on the stream by then.
            if quiet >= 3 { break }
            if benchNow() > deadline {
                say("  gave up waiting after \(Int(o.timeoutSeconds)) s (\(missing.count) job(s) without a report)")
                break
            }
            usleep(200_000)
        }
        // Outcomes and quota settle before a worker exits (drain): read the last reports and the quota after.
        stage.stopWorkers()
        while true {
            let before = reports.count
            try readReports()
            if reports.count == before && failingSince == nil { break }
        }
        let quota = try FaultRig.quota(client, hours: hours).since(quota0)
        let duration = benchNow() - t0

        // Campaigns: reports and their stretches of the journal.
        let tokens = rig.campaignTokens()
        let perCampaign = pop.ios + pop.android
        var lost = 0
        var accepted = 0
        var rejected = 0
        var failed = 0
        var failedByReason: [String: Int] = [:]
        var seen = FaultRig.JournalTally()
        var neverReached = 0
        var unfinished: [String] = []
        for c in campaigns {
            let tally = FaultRig.JournalTally(
                try FaultRig.identities(journal: journal, from: c.journalFrom, to: c.journalTo, of: tokens))
            seen.pushes += tally.pushes
            seen.devices += tally.devices
            seen.duplicatedDevices += tally.duplicatedDevices
            seen.shownTwice += tally.shownTwice
            neverReached += max(0, perCampaign - tally.devices)
            guard let rep = reports[c.id] else {
                unfinished.append(c.id)
                lost += perCampaign
                continue
            }
            lost += max(0, perCampaign - rep.accepted - rep.rejected)
            accepted += rep.accepted
            rejected += rep.rejected
            failed += rep.failed
            failedByReason.merge(rep.failedByReason, uniquingKeysWith: +)
        }
        let campaignIDs = Set(campaigns.map(\.id))
        let jobsAccepted = reports.values.filter { !Self.isShard($0.job.rawValue, of: campaignIDs) }.reduce(0) {
            $0 + $1.accepted
        }
        var apiLost = 0
        var unreported: [String] = []
        for id in counts.expectedJobs {
            guard let rep = reports[id] else {
                unreported.append(id)
                continue
            }
            apiLost += max(0, rep.devices - rep.accepted - rep.rejected)
        }
        let (rss, fds) = Self.growth(minutes)
        return Result(
            lost: lost, shown_twice: seen.shownTwice, quota_exact: quota.used == jobsAccepted, rss_growth_pct: rss,
            fd_growth: fds, minutes: minutes, campaigns: campaigns.count, devices_sent: campaigns.count * perCampaign,
            faults: faults, api_requests: counts.requests, api_errors: counts.errors,
            api_errors_by_status: counts.errorsByStatus, sync_hints: counts.hints, sync_hint_errors: counts.hintErrors,
            sync_hint_pushes: reports.keys.filter { $0.hasPrefix("synchint-") }.count,
            schedule_runs: counts.scheduleRuns.filter { reports[$0] != nil }.count,
            schedules_created: counts.scheduleRuns.count, run_minutes: o.minutes, devices_per_campaign: perCampaign,
            workers: o.workers, cluster: o.cluster, build: rig.buildName, accepted: accepted, rejected: rejected,
            failed: failed, failed_by_reason: failedByReason, duplicate_pushes: seen.duplicatePushes,
            duplicated_devices: seen.duplicatedDevices, never_reached: neverReached,
            campaign_s_max: campaigns.compactMap(\.seconds).max() ?? 0, unfinished_campaigns: unfinished,
            quota_used: quota.used, quota_pending: quota.pending, jobs_accepted: jobsAccepted,
            api_jobs: counts.expectedJobs.count, api_jobs_lost: apiLost, unreported_jobs: unreported,
            worker_exits: exited, duration_s: duration, command: command)
    }

    /// A campaign's shard (`<campaign>.s<n>`): its report is counted in the campaign's.
    static func isShard(_ job: String, of campaigns: Set<String>) -> Bool {
        guard let dot = job.lastIndex(of: ".") else { return false }
        let suffix = job[job.index(after: dot)...]
        return suffix.count > 1 && suffix.first == "s" && suffix.dropFirst().allSatisfy(\.isNumber)
            && campaigns.contains(String(job[..<dot]))
    }

    /// RSS, open files and threads of every process of the stage and the API.
    static func sample(
        minute: Int, at: Double, stage: E2EBench.Stage, api: BenchChild, labels: inout ProcessLabels
    ) -> Minute {
        var children: [BenchChild] = []
        if let redis = stage.redis { children.append(redis.child) }
        children += stage.cluster?.nodes ?? []
        if let mock = stage.mock { children.append(mock.child) }
        children += stage.workers
        children.append(api)
        var processes: [String: Usage] = [:]
        for child in children where child.isRunning {
            guard let s = child.sample() else { continue }
            processes[labels.label(child.name, pid: child.pid)] = Usage(rss_kb: s.rssKB, fds: s.fds, threads: s.threads)
        }
        return Minute(minute: minute, at_s: at, processes: processes)
    }

    // MARK: - growth

    /// The minute growth is measured from: minute 10, so that start-up (caches filling, pools opening) is behind
    /// it; minute 1 in a run shorter than 11 minutes, which has no minute after 10.
    static func baselineMinute(last: Int) -> Int { last >= 11 ? 10 : Swift.min(1, last) }

    /// RSS growth in percent and open-file growth, per process, from the baseline minute to the last one.
    static func growth(_ minutes: [Minute]) -> (rss: Growth<Double>, fds: Growth<Int>) {
        let last = minutes.last ?? Minute(minute: 0, at_s: 0, processes: [:])
        let from = baselineMinute(last: last.minute)
        let base = minutes.first { $0.minute >= from } ?? last
        var rss: [String: Double] = [:]
        var fds: [String: Int] = [:]
        var unmeasured: [String] = []
        for name in Set(minutes.flatMap(\.processes.keys)).sorted() {
            guard let b = base.processes[name], let l = last.processes[name] else {
                unmeasured.append(name)
                continue
            }
            rss[name] = b.rss_kb > 0 ? (Double(l.rss_kb - b.rss_kb) / Double(b.rss_kb) * 10_000).rounded() / 100 : 0
            fds[name] = l.fds - b.fds
        }
        func make<V: Sendable & Hashable & Codable & Comparable>(_ values: [String: V]) -> Growth<V> {
            let top = values.max { $0.value < $1.value || ($0.value == $1.value && $0.key > $1.key) }
            return Growth(
                from_minute: base.minute, to_minute: last.minute, short_run: last.minute < 11, per_process: values,
                max: top?.value, max_process: top?.key, unmeasured: unmeasured)
        }
        return (make(rss), make(fds))
    }

    // MARK: - output

    /// Human-readable summary: the run, then each process's RSS, open files and threads.
    public static func table(_ r: Result) -> String {
        func n(_ v: Int) -> String { grouped(Double(v)) }
        let faults =
            r.faults.isEmpty
            ? "none"
            : r.faults.map {
                String(format: "%.0f s %@ (%.1f s)", $0.at_s, $0.fault, $0.held_s) + ($0.error == nil ? "" : " FAILED")
            }.joined(separator: ", ")
        let span =
            "minute \(r.rss_growth_pct.from_minute) → \(r.rss_growth_pct.to_minute)"
            + (r.rss_growth_pct.short_run ? " (run shorter than 11 minutes)" : "")
        var rows: [(String, String)] = [
            (
                "soak",
                "\(r.run_minutes) min (\(String(format: "%.0f", r.duration_s)) s), \(n(r.devices_per_campaign)) "
                    + "devices per campaign, \(r.workers) worker(s), \(r.cluster ? "Redis Cluster" : "redis-server"), "
                    + "\(r.build) build"
            ),
            (
                "campaigns",
                "\(r.campaigns) (\(n(r.devices_sent)) devices): lost \(n(r.lost)), shown twice \(n(r.shown_twice)), "
                    + "duplicates \(n(r.duplicate_pushes)) pushes, failed \(n(r.failed))"
                    + (r.unfinished_campaigns.isEmpty ? "" : ", unfinished \(r.unfinished_campaigns.count)")
            ),
            (
                "quota",
                "used \(n(r.quota_used)) for \(n(r.jobs_accepted)) accepted (pending \(n(r.quota_pending))): "
                    + (r.quota_exact ? "exact" : "NOT exact")
            ),
            (
                "API",
                "\(n(r.api_requests)) requests, \(n(r.api_errors)) errors; \(n(r.api_jobs)) jobs and schedule runs, "
                    + "lost \(n(r.api_jobs_lost)), unreported \(r.unreported_jobs.count)"
            ),
            (
                "sync hints, schedules",
                "\(n(r.sync_hints)) hints (\(n(r.sync_hint_pushes)) pushes); \(r.schedule_runs) of "
                    + "\(r.schedules_created) schedule runs"
            ),
            ("faults", faults),
            (
                "growth",
                span + ": RSS max " + (r.rss_growth_pct.max.map { String(format: "%.2f %%", $0) } ?? "-")
                    + (r.rss_growth_pct.max_process.map { " (\($0))" } ?? "") + ", fds max "
                    + (r.fd_growth.max.map { String(format: "%+d", $0) } ?? "-")
                    + (r.fd_growth.max_process.map { " (\($0))" } ?? "")
            ),
        ]
        if !r.worker_exits.isEmpty { rows.append(("workers exited", r.worker_exits.joined(separator: ", "))) }
        rows.append(("command", r.command))
        let w = rows.map(\.0.count).max() ?? 0
        var lines = rows.map { $0.0.padding(toLength: w, withPad: " ", startingAt: 0) + "  " + $0.1 }
        guard let first = r.minutes.first(where: { $0.minute == r.rss_growth_pct.from_minute }),
            let last = r.minutes.last
        else { return lines.joined(separator: "\n") }
        let names = Set(r.minutes.flatMap(\.processes.keys)).sorted()
        let nw = max(7, names.map(\.count).max() ?? 0)
        func pad(_ s: String, _ width: Int) -> String { String(repeating: " ", count: max(0, width - s.count)) + s }
        lines.append("")
        lines.append(
            "process".padding(toLength: nw, withPad: " ", startingAt: 0)
                + pad("RSS MB m\(first.minute)", 12) + pad("m\(last.minute)", 9) + pad("growth", 10)
                + pad("fds", 6) + pad("m\(last.minute)", 6) + pad("threads", 9))
        for name in names {
            let a = first.processes[name]
            let b = last.processes[name]
            func mb(_ u: Usage?) -> String { u.map { String(format: "%.1f", Double($0.rss_kb) / 1024) } ?? "-" }
            lines.append(
                name.padding(toLength: nw, withPad: " ", startingAt: 0) + pad(mb(a), 12) + pad(mb(b), 9)
                    + pad(r.rss_growth_pct.per_process[name].map { String(format: "%.2f %%", $0) } ?? "-", 10)
                    + pad(a.map { String($0.fds) } ?? "-", 6) + pad(b.map { String($0.fds) } ?? "-", 6)
                    + pad(b.map { String($0.threads) } ?? "-", 9))
        }
        return lines.joined(separator: "\n")
    }
}

/// Set once to end a soak early: SIGINT or SIGTERM to `volley-bench`, or the run's end for its traffic thread.
public final class SoakStop: Sendable {
    private let flag = Atomic<Bool>(false)
    public init() {}
    public func request() { flag.store(true, ordering: .releasing) }
    public var requested: Bool { flag.load(ordering: .acquiring) }
}

/// One label per process: its name, then `name#2`, `name#3`… for later processes of the same name (the mock started
/// again, a cluster node restarted), so that a series never mixes two processes.
struct ProcessLabels: Sendable {
    private var byProcess: [String: String] = [:]
    private var taken: Set<String> = []

    mutating func label(_ name: String, pid: Int32) -> String {
        let process = "\(name)/\(pid)"
        if let known = byProcess[process] { return known }
        var label = name
        var n = 1
        while taken.contains(label) {
            n += 1
            label = "\(name)#\(n)"
        }
        taken.insert(label)
        byProcess[process] = label
        return label
    }
}

/// The soak's timetable, fed the clock's now: when each minute is sampled, when each fault begins and ends, when a
/// campaign may start, and when the run is over.
struct SoakPlan: Sendable {
    enum Action: Sendable, Hashable {
        case sample(minute: Int)
        /// The fault at this index of `faults` begins, or ends.
        case beginFault(Int)
        case endFault(Int)
        case startCampaign
        /// Every minute sampled and every fault over: the run's load ends.
        case finish
    }

    struct PlannedFault: Sendable, Hashable {
        var fault: ChaosBench.Fault
        /// Seconds after the start.
        var at: Double
        var hold: Double
    }

    let start: Date
    let minutes: Int
    let faults: [PlannedFault]
    let campaignEvery: Double
    private(set) var nextMinute = 0
    private(set) var nextFault = 0
    /// The fault begun and not yet ended, and when it began (seconds after the start).
    private(set) var openFault: (index: Int, began: Double)?
    private(set) var campaignRunning = false
    /// The running campaign's pushes are reaching the provider.
    private(set) var campaignIsSending = false
    private(set) var lastCampaignAt: Double?
    private(set) var finished = false

    init(start: Date, minutes: Int, faults: [PlannedFault], campaignEvery: Double) {
        self.start = start
        self.minutes = minutes
        self.faults = faults
        self.campaignEvery = campaignEvery
    }

    /// Faults every `every` seconds, `kinds` taking turns, each lasting `hold(fault)`: the k-th at k × `every`, or
    /// when the one before it ended if that is later; none that would still be on at the end of the run. (`due`
    /// may begin one later, never past the time that still lets it end with the run.)
    static func faultTimetable(
        minutes: Int, every: Double, kinds: [ChaosBench.Fault], hold: (ChaosBench.Fault) -> Double
    ) -> [PlannedFault] {
        guard every > 0, !kinds.isEmpty else { return [] }
        let duration = Double(minutes) * 60
        var out: [PlannedFault] = []
        var at = every
        while true {
            let fault = kinds[out.count % kinds.count]
            let held = hold(fault)
            if at + held > duration { return out }
            out.append(PlannedFault(fault: fault, at: at, hold: held))
            at = max(Double(out.count + 1) * every, at + held)
        }
    }

    /// A fault whose time has come waits for a campaign to be sending (`campaignSending`), so that it meets requests
    /// in flight rather than idle workers, for at most this long, and never so long that it would still be on at the
    /// end of the run.
    static let maxWait = 30.0

    /// What is due at `now`, each action once.
    mutating func due(now: Date) -> [Action] {
        guard !finished else { return [] }
        let t = now.timeIntervalSince(start)
        var out: [Action] = []
        while nextMinute <= minutes && Double(nextMinute) * 60 <= t {
            out.append(.sample(minute: nextMinute))
            nextMinute += 1
        }
        if let f = openFault, t >= f.began + faults[f.index].hold {
            out.append(.endFault(f.index))
            openFault = nil
        }
        if openFault == nil, nextFault < faults.count, t >= faults[nextFault].at {
            let f = faults[nextFault]
            if campaignIsSending || t >= min(f.at + Self.maxWait, Double(minutes) * 60 - f.hold) {
                out.append(.beginFault(nextFault))
                openFault = (nextFault, t)
                nextFault += 1
            }
        }
        if !campaignRunning, t < Double(minutes) * 60, lastCampaignAt.map({ t - $0 >= campaignEvery }) ?? true {
            out.append(.startCampaign)
            campaignRunning = true
            campaignIsSending = false
            lastCampaignAt = t
        }
        if nextMinute > minutes, openFault == nil, nextFault >= faults.count {
            out.append(.finish)
            finished = true
        }
        return out
    }

    /// The running campaign reported (or could not be added): the next may start.
    mutating func campaignFinished() {
        campaignRunning = false
        campaignIsSending = false
    }

    /// The running campaign's pushes are reaching the provider: a fault waiting for one may begin.
    mutating func campaignSending() { campaignIsSending = campaignRunning }

    /// The fault that began could not be injected: nothing to end.
    mutating func faultFailed() { openFault = nil }
}

/// Something done every `every` seconds from `first`; a turn missed while busy is not made up.
struct SoakCadence: Sendable {
    let every: Double
    private(set) var next: Date

    init(every: Double, first: Date) {
        self.every = every
        next = first
    }

    mutating func due(_ now: Date) -> Bool {
        guard every > 0, now >= next else { return false }
        while next <= now { next += every }
        return true
    }
}

/// A soak's API traffic, sync hints and schedules, on a thread of their own (curl is one process per request, so
/// waiting for it never holds the campaigns or the faults). `counts` is read by the run's thread at any time.
final class SoakTraffic: @unchecked Sendable {
    struct Counts: Sendable {
        var requests = 0
        var errorsByStatus: [String: Int] = [:]
        var errors: Int { errorsByStatus.values.reduce(0, +) }
        /// API jobs posted (202), then schedule runs expected (their run job ids).
        var apiJobs: [String] = []
        var scheduleRuns: [String] = []
        var expectedJobs: [String] { apiJobs + scheduleRuns }
        var hints = 0
        var hintErrors = 0
    }

    let settings: PipelineSettings
    let clock: any WallClock
    let logger: Logger
    let curl: String
    let base: String
    let key: String
    let directory: String
    let runTag: String
    let until: Date
    let apiEvery: Double
    let hintEvery: Double
    let scheduleEvery: Double
    private let stop = SoakStop()
    private let done = DispatchGroup()
    private let shared = Mutex(Counts())

    var counts: Counts { shared.withLock { $0 } }

    init(
        settings: PipelineSettings, clock: any WallClock, logger: Logger, curl: String, base: String, key: String,
        directory: String, runTag: String, until: Date, apiEvery: Double, hintEvery: Double, scheduleEvery: Double
    ) {
        self.settings = settings
        self.clock = clock
        self.logger = logger
        self.curl = curl
        self.base = base
        self.key = key
        self.directory = directory
        self.runTag = runTag
        self.until = until
        self.apiEvery = apiEvery
        self.hintEvery = hintEvery
        self.scheduleEvery = scheduleEvery
    }

    func start() {
        done.enter()
        Thread { [self] in
            defer { done.leave() }
            run()
        }.start()
    }

    /// Ends the traffic and waits for its thread (at once when it ended already, or never started).
    func join() {
        stop.request()
        done.wait()
    }

    /// Hint users and schedule users: probe users of the e2e population (`t<i>`, one iOS device each).
    static let hintUsers = (0..<10).map { UserID("t\($0)") }
    static let scheduleUsers = (10..<15).map { "t\($0)" }
    /// A schedule's first run comes this long after it is created.
    static let scheduleLead = 15.0

    private func run() {
        let now = clock.now()
        var api = SoakCadence(every: apiEvery, first: now)
        var hints = SoakCadence(every: hintEvery, first: now)
        var schedules = SoakCadence(every: scheduleEvery, first: now.addingTimeInterval(5))
        var follow = SoakCadence(every: 2, first: now)
        let hintStore = RedisSyncHintStore(client: settings.client(name: "bench-hints", logger: logger))
        let output = directory + "/curl.out"
        var round = 0
        var users: [String] = []
        var lastJob: String?
        // Schedules created and not yet seen run: id → when their run is due.
        var following: [(id: String, due: Date)] = []
        var hintCall = 0
        var scheduleCount = 0

        /// One request through curl: its status (0 when curl got no answer) and body.
        func request(_ method: String, _ path: String, bearer: String, body: String? = nil, headers: [String] = [])
            -> (status: Int, body: String)
        {
            var args = ["-s", "-o", output, "-w", "%{http_code}", "--max-time", "10", "-X", method, base + path]
            args += ["-H", "Authorization: Bearer \(bearer)"]
            for h in headers { args += ["-H", h] }
            if let body { args += ["-H", "Content-Type: application/json", "--data-binary", body] }
            var status = 0
            if let child = try? BenchChild(
                name: "curl", executable: curl, arguments: args, logFile: directory + "/curl.status"),
                child.wait(timeout: 15) != nil
            {
                status = Int(child.logTail(1).trimmingCharacters(in: .whitespacesAndNewlines)) ?? 0
            }
            let text = (try? String(contentsOfFile: output, encoding: .utf8)) ?? ""
            try? FileManager.default.removeItem(atPath: output)
            shared.withLock {
                $0.requests += 1
                if !(200..<300).contains(status) { $0.errorsByStatus[String(format: "%03d", status), default: 0] += 1 }
            }
            return (status, text)
        }

        func json(_ text: String) -> [String: Any] {
            (try? JSONSerialization.jsonObject(with: Data(text.utf8)) as? [String: Any]) ?? [:]
        }

        while !stop.requested {
            let now = clock.now()
            if now >= until { break }
            if api.due(now) {
                round += 1
                // A user of the app signs in: the backend mints its token, the app registers its device.
                let user = "soak-\(runTag)-u\(round)"
                let minted = request(
                    "POST", "/v1/user-tokens", bearer: key,
                    body: #"{"userId":"\#(user)","appName":"\#(E2EBench.app.rawValue)","ttlSeconds":3600}"#)
                if minted.status == 201, let token = json(minted.body)["token"] as? String {
                    let device =
                        round % 2 == 0
                        ? #"{"platform":"ios","token":"\#(E2EBench.iosToken(round, prefix: "e").rawValue)","#
                            + #""environment":"production"}"#
                        : #"{"platform":"android","token":"soak\#(round):APA91b"#
                            + String(repeating: "y", count: 130) + #""}"#
                    if (200..<300).contains(request("PUT", "/v1/devices", bearer: token, body: device).status) {
                        users.append(user)
                    }
                }
                // The backend sends to the last few users, and reads how its previous job went.
                if !users.isEmpty {
                    let id = "soak-\(runTag)-api\(round)"
                    let names = users.suffix(5).map { "\"\($0)\"" }.joined(separator: ",")
                    let posted = request(
                        "POST", "/v1/jobs", bearer: key,
                        body: #"{"app":"\#(E2EBench.app.rawValue)","recipients":[\#(names)],"#
                            + #""notification":{"title":"Soak","body":"API job \#(round)"}}"#,
                        headers: ["Idempotency-Key: \(id)"])
                    if posted.status == 202 { shared.withLock { $0.apiJobs.append(id) } }
                    if let previous = lastJob { _ = request("GET", "/v1/jobs/\(previous)", bearer: key) }
                    if posted.status == 202 { lastJob = id }
                }
            }
            if hints.due(now) {
                hintCall += 1
                let ids = (0..<3).map { "001soak\(runTag)\(hintCall)x\($0)" }
                do {
                    _ = try hintStore.add(
                        org: E2EBench.org, app: E2EBench.app, users: Self.hintUsers, type: "SOAK", recordIds: ids,
                        now: now)
                    shared.withLock { $0.hints += Self.hintUsers.count }
                } catch {
                    shared.withLock { $0.hintErrors += 1 }
                }
            }
            // A schedule whose run would come after the run's end is not created: the run waits for every run.
            if schedules.due(now), now.addingTimeInterval(Self.scheduleLead + 10) < until {
                scheduleCount += 1
                let id = "soak-\(runTag)-s\(scheduleCount)"
                let due = Date(timeIntervalSince1970: (now.timeIntervalSince1970 + Self.scheduleLead).rounded(.down))
                let recipients = Self.scheduleUsers.map { "\"\($0)\"" }.joined(separator: ",")
                let created = request(
                    "POST", "/v1/schedules", bearer: key,
                    body: #"{"id":"\#(id)","start":"\#(RFC3339.format(due, .seconds))","frequency":"daily","#
                        + #""timeZone":"UTC","job":{"app":"\#(E2EBench.app.rawValue)","recipients":[\#(recipients)],"#
                        + #""notification":{"title":"Soak","body":"Scheduled run"}}}"#)
                if created.status == 201 {
                    following.append((id, due))
                    shared.withLock {
                        $0.scheduleRuns.append(Schedule.runJobID(schedule: id, run: due).rawValue)
                    }
                }
            }
            // Schedules past their run: once it was promoted, the schedule goes (it would run again tomorrow).
            if let next = following.first, now >= next.due.addingTimeInterval(2), follow.due(now) {
                let state = request("GET", "/v1/schedules/\(next.id)", bearer: key)
                if state.status == 200, json(state.body)["lastRunJob"] is String {
                    _ = request("DELETE", "/v1/schedules/\(next.id)", bearer: key)
                    following.removeFirst()
                } else if state.status == 404 {
                    following.removeFirst()
                }
            }
            usleep(50_000)
        }
    }
}
