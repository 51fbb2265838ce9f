import Testing
import VolleyTestTags

@testable import VolleyBench

/// `volley-bench api` reads wrk's summary; the CPU-per-request figures divide by the request count read here.
@Suite(.tags(.unit))
struct APIBenchParseTests {
    static let summary = """
        Running 10s test @ http://127.0.0.1:40719/v1/jobs
          2 threads and 64 connections
          Thread Stats   Avg      Stdev     Max   +/- Stdev
            Latency     5.41ms    2.03ms  31.22ms   72.40%
            Req/Sec     5.82k   412.31     6.80k    69.00%
          Latency Distribution
             50%    5.39ms
             75%    6.44ms
             90%    7.84ms
             99%   11.83ms
          115812 requests in 10.01s, 27.72MB read
          Non-2xx or 3xx responses: 3
          Socket errors: connect 0, read 1, write 0, timeout 2
        Requests/sec:  11565.46
        Transfer/sec:      2.77MB
        """

    @Test func readsTheRateTheCountThePercentilesAndTheFailures() {
        let row = APIBench.parse(Self.summary, name: "job POST", method: "POST", path: "/v1/jobs")
        #expect(row.requestsPerSecond == 11565.46)
        #expect(row.requests == 115_812)
        #expect(row.p50Ms == 5.39)
        #expect(row.p99Ms == 11.83)
        #expect(row.non2xx == 3)
        #expect(row.errors == 3)
        // Filled in by the run from /proc, not by the parse.
        #expect(row.apiCPUMicrosPerRequest == nil)
    }

    @Test func aSummaryWithoutACountLeavesItUnknown() {
        let row = APIBench.parse("Requests/sec:  10.0\n", name: "livez", method: "GET", path: "/livez")
        #expect(row.requests == nil)
        #expect(row.requestsPerSecond == 10)
    }
}
