import ArgumentParser
import Foundation
import Logging
import VolleyBench
import VolleyCore
import VolleyService

/// `volley-bench`: Volley's load tools, kept out of the `volley` binary that production runs. It starts the `volley`
/// and `volley-mock` executables built next to it.
@main
struct VolleyBenchCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "volley-bench",
        abstract: "Benchmarks: the transport against h2load, the pipeline end to end, the HTTP API.",
        version: VolleyVersion.current,
        subcommands: [
            BenchTransport.self, BenchServe.self, BenchE2E.self, BenchAPI.self, BenchChaos.self, BenchHints.self,
            BenchSchedule.self, BenchThrottle.self, BenchInteractions.self, BenchSegments.self, BenchSoak.self,
            BenchSteer.self, BenchConsole.self,
        ])
}

/// `volley-bench transport`: HTTP/2 client throughput and latency against the mock, optionally beside h2load.
struct BenchTransport: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "transport",
        abstract: "N POSTs over C connections with M streams in flight each; prints req/s, p50/p99, client CPU.")

    @Option(help: "Requests to send (after a warm-up).") var requests = 100_000
    @Option(help: "Connections.") var connections = 1
    @Option(help: "Requests in flight per connection.") var concurrency = 100
    @Option(name: .customLong("body-bytes"), help: "JSON body size.") var bodyBytes = 300
    @Option(name: .customLong("mock-latency-ms"), help: "Latency the started server adds per response.")
    var mockLatencyMs = 0
    @Option(name: .customLong("mock-max-streams"), help: "SETTINGS_MAX_CONCURRENT_STREAMS of the started server.")
    var mockMaxStreams = 1000
    @Flag(name: .customLong("vs-h2load"), help: "Also run h2load with the same workload against the same server.")
    var vsH2load = false
    @Flag(
        name: .customLong("vs-provider"),
        help:
            ArgumentHelp(
                "Also send the same load through the APNs provider (prepare once, request per device) against the same "
                    + "server.")
    ) var vsProvider = false
    @Flag(help: "Print one JSON object.") var json = false
    @Option(help: "https://host:port of a running server (default: start one).") var target: String?
    @Option(name: .customLong("ca-file"), help: "CA file for --target.") var caFile: String?
    @Option(help: "endpoints.json with APNs credentials for --target.") var endpoints: String?
    @Option(help: "Server to start: mock (volley-mock) or builtin (volley-bench serve).") var server = "mock"
    @Option(help: "Measured rounds; each runs every contender back to back. Figures are medians over rounds.")
    var rounds = 1
    @Option(name: .customLong("cpu-wake-latency-us"), help: ArgumentHelp(cpuWakeLatencyHelp)) var cpuWakeLatencyUs: Int?

    func run() async throws {
        let exe = URL(fileURLWithPath: CommandLine.arguments[0]).resolvingSymlinksInPath().deletingLastPathComponent()
            .path
        var o = TransportBenchOptions(executableDirectory: exe)
        o.requests = requests
        o.connections = connections
        o.concurrency = concurrency
        o.bodyBytes = bodyBytes
        o.mockLatencyMs = mockLatencyMs
        o.mockMaxStreams = mockMaxStreams
        o.vsH2load = vsH2load
        o.vsProvider = vsProvider
        o.rounds = rounds
        o.target = target
        o.caFile = caFile
        o.endpointsFile = endpoints
        o.server = server
        let logger = Logger(label: "volley.bench")
        let wakeLatency = try holdCPUWakeLatency(cpuWakeLatencyUs)
        defer { wakeLatency?.release() }
        var r = try await TransportBench.run(o, logger: logger)
        r.cpu_wake_latency_us = wakeLatency?.microseconds
        if json {
            let enc = JSONEncoder()
            enc.outputFormatting = [.sortedKeys]
            print(String(decoding: try enc.encode(r), as: UTF8.self))
            return
        }
        if r.rounds.count > 1 {
            for (i, x) in r.rounds.enumerated() {
                var line = "round \(i + 1): volley \(Int(x.rate)) req/s \(String(format: "%.2f", x.cpu_us)) µs/req"
                if let p = x.provider_rate, let pr = x.provider_ratio, let same = x.same_requests_rate {
                    line += " | same requests \(Int(same)) | provider \(Int(p)) (\(String(format: "%.3f", pr)))"
                }
                if let h = x.h2load_rate, let hr = x.ratio, let hc = x.h2load_cpu_us {
                    line += " | h2load \(Int(h)) \(String(format: "%.2f", hc)) µs/req (\(String(format: "%.3f", hr)))"
                }
                print(line)
            }
            print("medians over \(r.rounds.count) rounds:")
        }
        print(
            "volley  : \(Int(r.rate)) req/s  p50 \(r.p50_ms) ms  p99 \(r.p99_ms) ms  cpu "
                + "\(String(format: "%.2f", r.cpu_s)) s (\(String(format: "%.2f", r.cpu_us)) µs/req)  failures "
                + "\(r.failures)  peak streams/conn \(r.peak_streams_per_connection)"
        )
        print(TransportBench.latencyLine(r, mockLatencyMs: target == nil ? mockLatencyMs : nil))
        if let p = r.provider_rate, let ratio = r.provider_ratio, let pc = r.provider_cpu_us,
            let same = r.same_requests_rate, let sc = r.same_requests_cpu_us
        {
            print(
                "same req: \(Int(same)) req/s  cpu \(String(format: "%.2f", sc)) µs/req  (the bare transport "
                    + "sending the provider's requests)"
            )
            print(
                "provider: \(Int(p)) sends/s  cpu \(String(format: "%.2f", pc)) µs/send  ratio "
                    + "\(String(format: "%.3f", ratio)) (provider / same requests); "
                    + "\(String(format: "%.3f", p / r.rate)) vs the one-path transport"
            )
        }
        if let h = r.h2load_rate, let ratio = r.ratio, let hc = r.h2load_cpu_us {
            print("h2load  : \(Int(h)) req/s  cpu \(String(format: "%.2f", hc)) µs/req")
            print("ratio   : \(String(format: "%.3f", ratio))  (volley / h2load)")
        }
        print(cpuWakeLatencyLine(wakeLatency))
    }
}

