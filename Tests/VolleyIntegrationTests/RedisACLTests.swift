import Foundation
import Testing
import VolleyAPI
import VolleyCore
import VolleyRedis
import VolleyTestDoubles
import VolleyTestSupport
import VolleyTestTags

/// Least privilege: a redis-server loaded with `deploy/redis-acl.conf` (test passwords in place of the
/// placeholders), a `volley worker` process as `volley-worker` and the API as `volley-api`. A campaign and the API's
/// routes run without a single refusal in Redis's ACL log; a permission taken away is a configuration error.
@Suite(.serialized, .tags(.integration)) struct RedisACLTests {
    static let v = "/services/data/v60.0"

    /// The repository's `deploy/redis-acl.conf` with test passwords, written into `dir`.
    static func aclFile(in dir: URL) throws -> String {
        let repository = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .deletingLastPathComponent()
        let text = try String(
            contentsOf: repository.appendingPathComponent("deploy/redis-acl.conf"), encoding: .utf8)
        #expect(text.contains(">CHANGE_ME_WORKER") && text.contains(">CHANGE_ME_API"))
        let path = dir.appendingPathComponent("redis-acl.conf").path
        try text.replacingOccurrences(of: ">CHANGE_ME_WORKER", with: ">worker-test-password")
            .replacingOccurrences(of: ">CHANGE_ME_API", with: ">api-test-password")
            .write(toFile: path, atomically: true, encoding: .utf8)
        return path
    }

    /// A world whose Redis runs the ACL file, with the job group created by the operator (the default user here):
    /// the worker's user may not create it.
    static func world() throws -> (MockWorld, URL) {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent(
            "volley-acl-\(UUID().uuidString.prefix(8))")
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        let w = try MockWorld(redisArguments: ["--aclfile", try aclFile(in: dir)])
        try w.redis.client(name: "operator").checked(["XGROUP", "CREATE", "volley:jobs", "volley", "0", "MKSTREAM"])
        return (w, dir)
    }

    static func url(_ w: MockWorld, user: String, password: String) -> String {
        "unix://\(user):\(password)@\(w.redis.socketPath)"
    }

    /// The API's configuration with its own Redis user.
    static func apiConfig(_ w: MockWorld) throws -> String {
        let path = try APIServerTests.config(w)
        let yaml = try String(contentsOfFile: path, encoding: .utf8).replacingOccurrences(
            of: "\"\(w.redis.url)\"", with: "\"\(url(w, user: "volley-api", password: "api-test-password"))\"")
        try yaml.write(toFile: path, atomically: true, encoding: .utf8)
        return path
    }

    /// Redis's ACL log, read as the default user: one line per refusal.
    static func aclLog(_ w: MockWorld) throws -> [String] {
        let entries = try w.redis.client(name: "operator").checked(["ACL", "LOG", "100"]).array ?? []
        return entries.map { e in
            let f = Dictionary(e.fieldPairs, uniquingKeysWith: { a, _ in a })
            return "\(f["username"] ?? "?") \(f["reason"] ?? "?") \(f["object"] ?? "?") (\(f["context"] ?? "?"))"
        }
    }

    @Test func aCampaignAndTheAPIRunUnderTheirOwnUsersWithoutARefusal() async throws {
        let (w, dir) = try Self.world()
        defer {
            w.stop()
            try? FileManager.default.removeItem(at: dir)
        }
        let api = try await RunningAPI(configFile: try Self.apiConfig(w))
        // Keys are made by the CLI, with the operator's credentials.
        let admin = try APIServerTests.key(w, org: "orgA", role: .admin)
        let send = try APIServerTests.key(w, org: "orgA", role: .send)
        #expect(try await api.call("GET", "/readyz").status == 200)

        // Types, devices, a user token.
        let type = try await api.call("PUT", "/v1/types/0MLxx1", token: admin, json: #"{"name":"Deal won"}"#)
        #expect(type.status == 200, "\(type.text)")
        #expect(try await api.call("GET", "/v1/types", token: admin).status == 200)
        #expect(try await api.call("GET", "/v1/types/0MLxx1", token: admin).status == 200)
        let subscribe = try await api.call(
            "POST", "\(Self.v)/connect/notifications/app-settings/organization/0MLxx1", token: admin,
            json: #"{"applicationId":"app1","enabled":true}"#)
        #expect(subscribe.status == 200, "\(subscribe.text)")
        let user = try await APIServerTests.userToken(api, key: send, user: "005A")
        let ios = "beef" + String(repeating: "4", count: 60)
        let spare = "beef" + String(repeating: "5", count: 60)
        for token in [ios, spare] {
            let put = try await api.call(
                "PUT", "/v1/devices", token: user, json: #"{"platform":"ios","token":"\#(token)"}"#)
            #expect(put.status == 200, "\(put.text)")
        }
        let android = try await api.call(
            "PUT", "/v1/devices", token: user, json: #"{"platform":"android","token":"fcm-acl-1"}"#)
        #expect(android.status == 200)
        #expect(try await api.call("DELETE", "/v1/devices/ios/\(spare)", token: user).status == 204)
        #expect(try await api.call("GET", "/v1/users/005A/devices", token: admin).status == 200)

        // Templates: the put script, reads, a list and a delete.
        let template = #"{"notification":{"title":"Hi {{ first_name | 'Friend' }}"}}"#
        for id in ["welcome", "spare"] {
            let put = try await api.call("PUT", "/v1/templates/\(id)", token: admin, json: template)
            #expect(put.status == 201, "\(put.text)")
        }
        #expect(try await api.call("GET", "/v1/templates/welcome", token: send).status == 200)
        #expect(try await api.call("GET", "/v1/templates", token: send).status == 200)
        #expect(try await api.call("DELETE", "/v1/templates/spare", token: admin).status == 204)
        let attributes = try await api.call(
            "PUT", "/v1/users/005A/attributes", token: admin, json: #"{"attributes":{"first_name":"Ada"}}"#)
        #expect(attributes.status == 200, "\(attributes.text)")
        #expect(try await api.call("GET", "/v1/users/005A/attributes", token: admin).status == 200)
        // Segments: the put script, counts (the index's set operations, a score range) and a job naming them.
        let segments = [
            (
                "ada",
                #"{"match":"any","filters":[{"attribute":"first_name","op":"eq","value":"Ada"},"#
                    + #"{"attribute":"n","op":"gt","value":1},{"attribute":"plan","op":"notExists"}]}"#
            ),
            (
                "none",
                #"{"filters":[{"attribute":"first_name","op":"ne","value":"Bo"},"#
                    + #"{"attribute":"n","op":"lt","value":1}]}"#
            ),
        ]
        for (id, body) in segments {
            let put = try await api.call("PUT", "/v1/segments/\(id)", token: admin, json: body)
            #expect(put.status == 201, "\(put.text)")
        }
        let counted = try await api.call("GET", "/v1/segments/ada/count", token: send)
        #expect(counted.json["users"] as? Int == 1, "\(counted.text)")
        #expect(try await api.call("GET", "/v1/segments/none/count", token: send).json["users"] as? Int == 0)
        #expect(try await api.call("GET", "/v1/segments", token: send).status == 200)
        let segmentJob = try await api.call(
            "POST", "/v1/jobs", token: send,
            json: #"{"app":"app1","recipients":[{"segment":"ada"}],"exclude":[{"segment":"none"}],"#
                + #""notification":{"title":"Segment"}}"#,
            headers: ["Idempotency-Key": "acl-6"])
        #expect(segmentJob.status == 202, "\(segmentJob.text)")
        // Frequency caps: the rules the worker then applies (no user reaches them).
        let caps = try await api.call(
            "PUT", "/v1/frequency-caps", token: admin, json: #"{"rules":[{"window":"1h","max":100}]}"#)
        #expect(caps.status == 200, "\(caps.text)")
        #expect(try await api.call("GET", "/v1/frequency-caps", token: admin).status == 200)
        // The org's zone: a local-time job below is opened in it (the worker reads it).
        let zone = try await api.call("PUT", "/v1/time-zone", token: admin, json: #"{"timeZone":"Pacific/Kiritimati"}"#)
        #expect(zone.status == 200, "\(zone.text)")
        #expect(try await api.call("GET", "/v1/time-zone", token: admin).json["source"] as? String == "api")

        // A job, a custom notification action and a Connect push: the campaign the worker sends.
        let job = #"{"app":"app1","recipients":["005A"],"notification":{"title":"Hi","body":"there"}}"#
        let posted = try await api.call(
            "POST", "/v1/jobs", token: send, json: job, headers: ["Idempotency-Key": "acl-1"])
        #expect(posted.status == 202, "\(posted.text)")
        // A job for two seconds from now (parked by the worker, promoted back) and one for tomorrow, cancelled.
        for (id, ahead) in [("acl-2", 2.0), ("acl-3", 86_400.0)] {
            let at = ScheduledTime.utcText(Date().addingTimeInterval(ahead))
            let scheduled = try await api.call(
                "POST", "/v1/jobs", token: send,
                json: #"{"app":"app1","recipients":["005A"],"notification":{"title":"Later"},"sendAt":"\#(at)"}"#,
                headers: ["Idempotency-Key": id])
            #expect(scheduled.status == 202, "\(scheduled.text)")
        }
        // Six hours from now on Kiritimati's clock: parked as a wave, after the worker read the org's zone.
        let kiritimati = try #require(TimeZone(identifier: "Pacific/Kiritimati"))
        let later = Date().addingTimeInterval(6 * 3600)
        let wall = Int(later.timeIntervalSince1970) + kiritimati.secondsFromGMT(for: later)
        let hhmm = String(format: "%02d:%02d", (wall % 86_400) / 3_600, (wall % 3_600) / 60)
        let localJob = try await api.call(
            "POST", "/v1/jobs", token: send,
            json: #"{"app":"app1","recipients":["005A"],"notification":{"title":"Morning"},"#
                + #""deliverAtLocalTime":"\#(hhmm)"}"#,
            headers: ["Idempotency-Key": "acl-5"])
        #expect(localJob.status == 202, "\(localJob.text)")
        let action = try await api.call(
            "POST", "\(Self.v)/actions/standard/customNotificationAction", token: send,
            json: #"""
                {"inputs":[{"customNotifTypeId":"0MLxx1","recipientIds":["005A"],"title":"Deal won",
                "body":"Acme, 1M","targetId":"006xx000001"}]}
                """#)
        #expect(action.status == 200, "\(action.text)")
        let push = try await api.call(
            "POST", "\(Self.v)/connect/notifications/push", token: send,
            json: #"{"appName":"app1","userIds":["005A"],"payload":"{'aps':{'alert':'Hello'}}"}"#)
        #expect(push.status == 202, "\(push.text)")
        // A throttled job (the gate's script on Redis's TIME), a schedule whose run the worker promotes, and the
        // schedules' routes.
        let throttled = try await api.call(
            "POST", "/v1/jobs", token: send,
            json: job.replacingOccurrences(of: #""app":"app1","#, with: #""app":"app1","throttlePerMinute":600,"#),
            headers: ["Idempotency-Key": "acl-4"])
        #expect(throttled.status == 202, "\(throttled.text)")
        let run = Date(timeIntervalSince1970: (Date().timeIntervalSince1970 + 2).rounded(.up))
        let once = try await api.call(
            "POST", "/v1/schedules", token: send,
            json:
                #"{"id":"acl-s","start":"\#(RFC3339.format(run))","frequency":"once","timeZone":"UTC","job":\#(job)}"#
        )
        #expect(once.status == 201, "\(once.text)")
        let daily = try await api.call(
            "POST", "/v1/schedules", token: send,
            json: #"{"id":"acl-d","start":"2030-01-01T09:00:00Z","frequency":"daily","timeZone":"UTC","job":\#(job)}"#)
        #expect(daily.status == 201, "\(daily.text)")
        #expect(try await api.call("GET", "/v1/schedules", token: send).status == 200)
        #expect(try await api.call("POST", "/v1/schedules/acl-d/pause", token: send).status == 200)
        #expect(try await api.call("POST", "/v1/schedules/acl-d/resume", token: send).status == 200)
        #expect(try await api.call("DELETE", "/v1/schedules/acl-d", token: send).status == 204)

        var local = w.local
        local.redisURL = Self.url(w, user: "volley-worker", password: "worker-test-password")
        local.worker = ["blockMs": "100"]
        local.quotaIOS = 1_000
        let workerConfig = w.dir.appendingPathComponent("worker-acl.yaml").path
        try local.write(to: workerConfig)
        let worker = try WorkerProcess(config: workerConfig, consumer: "acl-w", logDirectory: w.dir)
        defer { if worker.isRunning { worker.kill9() } }

        try await waitUntil("job acl-1 done: \(worker.log.suffix(2000))", timeout: .seconds(60)) {
            try await api.call("GET", "/v1/jobs/acl-1", token: send).json["state"] as? String == "done"
        }
        try await waitUntil("4 APNs sends accepted: \(worker.log.suffix(1500))", timeout: .seconds(60)) {
            w.mock.stats().acceptedAPNs >= 3
        }
        let runJob = Schedule.runJobID(schedule: "acl-s", run: run)
        for id in ["acl-2", "acl-4", "acl-6", runJob.rawValue] {
            try await waitUntil("job \(id) done: \(worker.log.suffix(2000))", timeout: .seconds(60)) {
                try await api.call("GET", "/v1/jobs/\(id)", token: send).json["state"] as? String == "done"
            }
        }
        try await waitUntil("job acl-3 scheduled", timeout: .seconds(30)) {
            try await api.call("GET", "/v1/jobs/acl-3", token: send).json["state"] as? String == "scheduled"
        }
        try await waitUntil(
            "job acl-5 waiting for Kiritimati's time: \(worker.log.suffix(2000))", timeout: .seconds(30)
        ) {
            try await api.call("GET", "/v1/jobs/acl-5", token: send).json["state"] as? String == "scheduled"
        }
        #expect(try await api.call("DELETE", "/v1/time-zone", token: admin).status == 200)
        let cancelled = try await api.call("DELETE", "/v1/jobs/acl-3", token: send)
        #expect(cancelled.status == 200, "\(cancelled.text)")
        #expect(try await api.call("GET", "/v1/jobs/acl-1/events", token: send).status == 200)
        // The org's job list (its index, each job's state) and a job's outcomes as CSV (ledger, shard plan, users).
        let list = try await api.call("GET", "/v1/jobs?limit=100", token: send)
        #expect(list.status == 200 && (list.json["jobs"] as? [Any])?.isEmpty == false, "\(list.text)")
        #expect(try await api.call("GET", "/v1/jobs?state=done", token: send).status == 200)
        let csv = try await api.call("GET", "/v1/jobs/acl-1/outcomes", token: send)
        #expect(csv.status == 200 && csv.text.contains(",accepted,"), "\(csv.text)")
        let report = try await api.call("GET", "/v1/jobs/acl-1", token: send).json["report"] as? [String: Any]
        #expect(report?["capped"] as? Int == 0, "the caps applied to the job: \(report ?? [:])")
        #expect(try await api.call("DELETE", "/v1/frequency-caps", token: admin).status == 200)
        #expect(try await api.call("GET", "/v1/quota", token: admin).status == 200)
        // The inbox, through the Salesforce-compatible routes.
        var listed: [[String: Any]] = []
        try await waitUntil("the user's inbox to list the notification", timeout: .seconds(30)) {
            let list = try await api.call("GET", "\(Self.v)/connect/notifications?size=10", token: user)
            #expect(list.status == 200, "\(list.text) \((try? Self.aclLog(w)) ?? [])")
            listed = list.json["notifications"] as? [[String: Any]] ?? []
            return list.status != 200 || !listed.isEmpty
        }
        let id = try #require(listed.first?["id"] as? String, "\((try? Self.aclLog(w)) ?? [])")
        #expect(try await api.call("GET", "\(Self.v)/connect/notifications/status", token: user).status == 200)
        let marked = try await api.call(
            "PATCH", "\(Self.v)/connect/notifications/\(id)", token: user, json: #"{"read":"true"}"#)
        #expect(marked.status == 200, "\(marked.text)")
        #expect(try await api.call("DELETE", "/v1/types/0MLxx1", token: admin).status == 204)
        #expect(try await api.call("GET", "/readyz").status == 200)

        // Sync hints: stored by the API, pushed by the worker's flusher (an idempotent job record beside the
        // stream), read back, and acked by the user.
        let hint = try await api.call(
            "POST", "/v1/sync-hints", token: send,
            json: #"{"app":"app1","users":["005A"],"type":"ACL","recordIds":["r1"]}"#)
        #expect(hint.status == 202, "\(hint.text)")
        try await waitUntil("the sync hint's push: \(worker.log.suffix(1500))", timeout: .seconds(30)) {
            ((try? w.h.producer.allReports()) ?? []).contains { $0.job.rawValue.hasPrefix("synchint-") }
        }
        #expect(try await api.call("GET", "/v1/sync-hints/005A", token: send).status == 200)
        let ack = try await api.call(
            "POST", "/v1/sync-hints/ack", token: user, json: #"{"type":"ACL","upTo":"2030-01-01T00:00:00Z"}"#)
        #expect(ack.status == 200, "\(ack.text)")

        #expect(try Self.aclLog(w) == [])
        #expect(!worker.log.contains("NOPERM"), "\(worker.log.suffix(2000))")
        await api.stop()
    }

    @Test func aRefusedCommandIsAConfigurationErrorNotARetry() async throws {
        let (w, dir) = try Self.world()
        defer {
            w.stop()
            try? FileManager.default.removeItem(at: dir)
        }
        let api = try await RunningAPI(configFile: try Self.apiConfig(w))
        let admin = try APIServerTests.key(w, org: "orgA", role: .admin)
        #expect(try await api.call("GET", "/readyz").status == 200)
        let type = try await api.call("PUT", "/v1/types/0MLxx2", token: admin, json: #"{"name":"Deal lost"}"#)
        #expect(type.status == 200, "\(type.text)")
        // The operator takes a command away from the API's user: removing a type needs it.
        try w.redis.client(name: "operator").checked(["ACL", "SETUSER", "volley-api", "-hdel"])
        let put = try await api.call("DELETE", "/v1/types/0MLxx2", token: admin)
        #expect(put.status == 500, "\(put.text)")
        #expect(put.headers["retry-after"] == nil)
        let detail = put.json["detail"] as? String ?? put.text
        #expect(
            detail.contains("NOPERM") && detail.contains("HDEL") && detail.contains("volley:types:{orgA}"), "\(detail)")
        #expect(detail.contains("lacks this permission"))
        let ready = try await api.call("GET", "/readyz")
        #expect(ready.status == 503)
        #expect(ready.text.contains("HDEL"), "\(ready.text)")
        await api.stop()
    }
}
