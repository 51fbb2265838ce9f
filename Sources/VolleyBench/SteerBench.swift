// swift-format-ignore-file: AlwaysUseLowerCamelCase

// The result type's properties are the `--json` keys (snake_case, a contract with users' scripts), named as written.
import Foundation
import Logging
import VolleyCore
import VolleyRedis
import VolleyService
import VolleyStore

/// `volley-bench steer`: a throttled campaign cancelled, and another paused and resumed, on a fleet of `volley
/// worker` processes and the mock, as an operator does it (`volley jobs cancel|pause|resume`, the API's commands).
///
/// 1. **Cancel**: a job of `devices` devices at `rate` a minute; `cancelAfter` seconds after its first accepted push
///    it is cancelled. Counted: the pushes accepted when the cancel answered, and those accepted after it, over
///    `settle` seconds (the goal: at most one throttle slice, `ThrottleRate.slice`); the report's status.
/// 2. **Pause and resume**: a second job like it; `pauseAfter` seconds after its first push it is paused for
///    `pauseFor` seconds, then resumed, and runs until every device is accepted. Counted: the pushes accepted while
///    it was paused (after the pause answered), every device accepted once (the mock's duplicate deliveries), and
///    the pushes accepted in each whole minute against the rate.
public struct SteerBenchOptions: Sendable {
    public var devices = 10_000
    public var rate = 600
    public var workers = 2
    public var cancelAfter = 5.0
    public var pauseAfter = 60.0
    public var pauseFor = 60.0
    public var settle = 10.0
    public var pollMs = 50
    public var keep = false
    public var progress = true
    public init() {}
}

public struct SteerBenchResult: Sendable, Codable, Hashable {
    public var devices: Int
    public var rate_per_minute: Int
    public var workers: Int
    /// `ThrottleRate.slice` of the rate: what the gate hands a sender at a time.
    public var slice: Int
    public var cancel_answer: String
    public var accepted_before_cancel: Int
    /// Pushes accepted after the cancel answered (goal: at most `slice`).
    public var accepted_after_cancel: Int
    public var cancelled_report_status: String
    public var pause_answer: String
    public var accepted_before_pause: Int
    /// Pushes accepted while the job was paused, after the pause answered (goal: at most `slice`).
    public var accepted_while_paused: Int
    public var paused_seconds: Double
    public var resumed_accepted: Int
    /// Deliveries of a device the mock had already accepted a push of this campaign for (goal: 0).
    public var duplicate_deliveries: Int
    /// Pushes accepted in each whole minute from the first, the paused minutes included.
    public var minutes: [Int]
    /// The busiest whole minute (goal: at most the rate).
    public var max_minute: Int
    public var busiest_sliding_minute: Double
    public var seconds: Double
    public var command: String
}

