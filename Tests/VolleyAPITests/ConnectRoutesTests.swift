import Foundation
import HTTPTypes
import Hummingbird
import Logging
import Testing
import VolleyConnect
import VolleyCore
import VolleyTestDoubles
import VolleyTestTags

@testable import VolleyAPI

/// Job ids job-1, job-2, … in call order.
private final class IDs: @unchecked Sendable {
    private let lock = NSLock()
    private var n = 0
    func next() -> JobID {
        lock.withLock {
            n += 1
            return JobID("job-\(n)")
        }
    }
}

/// The Salesforce-compatible routes of the API's router on in-memory stores: jobs land on an in-memory job stream,
/// the inbox and settings live in memory. A `ConnectCaller` stands for the credential that decides it: an admin key
/// of its org, or a user token of its org, user and app.
private final class Harness: @unchecked Sendable {
    let clock = ManualClock(Date(timeIntervalSince1970: 1_800_000_000))
    let types = InMemoryNotificationTypes()
    let inbox = InMemoryInbox()
    let stream = InMemoryJobs()
    let credentials: InMemoryCredentialStore
    let service: ConnectService
    let server: APIServer
    private let lock = NSLock()
    private var adminKeys: [OrgID: String] = [:]

    init(apps: [OrgID: [AppName]] = ["o1": ["sales", "field"], "o2": ["other"]]) throws {
        let ids = IDs()
        credentials = InMemoryCredentialStore(clock: clock)
        service = ConnectService(
            types: types, inbox: inbox, jobs: stream,
            options: ConnectService.Options(apps: { apps[$0] }, newJobID: { ids.next() }, clock: clock),
            logger: Logger(label: "test"))
        var configuration = APIConfiguration()
        configuration.rateLimit = .init(requestsPerSecond: 0, burst: 1)
        configuration.userTokenKeys = [UserTokenKey(id: "k1", secret: Array(repeating: 1, count: 32))]
        server = APIServer(
            configuration: configuration,
            stores: APIServer.Stores(
                credentials: credentials, jobs: stream, jobStatus: stream, devices: InMemoryDevices(), types: types,
                quota: InMemoryQuota(clock: clock), templates: InMemoryTemplateStore(),
                attributes: InMemoryUserAttributeStore()),
            openAPIDocument: "", logger: Logger(label: "test"), connect: service)
    }

    func stop() {}

    /// The bearer credential `caller` stands for.
    func credential(_ caller: ConnectCaller) throws -> String {
        if let user = caller.user {
            return try server.signer.sign(
                UserTokenClaims(org: caller.org, user: user, app: AppName(caller.app ?? ""), exp: 4_000_000_000))
        }
        return try lock.withLock {
            if let key = adminKeys[caller.org] { return key }
            let key = try APIKeyStore(registry: credentials).create(org: caller.org, role: .admin, name: nil).key
            adminKeys[caller.org] = key
            return key
        }
    }

