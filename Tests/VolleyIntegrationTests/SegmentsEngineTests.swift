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

/// Segments on a real redis-server: attributes written through the directory import and the API move users in the
/// attribute index, jobs naming segments, `exclude` and `{"all": true}` run through the real engine (fake senders
/// stand in for APNs and FCM) and reach exactly the matching users' devices, the API's count agrees with the job's
/// audience, and Redis's set operations agree with `Segment.matches` on random attributes.
@Suite(.serialized, .tags(.integration)) struct SegmentsEngineTests {
    static let org: OrgID = "orgA"
    static let users = 3000
    static let plans = ["gold", "silver", "bronze"]
    static let cities = ["Berlin", "Lisbon", "Paris", "Bonn"]

    /// User i's attributes; every 50th is inactive, every 10th has no device.
    static func attributes(_ i: Int) -> [String: String] {
        ["plan": plans[i % 3], "city": cities[(i / 3) % 4], "age": String(18 + i % 60)]
    }
    static func isActive(_ i: Int) -> Bool { i % 50 != 7 }
    static func hasDevice(_ i: Int) -> Bool { i % 10 != 9 }
    static func token(_ i: Int) -> String { "tok-u\(i)-d0-" + String(repeating: "a", count: 16) }

    static func importUsers(_ directory: RedisDirectory, count: Int) throws {
        var records: [DirectoryRecord] = []
        for i in 0..<count {
            records.append(
                DirectoryRecord(
                    org: org, kind: .user, id: RecipientID("user\(i)"), active: isActive(i) ? nil : false,
                    attributes: attributes(i)))
        }
        var i = 0
        while i < records.count {
            try directory.importRecords(Array(records[i..<min(records.count, i + 1000)]))
            i += 1000
        }
    }

    static func registerDevices(_ h: EngineHarness, count: Int) throws {
        var recs: [DeviceImportRecord] = []
        for i in 0..<count where hasDevice(i) {
            recs.append(
                DeviceImportRecord(
                    org: org, app: "app1", user: UserID("user\(i)"), platform: i % 2 == 0 ? .ios : .android,
                    token: DeviceToken(token(i))))
        }
        try h.admin.register(recs)
    }

    struct Senders {
        let ios = FakePushSender(platform: .ios)
        let android = FakePushSender(platform: .android)
        var perToken: [String: Int] { ios.perToken.merging(android.perToken, uniquingKeysWith: +) }
    }

    static func worker(
        _ h: EngineHarness, _ senders: Senders, consumer: String = "w1", shards: RedisShardCoordinator? = nil,
        shardSize: Int = 50_000
    ) -> PipelineWorker {
        let resolver = DirectoryRecipientResolver(
            directory: RedisDirectory(client: h.redis.client(name: "\(consumer)-dir")), inbox: nil, types: nil,
            shards: shards, shardSize: shardSize, usersPerRead: 200)
        let c = WorkerConfiguration(
            consumer: consumer, concurrentJobs: 2, inFlight: 500, blockMillis: 100, reclaimIdleMillis: 60_000,
            reclaimIntervalMillis: 200, maxDeliveries: 5, drainDeadlineSeconds: 5, recordBatch: 200, chunkSize: 500)
        let backend = RedisPipelineBackend(
            endpoint: h.redis.endpoint, store: h.store, consumer: consumer, options: .init(giveUpAfter: 30))
        return PipelineWorker(
            configuration: c, backend: backend,
            apps: StaticAppDirectory(["app1": [.ios: senders.ios, .android: senders.android]]), resolver: resolver)
    }

    static func run(_ h: EngineHarness, _ job: PushJob) async throws -> JobReport {
        let id = try #require(job.id)
        try h.producer.enqueue(job)
        try await waitUntil("the report of \(id)", timeout: .seconds(60)) { (try? h.report(for: id)) != nil }
        return try #require(try h.report(for: id))
    }

    static func job(_ id: JobID, _ recipients: [RecipientEntry], exclude: [RecipientEntry]? = nil) -> PushJob {
        var j = PushJob(id: id, org: org, app: "app1", notification: VolleyCore.Notification(title: "Hi", body: "b"))
        j.recipients = recipients
        j.exclude = exclude
        return j
    }

    static let goldBerlin =
        #"{"match":"all","filters":[{"attribute":"plan","op":"eq","value":"gold"},"#
        + #"{"attribute":"city","op":"eq","value":"Berlin"}]}"#

    @Test func aSegmentJobReachesExactlyItsUsersAndTheCountAgrees() async throws {
        let w = try MockWorld()
        defer { w.stop() }
        try Self.importUsers(RedisDirectory(client: w.redis.client(name: "import")), count: Self.users)
        try Self.registerDevices(w.h, count: Self.users)
        let api = try await RunningAPI(configFile: try APIServerTests.config(w))
        defer { Task { await api.stop() } }
        let admin = try APIServerTests.key(w, org: "orgA", role: .admin)
        let read = try APIServerTests.key(w, org: "orgA", role: .read)
        let put = try await api.call("PUT", "/v1/segments/gold-berlin", token: admin, json: Self.goldBerlin)
        #expect(put.status == 201, "\(put.text)")
        let young = try await api.call(
            "PUT", "/v1/segments/young", token: admin,
            json: #"{"filters":[{"attribute":"age","op":"lt","value":"30"}]}"#)
        #expect(young.status == 201, "\(young.text)")
        // A bad filter is refused, naming it.
        let bad = try await api.call(
            "PUT", "/v1/segments/bad", token: admin,
            json: #"{"filters":[{"attribute":"plan","op":"eq","value":"gold"},{"attribute":"city","op":"is"}]}"#)
        #expect(bad.status == 400 && bad.field == "filters[1].op", "\(bad.text)")

        var attributes = (0..<Self.users).map(Self.attributes)
        func matching(_ rule: ([String: String]) -> Bool) -> Set<Int> {
            Set((0..<Self.users).filter { Self.isActive($0) && rule(attributes[$0]) })
        }
        func isGoldBerlin(_ a: [String: String]) -> Bool { a["plan"] == "gold" && a["city"] == "Berlin" }
        func tokens(_ users: Set<Int>) -> Set<String> { Set(users.filter(Self.hasDevice).map(Self.token)) }

        let senders = Senders()
        let worker = Self.worker(w.h, senders)
        try worker.start()
        defer { worker.drain(deadline: 1) }

        // gold ∧ Berlin.
        let expected = matching(isGoldBerlin)
        #expect(expected.count > 100)
        let count = try await api.call("GET", "/v1/segments/gold-berlin/count", token: read)
        #expect(count.status == 200 && count.json["users"] as? Int == expected.count, "\(count.text)")
        let first = try await Self.run(w.h, Self.job("gb-1", [.segment("gold-berlin")]))
        #expect(first.users == expected.count && first.noDevices == expected.filter { !Self.hasDevice($0) }.count)
        #expect(Set(senders.perToken.keys) == tokens(expected))
        #expect(senders.perToken.values.allSatisfy { $0 == 1 })

        // Less the young ones and one user named by id: exactly their devices are left out.
        let excludedID = try #require(expected.filter { Int(attributes[$0]["age"] ?? "") ?? 0 >= 30 }.min())
        let rest = expected.subtracting(matching { Int($0["age"] ?? "") ?? 0 < 30 }).subtracting([excludedID])
        let second = try await Self.run(
            w.h,
            Self.job(
                "gb-2", [.segment("gold-berlin")], exclude: [.segment("young"), .id(RecipientID("user\(excludedID)"))]))
        #expect(second.users == rest.count && rest.count < expected.count && !rest.isEmpty)
        let afterSecond = senders.perToken
        #expect(Set(afterSecond.filter { $0.value == 2 }.keys) == tokens(rest))

        // Attribute updates move users between segments: one leaves (plan), one arrives (city), one is new.
        let leaving = try #require(expected.filter(Self.hasDevice).min())
        let arriving = try #require(
            (0..<Self.users).first {
                Self.isActive($0) && Self.hasDevice($0) && attributes[$0]["plan"] == "gold"
                    && attributes[$0]["city"] == "Bonn"
            })
        for (user, change) in [(leaving, ["plan": "silver"]), (arriving, ["city": "Berlin"])] {
            attributes[user].merge(change) { _, new in new }
            let body = JSONValue.object(["attributes": .object(attributes[user].mapValues(JSONValue.string))]).jsonText
            let a = try await api.call("PUT", "/v1/users/user\(user)/attributes", token: admin, json: body)
            #expect(a.status == 200, "\(a.text)")
        }
        let moved = matching(isGoldBerlin)
        #expect(moved == expected.subtracting([leaving]).union([arriving]))
        let recount = try await api.call("GET", "/v1/segments/gold-berlin/count", token: read)
        #expect(recount.json["users"] as? Int == moved.count, "\(recount.text)")
        let third = try await Self.run(w.h, Self.job("gb-3", [.segment("gold-berlin")]))
        #expect(third.users == moved.count)
        let thirdTokens = Set(senders.perToken.filter { $0.value > (afterSecond[$0.key] ?? 0) }.keys)
        #expect(thirdTokens == tokens(moved))
        #expect(senders.perToken[Self.token(leaving)] == afterSecond[Self.token(leaving)])
        #expect(senders.perToken[Self.token(arriving)] == 1)

        // Everyone with a device in the app less the gold ones: active users with a device and another plan.
        let others = try await Self.run(w.h, Self.job("all-1", [.all], exclude: [.segment("gold-berlin")]))
        let everyone = Set((0..<Self.users).filter { Self.isActive($0) && Self.hasDevice($0) })
        #expect(others.users == everyone.subtracting(moved).count && others.noDevices == 0)
        // The index and the scratch sets of resolutions and counts are all that is left under the org's keys.
        let leftover = try w.redis.client(name: "scan").checked(["KEYS", "volley:resolve:*"]).array ?? []
        #expect(leftover.isEmpty, "\(leftover)")
        let counts = try w.redis.client(name: "scan").checked(["KEYS", "volley:attr:{orgA}:count:*"]).array ?? []
        #expect(counts.isEmpty, "\(counts)")
    }

    @Test func aLargeSegmentJobIsSplitIntoShardsLikeAGroup() async throws {
        let h = try EngineHarness()
        defer { h.redis.stop() }
        let users = 2500
        try Self.importUsers(RedisDirectory(client: h.redis.client(name: "import")), count: users)
        try Self.registerDevices(h, count: users)
        let store = RedisSegmentStore(client: h.redis.client(name: "segments"))
        let segment = try Segment(
            id: "not-bronze",
            json: try JSONValue(parsing: #"{"filters":[{"attribute":"plan","op":"ne","value":"bronze"}]}"#))
        _ = try store.put(org: Self.org, segment, maxCount: 10)
        let expected = (0..<users).filter { Self.isActive($0) && Self.attributes($0)["plan"] != "bronze" }
        #expect(try store.count(org: Self.org, id: "not-bronze") == expected.count)
        var workers: [PipelineWorker] = []
        let senders = [Senders(), Senders()]
        for (i, s) in senders.enumerated() {
            let shards = RedisShardCoordinator(
                client: h.redis.client(name: "w\(i)-shards"), jobStream: h.store.jobStream)
            let worker = Self.worker(h, s, consumer: "w\(i)", shards: shards, shardSize: 600)
            try worker.start()
            workers.append(worker)
        }
        defer { for w in workers { w.drain(deadline: 1) } }
        let r = try await Self.run(h, Self.job("big", [.segment("not-bronze")]))
        #expect(r.shards == (expected.count + 599) / 600 && r.users == expected.count)
        var sent: [String: Int] = [:]
        for s in senders { sent.merge(s.perToken, uniquingKeysWith: +) }
        #expect(Set(sent.keys) == Set(expected.filter(Self.hasDevice).map(Self.token)))
        #expect(sent.values.allSatisfy { $0 == 1 })
    }

    /// A seeded generator (SplitMix64), so a failure can be run again.
    struct Random {
        var state: UInt64
        mutating func next() -> UInt64 {
            state &+= 0x9E37_79B9_7F4A_7C15
            var z = state
            z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
            z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
            return z ^ (z >> 31)
        }
        mutating func below(_ n: Int) -> Int { Int(next() % UInt64(n)) }
        mutating func pick<T>(_ a: [T]) -> T { a[below(a.count)] }
    }

    @Test func redisAgreesWithTheSegmentRuleOnRandomAttributes() throws {
        let h = try EngineHarness()
        defer { h.redis.stop() }
        var random = Random(state: 2026)
        let directory = RedisDirectory(client: h.redis.client(name: "dir"))
        let oracle = InMemoryDirectory()
        let names = ["plan", "score", "seen", "tier"]
        let values: [String: [String]] = [
            "plan": ["gold", "silver", "Gold", "bronze"],
            "score": ["-3", "0", "2.5", "10", "9", "1e2", "x"],
            "seen": [
                "2026-01-31T09:00:00Z", "2026-01-31T10:00:00+01:00", "2025-12-24T18:00:00-05:00",
                "2026-03-01T00:00:00Z",
                "7",
            ],
            "tier": ["1", "2", "3"],
        ]
        var records: [DirectoryRecord] = []
        for i in 0..<400 {
            var a: [String: String] = [:]
            for n in names where random.below(3) > 0 { a[n] = random.pick(values[n] ?? []) }
            records.append(
                DirectoryRecord(
                    org: Self.org, kind: .user, id: RecipientID("u\(i)"), active: random.below(10) == 0 ? false : nil,
                    attributes: i % 13 == 0 ? nil : a))
        }
        records.append(DirectoryRecord(org: Self.org, kind: .group, id: "g1", members: ["u1", "u2", "u3", "u300"]))
        try directory.importRecords(records)
        oracle.importRecords(records)
        // Then some users change, through the same path as `PUT /v1/users/{user}/attributes`.
        for i in stride(from: 0, to: 400, by: 7) {
            var a: [String: String] = [:]
            for n in names where random.below(2) == 0 { a[n] = random.pick(values[n] ?? []) }
            try directory.setAttributes(org: Self.org, user: UserID("u\(i)"), a)
            oracle.write(org: Self.org, user: UserID("u\(i)"), a)
        }
        for i in 0..<400 where i % 3 == 0 { oracle.addDeviceUser(org: Self.org, app: "app1", UserID("u\(i)")) }
        try h.admin.register(
            (0..<400).filter { $0 % 3 == 0 }.map {
                DeviceImportRecord(
                    org: Self.org, app: "app1", user: UserID("u\($0)"), platform: .ios, token: DeviceToken("t\($0)"))
            })
        let store = RedisSegmentStore(client: h.redis.client(name: "segments"))
        func filter() -> String {
            let n = random.pick(names)
            let v = random.pick(values[n] ?? [])
            switch random.below(7) {
            case 0: return #"{"attribute":"\#(n)","op":"eq","value":"\#(v)"}"#
            case 1: return #"{"attribute":"\#(n)","op":"ne","value":"\#(v)"}"#
            case 2: return #"{"attribute":"\#(n)","op":"in","value":["\#(v)","\#(random.pick(values[n] ?? []))"]}"#
            case 3: return #"{"attribute":"\#(n)","op":"exists"}"#
            case 4: return #"{"attribute":"\#(n)","op":"notExists"}"#
            default:
                let bound = random.pick(["0", "5", "2.5", "2026-01-31T09:00:00Z", "2026-01-01T00:00:00+02:00"])
                return #"{"attribute":"\#(n)","op":"\#(random.below(2) == 0 ? "gt" : "lt")","value":"\#(bound)"}"#
            }
        }
        for s in 0..<60 {
            let filters = (0..<(1 + random.below(3))).map { _ in filter() }.joined(separator: ",")
            let text = #"{"match":"\#(random.below(2) == 0 ? "all" : "any")","filters":[\#(filters)]}"#
            let segment = try Segment(id: SegmentID("s\(s)"), json: try JSONValue(parsing: text))
            _ = try store.put(org: Self.org, segment, maxCount: 100)
            oracle.putSegment(org: Self.org, segment)
            #expect(try store.count(org: Self.org, segment) == oracle.count(org: Self.org, segment), "\(text)")
            // The same segment as a job's audience: alone (built in one pass), the app's users alone, or with ids, a
            // group and the app's users; with or without an exclusion.
            let include: [RecipientEntry] =
                switch s % 4 {
                case 0: [.segment(segment.id), "g1", "u5", .all]
                case 1: [.segment(segment.id)]
                case 2: [.all]
                default: [.segment(segment.id), "g1", "u5"]
                }
            let exclude: [RecipientEntry] = s % 8 < 4 ? [.segment(SegmentID("s\(max(0, s - 1))")), "u2"] : []
            let audience = Audience(include: include, exclude: exclude, app: "app1")
            let batches = try directory.open(org: Self.org, audience: audience, scope: "check-\(s)")
            var drained = Set<UserID>()
            while let users = try batches.next(max: 97) { drained.formUnion(users) }
            let (expected, summary) = oracle.resolve(org: Self.org, audience: audience)
            #expect(drained == expected, "\(text)")
            #expect(batches.summary.users == summary.users)
        }
    }

    @Test func reindexRebuildsTheIndexFromTheStoredAttributes() throws {
        let h = try EngineHarness()
        defer { h.redis.stop() }
        let client = h.redis.client(name: "admin")
        let directory = RedisDirectory(client: h.redis.client(name: "dir"))
        try directory.importRecords([
            DirectoryRecord(org: Self.org, kind: .user, id: "u0", attributes: ["plan": "gold"]),
            DirectoryRecord(org: Self.org, kind: .user, id: "u1"),
        ])
        // Attributes changed behind the index's back (stored before it existed, or by hand): u0 is silver now,
        // u2 gold.
        let k = RecipientKeys(org: Self.org)
        _ = try client.checked(["HSET", k.attributes, "u0", #"{"plan":"silver"}"#, "u2", #"{"plan":"gold","n":"5"}"#])
        let store = RedisSegmentStore(client: h.redis.client(name: "segments"))
        let gold = try Segment(
            id: "gold", json: try JSONValue(parsing: #"{"filters":[{"attribute":"plan","op":"eq","value":"gold"}]}"#))
        let noPlan = try Segment(
            id: "none", json: try JSONValue(parsing: #"{"filters":[{"attribute":"plan","op":"notExists"}]}"#))
        let over4 = try Segment(
            id: "n", json: try JSONValue(parsing: #"{"filters":[{"attribute":"n","op":"gt","value":4}]}"#))
        #expect(try store.count(org: Self.org, gold) == 1) // u0, stale
        let counts = try directory.reindexAttributes(org: Self.org, pageSize: 1)
        #expect(counts.users == 2 && counts.values == 3 && counts.knownUsers == 3)
        func members(_ s: Segment) throws -> Set<String> {
            let b = try directory.open(
                org: Self.org, audience: Audience(include: [.segment(s.id)], app: "app1"), scope: "r")
            var out = Set<String>()
            while let users = try b.next(max: 10) { out.formUnion(users.map(\.rawValue)) }
            return out
        }
        for s in [gold, noPlan, over4] { _ = try store.put(org: Self.org, s, maxCount: 10) }
        #expect(try members(gold) == ["u2"])
        #expect(try members(noPlan) == ["u1"])
        #expect(try members(over4) == ["u2"])
        #expect(try client.checked(["SISMEMBER", k.attributeEquals("plan", "silver"), "u0"]).integer == 1)
        // A write after the rebuild moves the entries as usual.
        try directory.setAttributes(org: Self.org, user: "u2", [:])
        #expect(try members(gold).isEmpty && members(noPlan) == ["u1", "u2"] && members(over4).isEmpty)
    }
}
