import ArgumentParser
import Foundation
import Logging
import VolleyCore
import VolleyService

/// Loads and validates the configuration; bootstraps logging once per process.
func loadConfiguration(_ path: String) throws -> VolleyConfiguration {
    do {
        let c = try VolleyConfiguration.load(path: path)
        LoggingBootstrap.bootstrap(c.log)
        return c
    } catch let e as ConfigurationError {
        throw ValidationError(e.description)
    }
}

struct Worker: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Run a worker: consume jobs from the Redis stream and send them.",
        discussion: "SIGTERM/SIGINT drain gracefully: reading stops, in-flight jobs finish within worker.drainSeconds, "
            + "unfinished jobs stay pending for other workers, exit status 0.")

    @Option(help: "YAML configuration file.") var config: String
    @Option(help: "Consumer name in the group (default: worker.consumer, else host-pid).") var consumer: String?

    func run() async throws {
        let c = try loadConfiguration(config)
        let settings = try PipelineSettings(c, consumerOverride: consumer)
        // A parent (CI runner, test) may have blocked SIGTERM; a daemon must still drain on it (and reload on HUP).
        SignalMask.unblockTerminationSignals()
        SignalMask.unblockReloadSignal()
        let metrics = MetricsBackend.bootstrap(c)
        let logger = Logger(label: "volley.worker")
        // Held for the worker's lifetime (the kernel drops it when the process exits, however it exits).
        let wakeLatency = CPUWakeLatencyRequest.holdConfigured(
            c.worker.cpuWakeLatencyUs, key: "worker.cpuWakeLatencyUs",
            logger: logger)
        defer { wakeLatency?.release() }
        for warning in c.warnings { logger.warning("\(warning)") }
        // One APNs provider token per (team, key) and the providers' pauses, shared with the fleet through Redis.
        let fleet = FleetSync(settings: settings, logger: logger)
        fleet.start()
        defer { fleet.stop() }
        // Directory resolution (groups, queues, teams), in-app inbox, notification types, hourly quotas.
        let recipients = try RecipientServices(configuration: c, name: settings.worker.consumer)
        try await WorkerRunner.run(
            configuration: c, settings: settings, metrics: metrics, logger: logger,
            resolver: recipients.resolver(usersPerRead: settings.worker.chunkSize),
            quota: recipients.quota,
            personalContent: recipients.personalContent(deviceKeyCacheSize: c.worker.deviceKeyCacheSize), fleet: fleet,
            throttle: recipients.throttle)
    }
}

struct Send: AsyncParsableCommand {
    static let configuration = CommandConfiguration(abstract: "Enqueue a job.")

    @Option(help: "YAML configuration file.") var config: String
    @Option(help: "Organisation id.") var org: String
    @Option(help: "App name (apps[].name).") var app: String
    @Option(help: "Recipient user ids, comma-separated (at most 500).") var users: String?
    @Option(
        help:
            ArgumentHelp(
                "Recipient ids of any kind (users, groups, queues, account/opportunity teams), comma-separated; with "
                    + "--users at most 500 in all.")
    ) var recipients: String?
    @Option(help: "A segment of the org (volley segments put): every user it matches (repeatable).")
    var segment: [String] = []
    @Flag(help: "Every user with a device for the app.") var all = false
    @Option(help: "Recipient ids whose members get nothing, comma-separated.") var exclude: String?
    @Option(name: .customLong("exclude-segment"), help: "A segment whose users get nothing (repeatable).")
    var excludeSegment: [String] = []
    @Option(help: "An explicit device, platform:TOKEN (repeatable).") var token: [String] = []
    @Option(help: "Alert title.") var title: String?
    @Option(help: "Alert body.") var body: String?
    @Flag(help: "Silent (content-available) push.") var silent = false
    @Option(help: "Custom data key=value (repeatable).") var data: [String] = []
    @Option(help: "The whole notification as JSON (camelCase keys).") var notification: String?
    @Option(help: "Only these platforms, comma-separated (ios,android).") var platforms: String?
    @Option(help: "Job id (idempotency key); default: generated.") var id: String?
    @Flag(help: "Record debug events per user and device (read them with volley events --job ID).")
    var debug = false
    @Option(name: .customLong("send-at"), help: "Send at this RFC 3339 time (2026-12-01T09:00:00Z or +01:00).")
    var sendAt: String?
    @Option(
        name: .customLong("deliver-at-local-time"),
        help: "HH:MM on each recipient's own clock (the device's zone, else the user's, else the org's, else UTC).")
    var deliverAtLocalTime: String?
    @Option(
        name: .customLong("throttle-per-minute"),
        help: "The fleet sends at most this many of the job's pushes a minute.")
    var throttlePerMinute: Int?
    @Flag(
        name: .customLong("no-frequency-cap"), help: "The org's frequency caps neither hold this job back nor count it."
    )
    var noFrequencyCap = false
    @Flag(help: "Wait for the job's report and print it.") var wait = false
    @Flag(help: "With --wait: print the report as one JSON object.") var json = false
    @Option(help: "With --wait: give up after this many seconds (exit 2).") var timeout: Double = 120

