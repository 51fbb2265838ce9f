import ArgumentParser
import Foundation
import Logging
import VolleyBench
import VolleyCore
import VolleyService

/// `volley-bench e2e`: the pipeline end to end (XADD → XACK) against volley-mock, with `--compare` (bare transport,
/// h2load, aioapns on the same mock) and `--sweep` (connections × latency × streams; 1/2/4 workers).
struct BenchE2E: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "e2e",
        abstract: "End-to-end load: registry → jobs → worker processes → mock, XADD to XACK.",
        discussion: """
            Starts redis-server and volley-mock (unless --redis / --mock-endpoints), loads --devices devices, runs \
            --workers `volley worker` processes, measures devices/s, enqueue → accepted latencies, CPU per \
            notification, peak RSS per worker and Redis commands/s. Build with -c release before measuring.
            """)

    @Option(help: "Devices in the registry (the campaign).") var devices = 100_000
    @Option(name: .customLong("ios-share"), help: "Share of iOS devices (0…1).") var iosShare = 0.6
    @Option(name: .customLong("devices-per-user"), help: "Devices per user (campaign jobs name ≤ 500 users each).")
    var devicesPerUser = 200
    @Option(help: "group: one campaign job naming a group of every user; users: jobs of ≤ 500 user ids.")
    var campaign = "group"
    @Option(name: .customLong("shard-size"), help: "worker.shardSize.") var shardSize = 50_000
    @Option(name: .customLong("stream-shards"), help: "worker.streamShards: job streams the campaign spreads over.")
    var streamShards = 1
    @Option(help: "Worker processes.") var workers = 1
    @Option(help: "HTTP/2 connections per provider per worker (apps[].apns/fcm.connections).") var connections = 2
    @Option(name: .customLong("max-streams"), help: "Client cap on streams per connection (apps[].*.maxStreams).")
    var maxStreams = 1000
    @Option(name: .customLong("in-flight"), help: "worker.inFlight.") var inFlight = 4000
    @Option(name: .customLong("batch-size"), help: "worker.batchSize (XREADGROUP COUNT).") var batchSize = 16
    @Option(name: .customLong("record-batch-size"), help: "worker.recordBatchSize.") var recordBatchSize = 512
    @Option(name: .customLong("mock-latency-ms"), help: "Latency the mock adds to every answer.") var mockLatencyMs =
        0.0
    @Option(name: .customLong("mock-max-streams"), help: "SETTINGS_MAX_CONCURRENT_STREAMS the mock advertises.")
    var mockMaxStreams = 1000
    @Option(help: "Idle targeted jobs sent one at a time (enqueue → first push).") var probes = 100
    @Option(name: .customLong("targeted"), help: "Targeted one-user jobs interleaved with the campaign.") var targeted =
        20
    @Option(name: .customLong("poll-ms"), help: "Mock stats poll interval during the load (latency resolution).")
    var pollMs = 10
    @Option(name: .customLong("body-bytes"), help: "Approximate APNs payload size.") var bodyBytes = 300
    @Option(help: "Give up after this many seconds.") var timeout = 900.0
    @Option(help: "Use this Redis (redis://… or unix:///…) instead of starting one. It must be empty.") var redis:
        String?
    @Option(
        name: .customLong("mock-endpoints"), help: "endpoints.json of a running volley-mock instead of starting one.")
    var mockEndpoints: String?
    @Option(name: .customLong("work-dir"), help: "Folder for logs, config and Redis (default: a temp folder).")
    var workDir: String?
    @Flag(help: "Keep the work folder (logs, config).") var keep = false
    @Flag(help: "Also measure the bare transport, h2load and aioapns on the same mock.") var compare = false
    @Option(
        name: .customLong("redis-cluster"),
        help: "Run the same campaign against one Redis and against a Redis Cluster of this many primaries it starts.")
    var redisCluster: Int?
    @Option(
        name: .customLong("compare-requests"),
        help: """
            Requests for the transport and h2load runs of --compare (default: --devices, so the transport sends as \
            many notifications as the campaign and the two rates cover the same amount of work).
            """)
    var compareRequests: Int?
    @Option(name: .customLong("peer-requests"), help: "Requests for the aioapns run of --compare.") var peerRequests =
        20_000
    @Option(name: .customLong("compare-concurrency"), help: "Streams in flight per connection in --compare.")
    var compareConcurrency = 100
    @Option(name: .customLong("compare-connections"), help: "Connections in --compare (default: --connections).")
    var compareConnections: Int?
    @Option(help: "Virtualenv for aioapns (default: .build/aioapns-venv).") var venv: String?
    @Flag(help: "Run the sweep (transport grid + 1/2/4 workers) and write CSV/JSON/SVG.") var sweep = false
    @Option(name: .customLong("sweep-workers"), help: "Worker counts for --sweep, comma-separated.") var sweepWorkers =
        "1,2,4"
    @Flag(name: .customLong("sweep-skip-transport"), help: "--sweep: only the worker scaling.") var sweepSkipTransport =
        false
    @Flag(name: .customLong("sweep-skip-workers"), help: "--sweep: only the transport grid.") var sweepSkipWorkers =
        false
    @Option(
        name: .customLong("charts"),
        help: ArgumentHelp(
            "Output folder for --sweep (CSV, JSON, SVG) and the rate-over-time chart (default: a new temporary "
                + "folder, so a run never writes into the checkout)."))
    var charts: String?
    @Flag(help: "Print one JSON object.") var json = false
    @Option(name: .customLong("cpu-wake-latency-us"), help: ArgumentHelp(cpuWakeLatencyHelp)) var cpuWakeLatencyUs: Int?
    @Option(
        name: .customLong("worker-env"),
        help: "KEY=VALUE in the worker processes' environment only (repeatable), e.g. LD_PRELOAD=….")
    var workerEnv: [String] = []
    @Flag(
        name: .customLong("metrics-compare"),
        help: "Run the end-to-end load with worker metrics on and off, alternating, and print the ratio.")
    var metricsCompare = false
    @Option(name: .customLong("metrics-rounds"), help: "With --metrics-compare: on/off pairs to run.")
    var metricsRounds = 2
    @Option(
        help: ArgumentHelp(
            "After the load phase, run the plain campaign against a per-person one, alternating: salesforce "
                + "(Notification Builder payload), encrypted (the same with each device's key), personalized (a "
                + "template per user), capped (a frequency cap no user reaches, against the same campaign "
                + "bypassing it), tracked (each push with its message id, against the same campaign with "
                + "\"tracking\": false). The JSON gains plain_rate, payload_rate, payload_vs_plain and each campaign's "
                + "worker CPU per device."))
    var payload: String?
    @Option(name: .customLong("payload-rounds"), help: "With --payload: plain/per-person pairs to run.")
    var payloadRounds = 2
    @Option(
        name: .customLong("payload-keys"),
        help: "With --payload encrypted: distinct device keys, cycled over the devices (default: one per device).")
    var payloadKeys: Int?

    func e2eOptions() -> E2EBench.Options {
        var o = E2EBench.Options()
        o.payload = payload.flatMap(E2EBench.PayloadKind.init(rawValue:))
        o.payloadRounds = max(1, payloadRounds)
        o.payloadKeys = payloadKeys
        o.devices = devices
        o.iosShare = iosShare
        o.devicesPerUser = devicesPerUser
        o.workers = workers
        o.connections = connections
        o.maxStreams = maxStreams
        o.inFlight = inFlight
        o.batchSize = batchSize
        o.recordBatchSize = recordBatchSize
        o.mockLatencyMs = mockLatencyMs
        o.mockMaxStreams = mockMaxStreams
        o.probes = probes
        o.targetedUnderLoad = targeted
        o.pollMs = pollMs
        o.bodyBytes = bodyBytes
        o.timeoutSeconds = timeout
        o.redisURL = redis
        o.mockEndpoints = mockEndpoints
        o.workDirectory = workDir
        o.keep = keep
        o.campaignGroup = campaign != "users"
        o.shardSize = shardSize
        o.streamShards = streamShards
        o.workerEnvironment = E2EBench.Options.environment(workerEnv) ?? [:]
        return o
    }

    func validate() throws {
        if devices < 1 { throw ValidationError("--devices must be at least 1") }
        if !(0...1).contains(iosShare) { throw ValidationError("--ios-share must be between 0 and 1") }
        if workers < 1 || workers > 64 { throw ValidationError("--workers must be 1…64") }
        if connections < 1 || connections > 256 { throw ValidationError("--connections must be 1…256") }
        if devicesPerUser < 1 { throw ValidationError("--devices-per-user must be at least 1") }
        if probes < 1 { throw ValidationError("--probes must be at least 1") }
        if !(1...1024).contains(streamShards) { throw ValidationError("--stream-shards must be 1…1024") }
        if campaign != "group" && campaign != "users" { throw ValidationError("--campaign must be group or users") }
        if sweep && compare { throw ValidationError("run --sweep and --compare separately") }
        if metricsCompare && (sweep || compare) {
            throw ValidationError("run --metrics-compare apart from --sweep and --compare")
        }
        if metricsRounds < 1 { throw ValidationError("--metrics-rounds must be at least 1") }
        if let payload, E2EBench.PayloadKind(rawValue: payload) == nil {
            throw ValidationError(
                "--payload must be one of "
                    + E2EBench.PayloadKind.allCases.map(\.rawValue).joined(separator: ", ") + ", not '\(payload)'")
        }
        if payloadRounds < 1 { throw ValidationError("--payload-rounds must be at least 1") }
        if let payloadKeys, payloadKeys < 1 { throw ValidationError("--payload-keys must be at least 1") }
        if payload != nil && (sweep || metricsCompare) {
            throw ValidationError("run --payload apart from --sweep and --metrics-compare")
        }
        if sweep && Self.parseList(sweepWorkers) == nil { throw ValidationError("--sweep-workers must be like 1,2,4") }
        if E2EBench.Options.environment(workerEnv) == nil { throw ValidationError("--worker-env must be KEY=VALUE") }
        if let n = redisCluster {
            if n < 3 || n > 16 {
                throw ValidationError("--redis-cluster must be 3…16 (Redis Cluster needs 3 primaries)")
            }
            if redis != nil || compare || sweep || metricsCompare {
                throw ValidationError(
                    "--redis-cluster starts its own Redis: run it without --redis, --compare, --sweep")
            }
        }
    }

    static func parseList(_ s: String) -> [Int]? {
        let v = s.split(separator: ",").map { Int($0.trimmingCharacters(in: .whitespaces)) }
        return v.isEmpty || v.contains(nil) ? nil : v.compactMap { $0 }
    }

    var commandLine: String { "volley " + CommandLine.arguments.dropFirst().joined(separator: " ") }

    func run() async throws {
        var ls = LogSettings()
        ls.level = "warning"
        LoggingBootstrap.bootstrap(ls)
        let logger = Logger(label: "volley.bench")
        let command = commandLine
        // System-wide, so it covers the workers, the mock, Redis and every --compare contender alike.
        let wakeLatency = try holdCPUWakeLatency(cpuWakeLatencyUs)
        defer { wakeLatency?.release() }
        if sweep {
            var s = SweepBench.Options()
            s.e2e = e2eOptions()
            s.workers = Self.parseList(sweepWorkers) ?? [1, 2, 4]
            s.bodyBytes = bodyBytes
            s.outputDirectory = try chartsDirectory()
            s.skipTransport = sweepSkipTransport
            s.skipWorkers = sweepSkipWorkers
            let opts = s
            let r = try await runBlocking { try SweepBench(options: opts, logger: logger).run(command: command) }
            try printResult(r, json: json) {
                [
                    Self.sweepTable(r),
                    cpuWakeLatencyLine(wakeLatency),
                    "wrote \(s.outputDirectory)/sweep.csv, sweep.json and charts",
                ].joined(separator: "\n")
            }
            return
        }
        if let primaries = redisCluster {
            var c = E2EClusterBench.Options()
            c.e2e = e2eOptions()
            c.primaries = primaries
            let opts = c
            let r = try await runBlocking { try E2EClusterBench(options: opts, logger: logger).run(command: command) }
            try printResult(r, json: json) {
                [
                    E2EClusterBench.table(r),
                    cpuWakeLatencyLine(wakeLatency),
                ].joined(separator: "\n")
            }
            return
        }
        if metricsCompare {
            try await runMetricsCompare(logger: logger, command: command)
            print(cpuWakeLatencyLine(wakeLatency))
            return
        }
        let opts = e2eOptions()
        let compare = self.compare
        var c = E2ECompare.Options()
        c.requests = compareRequests ?? devices
        c.peerRequests = peerRequests
        c.connections = compareConnections ?? connections
        c.concurrency = compareConcurrency
        c.bodyBytes = bodyBytes
        c.venv = venv
        let copts = c
        let chartsDir = try chartsDirectory()
        let (r, cmp) = try await runBlocking { () throws -> (E2EBench.Result, E2ECompare.Result?) in
            let bench = E2EBench(options: opts, logger: logger)
            let stage = try bench.makeStage()
            defer { stage.stop() }
            let r = try bench.run(stage: stage, command: command)
            stage.stopWorkers()
            var cmp: E2ECompare.Result?
            if compare { cmp = try E2ECompare(options: copts, logger: logger).run(stage: stage) }
            do {
                let pts = r.rate_per_second.enumerated().map { (Double($0.offset + 1), $0.element) }
                try SVGLineChart(
                    title: "Accepted per second during the run (\(r.devices) devices, \(r.workers) worker(s))",
                    xLabel: "second", yLabel: "devices/s", series: [.init(label: "accepted/s", points: pts)]
                )
                .write(to: chartsDir + "/e2e-rate-over-time.svg")
                FileHandle.standardError.write(Data("wrote \(chartsDir)/e2e-rate-over-time.svg\n".utf8))
            } catch {
                FileHandle.standardError.write(Data("the rate chart was not written to \(chartsDir): \(error)\n".utf8))
            }
            return (r, cmp)
        }
        if json {
            print(Self.json(r, cmp, cpuWakeLatencyUs: wakeLatency?.microseconds))
        } else {
            print(E2EBench.table(r))
            if let cmp { print(Self.compareTable(r, cmp)) }
            print(cpuWakeLatencyLine(wakeLatency))
            print("command: \(command)")
        }
    }

    static func json(_ r: E2EBench.Result, _ c: E2ECompare.Result?, cpuWakeLatencyUs: Int? = nil) -> String {
        let enc = JSONEncoder()
        enc.outputFormatting = [.sortedKeys]
        var o = (try? JSONSerialization.jsonObject(with: enc.encode(r)) as? [String: Any]) ?? [:]
        // `--payload`'s figures sit at the top level, beside the rates they compare with.
        if let nested = o.removeValue(forKey: "payload") as? [String: Any] {
            for (k, v) in nested { o[k] = v }
        }
        // Absent when not held, like every unset key.
        if let cpuWakeLatencyUs { o["cpu_wake_latency_us"] = cpuWakeLatencyUs }
        if let c {
            let co = (try? JSONSerialization.jsonObject(with: enc.encode(c)) as? [String: Any]) ?? [:]
            for (k, v) in co { o[k] = v }
            if let t = c.transport_rate { o["e2e_vs_transport"] = r.e2e_rate / t }
            if let h = c.h2load_rate, let t = c.transport_rate { o["transport_vs_h2load"] = t / h }
            if let a = c.aioapns_cpu_us { o["e2e_cpu_vs_aioapns"] = r.e2e_cpu_us / a }
            if let a = c.aioapns_rate { o["e2e_vs_aioapns"] = r.e2e_rate / a }
        }
        let data = (try? JSONSerialization.data(withJSONObject: o, options: [.sortedKeys])) ?? Data("{}".utf8)
        return String(decoding: data, as: UTF8.self)
    }

    static func compareTable(_ r: E2EBench.Result, _ c: E2ECompare.Result) -> String {
        func f(_ v: Double?, _ d: Int = 1) -> String { v.map { String(format: "%.\(d)f", $0) } ?? "-" }
        func rate(_ v: Double?) -> String { v.map { String(format: "%10.0f/s", $0) } ?? "         -" }
        var lines = [
            "", "same mock, same body, same connections/concurrency:",
            "  what               rate           CPU µs/notification   ratio",
            "  end to end     \(rate(r.e2e_rate))   "
                + "\(f(r.e2e_cpu_us, 2).padding(toLength: 20, withPad: " ", startingAt: 0))  —",
            "  bare transport \(rate(c.transport_rate))   "
                + "\(f(c.transport_cpu_us, 2).padding(toLength: 20, withPad: " ", startingAt: 0))  e2e/transport "
                + "\(c.transport_rate.map { f(r.e2e_rate / $0, 2) } ?? "-")",
            "  h2load         \(rate(c.h2load_rate))   "
                + "\(f(c.h2load_cpu_us, 2).padding(toLength: 20, withPad: " ", startingAt: 0))  transport/h2load "
                + "\(zip2(c.transport_rate, c.h2load_rate).map { f($0 / $1, 2) } ?? "-")",
            "  aioapns        \(rate(c.aioapns_rate))   "
                + "\(f(c.aioapns_cpu_us, 2).padding(toLength: 20, withPad: " ", startingAt: 0))  e2e CPU/aioapns "
                + "CPU \(c.aioapns_cpu_us.map { "1/" + f($0 / r.e2e_cpu_us, 0) } ?? "-")",
        ]
        for n in c.notes { lines.append("  note: \(n)") }
        return lines.joined(separator: "\n")
    }

    static func zip2(_ a: Double?, _ b: Double?) -> (Double, Double)? {
        if let a, let b { return (a, b) }
        return nil
    }

    static func sweepTable(_ r: SweepBench.Result) -> String {
        func f(_ v: Double?, _ d: Int = 0) -> String { v.map { String(format: "%.\(d)f", $0) } ?? "-" }
        var lines = ["conn  streams  latency_ms        rate       bound  efficiency   p50_ms   p99_ms  cpu_us"]
        for p in r.transport {
            lines.append(
                String(
                    format: "%4d  %7d  %10d  %10@  %10@  %10@  %7@  %7@  %6@", p.connections, p.streams, p.latency_ms,
                    f(p.rate), f(p.bound), p.efficiency.map { String(format: "%.0f%%", $0 * 100) } ?? "-",
                    f(p.p50_ms, 2), f(p.p99_ms, 2), f(p.cpu_us, 2)))
        }
        if !r.workers.isEmpty {
            lines.append("")
            lines.append(
                "workers       rate  scaling  cpu_us  redis cmd/s  redis CPU  mock CPU  worker CPU (share of 2 cores)")
            for w in r.workers {
                lines.append(
                    String(
                        format: "%7d  %9@  %6.0f%%  %6.2f  %11@  %8.0f%%  %7.0f%%  %9.0f%%", w.workers, f(w.rate),
                        w.scaling_efficiency * 100, w.cpu_us, f(w.redis_commands_per_s),
                        w.redis_cpu_share * 100, w.mock_cpu_share * 100, w.worker_cpu_share * 100))
            }
        }
        return lines.joined(separator: "\n")
    }
}

