import Foundation
import Hummingbird
import Testing
import VolleyCore
import VolleyTestDoubles
import VolleyTestTags

@testable import VolleyAPI

/// `/v1/frequency-caps` on the in-memory stores: who may read and replace the rules, the 400s that name the field,
/// and which rules hold (the API's, the file's, none).
@Suite(.tags(.unit)) struct FrequencyCapRoutesTests {
    @Test func rulesAreReadReplacedAndRemovedPerOrg() async throws {
        let api = InMemoryAPI()
        let admin = try api.key(role: .admin)
        let read = try api.key(role: .read)
        let send = try api.key(role: .send)
        let adminB = try api.key(org: "orgB", role: .admin)
        try await api.test { client async throws in
            let none = try object(try await client.call(.get, "/v1/frequency-caps", token: read).text)
            #expect(none["source"] as? String == "none" && (none["rules"] as? [Any])?.isEmpty == true)
            let body = #"{"rules":[{"window":"1h","max":3},{"window":"1h","max":1,"type":"ORDER_SHIPPED"}]}"#
            #expect(try await client.call(.put, "/v1/frequency-caps", token: send, json: body).status == 403)
            #expect(try await client.call(.put, "/v1/frequency-caps", token: read, json: body).status == 403)
            #expect(try await client.call(.get, "/v1/frequency-caps", token: send).status == 403)
            let put = try await client.call(.put, "/v1/frequency-caps", token: admin, json: body)
            #expect(put.status == 200, "\(put.text)")
            let got = try object(try await client.call(.get, "/v1/frequency-caps", token: read).text)
            #expect(got["source"] as? String == "api" && got["org"] as? String == "orgA")
            let rules = try #require(got["rules"] as? [[String: Any]])
            #expect(rules.count == 2 && rules[1]["type"] as? String == "ORDER_SHIPPED" && rules[0]["type"] == nil)

            // Another org: the file's rules, untouched by orgA's.
            let b = try object(try await client.call(.get, "/v1/frequency-caps", token: adminB).text)
            #expect(b["source"] as? String == "configuration")
            // An empty list replaces the file's: no caps for orgB.
            let off = try await client.call(.put, "/v1/frequency-caps", token: adminB, json: #"{"rules":[]}"#)
            #expect(try object(off.text)["source"] as? String == "api")
            let removed = try await client.call(.delete, "/v1/frequency-caps", token: adminB)
            #expect(removed.status == 200)
            #expect(try object(removed.text)["source"] as? String == "configuration")
        }
        #expect(try await api.frequencyCaps.rules(org: "orgA")?.count == 2)
        #expect(try await api.frequencyCaps.rules(org: "orgB") == nil)
    }

    @Test(arguments: [
        (#"{"rules":[{"window":"90s","max":3}]}"#, "rules[0].window"),
        (#"{"rules":[{"window":"31d","max":3}]}"#, "rules[0].window"),
        (#"{"rules":[{"max":3}]}"#, "rules[0].window"),
        (#"{"rules":[{"window":"1h","max":-1}]}"#, "rules[0].max"),
        (#"{"rules":[{"window":"1h","max":true}]}"#, "rules[0].max"),
        (#"{"rules":[{"window":"1h","max":1,"type":7}]}"#, "rules[0].type"),
        (#"{"rules":[{"window":"1h","max":1},{"window":"1h","max":2}]}"#, "rules[1]"),
        (#"{"rules":"1h"}"#, "rules"),
        (#"{"rules":null}"#, "rules"),
        (#"{"rules":[],"window":"1h"}"#, "window"),
        (#"[]"#, "body"),
    ])
    func badRulesAre400sNamingTheField(body: String, field: String) async throws {
        let api = InMemoryAPI()
        let admin = try api.key(role: .admin)
        try await api.test { client async throws in
            let a = try await client.call(.put, "/v1/frequency-caps", token: admin, json: body)
            #expect(a.status == 400, "\(a.text)")
            #expect(try object(a.text)["field"] as? String == field, "\(a.text)")
        }
        #expect(try await api.frequencyCaps.rules(org: "orgA") == nil)
    }
}
