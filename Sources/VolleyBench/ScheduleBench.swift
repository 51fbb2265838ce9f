// swift-format-ignore-file: AlwaysUseLowerCamelCase

// The result types' properties are the `--json` keys (snake_case, a contract with users' scripts), named as written.
import Foundation
import Histogram
import Logging
import VolleyCore
import VolleyRedis
import VolleyService
import VolleyStore

/// `volley-bench schedule --pending N`: how late a scheduled job reaches the provider while N others wait.
///
/// What it does, in order:
/// 1. starts a redis-server and a `volley-mock` that keeps every accepted push with the time it accepted it, and
///    `workers` `volley worker` processes (their promoters lease the schedule as in production), warmed up;
/// 2. **small**: `dueJobs` one-device jobs with a `sendAt` spread evenly over `dueSeconds`, the first `leadSeconds`
///    ahead, added to the job stream as a producer adds them: the workers park them, the promoter brings each back at
///    its time and a worker sends it. Due → the mock accepting its push, per job;
/// 3. loads the schedule to `pending` waiting jobs: job bodies of the same size, due from a day to 30 days ahead,
///    written into the schedule's sorted set and bodies hash in pipelined batches (what parking writes, without a
///    million worker reads); Redis `used_memory` before and after gives `redis_bytes_per_pending`;
/// 4. **pending**: step 2 again, now with `pending` jobs waiting beside the ones falling due.
///
/// `due_to_send_*` is the mock's accept time (its wall clock, on this machine) minus the job's `sendAt`: it includes
/// the promoter's wake-up, the stream read, the send and the provider's answer. `redis_cpu_us_per_due_job` is Redis
/// CPU (`INFO cpu`) over a phase per job that fell due: parking, promotion, the job's own reads and writes. Promotion
/// reads a range of the earliest members, so both figures hold whatever the number waiting; the two phases, in one
/// run, show it.
public struct ScheduleBenchOptions: Sendable {
    public var pending = 1_000_000
    public var dueJobs = 10_000
    public var dueSeconds = 20.0
    public var leadSeconds = 5.0
    public var workers = 2
    public var bodyBytes = 300
    public var keep = false
    public var progress = true
    public init() {}
}

public struct ScheduleBenchPhase: Sendable, Codable, Hashable {
    /// Jobs waiting in the schedule while the phase's jobs fell due.
    public var pending: Int
    public var due_jobs: Int
    public var sent: Int
    public var due_to_send: LatencySummary
    /// Pushes the mock accepted before their job's `sendAt` (never expected: a late clock would show here), and the
    /// most any of them was early by.
    public var early: Int
    public var earliest_ms: Double
    public var redis_cpu_us_per_due_job: Double
}

public struct ScheduleBenchResult: Sendable, Codable, Hashable {
    public var pending: Int
    public var due_jobs: Int
    public var due_seconds: Double
    public var workers: Int
    /// With `pending` jobs waiting (the `pending` phase).
    public var due_to_send_p50_ms: Double
    public var due_to_send_p99_ms: Double
    public var due_to_send_max_ms: Double
    public var redis_bytes_per_pending: Double
    public var load_seconds: Double
    public var small: ScheduleBenchPhase
    public var large: ScheduleBenchPhase
    /// `large.redis_cpu_us_per_due_job / small.redis_cpu_us_per_due_job`: 1 when promotion does not scan.
    public var cpu_per_job_large_vs_small: Double
    public var command: String
}

public enum ScheduleBench {
    static let org = OrgID("bench-org")
    static let app = AppName("bench")

