import Foundation
import Testing
import VolleyCore
import VolleyTestTags

/// `deliverAtLocalTime`: each recipient's due instant, across daylight-saving changes both ways and in half-hour
/// zones.
@Suite(.tags(.unit)) struct LocalDeliveryTimeTests {
    func utc(_ text: String) -> Date { ScheduledTime(text)!.date }
    func zone(_ id: String) -> TimeZone { TimeZone(identifier: id)! }
    func due(_ hhmm: String, _ zoneID: String, after: String) -> String {
        ScheduledTime.utcText(LocalDeliveryTime(hhmm)!.due(in: zone(zoneID), after: utc(after)))
    }

    @Test func readsHHMM() {
        #expect(LocalDeliveryTime("09:05")?.description == "09:05")
        #expect(LocalDeliveryTime("23:59") != nil && LocalDeliveryTime("00:00") != nil)
        for bad in ["9:05", "24:00", "12:60", "12-00", "12:000", "", "ab:cd"] { #expect(LocalDeliveryTime(bad) == nil) }
    }

    @Test(arguments: [
        // Later today, already past today (tomorrow), exactly now.
        ("09:00", "Europe/Berlin", "2026-06-10T05:00:00Z", "2026-06-10T07:00:00.000Z"),
        ("09:00", "Europe/Berlin", "2026-06-10T08:00:00Z", "2026-06-11T07:00:00.000Z"),
        ("09:00", "Europe/Berlin", "2026-06-10T07:00:00Z", "2026-06-10T07:00:00.000Z"),
        // Half-hour zone, no daylight saving.
        ("09:00", "Asia/Kolkata", "2026-06-10T00:00:00Z", "2026-06-10T03:30:00.000Z"),
        ("09:00", "Asia/Kolkata", "2026-06-10T04:00:00Z", "2026-06-11T03:30:00.000Z"),
        // Berlin springs forward on 2026-03-29 at 02:00 → 03:00: 02:30 does not exist; the next valid minute, 03:00.
        ("02:30", "Europe/Berlin", "2026-03-28T23:30:00Z", "2026-03-29T01:00:00.000Z"),
        ("03:00", "Europe/Berlin", "2026-03-28T23:30:00Z", "2026-03-29T01:00:00.000Z"),
        ("09:00", "Europe/Berlin", "2026-03-28T23:30:00Z", "2026-03-29T07:00:00.000Z"),
        // Berlin falls back on 2026-10-25 at 03:00 → 02:00: 02:30 happens twice; the first (CEST) is taken.
        ("02:30", "Europe/Berlin", "2026-10-24T22:00:00Z", "2026-10-25T00:30:00.000Z"),
        ("09:00", "Europe/Berlin", "2026-10-24T22:00:00Z", "2026-10-25T08:00:00.000Z"),
        // New York springs forward on 2026-03-08 at 02:00 → 03:00.
        ("02:30", "America/New_York", "2026-03-08T05:00:00Z", "2026-03-08T07:00:00.000Z"),
        ("09:00", "America/New_York", "2026-03-08T05:00:00Z", "2026-03-08T13:00:00.000Z"),
        // New York falls back on 2026-11-01 at 02:00 → 01:00: 01:30 happens twice; the first (EDT) is taken.
        ("01:30", "America/New_York", "2026-11-01T04:00:00Z", "2026-11-01T05:30:00.000Z"),
        ("09:00", "America/New_York", "2026-11-01T04:00:00Z", "2026-11-01T14:00:00.000Z"),
    ])
    func dueInstants(_ hhmm: String, _ zoneID: String, _ after: String, _ expected: String) {
        #expect(due(hhmm, zoneID, after: after) == expected)
    }

    @Test func theSecondOccurrenceIsNotSentAgain() {
        // Asked again just after the first 01:30 of New York's fall-back night, the next 01:30 is the next day's.
        #expect(due("01:30", "America/New_York", after: "2026-11-01T05:30:01Z") == "2026-11-02T06:30:00.000Z")
    }
}
