// swift-format-ignore-file: AlwaysUseLowerCamelCase

// The result types' properties are the `--json` keys (snake_case, a contract with users' scripts), named as written.
import Foundation
import Logging
import VolleyAPNs

/// `volley-bench e2e --compare`: after the end-to-end run, against the same mock (same latency and stream limit),
/// with the same body size, connections and per-connection concurrency, measures
/// (a) the bare transport (`volley-bench transport --target … --vs-h2load`, the transport's own benchmark, run as a
///     child process so its figures are exactly what that command prints),
/// (b) h2load (from (a); or run here when (a) is unavailable),
/// (c) the Python peer aioapns (PyPI, in a virtualenv under `.build/`), driven by `tools/bench/aioapns_peer.py`.
public struct E2ECompare {
    public struct Options: Sendable {
        public var requests = 100_000
        public var peerRequests = 20_000
        public var connections = 1
        public var concurrency = 100
        public var bodyBytes = 300
        public var venv: String?
        public init() {}
    }

    public struct Result: Sendable, Codable {
        public var transport_rate: Double?
        public var transport_cpu_us: Double?
        public var transport_p99_ms: Double?
        public var h2load_rate: Double?
        public var h2load_cpu_us: Double?
        public var aioapns_rate: Double?
        public var aioapns_cpu_us: Double?
        public var notes: [String]
    }

    public let options: Options
    let logger: Logger
    public init(options: Options, logger: Logger) {
        self.options = options
        self.logger = logger
    }

    /// The package root (the folder with Package.swift above the executable), else the current directory.
    static func packageRoot() -> String {
        var url = URL(fileURLWithPath: volleyExecutableDirectory())
        for _ in 0..<6 {
            if FileManager.default.fileExists(atPath: url.path + "/Package.swift") { return url.path }
            url.deleteLastPathComponent()
        }
        return FileManager.default.currentDirectoryPath
    }

    /// Runs a one-shot child and returns its stdout (stderr goes to `log`).
    static func capture(_ exe: String, _ args: [String], log: String, timeout: Double) -> (Int32?, String) {
        let out = log + ".out"
        FileManager.default.createFile(atPath: out, contents: nil)
        guard let o = FileHandle(forWritingAtPath: out) else { return (nil, "") }
        FileManager.default.createFile(atPath: log, contents: nil)
        let e = FileHandle(forWritingAtPath: log) ?? FileHandle.nullDevice
        let p = Process()
        p.executableURL = URL(fileURLWithPath: exe)
        p.arguments = args
        p.standardOutput = o
        p.standardError = e
        p.standardInput = FileHandle.nullDevice
        do { try p.run() } catch { return (nil, "") }
        let until = benchNow() + timeout
        while p.isRunning && benchNow() < until { usleep(10_000) }
        if p.isRunning {
            kill(p.processIdentifier, SIGKILL)
            p.waitUntilExit()
            return (nil, "")
        }
        try? o.close()
        return (p.terminationStatus, (try? String(contentsOfFile: out, encoding: .utf8)) ?? "")
    }

