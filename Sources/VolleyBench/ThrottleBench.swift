// swift-format-ignore-file: AlwaysUseLowerCamelCase

// The result types' properties are the `--json` keys (snake_case, a contract with users' scripts), named as written.
import Foundation
import Logging
import VolleyCore
import VolleyRedis
import VolleyService
import VolleyStore

/// `volley-bench throttle --rates 60,6000,60000,600000`: a throttled campaign per rate, sent by `workers` `volley
/// worker` processes sharing the job's one rate, and how many pushes the mock accepted in each minute.
///
/// Per rate R (pushes a minute): a fresh redis-server, mock and fleet; R × `minutes` devices plus ten seconds' worth,
/// in users of up to 200 devices, one group job naming them all with `throttlePerMinute: R` (split into shard jobs
/// so every worker sends a part). The bench polls the mock's accepted count every `pollMs` from before the job is
/// added until every device is accepted, and counts, from the first accepted push:
/// - each whole minute `[first + 60k, first + 60(k+1))` that ends before the last push (`minutes`), its deviation
///   from R (`max_minute_deviation_pct`: the largest, over or under);
/// - every 60 s window starting at a poll (`busiest_sliding_minute`, `quietest_sliding_minute`), the count
///   interpolated between polls: resolution one poll interval's pushes at rate R (R × pollMs / 60,000).
public struct ThrottleBenchOptions: Sendable {
    public var rates = [60, 6_000, 60_000, 600_000]
    public var minutes = 2
    public var workers = 4
    public var pollMs = 50
    public var keep = false
    public var progress = true
    public init() {}
}

public struct ThrottleBenchRate: Sendable, Codable, Hashable {
    public var rate_per_minute: Int
    public var devices: Int
    public var accepted: Int
    /// Pushes accepted in each whole minute from the first one.
    public var minutes: [Int]
    public var max_minute_deviation_pct: Double
    public var busiest_sliding_minute: Double
    public var quietest_sliding_minute: Double
    public var busiest_second: Int
    public var seconds: Double
}

public struct ThrottleBenchResult: Sendable, Codable, Hashable {
    public var workers: Int
    public var poll_ms: Int
    public var rates: [ThrottleBenchRate]
    /// The largest `max_minute_deviation_pct` over every rate.
    public var max_minute_deviation_pct: Double
    public var command: String
}

public enum ThrottleBench {
    public static func run(_ o: ThrottleBenchOptions, command: String, logger: Logger) throws -> ThrottleBenchResult {
        var out: [ThrottleBenchRate] = []
        for rate in o.rates {
            if o.progress { stderrLine("throttlePerMinute \(rate): \(o.minutes) min on \(o.workers) workers…\n") }
            let r = try one(rate: rate, o, logger: logger)
            if o.progress { stderrLine(line(r) + "\n") }
            out.append(r)
        }
        return ThrottleBenchResult(
            workers: o.workers, poll_ms: o.pollMs, rates: out,
            max_minute_deviation_pct: out.map(\.max_minute_deviation_pct).max() ?? 0, command: command)
    }

    /// A fleet for throttled group campaigns (`throttle`, `steer`): redis-server, the mock, `devices` devices in
    /// users of up to 200 in the campaign group, `workers` warmed-up workers, and shard jobs of half a worker's share
    /// of the campaign, so every worker has a part to send. The stage is the caller's to stop.
    static func fleet(devices: Int, workers: Int, keep: Bool, logger: Logger) throws -> (
        bench: E2EBench, stage: E2EBench.Stage, settings: PipelineSettings, client: RedisClient, producer: JobProducer
    ) {
        var e2e = E2EBench.Options()
        e2e.devices = devices
        e2e.iosShare = 0.6
        e2e.devicesPerUser = min(200, max(1, devices / 64))
        e2e.workers = workers
        e2e.keep = keep
        e2e.progress = false
        e2e.metricsEnabled = false
        e2e.shardSize = max(100, devices / (2 * workers))
        let bench = E2EBench(options: e2e, logger: logger)
        let stage = try bench.makeStage()
        do {
            let (settings, client, producer) = try stage.clients(logger: logger)
            _ = try bench.load(stage: stage, settings: settings)
            try bench.startWorkers(stage: stage, count: workers)
            try bench.warmUp(stage: stage, producer: producer, client: client)
            return (bench, stage, settings, client, producer)
        } catch {
            stage.stop()
            throw error
        }
    }

