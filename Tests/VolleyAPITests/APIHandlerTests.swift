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

/// The API's router on in-memory stores: every handler and the credential checks, without Redis or a socket.
struct InMemoryAPI {
    let clock = ManualClock(Date(timeIntervalSince1970: 1_800_000_000))
    let credentials: InMemoryCredentialStore
    let jobs = InMemoryJobs()
    let devices = InMemoryDevices()
    let types = InMemoryNotificationTypes()
    let inbox = InMemoryInbox()
    let quota: InMemoryQuota
    let outage = StoreOutageSwitch()
    let templates: InMemoryTemplateStore
    let frequencyCaps = InMemoryFrequencyCaps()
    let syncHints = InMemorySyncHintStore(maxRecordIds: 5)
    let timeZones = InMemoryOrgTimeZones()
    /// The users' attributes and the segments counted over them.
    let directory = InMemoryDirectory()
    let schedules = InMemoryScheduleStore()
    let server: APIServer

    /// `withOptionalStores` false: a process started without the frequency-cap, sync-hint, time-zone and schedule
    /// stores. `notificationCheck`: the providers' preparation the door runs (none: every notification passes).
    init(
        rate: APIConfiguration.RateLimit = .init(requestsPerSecond: 1000, burst: 1000), withOptionalStores: Bool = true,
        onManualClock: Bool = false, notificationCheck: NotificationCheck = .none, console: Bool = false,
        testPush: APIServer.TestPushHandler? = nil
    ) {
        credentials = InMemoryCredentialStore(clock: clock, outage: outage)
        templates = InMemoryTemplateStore(outage: outage)
        quota = InMemoryQuota(limits: QuotaLimits(ios: 2, android: 2), clock: clock)
        var configuration = APIConfiguration()
        configuration.rateLimit = rate
        configuration.userTokenKeys = [UserTokenKey(id: "k1", secret: Array(repeating: 1, count: 32))]
        configuration.apps = ["app1": AppOrgs(allowed: ["orgA"]), "app2": AppOrgs(allowed: nil)]
        configuration.frequencyCaps = [
            "orgB": (try? FrequencyWindow(parsing: "1d")).map { [FrequencyCapRule(window: $0, max: 5)] } ?? []
        ]
        configuration.orgTimeZones = ["orgB": "Asia/Kolkata"]
        configuration.console.enabled = console
        let connect = ConnectService(
            types: types, inbox: inbox, jobs: jobs, devices: devices,
            options: .init(apps: { $0 == "orgA" ? ["app1", "app2"] : ["app2"] }, clock: clock),
            logger: Logger(label: "test"))
        var stores = APIServer.Stores(
            credentials: credentials, jobs: jobs, jobStatus: jobs, devices: devices, types: types, quota: quota,
            templates: templates, attributes: directory,
            frequencyCaps: withOptionalStores ? frequencyCaps : nil)
        if withOptionalStores {
            stores.syncHints = syncHints
            stores.timeZones = timeZones
            stores.segments = InMemorySegmentStore(directory: directory)
            stores.schedules = schedules
            stores.jobHistory = jobs
        }
        server = APIServer(
            configuration: configuration, stores: stores, openAPIDocument: OpenAPIDocument.yaml,
            logger: Logger(label: "test"), testPush: testPush, connect: connect, notificationCheck: notificationCheck,
            clock: onManualClock ? clock : SystemClock())
    }

    func key(org: OrgID = "orgA", role: APIRole) throws -> String {
        try APIKeyStore(registry: credentials).create(org: org, role: role, name: nil).key
    }

    func userToken(org: OrgID = "orgA", user: UserID = "005A", app: AppName = "app1") throws -> String {
        try server.signer.sign(UserTokenClaims(org: org, user: user, app: app, exp: 1_900_000_000_000))
    }

    /// Runs `body` with a client of the router (no socket).
    func test(_ body: @escaping @Sendable (RouterClient) async throws -> Void) async throws {
        try await body(RouterClient(server.router()))
    }
}

