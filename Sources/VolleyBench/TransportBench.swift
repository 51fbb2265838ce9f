// swift-format-ignore-file: AlwaysUseLowerCamelCase

// The result types' properties are the `--json` keys (snake_case, a contract with users' scripts), named as written.
// `volley-bench transport`: closed-loop HTTP/2 load through HTTP2ConnectionPool against the mock (or any
// TLS HTTP/2 server), optionally beside h2load on the same server in the same run.
import Crypto
import Dispatch
import Foundation
import Histogram
import Logging
import Synchronization
import VolleyCore
import VolleyHTTP2

public struct TransportBenchOptions: Sendable {
    public var requests = 100_000
    public var connections = 1
    /// Requests in flight per connection.
    public var concurrency = 100
    public var bodyBytes = 300
    public var mockLatencyMs = 0
    public var mockMaxStreams = 1000
    public var vsH2load = false
    /// Also run the same load through `APNSProvider` against the same server (provider overhead vs bare transport).
    public var vsProvider = false
    /// https://host:port of a running server; nil = start a server.
    public var target: String?
    public var caFile: String?
    /// An endpoints.json to read credentials (and target) from when `target` is set.
    public var endpointsFile: String?
    /// "mock" (volley-mock next to the executable) or "builtin" (`volley-bench serve`, our own HTTP2Server).
    public var server = "mock"
    /// Directory holding the `volley` / `volley-mock` executables.
    public var executableDirectory: String
    public var warmupRequests = 2_000
    /// Measured rounds. Each round runs the transport, then the provider and h2load when asked, back to back;
    /// the figures are medians over rounds and the ratios medians of the per-round ratios, so a noisy spell on
    /// a shared machine lands on every contender of that round instead of on one of them.
    public var rounds = 1
    public init(executableDirectory: String) { self.executableDirectory = executableDirectory }
}

public struct TransportBenchResult: Sendable, Codable {
    public var rate: Double
    public var h2load_rate: Double?
    public var ratio: Double?
    public var p50_ms: Double
    public var p99_ms: Double
    /// The latency distribution beyond p50/p99. In a closed loop the rate is in-flight / mean latency (Little's
    /// law), so `mean_ms` minus the mock's latency is what the round trip itself added per request.
    public var mean_ms: Double
    public var p90_ms: Double
    public var p999_ms: Double
    public var max_ms: Double
    public var cpu_s: Double
    public var cpu_us: Double
    public var h2load_cpu_us: Double?
    public var provider_rate: Double?
    /// provider_rate / same_requests_rate: the provider's own overhead (both send byte-identical requests).
    public var provider_ratio: Double?
    public var provider_cpu_us: Double?
    /// The bare transport sending the very requests the provider builds (per-device `:path`, `apns-id`,
    /// `authorization`), prebuilt before the clock starts. `rate` repeats one path, which HPACK sends as a one-byte
    /// index; APNs needs a distinct path per device, sent as a literal, and that costs both ends.
    public var same_requests_rate: Double?
    public var same_requests_cpu_us: Double?
    public var requests: Int
    public var failures: Int
    public var connections: Int
    public var concurrency: Int
    public var peak_streams_per_connection: Int
    public var server: String
    /// The PM QoS CPU wake-up latency held for the run (`--cpu-wake-latency-us`); nil (absent from the JSON): the
    /// machine's own idle states.
    public var cpu_wake_latency_us: Int? = nil
    /// Every round's figures (one entry when `rounds` is 1).
    public var rounds: [TransportBenchRound] = []
}

/// One round of `volley-bench transport`: the contenders measured back to back.
public struct TransportBenchRound: Sendable, Codable {
    public var rate: Double
    public var cpu_us: Double
    public var p50_ms: Double
    public var p99_ms: Double
    public var mean_ms: Double
    public var p90_ms: Double
    public var p999_ms: Double
    public var max_ms: Double
    public var h2load_rate: Double?
    public var h2load_cpu_us: Double?
    public var ratio: Double?
    public var provider_rate: Double?
    public var provider_cpu_us: Double?
    public var provider_ratio: Double?
    public var same_requests_rate: Double?
    public var same_requests_cpu_us: Double?
}

func median(_ xs: [Double]) -> Double {
    guard !xs.isEmpty else { return 0 }
    let s = xs.sorted()
    return s.count % 2 == 1 ? s[s.count / 2] : (s[s.count / 2 - 1] + s[s.count / 2]) / 2
}

