// swift-format-ignore-file: AlwaysUseLowerCamelCase

import Foundation
import Logging
import VolleyCore
import VolleyRedis
import VolleyStore

/// `volley-bench interactions`: wrk posting engagement events (`POST /v1/interactions`) at a `volley api` process on
/// its own redis-server, as a backend relaying its apps' events does: batches of `eventsPerRequest` events of one
/// campaign, each a new device's (70 % opened, 10 % dismissed, 20 % taps on two actions), so every event is counted,
/// told on the event stream and checked against a set, none answered as a replay. Reports events per second and the
/// API process's CPU per event, and checks that the job's counts hold every event the API accepted.
public struct InteractionsBenchOptions: Sendable {
    public var connections = 16
    public var threads = 2
    public var durationSeconds = 10
    public var eventsPerRequest = 100
    public init() {}
}

public struct InteractionsBenchResult: Sendable, Codable, Hashable {
    public var events_per_second: Double
    /// CPU (user + system) of the `volley api` process over the run, per event.
    public var api_cpu_us_per_event: Double?
    /// redis-server's CPU per event.
    public var redis_cpu_us_per_event: Double?
    public var requests_per_second: Double
    public var events_per_request: Int
    public var p50_ms: Double?
    public var p99_ms: Double?
    public var connections: Int
    public var duration_seconds: Int
    public var non2xx: Int
    public var errors: Int
    /// Events the job's counts hold after the run (`opened` + `dismissed` + every `action:<id>`).
    public var events_counted: Int
    /// Events in requests wrk completed (each answered 202, unless `non2xx` says otherwise); `events_counted` is
    /// higher by the requests in flight when wrk stopped, which the API still answered.
    public var events_sent: Int
    /// Entries on the event stream after the run (trimmed at `events.maxLength`).
    public var stream_entries: Int
}

public enum InteractionsBench {
    static let org = "00Dxx0000001gEF"
    static let job = "bench-campaign"

    public static func run(_ o: InteractionsBenchOptions, logger: Logger) throws -> InteractionsBenchResult {
        let rig = try APIBenchRig(name: "interactions")
        defer { rig.close() }
        let (wrk, curl, dir, redis, port) = (rig.wrk, rig.curl, rig.dir, rig.redis, rig.port)
        let config = try APIBench.writeConfig(dir: dir, redisURL: redis.url, port: port)
        let volley = volleyExecutablePath()
        let key = try APIBench.createKey(volley: volley, config: config, org: org, role: "send", dir: dir)

        // The campaign a worker would have registered when it sent the job.
        let endpoint = RedisEndpoint.unix(redis.socket)
        let client = RedisClient(endpoint: endpoint, options: .init(giveUpAfter: 10), name: "bench", logger: logger)
        let store = StoreConfiguration()
        let tracking = MessageTracking(org: OrgID(org), job: JobID(job))
        try RedisMessageTracking(client: client, store: store).register(
            org: OrgID(org), campaign: tracking.campaign, job: JobID(job), app: "bench_app", inbox: nil)

        let api = try BenchChild(
            name: "volley api", executable: volley, arguments: ["api", "--config", config], logFile: dir + "/api.log")
        defer { api.stop(grace: 5) }
        let base = "http://127.0.0.1:\(port)"
        let until = benchNow() + 30
        while (try? APIBench.runOnce(curl, ["-sf", base + "/livez"], directory: dir, name: "curl")) == nil {
            if !api.isRunning || benchNow() > until { throw BenchError("volley api did not start:\n\(api.logTail())") }
            usleep(50_000)
        }
        let script = dir + "/interactions.lua"
        try lua(key: key, campaign: tracking.campaign, events: o.eventsPerRequest)
            .write(toFile: script, atomically: true, encoding: .utf8)
        func cpuNow() -> (api: Double?, redis: Double?) { (api.sample()?.cpuSeconds, redis.child.sample()?.cpuSeconds) }
        let before = cpuNow()
        let out = try APIBench.runOnce(
            wrk,
            [
                "-t", String(o.threads), "-c", String(o.connections), "-d", "\(o.durationSeconds)s", "--latency",
                "-s", script, base + "/v1/interactions",
            ], directory: dir, name: "wrk")
        let after = cpuNow()
        let row = APIBench.parse(out, name: "interactions", method: "POST", path: "/v1/interactions")
        let events = (row.requests ?? 0) * o.eventsPerRequest
        func perEvent(_ from: Double?, _ to: Double?) -> Double? {
            guard let from, let to, events > 0 else { return nil }
            return (to - from) * 1e6 / Double(events)
        }
        // Requests wrk gave up on at its end are still being counted: read until the counts and the stream agree
        // and stay put (at most 5 s).
        func settled() throws -> (counted: Int, stream: Int) {
            let r = try client.pipeline([
                ["HGETALL", store.countsKey(OrgID(org), JobID(job))], ["XLEN", store.eventStream(org: OrgID(org))],
            ])
            var counted = 0
            for (field, value) in r[0].fieldPairs
            where field == "opened" || field == "dismissed" || field.hasPrefix("action:") {
                counted += Int(value) ?? 0
            }
            return (counted, Int(r[1].integer ?? 0))
        }
        var last = try settled()
        let deadline = benchNow() + 5
        while benchNow() < deadline {
            usleep(100_000)
            let now = try settled()
            if now == last && now.counted == now.stream { break }
            last = now
        }
        let (counted, streamLength) = last
        let result = InteractionsBenchResult(
            events_per_second: row.requestsPerSecond * Double(o.eventsPerRequest),
            api_cpu_us_per_event: perEvent(before.api, after.api),
            redis_cpu_us_per_event: perEvent(before.redis, after.redis),
            requests_per_second: row.requestsPerSecond, events_per_request: o.eventsPerRequest, p50_ms: row.p50Ms,
            p99_ms: row.p99Ms, connections: o.connections, duration_seconds: o.durationSeconds, non2xx: row.non2xx,
            errors: row.errors, events_counted: counted, events_sent: events, stream_entries: streamLength)
        logger.info("\(Int(result.events_per_second)) events/s, \(counted) counted of \(events) sent")
        return result
    }

