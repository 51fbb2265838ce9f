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
}
