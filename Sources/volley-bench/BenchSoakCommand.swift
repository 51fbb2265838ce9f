import ArgumentParser
import Foundation
import Logging
import VolleyBench
import VolleyService

/// Set by SIGINT and SIGTERM. A handler, not an ignored signal: every process the run starts gets the default
/// action back at exec, where an ignored signal would stay ignored (a worker deaf to the SIGTERM that drains it).
private let interrupted = SoakStop()

/// `volley-bench soak`: campaigns, API traffic, sync hints, schedules and faults together for N minutes; prints what
/// was lost or shown twice, whether the quota is exact, and each process's RSS, open files and threads per minute.
/// docs/guarantees.md says what the soak promises.
struct BenchSoak: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "soak",
        abstract: "Everything at once for N minutes through faults: lost, shown twice, quota, RSS/fds/threads growth.",
        discussion: """
            Starts redis-server (or a Redis Cluster with replicas, --cluster), volley-mock with an accept journal, \
            --workers `volley worker` processes and `volley api`; registers --devices devices; then for --minutes \
            runs campaigns one after another, API traffic through curl (user tokens, device registrations, jobs, \
            job status), sync hints and recurring schedules, and injects a fault every --fault-every seconds \
            (provider-kill, provider-goaway, worker-kill, and cluster-primary-kill with --cluster). Samples every \
            process each minute. Stops everything it started, also on failure or SIGINT. See docs/guarantees.md.
            """)

    @Option(help: "Minutes of load (the run then waits for the last jobs).") var minutes = 60
    @Option(help: "Devices of every campaign.") var devices = 5_000
    @Option(help: "Worker processes.") var workers = 2
    @Flag(help: "A Redis Cluster (3 primaries, one replica each) instead of one redis-server; adds the failover.")
    var cluster = false
    @Option(name: .customLong("fault-every"), help: "Seconds between faults (0: none).") var faultEvery = 120.0
    @Option(name: .customLong("campaign-every"), help: "A campaign starts at most every this many seconds.")
    var campaignEvery = 15.0
    @Option(help: "After the run, wait at most this many seconds for the last jobs.") var timeout = 600.0
    @Option(name: .customLong("work-dir"), help: "Folder for logs, config, Redis and the journal (default: temp).")
    var workDir: String?
    @Flag(help: "Keep the work folder (logs, config, the mock's accept journal).") var keep = false
    @Flag(help: "Print one JSON object.") var json = false

    func validate() throws {
        if minutes < 1 || minutes > 1440 { throw ValidationError("--minutes must be 1…1440") }
        if devices < 1 { throw ValidationError("--devices must be at least 1") }
        if workers < 1 || workers > 64 { throw ValidationError("--workers must be 1…64") }
        // The longest fault (the GOAWAY storm) lasts 10 s: a fault ends before the next begins.
        if faultEvery != 0 && faultEvery < 15 { throw ValidationError("--fault-every must be 0 or at least 15") }
        if !(campaignEvery > 0) { throw ValidationError("--campaign-every must be above 0") }
        if !(timeout > 0) { throw ValidationError("--timeout must be above 0") }
    }

    func run() async throws {
        var ls = LogSettings()
        ls.level = "warning"
        LoggingBootstrap.bootstrap(ls)
        var o = SoakBench.Options()
        o.minutes = minutes
        o.devices = devices
        o.workers = workers
        o.cluster = cluster
        o.faultEvery = faultEvery
        o.campaignEvery = campaignEvery
        o.timeoutSeconds = timeout
        o.workDirectory = workDir
        o.keep = keep
        // SIGINT and SIGTERM end the run between two steps, so that it stops every process it started.
        o.stop = interrupted
        signal(SIGINT) { _ in interrupted.request() }
        signal(SIGTERM) { _ in interrupted.request() }
        let opts = o
        let command = "volley-bench " + CommandLine.arguments.dropFirst().joined(separator: " ")
        let r = try await runBlocking {
            try SoakBench(options: opts, logger: Logger(label: "volley.bench.soak")).run(command: command)
        }
        try printResult(r, json: json) { SoakBench.table(r) }
    }
}