    func run() async throws {
        let c = try loadConfiguration(config)
        let settings = try PipelineSettings(c)
        var o = JobSubmission.Options(org: org, app: app)
        o.users = ((users ?? "") + "," + (recipients ?? "")).split(separator: ",")
            .map { $0.trimmingCharacters(in: .whitespaces) }.filter { !$0.isEmpty }
        o.tokens = token
        o.segments = segment
        o.everyone = all
        o.exclude = (exclude ?? "").split(separator: ",").map { $0.trimmingCharacters(in: .whitespaces) }
            .filter { !$0.isEmpty }
        o.excludeSegments = excludeSegment
        o.title = title
        o.body = body
        o.silent = silent
        o.data = data
        o.notificationJSON = notification
        o.id = id
        o.debug = debug
        o.platforms = (platforms ?? "").split(separator: ",").map(String.init)
        o.sendAt = sendAt
        o.deliverAtLocalTime = deliverAtLocalTime
        o.throttlePerMinute = throttlePerMinute
        o.bypassFrequencyCaps = noFrequencyCap
        let job: PushJob
        do { job = try JobSubmission.buildJob(o) } catch { throw ValidationError("\(error)") }
        // What the workers would dead-letter is refused here: a time more than a minute past or too far ahead.
        if case .refused(let r) = JobTiming.of(
            sendAt: job.sendAt, now: Date(), maxAheadDays: c.schedule.maxAheadDays, promoted: false)
        {
            throw ValidationError("--send-at: \(r.message)")
        }
        guard let appSettings = c.app(named: job.app) else {
            throw ValidationError("--app \(job.app) is not configured (apps[].name in \(config))")
        }
        guard appSettings.orgs.allows(job.org) else {
            throw ValidationError("--org \(job.org) may not send through app \(job.app) (apps[\(job.app)].orgs)")
        }
        let logger = Logger(label: "volley.send")
        let wait = self.wait
        let timeout = self.timeout
        let result = try await runBlocking {
            // Devices done of devices resolved, with a rate, on a terminal's stderr while the job runs.
            var bar = ProgressBar(unit: "devices done", total: nil, enabled: wait && isatty(STDERR_FILENO) == 1)
            var drawn = false
            let r = try JobSubmission.submit(
                job, settings: settings, waitSeconds: wait ? timeout : nil, logger: logger
            ) { resolved, done in
                guard resolved > 0 else { return }
                bar.total = resolved
                bar.update(done: done)
                drawn = true
            }
            if drawn, let report = r.report {
                bar.total = report.devices
                bar.finish(done: report.devices)
            }
            return r
        }
        if !wait {
            print(
                "enqueued job \(result.job) as entry \(result.entry) on "
                    + settings.store.jobStream(shard: result.entry.shard))
            return
        }
        guard let report = result.report else {
            FileHandle.standardError.write(
                Data("no report for job \(result.job) within \(Int(timeout)) s; is a worker running?\n".utf8))
            throw ExitCode(2)
        }
        print(json ? ReportFormatting.json(report) : ReportFormatting.text(report))
    }
}

