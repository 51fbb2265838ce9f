import Foundation
import Hummingbird
import Testing
import VolleyCore
import VolleyTestDoubles
import VolleyTestTags

@testable import VolleyAPI

/// `/v1/time-zone` on the in-memory stores: who may read and set the org's zone, the 400s that name the field, and
/// which zone holds (the API's, the file's, UTC).
@Suite(.tags(.unit)) struct TimeZoneRoutesTests {
    @Test func theZoneIsReadSetAndRemovedPerOrg() async throws {
        let api = InMemoryAPI()
        let admin = try api.key(role: .admin)
        let read = try api.key(role: .read)
        let send = try api.key(role: .send)
        let adminB = try api.key(org: "orgB", role: .admin)
        try await api.test { client async throws in
            let utc = try object(try await client.call(.get, "/v1/time-zone", token: read).text)
            #expect(utc["source"] as? String == "default" && utc["timeZone"] as? String == "UTC")
            let body = #"{"timeZone":"Europe/Berlin"}"#
            #expect(try await client.call(.put, "/v1/time-zone", token: send, json: body).status == 403)
            #expect(try await client.call(.put, "/v1/time-zone", token: read, json: body).status == 403)
            #expect(try await client.call(.get, "/v1/time-zone", token: send).status == 403)
            let put = try await client.call(.put, "/v1/time-zone", token: admin, json: body)
            #expect(put.status == 200, "\(put.text)")
            let got = try object(try await client.call(.get, "/v1/time-zone", token: read).text)
            #expect(got["source"] as? String == "api" && got["timeZone"] as? String == "Europe/Berlin")
            #expect(got["org"] as? String == "orgA")
            // Another org: the file's zone, untouched by orgA's; set and removed again.
            let b = try object(try await client.call(.get, "/v1/time-zone", token: adminB).text)
            #expect(b["source"] as? String == "configuration" && b["timeZone"] as? String == "Asia/Kolkata")
            let set = try await client.call(.put, "/v1/time-zone", token: adminB, json: #"{"timeZone":"UTC"}"#)
            #expect(try object(set.text)["source"] as? String == "api")
            let removed = try await client.call(.delete, "/v1/time-zone", token: adminB)
            #expect(removed.status == 200)
            #expect(try object(removed.text)["timeZone"] as? String == "Asia/Kolkata")
        }
        #expect(try await api.timeZones.zone(org: "orgA") == "Europe/Berlin")
        #expect(try await api.timeZones.zone(org: "orgB") == nil)
    }

    @Test(arguments: [
        #"{"timeZone":"Mars/Base"}"#, #"{"timeZone":"GMT+5"}"#, #"{"timeZone":"PST"}"#, #"{"timeZone":"Factory"}"#,
        #"{"timeZone":""}"#, #"{"timeZone":7}"#, #"{}"#, #"{"timeZone":null}"#,
        #"{"timeZone":"Europe/Berlin","zone":"x"}"#,
    ])
    func aBadBodyIsA400NamingTheField(_ body: String) async throws {
        let api = InMemoryAPI()
        let admin = try api.key(role: .admin)
        try await api.test { client async throws in
            let r = try await client.call(.put, "/v1/time-zone", token: admin, json: body)
            #expect(r.status == 400, "\(r.text)")
            let field = try #require((try? JSONSerialization.jsonObject(with: Data(r.text.utf8))) as? [String: Any])
            let named = field["field"] as? String ?? ""
            #expect(named == "timeZone" || named == "zone", "\(r.text)")
        }
        #expect(try await api.timeZones.zone(org: "orgA") == nil)
    }
}
