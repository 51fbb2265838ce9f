import Foundation
import Logging
import VolleyCore
import VolleyRedis
import VolleyStore

/// `volley send`: build a job from flags, XADD it, optionally follow the report stream until its report arrives.
public enum JobSubmission {
    public struct Options: Sendable {
        public var org: String
        public var app: String
        public var users: [String] = []
        /// `platform:token` pairs.
        public var tokens: [String] = []
        public var title: String?
        public var body: String?
        public var silent = false
        /// `k=v` pairs.
        public var data: [String] = []
        /// The whole notification as JSON (camelCase keys).
        public var notificationJSON: String?
        public var platforms: [String] = []
        public var id: String?
        /// Record debug events per user and device (`volley events --job ID`).
        public var debug = false
        /// `--send-at`: RFC 3339 with an offset; the job waits in the schedule until then.
        public var sendAt: String?
        /// `--deliver-at-local-time`: `HH:MM` on each recipient's own clock.
        public var deliverAtLocalTime: String?
        /// `--throttle-per-minute`: the fleet sends at most this many of the job's pushes a minute.
        public var throttlePerMinute: Int?
        /// `--no-frequency-cap`: the org's frequency caps neither hold the job back nor count it.
        public var bypassFrequencyCaps = false
        /// `--segment ID` (repeatable): every user a segment of the org matches when the job resolves.
        public var segments: [String] = []
        /// `--all`: every user with a device for the job's app.
        public var everyone = false
        /// `--exclude ID,…` (users, groups, queues, teams) and `--exclude-segment ID`: their members get nothing.
        public var exclude: [String] = []
        public var excludeSegments: [String] = []
        public init(org: String, app: String) {
            self.org = org
            self.app = app
        }
    }

    public struct InputError: Error, CustomStringConvertible, Sendable {
        public let description: String
        init(_ d: String) { description = d }
    }

    public static func buildJob(_ o: Options) throws -> PushJob {
        guard !o.org.isEmpty else { throw InputError("--org must not be empty") }
        guard !o.app.isEmpty else { throw InputError("--app must not be empty") }
        if o.users.isEmpty && o.tokens.isEmpty && o.segments.isEmpty && !o.everyone {
            throw InputError("give --users u1,u2, --segment ID, --all or --token platform:TOKEN")
        }
        for id in o.segments + o.excludeSegments where !SegmentID(id).isValid {
            throw InputError(
                "--segment '\(id)' is not a segment id (1–128 characters of letters, digits and . _ : -)")
        }
        if o.users.count + o.segments.count + (o.everyone ? 1 : 0) > PushJob.maxRecipients {
            throw InputError("--users names \(o.users.count) users; at most \(PushJob.maxRecipients) per job")
        }
        var devices: [JobDevice] = []
        for t in o.tokens {
            let parts = t.split(separator: ":", maxSplits: 1).map(String.init)
            guard parts.count == 2, let p = Platform(rawValue: parts[0].lowercased()), !parts[1].isEmpty else {
                throw InputError("--token '\(t.prefix(12))…' must be platform:TOKEN with platform ios or android")
            }
            devices.append(JobDevice(platform: p, token: DeviceToken(parts[1])))
        }
        var data: [String: JSONValue]?
        if !o.data.isEmpty {
            var d: [String: JSONValue] = [:]
            for kv in o.data {
                let parts = kv.split(separator: "=", maxSplits: 1).map(String.init)
                guard parts.count == 2, !parts[0].isEmpty else { throw InputError("--data '\(kv)' must be key=value") }
                d[parts[0]] = .string(parts[1])
            }
            data = d
        }
        var notification: VolleyCore.Notification
        if let json = o.notificationJSON {
            if o.title != nil || o.body != nil || o.silent {
                throw InputError("--notification carries the whole notification: drop --title, --body and --silent")
            }
            let form = "--notification must be a JSON object with camelCase keys (title, body, data, …)"
            // Read as the worker reads a job, so a number in `data` or a raw payload keeps its text.
            let parsed: JSONValue
            do { parsed = try JSONValue(parsing: json) } catch { throw InputError("\(form): \(error)") }
            if case .object(let n) = parsed {
                let unknown = JobKeys.unknownKeys(in: ["notification": .object(n)])
                if !unknown.isEmpty {
                    throw InputError(
                        "--notification: unknown key " + unknown.map(\.description).joined(separator: ", "))
                }
            }
            do { notification = try VolleyCore.Notification(json: parsed, at: []) } catch {
                throw InputError("\(form): \(error)")
            }
            if let data { notification.data = (notification.data ?? [:]).merging(data) { _, new in new } }
        } else if o.silent {
            if o.title != nil || o.body != nil {
                throw InputError("--silent sends a content-available push: drop --title and --body")
            }
            notification = VolleyCore.Notification(data: data, contentAvailable: true)
        } else {
            if o.title == nil && o.body == nil {
                throw InputError("give --title and/or --body, or --silent, or --notification JSON")
            }
            notification = VolleyCore.Notification(title: o.title, body: o.body, data: data)
        }
        var platforms: [Platform]?
        if !o.platforms.isEmpty {
            platforms = try o.platforms.map {
                guard let p = Platform(rawValue: $0.lowercased()) else {
                    throw InputError("--platforms: '\($0)' is not ios or android")
                }
                return p
            }
        }
        var job = PushJob(
            id: o.id.map(JobID.init), org: OrgID(o.org), app: AppName(o.app),
            recipients: o.users.isEmpty ? nil : o.users.map(RecipientID.init),
            devices: devices.isEmpty ? nil : devices, notification: notification, platforms: platforms)
        if o.debug { job.debug = true }
        let audience = o.segments.map { RecipientEntry.segment(SegmentID($0)) } + (o.everyone ? [.all] : [])
        if !audience.isEmpty { job.recipients = (job.recipients ?? []) + audience }
        let excluded =
            o.exclude.map { RecipientEntry.id(RecipientID($0)) } + o.excludeSegments.map { .segment(SegmentID($0)) }
        if !excluded.isEmpty { job.exclude = excluded }
        if let text = o.sendAt {
            guard let at = ScheduledTime(text) else {
                throw InputError("--send-at '\(text)' must be an RFC 3339 time with an offset (2026-12-01T09:00:00Z)")
            }
            job.sendAt = at
        }
        if let text = o.deliverAtLocalTime {
            guard let time = LocalDeliveryTime(text) else {
                throw InputError("--deliver-at-local-time '\(text)' must be HH:MM (00:00–23:59)")
            }
            job.deliverAtLocalTime = time
        }
        if let rate = o.throttlePerMinute {
            guard ThrottleRate(perMinute: rate) != nil else {
                let r = ThrottleRate.range
                throw InputError("--throttle-per-minute \(rate) must be \(r.lowerBound)–\(r.upperBound)")
            }
            job.throttlePerMinute = rate
        }
        if o.bypassFrequencyCaps { job.enableFrequencyCap = false }
        return job
    }

