import Foundation
import Testing
import VolleyCore
import VolleyMock
import VolleyService
import VolleyStore
import VolleyTestDoubles
import VolleyTestSupport
import VolleyTestTags

/// `throttlePerMinute` and `ttl` on real parts: `volley worker` processes sharing the throttle's gate in a real
/// Redis, sending to the mock over TLS; the mock's own clock says when each push arrived.
///
/// The full acceptance run (3,000 devices at 1,200/min, about 150 s, 4 workers) is opt-in:
/// `VOLLEY_LONG_TESTS=1 swift test --skip-build --filter ThrottleProcessTests`.
@Suite(.serialized, .tags(.integration)) struct ThrottleProcessTests {
    static let inFlight = 16

    /// `users` users × `devicesPerUser` iOS devices (every other one Android with `android`).
    func register(_ w: MockWorld, users: Int, devicesPerUser: Int, android: Bool = false) throws {
        try w.h.register(
            app: "app1", users: users, devicesPerUser: devicesPerUser,
            platform: { android && $0 % 2 == 1 ? .android : .ios },
            token: { u, d in String(format: "%08x%08x", u, d) + String(repeating: "b", count: 48) })
    }

    func workerKeys(shardSize: Int) -> [String: String] {
        [
            "inFlight": "\(Self.inFlight)", "blockMs": "200", "drainSeconds": "3", "reclaimIdleMs": "5000",
            "shardSize": "\(shardSize)",
        ]
    }

    /// The most pushes any one-second window of the mock's log holds (windows start at a push, half-open).
    static func busiest(_ times: [Date], seconds: TimeInterval) -> Int {
        let t = times.sorted()
        var best = 0
        var j = 0
        for i in t.indices {
            while j < t.count && t[j] < t[i].addingTimeInterval(seconds) { j += 1 }
            best = max(best, j - i)
        }
        return best
    }

    /// Runs a throttled campaign of `users` × `devicesPerUser` on `workers` worker processes; returns the report
    /// and the instants the mock accepted each push.
    func campaign(
        users: Int, devicesPerUser: Int, perMinute: Int, workers: Int, shardSize: Int, timeout: Duration
    ) async throws -> (JobReport, [Date]) {
        let devices = users * devicesPerUser
        let w = try MockWorld(mockConfig: #"{"capturePushes": \#(devices + 100), "latencyMs": 2}"#)
        defer { w.stop() }
        try register(w, users: users, devicesPerUser: devicesPerUser)
        let config = try w.writeConfig(worker: workerKeys(shardSize: shardSize))
        var procs: [WorkerProcess] = []
        for i in 0..<workers { procs.append(try WorkerProcess(config: config, consumer: "T\(i)", logDirectory: w.dir)) }
        defer { for p in procs where p.isRunning { p.kill9() } }
        var job = PushJob(
            id: "throttled", org: "org1", app: "app1", recipients: (0..<users).map { RecipientID("user\($0)") },
            notification: VolleyCore.Notification(title: "Paced", body: "one slice at a time"))
        job.throttlePerMinute = perMinute
        try w.h.producer.enqueue(job)
        try await waitUntil("the report of the throttled job: \(procs.first?.log.suffix(1500) ?? "")", timeout: timeout)
        {
            (try? w.h.report(for: "throttled")) != nil
        }
        let report = try #require(try w.h.report(for: "throttled"))
        return (report, w.mock.capturedPushes().map(\.acceptedAt))
    }

    @Test func sixHundredDevicesAt1200AMinuteGoTwentyASecondAcrossTwoWorkers() async throws {
        // 20 users × 30 devices in 4 shards of 5 users: two worker processes send the shards on one gate.
        let (r, times) = try await campaign(
            users: 20, devicesPerUser: 30, perMinute: 1200, workers: 2, shardSize: 5, timeout: .seconds(120))
        #expect(r.accepted == 600)
        #expect(times.count == 600)
        let busiest = Self.busiest(times, seconds: 1)
        #expect(busiest <= 20 + Self.inFlight, "busiest second: \(busiest)")
        let span = times.max()!.timeIntervalSince(times.min()!)
        // 600 at 20 a second, the first slice at once: 29.5 s; not faster, and not much slower.
        #expect(span >= 29 && span <= 33, "span \(span) s")
        print("throttle 600 @ 1200/min: span \(span) s, busiest second \(busiest)")
    }

    @Test(.enabled(if: ProcessInfo.processInfo.environment["VOLLEY_LONG_TESTS"] == "1"))
    func threeThousandDevicesAt1200AMinuteOnFourWorkersEndInAbout150Seconds() async throws {
        let (r, times) = try await campaign(
            users: 100, devicesPerUser: 30, perMinute: 1200, workers: 4, shardSize: 10, timeout: .seconds(240))
        #expect(r.accepted == 3000)
        let busiest = Self.busiest(times, seconds: 1)
        #expect(busiest <= 20 + Self.inFlight, "busiest second: \(busiest)")
        let busiestMinute = Self.busiest(times, seconds: 60)
        #expect(busiestMinute <= 1212, "busiest minute: \(busiestMinute)") // within 1 % of 1,200
        let span = times.max()!.timeIntervalSince(times.min()!)
        #expect(span >= 149 && span <= 153, "span \(span) s")
        print(
            "throttle 3000 @ 1200/min on 4 workers: span \(span) s, busiest second \(busiest), minute \(busiestMinute)")
    }

    @Test func aShortTTLBehindALongThrottleReportsTheLateDevicesExpired() async throws {
        let w = try MockWorld(mockConfig: #"{"capturePushes": 100}"#)
        defer { w.stop() }
        try register(w, users: 1, devicesPerUser: 30, android: true)
        let config = try w.writeConfig(worker: workerKeys(shardSize: 50_000))
        let p = try WorkerProcess(config: config, consumer: "E", logDirectory: w.dir)
        defer { if p.isRunning { p.kill9() } }
        // The worker is running (its promoter holds the schedule lease) before the job enters the stream, so the
        // eight seconds are not spent starting a process on a loaded machine.
        try await waitUntil("the worker running: \(p.log.suffix(1500))", timeout: .seconds(60)) {
            try w.h.admin.client.checked(["GET", w.h.store.scheduleLeaseKey(shard: 0)]).string != nil
        }
        // One a second for thirty devices, but the notification lives eight seconds from when the job entered the
        // stream.
        var job = PushJob(
            id: "short-lived", org: "org1", app: "app1", recipients: ["user0"],
            notification: VolleyCore.Notification(title: "Flash", body: "eight seconds only", ttl: 8))
        job.throttlePerMinute = 60
        try w.h.producer.enqueue(job)
        try await waitUntil("the report of short-lived: \(p.log.suffix(1500))", timeout: .seconds(40)) {
            (try? w.h.report(for: "short-lived")) != nil
        }
        let r = try #require(try w.h.report(for: "short-lived"))
        let expired = r.expired ?? 0
        #expect(r.accepted + expired == 30)
        #expect(r.accepted >= 1 && r.accepted <= 9, "accepted \(r.accepted)")
        #expect(expired >= 21)
        // Each push carried what was left of the eight seconds, counted from when the job entered the stream.
        // The stream entry id is `<ms>-<seq>`: when the job entered the stream.
        let entryMillis = try #require(r.entry?.rawValue.split(separator: "-").first.flatMap { Double($0) })
        let entered = entryMillis / 1000
        // APNs gets the instant; FCM the seconds left when it accepts, so a late push does not outlive it either.
        var android = 0
        for push in w.mock.capturedPushes() {
            if push.provider == .apns {
                let expiration = try #require(push.headers["apns-expiration"].flatMap(Double.init))
                #expect(expiration <= entered + 9)
            } else if case .object(let root)? = push.json, case .object(let message)? = root["message"],
                case .object(let options)? = message["android"], case .string(let ttl)? = options["ttl"],
                let seconds = Double(ttl.dropLast())
            {
                android += 1
                let lives = push.acceptedAt.timeIntervalSince1970 + seconds
                #expect(lives <= entered + 8.5, "an FCM push at \(push.acceptedAt) with ttl \(ttl)")
            } else {
                Issue.record("an FCM push without android.ttl")
            }
        }
        #expect(android >= 1)
    }
}
