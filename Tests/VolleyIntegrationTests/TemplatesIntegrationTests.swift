import Foundation
import Testing
import VolleyAPI
import VolleyCore
import VolleyRedis
import VolleyService
import VolleyStore
import VolleyTestDoubles
import VolleyTestSupport
import VolleyTestTags

/// Templates through `volley api` on a real Redis with a real HTTP client, the template store's script, and user
/// attributes from a directory import read back as the worker reads them.
@Suite(.serialized, .tags(.integration)) struct TemplatesIntegrationTests {
    static let welcome =
        #"{"notification":{"title":"Hi {{ first_name | 'Friend' }}","body":"Order {{ message.custom_data.order }}","#
        + #""localized":{"es":{"title":"Hola {{ first_name | default: \"amigo\" }}"}},"relevanceScore":0.10}}"#

    @Test func templatesAreKeptPerOrgThroughTheAPIAndJobsNamingThemAreCheckedAtTheDoor() async throws {
        let w = try MockWorld()
        defer { w.stop() }
        let api = try await RunningAPI(configFile: try APIServerTests.config(w))
        let admin = try APIServerTests.key(w, org: "orgA", role: .admin)
        let send = try APIServerTests.key(w, org: "orgA", role: .send)
        let otherAdmin = try APIServerTests.key(w, org: "orgC", role: .admin)

        let created = try await api.call("PUT", "/v1/templates/welcome", token: admin, json: Self.welcome)
        #expect(created.status == 201, "\(created.text)")
        #expect(created.headers["location"] == "/v1/templates/welcome")
        // Kept as it was put: the number's text too.
        let got = try await api.call("GET", "/v1/templates/welcome", token: send)
        #expect(got.status == 200)
        #expect(got.text.contains(#""relevanceScore":0.10"#), "\(got.text)")
        let createdAt = try #require(got.json["createdAt"] as? String)

        let replaced = try await api.call(
            "PUT", "/v1/templates/welcome", token: admin, json: #"{"notification":{"title":"Hello {{ first_name }}"}}"#)
        #expect(replaced.status == 200, "\(replaced.text)")
        #expect(replaced.json["createdAt"] as? String == createdAt)
        #expect(
            try await api.call("PUT", "/v1/templates/second", token: admin, json: Self.welcome).status == 201)
        let list = try await api.call("GET", "/v1/templates", token: send)
        let ids = (list.json["templates"] as? [[String: Any]])?.compactMap { $0["id"] as? String }
        #expect(ids == ["second", "welcome"])

        // Another org neither sees nor uses them.
        #expect(try await api.call("GET", "/v1/templates/welcome", token: otherAdmin).status == 404)
        let otherList = try await api.call("GET", "/v1/templates", token: otherAdmin)
        #expect((otherList.json["templates"] as? [Any])?.count == 0)

        // Bad templates: 400 naming the field, nothing stored.
        let cases: [(String, String)] = [
            (#"{"notification":{"title":"Hi {{ first_name"}}"#, "notification.title"),
            (#"{"notification":{"body":"{{ first_name | shout }}"}}"#, "notification.body"),
            (#"{"notification":{"localized":{"pt":{"subtitle":"{{}}"}}}}"#, "notification.localized.pt.subtitle"),
            (#"{"notification":{"imageUrl":"https://x/{{ user.id }}.png"}}"#, "notification.imageUrl"),
            (#"{"notification":{"title":"x","badge":"one"}}"#, "notification.badge"),
            (#"{"template":{"title":"x"}}"#, "template"),
        ]
        for (body, field) in cases {
            let a = try await api.call("PUT", "/v1/templates/bad", token: admin, json: body)
            #expect(a.status == 400, "\(body) → \(a.text)")
            #expect(a.field == field, "\(body) → \(a.text)")
        }
        #expect(try await api.call("GET", "/v1/templates/bad", token: admin).status == 404)
        #expect(try await api.call("PUT", "/v1/templates/x", token: send, json: Self.welcome).status == 403)

        // Jobs.
        let job = #"{"app":"app1","recipients":["005A"],"templateId":"welcome","customData":{"order":"A-17"}}"#
        let accepted = try await api.call("POST", "/v1/jobs", token: send, json: job)
        #expect(accepted.status == 202, "\(accepted.text)")
        let unknown = try await api.call(
            "POST", "/v1/jobs", token: send, json: job.replacingOccurrences(of: "\"welcome\"", with: "\"gone\""))
        #expect(unknown.status == 404)
        #expect(unknown.field == "templateId")
        let entries = try w.redis.client(name: "read").checked(["XRANGE", "volley:jobs", "-", "+"]).array ?? []
        #expect(entries.count == 1)
        let entry = try #require(entries.first?.array?.last?.array)
        let fields = stride(from: 0, to: entry.count - 1, by: 2).map { (entry[$0].string, entry[$0 + 1].string) }
        let stored = try #require(fields.first { $0.0 == "job" }?.1)
        let decoded = try JSONDecoder().decode(PushJob.self, from: Data(stored.utf8))
        #expect(decoded.templateId == "welcome")
        #expect(decoded.customData == .object(["order": .string("A-17")]))

        // Deleted: gone for GET and for new jobs.
        #expect(try await api.call("DELETE", "/v1/templates/welcome", token: admin).status == 204)
        #expect(try await api.call("DELETE", "/v1/templates/welcome", token: admin).status == 404)
        #expect(try await api.call("POST", "/v1/jobs", token: send, json: job).status == 404)
        await api.stop()
    }

    @Test func theStoreKeepsCreationTimesAndTheOrgsLimitAndTheWorkerReadsTheNotification() throws {
        let fx = try RedisServerFixture()
        defer { fx.stop() }
        let store = RedisTemplateStore(client: fx.client())
        let t0 = Date(timeIntervalSince1970: 1_800_000_000.123)
        let n1 = try JSONValue(parsing: #"{"title":"Hi {{ first_name }}","data":{"n":18446744073709551617}}"#)
        guard case .created(let first) = try store.put(org: "o1", id: "a", notification: n1, now: t0, maxCount: 2)
        else {
            Issue.record("not created")
            return
        }
        #expect(first.createdAt == t0 || abs(first.createdAt.timeIntervalSince(t0)) < 0.001)
        let t1 = t0.addingTimeInterval(60)
        guard case .replaced(let again) = try store.put(org: "o1", id: "a", notification: n1, now: t1, maxCount: 2)
        else {
            Issue.record("not replaced")
            return
        }
        #expect(abs(again.createdAt.timeIntervalSince(t0)) < 0.001)
        #expect(abs(again.updatedAt.timeIntervalSince(t1)) < 0.001)
        _ = try store.put(org: "o1", id: "b", notification: n1, now: t1, maxCount: 2)
        #expect(try store.put(org: "o1", id: "c", notification: n1, now: t1, maxCount: 2) == .limitReached)
        // Another org has its own count.
        guard case .created = try store.put(org: "o2", id: "c", notification: n1, now: t1, maxCount: 2) else {
            Issue.record("o2 refused")
            return
        }
        #expect(try store.list(org: "o1").map(\.id) == ["a", "b"])
        let read = try store.template(org: "o1", id: "a")
        #expect(read?.notification.jsonText.contains("18446744073709551617") == true)
        #expect(abs((read?.createdAt ?? .distantPast).timeIntervalSince(t0)) < 0.001)
        // The worker's read: the notification alone, which compiles.
        let value = try #require(try store.notification(org: "o1", templateID: "a"))
        let template = try NotificationTemplate(
            try StoredTemplate(id: "a", notification: value, createdAt: t0, updatedAt: t0).readNotification())
        #expect(template.usesAttributes)
        #expect(try store.notification(org: "o1", templateID: "zz") == nil)
        #expect(try store.delete(org: "o1", id: "a"))
        #expect(try !store.delete(org: "o1", id: "a"))
        #expect(try store.template(org: "o1", id: "a") == nil)
    }

    @Test func attributesFromADirectoryImportAreReadBackPerChunkInOneRoundTrip() throws {
        let fx = try RedisServerFixture()
        defer { fx.stop() }
        let directory = RedisDirectory(client: fx.client())
        let file = FileManager.default.temporaryDirectory.appendingPathComponent("attrs-\(UUID().uuidString).jsonl")
        defer { try? FileManager.default.removeItem(at: file) }
        try """
        {"org":"o1","kind":"user","id":"u1","attributes":{"first_name":"Ada","city":"London"}}
        {"org":"o1","kind":"user","id":"u2","attributes":{"first_name":"Zoë {{ x }}"}}
        {"org":"o1","kind":"user","id":"u3"}
        {"org":"o1","kind":"user","id":"u4","attributes":{"first name":"Bad"}}
        {"org":"o1","kind":"user","id":"u5","attributes":{"first_name":1}}
        {"org":"o1","kind":"group","id":"g1","members":["u1"],"attributes":{"a":"b"}}
        {"org":"o1","kind":"user","id":"u6","attributes":{"first_name":"\(String(repeating: "x", count: 513))"}}
        {"org":"o2","kind":"user","id":"u1","attributes":{"first_name":"Other"}}
        """.write(to: file, atomically: true, encoding: .utf8)
        let result = try DirectoryImport.run(path: file.path, into: directory) { _ in }
        #expect(result.counts.users == 4)
        #expect(result.counts.usersWithAttributes == 3)
        #expect(result.skipped.count == 4, "\(result.skipped)")
        #expect(result.skipped.contains { $0.hasPrefix("line 4:") && $0.contains("attributes.first name") })
        #expect(result.skipped.contains { $0.hasPrefix("line 5:") && $0.contains("attributes") })
        #expect(result.skipped.contains { $0.hasPrefix("line 6:") && $0.contains("only users have attributes") })
        #expect(result.skipped.contains { $0.hasPrefix("line 7:") && $0.contains("at most 512") })

        let client = fx.client()
        _ = try client.checked(["CONFIG", "RESETSTAT"])
        let users: [UserID] = ["u1", "u2", "u3", "nobody"]
        let read = try directory.attributes(org: "o1", users: users)
        #expect(read.count == 4)
        #expect(read[0] == ["first_name": "Ada", "city": "London"])
        #expect(read[1] == ["first_name": "Zoë {{ x }}"])
        #expect(read[2] == nil)
        #expect(read[3] == nil)
        #expect(try directory.attributes(org: "o2", users: ["u1"]) == [["first_name": "Other"]])
        // One HMGET per call, whatever the chunk's size.
        let stats = try client.checked(["INFO", "commandstats"]).string ?? ""
        let hmget = stats.split(separator: "\r\n").first { $0.hasPrefix("cmdstat_hmget:") }
        #expect(hmget?.contains("calls=2,") == true, "\(hmget ?? "none")")

        // A later record without attributes keeps them; an empty object removes them.
        try directory.importRecords([
            DirectoryRecord(org: "o1", kind: .user, id: "u1", active: true),
            DirectoryRecord(org: "o1", kind: .user, id: "u2", attributes: [:]),
        ])
        let after = try directory.attributes(org: "o1", users: ["u1", "u2"])
        #expect(after[0] == ["first_name": "Ada", "city": "London"])
        #expect(after[1] == nil)

        // Rendered with what was read: each user's name, the fallback without one, never a `{{`.
        let template = try NotificationTemplate(VolleyCore.Notification(title: "Hi {{ first_name | 'Friend' }}"))
        let titles = read.map { template.render(attributes: $0).notification.title ?? "" }
        #expect(titles == ["Hi Ada", "Hi Zoë { { x }}", "Hi Friend", "Hi Friend"])
        #expect(titles.allSatisfy { !$0.contains("{{") })
    }
}

/// `volley templates` and `volley directory import` with attributes, as an operator runs them: the real binary on a
/// real Redis.
@Suite(.serialized, .tags(.integration)) struct TemplatesCommandTests {
    /// Runs `volley ARGS`; answers the exit status and what it printed.
    static func volley(_ arguments: [String]) throws -> (status: Int32, output: String) {
        let p = Process()
        p.executableURL = URL(fileURLWithPath: try WorkerProcess.binary())
        p.arguments = arguments
        let pipe = Pipe()
        p.standardOutput = pipe
        p.standardError = pipe
        try p.run()
        let data = pipe.fileHandleForReading.readDataToEndOfFile()
        p.waitUntilExit()
        return (p.terminationStatus, String(decoding: data, as: UTF8.self))
    }

    @Test func anOperatorPutsListsGetsAndDeletesTemplatesAndImportsAttributes() throws {
        let w = try MockWorld()
        defer { w.stop() }
        let config = w.dir.appendingPathComponent("cli.yaml").path
        try w.local.write(to: config)
        let base = ["--config", config, "--org", "o1"]

        let put = try Self.volley(
            ["templates", "put"] + base + ["--id", "welcome", "--notification", #"{"title":"Hi {{ first_name }}"}"#])
        #expect(put.status == 0, "\(put.output)")
        #expect(put.output.contains("template welcome created"))
        let file = w.dir.appendingPathComponent("n.json")
        try #"{"title":"Hola {{ first_name | 'amigo' }}","data":{"n":0.10}}"#.write(
            to: file, atomically: true, encoding: .utf8)
        let replaced = try Self.volley(
            ["templates", "put"] + base + ["--id", "welcome", "--notification-file", file.path])
        #expect(replaced.output.contains("template welcome replaced"), "\(replaced.output)")

        let bad = try Self.volley(
            ["templates", "put"] + base + ["--id", "bad", "--notification", #"{"body":"{{ first_name | x }}"}"#])
        #expect(bad.status != 0)
        #expect(bad.output.contains("notification.body"), "\(bad.output)")

        let got = try Self.volley(["templates", "get"] + base + ["--id", "welcome"])
        #expect(got.status == 0)
        #expect(got.output.contains(#""n":0.10"#), "\(got.output)")
        #expect(got.output.contains("amigo"))
        let list = try Self.volley(["templates", "list"] + base)
        #expect(list.output.contains("welcome") && list.output.contains("names: user attributes"), "\(list.output)")
        #expect(!list.output.contains("bad"))
        #expect(try Self.volley(["templates", "delete"] + base + ["--id", "welcome"]).status == 0)
        let gone = try Self.volley(["templates", "get"] + base + ["--id", "welcome"])
        #expect(gone.status != 0)
        #expect(gone.output.contains("no template welcome"))

        let records = w.dir.appendingPathComponent("dir.jsonl")
        try """
        {"org":"o1","kind":"user","id":"u1","attributes":{"first_name":"Ada"}}
        {"org":"o1","kind":"user","id":"u2","attributes":{"first_name":["Ada"]}}
        """.write(to: records, atomically: true, encoding: .utf8)
        let imported = try Self.volley(["directory", "import", "--config", config, records.path])
        #expect(imported.status == 2, "\(imported.output)")
        #expect(imported.output.contains("1 with attributes"), "\(imported.output)")
        #expect(imported.output.contains("line 2:"), "\(imported.output)")
        let read = try RedisDirectory(client: w.redis.client()).attributes(org: "o1", users: ["u1", "u2"])
        #expect(read == [["first_name": "Ada"], nil])
    }

    /// A user's attributes through the API land where the worker reads them, stay in their org, and a bad one is
    /// a 400 naming its key.
    @Test func attributesThroughTheAPIAreWhatTheWorkerReads() async throws {
        let w = try MockWorld()
        defer { w.stop() }
        let api = try await RunningAPI(configFile: try APIServerTests.config(w))
        let admin = try APIServerTests.key(w, org: "orgA", role: .admin)
        let read = try APIServerTests.key(w, org: "orgA", role: .read)
        let otherAdmin = try APIServerTests.key(w, org: "orgC", role: .admin)
        let put = try await api.call(
            "PUT", "/v1/users/005A/attributes", token: admin, json: #"{"attributes":{"first_name":"Ada"}}"#)
        #expect(put.status == 200, "\(put.text)")
        let directory = RedisDirectory(client: w.redis.client(name: "attrs"))
        #expect(try directory.attributes(org: "orgA", users: ["005A"]) == [["first_name": "Ada"]])
        #expect(try directory.attributes(org: "orgC", users: ["005A"]) == [nil])
        let got = try await api.call("GET", "/v1/users/005A/attributes", token: read)
        #expect(got.status == 200 && (got.json["attributes"] as? [String: String]) == ["first_name": "Ada"])
        let other = try await api.call("GET", "/v1/users/005A/attributes", token: otherAdmin)
        #expect((other.json["attributes"] as? [String: String]) == [:])
        // A read key may not change them; a bad key or value is a 400 naming it.
        #expect(
            try await api.call(
                "PUT", "/v1/users/005A/attributes", token: read, json: #"{"attributes":{}}"#
            ).status == 403)
        let badKey = try await api.call(
            "PUT", "/v1/users/005A/attributes", token: admin, json: #"{"attributes":{"first name":"Ada"}}"#)
        #expect(badKey.status == 400 && badKey.text.contains("attributes.first name"), "\(badKey.text)")
        let badValue = try await api.call(
            "PUT", "/v1/users/005A/attributes", token: admin, json: #"{"attributes":{"age":7}}"#)
        #expect(badValue.status == 400 && badValue.text.contains("attributes.age"), "\(badValue.text)")
        // {} removes them.
        #expect(
            try await api.call("PUT", "/v1/users/005A/attributes", token: admin, json: #"{"attributes":{}}"#).status
                == 200)
        #expect(try directory.attributes(org: "orgA", users: ["005A"]) == [nil])
        await api.stop()
    }
}