    /// Submits the job as the API does (`JobProducer.submit`: the stream, the job record, the org's job list), with an
    /// id: a generated one when none was given, so `--wait` can find the report.
    /// With `waitSeconds`, follows the report stream and returns the job's report (nil on timeout); a Redis that is
    /// failing over meanwhile (`isTransient`) is waited for, with backoff, within the same budget.
    /// `progress`, while waiting: called about once a second with the devices resolved and done so far.
    public static func submit(
        _ job: PushJob, settings: PipelineSettings, waitSeconds: Double?,
        logger: Logger, progress: ((_ resolved: Int, _ done: Int) -> Void)? = nil
    ) throws -> (entry: StreamEntryID, job: JobID, report: JobReport?) {
        var job = job
        let id = job.id ?? JobID.generated()
        job.id = id
        let producer = JobProducer(client: settings.client(name: "send", logger: logger), store: settings.store)
        // Submitted as the API submits: listed at `GET /v1/jobs`, readable at `GET /v1/jobs/{id}`.
        let now = Date()
        guard let waitSeconds else { return (try producer.submit(job, now: now).entry, id, nil) }
        let until = Date().addingTimeInterval(waitSeconds)
        var retry = FailoverRetry(until: until, logger: logger)
        let start = try retry.run("read the report stream", reads: true) { try producer.lastReportID() }
        // The job is submitted again only after an answer that says Redis did not run the script; a second
        // submission of the same job would answer the first entry anyway.
        let entry = try retry.run("enqueue the job", reads: false) { try producer.submit(job, now: now).entry }
        var position = start
        while Date() < until {
            let left = max(1, Int(until.timeIntervalSinceNow * 1000))
            let read = try retry.run("read reports", reads: true) {
                try producer.reports(after: position, blockMillis: min(1000, left))
            }
            position = read.1
            if let r = read.0.first(where: { $0.job == id && $0.org == job.org }) { return (entry, id, r) }
            if let progress, let p = try? producer.progress(org: job.org, job: id) { progress(p.resolved, p.done) }
        }
        return (entry, id, nil)
    }

