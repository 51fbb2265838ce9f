import Foundation
import Logging

/// `volley-bench api`: wrk against a `volley api` process on its own redis-server. Each workload runs for the same
/// duration at the same connection count, back to back in one run: `GET /livez` (the HTTP framework's own ceiling,
/// no Redis), `POST /v1/jobs` with a small job (key lookup + rate-limit script + one XADD script), and the
/// Salesforce-compatible custom notification action.
public struct APIBenchOptions: Sendable {
    public var connections = 64
    public var threads = 2
    public var durationSeconds = 10
    public var rounds = 1
    public init() {}
}

public struct APIBenchRow: Sendable, Codable, Hashable {
    public var name: String
    public var method: String
    public var path: String
    public var requestsPerSecond: Double
    public var p50Ms: Double?
    public var p99Ms: Double?
    /// Answers outside 2xx (wrk's "Non-2xx or 3xx responses").
    public var non2xx: Int
    public var errors: Int
    /// Requests wrk completed in the workload.
    public var requests: Int?
    /// CPU (user + system) per request over the workload: the `volley api` process's and redis-server's. Unlike
    /// req/s, these hardly move when the machine's other load does, so they show a change in the API's own cost.
    public var apiCPUMicrosPerRequest: Double?
    public var redisCPUMicrosPerRequest: Double?
}

public struct APIBenchResult: Sendable, Codable, Hashable {
    public var connections: Int
    public var durationSeconds: Int
    public var rows: [APIBenchRow]
    /// Job POST rate over the `/livez` rate (goal ≥ 0.5).
    public var jobsOverLivez: Double?
    /// `/livez`'s API CPU per request over the job POST's: what the ratio would be if the API's own work were all
    /// that the two cost.
    public var jobsOverLivezAPICPU: Double?
}

public enum APIBench {
    struct Workload {
        var name: String
        var method: String
        var path: String
        var body: String?
    }