    public static func run(_ o: ScheduleBenchOptions, command: String, logger: Logger) throws -> ScheduleBenchResult {
        var e2e = E2EBench.Options()
        e2e.workers = o.workers
        e2e.bodyBytes = o.bodyBytes
        e2e.keep = o.keep
        e2e.progress = o.progress
        e2e.blockMs = 100
        e2e.metricsEnabled = false
        let bench = E2EBench(options: e2e, logger: logger)
        let stage = try bench.makeStage()
        defer { stage.stop() }
        // Every accepted push is kept with its time: the warm-up's, and both phases'.
        try stage.control.configure(#"{"capturePushes": \#(2 * o.dueJobs + 10_000)}"#)
        let (settings, client, producer) = try stage.clients(logger: logger)
        let session = RedisPipelineSession(client: client, store: settings.store, consumer: "bench", logger: logger)
        // The warm-up user's two devices.
        try session.register([
            DeviceImportRecord(
                org: E2EBench.org, app: E2EBench.app, user: "w", platform: .ios,
                token: E2EBench.iosToken(0, prefix: "f")),
            DeviceImportRecord(
                org: E2EBench.org, app: E2EBench.app, user: "w", platform: .android, token: E2EBench.fcmToken(0)),
        ])
        try bench.startWorkers(stage: stage, count: o.workers)
        try bench.warmUp(stage: stage, producer: producer, client: client)
        try stage.control.resetStats()

        let body = bench.notificationBody()
        func note(_ s: String) { if o.progress { stderrLine(s + "\n") } }

        note("small: \(o.dueJobs) jobs falling due over \(o.dueSeconds) s, nothing else waiting…")
        let small = try phase(
            "a", o, body: body, stage: stage, client: client, producer: producer, settings: settings, pending: 0)

        note("loading the schedule to \(grouped(Double(o.pending))) waiting jobs…")
        let memoryBefore = try usedMemory(client)
        let loadStarted = benchNow()
        let loaded = try loadPending(max(0, o.pending), body: body, client: client, store: settings.store)
        let loadSeconds = benchNow() - loadStarted
        let memoryAfter = try usedMemory(client)
        let waiting = try session.scheduledCount()
        note(
            String(
                format: "loaded %@ in %.1f s; %@ waiting", grouped(Double(loaded)), loadSeconds,
                grouped(Double(waiting))))

        note("pending: \(o.dueJobs) jobs falling due over \(o.dueSeconds) s beside them…")
        let large = try phase(
            "b", o, body: body, stage: stage, client: client, producer: producer, settings: settings, pending: waiting)
        return ScheduleBenchResult(
            pending: waiting, due_jobs: o.dueJobs, due_seconds: o.dueSeconds, workers: o.workers,
            due_to_send_p50_ms: large.due_to_send.p50_ms, due_to_send_p99_ms: large.due_to_send.p99_ms,
            due_to_send_max_ms: large.due_to_send.max_ms,
            redis_bytes_per_pending: (memoryAfter - memoryBefore) / Double(max(1, loaded)), load_seconds: loadSeconds,
            small: small, large: large,
            cpu_per_job_large_vs_small: small.redis_cpu_us_per_due_job > 0
                ? large.redis_cpu_us_per_due_job / small.redis_cpu_us_per_due_job : 0,
            command: command)
    }

    /// One job, one iOS device, due at `due`: what `volley send --send-at` adds to the stream.
    static func job(id: String, token: DeviceToken, due: Date?, body: String) -> PushJob {
        var j = PushJob(
            id: JobID(id), org: org, app: app, devices: [JobDevice(platform: .ios, token: token)],
            notification: VolleyCore.Notification(title: "Volley", body: body))
        j.sendAt = due.map { ScheduledTime(ScheduledTime.utcText($0)) } ?? nil
        return j
    }

    /// `tag`: a hex digit naming the phase in its jobs' tokens (APNs tokens are hex).
    static func phase(
        _ tag: String, _ o: ScheduleBenchOptions, body: String, stage: E2EBench.Stage, client: RedisClient,
        producer: JobProducer, settings: PipelineSettings, pending: Int
    ) throws -> ScheduleBenchPhase {
        let n = max(1, o.dueJobs)
        let first = Date().addingTimeInterval(o.leadSeconds)
        var due: [String: Date] = [:]
        var commands: [[String]] = []
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys]
        for i in 0..<n {
            let at = first.addingTimeInterval(o.dueSeconds * Double(i) / Double(n))
            // Whole milliseconds, as `sendAt` carries them.
            let token = E2EBench.iosToken(i, prefix: "5c\(tag)")
            let j = job(id: "sched-\(tag)-\(i)", token: token, due: at, body: body)
            // The job's time is its `sendAt` as written (milliseconds), not the instant it was made from.
            guard let sendAt = j.sendAt?.date else { throw BenchError("job \(i) has no sendAt") }
            due[token.rawValue] = sendAt
            commands.append([
                "XADD", settings.store.jobStream(for: JobID("sched-\(tag)-\(i)")), "*", "job",
                String(decoding: try encoder.encode(j), as: UTF8.self),
            ])
        }
        let cpuBefore = try redisCPU(client)
        var k = 0
        while k < commands.count {
            let part = Array(commands[k..<min(commands.count, k + 1000)])
            for r in try client.pipeline(part) { try r.throwIfError("XADD scheduled job") }
            k += part.count
        }
        if Date() >= first { throw BenchError("adding the jobs took longer than --lead-seconds; raise it") }
        // Every push of the phase at the mock (the last one is due `dueSeconds` after the first).
        let deadline = benchNow() + o.leadSeconds + o.dueSeconds + 120
        var accepted: [String: Double] = [:]
        while true {
            accepted = try acceptedTimes(stage.control, prefix: "5c\(tag)")
            if accepted.count >= n { break }
            if benchNow() > deadline {
                throw BenchError(
                    "only \(accepted.count) of \(n) scheduled pushes arrived:\n"
                        + stage.workers.map { "\($0.name): \($0.logTail(5))" }.joined(separator: "\n"))
            }
            for w in stage.workers where !w.isRunning { throw BenchError("\(w.name) exited:\n\(w.logTail())") }
            usleep(250_000)
        }
        // Let the last reports and acks land before reading Redis's CPU.
        let settle = benchNow() + 10
        while try producer.pendingCount() > 0, benchNow() < settle { usleep(20_000) }
        let cpuAfter = try redisCPU(client)
        var h = E2EBench.newHistogram()
        var early = 0
        var earliest = 0.0
        for (token, at) in accepted {
            guard let d = due[token] else { continue }
            let lag = at - d.timeIntervalSince1970
            if lag < 0 {
                early += 1
                earliest = max(earliest, -lag * 1000)
            }
            _ = h.record(UInt64(max(1, lag * 1e6)))
        }
        return ScheduleBenchPhase(
            pending: pending, due_jobs: n, sent: accepted.count, due_to_send: E2EBench.summary(h), early: early,
            earliest_ms: earliest,
            redis_cpu_us_per_due_job: (cpuAfter - cpuBefore) * 1e6 / Double(n))
    }

