// swift-format-ignore-file: AlwaysUseLowerCamelCase

// The result types' properties are the `--json` keys (snake_case, a contract with users' scripts), named as written.
import Foundation
import Logging
import VolleyHTTP2

// Helpers of the end-to-end benchmark (`volley-bench e2e`): child processes, /proc sampling, a redis-server and a
// volley-mock started for the run, and a small HTTP/2 client for the mock's stats. Benchmark code: it runs in the
// `volley` CLI only, never inside a test or a worker.

/// Errors of the benchmark tooling; the message says what to do.
public struct BenchError: Error, CustomStringConvertible, Sendable {
    public let description: String
    public init(_ description: String) { self.description = description }
}

/// Monotonic seconds (CLOCK_MONOTONIC).
@inline(__always) func benchNow() -> Double {
    var ts = timespec()
    clock_gettime(CLOCK_MONOTONIC, &ts)
    return Double(ts.tv_sec) + Double(ts.tv_nsec) / 1e9
}

/// What /proc says about one process: CPU seconds (user + system), resident set sizes, threads and open files.
public struct ProcessSample: Sendable, Hashable, Codable {
    public var cpuSeconds: Double
    public var rssMB: Double
    /// VmHWM: the peak resident set size over the process's life.
    public var peakRSSMB: Double
    /// VmRSS as the kernel gives it, in kB.
    public var rssKB: Int
    /// `Threads:` of /proc/<pid>/status.
    public var threads: Int
    /// Entries of /proc/<pid>/fd: the open file descriptors (sockets, pipes and files alike).
    public var fds: Int

    static let ticksPerSecond = Double(sysconf(Int32(_SC_CLK_TCK)))

    /// Reads /proc/<pid>/stat (utime + stime), /proc/<pid>/status (VmRSS, VmHWM, Threads) and counts
    /// /proc/<pid>/fd. nil when the process is gone.
    public static func read(pid: Int32) -> ProcessSample? {
        guard let stat = try? String(contentsOfFile: "/proc/\(pid)/stat", encoding: .utf8),
            let close = stat.lastIndex(of: ")")
        else { return nil }
        // Fields after "comm)": state is field 3; utime and stime are fields 14 and 15.
        let rest = stat[stat.index(after: close)...].split(separator: " ")
        guard rest.count > 13, let ut = Double(rest[11]), let st = Double(rest[12]) else { return nil }
        var rss = 0.0
        var hwm = 0.0
        var threads = 0.0
        if let status = try? String(contentsOfFile: "/proc/\(pid)/status", encoding: .utf8) {
            for line in status.split(separator: "\n") {
                if line.hasPrefix("VmRSS:") {
                    rss = number(line)
                } else if line.hasPrefix("VmHWM:") {
                    hwm = number(line)
                } else if line.hasPrefix("Threads:") {
                    threads = number(line)
                }
            }
        }
        let fds = (try? FileManager.default.contentsOfDirectory(atPath: "/proc/\(pid)/fd").count) ?? 0
        return ProcessSample(
            cpuSeconds: (ut + st) / ticksPerSecond, rssMB: rss / 1024, peakRSSMB: hwm / 1024, rssKB: Int(rss),
            threads: Int(threads), fds: fds)
    }

    /// The number after a status line's label (`VmRSS:\t   1234 kB` → 1234, `Threads:\t29` → 29): the label ends
    /// with a tab, and the number may be padded with spaces.
    static func number(_ line: Substring) -> Double {
        Double(line.split(whereSeparator: { $0 == " " || $0 == "\t" }).dropFirst().first ?? "0") ?? 0
    }
}

/// A child process started by the benchmark (redis-server, volley-mock, worker, h2load, python). Output goes to a log
/// file in the run's directory. Stopped with SIGTERM (graceful: workers drain), then SIGKILL after a grace period.
public final class BenchChild: @unchecked Sendable {
    public let name: String
    public let process: Process
    public let logFile: String

    public init(
        name: String, executable: String, arguments: [String], logFile: String,
        environment: [String: String]? = nil
    ) throws {
        self.name = name
        self.logFile = logFile
        FileManager.default.createFile(atPath: logFile, contents: nil)
        guard let log = FileHandle(forWritingAtPath: logFile) else { throw BenchError("cannot write \(logFile)") }
        let p = Process()
        p.executableURL = URL(fileURLWithPath: executable)
        p.arguments = arguments
        p.standardOutput = log
        p.standardError = log
        p.standardInput = FileHandle.nullDevice
        if let environment { p.environment = environment }
        do { try p.run() } catch {
            throw BenchError("cannot start \(name) (\(executable)): \(error.localizedDescription)")
        }
        process = p
    }

