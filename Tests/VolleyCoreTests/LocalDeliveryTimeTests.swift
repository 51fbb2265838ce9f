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
        // Lord Howe springs forward by half an hour on 2026-10-04 at 02:00: 02:15 is the change, 02:30 (+11).
        ("02:15", "Australia/Lord_Howe", "2026-10-03T12:00:00Z", "2026-10-03T15:30:00.000Z"),
        // Samoa skipped 30 December 2011: that day's 09:00 is the change, 31 December 00:00 (+14).
        ("09:00", "Pacific/Apia", "2011-12-29T20:00:00Z", "2011-12-30T10:00:00.000Z"),
    ])
    func dueInstants(_ hhmm: String, _ zoneID: String, _ after: String, _ expected: String) {
        #expect(due(hhmm, zoneID, after: after) == expected)
    }

    @Test func theSecondOccurrenceIsNotSentAgain() {
        // Asked again just after the first 01:30 of New York's fall-back night, the next 01:30 is the next day's.
        #expect(due("01:30", "America/New_York", after: "2026-11-01T05:30:01Z") == "2026-11-02T06:30:00.000Z")
    }

    /// A device's zone is its own, else its user's `timeZone` from the directory, else the org's; a zone the system
    /// does not know counts as none at each step.
    @Test func aDeviceWithoutAZoneTakesItsUsersZoneFromTheDirectory() {
        var waves = LocalTimeWaves(
            time: LocalDeliveryTime("09:00")!, reference: utc("2026-11-27T08:00:00Z"),
            fallbackZone: zone("Europe/Berlin"))
        func device(_ token: String, _ user: UserID, zone: String? = nil) -> Device {
            Device(platform: .ios, token: DeviceToken(token), user: user, timeZone: zone)
        }
        let recipients: [UserID: RecipientContext] = [
            "ada": RecipientContext(attributes: ["timeZone": "Asia/Kolkata", "first_name": "Ada"]),
            "eve": RecipientContext(attributes: ["timeZone": "Mars/Base"]),
        ]
        let devices = [
            device("ada-own-zone", "ada", zone: "America/New_York"), device("ada-no-zone", "ada"),
            device("bob", "bob"), device("eve", "eve"), device("ada-bad-zone", "ada", zone: "Nowhere/Land"),
        ]
        let sent = waves.split(
            devices, recorded: Array(repeating: nil, count: devices.count), now: utc("2026-11-27T08:00:01Z"),
            recipients: recipients)
        // Bob (no zone anywhere) and Eve (a zone nobody knows) are Berlin's, due at 08:00Z.
        #expect(sent.devices.map(\.token.rawValue) == ["bob", "eve"])
        #expect(
            waves.later == [
                utc("2026-11-27T14:00:00Z"): 1, // New York, the device's own
                utc("2026-11-28T03:30:00Z"): 2, // Kolkata, Ada's: her device without a zone and the one with a bad one
            ])
        // Without the directory's attributes, the device without a zone is the org's.
        var plain = LocalTimeWaves(
            time: LocalDeliveryTime("09:00")!, reference: utc("2026-11-27T08:00:00Z"),
            fallbackZone: zone("Europe/Berlin"))
        #expect(plain.due(device("ada-no-zone", "ada")) == utc("2026-11-27T08:00:00Z"))
    }

    @Test func aUsersTimeZoneAttributeMustBeAnIANAZone() {
        #expect(UserAttributes.problems(["timeZone": "Asia/Kolkata"]).isEmpty)
        #expect(
            UserAttributes.problems(["timeZone": "Mars/Base"]) == [
                "attributes.timeZone: 'Mars/Base' is not an IANA time zone; use its Area/Location name "
                    + "(Europe/Berlin) or UTC"
            ])
        // The same rule as every door that takes a zone (`IANAZone`): no offsets, abbreviations or `Factory`.
        for zone in ["GMT+5", "PST", "Factory"] {
            #expect(UserAttributes.problems(["timeZone": zone]).count == 1, "\(zone)")
        }
        #expect(UserAttributes.problems(["timeZone": ""]).count == 1)
    }
}
