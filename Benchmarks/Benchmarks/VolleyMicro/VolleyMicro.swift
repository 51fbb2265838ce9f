// Volley micro-benchmarks: the per-notification and per-batch costs on the hot path.
// Allocation counts (mallocCountTotal) are the stable gate, checked in under Thresholds/; wall clock and CPU are
// reported for information (the 2-core VM has ±20% noise).
import Benchmark
import Crypto
import Foundation
import VolleyAPNs
import VolleyCore
import VolleyEngine
import VolleyFCM
import VolleyHTTP2
import VolleyRedis
import VolleyStore

let benchmarks: @Sendable () -> Void = {
    Benchmark.defaultConfiguration = .init(
        metrics: [.wallClock, .cpuTotal, .mallocCountTotal, .throughput],
        warmupIterations: 3,
        maxDuration: .seconds(2),
        maxIterations: 100_000,
        // Allocations are deterministic: any increase is a regression worth a look.
        thresholds: [.mallocCountTotal: .init(relative: [.p50: 1.0, .p90: 2.0], absolute: [.p50: 2, .p90: 4])]
    )

    let notification = Notification(
        title: "Volley", body: String(repeating: "Your weekly summary is ready. ", count: 7),
        data: ["recordId": .string("a0B5e000001AbCdEAF")])
    let jobID = JobID("campaign-2026-11-22-0001")
    let iosDevice = Device(
        platform: .ios, token: DeviceToken(String(repeating: "ab", count: 32)), environment: .production,
        locale: "en_US", user: UserID("005000000000001"))
    let fcmDevice = Device(
        platform: .android, token: DeviceToken("bench1:APA91b" + String(repeating: "x", count: 140)),
        locale: "en_US", user: UserID("005000000000002"))
    let bearer = "bearer " + String(repeating: "e", count: 180)

    // The harness's own allocations per sample (read the other counts relative to this floor).
    Benchmark("floor: empty iteration") { benchmark in
        for i in benchmark.scaledIterations {
            blackHole(i)
        }
    }

    // MARK: payload encoding

    Benchmark("APNs payload encode (per job)") { benchmark in
        for _ in benchmark.scaledIterations {
            blackHole(
                try APNSPreparedNotification(notification, jobID: jobID, bundleID: "com.example.app", now: Date()))
        }
    }

    Benchmark("FCM message encode (per job)") { benchmark in
        for _ in benchmark.scaledIterations {
            blackHole(try FCMPreparedNotification(notification, projectID: "volley-bench"))
        }
    }

    // MARK: per device: request = header list + body (+ apns-id)

    Benchmark("APNs request build (headers + apns-id, per device)") { benchmark in
        let prepared = try APNSPreparedNotification(
            notification, jobID: jobID, bundleID: "com.example.app", now: Date())
        // As the provider does: :method, :authority and authorization encoded once per endpoint and token.
        let prefix = APNSPreparedNotification.requestPrefix(authority: "api.push.apple.com", authorization: bearer)
        benchmark.startMeasurement()
        for _ in benchmark.scaledIterations {
            blackHole(prepared.request(for: iosDevice, prefix: prefix))
        }
    }

    Benchmark("FCM request build (headers + body, per device)") { benchmark in
        let prepared = try FCMPreparedNotification(notification, projectID: "volley-bench")
        benchmark.startMeasurement()
        for _ in benchmark.scaledIterations {
            blackHole(prepared.request(for: fcmDevice, authority: "fcm.googleapis.com", authorization: bearer))
        }
    }

    // MARK: per response

    Benchmark("APNs response decode (200, apns-id as received by the client)") { benchmark in
        var fields = HTTP2HeaderBlock()
        fields.append("apns-id", "5a8f1c2e-0b3d-8e4f-9a6b-7c8d9e0f1a2b")
        fields.append("content-type", "application/json")
        let response = HTTP2Response(status: 200, fields: fields)
        benchmark.startMeasurement()
        for _ in benchmark.scaledIterations {
            blackHole(APNSResponseDecoder.decode(response))
        }
    }

    // MARK: JWT

    let p8 = P256.Signing.PrivateKey().pemRepresentation
    Benchmark("APNs JWT mint (ES256, once per 50 min per team+key)") { benchmark in
        let provider = try APNSTokenProvider(
            p8PEM: p8, keyID: "ABC123DEFG", teamID: "DEF123GHIJ",
            refreshAfterSeconds: 0, minimumIntervalSeconds: 0)
        benchmark.startMeasurement()
        for _ in benchmark.scaledIterations {
            blackHole(try provider.authorization())
        }
    }

    Benchmark("APNs authorization per notification (cached JWT)") { benchmark in
        let provider = try APNSTokenProvider(p8PEM: p8, keyID: "ABC123DEFG", teamID: "DEF123GHIJ")
        _ = try provider.authorization()
        benchmark.startMeasurement()
        for _ in benchmark.scaledIterations {
            blackHole(try provider.authorization())
        }
    }

    // MARK: RESP parsing of an XREADGROUP reply

    for entries in [100, 1000] {
        let bytes = xreadgroupReply(entries: entries)
        Benchmark("RESP parse XREADGROUP reply, \(entries) entries (\(bytes.count / 1024) KiB)") { benchmark in
            for _ in benchmark.scaledIterations {
                blackHole(try RedisReplyParser.parse(bytes))
            }
        }
    }

    // MARK: hand-written readers beside Foundation's decoding of the same bytes
    // tools/release fails unless each hand-written reader is at least twice as fast as its Foundation twin
    // (tools/reader_ratio.py): a reader that is not earns no place beside JSONDecoder.

    let jobBytes = Array(benchJobJSON.utf8)
    let jobData = Data(jobBytes)
    Benchmark("reader: job, JSONValue(parsing:) + PushJob(json:)") { benchmark in
        for _ in benchmark.scaledIterations {
            blackHole(try PushJob(json: JSONValue(parsing: jobBytes), defaultOrg: nil))
        }
    }
    Benchmark("reader: job, Foundation JSONDecoder") { benchmark in
        let decoder = JSONDecoder()
        for _ in benchmark.scaledIterations {
            blackHole(try decoder.decode(PushJob.self, from: jobData))
        }
    }

    let record =
        #"{"platform":"ios","token":"\#(String(repeating: "ab", count: 32))","environment":"production","#
        + #""locale":"en_US","user":"005000000000001","registeredAt":1795323600,"lastSeenAt":1795323600}"#
    let recordData = Data(record.utf8)
    Benchmark("reader: device record, DeviceRecordReader") { benchmark in
        for _ in benchmark.scaledIterations {
            blackHole(DeviceRecordReader.device(fromJSON: record))
        }
    }
    Benchmark("reader: device record, Foundation JSONDecoder") { benchmark in
        let decoder = JSONDecoder()
        decoder.dateDecodingStrategy = .secondsSince1970
        for _ in benchmark.scaledIterations {
            blackHole(try decoder.decode(DeviceRecord.self, from: recordData).device)
        }
    }

    // MARK: resolution chunk (real redis-server)

    Benchmark(
        "resolve one chunk: 100 users × 2 devices from the registry (real Redis)",
        configuration: .init(maxDuration: .seconds(3), maxIterations: 2_000)
    ) { benchmark in
        guard let redis = BenchRedisServer.shared else { return }
        let session = try redis.session()
        let job = PushJob(
            id: jobID, org: OrgID("bench"), app: AppName("app"),
            recipients: (0..<100).map { RecipientID("u\($0)") }, notification: notification)
        let resolver = UserRecipientResolver(usersPerRead: 100)
        benchmark.startMeasurement()
        for _ in benchmark.scaledIterations {
            let cursor = try resolver.cursor(for: job, session: session)
            blackHole(try cursor.next(max: 500))
        }
    }

    Benchmark(
        "Redis round trip: EVALSHA grant-like script (real Redis)",
        configuration: .init(maxDuration: .seconds(3), maxIterations: 10_000)
    ) { benchmark in
        guard let redis = BenchRedisServer.shared else { return }
        let client = redis.client()
        // The shape of an hourly quota grant: INCRBY within a limit, with an expiry (recipients issue).
        let script = RedisScript(
            """
            local used = tonumber(redis.call('GET', KEYS[1]) or '0')
            local want = tonumber(ARGV[1]); local limit = tonumber(ARGV[2])
            local grant = math.max(0, math.min(want, limit - used))
            if grant > 0 then redis.call('INCRBY', KEYS[1], grant); redis.call('EXPIRE', KEYS[1], 7200) end
            return grant
            """)
        benchmark.startMeasurement()
        for _ in benchmark.scaledIterations {
            blackHole(try client.eval(script, keys: ["volley:bench:quota"], args: ["1", "1000000000"]))
        }
    }
}

