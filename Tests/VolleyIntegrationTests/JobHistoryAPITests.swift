import Foundation
import Logging
import Testing
import VolleyCore
import VolleyRedis
import VolleyService
import VolleyStore
import VolleyTestDoubles
import VolleyTestSupport
import VolleyTestTags

/// `GET /v1/jobs` and the CSV export of a job's outcomes, through a real HTTP client against `volley api` on a real
/// redis-server: the org's jobs newest first a page at a time across three stream shards, filters, tenancy, and a
/// job's ledger (and its campaign shards' ledgers) streamed as RFC 4180 rows, once each.
@Suite(.serialized, .tags(.integration)) struct JobHistoryAPITests {
    static func post(_ api: RunningAPI, key: String, id: String, n: Int) async throws {
        let token = "beef" + String(repeating: "3", count: 56) + String(format: "%04d", n)
        let job = #"{"app":"app1","devices":[{"platform":"ios","token":"\#(token)"}],"notification":{"title":"Hi"}}"#
        let a = try await api.call("POST", "/v1/jobs", token: key, json: job, headers: ["Idempotency-Key": id])
        #expect(a.status == 202, "\(a.text)")
    }

    /// How the export shows a token: `…` and at most its last 8 characters, never more than half of it; nothing of a
    /// token of 8 characters or fewer.
    static func shown(_ token: String) -> String {
        token.count <= 8 ? "…" : "…" + token.suffix(min(8, token.count / 2))
    }

    /// The ids of a list answer, in order, and its next cursor.
    static func page(_ api: RunningAPI, key: String, _ query: String) async throws -> (ids: [String], next: String?) {
        let a = try await api.call("GET", "/v1/jobs\(query)", token: key)
        #expect(a.status == 200, "\(query): \(a.text)")
        let jobs = a.json["jobs"] as? [[String: Any]] ?? []
        return (jobs.compactMap { $0["id"] as? String }, a.json["nextCursor"] as? String)
    }

    @Test func aJobSentWithVolleySendIsListedAndReadAsAnAPIJobIs() async throws {
        let w = try MockWorld()
        defer { w.stop() }
        let api = try await RunningAPI(configFile: try APIServerTests.config(w))
        let read = try APIServerTests.key(w, org: "orgA", role: .read)
        // `volley send` as the command builds and submits it.
        var options = JobSubmission.Options(org: "orgA", app: "app1")
        options.tokens = ["ios:" + "beef" + String(repeating: "5", count: 60)]
        options.title = "From the CLI"
        options.id = "cli-1"
        var logger = Logger(label: "send")
        logger.logLevel = .warning
        let settings = PipelineSettings(endpoint: w.redis.endpoint, store: w.h.store)
        let job = try JobSubmission.buildJob(options)
        let first = try JobSubmission.submit(job, settings: settings, waitSeconds: nil, logger: logger)
        // The same job again (a retry after a lost answer) is the first entry, not a second one.
        let again = try JobSubmission.submit(job, settings: settings, waitSeconds: nil, logger: logger)
        #expect(again.entry == first.entry)
        #expect(try w.redis.client(name: "len").checked(["XLEN", w.h.store.jobStream(shard: 0)]).integer == 1)
        #expect(try await Self.page(api, key: read, "?limit=10").ids == ["cli-1"])
        // And `volley jobs list` reads the same list.
        let listed = try JobListCommand.list(settings: settings, org: "orgA", query: JobListQuery(), logger: logger)
        #expect(listed.jobs.map(\.id) == ["cli-1"])
        #expect(JobListCommand.text(listed).dropFirst().first?.hasPrefix("cli-1") == true)
        let one = try await api.call("GET", "/v1/jobs/cli-1", token: read)
        #expect(one.status == 200, "\(one.text)")
        // Another job under the same id is refused, naming the id.
        var other = job
        other.notification.title = "Something else"
        #expect(throws: RedisError.self) {
            try JobSubmission.submit(other, settings: settings, waitSeconds: nil, logger: logger)
        }
    }

    @Test func anOrgsJobsAreListedNewestFirstAPageAtATimeAndFiltered() async throws {
        let w = try MockWorld()
        defer { w.stop() }
        let api = try await RunningAPI(configFile: try APIServerTests.config(w, extra: "worker:\n  streamShards: 3"))
        let send = try APIServerTests.key(w, org: "orgA", role: .send)
        let read = try APIServerTests.key(w, org: "orgA", role: .read)
        let other = try APIServerTests.key(w, org: "orgC", role: .send)
        let ids = (1...7).map { "list-\($0)" }
        for (n, id) in ids.enumerated() {
            try await Self.post(api, key: send, id: id, n: n)
            // Distinct milliseconds, so newest first is the order of the posts: the next post waits until the
            // clock has left the millisecond this one was accepted in.
            let accepted = (Date().timeIntervalSince1970 * 1000).rounded(.down)
            try await waitUntil("the next millisecond", interval: .milliseconds(1)) {
                (Date().timeIntervalSince1970 * 1000).rounded(.down) > accepted
            }
        }
        try await Self.post(api, key: other, id: "elsewhere-1", n: 99)
        #expect(try await api.call("DELETE", "/v1/jobs/list-3", token: send).status == 200)
        let index = APIKeys(prefix: "volley")
        var store = StoreConfiguration()
        store.streamShards = 3
        let shardsUsed = Set(ids.map { store.streamShard(of: JobID($0)) })
        #expect(shardsUsed.count > 1, "the ids should spread over the stream shards")
        let counts = try store.jobStreams.map {
            try w.redis.client(name: "zcard").checked(["ZCARD", index.jobIndex("orgA", stream: $0)]).integer ?? 0
        }
        #expect(counts.reduce(0, +) == 7)

        // Pages of 3, across the three shards' indexes, newest first, each job once.
        var seen: [String] = []
        var cursor: String?
        var pages = 0
        repeat {
            let q =
                "?limit=3"
                + (cursor.map { "&cursor=\($0.addingPercentEncoding(withAllowedCharacters: .alphanumerics) ?? "")" }
                    ?? "")
            let p = try await Self.page(api, key: read, q)
            seen += p.ids
            cursor = p.next
            pages += 1
        } while cursor != nil && pages < 10
        #expect(seen == ids.reversed())
        #expect(pages == 3)

        let full = try await api.call("GET", "/v1/jobs", token: send)
        let first = try #require((full.json["jobs"] as? [[String: Any]])?.first)
        #expect(first["id"] as? String == "list-7" && first["state"] as? String == "queued")
        #expect(first["app"] as? String == "app1")
        let created = try #require(first["createdAt"] as? String)
        #expect(RFC3339.date(created) != nil && created.contains("."), "createdAt in milliseconds: \(created)")
        #expect(full.json["nextCursor"] == nil)

        // Filters: a state, and a time from which on.
        #expect(try await Self.page(api, key: send, "?state=cancelled").ids == ["list-3"])
        #expect(try await Self.page(api, key: send, "?state=done").ids == [])
        let jobs = try #require(full.json["jobs"] as? [[String: Any]])
        let fifth = try #require(jobs.first { $0["id"] as? String == "list-5" }?["createdAt"] as? String)
        let since = fifth.addingPercentEncoding(withAllowedCharacters: .alphanumerics) ?? ""
        #expect(try await Self.page(api, key: send, "?since=\(since)").ids == ["list-7", "list-6", "list-5"])
        // A filtered page of one with older matches left: a cursor to follow.
        let queued = try await Self.page(api, key: send, "?state=queued&limit=5")
        #expect(queued.ids == ["list-7", "list-6", "list-5", "list-4", "list-2"])
        let next = queued.next?.addingPercentEncoding(withAllowedCharacters: .alphanumerics) ?? ""
        let rest = try await Self.page(api, key: send, "?state=queued&limit=5&cursor=\(next)")
        #expect(rest.ids == ["list-1"] && rest.next == nil)

        // Tenancy: another org sees only its own.
        #expect(try await Self.page(api, key: other, "").ids == ["elsewhere-1"])

        // A bad parameter names itself; a user token may not list.
        for (query, field) in [
            ("?state=sent", "state"), ("?since=yesterday", "since"), ("?limit=0", "limit"), ("?limit=500", "limit"),
            ("?cursor=nope", "cursor"),
        ] {
            let a = try await api.call("GET", "/v1/jobs\(query)", token: send)
            #expect(a.status == 400 && a.field == field, "\(query): \(a.text)")
            #expect(a.headers["content-type"] == "application/problem+json")
        }
        let user = try await APIServerTests.userToken(api, key: send, user: "005A")
        #expect(try await api.call("GET", "/v1/jobs", token: user).status == 403)
        #expect(try await api.call("GET", "/v1/jobs").status == 401)
        await api.stop()
    }

    /// The submit script's index keeps the ledger's TTL: a job older than it leaves the index when a newer one is
    /// written, and the index expires with the last record.
    @Test func theJobIndexIsTrimmedToTheLedgersTTL() async throws {
        let redis = try RedisServerFixture()
        defer { redis.stop() }
        let store = StoreConfiguration(ledgerTTLSeconds: 3_600)
        let submitter = RedisJobSubmitter(
            redis: .lanes(SerialLanes(count: 1, label: "submit") { _ in RedisClient(endpoint: redis.endpoint) }),
            store: store)
        for (id, at) in [("old", "2026-03-01T08:00:00.000Z"), ("mid", "2026-03-01T09:30:00.500+01:00")] {
            let r = try await submitter.submit(
                org: "orgA", job: JobID(id), app: "app1", digest: id, entry: #"{"id":"\#(id)"}"#, createdAt: at)
            #expect(r != .conflict)
        }
        let index = APIKeys(prefix: "volley").jobIndex("orgA", stream: "volley:jobs")
        let c = redis.client(name: "check")
        // Scored by createdAt in milliseconds (09:30:00.500+01:00 is 08:30:00.500Z).
        let before = try c.checked(["ZRANGE", index, "0", "-1", "WITHSCORES"]).fieldPairs
        #expect(before.map(\.0) == ["old", "mid"] && before.last?.1 == "1772353800500", "\(before)")
        _ = try await submitter.submit(
            org: "orgA", job: "newest", app: "app1", digest: "newest", entry: #"{"id":"newest"}"#,
            createdAt: "2026-03-01T09:00:00.100Z")
        // "old" (08:00:00.000) is more than the TTL (an hour) before "newest" (09:00:00.100): gone from the index,
        // as its record has gone by then.
        let members = try c.checked(["ZRANGE", index, "0", "-1", "WITHSCORES"]).fieldPairs
        #expect(members.map(\.0) == ["mid", "newest"], "\(members)")
        #expect(members.last?.1 == "1772355600100")
        let ttl = try c.checked(["TTL", index]).integer ?? -2
        #expect(ttl > 3_500 && ttl <= 3_600)
        // A replay writes nothing.
        let replay = try await submitter.submit(
            org: "orgA", job: "mid", app: "app1", digest: "mid", entry: "{}", createdAt: "2026-03-01T10:00:00Z")
        let record = APIKeys(prefix: "volley").job("orgA", "mid", stream: "volley:jobs")
        let entry = try #require(try c.checked(["HGET", record, "entry"]).string)
        #expect(replay == .replayed(entry: entry))
        #expect(try c.checked(["ZSCORE", index, "mid"]).string == "1772353800500")
    }

    /// CSV rows of an answer: the header, then each row's five fields (no field here needs quotes).
    static func rows(_ a: RunningAPI.Answer) -> (header: String, rows: [[String]]) {
        let lines = a.text.components(separatedBy: "\r\n")
        #expect(lines.last == "", "the body ends with CRLF")
        let body = lines.dropFirst().dropLast()
        return (lines.first ?? "", body.map { $0.components(separatedBy: ",") })
    }

    @Test func aJobsOutcomesExportAsCSVFromItsLedgerOnceEach() async throws {
        let w = try MockWorld(mockConfig: #"{"apns": {"unregisteredPrefixes": ["dead"]}}"#)
        defer { w.stop() }
        let api = try await RunningAPI(configFile: try APIServerTests.config(w))
        let send = try APIServerTests.key(w, org: "orgA", role: .send)
        let read = try APIServerTests.key(w, org: "orgA", role: .read)
        let other = try APIServerTests.key(w, org: "orgC", role: .send)
        // Three users, two iOS devices each; user1's second device is dead at the provider.
        try w.h.register(
            org: "orgA", users: 3, devicesPerUser: 2, platform: { _ in .ios },
            token: { u, d in
                (u == 1 && d == 1 ? "dead" : "beef") + String(format: "%08x%02x", u, d)
                    + String(repeating: "0", count: 54)
            })
        let worker = try WorkerProcess(
            config: try w.writeConfig(worker: ["blockMs": "100"]), consumer: "csv", logDirectory: w.dir)
        defer { if worker.isRunning { worker.kill9() } }
        let job = #"{"app":"app1","recipients":["user0","user1","user2"],"notification":{"title":"Sale"}}"#
        let posted = try await api.call(
            "POST", "/v1/jobs", token: send, json: job, headers: ["Idempotency-Key": "csv-1"])
        #expect(posted.status == 202, "\(posted.text)")
        try await waitUntil("csv-1 done: \(worker.log.suffix(1500))", timeout: .seconds(60)) {
            try await api.call("GET", "/v1/jobs/csv-1", token: send).json["state"] as? String == "done"
        }

        let a = try await api.call("GET", "/v1/jobs/csv-1/outcomes", token: read)
        #expect(a.status == 200, "\(a.text)")
        #expect(a.headers["content-type"] == "text/csv; charset=utf-8; header=present")
        #expect(a.headers["content-disposition"] == #"attachment; filename="csv-1-outcomes.csv""#)
        let (header, rows) = Self.rows(a)
        #expect(header == "platform,token,user,outcome,reason")
        let expected: [[String]] = (0..<3).flatMap { u in
            (0..<2).map { d in
                let dead = u == 1 && d == 1
                let token =
                    (dead ? "dead" : "beef") + String(format: "%08x%02x", u, d) + String(repeating: "0", count: 54)
                // The dead token has left the registry: no user to name.
                return [
                    "ios", Self.shown(token), dead ? "" : "user\(u)", dead ? "rejected" : "accepted",
                    dead ? "Unregistered" : "",
                ]
            }
        }
        #expect(rows.sorted { $0[1] + $0[2] < $1[1] + $1[2] } == expected.sorted { $0[1] + $0[2] < $1[1] + $1[2] })
        #expect(!a.text.contains("beef000000"), "no token in full")
        // `volley jobs outcomes` writes the same bytes from the same store read.
        let settings = try PipelineSettings(try VolleyConfiguration.load(path: try w.writeConfig()))
        var written: [UInt8] = []
        let found = try await JobOutcomesCommand.export(
            settings: settings, org: "orgA", job: "csv-1", logger: Logger(label: "test")
        ) { written += $0 }
        #expect(found && String(decoding: written, as: UTF8.self) == a.text)
        let missing = try await JobOutcomesCommand.export(
            settings: settings, org: "orgC", job: "csv-1", logger: Logger(label: "test")
        ) { written += $0 }
        #expect(!missing, "another org's job is not exported")

        // The status route answers the same CSV when asked for it by name; JSON otherwise.
        let byAccept = try await api.call("GET", "/v1/jobs/csv-1", token: send, headers: ["Accept": "text/csv"])
        #expect(byAccept.status == 200 && byAccept.text == a.text)
        let json = try await api.call("GET", "/v1/jobs/csv-1", token: send, headers: ["Accept": "*/*"])
        #expect(json.json["state"] as? String == "done")
        // Tenancy and negotiation.
        let foreign = try await api.call("GET", "/v1/jobs/csv-1/outcomes", token: other)
        #expect(foreign.status == 404 && foreign.field == "id")
        let refused = try await api.call(
            "GET", "/v1/jobs/csv-1/outcomes", token: send, headers: ["Accept": "application/json"])
        #expect(refused.status == 406 && refused.field == "Accept")
        #expect(try await api.call("GET", "/v1/jobs/nothing/outcomes", token: send).status == 404)
        await api.stop()
    }

    /// A ledger of many pages (HSCAN steps, LRANGE pages) and a campaign's shards: every device once, the ledger's
    /// own fields left out, a field needing quotes quoted.
    @Test func aLargeLedgerAndItsCampaignShardsStreamEveryDeviceOnce() async throws {
        let w = try MockWorld()
        defer { w.stop() }
        let api = try await RunningAPI(configFile: try APIServerTests.config(w))
        let send = try APIServerTests.key(w, org: "orgA", role: .send)
        try await Self.post(api, key: send, id: "bulk", n: 1) // no worker: it stays queued, its ledger is ours
        let c = w.redis.client(name: "ledger")
        var commands: [[String]] = []
        var expected = Set<String>()
        for (ledger, base) in [("bulk", 0), ("bulk.s0", 10_000), ("bulk.s1", 20_000)] {
            let key = "volley:outcomes:{orgA}:\(ledger)"
            var hset = ["HSET", key, "_report", "{}", "_cancelled", "1"]
            for i in 0..<1_200 {
                let token = "android-token-\(base + i)"
                hset += ["android:\(token)", i % 2 == 0 ? "q" : "f|0|UNAVAILABLE"]
                let outcome = i % 2 == 0 ? "quotaExceeded," : "failed,UNAVAILABLE"
                expected.insert("android,\(Self.shown(token)),,\(outcome)")
            }
            commands.append(hset)
            for batch in 0..<11 {
                var element = ""
                for i in 0..<100 {
                    let field = "ios:ios-token-\(base + batch * 100 + i)"
                    element += "\(field.utf8.count):\(field)\n"
                    expected.insert("ios,\(Self.shown(String(field.dropFirst(4)))),,accepted,")
                }
                commands.append(["RPUSH", "\(key):accepted", element])
            }
        }
        commands.append(["HSET", "volley:shardagg:{orgA}:bulk", "planned", "2"])
        // A user id that needs quotes, through the registry's reverse index.
        commands.append(["HSET", "volley:devtok:{orgA}:app1", "ios:ios-token-0", "Doe, \"J\""])
        for r in try c.pipeline(commands) { try r.throwIfError("seed") }
        expected.remove("ios,\(Self.shown("ios-token-0")),,accepted,")
        expected.insert("ios,\(Self.shown("ios-token-0")),\"Doe, \"\"J\"\"\",accepted,")

        let a = try await api.call("GET", "/v1/jobs/bulk/outcomes", token: send, headers: ["Accept": "text/*"])
        #expect(a.status == 200)
        let lines = a.text.components(separatedBy: "\r\n").dropFirst().dropLast()
        #expect(lines.count == 3 * (1_200 + 1_100), "each device once")
        #expect(Set(lines) == expected)
        await api.stop()
    }
}
