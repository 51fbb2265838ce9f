import Foundation
import Testing
import VolleyCore
import VolleyTestTags

/// What a schedule's body may say (`POST /v1/schedules`, `volley schedules create`): the zone by its IANA name, and a
/// job each run can send.
@Suite(.tags(.unit)) struct ScheduleBodyTests {
    let now = Date(timeIntervalSince1970: 1_800_000_000)

    func body(
        zone: String = "Europe/Berlin", job: String = #"{"app":"a1","recipients":["u"],"notification":{"title":"Hi"}}"#
    )
        -> JSONValue
    {
        let text =
            #"{"id":"s1","start":"2030-01-07T09:00:00+01:00","frequency":"daily","timeZone":"\#(zone)","#
            + #""job":\#(job)}"#
        return (try? JSONValue(parsing: Data(text.utf8))) ?? .null
    }

    func refusal(_ body: JSONValue) -> ScheduleError? {
        do throws(ScheduleError) {
            _ = try Schedule(body: body, org: "o1", now: now)
            return nil
        } catch {
            return error
        }
    }

    @Test(arguments: [
        "GMT+5", "PST", "Factory", "UTC+05:00", "GMT+0500", "US/Pacific", "europe/berlin", "Mars/Base", "",
    ])
    func aZoneThatIsNoIANANameIsRefusedNamingTimeZone(_ zone: String) {
        #expect(refusal(body(zone: zone))?.field == "timeZone", "\(zone)")
    }

    @Test(arguments: ["Europe/Berlin", "America/Indiana/Knox", "Asia/Kolkata", "Etc/GMT+5", "UTC", "GMT"])
    func ianaNamesAreTaken(_ zone: String) {
        #expect(refusal(body(zone: zone)) == nil, "\(zone)")
    }

    /// A schedule stored before the rule was kept stays readable, so it can be listed and deleted.
    @Test func aStoredScheduleIsReadByTheRulesItWasMadeUnder() throws {
        guard case .object(var o) = body() else { throw ScheduleError("body", "not an object") }
        o["timeZone"] = .string("PST")
        o["createdAt"] = .string("2027-01-01T00:00:00Z")
        let s = try Schedule(definition: .object(o), org: "o1")
        #expect(s.recurrence.timeZone.secondsFromGMT(for: now) == -8 * 3_600)
    }
}

/// The one reading of a zone's name at Volley's doors.
@Suite(.tags(.unit)) struct IANAZoneTests {
    @Test func areaLocationNamesUTCAndGMTOnly() {
        for zone in ["Europe/Berlin", "America/Argentina/Buenos_Aires", "Etc/GMT-14", "Etc/UTC", "UTC", "GMT"] {
            #expect(IANAZone.named(zone) != nil, "\(zone)")
        }
        for zone in ["GMT+5", "PST", "CET", "Factory", "GMT+0500", "Japan", "Europe/Berlin ", "Europe/Nowhere", ""] {
            #expect(IANAZone.named(zone) == nil, "\(zone)")
            #expect(IANAZone.problem(zone)?.contains("IANA") == true, "\(zone)")
        }
        #expect(IANAZone.named(String(repeating: "A", count: 100)) == nil)
    }
}