let cpuWakeLatencyHelp =
    "Hold a Linux PM QoS request (/dev/cpu_dma_latency, root) that idle CPUs wake within this many µs for "
    + "the whole run, every contender included; 0 = idle CPUs poll. Default: the machine as it is. See docs/tuning.md."

/// Holds the bench's `--cpu-wake-latency-us`; a request the host refuses stops the bench (its figures would be
/// mislabelled).
func holdCPUWakeLatency(_ microseconds: Int?) throws -> CPUWakeLatencyRequest? {
    do { return try CPUWakeLatencyRequest.hold(microseconds) } catch {
        throw ValidationError("--cpu-wake-latency-us: \(error.description)")
    }
}

/// The summary line saying which idle states the run was measured with.
func cpuWakeLatencyLine(_ r: CPUWakeLatencyRequest?) -> String {
    guard let r else { return "idle CPUs: the machine's own idle states (no --cpu-wake-latency-us)" }
    return "idle CPUs: held to wake within \(r.microseconds) µs for this run (PM QoS, \(r.path))"
}

/// `volley-bench serve`: a minimal TLS HTTP/2 server for transport benchmarks; writes <state-dir>/endpoints.json.
struct BenchServe: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "serve", abstract: "Minimal HTTP/2 server for benchmarks.")
    @Option var port = 0
    @Option(name: .customLong("state-dir")) var stateDir: String
    @Option(name: .customLong("latency-ms")) var latencyMs = 0
    @Option(name: .customLong("max-streams")) var maxStreams: UInt32 = 1000

    func run() async throws {
        let server = try BenchServer.start(
            stateDir: stateDir, port: port, latencyMs: latencyMs, maxStreams: maxStreams,
            logger: Logger(label: "volley.bench.serve"))
        while true { try await Task.sleep(for: .seconds(3600)) }
        _ = server
    }
}

/// `volley-bench api`: wrk against `volley api` on its own redis-server.
struct BenchAPI: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "api",
        abstract: "wrk at C connections: GET /livez, POST /v1/jobs and the custom notification action; req/s and p99.")

    @Option(help: "wrk connections.") var connections = 64
    @Option(help: "wrk threads.") var threads = 2
    @Option(help: "Seconds per workload.") var duration = 10
    @Option(help: "Rounds; the best round of each workload is reported.") var rounds = 1
    @Flag(help: "Print one JSON object.") var json = false

    func run() throws {
        var o = APIBenchOptions()
        o.connections = connections
        o.threads = threads
        o.durationSeconds = duration
        o.rounds = rounds
        let r = try APIBench.run(o, logger: Logger(label: "volley.bench"))
        try printResult(r, json: json) { APIBench.table(r) }
    }
}

