import Foundation
import HTTPTypes
import Testing
import VolleyCore
import VolleyTestTags

@testable import VolleyAPI

/// `throttlePerMinute` at `POST /v1/jobs`: accepted within its bounds and kept on the stream entry; outside them a
/// 422 naming the field, of the wrong type a 400 naming it.
@Suite(.tags(.unit)) struct ThrottleAPITests {
    func job(_ throttle: String) -> String {
        #"{"app":"app1","recipients":["005A"],"notification":{"title":"Hi"},"throttlePerMinute":"#
            + throttle + "}"
    }

    @Test func aThrottleWithinItsBoundsIsAcceptedAndGoesToTheStream() async throws {
        let api = InMemoryAPI()
        let send = try api.key(role: .send)
        try await api.test { client async throws in
            let r = try await client.call(.post, "/v1/jobs", token: send, json: job("1019"))
            #expect(r.status == 202, "\(r.text)")
            #expect(api.jobs.jobs().last?.throttlePerMinute == 1019)
        }
    }

    @Test(arguments: ["0", "-3", "6000001"])
    func aThrottleOutsideItsBoundsIsRefusedNamingTheField(value: String) async throws {
        let api = InMemoryAPI()
        let send = try api.key(role: .send)
        try await api.test { client async throws in
            let r = try await client.call(.post, "/v1/jobs", token: send, json: job(value))
            #expect(r.status == 422, "\(r.text)")
            #expect(r.text.contains(#""field":"throttlePerMinute""#))
        }
    }

    @Test func aThrottleOfTheWrongTypeIsABadRequestNamingTheField() async throws {
        let api = InMemoryAPI()
        let send = try api.key(role: .send)
        try await api.test { client async throws in
            let r = try await client.call(.post, "/v1/jobs", token: send, json: job(#""fast""#))
            #expect(r.status == 400, "\(r.text)")
            #expect(r.text.contains("throttlePerMinute"))
        }
    }
}
