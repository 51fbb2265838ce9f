import Foundation
import HTTPTypes
import Hummingbird
import Testing
import VolleyCore
import VolleyTestDoubles
import VolleyTestTags

@testable import VolleyAPI

/// `POST /v1/schedules` on the in-memory stores: a schedule's job passes the checks of `POST /v1/jobs`, so no
/// schedule is written whose every run a worker would dead-letter; each refusal names `job.<field>`.
@Suite(.tags(.unit)) struct ScheduleRoutesTests {
    /// The providers' preparation as far as these tests need it: the time to live's bounds (`effectiveTTL`, what the
    /// encoders call) and a payload limit.
    static let check = NotificationCheck { _, _, notification, _ in
        _ = try notification.effectiveTTL(reason: "BadExpirationDate")
        if (notification.title?.utf8.count ?? 0) + (notification.body?.utf8.count ?? 0) > 4_000 {
            throw NotificationError("PayloadTooLarge", "the payload is over 4096 bytes")
        }
    }

    static func schedule(job: String, zone: String = "Europe/Berlin") -> String {
        #"{"id":"digest","start":"2030-01-07T09:00:00+01:00","frequency":"daily","timeZone":"\#(zone)","#
            + #""job":\#(job)}"#
    }

    static func job(_ notification: String, extra: String = "") -> String {
        #"{"app":"app1","recipients":["005A"]\#(extra),"notification":\#(notification)}"#
    }

    @Test(arguments: [
        (job(#"{"title":"Hi","ttl":-1}"#), 400, "job.notification.ttl"),
        (job(#"{"title":"Hi","ttl":2419201}"#), 400, "job.notification.ttl"),
        (job(#"{"title":"\#(String(repeating: "x", count: 5000))"}"#), 400, "job.notification"),
        (#"{"app":"app1","recipients":["005A"],"templateId":"nowhere"}"#, 404, "job.templateId"),
        (job(#"{"title":"Hi"}"#, extra: #","sendAt":"2030-01-07T08:00:00Z""#), 400, "job.sendAt"),
        (#"{"app":"app1","notification":{"title":"Hi"}}"#, 400, "job.recipients"),
        (job(#"{"title":"Hi"}"#, extra: #","throttlePerMinute":0"#), 422, "job.throttlePerMinute"),
        (
            #"{"app":"app1","recipients":[{"segment":"none"}],"notification":{"title":"Hi"}}"#, 422,
            "job.recipients[0].segment"
        ),
        (#"{"app":"nope","recipients":["005A"],"notification":{"title":"Hi"}}"#, 404, "job.app"),
    ])
    func aJobPostV1JobsRefusesIsRefusedInASchedule(job: String, status: Int, field: String) async throws {
        let api = InMemoryAPI(onManualClock: true, notificationCheck: Self.check)
        let send = try api.key(role: .send)
        try await api.test { client async throws in
            // The same job on its own is refused by POST /v1/jobs with the same field, less `job.`.
            if field != "job.sendAt" {
                let alone = try await client.call(.post, "/v1/jobs", token: send, json: job)
                #expect(alone.status == status, "\(alone.text)")
                #expect(try object(alone.text)["field"] as? String == String(field.dropFirst(4)), "\(alone.text)")
            }
            let r = try await client.call(.post, "/v1/schedules", token: send, json: Self.schedule(job: job))
            #expect(r.status == status, "\(r.text)")
            #expect(try object(r.text)["field"] as? String == field, "\(r.text)")
        }
        #expect(try await api.schedules.list(org: "orgA").isEmpty)
    }

    @Test func aJobThatPassesIsScheduled() async throws {
        let api = InMemoryAPI(onManualClock: true, notificationCheck: Self.check)
        let send = try api.key(role: .send)
        let admin = try api.key(role: .admin)
        try await api.test { client async throws in
            let template = try await client.call(
                .put, "/v1/templates/welcome", token: admin, json: #"{"notification":{"title":"Hi"}}"#)
            #expect(template.status == 201, "\(template.text)")
            let plain = try await client.call(
                .post, "/v1/schedules", token: send, json: Self.schedule(job: Self.job(#"{"title":"Hi","ttl":60}"#)))
            #expect(plain.status == 201, "\(plain.text)")
            let templated = try await client.call(
                .post, "/v1/schedules", token: send,
                json: Self.schedule(job: #"{"app":"app1","recipients":["005A"],"templateId":"welcome"}"#)
                    .replacingOccurrences(of: #""id":"digest""#, with: #""id":"welcome""#))
            #expect(templated.status == 201, "\(templated.text)")
        }
        #expect(try await api.schedules.list(org: "orgA").map(\.schedule.id) == ["digest", "welcome"])
    }

    /// Zones by their IANA name only, as `/v1/time-zone` and device registration take them.
    @Test(arguments: ["GMT+5", "PST", "Factory"])
    func aZoneThatIsNoIANANameIsA400NamingTimeZone(_ zone: String) async throws {
        let api = InMemoryAPI(onManualClock: true)
        let send = try api.key(role: .send)
        try await api.test { client async throws in
            let r = try await client.call(
                .post, "/v1/schedules", token: send, json: Self.schedule(job: Self.job(#"{"title":"Hi"}"#), zone: zone))
            #expect(r.status == 400, "\(r.text)")
            #expect(try object(r.text)["field"] as? String == "timeZone", "\(r.text)")
        }
        #expect(try await api.schedules.list(org: "orgA").isEmpty)
    }
}
