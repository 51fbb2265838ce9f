import ArgumentParser
import Foundation
import Logging
import VolleyBench
import VolleyCore
import VolleyService

/// `volley-bench chaos`: one campaign through one fault; prints what was delivered, lost and duplicated, and
/// whether the quota is exact. docs/guarantees.md states what Volley promises under each fault.
struct BenchChaos: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "chaos",
        abstract: "A campaign through a fault: accepted, failed by reason, duplicates at the provider, quota.",
        discussion: """
            Starts redis-server (or a Redis Cluster with replicas for cluster-primary-kill), volley-mock with an \
            accept journal and --workers `volley worker` processes; registers --devices devices; submits one \
            campaign; when the mock has accepted --trigger of it, injects the fault for --seconds and ends it; waits \
            for the report. Faults: \(ChaosBench.Fault.allCases.map(\.rawValue).joined(separator: ", ")). \
            See docs/guarantees.md.
            """)

    @Option(help: "The fault: \(ChaosBench.Fault.allCases.map(\.rawValue).joined(separator: "|")).") var fault: String
    @Option(help: "How long the fault lasts (worker-kill: until the replacement starts).") var seconds = 3.0
    @Option(help: "Devices in the campaign.") var devices = 20_000
    @Option(help: "Worker processes.") var workers = 2
    @Option(help: "Start the fault when the mock has accepted this share of the devices (0…1).") var trigger = 0.25
    @Option(help: "Shards the campaign is split into (so every worker sends).") var shards = 4
    @Option(name: .customLong("in-flight"), help: "worker.inFlight.") var inFlight = 4000
    @Option(name: .customLong("record-batch-size"), help: "worker.recordBatchSize.") var recordBatchSize = 512
    @Option(
        name: .customLong("unanswered-sends"),
        help: "worker.unansweredSends: resend (the default) or fail, for sends written and unanswered.")
    var unansweredSends: String?
    @Option(
        name: .customLong("reclaim-idle-ms"),
        help: ArgumentHelp(
            "worker.reclaimIdleMs (a killed worker's jobs wait this long); default 5000 for worker-kill, else "
                + "the product's default."))
    var reclaimIdleMs: Int?
    @Option(
        name: .customLong("storm-streams"),
        help: "provider-goaway / provider-reset: requests per connection before its GOAWAY or reset.")
    var stormStreams = 50
    @Option(name: .customLong("cluster-node-timeout-ms"), help: "cluster-primary-kill: cluster-node-timeout.")
    var clusterNodeTimeoutMs = 2000
    @Option(help: "Give up after this many seconds.") var timeout = 600.0
    @Option(name: .customLong("work-dir"), help: "Folder for logs, config, Redis and the journal (default: temp).")
    var workDir: String?
    @Flag(help: "Keep the work folder (logs, config, the mock's accept journal).") var keep = false
    @Flag(help: "Print one JSON object.") var json = false

    func validate() throws {
        if ChaosBench.Fault(rawValue: fault) == nil {
            throw ValidationError(
                "--fault must be one of \(ChaosBench.Fault.allCases.map(\.rawValue).joined(separator: ", "))")
        }
        if !(seconds >= 0 && seconds <= 3600) { throw ValidationError("--seconds must be 0…3600") }
        if devices < 1 { throw ValidationError("--devices must be at least 1") }
        if workers < 1 || workers > 64 { throw ValidationError("--workers must be 1…64") }
        if !(trigger > 0 && trigger < 1) { throw ValidationError("--trigger must be between 0 and 1") }
        if shards < 1 { throw ValidationError("--shards must be at least 1") }
        if stormStreams < 1 { throw ValidationError("--storm-streams must be at least 1") }
        if let u = unansweredSends, UnansweredSends(rawValue: u) == nil {
            throw ValidationError("--unanswered-sends must be resend or fail")
        }
    }

    func run() async throws {
        var ls = LogSettings()
        ls.level = "warning"
        LoggingBootstrap.bootstrap(ls)
        var o = ChaosBench.Options()
        o.fault = ChaosBench.Fault(rawValue: fault) ?? .providerKill
        o.seconds = seconds
        o.devices = devices
        o.workers = workers
        o.triggerShare = trigger
        o.shards = shards
        o.inFlight = inFlight
        o.recordBatchSize = recordBatchSize
        o.unansweredSends = unansweredSends
        o.reclaimIdleMs = reclaimIdleMs
        o.stormStreams = stormStreams
        o.clusterNodeTimeoutMs = clusterNodeTimeoutMs
        o.timeoutSeconds = timeout
        o.workDirectory = workDir
        o.keep = keep
        let opts = o
        let command = "volley-bench " + CommandLine.arguments.dropFirst().joined(separator: " ")
        let r = try await runBlocking {
            try ChaosBench(options: opts, logger: Logger(label: "volley.bench.chaos")).run(command: command)
        }
        try printResult(r, json: json) { ChaosBench.table(r) }
    }
}
