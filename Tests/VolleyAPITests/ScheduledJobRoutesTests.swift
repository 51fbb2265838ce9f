import Foundation
import HTTPTypes
import Testing
import VolleyCore
import VolleyTestDoubles
import VolleyTestTags

@testable import VolleyAPI

/// `sendAt` on `POST /v1/jobs` and `DELETE /v1/jobs/{id}`, on the in-memory stores.
@Suite(.tags(.unit)) struct ScheduledJobRoutesTests {
    static func job(sendAt: String) -> String {
        #"{"app":"app1","recipients":["005A"],"notification":{"title":"Hi"},"sendAt":"\#(sendAt)"}"#
    }

    @Test func aTimeAheadIsAcceptedAsScheduledWithTheCallersText() async throws {
        let api = InMemoryAPI()
        let send = try api.key(role: .send)
        let at = Date().addingTimeInterval(3600)
        let text = ScheduledTime.utcText(at).replacingOccurrences(of: "Z", with: "+00:00")
        try await api.test { client async throws in
            let r = try await client.call(.post, "/v1/jobs", token: send, json: Self.job(sendAt: text))
            #expect(r.status == 202, "\(r.text)")
            let body = try object(r.text)
            #expect(body["state"] as? String == "scheduled")
            let due = try #require((body["dueAt"] as? String).flatMap(ScheduledTime.init)?.date)
            #expect(abs(due.timeIntervalSince(ScheduledTime(text)!.date)) < 0.002)
        }
        // The stream carries the body as sent: the worker reads the caller's own text.
        #expect(api.jobs.entries.first?.json.contains(#""sendAt":"\#(text)""#) == true)
    }

    @Test(arguments: [-120.0, 31 * 86_400.0])
    func aTimeTooFarPastOrAheadIsRefused422NamingSendAt(_ offset: Double) async throws {
        let api = InMemoryAPI()
        let send = try api.key(role: .send)
        let text = ScheduledTime.utcText(Date().addingTimeInterval(offset))
        try await api.test { client async throws in
            let r = try await client.call(.post, "/v1/jobs", token: send, json: Self.job(sendAt: text))
            #expect(r.status == 422, "\(r.text)")
            #expect(try object(r.text)["field"] as? String == "sendAt")
        }
        #expect(api.jobs.entries.isEmpty)
    }

    @Test func aSendAtThatIsNotATimeIsRefusedNamingSendAt() async throws {
        let api = InMemoryAPI()
        let send = try api.key(role: .send)
        try await api.test { client async throws in
            let r = try await client.call(.post, "/v1/jobs", token: send, json: Self.job(sendAt: "2026-12-01 09:00"))
            #expect(r.status == 400, "\(r.text)")
            #expect(try object(r.text)["field"] as? String == "sendAt")
        }
    }

    @Test func aDeviceRegistersItsTimeZoneAndAnUnknownOneIsRefusedNamingIt() async throws {
        let api = InMemoryAPI()
        let admin = try api.key(role: .admin)
        let alice = try api.userToken(user: "alice")
        try await api.test { client async throws in
            let put = try await client.call(
                .put, "/v1/devices", token: alice,
                json: #"{"platform":"android","token":"fcm-1","timeZone":"Asia/Kolkata"}"#)
            #expect(put.status == 200, "\(put.text)")
            #expect(try object(put.text)["timeZone"] as? String == "Asia/Kolkata")
            let listed = try await client.call(.get, "/v1/users/alice/devices", token: admin)
            let devices = try #require(try object(listed.text)["devices"] as? [[String: Any]])
            #expect(devices.first?["timeZone"] as? String == "Asia/Kolkata")
            let bad = try await client.call(
                .put, "/v1/devices", token: alice, json: #"{"platform":"android","token":"fcm-2","timeZone":"CEST"}"#)
            #expect(bad.status == 400, "\(bad.text)")
            #expect(try object(bad.text)["field"] as? String == "timeZone")
        }
    }

    @Test func aLocalTimeJobIsAcceptedAndABadTimeNamed() async throws {
        let api = InMemoryAPI()
        let send = try api.key(role: .send)
        try await api.test { client async throws in
            let ok = try await client.call(
                .post, "/v1/jobs", token: send,
                json:
                    #"{"app":"app1","recipients":["005A"],"notification":{"title":"Hi"},"deliverAtLocalTime":"09:00"}"#)
            #expect(ok.status == 202, "\(ok.text)")
            let bad = try await client.call(
                .post, "/v1/jobs", token: send,
                json: #"{"app":"app1","recipients":["005A"],"notification":{"title":"Hi"},"deliverAtLocalTime":"9am"}"#)
            #expect(bad.status == 400, "\(bad.text)")
            #expect(try object(bad.text)["field"] as? String == "deliverAtLocalTime")
        }
        #expect(api.jobs.jobs().first?.deliverAtLocalTime == LocalDeliveryTime("09:00"))
    }

    @Test func cancelAnswers200ThenTheJobReadsCancelled404Unknown409Finished() async throws {
        let api = InMemoryAPI()
        let send = try api.key(role: .send)
        let read = try api.key(role: .read)
        let other = try api.key(org: "orgB", role: .send)
        let text = ScheduledTime.utcText(Date().addingTimeInterval(600))
        try await api.test { client async throws in
            let created = try await client.call(
                .post, "/v1/jobs", token: send, json: Self.job(sendAt: text),
                headers: [HTTPField.Name("Idempotency-Key")!: "s-1"])
            #expect(created.status == 202)
            // A read key may look, not cancel; another org does not see the job.
            #expect(try await client.call(.delete, "/v1/jobs/s-1", token: read).status == 403)
            #expect(try await client.call(.delete, "/v1/jobs/s-1", token: other).status == 404)
            #expect(try await client.call(.delete, "/v1/jobs/nope", token: send).status == 404)
            let cancelled = try await client.call(.delete, "/v1/jobs/s-1", token: send)
            #expect(cancelled.status == 200, "\(cancelled.text)")
            #expect(try object(cancelled.text)["state"] as? String == "cancelled")
            #expect(try object(cancelled.text)["id"] as? String == "s-1")
            let status = try await client.call(.get, "/v1/jobs/s-1", token: read)
            #expect(try object(status.text)["state"] as? String == "cancelled")
        }
        // A finished job cannot be cancelled.
        try await api.test { client async throws in
            let created = try await client.call(
                .post, "/v1/jobs", token: send, json: APIHandlerTests.job,
                headers: [HTTPField.Name("Idempotency-Key")!: "s-2"])
            #expect(created.status == 202)
            api.jobs.setStatus(org: "orgA", job: "s-2") { $0.state = "done" }
            let refused = try await client.call(.delete, "/v1/jobs/s-2", token: send)
            #expect(refused.status == 409, "\(refused.text)")
            #expect(try object(refused.text)["field"] as? String == "id")
        }
    }
}