    /// `method` on `/services/data/v60.0` + `path` through the router; a request that cannot be made is recorded as
    /// an issue and answers status 0.
    func call(
        _ method: String, _ path: String, query: [String: String] = [:], body: String = "",
        caller: ConnectCaller, headers: [String: String] = [:]
    ) async -> ConnectResponse {
        do {
            let token = try credential(caller)
            let safe = CharacterSet.alphanumerics.union(CharacterSet(charactersIn: "-._~:"))
            func encode(_ s: String) -> String { s.addingPercentEncoding(withAllowedCharacters: safe) ?? s }
            let items = query.sorted { $0.key < $1.key }.map { "\(encode($0.key))=\(encode($0.value))" }
            let uri =
                "/services/data/v60.0" + path.replacingOccurrences(of: " ", with: "%20")
                + (items.isEmpty ? "" : "?" + items.joined(separator: "&"))
            let requestMethod = try #require(HTTPRequest.Method(method.uppercased()))
            var extra: HTTPFields = [.authorization: "Bearer \(token)"]
            for (name, value) in headers { extra[try #require(HTTPField.Name(name))] = value }
            let fields = extra
            let answer = try await RouterClient(server.router()).execute(
                uri: uri, method: requestMethod, headers: fields, body: body.isEmpty ? nil : ByteBuffer(string: body))
            return ConnectResponse(status: Int(answer.status.code), body: Data(buffer: answer.body))
        } catch {
            Issue.record(error)
            return ConnectResponse(status: 0, body: Data())
        }
    }

    /// Jobs on the stream, in order.
    func jobs() throws -> [PushJob] { stream.jobs() }

    /// What the worker would store for a job of `type` to `users`.
    func deliver(_ id: String, type: String?, title: String = "Title", to users: [UserID], org: OrgID = "o1")
        throws
    {
        inbox.deliver(
            org: org,
            content: InboxContent(
                id: id, type: type, title: title, body: "Body of \(id)", target: "001X", targetPageRef: nil,
                createdAt: clock.now()), to: users)
    }
}

private func json(_ r: ConnectResponse) throws -> Any { try JSONSerialization.jsonObject(with: r.body) }
private func dict(_ r: ConnectResponse) throws -> [String: Any] { try #require(try json(r) as? [String: Any]) }
private func errorCode(_ r: ConnectResponse) throws -> String? {
    (try json(r) as? [[String: Any]])?.first?["errorCode"] as? String
}
private func ids(_ r: ConnectResponse) throws -> [String] {
    try #require(try dict(r)["notifications"] as? [[String: Any]]).compactMap { $0["id"] as? String }
}

private let action = "/actions/standard/customNotificationAction"
private let backend = ConnectCaller(org: "o1")
private let alice = ConnectCaller(org: "o1", user: "alice", app: "sales")

@Test(.tags(.unit)) func customNotificationActionWritesOneJobPerValidInput() async throws {
    let h = try Harness()
    defer { h.stop() }
    try await h.types.setType(org: "o1", NotificationType(id: "0ML1", name: "Deal won"))
    try await h.types.setType(org: "o2", NotificationType(id: "0ML2", name: "Other org's"))
    for app: AppName in ["sales", "field"] {
        try await h.types.setSetting(org: "o1", app: app, typeID: "0ML1", enabled: true, pushEnabled: nil)
    }
    let r = await h.call(
        "POST", action,
        body: """
            {"inputs": [
              {"customNotifTypeId": "0ML1", "recipientIds": ["alice", "00Gteam", "001acct"], "title": "Won",
               "body": "Acme signed", "targetId": "006X"},
              {"customNotifTypeId": "0ML2", "recipientIds": ["alice"], "title": "t", "body": "b", "targetId": "x"},
              {"customNotifTypeId": "0ML1", "recipientIds": ["alice"], "body": "b", "targetId": "x"}
            ]}
            """, caller: backend)
    #expect(r.status == 200)
    let results = try #require(try json(r) as? [[String: Any]])
    #expect(results.map { $0["isSuccess"] as? Bool } == [true, false, false])
    #expect(results.allSatisfy { $0["actionName"] as? String == "customNotificationAction" })
    let typeError = try #require((results[1]["errors"] as? [[String: Any]])?.first)
    #expect(typeError["fields"] as? [String] == ["customNotifTypeId"])
    let jobs = try h.jobs()
    // An org-wide caller's action goes to every app of the org subscribed to the type, under one notification id.
    #expect(jobs.map(\.app) == ["sales", "field"])
    #expect(jobs.map(\.id) == ["job-1:sales", "job-1:field"])
    #expect(jobs.allSatisfy { $0.notificationId == "job-1" && $0.org == "o1" })
    let job = try #require(jobs.first)
    #expect(job.recipients == ["alice", "00Gteam", "001acct"])
    #expect(job.notification.type == "0ML1" && job.notification.title == "Won" && job.notification.targetId == "006X")

    // The describe lists the inputs.
    let d = try dict(await h.call("GET", action, caller: backend))
    let names = try #require(d["inputs"] as? [[String: Any]]).compactMap { $0["name"] as? String }
    #expect(names.contains("customNotifTypeId") && names.contains("targetPageRef"))
    #expect(await h.call("DELETE", action, caller: backend).status == 405)
    // Nothing is written for a malformed body.
    #expect(await h.call("POST", action, body: "{\"inputs\": 3}", caller: backend).status == 400)
    #expect(try h.jobs().count == 2)
}

@Test(.tags(.unit)) func connectPushAnswers202WithTheJobAndStaysInItsOrg() async throws {
    let h = try Harness()
    defer { h.stop() }
    let path = "/connect/notifications/push"
    let r = await h.call(
        "POST", path,
        body: #"{"appName": "field", "userIds": ["alice"], "payload": "{ 'aps':{ 'alert': 'test' } }"}"#,
        caller: backend)
    #expect(r.status == 202)
    #expect(try dict(r)["id"] as? String == "job-1")
    let job = try #require(try h.jobs().first)
    #expect(job.app == "field" && job.org == "o1" && job.apns?["aps"]?["alert"] == .string("test"))
    // Org o1 cannot push through o2's app: it does not exist for o1.
    let foreign = await h.call(
        "POST", path, body: #"{"appName": "other", "userIds": ["alice"], "payload": "{'a': 1}"}"#, caller: backend)
    #expect(try foreign.status == 404 && (try errorCode(foreign)) == "NOT_FOUND")
    let bad = await h.call("POST", path, body: #"{"appName": "field", "userIds": ["alice"]}"#, caller: backend)
    #expect(bad.status == 400)
    #expect(try h.jobs().count == 1)
}

@Test(.tags(.unit)) func notificationsListReadMarkAndCountForTheContextUser() async throws {
    let h = try Harness()
    defer { h.stop() }
    try await h.types.setType(org: "o1", NotificationType(id: "T", name: "Shown"))
    try await h.types.setType(org: "o1", NotificationType(id: "H", name: "Hidden for sales"))
    try await h.types.setSetting(org: "o1", app: "sales", typeID: "T", enabled: true, pushEnabled: nil)
    try await h.types.setSetting(org: "o1", app: "sales", typeID: "H", enabled: false, pushEnabled: nil)
    for i in 1...4 {
        h.clock.advance(by: 10)
        try h.deliver("n\(i)", type: i == 3 ? "H" : "T", title: String(repeating: "x", count: 130), to: ["alice"])
    }
    h.clock.advance(by: 10)
    try h.deliver("plain", type: nil, to: ["alice"])
    try h.deliver("o2-n", type: "T", to: ["alice"], org: "o2")

    // Newest first, hidden type left out, trimmed by default.
    var r = await h.call("GET", "/connect/notifications", caller: alice)
    #expect(r.status == 200)
    #expect(try ids(r) == ["plain", "n4", "n2", "n1"])
    let first = try #require(try dict(r)["notifications"] as? [[String: Any]])[1]
    #expect((first["messageTitle"] as? String)?.count == 120)
    #expect(first["recipientId"] as? String == "alice" && first["organizationId"] as? String == "o1")
    r = await h.call("GET", "/connect/notifications", query: ["size": "2", "trimMessages": "false"], caller: alice)
    #expect(try ids(r) == ["plain", "n4"])
    // Paging with before skips past the hidden one.
    r = await h.call(
        "GET", "/connect/notifications", query: ["size": "1", "before": "2027-01-15T08:00:40.000Z"], caller: alice)
    #expect(try ids(r) == ["n2"])
    r = await h.call("GET", "/connect/notifications", query: ["after": "2027-01-15T08:00:30Z"], caller: alice)
    #expect(try ids(r) == ["plain", "n4"])
    #expect(await h.call("GET", "/connect/notifications", query: ["size": "0"], caller: alice).status == 400)

    // One notification; the other org's id and the hidden type's id answer 404.
    r = await h.call("GET", "/connect/notifications/n4", query: ["trimMessages": "false"], caller: alice)
    #expect(try r.status == 200 && (try dict(r)["messageTitle"] as? String)?.count == 130)
    #expect(await h.call("GET", "/connect/notifications/o2-n", caller: alice).status == 404)
    #expect(await h.call("GET", "/connect/notifications/n3", caller: alice).status == 404)
    #expect(
        await h.call("GET", "/connect/notifications/n4", caller: ConnectCaller(org: "o2", user: "alice", app: "other"))
            .status == 404)

    // The hidden type is not counted either.
    var status = try dict(await h.call("GET", "/connect/notifications/status", caller: alice))
    #expect(status["unreadCount"] as? Int == 4 && status["unseenCount"] as? Int == 4)
    #expect(status["lastActivity"] as? String == "2027-01-15T08:00:50.000Z")

    // Mark one read (booleans as strings): it is also seen.
    r = await h.call("PATCH", "/connect/notifications/n4", body: #"{"read": "true"}"#, caller: alice)
    #expect(r.status == 200)
    #expect(try dict(r)["read"] as? Bool == true && (try dict(r)["seen"] as? Bool) == true)
    #expect(await h.call("PATCH", "/connect/notifications/o2-n", body: #"{"read": true}"#, caller: alice).status == 404)
    #expect(
        await h.call("PATCH", "/connect/notifications/n4", body: #"{"read": true, "seen": false}"#, caller: alice)
            .status
            == 400)
    // Mark by ids, then everything before a date as seen.
    r = await h.call(
        "PATCH", "/connect/notifications", body: #"{"notificationIds": ["n1", "n2", "o2-n"], "read": true}"#,
        caller: alice)
    #expect(try r.status == 200 && (try ids(r)) == ["n2", "n1"])
    status = try dict(await h.call("GET", "/connect/notifications/status", caller: alice))
    #expect(status["unreadCount"] as? Int == 1 && status["unseenCount"] as? Int == 1)
    r = await h.call("PATCH", "/connect/notifications", body: #"{"seen": "true"}"#, caller: alice)
    #expect(r.status == 200)
    status = try dict(await h.call("GET", "/connect/notifications/status", caller: alice))
    #expect(status["unreadCount"] as? Int == 1 && status["unseenCount"] as? Int == 0)
    #expect(status["oldestUnread"] as? String == "2027-01-15T08:00:50.000Z")
    // With the app subscribed to the type again, its notification counts (unread, but seen by the PATCH before
    // now). A reset setting is no subscription: the type is hidden again.
    try await h.types.setSetting(org: "o1", app: "sales", typeID: "H", enabled: true, pushEnabled: nil)
    status = try dict(await h.call("GET", "/connect/notifications/status", caller: alice))
    #expect(status["unreadCount"] as? Int == 2 && status["unseenCount"] as? Int == 0)
    #expect(status["oldestUnread"] as? String == "2027-01-15T08:00:30.000Z")
    try await h.types.resetSetting(org: "o1", app: "sales", typeID: "H")
    status = try dict(await h.call("GET", "/connect/notifications/status", caller: alice))
    #expect(status["unreadCount"] as? Int == 1)
    // The other org's inbox is untouched.
    let other = ConnectCaller(org: "o2", user: "alice", app: "other")
    #expect(try dict(await h.call("GET", "/connect/notifications/status", caller: other))["unseenCount"] as? Int == 1)
    // Without a context user, the resources refuse.
    #expect(await h.call("GET", "/connect/notifications", caller: backend).status == 403)
}

@Test(.tags(.unit)) func appAndOrgSettingsDefaultSetAndReset() async throws {
    let h = try Harness()
    defer { h.stop() }
    try await h.types.setType(org: "o1", NotificationType(id: "T", name: "Deal won", mobile: true, desktop: false))
    try await h.types.setType(org: "o2", NotificationType(id: "X", name: "Other org's"))
    let one = "/connect/notifications/app-settings/organization/T"

    var r = await h.call("GET", "/connect/notifications/app-settings/organization", caller: alice)
    var list = try #require(try dict(r)["notificationAppSettings"] as? [[String: Any]])
    #expect(list.count == 1)
    // No app is subscribed to a type until its setting says so: enabled defaults to false.
    #expect(list[0]["enabled"] as? Bool == false && list[0]["pushEnabled"] as? Bool == true)
    #expect(list[0]["applicationId"] as? String == "sales" && list[0]["notificationLabel"] as? String == "Deal won")
    #expect(list[0]["applicationNamespace"] is NSNull)

    // Changing settings takes an admin key, which names the app; the app's user may not.
    #expect(await h.call("POST", one, body: #"{"enabled": "true"}"#, caller: alice).status == 403)
    r = await h.call("POST", one, body: #"{"enabled": "true", "applicationId": "sales"}"#, caller: backend)
    #expect(try r.status == 200 && (try dict(r)["enabled"] as? Bool) == true)
    #expect(try h.types.policy(org: "o1", app: "sales", typeID: "T").sendsPush)
    r = await h.call("POST", one, body: #"{"enabled": "false", "applicationId": "sales"}"#, caller: backend)
    #expect(try r.status == 200 && (try dict(r)["enabled"] as? Bool) == false)
    #expect(try !(try h.types.policy(org: "o1", app: "sales", typeID: "T").storesInbox))
    // Another app's setting is separate; an app of another org is 404; without an app, 400.
    r = await h.call("GET", one, query: ["applicationId": "field"], caller: alice)
    list = try #require(try dict(r)["notificationAppSettings"] as? [[String: Any]])
    #expect(list.first?["enabled"] as? Bool == false)
    #expect(await h.call("GET", one, query: ["applicationId": "other"], caller: alice).status == 404)
    #expect(await h.call("GET", one, caller: backend).status == 400)
    #expect(await h.call("GET", "/connect/notifications/app-settings/organization/X", caller: alice).status == 404)
    #expect(await h.call("POST", one, body: #"{"enabeld": false}"#, caller: backend).status == 400)

    r = await h.call("DELETE", one, query: ["applicationId": "sales"], caller: backend)
    #expect(r.status == 204 && r.body.isEmpty)
    #expect(try !(try h.types.policy(org: "o1", app: "sales", typeID: "T").storesInbox))
    r = await h.call("POST", one, body: #"{"enabled": true, "applicationId": "sales"}"#, caller: backend)
    #expect(try h.types.policy(org: "o1", app: "sales", typeID: "T").sendsPush)

    // Org settings: defaults from the type; mobile off keeps the tray but stops the push.
    let setting = "/connect/notifications/settings/organization/T"
    var s = try dict(await h.call("GET", setting, caller: backend))
    #expect(s["mobileEnabled"] as? Bool == true && s["desktopEnabled"] as? Bool == false)
    #expect(s["emailEnabled"] as? Bool == false && s["slackEnabled"] as? Bool == false)
    r = await h.call("POST", setting, body: #"{"mobileEnabled": "false", "emailEnabled": true}"#, caller: backend)
    s = try dict(r)
    #expect(r.status == 200 && s["mobileEnabled"] as? Bool == false && s["emailEnabled"] as? Bool == true)
    let policy = try h.types.policy(org: "o1", app: "sales", typeID: "T")
    #expect(policy.storesInbox && !policy.sendsPush)
    let push = try dict(await h.call("GET", one, caller: alice))["notificationAppSettings"] as? [[String: Any]]
    #expect(push?.first?["pushEnabled"] as? Bool == false)
    // A channel the type lacks can't be turned on; the type may be named by its API name (path percent-decoded).
    #expect(
        await h.call("POST", "/connect/notifications/settings/organization/Deal%20won", body: "{}", caller: backend)
            .status == 400)
    #expect(await h.call("GET", "/connect/notifications/settings/organization/Nope", caller: backend).status == 404)
    r = await h.call(
        "POST", "/connect/notifications/settings/organization/Deal won", body: #"{"desktopEnabled": true}"#,
        caller: backend)
    let message = (try json(r) as? [[String: String]])?.first?["message"]
    #expect(r.status == 400 && message?.hasPrefix("desktopEnabled:") == true)
    let all = try dict(await h.call("GET", "/connect/notifications/settings/organization", caller: backend))
    #expect((all["notificationSettings"] as? [[String: Any]])?.count == 1)
    #expect(await h.call("DELETE", setting, caller: backend).status == 204)
    #expect(try h.types.policy(org: "o1", app: "sales", typeID: "T").sendsPush)
    // Another org's type is 404.
    #expect(
        await h.call("GET", "/connect/notifications/settings/organization/T", caller: ConnectCaller(org: "o2")).status
            == 404)
}

@Test(.tags(.unit)) func unknownResourcesAndMethodsAnswerInSalesforceShape() async throws {
    let h = try Harness()
    defer { h.stop() }
    let r = await h.call("GET", "/connect/nothing", caller: alice)
    #expect(try r.status == 404 && (try errorCode(r)) == "NOT_FOUND")
    let m = await h.call("PUT", "/connect/notifications", caller: alice)
    #expect(try m.status == 405 && (try errorCode(m)) == "METHOD_NOT_ALLOWED")
}

@Test(.tags(.unit)) func concurrentRequestsShareTheStoresSafely() async throws {
    let h = try Harness()
    defer { h.stop() }
    let body = #"{"appName": "sales", "userIds": ["alice"], "payload": "{'aps': {'alert': 'hi'}}"}"#
    let statuses = await withTaskGroup(of: Int.self) { group in
        for _ in 0..<40 {
            group.addTask {
                await h.call("POST", "/connect/notifications/push", body: body, caller: backend).status
            }
        }
        var out: [Int] = []
        for await s in group { out.append(s) }
        return out
    }
    #expect(statuses == Array(repeating: 202, count: 40))
    let jobs = try h.jobs()
    #expect(jobs.count == 40 && Set(jobs.compactMap(\.id)).count == 40)
}

@Test(.tags(.unit)) func headAndPercentEncodedSegmentsRouteLikeGet() async throws {
    let h = try Harness()
    defer { h.stop() }
    try await h.types.setType(org: "o1", NotificationType(id: "A B", name: "Spaced"))
    let head = await h.call("HEAD", "/connect/notifications/settings/organization/A%20B", caller: backend)
    #expect(head.status == 200)
    let r = await h.call("GET", "/connect/notifications/settings/organization/A%20B", caller: backend)
    #expect(try dict(r)["notificationTypeOrId"] as? String == "A B")
    #expect(await h.call("HEAD", "/connect/notifications/push", caller: backend).status == 405)
}

/// The resource table the router is built from and the API's document is checked against: each listed method
/// reaches its resource (never the unknown-resource 404 or a 405), and every other method on it answers 405.
@Test(.tags(.unit)) func resourceTableMatchesTheRouting() async throws {
    let h = try Harness()
    defer { h.stop() }
    let unknown = ConnectError.notFound().response
    for resource in APIServer.connectResources {
        let path = resource.path.replacingOccurrences(
            of: #":[A-Za-z]+"#, with: "missing-id", options: String.CompareOptions.regularExpression)
        let methods = APIServer.methods(of: resource).map { $0.rawValue.uppercased() }
        for method in ["GET", "HEAD", "POST", "PUT", "PATCH", "DELETE"] {
            let r = await h.call(method, path, caller: backend)
            if methods.contains(method) {
                #expect(r.status != 405 && r != unknown, "\(method) \(resource.path): \(r.status)")
            } else {
                #expect(r.status == 405, "\(method) \(resource.path) should not be routed: \(r.status)")
            }
        }
    }
    #expect(await h.call("GET", "/connect/notifications/missing-id/more", caller: alice) == unknown)
}

@Test(.tags(.unit)) func aCustomNotificationReachesOnlyTheAppsSubscribedToItsType() async throws {
    let h = try Harness(apps: ["o1": ["sales", "field", "ops", "idle"]])
    defer { h.stop() }
    try await h.types.setType(org: "o1", NotificationType(id: "T", name: "Deal won"))
    try await h.types.setType(org: "o1", NotificationType(id: "Q", name: "Nobody's"))
    try await h.types.setSetting(org: "o1", app: "sales", typeID: "T", enabled: true, pushEnabled: nil)
    try await h.types.setSetting(org: "o1", app: "field", typeID: "T", enabled: false, pushEnabled: nil)
    // A subscribed app that turned push off: the worker stores without pushing.
    try await h.types.setSetting(org: "o1", app: "ops", typeID: "T", enabled: true, pushEnabled: false)
    // "idle" has no setting for T: not subscribed, so no job goes through it.
    try await h.types.setSetting(org: "o1", app: "idle", typeID: "Q", enabled: nil, pushEnabled: true)
    for app in ["sales", "field", "ops"] {
        try await h.types.setSetting(org: "o1", app: AppName(app), typeID: "Q", enabled: false, pushEnabled: nil)
    }
    let r = await h.call(
        "POST", action,
        body: """
            {"inputs": [
              {"customNotifTypeId": "T", "recipientIds": ["alice"], "title": "Won", "body": "b", "targetId": "x"},
              {"customNotifTypeId": "Q", "recipientIds": ["alice"], "title": "t", "body": "b", "targetId": "x"}
            ]}
            """, caller: backend)
    let results = try #require(try json(r) as? [[String: Any]])
    #expect(results.map { $0["isSuccess"] as? Bool } == [true, false])
    let error = try #require((results[1]["errors"] as? [[String: Any]])?.first)
    #expect(error["fields"] as? [String] == ["customNotifTypeId"])
    #expect((error["message"] as? String)?.contains("subscribed") == true)
    let jobs = try h.jobs()
    #expect(jobs.map(\.app) == ["sales", "ops"])
    #expect(Set(jobs.compactMap(\.notificationId)) == ["job-1"])
    #expect(Set(jobs.compactMap(\.id)).count == 2)
}

@Test(.tags(.unit)) func aRetriedActionOrPushWithItsIdempotencyKeyIsNotSentTwice() async throws {
    let h = try Harness()
    defer { h.stop() }
    try await h.types.setType(org: "o1", NotificationType(id: "T", name: "Deal won"))
    for app: AppName in ["sales", "field"] {
        try await h.types.setSetting(org: "o1", app: app, typeID: "T", enabled: true, pushEnabled: nil)
    }
    let body = """
        {"inputs": [{"customNotifTypeId": "T", "recipientIds": ["alice"], "title": "Won", "body": "b",
                     "targetId": "x"}]}
        """
    let first = await h.call("POST", action, body: body, caller: backend, headers: ["Idempotency-Key": "req-1"])
    #expect(first.status == 200)
    #expect(try h.jobs().map(\.id) == ["req-1:0:sales", "req-1:0:field"])
    #expect(try h.jobs().allSatisfy { $0.notificationId == "req-1:0" })
    let again = await h.call("POST", action, body: body, caller: backend, headers: ["Idempotency-Key": "req-1"])
    #expect(again == first)
    #expect(try h.jobs().count == 2)
    // Another request under the key: refused, nothing more queued.
    let other = await h.call(
        "POST", action, body: body.replacingOccurrences(of: "Won", with: "Lost"), caller: backend,
        headers: ["Idempotency-Key": "req-1"])
    #expect(try other.status == 422 && (try errorCode(other)) == "DUPLICATE_VALUE")
    #expect(try h.jobs().count == 2)
    let malformed = await h.call("POST", action, body: body, caller: backend, headers: ["Idempotency-Key": "a b"])
    #expect(try malformed.status == 400 && (try errorCode(malformed)) == "INVALID_API_INPUT")

    // The Connect push: the key is the job id.
    let path = "/connect/notifications/push"
    let push = #"{"appName": "field", "userIds": ["alice"], "payload": "{ 'aps':{ 'alert': 'test' } }"}"#
    let p1 = await h.call("POST", path, body: push, caller: backend, headers: ["Idempotency-Key": "push-1"])
    #expect(try p1.status == 202 && (try dict(p1)["id"] as? String) == "push-1")
    let p2 = await h.call("POST", path, body: push, caller: backend, headers: ["Idempotency-Key": "push-1"])
    #expect(p2 == p1)
    #expect(try h.jobs().count == 3)
}

@Test(.tags(.unit)) func aUserTokenPushesThroughItsOwnAppOnly() async throws {
    let h = try Harness()
    defer { h.stop() }
    let path = "/connect/notifications/push"
    let body = { (app: String) in
        #"{"appName": "\#(app)", "userIds": ["bob"], "payload": "{ 'aps':{ 'alert': 'ping' } }"}"#
    }
    let own = await h.call("POST", path, body: body("sales"), caller: alice)
    #expect(own.status == 202)
    let job = try #require(try h.jobs().first)
    #expect(job.app == "sales" && job.org == "o1" && job.recipients == ["bob"])
    // Apex-style: push-only.
    #expect(!job.storesInbox)
    let another = await h.call("POST", path, body: body("field"), caller: alice)
    #expect(try another.status == 403 && (try errorCode(another)) == "INSUFFICIENT_ACCESS")
    // The action still takes an API key.
    #expect(await h.call("POST", action, body: #"{"inputs": []}"#, caller: alice).status == 403)
    #expect(try h.jobs().count == 1)
}

@Test(.tags(.unit)) func fullContentIsAnAppSettingThroughTheSettingsResources() async throws {
    let h = try Harness()
    defer { h.stop() }
    try await h.types.setType(org: "o1", NotificationType(id: "T", name: "Deal won"))
    try await h.types.setType(org: "o1", NotificationType(id: "U", name: "Case"))
    try await h.types.setSetting(org: "o1", app: "sales", typeID: "T", enabled: true, pushEnabled: nil)
    let all = "/connect/notifications/app-settings/organization"
    func settings(_ app: String) async throws -> [[String: Any]] {
        let r = await h.call("GET", all, query: ["applicationId": app], caller: backend)
        return try #require(try dict(r)["notificationAppSettings"] as? [[String: Any]])
    }
    #expect(try await settings("sales").allSatisfy { $0["fullContentPushNotifications"] as? Bool == false })
    #expect(try !h.types.fullContent(org: "o1", app: "sales"))
    let r = await h.call(
        "POST", "\(all)/T", body: #"{"applicationId": "sales", "fullContentPushNotifications": true}"#,
        caller: backend)
    #expect(try r.status == 200 && (try dict(r)["fullContentPushNotifications"] as? Bool) == true)
    // The app's, not the type's: every type of the app shows it; another app keeps the default.
    #expect(try await settings("sales").allSatisfy { $0["fullContentPushNotifications"] as? Bool == true })
    #expect(try await settings("field").allSatisfy { $0["fullContentPushNotifications"] as? Bool == false })
    #expect(try h.types.fullContent(org: "o1", app: "sales"))
    #expect(try !h.types.fullContent(org: "o1", app: "field"))
    // The type's own setting is untouched; a wrong type is a 400 naming the field.
    #expect(try h.types.policy(org: "o1", app: "sales", typeID: "T").sendsPush)
    let bad = await h.call(
        "POST", "\(all)/T", body: #"{"applicationId": "sales", "fullContentPushNotifications": 1}"#, caller: backend)
    let message = (try json(bad) as? [[String: String]])?.first?["message"]
    #expect(bad.status == 400 && message?.hasPrefix("fullContentPushNotifications") == true)
}