extension BenchE2E {
    /// `--metrics-compare`: the same end-to-end run with `metrics.enabled` true and false, alternating (on, off,
    /// on, off, …) so drift in the machine's load falls on both sides; each run gets a fresh Redis and mock.
    func runMetricsCompare(logger: Logger, command: String) async throws {
        var runs: [(metrics: Bool, result: E2EBench.Result)] = []
        for round in 0..<metricsRounds {
            for on in [true, false] {
                var o = e2eOptions()
                o.metricsEnabled = on
                o.workDirectory = workDir.map { "\($0)/metrics-\(on ? "on" : "off")-\(round)" }
                FileHandle.standardError.write(
                    Data("metrics-compare: round \(round + 1) of \(metricsRounds), metrics \(on ? "on" : "off")\n".utf8)
                )
                let opts = o
                let r = try await runBlocking { () throws -> E2EBench.Result in
                    let bench = E2EBench(options: opts, logger: logger)
                    let stage = try bench.makeStage()
                    defer { stage.stop() }
                    return try bench.run(stage: stage, command: command)
                }
                runs.append((on, r))
            }
        }
        func mean(_ v: [Double]) -> Double { v.isEmpty ? 0 : v.reduce(0, +) / Double(v.count) }
        let onRate = mean(runs.filter(\.metrics).map(\.result.e2e_rate))
        let offRate = mean(runs.filter { !$0.metrics }.map(\.result.e2e_rate))
        let onCPU = mean(runs.filter(\.metrics).map(\.result.e2e_cpu_us))
        let offCPU = mean(runs.filter { !$0.metrics }.map(\.result.e2e_cpu_us))
        let ratio = offRate > 0 ? onRate / offRate : 0
        if json {
            let o: [String: Any] = [
                "metrics_on_rate": onRate, "metrics_off_rate": offRate, "metrics_rate_ratio": ratio,
                "metrics_on_cpu_us": onCPU, "metrics_off_cpu_us": offCPU,
                "runs": runs.map { ["metrics": $0.metrics, "e2e_rate": $0.result.e2e_rate] },
            ]
            let data = (try? JSONSerialization.data(withJSONObject: o, options: [.sortedKeys])) ?? Data()
            print(String(decoding: data, as: UTF8.self))
            return
        }
        print("metrics on/off, alternating (\(runs.count) runs of \(devices) devices):")
        for (i, run) in runs.enumerated() {
            print(
                String(
                    format: "  run %d  metrics %@  %10.0f devices/s  %6.2f CPU µs/notification", i + 1,
                    run.metrics ? "on " : "off", run.result.e2e_rate, run.result.e2e_cpu_us))
        }
        print(String(format: "  mean   metrics on  %10.0f devices/s  %6.2f CPU µs/notification", onRate, onCPU))
        print(String(format: "  mean   metrics off %10.0f devices/s  %6.2f CPU µs/notification", offRate, offCPU))
        print(
            String(
                format: "  ratio on/off: %.3f (rate), %.3f (CPU per notification)", ratio,
                offCPU > 0 ? onCPU / offCPU : 0))
        print("command: \(command)")
    }
}

extension BenchE2E {
    /// `--charts`, created if missing, else a new temporary folder: a benchmark never dirties the checkout unless
    /// asked to (`--charts docs/charts` refreshes the committed charts).
    func chartsDirectory() throws -> String {
        let dir =
            charts
            ?? FileManager.default.temporaryDirectory.appendingPathComponent(
                "volley-bench-charts-\(JobID.generated(prefix: "").rawValue.prefix(8))"
            ).path
        try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
        return dir
    }
}