    /// The mock's accept time of each captured push whose token starts with `prefix`, by token (the first, if a
    /// token were pushed twice).
    static func acceptedTimes(_ control: MockControl, prefix: String) throws -> [String: Double] {
        var out: [String: Double] = [:]
        var offset = 0
        // Pages of 500 (token and time only), under the client's 64 KiB response cap.
        while true {
            let (status, text) = try control.request("GET", "/_mock/pushes?offset=\(offset)&limit=500&compact=1")
            guard status == 200,
                let list = try JSONSerialization.jsonObject(with: Data(text.utf8)) as? [[String: Any]]
            else { throw BenchError("mock pushes: HTTP \(status)") }
            for p in list {
                guard let token = p["token"] as? String, token.hasPrefix(prefix),
                    let at = (p["accepted_at"] as? NSNumber)?.doubleValue
                else { continue }
                out[token] = min(out[token] ?? at, at)
            }
            if list.count < 500 { return out }
            offset += list.count
        }
    }

    /// Writes `count` waiting jobs into the schedule as parking does (member → due ms; member → body), due from
    /// one day to 30 days ahead, 2,000 per pipeline.
    static func loadPending(_ count: Int, body: String, client: RedisClient, store: StoreConfiguration) throws -> Int {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys]
        let now = Date().timeIntervalSince1970
        let span = 29.0 * 86_400
        var written = 0
        while written < count {
            let n = min(2_000, count - written)
            var commands: [[String]] = []
            commands.reserveCapacity(2 * n)
            for i in written..<(written + n) {
                let at = now + 86_400 + span * Double(i) / Double(max(1, count))
                let ms = (at * 1000).rounded(.up)
                let id = "later-\(i)"
                let j = job(
                    id: id, token: E2EBench.iosToken(i, prefix: "1a7e"), due: Date(timeIntervalSince1970: ms / 1000),
                    body: body)
                let shard = store.streamShard(of: JobID(id))
                let member = StoreConfiguration.scheduleMember(org: org, job: JobID(id))
                commands.append(["ZADD", store.scheduleKey(shard: shard), String(Int64(ms)), member])
                commands.append([
                    "HSET", store.scheduledJobsKey(shard: shard), member,
                    String(decoding: try encoder.encode(j), as: UTF8.self),
                ])
            }
            for r in try client.pipeline(commands) { try r.throwIfError("load the schedule") }
            written += n
        }
        return written
    }

    static func usedMemory(_ client: RedisClient) throws -> Double {
        try info(client, section: "memory", key: "used_memory")
    }

    /// Redis's CPU seconds (`used_cpu_sys` + `used_cpu_user`).
    static func redisCPU(_ client: RedisClient) throws -> Double {
        try info(client, section: "cpu", key: "used_cpu_sys") + info(client, section: "cpu", key: "used_cpu_user")
    }

    static func info(_ client: RedisClient, section: String, key: String) throws -> Double {
        let text = try client.checked(["INFO", section]).string ?? ""
        for line in text.split(whereSeparator: { $0.isNewline }) {
            let parts = line.split(separator: ":", maxSplits: 1)
            if parts.count == 2, parts[0] == key { return Double(parts[1]) ?? 0 }
        }
        throw BenchError("INFO \(section) has no \(key)")
    }

    public static func table(_ r: ScheduleBenchResult) -> String {
        func f(_ v: Double, _ d: Int = 1) -> String { String(format: "%.\(d)f", v) }
        func line(_ p: ScheduleBenchPhase) -> String {
            "\(grouped(Double(p.pending))) waiting: \(p.sent)/\(p.due_jobs) sent, due → at the provider p50 "
                + "\(f(p.due_to_send.p50_ms)) ms, p99 \(f(p.due_to_send.p99_ms)) ms, "
                + "max \(f(p.due_to_send.max_ms)) ms, "
                + "\(p.early) early (by at most \(f(p.earliest_ms, 2)) ms); "
                + "Redis \(f(p.redis_cpu_us_per_due_job)) us CPU per job"
        }
        return """
            scheduled jobs (\(r.due_jobs) falling due over \(f(r.due_seconds, 0)) s, \(r.workers) worker(s))
              \(line(r.small))
              \(line(r.large))
              Redis \(f(r.redis_bytes_per_pending, 0)) bytes per waiting job (loaded in \(f(r.load_seconds)) s); \
            CPU per job with them waiting: \(f(r.cpu_per_job_large_vs_small, 2))x
            """
    }
}
