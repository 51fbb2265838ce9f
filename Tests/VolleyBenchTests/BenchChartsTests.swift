import Foundation
import Logging
import Testing
import VolleyService
import VolleyTestTags

@testable import VolleyBench

/// The benchmark's SVG renderer and summaries (pure logic; the benchmarks themselves are not run by `swift test`).
@Suite(.tags(.unit))
struct BenchChartsTests {
    @Test func rendersOnePolylinePerSeriesWithLegend() {
        let chart = SVGLineChart(
            title: "t < 1", xLabel: "connections", yLabel: "requests/s",
            series: [
                .init(label: "20 ms", points: [(1, 45_000), (2, 90_000), (4, 120_000)]),
                .init(label: "bound", points: [(1, 50_000), (2, 100_000), (4, 200_000)], dashed: true),
            ], logX: true, logY: true)
        let svg = chart.render()
        #expect(svg.hasPrefix("<svg"))
        #expect(svg.components(separatedBy: "<polyline").count - 1 == 2)
        #expect(svg.contains("20 ms") && svg.contains("bound"))
        #expect(svg.contains("t &lt; 1"))
        #expect(svg.contains("stroke-dasharray"))
    }

    @Test func skipsNonPositiveValuesOnLogAxes() {
        let svg = SVGLineChart(
            title: "x", xLabel: "x", yLabel: "y",
            series: [.init(label: "s", points: [(0, 1), (1, 0), (2, 10), (4, 100)])],
            logX: true, logY: true
        ).render()
        // (0, 1) and (1, 0) cannot be drawn on log axes: two points remain.
        #expect(svg.components(separatedBy: "<circle").count - 1 == 2)
    }

    @Test func emptyChartIsStillValidSVG() {
        let svg = SVGLineChart(title: "x", xLabel: "x", yLabel: "y", series: []).render()
        #expect(svg.contains("<svg"))
    }

    @Test func latencySummaryFromHistogramInMilliseconds() {
        var h = E2EBench.newHistogram()
        for us in [1_000, 2_000, 3_000, 100_000] as [UInt64] { _ = h.record(us) }
        let s = E2EBench.summary(h)
        #expect(s.count == 4)
        #expect(abs(s.p50_ms - 2.0) < 0.01)
        #expect(abs(s.max_ms - 100.0) < 0.2)
    }

    @Test func niceTicksCoverTheRange() {
        let t = SVGLineChart.niceTicks(0, 97)
        #expect(t.first == 0)
        #expect((t.last ?? 0) >= 95)
    }
}

/// `volley-bench transport --rounds`: every round measures every contender; the summary is the median.
@Suite(.tags(.unit))
struct TransportBenchRoundsTests {
    @Test func medianOfOddAndEvenCounts() {
        #expect(median([3, 1, 2]) == 2)
        #expect(median([4, 1, 3, 2]) == 2.5)
        #expect(median([]) == 0)
    }