/// The endpoints file the mock (and `volley-bench serve`) writes into its state dir.
public struct BenchEndpoints: Codable, Sendable {
    public struct APNs: Codable, Sendable {
        public var p8_file: String
        public var key_id: String
        public var team_id: String
        public var topic: String
        public init(p8_file: String, key_id: String, team_id: String, topic: String) {
            self.p8_file = p8_file
            self.key_id = key_id
            self.team_id = team_id
            self.topic = topic
        }
    }
    public var host: String
    public var port: Int
    public var ca_file: String
    public var apns: APNs?
    public init(host: String, port: Int, ca_file: String, apns: APNs?) {
        self.host = host
        self.port = port
        self.ca_file = ca_file
        self.apns = apns
    }
}

public struct TransportBenchError: Error, CustomStringConvertible {
    public var description: String
    init(_ d: String) { description = d }
}

/// CPU seconds of this process (user + system).
func cpuSeconds(_ who: Int32) -> Double {
    var ru = rusage()
    getrusage(__rusage_who_t(who), &ru)
    let u = Double(ru.ru_utime.tv_sec) + Double(ru.ru_utime.tv_usec) / 1e6
    let s = Double(ru.ru_stime.tv_sec) + Double(ru.ru_stime.tv_usec) / 1e6
    return u + s
}

