import Foundation
import Logging
import VolleyCore
import VolleyEngine
import VolleyRedis
import VolleyStore

/// `volley demo`: Volley end to end on one machine. Starts its own `redis-server` (unix socket in a temp dir) unless
/// given a Redis URL, starts `volley-mock` (next to the `volley` executable) with a temp state dir, writes a config
/// pointing at both, registers demo devices (iOS + Android, some unregistered at the mock), enqueues a campaign and
/// a silent "record changed" hint, runs a worker in-process, shows progress, prints the reports, cleans up.
public enum Demo {
    public struct Options: Sendable {
        public var redisURL: String?
        public var users = 1_000
        public var devicesPerUser = 3
        /// Share of tokens the mock answers "unregistered" (they get removed from the registry).
        public var unregisteredPercent = 2
        public var keep = false
        public var inFlight = 1000
        public var mockBinary: String?
        public init() {}
    }

    public struct Failure: Error, CustomStringConvertible {
        public let description: String
        init(_ d: String) { description = d }
    }

    /// Children started by the demo; killed (SIGKILL) and their temp dir removed by `cleanUp`.
    final class Children: @unchecked Sendable {
        var processes: [Process] = []
        func cleanUp() {
            for p in processes where p.isRunning {
                kill(p.processIdentifier, SIGKILL)
                p.waitUntilExit()
            }
        }
    }

