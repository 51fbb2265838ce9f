import Foundation
import Logging
import VolleyCore
import VolleyService
import VolleyStore

/// `volley-bench console`: the console's Campaigns page with an org of `jobs` campaigns (server time and bytes of
/// its first page, signed in as a browser is), and what a campaign page's live refresh costs the API (its CPU per
/// refresh under wrk, times one refresh every two seconds).
public struct ConsoleBenchOptions: Sendable {
    public var jobs = 10_000
    /// Campaigns page loads measured, one after another.
    public var pageLoads = 20
    /// Seconds of wrk on the live refresh.
    public var durationSeconds = 5
    public init() {}
}

public struct ConsoleBenchResult: Sendable, Codable, Hashable {
    public var jobs: Int
    public var campaignsPageMsP50: Double
    public var campaignsPageMsMax: Double
    public var campaignsPageBytes: Int
    public var liveRequestsPerSecond: Double
    public var liveAPICPUMicrosPerRequest: Double?
    /// The API's CPU for one open campaign page refreshing every two seconds, in percent of a core.
    public var liveRefreshCorePercentPerPage: Double?

    enum CodingKeys: String, CodingKey {
        case jobs
        case campaignsPageMsP50 = "campaigns_page_ms_p50"
        case campaignsPageMsMax = "campaigns_page_ms_max"
        case campaignsPageBytes = "campaigns_page_bytes"
        case liveRequestsPerSecond = "live_requests_per_second"
        case liveAPICPUMicrosPerRequest = "live_api_cpu_us_per_request"
        case liveRefreshCorePercentPerPage = "live_refresh_core_pct_per_page"
    }
}

public enum ConsoleBench {
    /// The console's refresh period (console.js).
    static let refreshSeconds = 2.0