/// A campaign job as a producer writes it: recipients, a localized notification, data.
let benchJobJSON =
    #"{"app":"app","id":"job-0f6c3b1e-7d2a-4c55-9b8e-2a1d3c4b5e6f","org":"00D000000000001","#
    + #""recipients":["005000000000001","005000000000002","00G000000000003"],"notification":{"title":"Deal closed","#
    + #""body":"Opportunity Acme - 200 Widgets moved to Closed Won","localized":{"fr":{"title":"Affaire conclue"}},"#
    + #""badge":1,"sound":"default","data":{"recordId":"006000000000001","amount":125000.5},"ttl":3600}}"#

/// A RESP XREADGROUP reply: [[stream, [[id, [job, json]] × entries]]] with a typical targeted-job JSON per entry.
func xreadgroupReply(entries: Int) -> [UInt8] {
    func bulk(_ s: String) -> String { "$\(s.utf8.count)\r\n\(s)\r\n" }
    let job =
        #"{"app":"app","id":"job-0f6c3b1e-7d2a-4c55-9b8e-2a1d3c4b5e6f","notification":{"body":"Opportunity Acme - "#
        + #"200 Widgets moved to Closed Won","title":"Deal "#
        + #"closed"},"org":"00D000000000001","recipients":["005000000000001","005000000000002"]}"#
    var s = "*1\r\n*2\r\n" + bulk("volley:jobs") + "*\(entries)\r\n"
    for i in 0..<entries {
        s += "*2\r\n" + bulk("1763771000000-\(i)") + "*2\r\n" + bulk("job") + bulk(job)
    }
    return Array(s.utf8)
}