    public static func run(_ o: Options, executableDirectory: String, output: @escaping @Sendable (String) -> Void)
        throws
    {
        let started = Date()
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent(
            "volley-demo-\(UUID().uuidString.prefix(8).lowercased())")
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        let children = Children()
        defer {
            children.cleanUp()
            if !o.keep { try? FileManager.default.removeItem(at: dir) }
        }
        var logger = Logger(label: "volley.demo")
        logger.logLevel = .warning

        // 1. Redis.
        let redisURL: String
        if let url = o.redisURL {
            redisURL = url
            output("redis:  \(try RedisEndpoint(url: url))")
        } else {
            let sock = dir.appendingPathComponent("r.sock").path
            let p = Process()
            p.executableURL = URL(fileURLWithPath: try which("redis-server", hint: "apt-get install redis-server"))
            p.arguments = [
                "--port", "0", "--unixsocket", sock, "--unixsocketperm", "700", "--save", "", "--appendonly", "no",
                "--dir", dir.path, "--logfile", dir.appendingPathComponent("redis.log").path,
            ]
            try p.run()
            children.processes.append(p)
            redisURL = "unix://\(sock)"
            try waitFor("redis-server on \(sock)", timeout: 10) {
                (try? RedisConnection(endpoint: .unix(sock), connectTimeout: 0.5).command(["PING"])) == .status("PONG")
            }
            output("redis:  started redis-server on \(sock)")
        }

        // 2. The mock.
        let mockBin = o.mockBinary ?? (executableDirectory + "/volley-mock")
        guard FileManager.default.isExecutableFile(atPath: mockBin) else {
            throw Failure(
                "volley-mock not found at \(mockBin); build it with `swift build` (it is built next to volley)")
        }
        let stateDir = dir.appendingPathComponent("mock").path
        let mockConfig = dir.appendingPathComponent("mock.json").path
        try #"{"apns": {"unregisteredPrefixes": ["dead"]}, "fcm": {"unregisteredPrefixes": ["dead"]}}"#
            .write(toFile: mockConfig, atomically: true, encoding: .utf8)
        let mock = Process()
        mock.executableURL = URL(fileURLWithPath: mockBin)
        mock.arguments = ["--port", "0", "--state-dir", stateDir, "--config", mockConfig]
        mock.standardOutput = FileHandle.nullDevice
        try mock.run()
        children.processes.append(mock)
        let endpointsFile = stateDir + "/endpoints.json"
        try waitFor("volley-mock endpoints at \(endpointsFile)", timeout: 20) {
            (try? LocalConfiguration(endpointsFile: endpointsFile, redisURL: redisURL)) != nil || !mock.isRunning
        }
        guard mock.isRunning else { throw Failure("volley-mock exited with status \(mock.terminationStatus)") }
        var local = try LocalConfiguration(endpointsFile: endpointsFile, redisURL: redisURL)
        local.appName = "demo"
        let configPath = dir.appendingPathComponent("volley.yaml").path
        try local.write(to: configPath)
        output("mock:   volley-mock (APNs + FCM) on \(local.mockHost):\(local.mockPort)")
        output("config: \(configPath)\(o.keep ? "" : " (removed at exit; --keep to keep it)")")

        // 3. Devices.
        let endpoint = try RedisEndpoint(url: redisURL)
        let consumer = "demo-\(ProcessInfo.processInfo.processIdentifier)"
        let store = StoreConfiguration()
        let backend = RedisPipelineBackend(
            endpoint: endpoint, store: store, consumer: consumer,
            options: .init(giveUpAfter: 10), logger: logger)
        let admin = backend.makeRedisSession(name: "demo-admin")
        let org = OrgID("demo-org")
        let app = AppName("demo")
        var records: [DeviceImportRecord] = []
        var unregistered = 0
        for u in 0..<o.users {
            for d in 0..<o.devicesPerUser {
                let n = u * o.devicesPerUser + d
                let dead = o.unregisteredPercent > 0 && n % (100 / max(1, o.unregisteredPercent)) == 7
                if dead { unregistered += 1 }
                let platform: Platform = n % 3 == 2 ? .android : .ios
                let token =
                    (dead ? "dead" : "a11d") + String(format: "%08x%04x", u, d) + String(repeating: "c", count: 52)
                records.append(
                    DeviceImportRecord(
                        org: org, app: app, user: UserID("u\(u)"), platform: platform,
                        token: DeviceToken(platform == .ios ? token : "fcm-" + token),
                        environment: platform == .ios ? .production : nil, locale: "en"))
            }
        }
        for chunk in stride(from: 0, to: records.count, by: 2_000) {
            try admin.register(Array(records[chunk..<min(records.count, chunk + 2_000)]))
        }
        output(
            "devices: registered \(records.count) devices for \(o.users) users "
                + "(\(records.filter { $0.platform == .ios }.count) iOS, "
                + "\(records.filter { $0.platform == .android }.count) Android; \(unregistered) unregistered at "
                + "the mock)"
        )

        // 4. Jobs: a campaign in jobs of ≤ 500 recipients, plus one silent hint.
        let producer = JobProducer(
            client: RedisClient(
                endpoint: endpoint, options: .init(giveUpAfter: 10), name: "demo-producer", logger: logger),
            store: store)
        var jobIDs: [JobID] = []
        let users = (0..<o.users).map { RecipientID("u\($0)") }
        for (i, start) in stride(from: 0, to: users.count, by: PushJob.maxRecipients).enumerated() {
            let id = JobID("campaign-part-\(i + 1)")
            try producer.enqueue(
                PushJob(
                    id: id, org: org, app: app,
                    recipients: Array(users[start..<min(users.count, start + PushJob.maxRecipients)]),
                    notification: VolleyCore.Notification(
                        title: "Spring sale", body: "20% off today",
                        localized: ["es": .init(title: "Rebajas", body: "20% hoy")])))
            jobIDs.append(id)
        }
        let hint = JobID("record-changed-hint")
        try producer.enqueue(
            PushJob(
                id: hint, org: org, app: app, recipients: Array(users.prefix(10)),
                notification: VolleyCore.Notification(
                    data: ["recordId": .string("001xx000003DGb2")],
                    contentAvailable: true)))
        jobIDs.append(hint)
        output("jobs:   enqueued \(jobIDs.count) jobs on \(store.jobStream)")

        // 5. Worker.
        let apps = try PipelineApps.directory(configFile: configPath, logger: logger)
        defer { apps.shutdown() }
        let worker = PipelineWorker(
            configuration: WorkerConfiguration(
                consumer: consumer, concurrentJobs: 2, inFlight: o.inFlight,
                blockMillis: 200),
            backend: backend, apps: apps, logger: logger)
        try worker.start()
        defer { worker.drain(deadline: 5) }
        let deadline = Date().addingTimeInterval(120)
        var reports: [JobReport] = []
        while Date() < deadline {
            reports = try producer.allReports().filter { jobIDs.contains($0.job) }
            let st = worker.stats
            output(
                "\rprogress: \(st.outcomesRecorded) outcomes recorded, \(reports.count)/\(jobIDs.count) jobs done   ")
            if reports.count == jobIDs.count { break }
            Thread.sleep(forTimeInterval: 0.25)
        }
        output("\n")
        guard reports.count == jobIDs.count else {
            throw Failure("only \(reports.count) of \(jobIDs.count) jobs finished within 120 s")
        }
        reports.sort { jobIDs.firstIndex(of: $0.job)! < jobIDs.firstIndex(of: $1.job)! }
        output(ReportFormatting.table(reports))
        let (_, left) = try admin.counts(org: org, app: app)
        let total = reports.reduce(0) { $0 + $1.accepted }
        output(
            String(
                format: "\n%d accepted, %d tokens removed (registry now %d devices); %.1f s in all",
                total, reports.reduce(0) { $0 + $1.tokensRemoved }, left, Date().timeIntervalSince(started)))
        if let biggest = reports.max(by: { $0.devices < $1.devices }), let f = biggest.finishedAt {
            let secs = max(0.001, f.timeIntervalSince(biggest.startedAt))
            var usage = rusage()
            getrusage(__rusage_who_t(RUSAGE_SELF.rawValue), &usage)
            output(
                String(
                    format:
                        "largest job: %d devices in %.2f s = %.0f devices/s on one worker; peak RSS of this "
                        + "process (worker + registry loading) %.1f MiB",
                    biggest.devices, secs, Double(biggest.devices) / secs, Double(usage.ru_maxrss) / 1024))
        }
    }

    static func which(_ name: String, hint: String) throws -> String {
        for d in (ProcessInfo.processInfo.environment["PATH"] ?? "/usr/bin:/usr/local/bin").split(separator: ":") + [
            "/usr/sbin", "/usr/bin",
        ] {
            let p = "\(d)/\(name)"
            if FileManager.default.isExecutableFile(atPath: p) { return p }
        }
        throw Failure("\(name) not found on PATH (\(hint)), or pass --redis URL")
    }

    static func waitFor(_ what: String, timeout: Double, _ ok: () -> Bool) throws {
        let until = Date().addingTimeInterval(timeout)
        while Date() < until {
            if ok() { return }
            Thread.sleep(forTimeInterval: 0.05)
        }
        throw Failure("timed out after \(Int(timeout)) s waiting for \(what)")
    }
}