    /// Whether a failed Redis step of `send --wait` may be tried again: a cluster failing over (`CLUSTERDOWN`,
    /// `TRYAGAIN`, `MASTERDOWN`), a server loading its data set (`LOADING`), or no connection (refused, reset,
    /// timed out). `reads`: a step that only reads, which a lost connection cannot have half done; a write is tried
    /// again only after an error answer, which means Redis did not run it. Anything else (`NOPERM`, `WRONGTYPE`,
    /// a bad address) is a configuration error that waiting does not fix.
    public static func isTransient(_ error: any Error, reads: Bool) -> Bool {
        guard let e = error as? RedisError else { return false }
        if e.kind == .connection { return reads }
        guard e.kind == .server else { return false }
        // The reply's error code starts it, or follows the caller's context ("XADD volley:jobs: CLUSTERDOWN …").
        return ["CLUSTERDOWN", "TRYAGAIN", "LOADING", "MASTERDOWN"].contains { code in
            e.message.hasPrefix(code + " ") || e.message.contains(": \(code) ")
        }
    }

    /// Runs the steps of `send --wait` again while Redis fails over, until the wait budget ends.
    struct FailoverRetry {
        let until: Date
        let logger: Logger
        var failures = 0
        let backoff = ExponentialBackoff(base: 0.1, max: 2, jitter: 0.5)

        mutating func run<T>(_ what: String, reads: Bool, _ body: () throws -> T) throws -> T {
            while true {
                do {
                    let value = try body()
                    failures = 0
                    return value
                } catch  where JobSubmission.isTransient(error, reads: reads) {
                    failures += 1
                    let pause = backoff.delay(afterFailures: failures, unit: Double.random(in: 0..<1))
                    if Date().addingTimeInterval(pause) >= until { throw error }
                    if failures == 1 || failures % 10 == 0 {
                        logger.warning(
                            "redis unavailable while waiting for the report, retrying",
                            metadata: ["step": "\(what)", "error": "\(error)", "attempt": "\(failures)"])
                    }
                    Thread.sleep(forTimeInterval: pause)
                }
            }
        }
    }
}

/// Text and JSON renderings of reports (CLI, demo).
public enum ReportFormatting {
    public static func json(_ r: JobReport) -> String {
        (try? String(decoding: ReportCoding.encoder.encode(r), as: UTF8.self)) ?? "{}"
    }

    public static func text(_ r: JobReport) -> String {
        var lines = [
            "job \(r.job)  org \(r.org)  app \(r.app)  entry \(r.entry?.rawValue ?? "-")  deliveries \(r.deliveries)",
            "  recipients \(r.recipients)  users \(r.users)  noDevices \(r.noDevices)  devices \(r.devices)",
            "  accepted \(r.accepted)  rejected \(r.rejected)  failed \(r.failed)  tokensRemoved \(r.tokensRemoved)"
                + (r.quotaExceeded > 0 ? "  quotaExceeded \(r.quotaExceeded)" : "")
                + ((r.expired ?? 0) > 0 ? "  expired \(r.expired ?? 0)" : "")
                + (r.alreadyRecorded > 0 ? "  alreadyRecorded \(r.alreadyRecorded)" : "")
                + (r.capped.map { "  capped \($0)" } ?? ""),
        ]
        if !r.rejectedByReason.isEmpty {
            lines.append(
                "  rejected by reason: "
                    + r.rejectedByReason.sorted { $0.key < $1.key }.map { "\($0.key)=\($0.value)" }.joined(
                        separator: " "))
        }
        if !r.failedByReason.isEmpty {
            lines.append(
                "  failed by reason: "
                    + r.failedByReason.sorted { $0.key < $1.key }.map { "\($0.key)=\($0.value)" }.joined(separator: " ")
            )
        }
        if let f = r.finishedAt {
            lines.append(String(format: "  took %.2f s", f.timeIntervalSince(r.startedAt)))
        }
        return lines.joined(separator: "\n")
    }

    /// One row per report, aligned.
    public static func table(_ reports: [JobReport]) -> String {
        let header = ["job", "devices", "accepted", "rejected", "failed", "tokensRemoved", "noDevices", "seconds"]
        var rows = [header]
        for r in reports {
            let secs = r.finishedAt.map { String(format: "%.2f", $0.timeIntervalSince(r.startedAt)) } ?? "-"
            rows.append([
                r.job.rawValue, "\(r.devices)", "\(r.accepted)", "\(r.rejected)", "\(r.failed)",
                "\(r.tokensRemoved)", "\(r.noDevices)", secs,
            ])
        }
        let widths = header.indices.map { i in rows.map { $0[i].count }.max() ?? 0 }
        return rows.map { row in
            row.enumerated().map { i, c in
                i == 0
                    ? c.padding(toLength: widths[i], withPad: " ", startingAt: 0)
                    : String(repeating: " ", count: widths[i] - c.count) + c
            }
            .joined(separator: "  ")
        }.joined(separator: "\n")
    }
}