    public var pid: Int32 { process.processIdentifier }
    public var isRunning: Bool { process.isRunning }
    public func sample() -> ProcessSample? { ProcessSample.read(pid: pid) }

    /// The last lines of the log (for error messages).
    public func logTail(_ lines: Int = 15) -> String {
        let text = (try? String(contentsOfFile: logFile, encoding: .utf8)) ?? ""
        return text.split(separator: "\n").suffix(lines).joined(separator: "\n")
    }

    /// SIGTERM, wait up to `grace` seconds, then SIGKILL. Returns the exit status (or -1 when killed).
    @discardableResult
    public func stop(grace: Double = 10) -> Int32 {
        guard process.isRunning else { return process.terminationStatus }
        kill(pid, SIGTERM)
        let until = benchNow() + grace
        while process.isRunning && benchNow() < until { usleep(10_000) }
        if process.isRunning {
            kill(pid, SIGKILL)
            process.waitUntilExit()
            return -1
        }
        return process.terminationStatus
    }

    /// Waits for the process to exit by itself (for one-shot tools) with a time limit; kills it past the limit.
    public func wait(timeout: Double) -> Int32? {
        let until = benchNow() + timeout
        while process.isRunning && benchNow() < until { usleep(5_000) }
        if process.isRunning {
            kill(pid, SIGKILL)
            process.waitUntilExit()
            return nil
        }
        return process.terminationStatus
    }
}

/// Finds an executable on PATH.
func which(_ name: String) -> String? {
    for dir in (ProcessInfo.processInfo.environment["PATH"] ?? "/usr/bin:/bin").split(separator: ":") {
        let p = "\(dir)/\(name)"
        if FileManager.default.isExecutableFile(atPath: p) { return p }
    }
    return nil
}