    /// Little's law on the summary line: in-flight / mean latency, and the excess over the mock's latency.
    @Test func latencyLineStatesTheClosedLoopBound() throws {
        let data = Data(
            #"""
            {"rate": 45000, "p50_ms": 21.1, "p99_ms": 29.8, "mean_ms": 21.7, "p90_ms": 23.5, "p999_ms": 34.2,
             "max_ms": 38.5, "cpu_s": 1.6, "cpu_us": 10.6, "requests": 150000, "failures": 0, "connections": 1,
             "concurrency": 1000, "peak_streams_per_connection": 1000, "server": "mock", "rounds": []}
            """#.utf8)
        let r = try JSONDecoder().decode(TransportBenchResult.self, from: data)
        let line = TransportBench.latencyLine(r, mockLatencyMs: 20)
        #expect(line.contains("mean 21.700 ms"))
        #expect(line.contains("in-flight 1000 / mean = 46082 req/s"))
        #expect(line.contains("1.700 ms per request above the mock's 20 ms"))
        #expect(!TransportBench.latencyLine(r, mockLatencyMs: 0).contains("above the mock"))
        #expect(!TransportBench.latencyLine(r, mockLatencyMs: nil).contains("above the mock"))
    }
}

/// `volley-bench transport --rounds` against a real `volley-mock` process: the integration lane, which builds the
/// mock next to the tests.
@Suite(.tags(.integration))
struct TransportBenchRoundsProcessTests {
    /// Two short rounds against a real volley-mock (debug build next to the tests), bare transport and provider.
    @Test func roundsRunEveryContenderAndReportMedians() async throws {
        let candidates = [
            URL(fileURLWithPath: CommandLine.arguments[0]).deletingLastPathComponent().path,
            Bundle.main.bundleURL.deletingLastPathComponent().path,
            FileManager.default.currentDirectoryPath + "/.build/debug",
        ]
        let dir = try #require(
            candidates.first { FileManager.default.isExecutableFile(atPath: $0 + "/volley-mock") },
            "volley-mock not built next to the tests")
        var o = TransportBenchOptions(executableDirectory: dir)
        o.requests = 300
        o.concurrency = 20
        o.rounds = 2
        o.vsProvider = true
        o.warmupRequests = 50
        o.mockLatencyMs = 5
        let r = try await TransportBench.run(o, logger: Logger(label: "bench-test"))
        #expect(r.rounds.count == 2)
        #expect(r.failures == 0)
        // Every answer waits the mock's 5 ms; the percentiles are ordered and the mean lies among them.
        for x in r.rounds {
            #expect(x.p50_ms >= 5 && x.mean_ms >= 5)
            #expect(x.p50_ms <= x.p90_ms && x.p90_ms <= x.p99_ms && x.p99_ms <= x.p999_ms && x.p999_ms <= x.max_ms)
            #expect(x.mean_ms <= x.max_ms)
        }
        #expect(r.rounds.allSatisfy { $0.rate > 0 && $0.provider_rate ?? 0 > 0 && $0.same_requests_rate ?? 0 > 0 })
        #expect(r.rate == median(r.rounds.map(\.rate)))
        #expect(r.provider_ratio == median(r.rounds.compactMap(\.provider_ratio)))
        // The provider is compared with the bare transport sending the provider's own requests, round by round.
        for round in r.rounds {
            let (p, same) = (try #require(round.provider_rate), try #require(round.same_requests_rate))
            #expect(round.provider_ratio == p / same)
        }
        #expect(r.same_requests_rate == median(r.rounds.compactMap(\.same_requests_rate)))
    }
}

@Suite(.tags(.unit))
struct E2EBenchOptionsTests {
    @Test func workerEnvironmentEntriesAreKeyEqualsValue() {
        let env = E2EBench.Options.environment([
            "LD_PRELOAD=/usr/lib/libjemalloc.so.2",
            "GLIBC_TUNABLES=glibc.malloc.tcache_count=0", "EMPTY=", "A=1", "A=2",
        ])
        #expect(
            env == [
                "LD_PRELOAD": "/usr/lib/libjemalloc.so.2", "GLIBC_TUNABLES": "glibc.malloc.tcache_count=0",
                "EMPTY": "", "A": "2",
            ])
        #expect(E2EBench.Options.environment([]) == [:])
        #expect(E2EBench.Options.environment(["NOEQUALS"]) == nil)
        #expect(E2EBench.Options.environment(["=value"]) == nil)
    }
}

@Suite(.tags(.unit))
struct E2EClusterConfigurationTests {
    /// Writes a volley-mock endpoints file whose referenced files exist (the configuration checks they are readable).
    func endpoints(in dir: URL) throws -> MockEndpoints {
        for name in ["ca.pem", "key.p8", "sa.json"] {
            try Data("x".utf8).write(to: dir.appendingPathComponent(name))
        }
        let json = """
            {"host": "127.0.0.1", "port": 8443, "ca_file": "\(dir.path)/ca.pem",
             "apns": {"p8_file": "\(dir.path)/key.p8", "key_id": "K", "team_id": "T", "topic": "com.example"},
             "fcm": {"service_account_file": "\(dir.path)/sa.json", "project_id": "p"}}
            """
        let file = dir.appendingPathComponent("endpoints.json")
        try Data(json.utf8).write(to: file)
        return try MockEndpoints(file: file.path)
    }

    @Test func singleAndClusterConfigurationsDifferInRedisOnly() throws {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("bench-cfg-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: dir) }
        let e = try endpoints(in: dir)
        var o = E2EBench.Options()
        o.inFlight = 1234
        let bench = E2EBench(options: o)
        let seeds = ["127.0.0.1:30001", "127.0.0.1:30002", "127.0.0.1:30003"]
        let single = try VolleyConfiguration.parse(
            yaml: bench.yaml(endpoints: e, redis: .single(url: "redis://127.0.0.1:7000/0")), baseDirectory: dir)
        let cluster = try VolleyConfiguration.parse(
            yaml: bench.yaml(endpoints: e, redis: .cluster(seeds: seeds)), baseDirectory: dir)
        #expect(single.redis.url == "redis://127.0.0.1:7000/0")
        #expect(single.redis.cluster.isEmpty)
        #expect(cluster.redis.cluster == seeds)
        #expect(cluster.redis.url == "redis://127.0.0.1:30001/0")
        #expect(single.worker == cluster.worker)
        #expect(single.worker.inFlight == 1234)
    }
}
