import Foundation
import HTTPTypes
import Hummingbird
import Testing
import VolleyCore
import VolleyTestDoubles
import VolleyTestTags

@testable import VolleyAPI

/// `/v1/sync-hints` on the in-memory stores: who may call what, refusals naming the field, hint ids that grow, an
/// ack by hint id or by time, and the status read.
@Suite(.tags(.unit)) struct SyncHintRoutesTests {
    @Test func hintsAreStoredAckedAndReadBack() async throws {
        let api = InMemoryAPI()
        let send = try api.key(role: .send)
        let read = try api.key(role: .read)
        let user = try api.userToken(user: "005A")
        try await api.test { client async throws in
            let body = #"{"app":"app1","users":["005A","005B"],"type":"ACCOUNT_UPDATE","recordIds":["a","b"]}"#
            let first = try await client.call(.post, "/v1/sync-hints", token: send, json: body)
            #expect(first.status == 202, "\(first.text)")
            let hints = try #require(try object(first.text)["hints"] as? [[String: Any]])
            #expect(hints.map { $0["user"] as? String } == ["005A", "005B"])
            let firstID = try #require(hints.first?["id"] as? String)
            let again = try await client.call(
                .post, "/v1/sync-hints", token: send,
                json: #"{"app":"app1","users":["005A"],"type":"ACCOUNT_UPDATE","recordIds":["b","c"]}"#)
            let secondID = try #require(
                (try object(again.text)["hints"] as? [[String: Any]])?.first?["id"] as? String)
            #expect(Int64(secondID) ?? 0 > Int64(firstID) ?? 0, "hint ids grow per user and type")

            // Only the app's user acks, and only its own hints; an API key cannot.
            #expect(
                try await client.call(
                    .post, "/v1/sync-hints/ack", token: send, json: #"{"type":"ACCOUNT_UPDATE","upTo":"1"}"#
                ).status == 403)
            let ack = try await client.call(
                .post, "/v1/sync-hints/ack", token: user, json: #"{"type":"ACCOUNT_UPDATE","upTo":"\#(firstID)"}"#)
            #expect(ack.status == 200, "\(ack.text)")
            let acked = try object(ack.text)
            #expect(acked["dropped"] as? Int == 1, "a goes; b was named again: \(ack.text)")
            #expect(acked["remaining"] as? Int == 2)

            // What waits, with any key of the org; the other user's hints are untouched.
            let status = try await client.call(.get, "/v1/sync-hints/005A", token: read)
            #expect(status.status == 200, "\(status.text)")
            let waiting = try #require(try object(status.text)["hints"] as? [[String: Any]])
            #expect(waiting.first?["recordIds"] as? [String] == ["b", "c"])
            let other = try await client.call(.get, "/v1/sync-hints/005B?app=app1", token: send)
            let otherHints = try #require(try object(other.text)["hints"] as? [[String: Any]])
            #expect(otherHints.first?["recordIds"] as? [String] == ["a", "b"])
            #expect(try await client.call(.get, "/v1/sync-hints/005A?app=nope", token: send).status == 404)

            // Past the cap (5 here) the user is owed a full sync; an ack by time covers it.
            _ = try await client.call(
                .post, "/v1/sync-hints", token: send,
                json: #"{"app":"app1","users":["005A"],"type":"ACCOUNT_UPDATE","recordIds":["d","e","f","g"]}"#)
            let full = try await client.call(.get, "/v1/sync-hints/005A", token: send)
            #expect(
                (try object(full.text)["hints"] as? [[String: Any]])?.first?["fullSync"] as? Bool == true,
                "\(full.text)")
            let byTime = try await client.call(
                .post, "/v1/sync-hints/ack", token: user,
                json: #"{"type":"ACCOUNT_UPDATE","upTo":"2030-01-01T00:00:00Z"}"#)
            let cleared = try object(byTime.text)
            #expect(cleared["fullSync"] as? Bool == false, "\(byTime.text)")
            #expect(cleared["remaining"] as? Int == 0, "\(byTime.text)")
        }
    }

    @Test(arguments: [
        (#"{"users":["u"],"type":"T","recordIds":["1"]}"#, 400, "app"),
        (#"{"app":"app1","users":["u"],"type":"T"}"#, 400, "recordIds"),
        (#"{"app":"app1","users":"u","type":"T","recordIds":["1"]}"#, 400, "users"),
        (#"{"app":"app1","users":["u"],"type":"T","recordIds":["1"],"org":"orgB"}"#, 400, "org"),
        (#"{"app":"app1","users":["u"],"type":"a b","recordIds":["1"]}"#, 400, "type"),
        (#"{"app":"app1","users":["u"],"type":"T","recordIds":[1]}"#, 400, "recordIds[0]"),
        (#"{"app":"nope","users":["u"],"type":"T","recordIds":["1"]}"#, 404, "app"),
    ])
    func aBadHintIsRefusedNamingTheField(body: String, status: Int, field: String) async throws {
        let api = InMemoryAPI()
        let send = try api.key(role: .send)
        try await api.test { client async throws in
            let r = try await client.call(.post, "/v1/sync-hints", token: send, json: body)
            #expect(r.status == status, "\(body): \(r.text)")
            #expect(try object(r.text)["field"] as? String == field, "\(body): \(r.text)")
        }
    }

    @Test func aReadKeyCannotSendHintsAndAUserTokenCannotReadThem() async throws {
        let api = InMemoryAPI()
        let read = try api.key(role: .read)
        let user = try api.userToken()
        try await api.test { client async throws in
            let body = #"{"app":"app1","users":["u"],"type":"T","recordIds":["1"]}"#
            #expect(try await client.call(.post, "/v1/sync-hints", token: read, json: body).status == 403)
            #expect(try await client.call(.post, "/v1/sync-hints", token: user, json: body).status == 403)
            #expect(try await client.call(.get, "/v1/sync-hints/005A", token: user).status == 403)
            let bad = try await client.call(.post, "/v1/sync-hints/ack", token: user, json: #"{"type":"T","upTo":"x"}"#)
            #expect(bad.status == 400, "\(bad.text)")
            #expect(try object(bad.text)["field"] as? String == "upTo", "\(bad.text)")
        }
    }
}