/// One redis-server for the Redis-backed benchmarks (unix socket in a temp dir), loaded with 100 users × 2
/// devices; killed with SIGKILL at exit. nil (and the benchmarks return at once) when redis-server is missing.
final class BenchRedisServer: @unchecked Sendable {
    static let shared: BenchRedisServer? = try? BenchRedisServer()

    let process: Process
    let socket: String
    let endpoint: RedisEndpoint

    init() throws {
        let dir = NSTemporaryDirectory() + "volley-micro-\(getpid())"
        try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
        socket = dir + "/r.sock"
        process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/redis-server")
        process.arguments = ["--port", "0", "--unixsocket", socket, "--save", "", "--appendonly", "no", "--dir", dir]
        process.standardOutput = FileHandle.nullDevice
        try process.run()
        benchRedisPID = process.processIdentifier
        atexit { if benchRedisPID > 0 { kill(benchRedisPID, SIGKILL) } }
        for _ in 0..<500 where !FileManager.default.fileExists(atPath: socket) { usleep(10_000) }
        endpoint = try RedisEndpoint(url: "unix://\(socket)")
        let s = try session()
        var records: [DeviceImportRecord] = []
        for u in 0..<100 {
            records.append(
                DeviceImportRecord(
                    org: OrgID("bench"), app: AppName("app"), user: UserID("u\(u)"), platform: .ios,
                    token: DeviceToken(String(format: "%064x", u)), locale: "en_US"))
            records.append(
                DeviceImportRecord(
                    org: OrgID("bench"), app: AppName("app"), user: UserID("u\(u)"), platform: .android,
                    token: DeviceToken("bench\(u):APA91b" + String(repeating: "x", count: 140))))
        }
        try s.register(records)
    }

    func client() -> RedisClient { RedisClient(endpoint: endpoint, name: "micro") }
    func session() throws -> RedisPipelineSession {
        RedisPipelineBackend(endpoint: endpoint, consumer: "micro").makeRedisSession(name: "micro")
    }
}

nonisolated(unsafe) var benchRedisPID: Int32 = 0