/// The running benchmark executable (`volley-bench`), which runs its own subcommands as child processes.
public func benchExecutablePath() -> String {
    (try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/exe")) ?? CommandLine.arguments[0]
}

/// The folder of the running executable: `volley` and `volley-mock` are built next to `volley-bench`.
public func volleyExecutableDirectory() -> String {
    URL(fileURLWithPath: benchExecutablePath()).deletingLastPathComponent().path
}

/// The `volley` executable the benchmarks start (workers, the API, `keys create`).
public func volleyExecutablePath() -> String { volleyExecutableDirectory() + "/volley" }

/// A redis-server on a unix socket in a temporary folder, no persistence; with `tcpPort`, on that loopback port too
/// (and `url` names the port: a cluster is reached over TCP, so a comparison with one uses TCP on both sides).
/// With `appendOnly`, an append-only file in the folder (`appendfsync everysec`, Redis's default), so `shutDown()`
/// and `start()` keep the data, as a deployment with persistence does.
public final class BenchRedis: @unchecked Sendable {
    public private(set) var child: BenchChild
    public let socket: String
    public let tcpPort: Int?
    public var url: String { tcpPort.map { "redis://127.0.0.1:\($0)/0" } ?? "unix://\(socket)" }
    private let executable: String
    private let arguments: [String]
    private let logFile: String
    private var starts = 0

    public init(directory: String, tcpPort: Int? = nil, appendOnly: Bool = false) throws {
        guard let exe = which("redis-server") else {
            throw BenchError("redis-server not found: apt-get install -y redis-server (or pass --redis URL)")
        }
        socket = directory + "/r.sock"
        self.tcpPort = tcpPort
        executable = exe
        arguments = [
            "--port", String(tcpPort ?? 0), "--bind", "127.0.0.1", "--unixsocket", socket, "--save", "",
            "--appendonly", appendOnly ? "yes" : "no", "--dir", directory, "--maxclients", "1000",
        ]
        logFile = directory + "/redis.log"
        child = try BenchChild(name: "redis-server", executable: exe, arguments: arguments, logFile: logFile)
        try waitForSocket()
    }

    private func waitForSocket() throws {
        let until = benchNow() + 10
        while !FileManager.default.fileExists(atPath: socket) {
            if !child.isRunning || benchNow() > until {
                throw BenchError("redis-server did not start:\n\(child.logTail())")
            }
            usleep(10_000)
        }
    }

    /// Stops the server (SIGTERM: Redis writes its append-only file and removes the socket) and leaves it down.
    public func shutDown() { child.stop(grace: 10) }

    /// Starts the server again with the same arguments (same socket, port and folder), logging to
    /// `redis.log.<n>` for the n-th start.
    public func start() throws {
        guard !child.isRunning else { return }
        try? FileManager.default.removeItem(atPath: socket)
        starts += 1
        child = try BenchChild(
            name: "redis-server", executable: executable, arguments: arguments, logFile: logFile + ".\(starts)")
        try waitForSocket()
    }

    public func stop() { child.stop(grace: 3) }
}

/// What a `volley-mock` endpoints.json says.
public struct MockEndpoints: Sendable, Hashable, Codable {
    public var host: String
    public var port: Int
    public var caFile: String
    public var p8File: String
    public var keyID: String
    public var teamID: String
    public var topic: String
    public var serviceAccountFile: String
    public var projectID: String
    public var file: String

    public init(file: String) throws {
        guard let data = FileManager.default.contents(atPath: file),
            let o = try? JSONSerialization.jsonObject(with: data) as? [String: Any],
            let host = o["host"] as? String, let port = o["port"] as? Int, let ca = o["ca_file"] as? String,
            let apns = o["apns"] as? [String: Any], let fcm = o["fcm"] as? [String: Any],
            let p8 = apns["p8_file"] as? String, let keyID = apns["key_id"] as? String,
            let team = apns["team_id"] as? String, let topic = apns["topic"] as? String,
            let sa = fcm["service_account_file"] as? String
        else {
            throw BenchError("\(file) is not a volley-mock endpoints file (host, port, ca_file, apns{…}, fcm{…})")
        }
        self.host = host
        self.port = port
        caFile = ca
        p8File = p8
        self.keyID = keyID
        teamID = team
        self.topic = topic
        serviceAccountFile = sa
        projectID = fcm["project_id"] as? String ?? ""
        self.file = file
    }
}

/// A `volley-mock` started for the run (next to the `volley` executable). With `port`, on that port (a restart
/// takes the port it had); with `acceptJournal`, every accepted send is appended to that file (`MockAcceptJournal`).
/// The state folder is `directory/mock`: a mock started again in the same directory has the same CA and keys.
public final class BenchMock: @unchecked Sendable {
    public let child: BenchChild
    public let endpoints: MockEndpoints

    public init(
        directory: String, configJSON: String, port: Int = 0, acceptJournal: String? = nil,
        executableDirectory: String = volleyExecutableDirectory(), logName: String = "mock.log"
    ) throws {
        let exe = executableDirectory + "/volley-mock"
        guard FileManager.default.isExecutableFile(atPath: exe) else {
            throw BenchError(
                "\(exe) not found: build it with `swift build -c release --product volley-mock` (or pass "
                    + "--mock-endpoints FILE)"
            )
        }
        let state = directory + "/mock"
        try FileManager.default.createDirectory(atPath: state, withIntermediateDirectories: true)
        let endpointsFile = state + "/endpoints.json"
        try? FileManager.default.removeItem(atPath: endpointsFile)
        let config = directory + "/mock-config.json"
        try configJSON.write(toFile: config, atomically: true, encoding: .utf8)
        var arguments = [
            "--port", String(port), "--state-dir", state, "--config", config,
            "--no-duplicate-tracking", "--log-level", "error",
        ]
        if let acceptJournal { arguments += ["--accept-journal", acceptJournal] }
        child = try BenchChild(
            name: "volley-mock", executable: exe, arguments: arguments, logFile: directory + "/" + logName)
        let until = benchNow() + 30
        while !FileManager.default.fileExists(atPath: endpointsFile) {
            if !child.isRunning || benchNow() > until {
                throw BenchError("volley-mock did not start:\n\(child.logTail())")
            }
            usleep(20_000)
        }
        usleep(50_000) // endpoints.json is written atomically, but give the listener a moment
        endpoints = try MockEndpoints(file: endpointsFile)
    }

    public func stop() { child.stop(grace: 3) }
}

/// Fault-configuration document for the mock (MockConfiguration's JSON schema).
public func mockConfigJSON(latencyMs: Double, maxStreams: Int, replace: Bool = false) -> String {
    "{\"replace\":\(replace),\"latencyMs\":\(latencyMs),\"latencyJitterMs\":0,\"maxConcurrentStreams\":"
        + "\(maxStreams),\"duplicateTracking\":false}"
}

/// A blocking HTTP/2 client for the mock's control endpoints (`/_mock/stats`, `/_mock/config`, `/_mock/reset-stats`).
/// Called from the benchmark's own threads (never a Dispatch queue of the transport).
public final class MockControl: @unchecked Sendable {
    let pool: HTTP2ConnectionPool
    let authority: String

    public init(endpoints: MockEndpoints, logger: Logger) {
        var c = HTTP2ClientConfiguration(host: endpoints.host, port: endpoints.port, caFile: endpoints.caFile)
        c.connections = 1
        c.requestTimeoutSeconds = 10
        pool = HTTP2ConnectionPool(configuration: c, logger: logger)
        authority = "\(endpoints.host):\(endpoints.port)"
    }

    deinit { pool.shutdown() }

    public func request(_ method: String, _ path: String, body: String = "") throws -> (Int, String) {
        final class Box: @unchecked Sendable { var result: Result<HTTP2Response, HTTP2Error>? }
        let box = Box()
        let done = DispatchSemaphore(value: 0)
        var headers: [HTTP2Header] = []
        if !body.isEmpty { headers.append(HTTP2Header("content-type", "application/json")) }
        pool.submit(
            HTTP2Request(
                method: method, authority: authority, path: path, headers: headers,
                body: Array(body.utf8))
        ) { r in
            box.result = r
            done.signal()
        }
        if done.wait(timeout: .now() + 15) == .timedOut { throw BenchError("mock \(path): no answer in 15 s") }
        switch box.result {
        case .success(let r)?: return (r.status, String(decoding: r.body, as: UTF8.self))
        case .failure(let e)?: throw BenchError("mock \(path): \(e)")
        case nil: throw BenchError("mock \(path): no result")
        }
    }

    /// Accepted sends so far (APNs + FCM) and every request the mock answered.

    public func counts() throws -> (accepted: Int, apns: Int, fcm: Int, total: Int) {
        let (status, text) = try request("GET", "/_mock/stats")
        guard status == 200, let o = try? JSONSerialization.jsonObject(with: Data(text.utf8)) as? [String: Any],
            let acc = o["accepted"] as? [String: Any]
        else { throw BenchError("mock stats: HTTP \(status) \(text.prefix(200))") }
        let a = acc["apns"] as? Int ?? 0
        let f = acc["fcm"] as? Int ?? 0
        return (a + f, a, f, o["total_requests"] as? Int ?? 0)
    }

    /// CLOCK_MONOTONIC nanoseconds of the mock's latest accepted send (0: none; nil: a mock without the field).
    public func lastAcceptedNanos() throws -> UInt64? {
        (try statsJSON()["last_accepted_ns"] as? NSNumber)?.uint64Value
    }

    public func statsJSON() throws -> [String: Any] {
        let (_, text) = try request("GET", "/_mock/stats")
        return (try? JSONSerialization.jsonObject(with: Data(text.utf8)) as? [String: Any]) ?? [:]
    }

    public func resetStats() throws { _ = try request("POST", "/_mock/reset-stats") }

    public func configure(_ json: String) throws {
        let (status, text) = try request("POST", "/_mock/config", body: json)
        if status != 200 { throw BenchError("mock config: HTTP \(status) \(text.prefix(200))") }
    }
}

/// p50/p90/p99/max in milliseconds from a histogram of microseconds.
public struct LatencySummary: Sendable, Hashable, Codable {
    public var count: Int
    public var p50_ms: Double
    public var p90_ms: Double
    public var p99_ms: Double
    public var max_ms: Double
    public static let empty = LatencySummary(count: 0, p50_ms: 0, p90_ms: 0, p99_ms: 0, max_ms: 0)
}

/// Formats a number with thousands separators.
func grouped(_ v: Double, decimals: Int = 0) -> String {
    let f = NumberFormatter()
    f.numberStyle = .decimal
    f.maximumFractionDigits = decimals
    f.minimumFractionDigits = decimals
    f.groupingSeparator = ","
    return f.string(from: NSNumber(value: v)) ?? String(v)
}

func stderrLine(_ s: String) { FileHandle.standardError.write(Data(s.utf8)) }
