import Foundation
import Logging
import Testing
@testable import VolleyService

/// The benchmark's SVG renderer and summaries (pure logic; the benchmarks themselves are not run by `swift test`).
struct BenchChartsTests {
    @Test func rendersOnePolylinePerSeriesWithLegend() {
        let chart = SVGLineChart(title: "t < 1", xLabel: "connections", yLabel: "requests/s", series: [
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
        let svg = SVGLineChart(title: "x", xLabel: "x", yLabel: "y",
                               series: [.init(label: "s", points: [(0, 1), (1, 0), (2, 10), (4, 100)])],
                               logX: true, logY: true).render()
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

/// `volley bench transport --rounds`: every round measures every contender; the summary is the median.
struct TransportBenchRoundsTests {
    @Test func medianOfOddAndEvenCounts() {
        #expect(median([3, 1, 2]) == 2)
        #expect(median([4, 1, 3, 2]) == 2.5)
        #expect(median([]) == 0)
    }

    /// Two short rounds against a real volley-mock (debug build next to the tests), bare transport and provider.
    @Test func roundsRunEveryContenderAndReportMedians() async throws {
        let candidates = [
            URL(fileURLWithPath: CommandLine.arguments[0]).deletingLastPathComponent().path,
            Bundle.main.bundleURL.deletingLastPathComponent().path,
            FileManager.default.currentDirectoryPath + "/.build/debug",
        ]
        let dir = try #require(candidates.first { FileManager.default.isExecutableFile(atPath: $0 + "/volley-mock") },
                               "volley-mock not built next to the tests")
        var o = TransportBenchOptions(executableDirectory: dir)
        o.requests = 300; o.concurrency = 20; o.rounds = 2; o.vsProvider = true; o.warmupRequests = 50
        let r = try await TransportBench.run(o, logger: Logger(label: "bench-test"))
        #expect(r.rounds.count == 2)
        #expect(r.failures == 0)
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