/// ES256 JWT for APNs token auth: header {alg, kid}, claims {iss, iat}.
public func apnsJWT(p8PEM: String, keyID: String, teamID: String, issuedAt: Date = Date()) throws -> String {
    let key = try P256.Signing.PrivateKey(pemRepresentation: p8PEM)
    func b64url(_ d: Data) -> String {
        d.base64EncodedString().replacingOccurrences(of: "+", with: "-").replacingOccurrences(of: "/", with: "_")
            .replacingOccurrences(of: "=", with: "")
    }
    let header = b64url(Data(#"{"alg":"ES256","kid":"\#(keyID)"}"#.utf8))
    let claims = b64url(Data(#"{"iss":"\#(teamID)","iat":\#(Int(issuedAt.timeIntervalSince1970))}"#.utf8))
    let input = header + "." + claims
    let sig = try key.signature(for: Data(input.utf8))
    return input + "." + b64url(sig.rawRepresentation)
}

public enum TransportBench {
    /// A started server process and what it told us.
    struct Server {
        var process: Process?
        var endpoints: BenchEndpoints
        var stateDir: String?
        func stop() {
            if let p = process, p.isRunning {
                kill(p.processIdentifier, SIGKILL)
                p.waitUntilExit()
            }
            if let d = stateDir { try? FileManager.default.removeItem(atPath: d) }
        }
    }

    static func startServer(_ o: TransportBenchOptions, logger: Logger) throws -> Server {
        let dir = NSTemporaryDirectory() + "volley-bench-\(getpid())-\(UInt32.random(in: 0...UInt32.max))"
        try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
        let p = Process()
        var args = ["--port", "0", "--state-dir", dir]
        if o.server == "mock" {
            p.executableURL = URL(fileURLWithPath: o.executableDirectory + "/volley-mock")
            // volley-mock takes fault injection as a MockConfiguration JSON file.
            let cfg = dir + "/bench-config.json"
            try #"{"latencyMs": \#(o.mockLatencyMs), "maxConcurrentStreams": \#(o.mockMaxStreams)}"#
                .write(toFile: cfg, atomically: true, encoding: .utf8)
            args += ["--config", cfg, "--no-duplicate-tracking"]
        } else {
            p.executableURL = URL(fileURLWithPath: benchExecutablePath())
            args =
                ["serve"] + args + [
                    "--latency-ms", String(o.mockLatencyMs), "--max-streams", String(o.mockMaxStreams),
                ]
        }
        p.arguments = args
        p.standardOutput = FileHandle.nullDevice
        try p.run()
        let file = dir + "/endpoints.json"
        let deadline = Date().addingTimeInterval(20)
        while Date() < deadline {
            if let data = FileManager.default.contents(atPath: file),
                let ep = try? JSONDecoder().decode(BenchEndpoints.self, from: data)
            {
                return Server(process: p, endpoints: ep, stateDir: dir)
            }
            if !p.isRunning { break }
            usleep(20_000)
        }
        Server(process: p, endpoints: BenchEndpoints(host: "", port: 0, ca_file: "", apns: nil), stateDir: dir).stop()
        throw TransportBenchError(
            "\(p.executableURL?.path ?? "server") did not write \(file) within 20 s (server \(o.server))")
    }

    struct Workload {
        var authority: String
        var headers: [HTTP2Header]
        var body: [UInt8]
        var token: String
        var path: String { "/3/device/" + token }
    }

    static func workload(_ ep: BenchEndpoints, bodyBytes: Int) throws -> Workload {
        var headers = [HTTP2Header("content-type", "application/json")]
        if let apns = ep.apns {
            let pem = try String(contentsOfFile: apns.p8_file, encoding: .utf8)
            let jwt = try apnsJWT(p8PEM: pem, keyID: apns.key_id, teamID: apns.team_id)
            headers += [
                HTTP2Header("apns-topic", apns.topic), HTTP2Header("apns-push-type", "alert"),
                HTTP2Header("apns-priority", "10"), HTTP2Header("authorization", "bearer " + jwt, sensitive: true),
            ]
        }
        var json = #"{"aps":{"alert":{"title":"Volley","body":"#
        let pad = max(0, bodyBytes - json.utf8.count - 5)
        json += "\"" + String(repeating: "x", count: pad) + "\"}}}"
        let token = (0..<32).map { UInt8(($0 * 37 + 11) & 0xff) }.lowercaseHex
        return Workload(authority: "\(ep.host):\(ep.port)", headers: headers, body: Array(json.utf8), token: token)
    }

    /// Runs the closed loop: `connections × concurrency` requests in flight until `total` completed.
    static func load(_ pool: HTTP2ConnectionPool, _ w: Workload, total: Int, inFlight: Int) async -> (
        seconds: Double, histogram: Histogram<UInt64>, failures: Int, firstError: String?
    ) {
        await load(
            pool,
            [HTTP2Request(method: "POST", authority: w.authority, path: w.path, headers: w.headers, body: w.body)],
            total: total, inFlight: inFlight)
    }

    /// The closed loop over `requests` (request i is `requests[i % count]`).
    static func load(_ pool: HTTP2ConnectionPool, _ requests: [HTTP2Request], total: Int, inFlight: Int) async -> (
        seconds: Double, histogram: Histogram<UInt64>, failures: Int, firstError: String?
    ) {
        struct S {
            var submitted = 0
            var completed = 0
            var failures = 0
            var firstError: String?
            var hist = Histogram<UInt64>(highestTrackableValue: 60_000_000, numberOfSignificantValueDigits: .three)
            var cont: CheckedContinuation<Void, Never>?
        }
        let state = Mutex(S())
        let count = requests.count
        let start = monotonicNow()
        @Sendable func one(_ i: Int) {
            let t0 = monotonicNow()
            pool.submit(requests[i % count]) { r in
                let us = (monotonicNow() - t0) / 1000
                let (next, done): (Int?, CheckedContinuation<Void, Never>?) = state.withLock { s in
                    s.completed += 1
                    _ = s.hist.record(us)
                    if case .failure(let e) = r {
                        s.failures += 1
                        if s.firstError == nil { s.firstError = "\(e)" }
                    }
                    if s.submitted < total {
                        s.submitted += 1
                        return (s.submitted - 1, nil)
                    }
                    if s.completed == total {
                        let c = s.cont
                        s.cont = nil
                        return (nil, c)
                    }
                    return (nil, nil)
                }
                if let next { one(next) }
                done?.resume()
            }
        }
        await withCheckedContinuation { (c: CheckedContinuation<Void, Never>) in
            let n: Int = state.withLock { s in
                s.cont = c
                s.submitted = min(total, inFlight)
                return s.submitted
            }
            for i in 0..<n { one(i) }
        }
        let secs = Double(monotonicNow() - start) / 1e9
        let s = state.withLock { $0 }
        return (secs, s.hist, s.failures, s.firstError)
    }

    static func monotonicNow() -> UInt64 { DispatchTime.now().uptimeNanoseconds }

    /// The latency line of the summary, with the closed loop's Little's-law rate (in-flight / mean latency: what
    /// the measured rate should be, less the ramp at the start and the drain at the end) and, when the mock adds a
    /// known latency, how much the round trip added on top of it per request.
    public static func latencyLine(_ r: TransportBenchResult, mockLatencyMs: Int?) -> String {
        func f(_ x: Double, _ digits: Int = 2) -> String { String(format: "%.\(digits)f", x) }
        var line =
            "latency : mean \(f(r.mean_ms, 3)) ms  p90 \(f(r.p90_ms, 3))  p99.9 \(f(r.p999_ms, 3))  max "
            + "\(f(r.max_ms, 3)) ms"
        guard r.mean_ms > 0 else { return line }
        let inFlight = r.connections * r.concurrency
        line += "; in-flight \(inFlight) / mean = \(Int(Double(inFlight) / r.mean_ms * 1000)) req/s"
        if let l = mockLatencyMs, l > 0 {
            line += "; \(f(r.mean_ms - Double(l), 3)) ms per request above the mock's \(l) ms"
        }
        return line
    }

    /// Runs h2load with the same workload; returns (req/s, CPU seconds of h2load).
    static func h2load(_ o: TransportBenchOptions, _ w: Workload, host: String, port: Int) throws -> (Double, Double) {
        let bodyFile = NSTemporaryDirectory() + "volley-bench-body-\(getpid()).json"
        try Data(w.body).write(to: URL(fileURLWithPath: bodyFile))
        defer { try? FileManager.default.removeItem(atPath: bodyFile) }
        let p = Process()
        p.executableURL = URL(fileURLWithPath: "/usr/bin/h2load")
        var args = ["-n", String(o.requests), "-c", String(o.connections), "-m", String(o.concurrency), "-d", bodyFile]
        for h in w.headers { args += ["-H", "\(h.name): \(h.value)"] }
        args.append("https://\(host):\(port)\(w.path)")
        p.arguments = args
        let out = Pipe()
        p.standardOutput = out
        p.standardError = FileHandle.nullDevice
        let cpu0 = cpuSeconds(RUSAGE_CHILDREN.rawValue)
        try p.run()
        let data = out.fileHandleForReading.readDataToEndOfFile()
        p.waitUntilExit()
        let cpu = cpuSeconds(RUSAGE_CHILDREN.rawValue) - cpu0
        let text = String(decoding: data, as: UTF8.self)
        // "finished in 1.23s, 81234.56 req/s, 12.34MB/s"
        guard let line = text.split(separator: "\n").first(where: { $0.hasPrefix("finished in") }),
            let rateField = line.split(separator: ",").dropFirst().first,
            let rate = Double(rateField.trimmingCharacters(in: .whitespaces).split(separator: " ").first ?? "")
        else {
            throw TransportBenchError("cannot parse h2load output:\n\(text)")
        }
        if let statusLine = text.split(separator: "\n").first(where: { $0.hasPrefix("status codes:") }) {
            _ = statusLine
        }
        return (rate, cpu)
    }

    public static func run(_ o: TransportBenchOptions, logger: Logger) async throws -> TransportBenchResult {
        var server: Server?
        var endpoints: BenchEndpoints
        if let target = o.target {
            guard let url = URL(string: target), let host = url.host else {
                throw TransportBenchError("bad --target \(target)")
            }
            if let f = o.endpointsFile, let data = FileManager.default.contents(atPath: f) {
                endpoints = try JSONDecoder().decode(BenchEndpoints.self, from: data)
            } else {
                endpoints = BenchEndpoints(host: host, port: url.port ?? 443, ca_file: o.caFile ?? "", apns: nil)
            }
            endpoints.host = host
            endpoints.port = url.port ?? 443
            if let ca = o.caFile { endpoints.ca_file = ca }
        } else {
            let s = try startServer(o, logger: logger)
            server = s
            endpoints = s.endpoints
        }
        defer { server?.stop() }
        let w = try workload(endpoints, bodyBytes: o.bodyBytes)
        let cfg = HTTP2ClientConfiguration(
            host: endpoints.host, port: endpoints.port,
            caFile: endpoints.ca_file.isEmpty ? nil : endpoints.ca_file,
            connections: o.connections, maxConcurrentStreamsCap: o.concurrency,
            requestTimeoutSeconds: 60, idlePingSeconds: 0,
            maxQueuedRequests: max(100_000, o.connections * o.concurrency * 2))
        let pool = HTTP2ConnectionPool(configuration: cfg, logger: logger)
        let inFlight = o.connections * o.concurrency
        // Warm-up: connections, TLS, HPACK tables, JWT verdict caches.
        let warm = await load(pool, w, total: min(o.warmupRequests, max(o.requests / 10, inFlight)), inFlight: inFlight)
        if warm.failures > 0 {
            logger.warning(
                "warm-up failures", metadata: ["count": "\(warm.failures)", "first": "\(warm.firstError ?? "")"])
        }
        let provider = o.vsProvider ? try await ProviderRunner(o, endpoints, logger: logger) : nil
        defer { provider?.shutdown() }
        var rounds: [TransportBenchRound] = []
        var failures = 0
        for round in 1...max(1, o.rounds) {
            let cpu0 = cpuSeconds(RUSAGE_SELF.rawValue)
            let r = await load(pool, w, total: o.requests, inFlight: inFlight)
            let cpu = cpuSeconds(RUSAGE_SELF.rawValue) - cpu0
            failures += r.failures
            if r.failures > 0 {
                logger.warning(
                    "request failures", metadata: ["count": "\(r.failures)", "first": "\(r.firstError ?? "")"])
            }
            let rate = Double(o.requests) / r.seconds
            func ms(_ p: Double) -> Double { Double(r.histogram.valueAtPercentile(p)) / 1000 }
            var one = TransportBenchRound(
                rate: rate, cpu_us: cpu / Double(o.requests) * 1e6,
                p50_ms: ms(50), p99_ms: ms(99), mean_ms: r.histogram.mean / 1000,
                p90_ms: ms(90), p999_ms: ms(99.9), max_ms: ms(100))
            if let provider {
                let cpuSame0 = cpuSeconds(RUSAGE_SELF.rawValue)
                let same = await load(pool, provider.sameRequests, total: o.requests, inFlight: inFlight)
                let cpuSame = cpuSeconds(RUSAGE_SELF.rawValue) - cpuSame0
                failures += same.failures
                if same.failures > 0 {
                    logger.warning(
                        "same-request failures",
                        metadata: ["count": "\(same.failures)", "first": "\(same.firstError ?? "")"])
                }
                let sameRate = Double(o.requests) / same.seconds
                let p = await provider.run(round: round)
                if p.failures > 0 {
                    logger.warning("provider sends not accepted", metadata: ["count": "\(p.failures)"])
                }
                one.same_requests_rate = sameRate
                one.same_requests_cpu_us = cpuSame / Double(o.requests) * 1e6
                one.provider_rate = p.rate
                one.provider_ratio = p.rate / sameRate
                one.provider_cpu_us = p.cpuSeconds / Double(o.requests) * 1e6
            }
            if o.vsH2load {
                let (hrate, hcpu) = try h2load(o, w, host: endpoints.host, port: endpoints.port)
                one.h2load_rate = hrate
                one.ratio = rate / hrate
                one.h2load_cpu_us = hcpu / Double(o.requests) * 1e6
            }
            rounds.append(one)
            if o.rounds > 1 { logger.info("round \(round) of \(o.rounds)", metadata: ["rate": "\(Int(rate))"]) }
        }
        let peak = pool.statistics.peakStreamsPerConnection
        await withCheckedContinuation { (c: CheckedContinuation<Void, Never>) in pool.shutdown { c.resume() } }
        func med(_ k: (TransportBenchRound) -> Double?) -> Double? {
            let xs = rounds.compactMap(k)
            return xs.isEmpty ? nil : median(xs)
        }
        let cpuUS = med { $0.cpu_us } ?? 0
        var result = TransportBenchResult(
            rate: med { $0.rate } ?? 0, h2load_rate: med { $0.h2load_rate }, ratio: med { $0.ratio },
            p50_ms: med { $0.p50_ms } ?? 0, p99_ms: med { $0.p99_ms } ?? 0,
            mean_ms: med { $0.mean_ms } ?? 0, p90_ms: med { $0.p90_ms } ?? 0,
            p999_ms: med { $0.p999_ms } ?? 0, max_ms: med { $0.max_ms } ?? 0,
            cpu_s: cpuUS * Double(o.requests) / 1e6, cpu_us: cpuUS, h2load_cpu_us: med { $0.h2load_cpu_us },
            requests: o.requests, failures: failures, connections: o.connections, concurrency: o.concurrency,
            peak_streams_per_connection: peak, server: o.target ?? o.server)
        result.provider_rate = med { $0.provider_rate }
        result.provider_ratio = med { $0.provider_ratio }
        result.provider_cpu_us = med { $0.provider_cpu_us }
        result.same_requests_rate = med { $0.same_requests_rate }
        result.same_requests_cpu_us = med { $0.same_requests_cpu_us }
        result.rounds = rounds
        return result
    }
}