    public static func run(_ o: ConsoleBenchOptions, logger: Logger) throws -> ConsoleBenchResult {
        let rig = try APIBenchRig(name: "console")
        defer { rig.close() }
        let (wrk, curl, dir, redis, port) = (rig.wrk, rig.curl, rig.dir, rig.redis, rig.port)
        let secret = Data((0..<32).map { _ in UInt8.random(in: 0...255) }).base64EncodedString()
        let config = try APIBench.writeConfig(
            dir: dir, redisURL: redis.url, port: port,
            apiExtra: "  userTokens:\n    keys: [{id: bench, secret: \"\(secret)\"}]\nconsole:\n  enabled: true\n")
        let volley = volleyExecutablePath()
        let org = "00Dxx0000001gEF"
        let key = try APIBench.createKey(volley: volley, config: config, org: org, role: "admin", dir: dir)
        let api = try APIBench.startAPI(volley: volley, config: config, port: port, dir: dir, curl: curl)
        defer { api.stop(grace: 5) }
        let base = "http://127.0.0.1:\(port)"

        // The org's campaigns, written by the API's own submission script (the record `GET /v1/jobs/{id}` reads and
        // the org's job list); no worker runs, so they stay queued and listed.
        let settings = try PipelineSettings(try VolleyConfiguration.load(path: config))
        let producer = JobProducer(client: settings.client(name: "bench", logger: logger), store: settings.store)
        let body = #"{"app":"bench_app","recipients":["u1"],"notification":{"title":"Bench","body":"A campaign"}}"#
        let job = try PushJob(json: try JSONValue(parsing: Array(body.utf8)), defaultOrg: OrgID(org))
        for _ in 0..<o.jobs { _ = try producer.submit(job, now: Date()) }
        logger.info("\(o.jobs) campaigns submitted")

        // Signed in as a browser: the sign-in form's cookie and token, then the session cookie.
        let jar = dir + "/cookies"
        let login = try APIBench.runOnce(
            curl, ["-sf", "-c", jar, base + "/console/login"], directory: dir, name: "curl")
        guard let range = login.range(of: #"name="csrf" value=""#) else {
            throw BenchError("the sign-in page has no CSRF token: is console.enabled on?")
        }
        let token = String(login[range.upperBound...].prefix { $0 != "\"" })
        _ = try APIBench.runOnce(
            curl,
            [
                "-sf", "-b", jar, "-c", jar, "-o", "/dev/null", "--data-urlencode", "csrf=\(token)",
                "--data-urlencode", "key=\(key)", base + "/console/login",
            ], directory: dir, name: "curl")
        let cookies = try String(contentsOfFile: jar, encoding: .utf8)
        guard let line = cookies.split(separator: "\n").first(where: { $0.contains("volley_console") }),
            let session = line.split(separator: "\t").last
        else { throw BenchError("signing in set no session cookie") }
        let cookie = "volley_console=\(session)"

        var times: [Double] = []
        var bytes = 0
        for _ in 0..<max(1, o.pageLoads) {
            let out = try APIBench.runOnce(
                curl,
                [
                    "-sf", "-o", "/dev/null", "-H", "Cookie: \(cookie)", "-w", "%{time_total} %{size_download}",
                    base + "/console/jobs",
                ], directory: dir, name: "curl")
            let parts = out.split(separator: " ")
            guard parts.count == 2, let t = Double(parts[0]), let b = Int(parts[1]) else {
                throw BenchError("curl printed \(out)")
            }
            times.append(t * 1000)
            bytes = b
        }
        times.sort()

        // One campaign's live refresh under wrk: the API's CPU per refresh.
        let list = try APIBench.runOnce(
            curl, ["-sf", "-H", "Authorization: Bearer \(key)", base + "/v1/jobs?limit=1"], directory: dir,
            name: "curl")
        guard let object = try? JSONSerialization.jsonObject(with: Data(list.utf8)) as? [String: Any],
            let first = (object["jobs"] as? [[String: Any]])?.first?["id"] as? String
        else { throw BenchError("GET /v1/jobs listed no job: \(list)") }
        let live = dir + "/live.lua"
        try "wrk.headers[\"Cookie\"] = \"\(cookie)\"\n".write(toFile: live, atomically: true, encoding: .utf8)
        let before = api.sample()?.cpuSeconds
        let out = try APIBench.runOnce(
            wrk,
            [
                "-t", "1", "-c", "4", "-d", "\(o.durationSeconds)s", "--latency", "-s", live,
                base + "/console/jobs/\(first)/live",
            ], directory: dir, name: "wrk")
        let after = api.sample()?.cpuSeconds
        let row = APIBench.parse(out, name: "live", method: "GET", path: "/console/jobs/{id}/live")
        var perRequest: Double?
        if let before, let after, let requests = row.requests, requests > 0 {
            perRequest = (after - before) * 1e6 / Double(requests)
        }
        return ConsoleBenchResult(
            jobs: o.jobs, campaignsPageMsP50: times[times.count / 2], campaignsPageMsMax: times.last ?? 0,
            campaignsPageBytes: bytes, liveRequestsPerSecond: row.requestsPerSecond,
            liveAPICPUMicrosPerRequest: perRequest,
            liveRefreshCorePercentPerPage: perRequest.map { $0 / 1e6 / refreshSeconds * 100 })
    }

    public static func table(_ r: ConsoleBenchResult) -> String {
        let cpu = r.liveAPICPUMicrosPerRequest.map { String(format: "%.1f", $0) } ?? "-"
        let pct = r.liveRefreshCorePercentPerPage.map { String(format: "%.4f", $0) } ?? "-"
        return """
            campaigns page, \(r.jobs) campaigns in the org: p50 \(String(format: "%.1f", r.campaignsPageMsP50)) ms, \
            max \(String(format: "%.1f", r.campaignsPageMsMax)) ms, \(r.campaignsPageBytes) bytes
            live refresh: \(Int(r.liveRequestsPerSecond)) req/s under wrk, API CPU \(cpu) µs per refresh, \
            \(pct) % of a core per open page (one refresh every \(Int(refreshSeconds)) s)
            """
    }
}