    /// wrk's script: every request a new batch of events, each of a device no other event names (the thread's
    /// letter and a counter make the device half), so each is counted once.
    static func lua(key: String, campaign: String, events: Int) -> String {
        """
        local threads = 0
        function setup(thread)
          thread:set("tid", threads)
          threads = threads + 1
        end
        local counter = 0
        local actions = {"reply", "archive"}
        local headers = {["Authorization"] = "Bearer \(key)", ["Content-Type"] = "application/json"}
        function request()
          counter = counter + 1
          local parts = {}
          for i = 1, \(events) do
            local device = string.format("%s%010d", string.char(65 + (tid or 0)), counter * \(events) + i)
            local event
            if i % 10 < 7 then
              event = '"event":"opened"'
            elseif i % 10 == 7 then
              event = '"event":"dismissed"'
            else
              event = '"event":"action","actionId":"' .. actions[i % 2 + 1] .. '"'
            end
            parts[i] = '{"messageId":"\(campaign).' .. device .. '",' .. event .. '}'
          end
          return wrk.format("POST", nil, headers, '{"events":[' .. table.concat(parts, ",") .. ']}')
        end
        """
    }

    /// A table for the terminal and docs/benchmarks.md.
    public static func table(_ r: InteractionsBenchResult) -> String {
        func f(_ v: Double?, _ format: String) -> String { v.map { String(format: format, $0) } ?? "-" }
        return [
            "| events/s | req/s | events/request | p50 ms | p99 ms | API CPU µs/event | Redis CPU µs/event "
                + "| counted/sent |",
            "|---:|---:|---:|---:|---:|---:|---:|---:|",
            "| \(Int(r.events_per_second)) | \(Int(r.requests_per_second)) | \(r.events_per_request) | "
                + "\(f(r.p50_ms, "%.2f")) | \(f(r.p99_ms, "%.2f")) | \(f(r.api_cpu_us_per_event, "%.2f")) | "
                + "\(f(r.redis_cpu_us_per_event, "%.2f")) | \(r.events_counted)/\(r.events_sent) |",
            "goal: ≥ 20,000 events/s",
        ].joined(separator: "\n")
    }
}