/// A JSON object answer's members (the API tests read answers this way).
func object(_ text: String) throws -> [String: Any] {
    try #require(try JSONSerialization.jsonObject(with: Data(text.utf8)) as? [String: Any])
}

@Suite(.tags(.unit)) struct APIHandlerTests {
    static let job = #"{"app":"app1","recipients":["005A"],"notification":{"title":"Hi","body":"There"}}"#

    /// Without a delivery history (`deliveries.days` 0, the default) the route says none is kept; its query is
    /// still checked first by role.
    @Test func withoutAHistoryTheDeliveriesRouteAnswers404NamingTheKey() async throws {
        let api = InMemoryAPI()
        let read = try api.key(role: .read)
        let send = try api.key(role: .send)
        try await api.test { client async throws in
            let none = try await client.call(.get, "/v1/users/005A/deliveries", token: read)
            #expect(none.status == 404 && none.text.contains("deliveries.days"), "\(none.text)")
            #expect(try await client.call(.get, "/v1/users/005A/deliveries", token: send).status == 403)
        }
    }

    /// A user token's expiry is read on the API's clock: valid until its `exp`, refused from then on.
    @Test func aUserTokenExpiresOnTheAPIsClock() async throws {
        let api = InMemoryAPI(onManualClock: true)
        let expires = Int64(api.clock.now().timeIntervalSince1970) + 60
        let token = try api.server.signer.sign(UserTokenClaims(org: "orgA", user: "005A", app: "app1", exp: expires))
        let body = #"{"events":[{"messageId":"AAAAAAAAAAA.BBBBBBBBBBB","event":"opened"}]}"#
        try await api.test { client async throws in
            api.clock.advance(by: 59)
            #expect(try await client.call(.post, "/v1/interactions", token: token, json: body).status != 401)
            api.clock.advance(by: 1)
            #expect(try await client.call(.post, "/v1/interactions", token: token, json: body).status == 401)
        }
    }

    /// A job naming a custom notification `type` goes as Salesforce's Notification Builder payload: what it has no
    /// room for is a 400 at the door naming the field, nothing is queued; what it has room for is accepted.
    @Test func aCustomNotificationsFieldThePayloadCannotCarryIsA400NamingIt() async throws {
        let api = InMemoryAPI()
        let send = try api.key(role: .send)
        try await api.test { client async throws in
            let image = try await client.call(
                .post, "/v1/jobs", token: send,
                json: #"{"app":"app1","recipients":["005A"],"notification":{"title":"Won","type":"0MLdeal","#
                    + #""imageUrl":"https://example.com/i.png"}}"#)
            #expect(image.status == 400, "\(image.text)")
            #expect(try object(image.text)["field"] as? String == "notification.imageUrl")
            let clash = try await client.call(
                .post, "/v1/jobs", token: send,
                json: #"{"app":"app1","recipients":["005A"],"notification":{"title":"Won","type":"0MLdeal","#
                    + #""data":{"uid":"x"}}}"#)
            #expect(try object(clash.text)["field"] as? String == "notification.data.uid")
            let kept = try await client.call(
                .post, "/v1/jobs", token: send,
                json: #"{"app":"app1","recipients":["005A"],"notification":{"title":"Won","type":"0MLdeal","#
                    + #""data":{"order":"17"},"url":"app://d","threadId":"t","category":"C","#
                    + #""interruptionLevel":"active","localized":{"fr":{"title":"Gagné"}}}}"#)
            #expect(kept.status == 202, "\(kept.text)")
        }
    }

    @Test func aJobIsAcceptedOnceAndItsReplayAnswersTheSameEntry() async throws {
        let api = InMemoryAPI()
        let send = try api.key(role: .send)
        let read = try api.key(role: .read)
        try await api.test { client async throws in
            let first = try await client.call(
                .post, "/v1/jobs", token: send, json: Self.job, headers: [HTTPField.Name("Idempotency-Key")!: "j-1"])
            #expect(first.status == 202, "\(first.text)")
            let entry = try object(first.text)["entry"] as? String
            #expect(first.headers[.location] == "/v1/jobs/j-1")
            let again = try await client.call(
                .post, "/v1/jobs", token: send, json: Self.job, headers: [HTTPField.Name("Idempotency-Key")!: "j-1"])
            #expect(again.status == 202)
            #expect(try object(again.text)["entry"] as? String == entry)
            #expect(again.headers[HTTPField.Name("Idempotent-Replayed")!] == "true")
            let other = try await client.call(
                .post, "/v1/jobs", token: send, json: Self.job.replacingOccurrences(of: "Hi", with: "Ho"),
                headers: [HTTPField.Name("Idempotency-Key")!: "j-1"])
            #expect(other.status == 422)
            #expect(try object(other.text)["field"] as? String == "Idempotency-Key")
            // A read key may look, not send.
            #expect(try await client.call(.post, "/v1/jobs", token: read, json: Self.job).status == 403)
            let status = try await client.call(.get, "/v1/jobs/j-1", token: read)
            #expect(status.status == 200)
            #expect(try object(status.text)["state"] as? String == "queued")
            #expect(try await client.call(.get, "/v1/jobs/nope", token: read).status == 404)
            let events = try await client.call(.get, "/v1/jobs/j-1/events", token: read)
            #expect(try object(events.text)["events"] as? [Any] != nil)
        }
        let stream = api.jobs.jobs()
        #expect(stream.count == 1)
        #expect(stream.first?.id == "j-1" && stream.first?.org == "orgA")
    }

    @Test func credentialsAreCheckedAndChargedBeforeAnyHandler() async throws {
        let api = InMemoryAPI(rate: .init(requestsPerSecond: 1, burst: 2))
        let send = try api.key(role: .send)
        try await api.test { client async throws in
            #expect(try await client.call(.get, "/v1/types").status == 401)
            let forged = "vk_" + String(repeating: "0", count: 16) + "_" + String(repeating: "x", count: 43)
            #expect(try await client.call(.get, "/v1/types", token: forged).status == 401)
            #expect(try await client.call(.get, "/v1/types", token: send).status == 200)
            #expect(try await client.call(.get, "/v1/types", token: send).status == 200)
            let limited = try await client.call(.get, "/v1/types", token: send)
            #expect(limited.status == 429)
            #expect(limited.headers[.retryAfter] == "1")
            api.clock.advance(by: 1)
            #expect(try await client.call(.get, "/v1/types", token: send).status == 200)
        }
    }

    @Test func aStoreOutageAnswers503AndReadyzSaysWhy() async throws {
        let api = InMemoryAPI()
        let send = try api.key(role: .send)
        try await api.test { client async throws in
            #expect(try await client.call(.get, "/readyz").status == 200)
            api.outage.isOn = true
            let down = try await client.call(.post, "/v1/jobs", token: send, json: Self.job)
            #expect(down.status == 503)
            #expect(down.headers[.retryAfter] == "1")
            #expect(try await client.call(.get, "/readyz").status == 503)
        }
    }

    @Test func aResourceTheProcessWasStartedWithoutAnswers501NamingWhatItLacks() async throws {
        let api = InMemoryAPI(withOptionalStores: false)
        let admin = try api.key(role: .admin)
        try await api.test { client async throws in
            let lacking: [(HTTPRequest.Method, String, String?, String)] = [
                (.get, "/v1/schedules", nil, "a schedule store"),
                (.get, "/v1/sync-hints/005A?app=app1", nil, "a sync-hint store"),
                (.get, "/v1/frequency-caps", nil, "a frequency-cap store"),
                (.get, "/v1/time-zone", nil, "a time-zone store"),
                (.post, "/v1/test-push", #"{"app":"app1","platform":"ios","token":"ab12"}"#, "provider credentials"),
            ]
            for (method, path, body, what) in lacking {
                let r = try await client.call(method, path, token: admin, json: body)
                #expect(r.status == 501, "\(path): \(r.text)")
                #expect(r.text.contains("started without \(what)"), "\(path): \(r.text)")
                #expect(r.headers[.retryAfter] == nil)
            }
            // The stores it has still answer.
            #expect(try await client.call(.get, "/v1/types", token: admin).status == 200)
        }
    }

    @Test func devicesBelongToTheUserThatRegisteredThem() async throws {
        let api = InMemoryAPI()
        let admin = try api.key(role: .admin)
        let alice = try api.userToken(user: "alice")
        let bob = try api.userToken(user: "bob")
        try await api.test { client async throws in
            let put = try await client.call(
                .put, "/v1/devices", token: alice, json: #"{"platform":"android","token":"fcm-1","locale":"en-US"}"#)
            #expect(put.status == 200, "\(put.text)")
            #expect(try await client.call(.delete, "/v1/devices/android/fcm-1", token: bob).status == 404)
            let listed = try await client.call(.get, "/v1/users/alice/devices", token: admin)
            #expect(listed.status == 200)
            #expect((try object(listed.text)["devices"] as? [Any])?.count == 1)
            #expect(try await client.call(.delete, "/v1/devices/android/fcm-1", token: alice).status == 204)
            #expect(try await client.call(.get, "/v1/users/alice/devices", token: admin).status == 404)
        }
    }

    @Test func typesAreAnOrgsOwnAndOnlyAdminsChangeThem() async throws {
        let api = InMemoryAPI()
        let admin = try api.key(role: .admin)
        let send = try api.key(role: .send)
        let otherOrg = try api.key(org: "orgB", role: .admin)
        try await api.test { client async throws in
            #expect(try await client.call(.put, "/v1/types/deal", token: send, json: #"{"name":"Deal"}"#).status == 403)
            #expect(
                try await client.call(.put, "/v1/types/deal", token: admin, json: #"{"name":"Deal"}"#).status == 200)
            #expect(try await client.call(.get, "/v1/types/deal", token: send).status == 200)
            #expect(try await client.call(.get, "/v1/types/deal", token: otherOrg).status == 404)
            #expect(try await client.call(.delete, "/v1/types/deal", token: admin).status == 204)
            #expect(try await client.call(.delete, "/v1/types/deal", token: admin).status == 404)
        }
    }

    @Test func theSalesforceResourcesAnswerInSalesforcesShape() async throws {
        let api = InMemoryAPI()
        let send = try api.key(role: .send)
        let read = try api.key(role: .read)
        try await api.test { client async throws in
            let push = try await client.call(
                .post, "/services/data/v60.0/connect/notifications/push", token: send,
                json: #"{"appName":"app1","userIds":["005A"],"payload":"{'aps':{'alert':'Hello'}}"}"#)
            #expect(push.status == 202, "\(push.text)")
            let wrong = try await client.call(.delete, "/services/data/v60.0/connect/notifications/push", token: send)
            #expect(wrong.status == 405)
            let errors = try #require(try JSONSerialization.jsonObject(with: Data(wrong.text.utf8)) as? [[String: Any]])
            #expect(errors.first?["errorCode"] as? String == "METHOD_NOT_ALLOWED")
            let refused = try await client.call(
                .post, "/services/data/v60.0/connect/notifications/push", token: read, json: "{}")
            #expect(refused.status == 403)
            #expect(refused.text.contains("errorCode"))
            let unknown = try await client.call(.get, "/services/data/v60.0/nothing/here", token: read)
            #expect(unknown.status == 404 && unknown.text.contains("NOT_FOUND"))
            // The credential is checked before the path, and the version before the resource.
            #expect(try await client.call(.get, "/services/data/v60.0/nothing/here").status == 401)
            let version = try await client.call(.get, "/services/data/60/connect/notifications/status", token: read)
            #expect(version.status == 404 && version.text.contains("version segment"))
        }
        #expect(api.jobs.jobs().count == 1)
    }
}
