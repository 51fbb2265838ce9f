import Foundation
import Logging
import Testing
import VolleyAPI
import VolleyCore
import VolleyEngine
import VolleyMock
import VolleyRedis
import VolleyService
import VolleyStore
import VolleyTestDoubles
import VolleyTestSupport
import VolleyTestTags

/// Engagement feedback end to end: a campaign through the real API over HTTP, a real worker on a real redis-server
/// and the mock over TLS; the app side posts opens for every push's `mid` (as the mock received it), taps on two
/// actions and replays; the job's counts, the event stream and the users' inboxes say what happened, each once.
/// Every entry of the event stream `volley:events` (docs/events.md), oldest first, as its fields.
func eventStream(_ redis: RedisClient) throws -> [[String: String]] {
    try (redis.checked(["XRANGE", "volley:events", "-", "+"]).array ?? []).map { entry in
        var f: [String: String] = [:]
        for (k, v) in entry.array?.last?.fieldPairs ?? [] { f[k] = v }
        return f
    }
}

@Suite(.serialized, .tags(.integration)) struct EngagementEndToEndTests {
    static let users = 24
    /// The stores with the event stream's outcome entries and the delivery history on (both off by default).
    static var store: StoreConfiguration {
        var s = StoreConfiguration()
        s.eventsOutcomes = true
        s.deliveryHistoryDays = 7
        return s
    }

    static func token(_ u: Int) -> String {
        u % 3 == 2 ? "fcm-engaged-\(u)" : "beef" + String(format: "%060x", u)
    }

    @Test func opensAndTapsAreCountedOnceAndMarkTheInbox() async throws {
        let w = try MockWorld(mockConfig: #"{"capturePushes": 200}"#)
        defer { w.stop() }
        try w.h.admin.register(
            (0..<Self.users).map { u in
                DeviceImportRecord(
                    org: "orgA", app: "app1", user: UserID("u\(u)"), platform: u % 3 == 2 ? .android : .ios,
                    token: DeviceToken(Self.token(u)))
            })
        let directory = RedisDirectory(client: w.redis.client(name: "dir"))
        try directory.importRecords(
            (0..<Self.users).map { DirectoryRecord(org: "orgA", kind: .user, id: RecipientID("u\($0)")) })
        let inbox = RedisInboxStore(client: w.redis.client(name: "inbox"))
        let apps = try w.apps()
        defer { apps.shutdown() }
        let worker = PipelineWorker(
            configuration: WorkerConfiguration(consumer: "engaged", inFlight: 32, blockMillis: 50),
            backend: RedisPipelineBackend(endpoint: w.redis.endpoint, store: Self.store, consumer: "engaged"),
            apps: apps,
            resolver: DirectoryRecipientResolver(directory: directory, inbox: inbox, types: nil))
        worker.messageTracking = RedisMessageTracking(client: w.redis.client(name: "mid"), store: StoreConfiguration())
        try worker.start()
        defer { worker.drain(deadline: 2) }
        let api = try await RunningAPI(configFile: try APIServerTests.config(w))
        let send = try APIServerTests.key(w, org: "orgA", role: .send)
        let recipients = (0..<Self.users).map { "\"u\($0)\"" }.joined(separator: ",")

        // `mid` is Volley's: a job's own `data.mid` is refused at the door.
        let refused = try await api.call(
            "POST", "/v1/jobs", token: send,
            json: #"{"app":"app1","recipients":["u0"],"notification":{"title":"x","data":{"mid":"m"}}}"#)
        #expect(refused.status == 400)
        #expect(refused.field == "notification.data.mid", "\(refused.text)")

        let job = #"{"app":"app1","recipients":[\#(recipients)],"notification":{"title":"Sale","body":"Today"}}"#
        let posted = try await api.call("POST", "/v1/jobs", token: send, json: job, headers: ["Idempotency-Key": "c-1"])
        #expect(posted.status == 202, "\(posted.text)")
        try await waitUntil("the report of c-1", timeout: .seconds(60)) { (try? w.h.report(for: "c-1")) != nil }
        #expect(try w.h.report(for: "c-1")?.accepted == Self.users)

        // Each device's message id, as the mock received it: at the APNs payload's root, in FCM's data.
        let tracking = MessageTracking(org: "orgA", job: "c-1")
        var mids: [Int: String] = [:]
        for push in w.mock.capturedPushes() {
            let body = try #require(push.json)
            let mid = push.provider == .apns ? body["mid"]?.stringValue : body["message"]?["data"]?["mid"]?.stringValue
            let u = try #require((0..<Self.users).first { Self.token($0) == push.token })
            #expect(mid == tracking.messageID(for: DeviceToken(push.token)), "\(push.token)")
            mids[u] = mid
        }
        #expect(mids.count == Self.users)

        // Opens of every push (a backend relaying them with each user's id), then taps: `reply` on 10 devices and
        // `archive` on 6, some sent twice, and the first batch of opens again.
        func event(_ u: Int, _ event: String, action: String? = nil) -> String {
            #"{"messageId":""# + (mids[u] ?? "") + #"","event":""# + event + #"""#
                + (action.map { #","actionId":""# + $0 + #"""# } ?? "") + #","userId":"u\#(u)"}"#
        }
        func post(_ events: [String], token: String) async throws -> [String: Any] {
            let a = try await api.call(
                "POST", "/v1/interactions", token: token, json: #"{"events":["# + events.joined(separator: ",") + "]}")
            #expect(a.status == 202, "\(a.text)")
            return a.json
        }
        let opens = (0..<Self.users).map { event($0, "opened") }
        let first = try await post(Array(opens.prefix(15)), token: send)
        #expect(first["accepted"] as? Int == 15 && first["duplicates"] as? Int == 0)
        let taps =
            (0..<10).map { event($0, "action", action: "reply") }
            + (5..<11).map { event($0, "action", action: "archive") }
        let rest = try await post(
            Array(opens.dropFirst(15)) + taps + (0..<3).map { event($0, "action", action: "reply") }, token: send)
        #expect(rest["accepted"] as? Int == Self.users - 15 + 16, "\(rest)")
        #expect(rest["duplicates"] as? Int == 3)
        let replay = try await post(Array(opens.prefix(15)), token: send)
        #expect(replay["accepted"] as? Int == 0 && replay["duplicates"] as? Int == 15)
        // The app's own user token: a replay too; an id of no campaign is unknown, not an error.
        let user = try await APIServerTests.userToken(api, key: send, user: "u1")
        let own = try await post(
            [
                #"{"messageId":""# + (mids[1] ?? "") + #"","event":"opened"}"#,
                #"{"messageId":"AAAAAAAAAAA.BBBBBBBBBBB","event":"opened"}"#,
            ], token: user)
        #expect(own["duplicates"] as? Int == 1 && own["unknown"] as? Int == 1)

        let status = try await api.call("GET", "/v1/jobs/c-1", token: send)
        #expect(status.json["opened"] as? Int == Self.users, "\(status.text)")
        #expect(status.json["actions"] as? [String: Int] == ["reply": 10, "archive": 6], "\(status.text)")
        #expect(status.json["dismissed"] == nil)

        // The event stream holds each interaction once.
        let redis = w.redis.client(name: "check")
        var seen: [String] = []
        for f in try eventStream(redis) {
            guard f["kind"] == "interaction" else { continue }
            #expect(f["org"] == "orgA" && f["job"] == "c-1" && f["user"] != nil && f["at"]?.hasSuffix("Z") == true)
            seen.append([f["messageId"] ?? "", f["event"] ?? "", f["actionId"] ?? ""].joined(separator: " "))
        }
        #expect(seen.count == Self.users + 16)
        #expect(Set(seen).count == seen.count)
        // …and each device's outcome once, with the message id the push carried.
        var outcomes: [String: String] = [:]
        for f in try eventStream(redis) {
            guard f["kind"] == "outcome", f["job"] == "c-1" else { continue }
            #expect(f["org"] == "orgA" && f["app"] == "app1" && f["outcome"] == "accepted", "\(f)")
            #expect(outcomes.updateValue(f["user"] ?? "", forKey: f["messageId"] ?? "") == nil, "twice: \(f)")
        }
        #expect(outcomes.count == Self.users)
        #expect(Set(outcomes.keys) == Set(mids.values))

        // Opened: each user's in-app entry of the campaign is read.
        for u in [0, 1, 2, Self.users - 1] {
            let entry = try #require(try inbox.list(org: "orgA", user: UserID("u\(u)"), size: 5, before: nil).first)
            #expect(entry.id == "c-1" && entry.read, "u\(u)")
        }

        // `"tracking": false`: the pushes carry no message id.
        let untracked = #"{"app":"app1","recipients":["u0"],"tracking":false,"notification":{"title":"Quiet"}}"#
        let quiet = try await api.call(
            "POST", "/v1/jobs", token: send, json: untracked, headers: ["Idempotency-Key": "c-2"])
        #expect(quiet.status == 202, "\(quiet.text)")
        try await waitUntil("the report of c-2", timeout: .seconds(60)) { (try? w.h.report(for: "c-2")) != nil }
        let last = try #require(w.mock.capturedPushes().last { $0.token == Self.token(0) })
        #expect(last.json?["aps"]?["alert"]?["title"]?.stringValue == "Quiet")
        #expect(last.json?["mid"] == nil)
        await api.stop()
    }

    /// A user with a dead token, a capped notification and an expired send sees each, with its reason, in their
    /// delivery history (`GET /v1/users/{user}/deliveries`); a user with no device sees `noDevice`; the event stream
    /// and the job's counts say the same, and a skipped user told twice (a redelivery) is told once.
    @Test func deliveryHistoryTellsWhyAUserGotNothing() async throws {
        let w = try MockWorld(mockConfig: #"{"apns": {"unregisteredPrefixes": ["dead"]}}"#)
        defer { w.stop() }
        let live = "beef" + String(format: "%060x", 1)
        let dead = "dead" + String(format: "%060x", 2)
        try w.h.admin.register(
            [live, dead].map {
                DeviceImportRecord(org: "orgA", app: "app1", user: "sup", platform: .ios, token: DeviceToken($0))
            })
        let directory = RedisDirectory(client: w.redis.client(name: "dir"))
        try directory.importRecords(
            ["sup", "nodev"].map { DirectoryRecord(org: "orgA", kind: .user, id: RecipientID($0)) })
        let apps = try w.apps()
        defer { apps.shutdown() }
        let caps = RedisFrequencyCapStore(client: w.redis.client(name: "caps"))
        var resolver = DirectoryRecipientResolver(
            directory: directory, inbox: RedisInboxStore(client: w.redis.client(name: "inbox")), types: nil)
        let rule = try FrequencyCapRule.make(window: "1h", max: 2, type: nil, at: "rules[0]")
        resolver.frequencyCaps = FrequencyCaps(
            rulebook: FrequencyCapRulebook(configured: ["orgA": [rule]], stored: caps, clock: SystemClock()),
            store: caps)
        let worker = PipelineWorker(
            configuration: WorkerConfiguration(consumer: "history", inFlight: 8, blockMillis: 50),
            backend: RedisPipelineBackend(endpoint: w.redis.endpoint, store: Self.store, consumer: "history"),
            apps: apps,
            resolver: resolver)
        try worker.start()
        defer { worker.drain(deadline: 2) }
        let api = try await RunningAPI(configFile: try APIServerTests.config(w))
        let send = try APIServerTests.key(w, org: "orgA", role: .send)
        let read = try APIServerTests.key(w, org: "orgA", role: .read)

        // Expired: due 30 s ago with a lifetime of 1 s. Then one that goes (the dead token is refused), then one
        // the cap of 2 an hour holds; `nodev` has no device.
        let past = RFC3339.format(Date().addingTimeInterval(-30))
        let jobs = [
            (
                "h-expired",
                #"{"app":"app1","recipients":["sup"],"sendAt":"\#(past)","notification":{"title":"a","ttl":1}}"#
            ),
            ("h-sent", #"{"app":"app1","recipients":["sup"],"notification":{"title":"b"}}"#),
            ("h-capped", #"{"app":"app1","recipients":["sup","nodev"],"notification":{"title":"c"}}"#),
        ]
        for (id, body) in jobs {
            let posted = try await api.call(
                "POST", "/v1/jobs", token: send, json: body, headers: ["Idempotency-Key": id])
            #expect(posted.status == 202, "\(posted.text)")
            try await waitUntil("the report of \(id)", timeout: .seconds(60)) {
                (try? w.h.report(for: JobID(id))) != nil
            }
        }

        let history = try await api.call("GET", "/v1/users/sup/deliveries", token: read)
        #expect(history.status == 200, "\(history.text)")
        let lines = try #require(history.json["deliveries"] as? [[String: Any]])
        func line(_ job: String, _ outcome: String) -> [String: Any]? {
            lines.first { $0["job"] as? String == job && $0["outcome"] as? String == outcome }
        }
        #expect(lines.count == 5, "\(history.text)")
        #expect(lines.first?["job"] as? String == "h-capped", "newest first: \(history.text)")
        #expect(line("h-capped", "capped")?["device"] == nil)
        #expect(line("h-sent", "accepted")?["device"] as? String == "…" + live.suffix(8))
        let refused = try #require(line("h-sent", "rejected"), "\(history.text)")
        #expect(refused["reason"] as? String == "Unregistered" && refused["platform"] as? String == "ios")
        #expect(refused["device"] as? String == "…" + dead.suffix(8))
        #expect(
            lines.filter { $0["job"] as? String == "h-expired" && $0["outcome"] as? String == "expired" }.count == 2)
        #expect(!history.text.contains(live) && !history.text.contains(dead), "tokens are redacted")
        // `volley deliveries --user sup` reads the same lines.
        let settings = try PipelineSettings(try VolleyConfiguration.load(path: try APIServerTests.config(w)))
        let cli = try DeliveriesCommand.read(
            settings: settings, org: "orgA", user: "sup", since: nil, limit: 100, now: Date(),
            logger: Logger(label: "t"))
        #expect(cli.map(\.outcome) == lines.map { $0["outcome"] as? String ?? "" })
        let table = DeliveriesCommand.text(cli)
        #expect(table.count == 5 && table.contains { $0.contains("rejected") && $0.contains("Unregistered") })
        #expect(!table.joined().contains(dead))
        let nodev = try await api.call("GET", "/v1/users/nodev/deliveries", token: read)
        #expect((nodev.json["deliveries"] as? [[String: Any]])?.map { $0["outcome"] as? String } == ["noDevice"])
        let recent = try await api.call("GET", "/v1/users/sup/deliveries?limit=1", token: read)
        #expect((recent.json["deliveries"] as? [[String: Any]])?.count == 1)
        let later = RFC3339.format(Date().addingTimeInterval(60))
        let none = try await api.call("GET", "/v1/users/sup/deliveries?since=\(later)", token: read)
        #expect((none.json["deliveries"] as? [[String: Any]])?.isEmpty == true, "\(none.text)")
        let badSince = try await api.call("GET", "/v1/users/sup/deliveries?since=yesterday", token: read)
        #expect(badSince.status == 400 && badSince.field == "since", "\(badSince.text)")
        let badLimit = try await api.call("GET", "/v1/users/sup/deliveries?limit=0", token: read)
        #expect(badLimit.status == 400 && badLimit.field == "limit", "\(badLimit.text)")
        // Another org's key sees nothing of orgA's users.
        let other = try APIServerTests.key(w, org: "orgC", role: .read)
        let foreign = try await api.call("GET", "/v1/users/sup/deliveries", token: other)
        #expect((foreign.json["deliveries"] as? [[String: Any]])?.isEmpty == true, "\(foreign.text)")

        // The capped campaign's counts and its entries on the event stream.
        let status = try await api.call("GET", "/v1/jobs/h-capped", token: send)
        let counts = try #require(status.json["counts"] as? [String: Any], "\(status.text)")
        #expect(counts["capped"] as? Int == 1 && counts["noDevice"] as? Int == 1 && counts["audience"] as? Int == 2)
        let redis = w.redis.client(name: "check")
        func skipped() throws -> [String] {
            try eventStream(redis).compactMap { f in
                f["job"] == "h-capped" ? "\(f["user"] ?? "") \(f["outcome"] ?? "")" : nil
            }
        }
        #expect(try skipped().sorted() == ["nodev noDevice", "sup capped"])
        // A redelivery that resolves the users again tells nothing new.
        let session = try RedisPipelineBackend(endpoint: w.redis.endpoint, store: Self.store, consumer: "again")
            .makeSession(
                name: "again", isCancelled: { false })
        let trail = DeliveryTrail(org: "orgA", campaign: "h-capped", app: "app1", tracking: nil)
        try session.recordSkipped(trail, users: ["sup"], reason: .capped, at: Date())
        try session.recordSkipped(trail, users: ["nodev"], reason: .noDevice, at: Date())
        #expect(try skipped().count == 2)
        let again = try await api.call("GET", "/v1/jobs/h-capped", token: send)
        #expect((again.json["counts"] as? [String: Any])?["capped"] as? Int == 1)
        await api.stop()
    }

    /// The issue's acceptance at its size: a 1,000-device campaign through the real API and `volley worker`
    /// processes, the first killed with SIGKILL mid-campaign; then 1,000 opens and 200 taps on two actions, some sent
    /// twice. The counts say 1,000, 120 and 80 exactly, and the event stream holds each device's outcome and each
    /// interaction once.
    @Test func aThousandOpensAndTwoHundredTapsAfterAKilledWorkerCountOnce() async throws {
        let users = 1_000
        let w = try MockWorld(mockConfig: #"{"latencyMs": 15, "capturePushes": 3000}"#)
        defer { w.stop() }
        func token(_ u: Int) -> String { u % 4 == 3 ? "fcm-thousand-\(u)" : "cafe" + String(format: "%060x", u) }
        try w.h.admin.register(
            (0..<users).map { u in
                DeviceImportRecord(
                    org: "orgA", app: "app1", user: UserID("u\(u)"), platform: u % 4 == 3 ? .android : .ios,
                    token: DeviceToken(token(u)))
            })
        var records = (0..<users).map { DirectoryRecord(org: "orgA", kind: .user, id: RecipientID("u\($0)")) }
        records.append(
            DirectoryRecord(
                org: "orgA", kind: .group, id: "everyone", members: (0..<users).map { RecipientID("u\($0)") }))
        try RedisDirectory(client: w.redis.client(name: "dir")).importRecords(records)
        let config = try w.writeConfig(worker: [
            "inFlight": "16", "recordBatchSize": "50", "reclaimIdleMs": "1000", "blockMs": "100", "drainSeconds": "2",
        ])
        let a = try WorkerProcess(config: config, consumer: "A", logDirectory: w.dir)
        defer { if a.isRunning { a.kill9() } }
        let api = try await RunningAPI(configFile: try APIServerTests.config(w))
        let send = try APIServerTests.key(w, org: "orgA", role: .send)
        let job = #"{"app":"app1","recipients":["everyone"],"notification":{"title":"Sale","body":"Today"}}"#
        let posted = try await api.call("POST", "/v1/jobs", token: send, json: job, headers: ["Idempotency-Key": "k-1"])
        #expect(posted.status == 202, "\(posted.text)")
        try await actWhen("300 pushes from worker A: \(a.log.suffix(1500))", timeout: .seconds(60)) {
            pushes(w.mock.stats()) >= 300
        } then: {
            a.kill9()
        }
        #expect(pushes(w.mock.stats()) < users, "worker A finished before it was killed; the test proves nothing")
        let b = try WorkerProcess(config: config, consumer: "B", logDirectory: w.dir)
        defer { if b.isRunning { b.kill9() } }
        try await waitUntil("the report of k-1: \(b.log.suffix(1500))", timeout: .seconds(90)) {
            (try? w.h.report(for: "k-1")) != nil
        }
        #expect(try w.h.report(for: "k-1")?.accepted == users)

        // Each device's message id as the mock received it (a device pushed twice across the kill has one id).
        var mids: [Int: String] = [:]
        for push in w.mock.capturedPushes() {
            let body = try #require(push.json)
            let mid = push.provider == .apns ? body["mid"]?.stringValue : body["message"]?["data"]?["mid"]?.stringValue
            let u = try #require(
                Int(push.token.split(separator: "-").last ?? "") ?? Int(push.token.dropFirst(4), radix: 16))
            if let seen = mids[u] { #expect(seen == mid, "u\(u) got two ids") }
            mids[u] = mid
        }
        #expect(mids.count == users)
        func event(_ u: Int, _ event: String, action: String? = nil) -> String {
            #"{"messageId":""# + (mids[u] ?? "") + #"","event":""# + event + #"""#
                + (action.map { #","actionId":""# + $0 + #"""# } ?? "") + #","userId":"u\#(u)"}"#
        }
        // 1,000 opens, 120 taps on `reply` and 80 on `archive`, with 100 opens and 20 taps sent again.
        let all =
            (0..<users).map { event($0, "opened") } + (0..<120).map { event($0, "action", action: "reply") }
            + (500..<580).map { event($0, "action", action: "archive") } + (0..<100).map { event($0 * 7, "opened") }
            + (0..<20).map { event($0, "action", action: "reply") }
        var accepted = 0
        var duplicates = 0
        var at = 0
        while at < all.count {
            let batch = all[at..<min(all.count, at + 100)]
            let answer = try await api.call(
                "POST", "/v1/interactions", token: send, json: #"{"events":["# + batch.joined(separator: ",") + "]}")
            #expect(answer.status == 202, "\(answer.text)")
            accepted += answer.json["accepted"] as? Int ?? 0
            duplicates += answer.json["duplicates"] as? Int ?? 0
            at += 100
        }
        #expect(accepted == 1_200 && duplicates == 120)
        let status = try await api.call("GET", "/v1/jobs/k-1", token: send)
        #expect(status.json["opened"] as? Int == 1_000, "\(status.text)")
        #expect(status.json["actions"] as? [String: Int] == ["reply": 120, "archive": 80], "\(status.text)")
        #expect((status.json["counts"] as? [String: Any])?["accepted"] as? Int == users, "\(status.text)")

        // The event stream: each device's outcome once, each interaction once.
        var outcomes: Set<String> = []
        var outcomeEntries = 0
        var interactions: Set<String> = []
        var interactionEntries = 0
        for f in try eventStream(w.redis.client(name: "check")) {
            guard f["job"] == "k-1" else { continue }
            if f["kind"] == "outcome" {
                outcomeEntries += 1
                outcomes.insert(f["messageId"] ?? "")
            } else if f["kind"] == "interaction" {
                interactionEntries += 1
                interactions.insert(
                    [f["messageId"] ?? "", f["event"] ?? "", f["actionId"] ?? ""].joined(separator: " "))
            }
        }
        #expect(outcomeEntries == users && outcomes == Set(mids.values))
        #expect(interactionEntries == 1_200 && interactions.count == 1_200)
        await api.stop()
    }
}
