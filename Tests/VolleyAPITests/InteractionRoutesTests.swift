import Foundation
import HTTPTypes
import Hummingbird
import Logging
import Testing
import VolleyCore
import VolleyTestDoubles
import VolleyTestTags

@testable import VolleyAPI

/// `POST /v1/interactions` on the in-memory stores: who may report, the body's checks naming the field, each
/// interaction counted once in the caller's org, and an open marking the in-app entry read.
@Suite(.tags(.unit)) struct InteractionRoutesTests {
    struct World {
        let clock = ManualClock(Date(timeIntervalSince1970: 1_800_000_000))
        let credentials: InMemoryCredentialStore
        let inbox = InMemoryInbox()
        let engagement: InMemoryEngagement
        let server: APIServer

        init(withStore: Bool = true) {
            credentials = InMemoryCredentialStore(clock: clock, outage: StoreOutageSwitch())
            engagement = InMemoryEngagement(inbox: inbox)
            var configuration = APIConfiguration()
            configuration.rateLimit = .init(requestsPerSecond: 1000, burst: 1000)
            configuration.userTokenKeys = [UserTokenKey(id: "k1", secret: Array(repeating: 1, count: 32))]
            configuration.apps = ["app1": AppOrgs(allowed: ["orgA"]), "app2": AppOrgs(allowed: nil)]
            let jobs = InMemoryJobs()
            var stores = APIServer.Stores(
                credentials: credentials, jobs: jobs, jobStatus: jobs, devices: InMemoryDevices(),
                types: InMemoryNotificationTypes(), quota: InMemoryQuota(limits: QuotaLimits(ios: 2, android: 2)),
                templates: InMemoryTemplateStore(), attributes: InMemoryUserAttributeStore())
            if withStore { stores.interactions = engagement }
            server = APIServer(
                configuration: configuration, stores: stores, openAPIDocument: OpenAPIDocument.yaml,
                logger: Logger(label: "test"), clock: clock)
        }

        func key(org: OrgID = "orgA", role: APIRole) throws -> String {
            try APIKeyStore(registry: credentials).create(org: org, role: role, name: nil).key
        }

        func userToken(org: OrgID = "orgA", user: UserID = "005A", app: AppName = "app1") throws -> String {
            try server.signer.sign(UserTokenClaims(org: org, user: user, app: app, exp: 1_900_000_000_000))
        }

        func test(_ body: @escaping @Sendable (RouterClient) async throws -> Void) async throws {
            try await body(RouterClient(server.router()))
        }
    }

    static let campaign = MessageTracking(org: "orgA", job: "spring-sale")

    static func mid(_ token: String, _ tracking: MessageTracking = campaign) -> String {
        tracking.messageID(for: DeviceToken(token))
    }

    static func body(_ events: [String]) -> String { #"{"events":["# + events.joined(separator: ",") + "]}" }

    static func event(_ mid: String, _ event: String, extra: String = "") -> String {
        #"{"messageId":""# + mid + #"","event":""# + event + #"""# + extra + "}"
    }

    @Test func eachInteractionCountsOnceInTheCallersOrg() async throws {
        let w = World()
        try w.engagement.register(
            org: "orgA", campaign: Self.campaign.campaign, job: "spring-sale", app: "app1", inbox: "spring-sale")
        // The same campaign key registered in another org does not make orgA's ids known there, nor the reverse.
        let other = MessageTracking(org: "orgB", job: "b-job")
        try w.engagement.register(org: "orgB", campaign: other.campaign, job: "b-job", app: "app2", inbox: nil)
        let send = try w.key(role: .send)
        try await w.test { client async throws in
            let events = [
                Self.event(Self.mid("d1"), "opened"), Self.event(Self.mid("d2"), "opened"),
                Self.event(Self.mid("d1"), "opened"),
                Self.event(Self.mid("d1"), "action", extra: #","actionId":"reply""#),
                Self.event(Self.mid("d1"), "action", extra: #","actionId":"archive""#),
                Self.event(Self.mid("d2"), "dismissed", extra: #","at":"2027-01-15T08:00:30.250+01:00""#),
                Self.event(Self.mid("d3", other), "opened"),
            ]
            let first = try await client.call(.post, "/v1/interactions", token: send, json: Self.body(events))
            #expect(first.status == 202, "\(first.text)")
            let tally = try object(first.text)
            #expect(tally["accepted"] as? Int == 5 && tally["duplicates"] as? Int == 1 && tally["unknown"] as? Int == 1)
            // The whole batch again: every event is a replay.
            let again = try object(
                try await client.call(.post, "/v1/interactions", token: send, json: Self.body(events)).text)
            #expect(again["accepted"] as? Int == 0 && again["duplicates"] as? Int == 6 && again["unknown"] as? Int == 1)
        }
        let counts = w.engagement.counts(org: "orgA", job: "spring-sale")
        let minute = Int64(w.clock.now().timeIntervalSince1970) / 60
        #expect(
            counts == [
                "opened": 2, "opened:\(minute)": 2, "dismissed": 1, "action:reply": 1, "action:archive": 1,
            ])
        #expect(w.engagement.counts(org: "orgB", job: "b-job").isEmpty)
        let stream = w.engagement.streamEntries
        #expect(stream.count == 5)
        #expect(stream.allSatisfy { $0["kind"] == "interaction" && $0["org"] == "orgA" && $0["job"] == "spring-sale" })
        #expect(stream.first { $0["event"] == "dismissed" }?["at"] == "2027-01-15T07:00:30.250Z")
        #expect(stream.first?["at"] == "2027-01-15T08:00:00.000Z")
        #expect(
            stream.filter { $0["event"] == "action" }.compactMap { $0["actionId"] }.sorted() == ["archive", "reply"])
    }

    @Test func anAppUsersOpenMarksTheInAppEntryRead() async throws {
        let w = World()
        try w.engagement.register(
            org: "orgA", campaign: Self.campaign.campaign, job: "spring-sale", app: "app1", inbox: "n-1")
        w.inbox.deliver(
            org: "orgA",
            content: InboxContent(id: "n-1", type: nil, title: "Sale", body: "", target: nil, createdAt: w.clock.now()),
            to: ["005A", "005B"])
        let user = try w.userToken()
        let otherApp = try w.userToken(user: "005B", app: "app2")
        try await w.test { client async throws in
            // Another app's user does not know app1's campaign: unknown, nothing marked.
            let foreign = try await client.call(
                .post, "/v1/interactions", token: otherApp, json: Self.body([Self.event(Self.mid("d9"), "opened")]))
            #expect(try object(foreign.text)["unknown"] as? Int == 1)
            let answer = try await client.call(
                .post, "/v1/interactions", token: user,
                json: Self.body([Self.event(Self.mid("d1"), "opened", extra: #","userId":"005A""#)]))
            #expect(answer.status == 202, "\(answer.text)")
            #expect(try object(answer.text)["accepted"] as? Int == 1)
        }
        #expect(try await w.inbox.notification(org: "orgA", user: "005A", id: "n-1")?.read == true)
        #expect(try await w.inbox.notification(org: "orgA", user: "005B", id: "n-1")?.read == false)
        #expect(w.engagement.streamEntries.first?["user"] == "005A")
    }

    @Test(arguments: [
        (#"{}"#, "events"),
        (#"{"events":[]}"#, "events"),
        (#"{"events":{}}"#, "events"),
        (#"{"events":[1]}"#, "events[0]"),
        (#"{"events":[],"extra":1}"#, "extra"),
        (#"{"events":[{"event":"opened"}]}"#, "events[0].messageId"),
        (#"{"events":[{"messageId":"nope","event":"opened"}]}"#, "events[0].messageId"),
        (#"{"events":[{"messageId":"j__CzUfKz1o.ZVWJn41-v-0"}]}"#, "events[0].event"),
        (#"{"events":[{"messageId":"j__CzUfKz1o.ZVWJn41-v-0","event":"clicked"}]}"#, "events[0].event"),
        (#"{"events":[{"messageId":"j__CzUfKz1o.ZVWJn41-v-0","event":"opened","extra":true}]}"#, "events[0].extra"),
        (#"{"events":[{"messageId":"j__CzUfKz1o.ZVWJn41-v-0","event":"opened","at":"2027-01-15"}]}"#, "events[0].at"),
        (#"{"events":[{"messageId":"j__CzUfKz1o.ZVWJn41-v-0","event":"opened","at":5}]}"#, "events[0].at"),
        (#"{"events":[{"messageId":"j__CzUfKz1o.ZVWJn41-v-0","event":"opened","userId":"a b"}]}"#, "events[0].userId"),
    ])
    func aFaultIsA400NamingItsField(_ body: String, _ field: String) async throws {
        let w = World()
        let send = try w.key(role: .send)
        try await w.test { client async throws in
            let answer = try await client.call(.post, "/v1/interactions", token: send, json: body)
            #expect(answer.status == 400, "\(answer.text)")
            #expect(try object(answer.text)["field"] as? String == field, "\(answer.text)")
        }
    }

    @Test func anActionIDGoesWithActionOnlyAndTheFieldSaysWhichEvent() async throws {
        let w = World()
        let send = try w.key(role: .send)
        let fine = Self.event(Self.mid("d1"), "opened")
        try await w.test { client async throws in
            for (bad, reason) in [
                (Self.event(Self.mid("d1"), "action"), "required"),
                (Self.event(Self.mid("d1"), "opened", extra: #","actionId":"reply""#), "only with event action"),
                (Self.event(Self.mid("d1"), "action", extra: #","actionId":"no spaces""#), "letters"),
            ] {
                let answer = try await client.call(
                    .post, "/v1/interactions", token: send, json: Self.body([fine, fine, fine, bad]))
                #expect(answer.status == 400)
                let problem = try object(answer.text)
                #expect(problem["field"] as? String == "events[3].actionId", "\(answer.text)")
                #expect((problem["detail"] as? String)?.contains(reason) == true, "\(answer.text)")
            }
            let many = Self.body(Array(repeating: fine, count: 101))
            let tooMany = try await client.call(.post, "/v1/interactions", token: send, json: many)
            #expect(tooMany.status == 400)
            #expect(try object(tooMany.text)["field"] as? String == "events")
            let hundred = Self.body(Array(repeating: fine, count: 100))
            #expect(try await client.call(.post, "/v1/interactions", token: send, json: hundred).status == 202)
        }
    }

    @Test func whoMayReport() async throws {
        let w = World()
        let read = try w.key(role: .read)
        let admin = try w.key(role: .admin)
        let user = try w.userToken()
        let body = Self.body([Self.event(Self.mid("d1"), "opened")])
        let otherUser = Self.body([Self.event(Self.mid("d1"), "opened", extra: #","userId":"005Z""#)])
        try await w.test { client async throws in
            #expect(try await client.call(.post, "/v1/interactions", json: body).status == 401)
            #expect(try await client.call(.post, "/v1/interactions", token: read, json: body).status == 403)
            #expect(try await client.call(.post, "/v1/interactions", token: admin, json: body).status == 202)
            #expect(try await client.call(.post, "/v1/interactions", token: user, json: body).status == 202)
            // A user reports its own interactions only.
            let someoneElse = try await client.call(.post, "/v1/interactions", token: user, json: otherUser)
            #expect(someoneElse.status == 400)
            #expect(try object(someoneElse.text)["field"] as? String == "events[0].userId")
        }
        let bare = World(withStore: false)
        let key = try bare.key(role: .send)
        try await bare.test { client async throws in
            #expect(try await client.call(.post, "/v1/interactions", token: key, json: body).status == 501)
        }
    }

    @Test func aTimeAheadOfTheServersIsTakenAsNow() async throws {
        let w = World()
        try w.engagement.register(org: "orgA", campaign: Self.campaign.campaign, job: "j", app: "app1", inbox: nil)
        let send = try w.key(role: .send)
        try await w.test { client async throws in
            let ahead = Self.event(Self.mid("d1"), "opened", extra: #","at":"2099-01-01T00:00:00Z""#)
            let answer = try await client.call(.post, "/v1/interactions", token: send, json: Self.body([ahead]))
            #expect(answer.status == 202)
        }
        #expect(w.engagement.streamEntries.first?["at"] == RFC3339.format(w.clock.now(), .milliseconds))
    }
}
