import Foundation
import Logging
import Testing
import VolleyAPI
import VolleyCore
import VolleyMock
import VolleyRedis
import VolleyService
import VolleyStore
import VolleyTestDoubles
import VolleyTestSupport
import VolleyTestTags

/// Sync hints through the real API, a real `volley worker` process, a real redis-server and the mock: a burst of
/// changes for one user with an iPhone and an Android phone arrives as a handful of silent pushes per device with
/// every changed id covered; an ack drops what waits; a worker killed with ids waiting loses none; a batch taken by
/// a flusher that died before or after putting its push on the stream is pushed exactly once.
@Suite(.serialized, .tags(.integration)) struct SyncHintsEndToEndTests {
    static let iosToken = String(repeating: "5c", count: 32)
    static let androidToken = "fcm-ada-sync-hints"

    /// The silent pushes the mock accepted for ada's two devices, in arrival order.
    struct Seen {
        var ios: [MockCapturedPush] = []
        var android: [MockCapturedPush] = []
        init(_ mock: MockServerFixture) {
            for p in mock.capturedPushes() {
                if p.token == SyncHintsEndToEndTests.iosToken { ios.append(p) }
                if p.token == SyncHintsEndToEndTests.androidToken { android.append(p) }
            }
        }
        /// Each push's ids (nil: `fullSync`), read from the APNs payload root or the FCM data (ids as JSON text).
        static func ids(_ p: MockCapturedPush) -> [String]? {
            guard case .object(let root)? = p.json else { return [] }
            var fields = root
            if case .object(let message)? = root["message"], case .object(let data)? = message["data"] {
                fields = data
                if case .string(let text)? = data["recordIds"], let parsed = try? JSONValue(parsing: text) {
                    fields["recordIds"] = parsed
                }
                if case .string("true")? = data["fullSync"] { fields["fullSync"] = .bool(true) }
            }
            if case .bool(true)? = fields["fullSync"] { return nil }
            guard case .array(let ids)? = fields["recordIds"] else { return [] }
            return ids.compactMap(\.stringValue)
        }
    }

    static func world(minInterval: Int, maxRecordIds: Int = 300) async throws -> (MockWorld, String) {
        let w = try MockWorld(mockConfig: #"{"capturePushes": 1000}"#)
        try w.h.admin.register([
            DeviceImportRecord(
                org: "orgA", app: "app1", user: "ada", platform: .ios, token: DeviceToken(iosToken)),
            DeviceImportRecord(
                org: "orgA", app: "app1", user: "ada", platform: .android, token: DeviceToken(androidToken)),
        ])
        let config = try APIServerTests.config(
            w,
            extra: """
                syncHints:
                  minIntervalSeconds: \(minInterval)
                  maxPerHour: 60
                  maxRecordIds: \(maxRecordIds)
                """)
        return (w, config)
    }

    @Test func aBurstOf2000ChangesArrivesAsAHandfulOfPushesPerDeviceWithEveryIdCovered() async throws {
        let (w, config) = try await Self.world(minInterval: 5)
        defer { w.stop() }
        let api = try await RunningAPI(configFile: config)
        let worker = try WorkerProcess(config: config, consumer: "hints1", logDirectory: w.dir)
        defer { if worker.isRunning { worker.kill9() } }
        let send = try APIServerTests.key(w, org: "orgA", role: .send)
        let started = Date()

        // The first change after a quiet period goes out at once, listing exactly its ids.
        let first = (0..<100).map { "rec-\($0)" }
        let a = try await api.call(
            "POST", "/v1/sync-hints", token: send,
            json: #"{"app":"app1","users":["ada"],"type":"ACCOUNT_UPDATE","recordIds":\#(Self.json(first))}"#)
        #expect(a.status == 202, "\(a.text)")
        try await waitUntil("the first push on both devices: \(worker.log.suffix(1500))", timeout: .seconds(30)) {
            let s = Seen(w.mock)
            return s.ios.count >= 1 && s.android.count >= 1
        }
        var seen = Seen(w.mock)
        // Listed in the order each id last changed, then by id.
        #expect(seen.ios.first.flatMap(Seen.ids) == first.sorted())
        #expect(seen.android.first.flatMap(Seen.ids) == first.sorted())
        let headers = try #require(seen.ios.first?.headers)
        #expect(headers["apns-push-type"] == "background")
        #expect(headers["apns-priority"] == "5")
        #expect(headers["apns-collapse-id"] == "sync-ACCOUNT_UPDATE")
        #expect(headers["apns-expiration"] != nil)
        if case .object(let root)? = seen.ios.first?.json {
            #expect(root["aps"].map { String(decoding: $0.encoded(), as: UTF8.self) } == #"{"content-available":1}"#)
            #expect(root["type"] == .string("ACCOUNT_UPDATE"))
        } else {
            Issue.record("the iOS push is not a JSON object")
        }
        if case .object(let root)? = seen.android.first?.json, case .object(let message)? = root["message"],
            case .object(let android)? = message["android"]
        {
            #expect(android["priority"] == .string("NORMAL"))
            #expect(android["collapse_key"] == .string("sync-ACCOUNT_UPDATE"))
            #expect(message["notification"] == nil)
        } else {
            Issue.record("the Android push has no android block")
        }

        // 1,900 more changes in 19 calls: they merge, and go once the interval has passed (past the kept ids or
        // the payload, as a full sync).
        var changed = Set(first)
        for call in 0..<19 {
            let ids = (0..<100).map { "rec-\(100 + call * 100 + $0)" }
            changed.formUnion(ids)
            let r = try await api.call(
                "POST", "/v1/sync-hints", token: send,
                json: #"{"app":"app1","users":["ada"],"type":"ACCOUNT_UPDATE","recordIds":\#(Self.json(ids))}"#)
            #expect(r.status == 202, "\(r.text)")
        }
        #expect(changed.count == 2_000)
        let postedBy = Date().timeIntervalSince(started)
        let admin = try APIServerTests.key(w, org: "orgA", role: .admin)
        try await waitUntil("nothing waits for ada: \(worker.log.suffix(1500))", timeout: .seconds(60)) {
            guard let s = try? await api.call("GET", "/v1/sync-hints/ada", token: admin),
                let hints = s.json["hints"] as? [[String: Any]], let h = hints.first
            else { return false }
            return (h["recordIds"] as? [String])?.isEmpty == true && h["fullSync"] as? Bool == false
                && h["inFlight"] as? Int == 0 && h["pushing"] as? Bool == false
        }
        // Every push taken is on the job stream (nothing is in flight); wait until each is delivered and reported.
        let jobs = Int(try APIServerTests.streamLength(w))
        var reports: [JobReport] = []
        try await waitUntil("a report per push: \(worker.log.suffix(1500))", timeout: .seconds(60)) {
            reports = ((try? w.h.producer.allReports()) ?? []).filter { $0.job.rawValue.hasPrefix("synchint-") }
            return reports.count >= jobs
        }
        seen = Seen(w.mock)
        #expect(seen.ios.count == jobs && seen.android.count == jobs, "\(jobs) pushes on the stream")
        // A handful: the first, then at most one per interval while the changes came, and one after.
        #expect(jobs <= 2 + Int(postedBy / 5), "\(jobs) pushes for changes over \(postedBy) s")
        let iosIds = seen.ios.map(Seen.ids)
        #expect(iosIds == seen.android.map(Seen.ids))
        // Every listed id was changed; every changed id was listed or a full-sync push came after it (the last push
        // was taken after every change was stored, since nothing waits; a full sync covers all before it).
        let listed = Set(iosIds.compactMap { $0 }.joined())
        #expect(listed.isSubset(of: changed))
        let unlisted = changed.subtracting(listed)
        if !unlisted.isEmpty {
            #expect(iosIds.contains { $0 == nil }, "\(unlisted.count) ids neither listed nor covered by a full sync")
        }
        if postedBy < 5 {
            // The 1,900 came within one interval: past maxRecordIds 300, their push says fullSync.
            #expect(iosIds.dropFirst().contains { $0 == nil }, "1,900 ids past maxRecordIds 300 say fullSync")
        }

        // Charged once per push and device, never per hint; nothing stored in the inbox.
        #expect(reports.count == seen.ios.count)
        #expect(reports.allSatisfy { $0.accepted == 2 && ($0.inAppStored ?? 0) == 0 })
        await api.stop()
    }

    @Test func anAckDropsWhatWaitsAndAKilledWorkerLosesNoId() async throws {
        let (w, config) = try await Self.world(minInterval: 8)
        defer { w.stop() }
        let api = try await RunningAPI(configFile: config)
        var worker = try WorkerProcess(config: config, consumer: "hints-a", logDirectory: w.dir)
        defer { if worker.isRunning { worker.kill9() } }
        let send = try APIServerTests.key(w, org: "orgA", role: .send)
        let ada = try await APIServerTests.userToken(api, key: send, user: "ada")
        func post(_ ids: [String]) async throws -> String {
            let r = try await api.call(
                "POST", "/v1/sync-hints", token: send,
                json: #"{"app":"app1","users":["ada"],"type":"INTERACTION","recordIds":\#(Self.json(ids))}"#)
            #expect(r.status == 202, "\(r.text)")
            let hints = try #require(r.json["hints"] as? [[String: Any]])
            return try #require(hints.first?["id"] as? String)
        }
        _ = try await post(["first"])
        try await waitUntil("the first push: \(worker.log.suffix(1500))", timeout: .seconds(30)) {
            Seen(w.mock).ios.count == 1
        }
        // Within the interval: these wait. The app says it synced up to the first of them.
        let upTo = try await post(["x1", "x2"])
        _ = try await post(["x2", "x3"])
        let ack = try await api.call(
            "POST", "/v1/sync-hints/ack", token: ada, json: #"{"type":"INTERACTION","upTo":"\#(upTo)"}"#)
        #expect(ack.status == 200, "\(ack.text)")
        #expect(ack.json["dropped"] as? Int == 1, "x1 goes; x2 was named again later: \(ack.text)")
        #expect(ack.json["remaining"] as? Int == 2)
        // Refusals name the field; an API key cannot ack.
        let bad = try await api.call("POST", "/v1/sync-hints/ack", token: ada, json: #"{"type":"INTERACTION"}"#)
        #expect(bad.status == 400 && bad.field == "upTo", "\(bad.text)")
        #expect(
            try await api.call("POST", "/v1/sync-hints/ack", token: send, json: #"{"type":"T","upTo":"1"}"#).status
                == 403)

        // The worker dies with x2 and x3 waiting; the next worker pushes them.
        worker.kill9()
        let status = try await api.call("GET", "/v1/sync-hints/ada?app=app1", token: send)
        let waiting = (status.json["hints"] as? [[String: Any]])?.first?["recordIds"] as? [String]
        #expect(waiting == ["x2", "x3"], "\(status.text)")
        worker = try WorkerProcess(config: config, consumer: "hints-b", logDirectory: w.dir)
        try await waitUntil("the second push: \(worker.log.suffix(1500))", timeout: .seconds(60)) {
            Seen(w.mock).ios.count == 2 && Seen(w.mock).android.count == 2
        }
        let seen = Seen(w.mock)
        #expect(seen.ios.map(Seen.ids) == [["first"], ["x2", "x3"]])
        #expect(seen.android.map(Seen.ids) == [["first"], ["x2", "x3"]])

        // An ack by time of everything: nothing waits, so nothing more is pushed for it.
        _ = try await post(["y1"])
        let all = try await api.call(
            "POST", "/v1/sync-hints/ack", token: ada,
            json: #"{"type":"INTERACTION","upTo":"\#(Date().addingTimeInterval(1).ISO8601Format())"}"#)
        #expect(all.json["remaining"] as? Int == 0, "\(all.text)")
        await api.stop()
    }

    @Test func aBatchTakenByAFlusherThatDiedIsPushedOnceAfterItsLease() async throws {
        let w = try MockWorld()
        defer { w.stop() }
        let clock = ManualClock(Date())
        let configuration = SyncHintConfiguration(
            minIntervalSeconds: 60, maxPerHour: 3, maxRecordIds: 100, leaseSeconds: 30)
        let settings = PipelineSettings(endpoint: w.redis.endpoint, store: w.h.store)
        let flusher = SyncHintFlusher(
            configuration: configuration, settings: settings, logger: Logger(label: "test"), clock: clock)
        let store = RedisSyncHintStore(client: w.redis.client(name: "hints"), maxRecordIds: 100)
        let key = SyncHintKey(app: "app1", user: "ada", type: "T")
        _ = try store.add(org: "orgA", app: "app1", users: ["ada"], type: "T", recordIds: ["a", "b"], now: clock.now())

        // A flusher takes the batch, puts its push on the stream, and dies before letting the batch go.
        let due = try store.due(org: "orgA", now: clock.now(), limit: 10)
        #expect(due.map(\.key) == [key])
        let taken = try store.apply(
            org: "orgA", [.take(key, lastStamp: due[0].lastStamp)], now: clock.now(), leaseSeconds: 30)
        #expect(taken == [SyncHintBatch(key: key, batch: 1, recordIds: ["a", "b"])])
        #expect(try store.submit(org: "orgA", taken, store: w.h.store, now: clock.now()).count == 1)
        // A second flusher deciding on the same window takes nothing.
        #expect(
            try store.apply(org: "orgA", [.take(key, lastStamp: due[0].lastStamp)], now: clock.now(), leaseSeconds: 30)
                .isEmpty)
        // New ids arriving meanwhile wait for the next push.
        _ = try store.add(org: "orgA", app: "app1", users: ["ada"], type: "T", recordIds: ["c"], now: clock.now())

        // Within the lease nothing happens; after it, the batch goes again under the same id: a replay.
        clock.advance(by: 10)
        #expect(try flusher.flushOnce() == 0)
        clock.advance(by: 25)
        #expect(try flusher.flushOnce() == 1)
        let entries = try w.redis.client(name: "xrange").checked(["XRANGE", "volley:jobs", "-", "+"]).array ?? []
        #expect(entries.count == 1, "one push on the stream for batch 1")
        // The batch is let go; c goes once the interval since the (first) take has passed.
        clock.advance(by: 30)
        #expect(try flusher.flushOnce() == 1)
        let after = try w.redis.client(name: "xrange2").checked(["XRANGE", "volley:jobs", "-", "+"]).array ?? []
        #expect(after.count == 2)
        let job = after.last?.array?.last?.array?.last?.string ?? ""
        #expect(job.contains(#""recordIds":["c"]"#), "\(job)")
        #expect(
            job.contains(SyncHintPush.jobID(org: "orgA", batch: .init(key: key, batch: 2, recordIds: nil)).rawValue))
        // Nothing waits: the key is forgotten at the next look.
        clock.advance(by: 1)
        _ = try flusher.flushOnce()
        #expect(try store.backlog(org: "orgA").waiting == 0)
        #expect(try store.due(org: "orgA", now: clock.now() + 86_400, limit: 10).isEmpty)
    }

    @Test func aSyncHintOnTheJobStreamIsStoredAndAMalformedOneIsDeadLettered() async throws {
        let (w, config) = try await Self.world(minInterval: 60)
        defer { w.stop() }
        let worker = try WorkerProcess(config: config, consumer: "hints-stream", logDirectory: w.dir)
        defer { if worker.isRunning { worker.kill9() } }
        try w.h.producer.enqueueRaw(fields: [
            "syncHint": #"{"org":"orgA","app":"app1","users":["ada"],"type":"T","recordIds":["s1","s2"]}"#
        ])
        try w.h.producer.enqueueRaw(fields: [
            "syncHint": #"{"org":"orgA","app":"app1","users":["ada"],"type":"T","recordIds":[]}"#
        ])
        try await waitUntil("the stream's hint is pushed: \(worker.log.suffix(1500))", timeout: .seconds(30)) {
            Seen(w.mock).ios.count == 1
        }
        #expect(Seen(w.mock).ios.map(Seen.ids) == [["s1", "s2"]])
        try await waitUntil("the malformed hint is dead-lettered", timeout: .seconds(30)) {
            (try? w.h.producer.deadLetters().count) == 1
        }
        let dead = try w.h.producer.deadLetters()
        #expect(dead.first?["reason"] == "invalid-job", "\(dead)")
        #expect(dead.first?["detail"]?.contains("syncHint.recordIds") == true, "\(dead)")
    }

    static func json(_ ids: [String]) -> String {
        "[" + ids.map { "\"\($0)\"" }.joined(separator: ",") + "]"
    }
}