    static let workloads = [
        Workload(name: "livez", method: "GET", path: "/livez", body: nil),
        Workload(
            name: "job POST", method: "POST", path: "/v1/jobs",
            body: #"{"app":"bench_app","recipients":["005xx000001"],"notification":{"title":"Hi","body":"Bench"}}"#),
        Workload(
            name: "custom notification action", method: "POST",
            path: "/services/data/v60.0/actions/standard/customNotificationAction",
            body:
                #"{"inputs":[{"customNotifTypeId":"0MLxx0000000001","recipientIds":["005xx000001"],"#
                + #""title":"Hi","body":"Bench","targetId":"001xx000003DGb2"}]}"#),
    ]

    /// Writes a bench's `volley.yaml` (and the FCM service account file it names) in `dir`: one FCM app, the bench's
    /// redis-server, the API on `port` without a rate limit; `apiExtra` adds lines to the `api` section.
    static func writeConfig(dir: String, redisURL: String, port: Int, apiExtra: String = "") throws -> String {
        let config = dir + "/volley.yaml"
        try """
        apps:
          - name: bench_app
            fcm:
              serviceAccountFile: "\(dir)/sa.json"
        redis:
          url: "\(redisURL)"
        log:
          level: error
        api:
          host: 127.0.0.1
          port: \(port)
          drainSeconds: 0
          rateLimit: {requestsPerSecond: 0, burst: 1}

        """.appending(apiExtra).write(toFile: config, atomically: true, encoding: .utf8)
        try "{}".write(toFile: dir + "/sa.json", atomically: true, encoding: .utf8)
        return config
    }

    /// An API key of `role` for `org`, made with `volley keys create` as an operator would.
    static func createKey(volley: String, config: String, org: String, role: String, dir: String) throws -> String {
        let out = try runOnce(
            volley, ["keys", "create", "--config", config, "--org", org, "--role", role, "--json"],
            directory: dir, name: "keys")
        guard let json = try? JSONSerialization.jsonObject(with: Data(out.utf8)) as? [String: Any],
            let key = json["key"] as? String
        else { throw BenchError("volley keys create printed no key: \(out)") }
        return key
    }

    public static func run(_ o: APIBenchOptions, logger: Logger) throws -> APIBenchResult {
        let rig = try APIBenchRig(name: "api")
        defer { rig.close() }
        let (wrk, curl, dir, redis, port) = (rig.wrk, rig.curl, rig.dir, rig.redis, rig.port)
        let secret = Data((0..<32).map { _ in UInt8.random(in: 0...255) }).base64EncodedString()
        let config = try writeConfig(
            dir: dir, redisURL: redis.url, port: port,
            apiExtra: "  userTokens:\n    keys: [{id: bench, secret: \"\(secret)\"}]\n")
        let volley = volleyExecutablePath()
        let key = try createKey(volley: volley, config: config, org: "00Dxx0000001gEF", role: "admin", dir: dir)
        let api = try startAPI(volley: volley, config: config, port: port, dir: dir, curl: curl)
        defer { api.stop(grace: 5) }
        let base = "http://127.0.0.1:\(port)"
        // The custom notification action needs its type in the org and the app subscribed to it, or every input
        // answers isSuccess false.
        _ = try runOnce(
            curl,
            [
                "-sf", "-X", "PUT", base + "/v1/types/0MLxx0000000001", "-H", "Authorization: Bearer \(key)",
                "-H", "Content-Type: application/json", "-d", #"{"name":"Bench"}"#,
            ], directory: dir, name: "curl")
        _ = try runOnce(
            curl,
            [
                "-sf", "-X", "POST",
                base + "/services/data/v60.0/connect/notifications/app-settings/organization/0MLxx0000000001",
                "-H", "Authorization: Bearer \(key)", "-H", "Content-Type: application/json",
                "-d", #"{"applicationId":"bench_app","enabled":true}"#,
            ], directory: dir, name: "curl")
        /// CPU seconds so far of the API process and of redis-server (nil for one that is gone).
        func cpuNow() -> (api: Double?, redis: Double?) { (api.sample()?.cpuSeconds, redis.child.sample()?.cpuSeconds) }
        var best: [String: APIBenchRow] = [:]
        for round in 0..<max(1, o.rounds) {
            for w in workloads {
                let script = dir + "/\(w.name.replacingOccurrences(of: " ", with: "-")).lua"
                var lua = "wrk.method = \"\(w.method)\"\nwrk.headers[\"Authorization\"] = \"Bearer \(key)\"\n"
                if let body = w.body {
                    lua += "wrk.headers[\"Content-Type\"] = \"application/json\"\nwrk.body = [[\(body)]]\n"
                }
                try lua.write(toFile: script, atomically: true, encoding: .utf8)
                let before = cpuNow()
                let out = try runOnce(
                    wrk,
                    [
                        "-t", String(o.threads), "-c", String(o.connections), "-d", "\(o.durationSeconds)s",
                        "--latency", "-s", script, base + w.path,
                    ], directory: dir, name: "wrk")
                let after = cpuNow()
                var row = parse(out, name: w.name, method: w.method, path: w.path)
                if let requests = row.requests, requests > 0 {
                    func perRequest(_ from: Double?, _ to: Double?) -> Double? {
                        guard let from, let to else { return nil }
                        return (to - from) * 1e6 / Double(requests)
                    }
                    row.apiCPUMicrosPerRequest = perRequest(before.api, after.api)
                    row.redisCPUMicrosPerRequest = perRequest(before.redis, after.redis)
                }
                logger.info(
                    "round \(round + 1) \(w.name): \(Int(row.requestsPerSecond)) req/s, p99 \(row.p99Ms ?? 0) ms")
                if let b = best[w.name], b.requestsPerSecond >= row.requestsPerSecond { continue }
                best[w.name] = row
            }
        }
        let rows = workloads.compactMap { best[$0.name] }
        let livez = best["livez"]?.requestsPerSecond
        let jobs = best["job POST"]?.requestsPerSecond
        var cpuRatio: Double?
        if let l = best["livez"]?.apiCPUMicrosPerRequest, let j = best["job POST"]?.apiCPUMicrosPerRequest, j > 0 {
            cpuRatio = l / j
        }
        return APIBenchResult(
            connections: o.connections, durationSeconds: o.durationSeconds, rows: rows,
            jobsOverLivez: (livez ?? 0) > 0 ? (jobs ?? 0) / (livez ?? 1) : nil, jobsOverLivezAPICPU: cpuRatio)
    }

    /// Starts `volley api --config config` (logging to `api.log` in `dir`) and returns once `/livez` on `port`
    /// answers; stops it and throws when it does not within 30 s.
    static func startAPI(volley: String, config: String, port: Int, dir: String, curl: String) throws -> BenchChild {
        let api = try BenchChild(
            name: "volley-api", executable: volley, arguments: ["api", "--config", config], logFile: dir + "/api.log")
        let until = benchNow() + 30
        while (try? runOnce(curl, ["-sf", "http://127.0.0.1:\(port)/livez"], directory: dir, name: "curl")) == nil {
            if !api.isRunning || benchNow() > until {
                api.stop(grace: 5)
                throw BenchError("volley api did not start:\n\(api.logTail())")
            }
            usleep(50_000)
        }
        return api
    }

    /// wrk's summary: `Requests/sec:`, the `--latency` percentiles, non-2xx and socket errors.
    static func parse(_ out: String, name: String, method: String, path: String) -> APIBenchRow {
        var row = APIBenchRow(
            name: name, method: method, path: path, requestsPerSecond: 0, p50Ms: nil, p99Ms: nil, non2xx: 0, errors: 0)
        for line in out.split(separator: "\n").map({ $0.trimmingCharacters(in: .whitespaces) }) {
            let parts = line.split(separator: " ", omittingEmptySubsequences: true).map(String.init)
            if line.hasPrefix("Requests/sec:"), parts.count >= 2 { row.requestsPerSecond = Double(parts[1]) ?? 0 }
            // "123456 requests in 10.00s, 19.87MB read"
            if parts.count >= 3, parts[1] == "requests", parts[2] == "in", let n = Int(parts[0]) { row.requests = n }
            if line.hasPrefix("50%"), parts.count >= 2 { row.p50Ms = milliseconds(parts[1]) }
            if line.hasPrefix("99%"), parts.count >= 2 { row.p99Ms = milliseconds(parts[1]) }
            if line.hasPrefix("Non-2xx or 3xx responses:"), let n = parts.last.flatMap({ Int($0) }) { row.non2xx = n }
            if line.hasPrefix("Socket errors:") {
                row.errors = parts.compactMap { Int($0.trimmingCharacters(in: CharacterSet(charactersIn: ","))) }
                    .reduce(0, +)
            }
        }
        return row
    }

    /// `12.34ms`, `850.00us`, `1.20s` → milliseconds.
    static func milliseconds(_ s: String) -> Double? {
        if s.hasSuffix("ms") { return Double(s.dropLast(2)) }
        if s.hasSuffix("us") { return Double(s.dropLast(2)).map { $0 / 1000 } }
        if s.hasSuffix("s") { return Double(s.dropLast()).map { $0 * 1000 } }
        return nil
    }

    static func freePort() throws -> Int {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard fd >= 0 else { throw BenchError("socket() failed") }
        defer { close(fd) }
        var addr = sockaddr_in()
        addr.sin_family = sa_family_t(AF_INET)
        addr.sin_addr.s_addr = inet_addr("127.0.0.1")
        addr.sin_port = 0
        var len = socklen_t(MemoryLayout<sockaddr_in>.size)
        let bound = withUnsafeMutablePointer(to: &addr) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { p in
                bind(fd, p, len) == 0 && getsockname(fd, p, &len) == 0
            }
        }
        guard bound else { throw BenchError("cannot pick a free port") }
        return Int(UInt16(bigEndian: addr.sin_port))
    }

    /// Runs a one-shot tool, returns its standard output; throws with its log when it fails.
    static func runOnce(_ exe: String, _ args: [String], directory: String, name: String) throws -> String {
        let log = directory + "/\(name)-\(UUID().uuidString.prefix(6)).out"
        let child = try BenchChild(name: name, executable: exe, arguments: args, logFile: log)
        guard let status = child.wait(timeout: 600), status == 0 else {
            throw BenchError("\(name) failed: \(child.logTail())")
        }
        return (try? String(contentsOfFile: log, encoding: .utf8)) ?? ""
    }

    /// A table for the terminal and docs/benchmarks.md.
    public static func table(_ r: APIBenchResult) -> String {
        var lines = [
            "| workload | req/s | p50 ms | p99 ms | non-2xx | errors | API CPU µs/req | Redis CPU µs/req |",
            "|---|---:|---:|---:|---:|---:|---:|---:|",
        ]
        func f(_ v: Double?, _ format: String) -> String { v.map { String(format: format, $0) } ?? "-" }
        for row in r.rows {
            lines.append(
                "| \(row.method) \(row.path) (\(row.name)) | \(Int(row.requestsPerSecond)) | "
                    + "\(f(row.p50Ms, "%.2f")) | \(f(row.p99Ms, "%.2f")) | \(row.non2xx) | \(row.errors) | "
                    + "\(f(row.apiCPUMicrosPerRequest, "%.1f")) | \(f(row.redisCPUMicrosPerRequest, "%.1f")) |")
        }
        if let ratio = r.jobsOverLivez {
            lines.append("job POST / livez: \(String(format: "%.2f", ratio)) (goal ≥ 0.5)")
        }
        if let ratio = r.jobsOverLivezAPICPU {
            lines.append("livez / job POST, API CPU per request: \(String(format: "%.2f", ratio))")
        }
        return lines.joined(separator: "\n")
    }
}

/// What the benches of `volley api` share: wrk and curl found, a scratch folder with a redis-server in it, and a
/// free port for the API. `close()` stops Redis and removes the folder.
struct APIBenchRig {
    let wrk: String
    let curl: String
    let dir: String
    let redis: BenchRedis
    let port: Int

    init(name: String) throws {
        guard let wrk = which("wrk") else { throw BenchError("wrk not found: apt-get install -y wrk") }
        guard let curl = which("curl") else { throw BenchError("curl not found: apt-get install -y curl") }
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent(
            "volley-bench-\(name)-\(UUID().uuidString.prefix(8))"
        ).path
        try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
        do { redis = try BenchRedis(directory: dir) } catch {
            try? FileManager.default.removeItem(atPath: dir)
            throw error
        }
        do { port = try APIBench.freePort() } catch {
            redis.stop()
            try? FileManager.default.removeItem(atPath: dir)
            throw error
        }
        self.wrk = wrk
        self.curl = curl
        self.dir = dir
    }

    func close() {
        redis.stop()
        try? FileManager.default.removeItem(atPath: dir)
    }
}
