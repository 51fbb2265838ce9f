import Foundation
import HTTPTypes
import Hummingbird
import Testing
import VolleyCore
import VolleyTestDoubles
import VolleyTestTags

@testable import VolleyAPI

/// `/v1/segments` and jobs naming segments, on the in-memory stores.
@Suite(.tags(.unit)) struct SegmentRoutesTests {
    static let goldBerlin =
        #"{"match":"all","filters":[{"attribute":"plan","op":"eq","value":"gold"},"#
        + #"{"attribute":"city","op":"eq","value":"Berlin"}]}"#

    @Test func aSegmentIsCreatedReadListedCountedReplacedAndDeleted() async throws {
        let api = InMemoryAPI()
        let admin = try api.key(role: .admin)
        let read = try api.key(role: .read)
        let send = try api.key(role: .send)
        let other = try api.key(org: "orgB", role: .admin)
        try await api.test { client async throws in
            for (user, plan, city) in [("u1", "gold", "Berlin"), ("u2", "gold", "Bonn"), ("u3", "silver", "Berlin")] {
                let put = try await client.call(
                    .put, "/v1/users/\(user)/attributes", token: admin,
                    json: #"{"attributes":{"plan":"\#(plan)","city":"\#(city)"}}"#)
                #expect(put.status == 200, "\(put.text)")
            }
            let created = try await client.call(.put, "/v1/segments/gold-berlin", token: admin, json: Self.goldBerlin)
            #expect(created.status == 201, "\(created.text)")
            #expect(created.headers[.location] == "/v1/segments/gold-berlin")
            let body = try object(created.text)
            #expect(body["id"] as? String == "gold-berlin" && body["match"] as? String == "all")
            #expect((body["filters"] as? [[String: Any]])?.count == 2)

            let got = try await client.call(.get, "/v1/segments/gold-berlin", token: read)
            #expect(got.status == 200 && got.text == created.text)
            let count = try await client.call(.get, "/v1/segments/gold-berlin/count", token: send)
            #expect(count.status == 200, "\(count.text)")
            #expect(try object(count.text)["users"] as? Int == 1)
            #expect(try object(count.text)["id"] as? String == "gold-berlin")

            // An attribute update moves a user into the segment.
            _ = try await client.call(
                .put, "/v1/users/u2/attributes", token: admin, json: #"{"attributes":{"plan":"gold","city":"Berlin"}}"#)
            #expect(
                try object(try await client.call(.get, "/v1/segments/gold-berlin/count", token: read).text)["users"]
                    as? Int == 2)

            let replaced = try await client.call(
                .put, "/v1/segments/gold-berlin", token: admin,
                json: #"{"id":"gold-berlin","match":"any","filters":[{"attribute":"city","op":"eq","value":"Berlin"}]}"#
            )
            #expect(replaced.status == 200, "\(replaced.text)")
            #expect(
                try object(try await client.call(.get, "/v1/segments/gold-berlin/count", token: read).text)["users"]
                    as? Int == 3)

            let list = try await client.call(.get, "/v1/segments", token: read)
            #expect(list.status == 200)
            #expect(
                (try object(list.text)["segments"] as? [[String: Any]])?.map { $0["id"] as? String } == ["gold-berlin"])

            // Another org sees none of it.
            #expect(try await client.call(.get, "/v1/segments/gold-berlin", token: other).status == 404)
            #expect(try await client.call(.get, "/v1/segments/gold-berlin/count", token: other).status == 404)
            #expect(
                (try object(try await client.call(.get, "/v1/segments", token: other).text)["segments"] as? [Any])?
                    .isEmpty == true)
            #expect(try await client.call(.delete, "/v1/segments/gold-berlin", token: other).status == 404)

            // Only an admin key changes segments.
            #expect(try await client.call(.put, "/v1/segments/x", token: read, json: Self.goldBerlin).status == 403)
            #expect(try await client.call(.put, "/v1/segments/x", token: send, json: Self.goldBerlin).status == 403)
            #expect(try await client.call(.delete, "/v1/segments/gold-berlin", token: send).status == 403)

            #expect(try await client.call(.delete, "/v1/segments/gold-berlin", token: admin).status == 204)
            #expect(try await client.call(.delete, "/v1/segments/gold-berlin", token: admin).status == 404)
            #expect(try await client.call(.get, "/v1/segments/gold-berlin", token: read).status == 404)
            #expect(try await client.call(.get, "/v1/segments/gold-berlin/count", token: read).status == 404)
        }
    }

    @Test(arguments: [
        (
            #"{"filters":[{"attribute":"plan","op":"eq","value":"gold"},"#
                + #"{"attribute":"city","op":"near","value":"x"}]}"#,
            "filters[1].op"
        ),
        (#"{"filters":[{"attribute":"age","op":"gt","value":"old"}]}"#, "filters[0].value"),
        (#"{"filters":[{"attribute":"plan","op":"in","value":["gold",2]}]}"#, "filters[0].value[1]"),
        (#"{"filters":[{"attribute":"a b","op":"exists"}]}"#, "filters[0].attribute"),
        (#"{"filters":[]}"#, "filters"),
        (#"{"match":"most","filters":[{"attribute":"plan","op":"exists"}]}"#, "match"),
        (#"{"filters":[{"attribute":"plan","op":"exists"}],"extra":1}"#, "extra"),
        (#"{"id":"other","filters":[{"attribute":"plan","op":"exists"}]}"#, "id"),
        (#"{"filters":[{"attribute":"plan","op":"exists",}]}"#, "body"),
    ])
    func aBadSegmentIsA400NamingTheField(json: String, field: String) async throws {
        let api = InMemoryAPI()
        let admin = try api.key(role: .admin)
        try await api.test { client async throws in
            let answer = try await client.call(.put, "/v1/segments/s1", token: admin, json: json)
            #expect(answer.status == 400, "\(answer.text)")
            #expect(try object(answer.text)["field"] as? String == field, "\(answer.text)")
        }
        #expect(api.directory.segments(org: "orgA").isEmpty)
    }

    @Test func aSegmentIdIsChecked() async throws {
        let api = InMemoryAPI()
        let admin = try api.key(role: .admin)
        try await api.test { client async throws in
            let bad = try await client.call(.put, "/v1/segments/a%20b", token: admin, json: Self.goldBerlin)
            let field = try object(bad.text)["field"] as? String
            #expect(bad.status == 400 && field == "id")
            #expect(try await client.call(.get, "/v1/segments/a%20b", token: admin).status == 404)
        }
    }

    @Test func withoutAStoreTheRoutesAnswer501() async throws {
        let api = InMemoryAPI(withOptionalStores: false)
        let admin = try api.key(role: .admin)
        try await api.test { client async throws in
            #expect(try await client.call(.get, "/v1/segments", token: admin).status == 501)
            #expect(try await client.call(.put, "/v1/segments/s", token: admin, json: Self.goldBerlin).status == 501)
        }
    }

    @Test func aJobMayNameSegmentsAllAndExclude() async throws {
        let api = InMemoryAPI()
        let send = try api.key(role: .send)
        let admin = try api.key(role: .admin)
        try await api.test { client async throws in
            // A segment the job names must exist when it is posted: 422 naming the entry.
            let unknown = try await client.call(
                .post, "/v1/jobs", token: send,
                json:
                    #"{"app":"app1","recipients":["a"],"exclude":[{"segment":"churned"}],"notification":{"title":"x"}}"#
            )
            #expect(unknown.status == 422, "\(unknown.text)")
            #expect(try object(unknown.text)["field"] as? String == "exclude[0].segment", "\(unknown.text)")
            for id in ["gold-berlin", "churned"] {
                let put = try await client.call(.put, "/v1/segments/\(id)", token: admin, json: Self.goldBerlin)
                #expect(put.status == 201 || put.status == 200, "\(put.text)")
            }
            let job =
                #"{"app":"app1","recipients":["005A",{"segment":"gold-berlin"},{"all":true}],"#
                + #""exclude":[{"segment":"churned"},"005B"],"notification":{"title":"Hi"}}"#
            let accepted = try await client.call(.post, "/v1/jobs", token: send, json: job)
            #expect(accepted.status == 202, "\(accepted.text)")
            let entry = try #require(api.jobs.entries.last?.json)
            let queued = try PushJob(json: try JSONValue(parsing: entry), defaultOrg: nil)
            #expect(queued.recipients == ["005A", .segment("gold-berlin"), .all])
            #expect(queued.exclude == [.segment("churned"), "005B"])

            for (members, field) in [
                (#""recipients":["a","b","c",{"segment":7}]"#, "recipients[3].segment"),
                (#""recipients":[{"segmnt":"x"}]"#, "recipients[0].segmnt"),
                (#""recipients":[{"all":false}]"#, "recipients[0].all"),
                (#""recipients":["a"],"exclude":[{"all":true}]"#, "exclude[0].all"),
                (
                    #""recipients":["a"],"exclude":[\#((0...500).map { "\"u\($0)\"" }.joined(separator: ","))]"#,
                    "exclude"
                ),
            ] {
                let bad = try await client.call(
                    .post, "/v1/jobs", token: send, json: #"{"app":"app1",\#(members),"notification":{"title":"x"}}"#)
                #expect(bad.status == 400, "\(bad.text)")
                #expect(try object(bad.text)["field"] as? String == field, "\(bad.text)")
            }
        }
    }
}
