import ArgumentParser
import Foundation
import Logging
import VolleyBench

/// `volley-bench schedule`: scheduled jobs falling due beside N waiting ones.
struct BenchSchedule: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "schedule",
        abstract: "Scheduled jobs: due → at the provider (p50/p99) with N jobs waiting, Redis bytes per waiting job.",
        discussion: """
            Starts redis-server, volley-mock and --workers `volley worker` processes. Jobs with a sendAt spread over \
            --due-seconds are added as a producer adds them, first with nothing else waiting, then beside --pending \
            waiting jobs loaded into the schedule. Build with -c release before measuring.
            """)

    @Option(help: "Jobs waiting in the schedule during the second phase.") var pending = 1_000_000
    @Option(name: .customLong("due-jobs"), help: "One-device jobs falling due in each phase.") var dueJobs = 10_000
    @Option(name: .customLong("due-seconds"), help: "Seconds their due times are spread over.") var dueSeconds = 20.0
    @Option(name: .customLong("lead-seconds"), help: "Seconds between adding them and the first one's time.")
    var leadSeconds = 5.0
    @Option(help: "Worker processes.") var workers = 2
    @Flag(help: "Keep the work folder (logs, config).") var keep = false
    @Flag(help: "Print one JSON object.") var json = false

    func run() throws {
        var o = ScheduleBenchOptions()
        o.pending = pending
        o.dueJobs = dueJobs
        o.dueSeconds = dueSeconds
        o.leadSeconds = leadSeconds
        o.workers = workers
        o.keep = keep
        var logger = Logger(label: "volley.bench")
        logger.logLevel = .warning
        let r = try ScheduleBench.run(
            o, command: CommandLine.arguments.joined(separator: " "), logger: logger)
        try printResult(r, json: json) { ScheduleBench.table(r) }
    }
}

/// `volley-bench throttle`: throttled campaigns, pushes per minute against the job's rate.
struct BenchThrottle: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "throttle",
        abstract: "Throttled campaigns on a fleet: pushes the mock accepted in each minute against throttlePerMinute.",
        discussion: """
            Per rate: starts redis-server, volley-mock and --workers `volley worker` processes, registers the rate × \
            --minutes devices (plus ten seconds' worth), adds one group job with throttlePerMinute and polls the \
            mock's accepted count until every device is accepted. Build with -c release before measuring.
            """)

    @Option(help: "Comma-separated throttlePerMinute values.") var rates = "60,6000,60000,600000"
    @Option(help: "Whole minutes measured per rate.") var minutes = 2
    @Option(help: "Worker processes.") var workers = 4
    @Option(name: .customLong("poll-ms"), help: "Mock poll interval (the window counts' resolution).") var pollMs = 50
    @Flag(help: "Keep the work folders (logs, config).") var keep = false
    @Flag(help: "Print one JSON object.") var json = false

    func validate() throws {
        let parsed = rates.split(separator: ",").map { Int($0.trimmingCharacters(in: .whitespaces)) }
        guard !parsed.isEmpty, parsed.allSatisfy({ ($0 ?? 0) >= 1 && ($0 ?? 0) <= 6_000_000 }) else {
            throw ValidationError("--rates: comma-separated whole numbers from 1 to 6,000,000")
        }
        guard minutes >= 1 else { throw ValidationError("--minutes: at least 1") }
    }

    func run() throws {
        var o = ThrottleBenchOptions()
        o.rates = rates.split(separator: ",").compactMap { Int($0.trimmingCharacters(in: .whitespaces)) }
        o.minutes = minutes
        o.workers = workers
        o.pollMs = max(5, pollMs)
        o.keep = keep
        var logger = Logger(label: "volley.bench")
        logger.logLevel = .warning
        let r = try ThrottleBench.run(o, command: CommandLine.arguments.joined(separator: " "), logger: logger)
        try printResult(r, json: json) { ThrottleBench.table(r) }
    }
}

struct BenchSteer: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "steer",
        abstract: "A throttled campaign cancelled, and another paused and resumed, on a fleet: what went after each.",
        discussion: """
            Starts redis-server, volley-mock and --workers `volley worker` processes and registers --devices devices. \
            Cancels a job at --rate a minute --cancel-after seconds after its first push and counts the pushes after \
            the answer (goal: at most one throttle slice); then pauses a second job --pause-after seconds in for \
            --pause-for seconds, resumes it, and counts the pushes while paused, duplicates and each minute against \
            the rate. Takes about devices / rate minutes plus the pause.
            """)

    @Option(help: "Devices per campaign.") var devices = 10_000
    @Option(help: "throttlePerMinute of both campaigns.") var rate = 600
    @Option(help: "Worker processes.") var workers = 2
    @Option(name: .customLong("cancel-after"), help: "Seconds after the first push to cancel.") var cancelAfter = 5.0
    @Option(name: .customLong("pause-after"), help: "Seconds after the first push to pause.") var pauseAfter = 60.0
    @Option(name: .customLong("pause-for"), help: "Seconds the job stays paused.") var pauseFor = 60.0
    @Flag(help: "Keep the work folder (logs, config).") var keep = false
    @Flag(help: "Print one JSON object.") var json = false

    func validate() throws {
        guard devices >= 1, (1...6_000_000).contains(rate), workers >= 1 else {
            throw ValidationError("--devices and --workers at least 1, --rate from 1 to 6,000,000")
        }
        guard cancelAfter >= 0, pauseAfter >= 0, pauseFor >= 0 else {
            throw ValidationError("--cancel-after, --pause-after and --pause-for: seconds, not negative")
        }
    }

    func run() throws {
        var o = SteerBenchOptions()
        o.devices = devices
        o.rate = rate
        o.workers = workers
        o.cancelAfter = cancelAfter
        o.pauseAfter = pauseAfter
        o.pauseFor = pauseFor
        o.keep = keep
        var logger = Logger(label: "volley.bench")
        logger.logLevel = .warning
        let r = try SteerBench.run(o, command: CommandLine.arguments.joined(separator: " "), logger: logger)
        try printResult(r, json: json) { SteerBench.table(r) }
    }
}