    static func lastJSONObject(_ text: String) -> [String: Any]? {
        for line in text.split(separator: "\n").reversed() where line.hasPrefix("{") {
            if let o = try? JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any] { return o }
        }
        return nil
    }

    public func run(stage: E2EBench.Stage) throws -> Result {
        let o = options
        let e = stage.endpoints
        var r = Result(notes: [])
        let dir = stage.directory

        // (a) + (b): the transport's own benchmark against this mock.
        stderrLine(
            "compare: bare transport + h2load (\(grouped(Double(o.requests))) requests, \(o.connections) "
                + "connection(s), \(o.concurrency) streams each)…\n"
        )
        let (status, text) = Self.capture(
            benchExecutablePath(),
            [
                "transport", "--json", "--vs-h2load", "--target", "https://\(e.host):\(e.port)", "--ca-file",
                e.caFile,
                "--endpoints", e.file, "--requests", "\(o.requests)", "--connections", "\(o.connections)",
                "--concurrency", "\(o.concurrency)", "--body-bytes", "\(o.bodyBytes)",
            ], log: dir + "/transport-bench.log", timeout: 300)
        if status == 0, let j = Self.lastJSONObject(text) {
            r.transport_rate = j["rate"] as? Double
            r.transport_cpu_us = j["cpu_us"] as? Double
            r.transport_p99_ms = j["p99_ms"] as? Double
            r.h2load_rate = j["h2load_rate"] as? Double
            r.h2load_cpu_us = j["h2load_cpu_us"] as? Double
        } else {
            r.notes.append(
                "`volley-bench transport` unavailable or failed (status \(status.map(String.init) ?? "none")); "
                    + "h2load run directly"
            )
        }
        if r.h2load_rate == nil {
            let (rate, cpu) = try h2load(stage: stage)
            r.h2load_rate = rate
            r.h2load_cpu_us = cpu
        }

        // (c) aioapns.
        stderrLine("compare: aioapns (\(grouped(Double(o.peerRequests))) requests)…\n")
        do {
            let python = try ensureVenv()
            let script = Self.packageRoot() + "/tools/bench/aioapns_peer.py"
            let (st, out) = Self.capture(
                python,
                [
                    script, "--endpoints", e.file, "--requests", "\(o.peerRequests)",
                    "--connections", "\(o.connections)", "--concurrency", "\(o.concurrency)",
                    "--body-bytes", "\(o.bodyBytes)",
                ],
                log: dir + "/aioapns.log", timeout: 600)
            if let j = Self.lastJSONObject(out) {
                r.aioapns_rate = j["rate"] as? Double
                r.aioapns_cpu_us = j["cpu_us"] as? Double
                if st != 0 { r.notes.append("aioapns exited \(st.map(String.init) ?? "-"): \(out.prefix(300))") }
            } else {
                r.notes.append(
                    "aioapns peer failed (status \(st.map(String.init) ?? "timeout")); see \(dir)/aioapns.log")
            }
        } catch {
            r.notes.append("aioapns not run: \(error)")
        }
        return r
    }

    /// The virtualenv's python, creating `.build/aioapns-venv` with aioapns from PyPI when missing.
    func ensureVenv() throws -> String {
        let venv = options.venv ?? (Self.packageRoot() + "/.build/aioapns-venv")
        let python = venv + "/bin/python"
        let check = Self.capture(
            python, ["-c", "import aioapns"], log: NSTemporaryDirectory() + "volley-venv-check.log", timeout: 60)
        if check.0 == 0 { return python }
        guard let py3 = which("python3") else {
            throw BenchError("python3 not found: apt-get install -y python3 python3-venv")
        }
        stderrLine("creating \(venv) (python3 -m venv; pip install aioapns)…\n")
        let log = NSTemporaryDirectory() + "volley-venv.log"
        if Self.capture(py3, ["-m", "venv", venv], log: log, timeout: 120).0 != 0 {
            throw BenchError("python3 -m venv \(venv) failed (apt-get install -y python3-venv); log \(log)")
        }
        if Self.capture(venv + "/bin/pip", ["install", "-q", "aioapns"], log: log, timeout: 600).0 != 0 {
            throw BenchError("pip install aioapns failed; log \(log)")
        }
        return python
    }

    /// h2load (which does not verify certificates) with valid APNs requests (JWT from the mock's key) against the mock.
    /// Rate from h2load's own summary;
    /// CPU from the reaped child's rusage.
    func h2load(stage: E2EBench.Stage) throws -> (Double, Double) {
        let o = options
        let e = stage.endpoints
        guard let exe = which("h2load") else { throw BenchError("h2load not found: apt-get install -y nghttp2-client") }
        let pem = try String(contentsOfFile: e.p8File, encoding: .utf8)
        let auth = try APNSTokenProvider(p8PEM: pem, keyID: e.keyID, teamID: e.teamID).authorization()
        let body = stage.directory + "/h2load-body.json"
        let filler = String(repeating: "x", count: max(1, o.bodyBytes - 40))
        try "{\"aps\":{\"alert\":{\"title\":\"Volley\",\"body\":\"\(filler)\"}}}".write(
            toFile: body, atomically: true, encoding: .utf8)
        var before = rusage()
        getrusage(RUSAGE_CHILDREN.rawValue, &before)
        let (st, out) = Self.capture(
            exe,
            [
                "-n", "\(o.requests)", "-c", "\(o.connections)", "-m", "\(o.concurrency)", "-d", body,
                "-H", "authorization: \(auth)", "-H", "apns-topic: \(e.topic)", "-H", "apns-push-type: alert",
                "-H", "content-type: application/json",
                "https://\(e.host):\(e.port)/3/device/" + String(repeating: "ab", count: 32),
            ], log: stage.directory + "/h2load.log", timeout: 300)
        var after = rusage()
        getrusage(RUSAGE_CHILDREN.rawValue, &after)
        guard st == 0 else { throw BenchError("h2load failed; see \(stage.directory)/h2load.log") }
        // "finished in 1.23s, 81234.56 req/s, …"
        var rate = 0.0
        for line in out.split(separator: "\n") where line.hasPrefix("finished in") {
            let parts = line.split(separator: ",")
            if parts.count > 1 {
                rate = Double(parts[1].trimmingCharacters(in: .whitespaces).split(separator: " ").first ?? "0") ?? 0
            }
        }
        func secs(_ t: timeval) -> Double { Double(t.tv_sec) + Double(t.tv_usec) / 1e6 }
        let cpu = (secs(after.ru_utime) + secs(after.ru_stime)) - (secs(before.ru_utime) + secs(before.ru_stime))
        return (rate, cpu / Double(max(1, o.requests)) * 1e6)
    }
}
