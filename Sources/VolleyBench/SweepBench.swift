// swift-format-ignore-file: AlwaysUseLowerCamelCase

// The result types' properties are the `--json` keys (snake_case, a contract with users' scripts), named as written.
import Foundation
import Logging

/// `volley-bench e2e --sweep`:
/// 1. transport grid: connections {1,2,4,8} × mock latency {0,20,100 ms} × stream limit {100,1000}, each point one
///    `volley-bench transport --json` child (it starts its own mock with that latency and limit); concurrency per
///    connection = the stream limit, so the Little's-law bound is connections × streams / latency;
/// 2. worker scaling: `volley-bench e2e` with 1, 2 and 4 worker processes on one Redis and one mock.
/// Writes `<out>/sweep.csv`, `<out>/sweep.json` and SVG charts (`<out>/*.svg`).
public struct SweepBench {
    public struct Options: Sendable {
        public var connections = [1, 2, 4, 8]
        public var latencies = [0, 20, 100]
        public var streams = [100, 1000]
        public var workers = [1, 2, 4]
        public var seconds = 3.0
        public var bodyBytes = 300
        public var outputDirectory = "docs/charts"
        public var e2e = E2EBench.Options()
        public var skipTransport = false
        public var skipWorkers = false
        public init() {}
    }

    public struct TransportPoint: Sendable, Codable {
        public var connections: Int
        public var latency_ms: Int
        public var streams: Int
        public var requests: Int
        public var rate: Double?
        public var bound: Double?
        public var efficiency: Double?
        public var p50_ms: Double?
        public var p99_ms: Double?
        public var cpu_us: Double?
        public var error: String?
    }

    public struct WorkerPoint: Sendable, Codable {
        public var workers: Int
        public var rate: Double
        public var scaling_efficiency: Double
        public var cpu_us: Double
        public var redis_commands_per_s: Double
        public var redis_cpu_share: Double
        public var mock_cpu_share: Double
        public var worker_cpu_share: Double
        public var accept_p50_ms: Double
        public var accept_p99_ms: Double
        public var duration_s: Double
    }

    public struct Result: Sendable, Codable {
        public var transport: [TransportPoint]
        public var workers: [WorkerPoint]
        public var command: String
        public var machine: String
    }

    public let options: Options
    let logger: Logger
    public init(options: Options, logger: Logger) {
        self.options = options
        self.logger = logger
    }

