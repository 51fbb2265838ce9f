import Foundation
import Testing
import VolleyAPI
import VolleyCore
import VolleyTestDoubles
import VolleyTestSupport
import VolleyTestTags

/// The Salesforce-compatible paths through the real API, a real worker and the real mock.
@Suite(.serialized, .tags(.integration)) struct ConnectAPITests {
    static let v = "/services/data/v60.0"

    @Test func customActionAndConnectPushReachTheMockAndTheInbox() async throws {
        let w = try MockWorld()
        defer { w.stop() }
        let api = try await RunningAPI(configFile: try APIServerTests.config(w))
        let admin = try APIServerTests.key(w, org: "orgA", role: .admin)
        let send = try APIServerTests.key(w, org: "orgA", role: .send)
        #expect(
            try await api.call("PUT", "/v1/types/0MLxx1", token: admin, json: #"{"name":"Deal won"}"#).status == 200)
        let subscribe = try await api.call(
            "POST", "\(Self.v)/connect/notifications/app-settings/organization/0MLxx1", token: admin,
            json: #"{"applicationId":"app1","enabled":true}"#)
        #expect(subscribe.status == 200, "\(subscribe.text)")
        let user = try await APIServerTests.userToken(api, key: send, user: "005A")
        let token = "beef" + String(repeating: "3", count: 60)
        #expect(
            try await api.call("PUT", "/v1/devices", token: user, json: #"{"platform":"ios","token":"\#(token)"}"#)
                .status == 200)

        let action = try await api.call(
            "POST", "\(Self.v)/actions/standard/customNotificationAction", token: send,
            json: #"""
                {"inputs":[{"customNotifTypeId":"0MLxx1","recipientIds":["005A"],"title":"Deal won",
                "body":"Acme, 1M","targetId":"006xx000001"}]}
                """#)
        #expect(action.status == 200, "\(action.text)")
        let results = try #require(try JSONSerialization.jsonObject(with: action.body) as? [[String: Any]])
        #expect(results.first?["isSuccess"] as? Bool == true)
        let push = try await api.call(
            "POST", "/services/data/v58.0/connect/notifications/push", token: send,
            json: #"{"appName":"app1","userIds":["005A"],"payload":"{'aps':{'alert':'Hello'}}"}"#)
        #expect(push.status == 202, "\(push.text)")

        let worker = try WorkerProcess(
            config: try w.writeConfig(worker: ["blockMs": "100"]), consumer: "connect-w", logDirectory: w.dir)
        defer { if worker.isRunning { worker.kill9() } }
        try await waitUntil("2 APNs sends accepted: \(worker.log.suffix(1500))", timeout: .seconds(60)) {
            w.mock.stats().acceptedAPNs >= 2
        }

        // The app's user lists the custom notification, reads it, and the status counts change.
        var listed: [[String: Any]] = []
        let until = Date().addingTimeInterval(30)
        while Date() < until, listed.isEmpty {
            let list = try await api.call("GET", "\(Self.v)/connect/notifications?size=10", token: user)
            listed = (list.json["notifications"] as? [[String: Any]] ?? []).filter { $0["type"] as? String == "0MLxx1" }
            if listed.isEmpty { try await Task.sleep(for: .milliseconds(50)) }
        }
        let first = try #require(listed.first)
        #expect(first["messageTitle"] as? String == "Deal won")
        #expect(first["read"] as? Bool == false)
        let before = try await api.call("GET", "\(Self.v)/connect/notifications/status", token: user).json
        let unread = try #require(before["unreadCount"] as? Int)
        #expect(unread >= 1)
        let id = try #require(first["id"] as? String)
        let marked = try await api.call(
            "PATCH", "\(Self.v)/connect/notifications/\(id)", token: user, json: #"{"read":"true"}"#)
        #expect(marked.status == 200, "\(marked.text)")
        #expect(marked.json["read"] as? Bool == true)
        #expect(marked.json["seen"] as? Bool == true)
        let after = try await api.call("GET", "\(Self.v)/connect/notifications/status", token: user).json
        #expect(after["unreadCount"] as? Int == unread - 1)
        await api.stop()
    }

    @Test func anotherOrgAndWrongCredentialsGetSalesforceErrors() async throws {
        let w = try MockWorld()
        defer { w.stop() }
        let api = try await RunningAPI(configFile: try APIServerTests.config(w))
        let sendB = try APIServerTests.key(w, org: "orgB", role: .send)
        let readA = try APIServerTests.key(w, org: "orgA", role: .read)
        let push = #"{"appName":"app1","userIds":["005A"],"payload":"{\"aps\":{\"alert\":\"x\"}}"}"#
        // Org B may not push through app1.
        let other = try await api.call("POST", "\(Self.v)/connect/notifications/push", token: sendB, json: push)
        #expect(other.status == 404)
        let errors = try #require(try JSONSerialization.jsonObject(with: other.body) as? [[String: Any]])
        #expect(errors.first?["errorCode"] as? String == "NOT_FOUND")
        // No credential, and a read key trying to push: Salesforce's error array.
        let none = try await api.call("POST", "\(Self.v)/connect/notifications/push", json: push)
        #expect(none.status == 401)
        #expect(none.text.contains("INVALID_SESSION_ID"))
        let read = try await api.call("POST", "\(Self.v)/connect/notifications/push", token: readA, json: push)
        #expect(read.status == 403)
        #expect(read.text.contains("INSUFFICIENT_ACCESS"))
        #expect(try APIServerTests.streamLength(w) == 0)
        await api.stop()
    }

    /// The world's config with three apps open to orgA (app1, app2, app3: each the mock's APNs and FCM), an `api`
    /// section and a worker that polls every 100 ms.
    static func threeAppConfig(_ w: MockWorld) throws -> String {
        let yaml = w.local.yaml
        let start = try #require(yaml.range(of: "  - name: app1\n"))
        let end = try #require(yaml.range(of: "redis:\n"))
        let block = String(yaml[start.upperBound..<end.lowerBound])
        let apps = ["app1", "app2", "app3"].map { "  - name: \($0)\n    orgs: [\"orgA\"]\n" + block }.joined()
        let path = try APIServerTests.config(w, extra: "worker:\n  blockMs: 100\n")
        var api = try String(contentsOfFile: path, encoding: .utf8)
        let appsStart = try #require(api.range(of: "apps:\n"))
        let redis = try #require(api.range(of: "redis:\n"))
        api.replaceSubrange(appsStart.upperBound..<redis.lowerBound, with: apps)
        try api.write(toFile: path, atomically: true, encoding: .utf8)
        return path
    }

    /// An org with two apps subscribed to a type and one not: a custom notification becomes a job for each of the
    /// two, the devices of both apps get it and the third app's do not, each user's inbox holds it once (under the
    /// same id whichever app lists it), and the action retried with its Idempotency-Key sends nothing more.
    @Test func aCustomNotificationReachesEverySubscribedAppAndEachInboxOnce() async throws {
        let w = try MockWorld()
        defer { w.stop() }
        let config = try Self.threeAppConfig(w)
        let api = try await RunningAPI(configFile: config)
        let admin = try APIServerTests.key(w, org: "orgA", role: .admin)
        let send = try APIServerTests.key(w, org: "orgA", role: .send)
        #expect(
            try await api.call("PUT", "/v1/types/0MLdeal", token: admin, json: #"{"name":"Deal won"}"#).status == 200)
        // app1 and app2 subscribe to the type; app3 has no setting for it, so it is not subscribed.
        for app in ["app1", "app2"] {
            let subscribe = try await api.call(
                "POST", "\(Self.v)/connect/notifications/app-settings/organization/0MLdeal", token: admin,
                json: #"{"applicationId":"\#(app)","enabled":true}"#)
            #expect(subscribe.status == 200, "\(subscribe.text)")
        }
        // Two users, each with an iOS device in every app.
        var tokens: [String: String] = [:] // "user app" → user token
        for (u, user) in ["005A", "005B"].enumerated() {
            for (a, app) in ["app1", "app2", "app3"].enumerated() {
                let token = try await APIServerTests.userToken(api, key: send, user: user, app: app)
                tokens["\(user) \(app)"] = token
                let device = String(format: "beef%02x%02x", u, a) + String(repeating: "5", count: 56)
                let put = try await api.call(
                    "PUT", "/v1/devices", token: token, json: #"{"platform":"ios","token":"\#(device)"}"#)
                #expect(put.status == 200, "\(put.text)")
            }
        }

        let body = #"""
            {"inputs":[{"customNotifTypeId":"0MLdeal","recipientIds":["005A","005B"],"title":"Deal won",
            "body":"Acme, 1M","targetId":"006xx000001"}]}
            """#
        let path = "\(Self.v)/actions/standard/customNotificationAction"
        let action = try await api.call("POST", path, token: send, json: body, headers: ["Idempotency-Key": "act-1"])
        #expect(action.status == 200, "\(action.text)")
        let retried = try await api.call("POST", path, token: send, json: body, headers: ["Idempotency-Key": "act-1"])
        #expect(retried.status == 200 && retried.body == action.body)
        #expect(try APIServerTests.streamLength(w) == 2)

        let worker = try WorkerProcess(config: config, consumer: "apps-w", logDirectory: w.dir)
        defer { if worker.isRunning { worker.kill9() } }
        for job in ["act-1:0:app1", "act-1:0:app2"] {
            try await waitUntil("\(job) done: \(worker.log.suffix(1500))", timeout: .seconds(60)) {
                try await api.call("GET", "/v1/jobs/\(job)", token: send).json["state"] as? String == "done"
            }
            let report = try await api.call("GET", "/v1/jobs/\(job)", token: send).json["report"] as? [String: Any]
            #expect(report?["accepted"] as? Int == 2 && report?["inAppStored"] as? Int == 2, "\(job)")
        }
        #expect(try await api.call("GET", "/v1/jobs/act-1:0:app3", token: send).status == 404)
        // Two users × two subscribed apps; the third app's devices got nothing.
        #expect(w.mock.stats().acceptedAPNs == 4)

        // Each user's inbox holds the notification once, under one id, through either subscribed app.
        for user in ["005A", "005B"] {
            for app in ["app1", "app2"] {
                let token = try #require(tokens["\(user) \(app)"])
                let list = try await api.call("GET", "\(Self.v)/connect/notifications?size=50", token: token)
                let items = list.json["notifications"] as? [[String: Any]] ?? []
                #expect(items.compactMap { $0["id"] as? String } == ["act-1:0"], "\(user) \(app): \(list.text)")
                let status = try await api.call("GET", "\(Self.v)/connect/notifications/status", token: token)
                #expect(status.json["unreadCount"] as? Int == 1, "\(user) \(app)")
            }
        }
        await api.stop()
    }
}