    static func one(rate: Int, _ o: ThrottleBenchOptions, logger: Logger) throws -> ThrottleBenchRate {
        let devices = rate * o.minutes + max(1, rate / 6)
        let (bench, stage, settings, client, _) = try fleet(
            devices: devices, workers: o.workers, keep: o.keep, logger: logger)
        defer { stage.stop() }
        let base = try stage.control.counts().accepted

        var job = PushJob(
            id: JobID("throttled-\(rate)"), org: E2EBench.org, app: E2EBench.app, recipients: [E2EBench.campaignGroup],
            notification: VolleyCore.Notification(title: "Volley", body: bench.notificationBody()))
        job.throttlePerMinute = rate
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys]
        var samples: [(t: Double, n: Int)] = [(benchNow(), 0)]
        _ = try client.checked([
            "XADD", settings.store.jobStream(for: JobID("throttled-\(rate)")), "*", "job",
            String(decoding: try encoder.encode(job), as: UTF8.self),
        ])
        let deadline = benchNow() + Double(devices) / Double(rate) * 60 * 1.5 + 120
        while samples.last!.n < devices {
            usleep(useconds_t(o.pollMs * 1000))
            samples.append((benchNow(), try stage.control.counts().accepted - base))
            if benchNow() > deadline {
                throw BenchError(
                    "\(samples.last!.n) of \(devices) accepted by the deadline:\n"
                        + stage.workers.map { "\($0.name): \($0.logTail(5))" }.joined(separator: "\n"))
            }
            for w in stage.workers where !w.isRunning { throw BenchError("\(w.name) exited:\n\(w.logTail())") }
        }
        return figures(rate: rate, devices: devices, samples: samples)
    }

    /// The minute counts from the polled cumulative counts (`t` in seconds, `n` accepted so far).
    static func figures(rate: Int, devices: Int, samples: [(t: Double, n: Int)]) -> ThrottleBenchRate {
        // Accepted by `t`, linear between polls.
        func count(at t: Double) -> Double {
            guard let j = samples.firstIndex(where: { $0.t >= t }) else { return Double(samples.last?.n ?? 0) }
            if j == 0 { return Double(samples[0].n) }
            let a = samples[j - 1]
            let b = samples[j]
            return Double(a.n) + Double(b.n - a.n) * (t - a.t) / max(1e-9, b.t - a.t)
        }
        let firstIndex = samples.firstIndex { $0.n > 0 } ?? 0
        // The first push was accepted between the poll before and this one: the minutes count from the poll before.
        let first = samples[max(0, firstIndex - 1)].t
        let last = samples.last?.t ?? first
        var minutes: [Int] = []
        var k = 0.0
        while first + 60 * (k + 1) <= last {
            minutes.append(Int((count(at: first + 60 * (k + 1)) - count(at: first + 60 * k)).rounded()))
            k += 1
        }
        let deviation = minutes.map { abs(Double($0 - rate)) / Double(rate) * 100 }.max() ?? 0
        var busiest = 0.0
        var quietest = Double.infinity
        var busiestSecond = 0
        for s in samples where s.t >= first && s.t + 60 <= last {
            let c = count(at: s.t + 60) - count(at: s.t)
            busiest = max(busiest, c)
            quietest = min(quietest, c)
        }
        for s in samples where s.t >= first && s.t + 1 <= last {
            busiestSecond = max(busiestSecond, Int((count(at: s.t + 1) - count(at: s.t)).rounded()))
        }
        return ThrottleBenchRate(
            rate_per_minute: rate, devices: devices, accepted: samples.last?.n ?? 0, minutes: minutes,
            max_minute_deviation_pct: deviation, busiest_sliding_minute: busiest,
            quietest_sliding_minute: quietest.isFinite ? quietest : 0, busiest_second: busiestSecond,
            seconds: last - first)
    }

    static func line(_ r: ThrottleBenchRate) -> String {
        let minutes = r.minutes.map { grouped(Double($0)) }.joined(separator: ", ")
        return "  \(grouped(Double(r.rate_per_minute)))/min: minutes [\(minutes)], largest "
            + String(format: "%.2f", r.max_minute_deviation_pct) + " % off; sliding minute "
            + "\(grouped(r.quietest_sliding_minute))–\(grouped(r.busiest_sliding_minute)); busiest second "
            + "\(grouped(Double(r.busiest_second))); \(r.accepted) of \(r.devices) in "
            + String(format: "%.1f", r.seconds) + " s"
    }

    public static func table(_ r: ThrottleBenchResult) -> String {
        (["throttled campaigns on \(r.workers) workers (mock polled every \(r.poll_ms) ms)"] + r.rates.map(line))
            .joined(separator: "\n")
    }
}