    public func run(command: String) throws -> Result {
        let o = options
        try FileManager.default.createDirectory(atPath: o.outputDirectory, withIntermediateDirectories: true)
        var points: [TransportPoint] = []
        let tmp = NSTemporaryDirectory() + "volley-sweep-\(getpid())"
        try FileManager.default.createDirectory(atPath: tmp, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: tmp) }
        if !o.skipTransport {
            // One volley-mock for the grid, reconfigured at run time (POST /_mock/config: latency and advertised
            // max concurrent streams, applied to new connections); each point is one `volley-bench transport
            // --target` child against it, so every point measures the same server.
            let mock = try BenchMock(directory: tmp, configJSON: mockConfigJSON(latencyMs: 0, maxStreams: 1000))
            defer { mock.stop() }
            let control = MockControl(endpoints: mock.endpoints, logger: logger)
            let e = mock.endpoints
            for lat in o.latencies {
                for s in o.streams {
                    try control.configure(mockConfigJSON(latencyMs: Double(lat), maxStreams: s))
                    for c in o.connections {
                        let bound: Double? = lat == 0 ? nil : Double(c * s) / (Double(lat) / 1000)
                        // Enough requests for ~`seconds` at the bound (or at ~150k/s without latency).
                        let expected = min(bound ?? 150_000, 150_000)
                        let n = max(5_000, min(400_000, Int(expected * o.seconds)))
                        stderrLine("sweep: \(c) conn × \(s) streams, latency \(lat) ms, \(n) requests… ")
                        let log = tmp + "/t-\(c)-\(s)-\(lat).log"
                        let (st, out) = E2ECompare.capture(
                            benchExecutablePath(),
                            [
                                "transport", "--json", "--requests", "\(n)", "--connections", "\(c)",
                                "--concurrency", "\(s)", "--body-bytes", "\(o.bodyBytes)",
                                "--target", "https://\(e.host):\(e.port)", "--ca-file", e.caFile, "--endpoints", e.file,
                            ], log: log, timeout: 240)
                        var p = TransportPoint(connections: c, latency_ms: lat, streams: s, requests: n, bound: bound)
                        if st == 0, let j = E2ECompare.lastJSONObject(out) {
                            p.rate = j["rate"] as? Double
                            p.p50_ms = j["p50_ms"] as? Double
                            p.p99_ms = j["p99_ms"] as? Double
                            p.cpu_us = j["cpu_us"] as? Double
                            if let r = p.rate, let b = bound { p.efficiency = r / b }
                            stderrLine(
                                String(
                                    format: "%@/s%@\n", grouped(p.rate ?? 0),
                                    p.efficiency.map { String(format: " (%.0f%% of bound)", $0 * 100) } ?? ""))
                        } else {
                            p.error =
                                "status \(st.map(String.init) ?? "timeout"): "
                                + ((try? String(contentsOfFile: log, encoding: .utf8)) ?? "").suffix(300)
                            stderrLine("failed\n")
                        }
                        points.append(p)
                    }
                }
            }
        }
        var workerPoints: [WorkerPoint] = []
        if !o.skipWorkers {
            var base: Double?
            for w in o.workers {
                var e = o.e2e
                e.workers = w
                e.progress = false
                stderrLine("sweep: end to end, \(w) worker(s), \(grouped(Double(e.devices))) devices… ")
                let bench = E2EBench(options: e, logger: logger)
                let stage = try bench.makeStage()
                defer { stage.stop() }
                let r = try bench.run(stage: stage, command: command)
                stage.stopWorkers()
                let b = base ?? r.e2e_rate
                base = b
                let wall = r.duration_s * 2 // two cores
                workerPoints.append(
                    WorkerPoint(
                        workers: w, rate: r.e2e_rate, scaling_efficiency: r.e2e_rate / (b * Double(w)),
                        cpu_us: r.e2e_cpu_us, redis_commands_per_s: r.redis_commands_per_s,
                        redis_cpu_share: r.redis_cpu_s / wall, mock_cpu_share: r.mock_cpu_s / wall,
                        worker_cpu_share: r.cpu_s / wall,
                        accept_p50_ms: r.accept_latency.p50_ms, accept_p99_ms: r.accept_latency.p99_ms,
                        duration_s: r.duration_s))
                stderrLine("\(grouped(r.e2e_rate))/s\n")
            }
        }
        let machine = "\(ProcessInfo.processInfo.activeProcessorCount) cores, load \(loadAverage())"
        let result = Result(transport: points, workers: workerPoints, command: command, machine: machine)
        try write(result)
        return result
    }

    func loadAverage() -> String {
        ((try? String(contentsOfFile: "/proc/loadavg", encoding: .utf8)) ?? "").split(separator: " ").prefix(3).joined(
            separator: " ")
    }

    func write(_ r: Result) throws {
        let dir = options.outputDirectory
        var csv = "kind,connections,latency_ms,streams,workers,rate,bound,efficiency,p50_ms,p99_ms,cpu_us\n"
        func f(_ v: Double?) -> String { v.map { String(format: "%.3f", $0) } ?? "" }
        for p in r.transport {
            csv +=
                "transport,\(p.connections),\(p.latency_ms),\(p.streams),,\(f(p.rate)),\(f(p.bound)),"
                + "\(f(p.efficiency)),\(f(p.p50_ms)),\(f(p.p99_ms)),\(f(p.cpu_us))\n"
        }
        for w in r.workers {
            csv +=
                "e2e,,,,\(w.workers),\(f(w.rate)),,\(f(w.scaling_efficiency)),\(f(w.accept_p50_ms)),"
                + "\(f(w.accept_p99_ms)),\(f(w.cpu_us))\n"
        }
        try csv.write(toFile: dir + "/sweep.csv", atomically: true, encoding: .utf8)
        let enc = JSONEncoder()
        enc.outputFormatting = [.prettyPrinted, .sortedKeys]
        try enc.encode(r).write(to: URL(fileURLWithPath: dir + "/sweep.json"))

        if !r.transport.isEmpty {
            var rate: [SVGLineChart.Series] = []
            var eff: [SVGLineChart.Series] = []
            var lat: [SVGLineChart.Series] = []
            for l in options.latencies {
                for s in options.streams {
                    let pts = r.transport.filter { $0.latency_ms == l && $0.streams == s }
                    rate.append(
                        .init(
                            label: "\(l) ms, \(s) streams",
                            points: pts.compactMap { p in p.rate.map { (Double(p.connections), $0) } }))
                    if l > 0 {
                        eff.append(
                            .init(
                                label: "\(l) ms, \(s) streams",
                                points: pts.compactMap { p in p.efficiency.map { (Double(p.connections), $0 * 100) } }))
                        rate.append(
                            .init(
                                label: "bound \(l) ms, \(s)",
                                points: pts.compactMap { p in p.bound.map { (Double(p.connections), $0) } },
                                dashed: true))
                    }
                    lat.append(
                        .init(
                            label: "p50 \(l) ms, \(s)",
                            points: pts.compactMap { p in p.p50_ms.map { (Double(p.connections), max($0, 0.01)) } }))
                    lat.append(
                        .init(
                            label: "p99 \(l) ms, \(s)",
                            points: pts.compactMap { p in p.p99_ms.map { (Double(p.connections), max($0, 0.01)) } },
                            dashed: true))
                }
            }
            try SVGLineChart(
                title: "Transport throughput vs connections (dashed: Little's-law bound)", xLabel: "connections",
                yLabel: "requests/s", series: rate, logX: true, logY: true
            ).write(to: dir + "/transport-throughput.svg")
            try SVGLineChart(
                title: "Transport efficiency vs the Little's-law bound", xLabel: "connections",
                yLabel: "% of connections × streams / latency", series: eff, logX: true
            ).write(to: dir + "/transport-efficiency.svg")
            try SVGLineChart(
                title: "Transport latency percentiles vs connections", xLabel: "connections",
                yLabel: "ms (log)", series: lat, logX: true, logY: true
            ).write(to: dir + "/transport-latency.svg")
            // Throughput against latency and against the stream limit (one connection count per line).
            var vsLat: [SVGLineChart.Series] = []
            var vsStreams: [SVGLineChart.Series] = []
            for c in options.connections {
                for s in options.streams {
                    let pts = r.transport.filter { $0.connections == c && $0.streams == s }
                    vsLat.append(
                        .init(
                            label: "\(c) conn, \(s) streams",
                            points: pts.compactMap { p in p.rate.map { (Double(p.latency_ms), $0) } }))
                }
                for l in options.latencies {
                    let pts = r.transport.filter { $0.connections == c && $0.latency_ms == l }
                    vsStreams.append(
                        .init(
                            label: "\(c) conn, \(l) ms",
                            points: pts.compactMap { p in p.rate.map { (Double(p.streams), $0) } }))
                }
            }
            try SVGLineChart(
                title: "Transport throughput vs mock latency", xLabel: "mock latency (ms)", yLabel: "requests/s",
                series: vsLat, logY: true
            ).write(to: dir + "/transport-vs-latency.svg")
            try SVGLineChart(
                title: "Transport throughput vs stream limit", xLabel: "max concurrent streams", yLabel: "requests/s",
                series: vsStreams, logX: true, logY: true
            ).write(to: dir + "/transport-vs-streams.svg")
        }
        if !r.workers.isEmpty, let first = r.workers.first {
            let measured = SVGLineChart.Series(
                label: "measured", points: r.workers.map { (Double($0.workers), $0.rate) })
            let ideal = SVGLineChart.Series(
                label: "linear from 1 worker",
                points: r.workers.map { (Double($0.workers), first.rate * Double($0.workers)) }, dashed: true)
            try SVGLineChart(
                title: "End-to-end throughput vs worker processes (one Redis, one mock, 2 cores)",
                xLabel: "worker processes",
                yLabel: "devices/s", series: [measured, ideal]
            ).write(to: dir + "/e2e-workers.svg")
            let lat = [
                SVGLineChart.Series(label: "p50", points: r.workers.map { (Double($0.workers), $0.accept_p50_ms) }),
                SVGLineChart.Series(label: "p99", points: r.workers.map { (Double($0.workers), $0.accept_p99_ms) }),
            ]
            try SVGLineChart(
                title: "Enqueue → accepted per device vs worker processes", xLabel: "worker processes",
                yLabel: "ms", series: lat
            ).write(to: dir + "/e2e-workers-latency.svg")
        }
    }
}
