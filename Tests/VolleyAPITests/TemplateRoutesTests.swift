import Foundation
import HTTPTypes
import Hummingbird
import Testing
import VolleyCore
import VolleyTestDoubles
import VolleyTestTags
import Yams

@testable import VolleyAPI

/// `/v1/templates` and templated jobs on the in-memory stores.
@Suite(.tags(.unit)) struct TemplateRoutesTests {
    static let body =
        #"{"notification":{"title":"Hi {{ first_name | 'Friend' }}","body":"Order {{ message.custom_data.order }}","#
        + #""data":{"n":18446744073709551617}}}"#

    @Test func aTemplateIsCreatedReadListedReplacedAndDeleted() async throws {
        let api = InMemoryAPI()
        let admin = try api.key(role: .admin)
        let read = try api.key(role: .read)
        let other = try api.key(org: "orgB", role: .admin)
        try await api.test { client async throws in
            let created = try await client.call(.put, "/v1/templates/welcome", token: admin, json: Self.body)
            #expect(created.status == 201, "\(created.text)")
            #expect(created.headers[.location] == "/v1/templates/welcome")
            // The notification comes back as it was put, digit for digit.
            #expect(created.text.contains(#""n":18446744073709551617"#), "\(created.text)")
            let first = try object(created.text)
            #expect(first["id"] as? String == "welcome")
            let createdAt = try #require(first["createdAt"] as? String)

            let got = try await client.call(.get, "/v1/templates/welcome", token: read)
            #expect(got.status == 200)
            let notification = try #require(try object(got.text)["notification"] as? [String: Any])
            #expect(notification["title"] as? String == "Hi {{ first_name | 'Friend' }}")

            api.clock.advance(by: 5)
            let replaced = try await client.call(
                .put, "/v1/templates/welcome", token: admin,
                json: #"{"id":"welcome","notification":{"title":"Hello {{ first_name }}"}}"#)
            #expect(replaced.status == 200, "\(replaced.text)")
            #expect(try object(replaced.text)["createdAt"] as? String == createdAt)

            let list = try await client.call(.get, "/v1/templates", token: read)
            #expect(list.status == 200)
            let templates = try #require(try object(list.text)["templates"] as? [[String: Any]])
            #expect(templates.map { $0["id"] as? String } == ["welcome"])

            // Another org sees none of it.
            #expect(try await client.call(.get, "/v1/templates/welcome", token: other).status == 404)
            let otherList = try await client.call(.get, "/v1/templates", token: other)
            #expect(try object(otherList.text)["templates"] as? [Any] != nil)
            #expect((try object(otherList.text)["templates"] as? [Any])?.isEmpty == true)
            #expect(try await client.call(.delete, "/v1/templates/welcome", token: other).status == 404)

            // Only an admin key changes templates.
            #expect(try await client.call(.put, "/v1/templates/x", token: read, json: Self.body).status == 403)
            #expect(try await client.call(.delete, "/v1/templates/welcome", token: read).status == 403)

            #expect(try await client.call(.delete, "/v1/templates/welcome", token: admin).status == 204)
            #expect(try await client.call(.delete, "/v1/templates/welcome", token: admin).status == 404)
            #expect(try await client.call(.get, "/v1/templates/welcome", token: read).status == 404)
        }
    }

    @Test(arguments: [
        (#"{"notification":{"title":"Hi {{ first_name"}}"#, "notification.title"),
        (#"{"notification":{"localized":{"es":{"body":"Hola {{ }}"}}}}"#, "notification.localized.es.body"),
        (#"{"notification":{"title":"Hi {{ first_name | upcase }}"}}"#, "notification.title"),
        (#"{"notification":{"title":"x","tilte":"y"}}"#, "notification.tilte"),
        (#"{"notification":{"title":7}}"#, "notification.title"),
        (#"{"notification":{}}"#, "notification"),
        (#"{"notification":"Hi"}"#, "notification"),
        (#"{}"#, "notification"),
        (#"{"notification":{"title":"x"},"extra":1}"#, "extra"),
        (#"{"id":"other","notification":{"title":"x"}}"#, "id"),
        (#"{"notification":{"title":"x",}}"#, "body"),
    ])
    func aBadTemplateIsA400NamingTheField(json: String, field: String) async throws {
        let api = InMemoryAPI()
        let admin = try api.key(role: .admin)
        try await api.test { client async throws in
            let answer = try await client.call(.put, "/v1/templates/t1", token: admin, json: json)
            #expect(answer.status == 400, "\(answer.text)")
            #expect(try object(answer.text)["field"] as? String == field, "\(answer.text)")
        }
        #expect(try await api.templates.list(org: "orgA").isEmpty)
    }

    /// The providers' preparation as far as these tests need it, recording what it was asked: the time to live's
    /// bounds (`effectiveTTL`, what both encoders call) and FCM's refusal of an `fcm` that is no object.
    final class ProviderStandIn: @unchecked Sendable {
        let lock = NSLock()
        var asked: [(app: AppName, platform: Platform, title: String?)] = []
        lazy var check = NotificationCheck { [unowned self] app, platform, n, _ in
            self.lock.withLock { self.asked.append((app, platform, n.title)) }
            _ = try n.effectiveTTL(reason: platform == .ios ? "BadExpirationDate" : "INVALID_ARGUMENT")
            if platform == .android, let fcm = n.fcm, fcm.objectValue == nil {
                throw NotificationError(
                    "INVALID_ARGUMENT", "fcm must be a JSON object (an FCM message)", field: "fcm")
            }
        }
    }

    /// A template every job naming it would be refused for at `POST /v1/jobs` is refused when it is put, with the
    /// field the job door would name; nothing is stored.
    @Test(arguments: [
        (#"{"notification":{"title":"Hi","fcm":[null,null]}}"#, "notification.fcm", "android"),
        (#"{"notification":{"title":"Hi {{ first_name }}","ttl":2419201}}"#, "notification.ttl", "ios"),
        (#"{"notification":{"body":"x","ttl":-1}}"#, "notification.ttl", "ios"),
    ])
    func aTemplateTheProvidersWouldRefuseIsA400NamingTheField(json: String, field: String, platform: String)
        async throws
    {
        let providers = ProviderStandIn()
        let api = InMemoryAPI(notificationCheck: providers.check)
        let admin = try api.key(role: .admin)
        let send = try api.key(role: .send)
        try await api.test { client async throws in
            let answer = try await client.call(.put, "/v1/templates/t1", token: admin, json: json)
            #expect(answer.status == 400, "\(answer.text)")
            let problem = try object(answer.text)
            #expect(problem["field"] as? String == field, "\(answer.text)")
            #expect((problem["detail"] as? String)?.contains(platform) == true, "\(answer.text)")
            // The same notification in a job is refused at the door with the same field.
            let notification = String(json.dropFirst(#"{"notification":"#.count).dropLast())
            let job = #"{"app":"app1","recipients":["005A"],"notification":\#(notification)}"#
            let alone = try await client.call(.post, "/v1/jobs", token: send, json: job)
            #expect(alone.status == 400, "\(alone.text)")
            #expect(try object(alone.text)["field"] as? String == field, "\(alone.text)")
        }
        #expect(try await api.templates.list(org: "orgA").isEmpty)
    }

    /// A template with names is checked as the job door checks a templated job: rendered without attributes or
    /// custom data, for every platform of each app the org may use; one the providers prepare is stored.
    @Test func aTemplateWithNamesTheProvidersPrepareIsStored() async throws {
        let providers = ProviderStandIn()
        let api = InMemoryAPI(notificationCheck: providers.check)
        let admin = try api.key(role: .admin)
        let send = try api.key(role: .send)
        try await api.test { client async throws in
            let created = try await client.call(.put, "/v1/templates/welcome", token: admin, json: Self.body)
            #expect(created.status == 201, "\(created.text)")
            let longest = try await client.call(
                .put, "/v1/templates/long", token: admin,
                json: #"{"notification":{"title":"Hi {{ first_name }}","ttl":2419200,"fcm":{"data":{"k":"v"}}}}"#)
            #expect(longest.status == 201, "\(longest.text)")
            let job = #"{"app":"app1","recipients":["005A"],"templateId":"welcome","customData":{"order":"A-17"}}"#
            #expect(try await client.call(.post, "/v1/jobs", token: send, json: job).status == 202)
        }
        let put = providers.lock.withLock { Array(providers.asked.prefix(4)) }
        #expect(put.map { "\($0.app) \($0.platform)" } == ["app1 ios", "app1 android", "app2 ios", "app2 android"])
        #expect(put.allSatisfy { $0.title == "Hi Friend" })
        #expect(try await api.templates.list(org: "orgA").map(\.id) == ["long", "welcome"])
    }

    /// An attribute value is at most `UserAttributes.maxValueCharacters` characters counted as the OpenAPI document's
    /// `maxLength` counts them (Unicode code points, so `é` is one though two bytes), and the document says so.
    @Test func anAttributeValueIsLimitedInCharactersAsTheDocumentSays() async throws {
        let limit = UserAttributes.maxValueCharacters
        let doc = try #require(try Yams.load(yaml: OpenAPIDocument.yaml) as? [String: Any])
        let schemas = try #require((doc["components"] as? [String: Any])?["schemas"] as? [String: Any])
        let body = try #require(schemas["UserAttributesBody"] as? [String: Any])
        let attributes = try #require((body["properties"] as? [String: Any])?["attributes"] as? [String: Any])
        #expect((attributes["additionalProperties"] as? [String: Any])?["maxLength"] as? Int == limit)

        let api = InMemoryAPI()
        let admin = try api.key(role: .admin)
        try await api.test { client async throws in
            for value in [String(repeating: "é", count: limit), String(repeating: "x", count: limit)] {
                let put = try await client.call(
                    .put, "/v1/users/005A/attributes", token: admin, json: #"{"attributes":{"first_name":"\#(value)"}}"#
                )
                #expect(put.status == 200, "\(put.text)")
            }
            for value in [String(repeating: "é", count: limit + 1), String(repeating: "x", count: limit + 1)] {
                let over = try await client.call(
                    .put, "/v1/users/005A/attributes", token: admin, json: #"{"attributes":{"first_name":"\#(value)"}}"#
                )
                #expect(over.status == 400, "\(over.text)")
                #expect(try object(over.text)["field"] as? String == "attributes.first_name", "\(over.text)")
            }
        }
        #expect(try await api.directory.attributes(org: "orgA", user: "005A")?["first_name"]?.count == limit)
    }

    @Test func templateIdsAndSizesAreLimited() async throws {
        let api = InMemoryAPI()
        let admin = try api.key(role: .admin)
        try await api.test { client async throws in
            let badID = try await client.call(.put, "/v1/templates/a%20b", token: admin, json: Self.body)
            #expect(badID.status == 400)
            #expect(try object(badID.text)["field"] as? String == "id")
            let long = String(repeating: "x", count: StoredTemplate.maxNotificationBytes)
            let big = try await client.call(
                .put, "/v1/templates/big", token: admin, json: #"{"notification":{"body":"\#(long)"}}"#)
            #expect(big.status == 400)
            #expect(try object(big.text)["field"] as? String == "notification")
        }
    }

    @Test func anOrgKeepsAtMostItsLimitOfTemplates() async throws {
        let store = InMemoryTemplateStore()
        for i in 0..<3 {
            let put = try await store.put(org: "o", id: "t\(i)", notification: .object([:]), now: Date(), maxCount: 3)
            guard case .created = put else {
                Issue.record("\(put)")
                return
            }
        }
        #expect(
            try await store.put(org: "o", id: "t3", notification: .object([:]), now: Date(), maxCount: 3)
                == .limitReached)
        // Replacing one that exists is not a new one.
        guard
            case .replaced = try await store.put(
                org: "o", id: "t1", notification: .object([:]), now: Date(), maxCount: 3)
        else {
            Issue.record("not replaced")
            return
        }
    }

    @Test func aJobNamingATemplateIsCheckedAtTheDoor() async throws {
        let api = InMemoryAPI()
        let admin = try api.key(role: .admin)
        let send = try api.key(role: .send)
        let other = try api.key(org: "orgB", role: .send)
        try await api.test { client async throws in
            #expect(try await client.call(.put, "/v1/templates/welcome", token: admin, json: Self.body).status == 201)
            let job = #"{"app":"app1","recipients":["005A"],"templateId":"welcome","customData":{"order":"A-17"}}"#
            let accepted = try await client.call(.post, "/v1/jobs", token: send, json: job)
            #expect(accepted.status == 202, "\(accepted.text)")

            let unknown = try await client.call(
                .post, "/v1/jobs", token: send, json: job.replacingOccurrences(of: "welcome", with: "nope"))
            #expect(unknown.status == 404)
            #expect(try object(unknown.text)["field"] as? String == "templateId")
            // Another org's job cannot name this org's template.
            let app2 = job.replacingOccurrences(of: "app1", with: "app2")
            let foreign = try await client.call(.post, "/v1/jobs", token: other, json: app2)
            #expect(foreign.status == 404, "\(foreign.text)")
            #expect(try object(foreign.text)["field"] as? String == "templateId")

            let both = try await client.call(
                .post, "/v1/jobs", token: send,
                json: #"{"app":"app1","recipients":["005A"],"templateId":"welcome","notification":{"title":"x"}}"#)
            #expect(both.status == 400)
            #expect(try object(both.text)["field"] as? String == "notification")

            let large = String(repeating: "x", count: PushJob.maxCustomDataBytes)
            let tooMuch = try await client.call(
                .post, "/v1/jobs", token: send,
                json: #"{"app":"app1","recipients":["005A"],"templateId":"welcome","customData":{"k":"\#(large)"}}"#)
            #expect(tooMuch.status == 400)
            #expect(try object(tooMuch.text)["field"] as? String == "customData")

            let notObject = try await client.call(
                .post, "/v1/jobs", token: send,
                json: #"{"app":"app1","recipients":["005A"],"templateId":"welcome","customData":[1]}"#)
            #expect(notObject.status == 400)
            #expect(try object(notObject.text)["field"] as? String == "customData")
        }
        let jobs = api.jobs.jobs()
        #expect(jobs.count == 1)
        #expect(jobs.first?.templateId == "welcome")
        #expect(jobs.first?.customData == .object(["order": .string("A-17")]))
    }
}