struct Devices: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Manage the device registry.",
        subcommands: [Register.self, Unregister.self, List.self, Import.self])

    struct Register: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Register (or refresh) one device.")
        @Option(help: "YAML configuration file.") var config: String
        @Option var org: String
        @Option var app: String
        @Option var user: String
        @Option(help: "ios or android.") var platform: String
        @Option var token: String
        @Option(help: "iOS: production or sandbox.") var environment: String?
        @Option var locale: String?
        @Option(help: "The app's RSA public key for encrypted pushes: base64 of the X.509 SubjectPublicKeyInfo DER.")
        var rsaPublicKey: String?
        @Option(help: "RSA_OAEP_SHA256, or leave out for a key the app decrypts with PKCS #1 v1.5.")
        var cipherName: String?
        @Option(help: "The device's IANA time zone (Europe/Berlin), for deliverAtLocalTime.")
        var timeZone: String?

        func run() async throws {
            let c = try loadConfiguration(config)
            let settings = try PipelineSettings(c)
            guard let p = Platform(rawValue: platform.lowercased()) else {
                throw ValidationError("--platform must be ios or android")
            }
            let (rsaPublicKey, cipherName, timeZone) = (self.rsaPublicKey, self.cipherName, self.timeZone)
            var parsedEnv: APNSEnvironment?
            if let environment {
                guard let e = APNSEnvironment(rawValue: environment) else {
                    throw ValidationError("--environment must be production or sandbox")
                }
                parsedEnv = e
            }
            let env = parsedEnv
            let (org, app, user, token, locale) = (
                OrgID(self.org), AppName(self.app), UserID(self.user), DeviceToken(self.token), self.locale
            )
            do {
                try await runBlocking {
                    try DeviceCommands.register(
                        settings: settings, org: org, app: app, user: user, platform: p,
                        token: token, environment: env, locale: locale, rsaPublicKey: rsaPublicKey,
                        cipherName: cipherName, timeZone: timeZone)
                }
            } catch let e as DeviceRegistrationError {
                throw ValidationError("--\(Self.flag(e.field)): \(e.message)")
            }
            print("registered \(p) device \(token.redacted) for user \(user)")
        }

        /// The flag of a registration field: `rsaPublicKey` → `rsa-public-key`.
        static func flag(_ field: String) -> String {
            field.reduce(into: "") { out, c in
                if c.isUppercase { out += "-" + c.lowercased() } else { out.append(c) }
            }
        }
    }

    struct Unregister: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Remove one device token.")
        @Option(help: "YAML configuration file.") var config: String
        @Option var org: String
        @Option var app: String
        @Option(help: "ios or android.") var platform: String
        @Option var token: String

        func run() async throws {
            let c = try loadConfiguration(config)
            let settings = try PipelineSettings(c)
            guard let p = Platform(rawValue: platform.lowercased()) else {
                throw ValidationError("--platform must be ios or android")
            }
            let (org, app, token) = (OrgID(self.org), AppName(self.app), DeviceToken(self.token))
            let removed = try await runBlocking {
                try DeviceCommands.session(settings).unregister(org: org, app: app, platform: p, token: token)
            }
            print(removed ? "removed \(token.redacted)" : "\(token.redacted) was not registered")
            if !removed { throw ExitCode(1) }
        }
    }

    struct List: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "List devices of a user, or of every user of an app.")
        @Option(help: "YAML configuration file.") var config: String
        @Option var org: String
        @Option var app: String
        @Option(help: "Only this user.") var user: String?
        @Flag(help: "One JSON object per device (tokens in full).") var json = false
        @Option(help: "Stop after this many devices.") var limit: Int = 1000

        func run() async throws {
            let c = try loadConfiguration(config)
            let settings = try PipelineSettings(c)
            let (org, app, user, json, limit) = (
                OrgID(self.org), AppName(self.app), self.user.map(UserID.init), self.json, self.limit
            )
            try await runBlocking {
                try DeviceCommands.list(settings: settings, org: org, app: app, user: user, json: json, limit: limit)
            }
        }
    }

    struct Import: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Import devices from JSONL or CSV.",
            discussion:
                #"JSONL: one {"org","app","user","platform","token"[,"environment","locale","rsaPublicKey","#
                + #""cipherName","timeZone"]} per line. CSV: a header naming those columns."#
        )
        @Option(help: "YAML configuration file.") var config: String
        @Argument(help: "FILE.jsonl or FILE.csv") var file: String
        @Option(help: "jsonl or csv (default: from the file name).") var format: String?

        func run() async throws {
            let c = try loadConfiguration(config)
            let settings = try PipelineSettings(c)
            var parsed: DeviceImport.Format?
            if let format {
                guard let f = DeviceImport.Format(rawValue: format) else {
                    throw ValidationError("--format must be jsonl or csv")
                }
                parsed = f
            }
            let fmt = parsed
            let file = self.file
            let started = Date()
            let result = try await runBlocking {
                var bar = ProgressBar(unit: "lines", total: ProgressBar.countLines(path: file))
                let r = try DeviceImport.run(path: file, session: DeviceCommands.session(settings), format: fmt) { p in
                    bar.update(done: p.lines, detail: "\(p.imported) devices imported, \(p.invalid) invalid")
                }
                bar.finish(done: r.lines, detail: "\(r.imported) devices imported, \(r.invalid) invalid")
                return r
            }
            for p in result.problems { FileHandle.standardError.write(Data("  \(p)\n".utf8)) }
            print(
                String(
                    format: "imported %d devices from %d lines, %d invalid, in %.1f s",
                    result.imported, result.lines, result.invalid, Date().timeIntervalSince(started)))
            if result.invalid > 0 { throw ExitCode(1) }
        }
    }
}