public enum SteerBench {
    public static func run(_ o: SteerBenchOptions, command: String, logger: Logger) throws -> SteerBenchResult {
        guard let throttle = ThrottleRate(perMinute: o.rate) else { throw BenchError("--rate: 1 to 6,000,000") }
        // Both campaigns name the same group; the second is a new job, so every device is due again.
        let (bench, stage, settings, client, producer) = try ThrottleBench.fleet(
            devices: o.devices, workers: o.workers, keep: o.keep, logger: logger)
        defer { stage.stop() }
        func accepted() throws -> Int { try stage.control.counts().accepted }
        func duplicates() throws -> Int { (try stage.control.statsJSON()["duplicate_deliveries"] as? Int) ?? 0 }
        func add(_ id: String) throws {
            var job = PushJob(
                id: JobID(id), org: E2EBench.org, app: E2EBench.app, recipients: [E2EBench.campaignGroup],
                notification: VolleyCore.Notification(title: "Volley", body: bench.notificationBody()))
            job.throttlePerMinute = o.rate
            _ = try producer.submit(job, now: Date())
        }
        func waitForFirst(after base: Int, deadline seconds: Double) throws -> Double {
            let deadline = benchNow() + seconds
            while try accepted() <= base {
                if benchNow() > deadline { throw BenchError("no push accepted within \(Int(seconds)) s") }
                usleep(useconds_t(o.pollMs * 1000))
            }
            return benchNow()
        }
        func pollFor(_ seconds: Double, from base: Int, into samples: inout [(t: Double, n: Int)]) throws {
            let end = benchNow() + seconds
            while benchNow() < end {
                usleep(useconds_t(o.pollMs * 1000))
                samples.append((benchNow(), try accepted() - base))
            }
        }
        /// The job's report once published (a sharded campaign's parent report: the last to come), within 60 s.
        func report(_ job: String) throws -> JobReport? {
            let deadline = benchNow() + 60
            while benchNow() < deadline {
                if let (r, _) = try FaultRig.findReport(client, settings.store, job: job) { return r }
                usleep(200_000)
            }
            return nil
        }
        let duplicatesBefore = try duplicates()

        // 1. Cancel.
        if o.progress {
            stderrLine("cancel: \(o.devices) devices at \(o.rate)/min, cancelled \(o.cancelAfter) s in…\n")
        }
        let cancelBase = try accepted()
        try add("steer-cancel")
        let cancelFirst = try waitForFirst(after: cancelBase, deadline: 120)
        usleep(useconds_t(max(0, cancelFirst + o.cancelAfter - benchNow()) * 1_000_000))
        let cancel = try JobCancelCommand.cancel(
            settings: settings, org: E2EBench.org, job: "steer-cancel", logger: logger)
        let atCancel = try accepted() - cancelBase
        var ignored: [(t: Double, n: Int)] = []
        try pollFor(o.settle, from: cancelBase, into: &ignored)
        let afterCancel = try accepted() - cancelBase - atCancel
        // A report without a status is a job that ran to its end.
        let cancelledStatus = try report("steer-cancel").map { $0.status ?? "done" } ?? "none"

        // 2. Pause, then resume.
        if o.progress {
            stderrLine(
                "pause: \(o.devices) devices at \(o.rate)/min, paused \(o.pauseAfter) s in for \(o.pauseFor) s…\n")
        }
        let base = try accepted()
        var samples: [(t: Double, n: Int)] = [(benchNow(), 0)]
        try add("steer-pause")
        _ = try waitForFirst(after: base, deadline: 120)
        samples.append((benchNow(), try accepted() - base))
        try pollFor(o.pauseAfter, from: base, into: &samples)
        let pause = try JobPauseCommand.pause(
            settings: settings, org: E2EBench.org, job: "steer-pause", logger: logger)
        let pausedAt = benchNow()
        let atPause = try accepted() - base
        try pollFor(o.pauseFor, from: base, into: &samples)
        let whilePaused = try accepted() - base - atPause
        _ = try JobPauseCommand.resume(settings: settings, org: E2EBench.org, job: "steer-pause", logger: logger)
        let paused = benchNow() - pausedAt
        let deadline = benchNow() + Double(o.devices) / Double(o.rate) * 60 * 1.5 + 120
        while samples.last?.n ?? 0 < o.devices {
            usleep(useconds_t(o.pollMs * 1000))
            samples.append((benchNow(), try accepted() - base))
            if benchNow() > deadline {
                throw BenchError("\(samples.last?.n ?? 0) of \(o.devices) accepted by the deadline")
            }
            for w in stage.workers where !w.isRunning { throw BenchError("\(w.name) exited:\n\(w.logTail())") }
        }
        guard try report("steer-pause") != nil else { throw BenchError("steer-pause: no report within 60 s") }
        let figures = ThrottleBench.figures(rate: o.rate, devices: o.devices, samples: samples)
        return SteerBenchResult(
            devices: o.devices, rate_per_minute: o.rate, workers: o.workers, slice: throttle.slice,
            cancel_answer: cancel.message, accepted_before_cancel: atCancel, accepted_after_cancel: afterCancel,
            cancelled_report_status: cancelledStatus, pause_answer: pause.message, accepted_before_pause: atPause,
            accepted_while_paused: whilePaused, paused_seconds: paused, resumed_accepted: samples.last?.n ?? 0,
            duplicate_deliveries: try duplicates() - duplicatesBefore, minutes: figures.minutes,
            max_minute: figures.minutes.max() ?? 0, busiest_sliding_minute: figures.busiest_sliding_minute,
            seconds: figures.seconds, command: command)
    }

    public static func table(_ r: SteerBenchResult) -> String {
        [
            "steered campaigns: \(r.devices) devices at \(r.rate_per_minute)/min on \(r.workers) workers "
                + "(a throttle slice is \(r.slice))",
            "  cancel: \(r.accepted_before_cancel) accepted when it answered (\(r.cancel_answer)); "
                + "\(r.accepted_after_cancel) after; report \(r.cancelled_report_status)",
            "  pause: \(r.accepted_before_pause) accepted when it answered; \(r.accepted_while_paused) while paused "
                + String(format: "%.0f", r.paused_seconds) + " s; resumed to \(r.resumed_accepted) of \(r.devices); "
                + "duplicates \(r.duplicate_deliveries)",
            "  minutes [\(r.minutes.map(String.init).joined(separator: ", "))], busiest \(r.max_minute)",
        ].joined(separator: "\n")
    }
}