/// `volley-bench console`: the console's Campaigns page with 10,000 campaigns, and the cost of a live refresh.
struct BenchConsole: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "console",
        abstract: "The console's Campaigns page over N campaigns (ms, bytes) and the API's CPU per live refresh.")

    @Option(help: "Campaigns in the org.") var jobs = 10_000
    @Option(name: .customLong("page-loads"), help: "Campaigns page loads measured.") var pageLoads = 20
    @Option(help: "Seconds of wrk on the live refresh.") var duration = 5
    @Flag(help: "Print one JSON object.") var json = false

    func run() throws {
        var o = ConsoleBenchOptions()
        o.jobs = max(1, jobs)
        o.pageLoads = max(1, pageLoads)
        o.durationSeconds = max(1, duration)
        let r = try ConsoleBench.run(o, logger: Logger(label: "volley.bench"))
        try printResult(r, json: json) { ConsoleBench.table(r) }
    }
}

/// `volley-bench interactions`: wrk posting engagement events at `volley api` on its own redis-server.
struct BenchInteractions: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "interactions",
        abstract: "wrk posting batches of engagement events (POST /v1/interactions): events/s and API CPU per event.")

    @Option(help: "wrk connections.") var connections = 16
    @Option(help: "wrk threads.") var threads = 2
    @Option(help: "Seconds of load.") var duration = 10
    @Option(name: .customLong("events-per-request"), help: "Events per request (1-100).") var eventsPerRequest = 100
    @Flag(help: "Print one JSON object.") var json = false

    func run() throws {
        var o = InteractionsBenchOptions()
        o.connections = connections
        o.threads = threads
        o.durationSeconds = duration
        o.eventsPerRequest = min(100, max(1, eventsPerRequest))
        let r = try InteractionsBench.run(o, logger: Logger(label: "volley.bench"))
        try printResult(r, json: json) { InteractionsBench.table(r) }
    }
}

/// `volley-bench hints`: sync hints coalesced on a manual clock: a burst for one user, then many users.
struct BenchHints: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "hints",
        abstract: "Sync hints: pushes per device for a burst of changes, id coverage, CPU and Redis memory per change.")

    @Option(help: "Record changes for one user within the window.") var changes = 10_000
    @Option(help: "Seconds the changes are spread over (clock time, compressed).") var windowSeconds = 60.0
    @Option(help: "Ids per call.") var idsPerCall = 100
    @Option(help: "Users of the many-users part.") var users = 100_000
    @Option(help: "Changes per user in the many-users part (within a minute).") var rounds = 3
    @Option(help: "syncHints.minIntervalSeconds.") var minIntervalSeconds = SyncHintConfiguration
        .defaultMinIntervalSeconds
    @Option(help: "syncHints.maxPerHour.") var maxPerHour = SyncHintConfiguration.defaultMaxPerHour
    @Option(help: "syncHints.maxRecordIds.") var maxRecordIds = SyncHintConfiguration.defaultMaxRecordIds
    @Flag(help: "Print one JSON object.") var json = false

    func run() throws {
        var o = HintsBenchOptions()
        o.changes = changes
        o.windowSeconds = windowSeconds
        o.idsPerCall = idsPerCall
        o.users = users
        o.rounds = rounds
        o.configuration = SyncHintConfiguration(
            minIntervalSeconds: minIntervalSeconds, maxPerHour: maxPerHour, maxRecordIds: maxRecordIds)
        var logger = Logger(label: "volley.bench")
        logger.logLevel = .warning
        let r = try HintsBench.run(o, logger: logger)
        try printResult(r, json: json) { HintsBench.table(r) }
    }
}

/// Prints a bench's result: one JSON object (sorted keys, the `--json` contract) or its table for people.
func printResult<R: Encodable>(_ r: R, json: Bool, table: () -> String) throws {
    if json {
        let enc = JSONEncoder()
        enc.outputFormatting = [.sortedKeys]
        print(String(decoding: try enc.encode(r), as: UTF8.self))
    } else {
        print(table())
    }
}
