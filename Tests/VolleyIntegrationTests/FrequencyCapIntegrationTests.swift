import Foundation
import Testing
import VolleyAPI
import VolleyCore
import VolleyEngine
import VolleyRedis
import VolleyStore
import VolleyTestDoubles
import VolleyTestSupport
import VolleyTestTags

/// Frequency caps on real parts: the rules through `volley api`, a `volley worker` process pushing to the mock, the
/// Redis script checked against the pure model, and four engines racing on one Redis.
@Suite(.serialized, .tags(.integration)) struct FrequencyCapIntegrationTests {
    static let v = "/services/data/v60.0"

    @Test func aCapOfTwoPerHourPushesTwiceAndKeepsThreeInboxEntries() async throws {
        let w = try MockWorld()
        defer { w.stop() }
        let extra = """
            orgs:
              - id: orgA
                frequencyCaps:
                  - {window: 1d, max: 50}
            """
        let api = try await RunningAPI(configFile: try APIServerTests.config(w, extra: extra))
        let admin = try APIServerTests.key(w, org: "orgA", role: .admin)
        let send = try APIServerTests.key(w, org: "orgA", role: .send)

        let fromFile = try await api.call("GET", "/v1/frequency-caps", token: admin)
        #expect(fromFile.status == 200, "\(fromFile.text)")
        #expect(fromFile.json["source"] as? String == "configuration")
        #expect((fromFile.json["rules"] as? [[String: Any]])?.first?["window"] as? String == "1d")

        // Refused rules: 400 naming the field, nothing stored.
        let refused: [(String, String)] = [
            (#"{"rules":[{"window":"2w","max":2}]}"#, "rules[0].window"),
            (#"{"rules":[{"window":"1h","max":0}]}"#, "rules[0].max"),
            (#"{"rules":[{"window":"1h","max":2},{"window":"1h"}]}"#, "rules[1].max"),
            (#"{"rules":[{"window":"1h","max":2,"type":""}]}"#, "rules[0].type"),
            (#"{"rules":[{"window":"1h","max":2,"per":"user"}]}"#, "rules[0].per"),
            (#"{"rules":[{"window":"1h","max":2},{"window":"60m","max":3}]}"#, "rules[1]"),
            (#"{"rules":{"window":"1h","max":2}}"#, "rules"),
            (#"{"caps":[]}"#, "caps"),
            (#"{}"#, "rules"),
        ]
        for (body, field) in refused {
            let a = try await api.call("PUT", "/v1/frequency-caps", token: admin, json: body)
            #expect(a.status == 400, "\(body) → \(a.text)")
            #expect(a.field == field, "\(body) → \(a.text)")
        }
        let rules = #"{"rules":[{"window":"1h","max":2}]}"#
        #expect(try await api.call("PUT", "/v1/frequency-caps", token: send, json: rules).status == 403)
        #expect(
            try await api.call("GET", "/v1/frequency-caps", token: admin).json["source"] as? String == "configuration")

        let put = try await api.call("PUT", "/v1/frequency-caps", token: admin, json: rules)
        #expect(put.status == 200, "\(put.text)")
        #expect(put.json["source"] as? String == "api")
        let got = try await api.call("GET", "/v1/frequency-caps", token: admin)
        #expect((got.json["rules"] as? [[String: Any]])?.map { "\($0["window"] ?? "")/\($0["max"] ?? "")" } == ["1h/2"])

        let user = try await APIServerTests.userToken(api, key: send, user: "005A")
        let ios = "beef" + String(repeating: "c", count: 60)
        for device in [#"{"platform":"ios","token":"\#(ios)"}"#, #"{"platform":"android","token":"fcm-cap-1"}"#] {
            #expect(try await api.call("PUT", "/v1/devices", token: user, json: device).status == 200)
        }
        let worker = try WorkerProcess(
            config: try w.writeConfig(worker: ["blockMs": "100"]), consumer: "caps-w", logDirectory: w.dir)
        defer { if worker.isRunning { worker.kill9() } }

        func sendAndWait(_ id: String, bypass: Bool = false) async throws -> [String: Any] {
            let flag = bypass ? #","enableFrequencyCap":false"# : ""
            let job = #"{"app":"app1","recipients":["005A"],"notification":{"title":"\#(id)","body":"b"}\#(flag)}"#
            let posted = try await api.call(
                "POST", "/v1/jobs", token: send, json: job, headers: ["Idempotency-Key": id])
            #expect(posted.status == 202, "\(posted.text)")
            var report: [String: Any] = [:]
            try await waitUntil("job \(id) done: \(worker.log.suffix(1500))", timeout: .seconds(60)) {
                let a = try await api.call("GET", "/v1/jobs/\(id)", token: send)
                report = a.json["report"] as? [String: Any] ?? [:]
                return a.json["state"] as? String == "done"
            }
            return report
        }
        let first = try await sendAndWait("cap-1")
        let second = try await sendAndWait("cap-2")
        let third = try await sendAndWait("cap-3")
        #expect(first["accepted"] as? Int == 2 && first["capped"] as? Int == 0, "\(first)")
        #expect(second["accepted"] as? Int == 2 && second["capped"] as? Int == 0, "\(second)")
        #expect(third["accepted"] as? Int == 0 && third["capped"] as? Int == 1, "\(third)")
        #expect(third["noDevices"] as? Int == 0 && third["inAppStored"] as? Int == 1)
        #expect(w.mock.stats().acceptedAPNs == 2 && w.mock.stats().acceptedFCM == 2)

        // Three inbox entries, through the Salesforce-compatible inbox.
        let inbox = try await api.call("GET", "\(Self.v)/connect/notifications?size=10", token: user)
        #expect(inbox.status == 200, "\(inbox.text)")
        let titles = (inbox.json["notifications"] as? [[String: Any]])?.compactMap { $0["messageTitle"] as? String }
        #expect(Set(titles ?? []) == ["cap-1", "cap-2", "cap-3"], "\(inbox.text)")

        // A job that bypasses the caps still pushes, and is not counted.
        let bypass = try await sendAndWait("cap-4", bypass: true)
        #expect(bypass["accepted"] as? Int == 2 && bypass["capped"] == nil, "\(bypass)")
        #expect(w.mock.stats().acceptedAPNs == 3 && w.mock.stats().acceptedFCM == 3)

        // DELETE returns the org to the file's rules.
        let deleted = try await api.call("DELETE", "/v1/frequency-caps", token: admin)
        #expect(deleted.status == 200 && deleted.json["source"] as? String == "configuration", "\(deleted.text)")
        await api.stop()
    }

    /// The script decides exactly as `FrequencyCapHistory`, step for step, on a clock moved by hand: rolling
    /// windows, a typed scope beside the general one, repeats of one notification; and its keys expire.
    @Test func theRedisScriptDecidesAsTheModel() throws {
        let fx = try RedisServerFixture()
        defer { fx.stop() }
        let redis = RedisFrequencyCapStore(client: fx.client(name: "caps"))
        let model = InMemoryFrequencyCaps()
        let table: [(String, Int, String?)] = [("1h", 3, nil), ("1d", 5, nil), ("30m", 1, "A")]
        let rules = try table.enumerated().map { i, r in
            try FrequencyCapRule.make(window: r.0, max: r.1, type: r.2, at: "rules[\(i)]")
        }
        let users: [UserID] = (0..<6).map { UserID("u:\($0)") }
        var seed: UInt64 = 0x5EED
        func next(_ n: Int) -> Int {
            seed = seed &* 6_364_136_223_846_793_005 &+ 1_442_695_040_888_963_407
            return Int((seed >> 33) % UInt64(n))
        }
        var now = Date(timeIntervalSince1970: 1_800_000_000)
        var sent: [(String, String?)] = []
        var admitted = 0
        var capped = 0
        for step in 0..<400 {
            now += Double(next(900))
            let repeatEarlier = !sent.isEmpty && next(5) == 0
            let (nid, type) = repeatEarlier ? sent[next(sent.count)] : ("n\(step)", [nil, "A", "B"][next(3)])
            if !repeatEarlier { sent.append((nid, type)) }
            guard let plan = FrequencyCapPlan(rules: rules, type: type, notification: nid) else { continue }
            let chunk = users.filter { _ in next(3) != 0 }
            let expected = try model.admit(org: "org1", plan: plan, users: chunk, now: now)
            let answered = try redis.admit(org: "org1", plan: plan, users: chunk, now: now)
            #expect(answered == expected, "step \(step): \(nid) type \(type ?? "-") at \(now)")
            admitted += expected.filter { $0 }.count
            capped += expected.filter { !$0 }.count
        }
        // Both answers were exercised many times (the sequence is fixed by the seed).
        #expect(admitted > 40 && capped > 100, "admitted \(admitted), capped \(capped)")
        let c = fx.client(name: "check")
        let general = "volley:fcap:{org1}:u:u:0"
        let typed = "volley:fcap:{org1}:t:1:A:u:u:0"
        let pttl = try c.checked(["PTTL", general]).integer ?? -2
        #expect(pttl > 0 && pttl <= 86_400_000)
        let typedTTL = try c.checked(["PTTL", typed]).integer ?? -2
        #expect(typedTTL == -2 || (typedTTL > 0 && typedTTL <= 1_800_000))
    }

    /// Four engines on one Redis, six campaigns to the same 5,000 users at once, each split into three shard jobs, a
    /// cap of 2 per hour: every user is pushed exactly twice, however the chunks interleave, every user's inbox holds
    /// all six, and each campaign's report sums its shards' capped users.
    @Test func fourWorkersHoldTheCapExactlyOverFiveThousandUsers() async throws {
        let h = try EngineHarness()
        defer { h.redis.stop() }
        let users = 5_000
        try h.register(users: users, devicesPerUser: 1, platform: { _ in .ios })
        let directory = RedisDirectory(client: h.redis.client(name: "import"))
        var records = (0..<users).map { DirectoryRecord(org: "org1", kind: .user, id: RecipientID("user\($0)")) }
        records.append(
            DirectoryRecord(
                org: "org1", kind: .group, id: "everyone", members: (0..<users).map { RecipientID("user\($0)") }))
        try directory.importRecords(records)
        let rule = try FrequencyCapRule.make(window: "1h", max: 2, type: nil, at: "rules[0]")
        let senders = (0..<4).map { _ in FakePushSender(platform: .ios) }
        var workers: [PipelineWorker] = []
        for (n, sender) in senders.enumerated() {
            let caps = RedisFrequencyCapStore(client: h.redis.client(name: "caps-\(n)"))
            var resolver = DirectoryRecipientResolver(
                directory: RedisDirectory(client: h.redis.client(name: "dir-\(n)")),
                inbox: RedisInboxStore(client: h.redis.client(name: "inbox-\(n)")), types: nil,
                shards: RedisShardCoordinator(client: h.redis.client(name: "shards-\(n)"), store: h.store),
                shardSize: 2_000, usersPerRead: 250)
            resolver.frequencyCaps = FrequencyCaps(
                rulebook: FrequencyCapRulebook(configured: ["org1": [rule]], stored: caps, clock: SystemClock()),
                store: caps)
            let c = WorkerConfiguration(
                consumer: "race-\(n)", concurrentJobs: 2, inFlight: 400, blockMillis: 50, reclaimIdleMillis: 60_000,
                reclaimIntervalMillis: 60_000, recordBatch: 200, chunkSize: 250)
            let backend = RedisPipelineBackend(
                endpoint: h.redis.endpoint, store: h.store, consumer: c.consumer, options: .init(giveUpAfter: 30))
            workers.append(
                PipelineWorker(
                    configuration: c, backend: backend, apps: StaticAppDirectory(["app1": [.ios: sender]]),
                    resolver: resolver))
        }
        for w in workers { try w.start() }
        defer { for w in workers { w.drain(deadline: 1) } }
        let jobs = (0..<6).map { JobID("race-\($0)") }
        for id in jobs {
            try h.producer.enqueue(
                PushJob(
                    id: id, org: "org1", app: "app1", recipients: ["everyone"],
                    notification: VolleyCore.Notification(title: "t", body: "b")))
        }
        var reports: [JobReport] = []
        try await waitUntil("six reports", timeout: .seconds(240)) {
            reports = try jobs.compactMap { try h.report(for: $0) }
            return reports.count == jobs.count
        }
        #expect(reports.map(\.accepted).reduce(0, +) == 2 * users)
        #expect(reports.compactMap(\.capped).reduce(0, +) == 4 * users)
        #expect(reports.allSatisfy { $0.users == users && $0.inAppStored == users && $0.shards == 3 })
        var perToken: [String: Int] = [:]
        for s in senders { perToken.merge(s.perToken, uniquingKeysWith: +) }
        #expect(perToken.count == users)
        #expect(perToken.values.allSatisfy { $0 == 2 }, "\(perToken.filter { $0.value != 2 }.prefix(5))")
        let c = h.redis.client(name: "check")
        for u in [0, 2_499, 4_999] {
            #expect(try c.checked(["ZCARD", "volley:inbox:{org1}:u:user\(u):all"]).integer == 6)
            #expect(try c.checked(["ZCARD", "volley:fcap:{org1}:u:user\(u)"]).integer == 2)
        }
    }
}