struct Demo: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Run Volley end to end on local defaults (own Redis, bundled mock).",
        discussion:
            "Starts redis-server (unix socket in a temp dir) unless --redis is given, starts volley-mock, "
            + "registers demo devices, enqueues a campaign and a silent hint, runs a worker, prints the reports, "
            + "cleans up."
    )

    @Option(help: "Use this Redis instead of starting one (redis://[user:pass@]host:port/db or unix:///path).")
    var redis: String?
    @Option(help: "Demo users (jobs carry at most 500 each).") var users: Int = 1_000
    @Option(help: "Devices per demo user (500 users × 200 = one 100,000-device job).") var devicesPerUser: Int = 3
    @Option(help: "Worker in-flight sends.") var inFlight: Int = 1000
    @Flag(help: "Keep the temp dir (config, mock state, logs).") var keep = false

    func run() async throws {
        var o = VolleyService.Demo.Options()
        o.redisURL = redis
        o.users = max(1, users)
        o.keep = keep
        o.devicesPerUser = max(1, devicesPerUser)
        o.inFlight = max(2, inFlight)
        let exeDir = URL(fileURLWithPath: CommandLine.arguments[0]).resolvingSymlinksInPath()
            .deletingLastPathComponent().path
        let dir =
            FileManager.default.isExecutableFile(atPath: exeDir + "/volley-mock")
            ? exeDir
            : (Bundle.main.executableURL?.resolvingSymlinksInPath().deletingLastPathComponent().path ?? exeDir)
        let options = o
        do {
            try await runBlocking {
                try VolleyService.Demo.run(options, executableDirectory: dir) { line in
                    FileHandle.standardOutput.write(
                        Data((line.hasPrefix("\r") || line == "\n" ? line : line + "\n").utf8))
                }
            }
        } catch let e as VolleyService.Demo.Failure {
            throw ValidationError(e.description)
        }
    }
}
