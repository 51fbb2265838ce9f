import Foundation
import Testing
import VolleyCore
import VolleyTestTags

/// `CivilTime`: the one rule from a wall-clock reading in a zone to an instant, on real zones: a reading skipped by a
/// change is the moment of the change, a reading that happens twice is its first occurrence.
@Suite(.tags(.unit)) struct CivilTimeTests {
    static func wall(_ text: String) -> CivilDateTime {
        let p = text.split(whereSeparator: { "-T:".contains($0) }).map { Int($0)! }
        return CivilDateTime(year: p[0], month: p[1], day: p[2], hour: p[3], minute: p[4], second: p[5])
    }

    @Test(arguments: [
        // Berlin springs forward on 2026-03-29 at 02:00 CET → 03:00 CEST.
        ("Europe/Berlin", "2026-03-29T01:59:59", "2026-03-29T00:59:59Z"),
        ("Europe/Berlin", "2026-03-29T02:00:00", "2026-03-29T01:00:00Z"),
        ("Europe/Berlin", "2026-03-29T02:30:00", "2026-03-29T01:00:00Z"),
        ("Europe/Berlin", "2026-03-29T02:59:59", "2026-03-29T01:00:00Z"),
        ("Europe/Berlin", "2026-03-29T03:00:00", "2026-03-29T01:00:00Z"),
        ("Europe/Berlin", "2026-03-29T03:30:00", "2026-03-29T01:30:00Z"),
        // Berlin falls back on 2026-10-25 at 03:00 CEST → 02:00 CET: 02:00–02:59 happen twice, the first is taken.
        ("Europe/Berlin", "2026-10-25T01:59:59", "2026-10-24T23:59:59Z"),
        ("Europe/Berlin", "2026-10-25T02:00:00", "2026-10-25T00:00:00Z"),
        ("Europe/Berlin", "2026-10-25T02:30:00", "2026-10-25T00:30:00Z"),
        ("Europe/Berlin", "2026-10-25T03:00:00", "2026-10-25T02:00:00Z"),
        // New York: 2026-03-08 02:00 EST → 03:00 EDT; 2026-11-01 02:00 EDT → 01:00 EST.
        ("America/New_York", "2026-03-08T02:30:00", "2026-03-08T07:00:00Z"),
        ("America/New_York", "2026-03-08T03:00:00", "2026-03-08T07:00:00Z"),
        ("America/New_York", "2026-11-01T01:30:00", "2026-11-01T05:30:00Z"),
        ("America/New_York", "2026-11-01T02:00:00", "2026-11-01T07:00:00Z"),
        // Lord Howe moves by half an hour: 2026-10-04 02:00 (+10:30) → 02:30 (+11);
        // 2026-04-05 02:00 (+11) → 01:30 (+10:30), so 01:30–01:59 happen twice.
        ("Australia/Lord_Howe", "2026-10-04T02:15:00", "2026-10-03T15:30:00Z"),
        ("Australia/Lord_Howe", "2026-10-04T02:30:00", "2026-10-03T15:30:00Z"),
        ("Australia/Lord_Howe", "2026-10-04T01:59:00", "2026-10-03T15:29:00Z"),
        ("Australia/Lord_Howe", "2026-04-05T01:45:00", "2026-04-04T14:45:00Z"),
        ("Australia/Lord_Howe", "2026-04-05T02:00:00", "2026-04-04T15:30:00Z"),
        // Samoa skipped 30 December 2011 (−10 → +14 at midnight): every reading of it is the moment of the change,
        // 31 December 00:00 local.
        ("Pacific/Apia", "2011-12-29T23:59:59", "2011-12-30T09:59:59Z"),
        ("Pacific/Apia", "2011-12-30T00:00:00", "2011-12-30T10:00:00Z"),
        ("Pacific/Apia", "2011-12-30T09:00:00", "2011-12-30T10:00:00Z"),
        ("Pacific/Apia", "2011-12-30T23:59:59", "2011-12-30T10:00:00Z"),
        ("Pacific/Apia", "2011-12-31T00:00:00", "2011-12-30T10:00:00Z"),
        ("Pacific/Apia", "2011-12-31T09:00:00", "2011-12-30T19:00:00Z"),
        // No change at all, and a half-hour zone.
        ("UTC", "2026-06-10T12:00:00", "2026-06-10T12:00:00Z"),
        ("Asia/Kolkata", "2026-06-10T09:00:00", "2026-06-10T03:30:00Z"),
    ])
    func aWallClockReadingIsOneInstant(_ zone: String, _ reading: String, _ expected: String) throws {
        let instant = CivilTime.instant(of: Self.wall(reading), in: try #require(TimeZone(identifier: zone)))
        #expect(RFC3339.format(instant) == expected)
    }

    /// Every instant reads back to itself, except in the second pass of a repeated hour, which reads back to the
    /// first; the reading is the same either way.
    @Test(arguments: ["Europe/Berlin", "America/New_York", "Australia/Lord_Howe", "Pacific/Apia", "Asia/Kolkata"])
    func readingsRoundTrip(_ id: String) throws {
        let zone = try #require(TimeZone(identifier: id))
        // A year and more around Samoa's skipped day, every 7 min 13 s.
        for t in stride(from: 1_293_840_000, to: 1_335_000_000, by: 433) {
            let instant = Date(timeIntervalSince1970: Double(t))
            let reading = CivilTime.wallClock(of: instant, in: zone)
            let back = CivilTime.instant(of: reading, in: zone)
            #expect(back <= instant && instant.timeIntervalSince(back) <= 3_600, "\(id) \(t)")
            #expect(CivilTime.wallClock(of: back, in: zone) == reading, "\(id) \(t)")
        }
    }

    @Test func weekdaysAreCalendarsNumbers() {
        var utc = Calendar(identifier: .gregorian)
        utc.timeZone = TimeZone(identifier: "UTC")!
        for days in stride(from: -146_097, through: 146_097, by: 97) {
            let date = Date(timeIntervalSince1970: Double(days * 86_400))
            #expect(CivilDate.weekday(days: days) == utc.component(.weekday, from: date), "\(days)")
        }
        #expect(Self.wall("2026-11-27T00:00:00").weekday == 6) // a Friday
    }

    @Test func daysAndDatesAreInverse() {
        for days in stride(from: -146_097 * 2, through: 146_097 * 2, by: 7) {
            let d = CivilDate.date(days: days)
            #expect(CivilDate.days(year: d.year, month: d.month, day: d.day) == days)
        }
        #expect(CivilDate.date(days: 0) == (1970, 1, 1))
        #expect(CivilDate.date(days: 11_016) == (2000, 2, 29))
        #expect(CivilDate.days(year: 2026, month: 11, day: 27) == 20_784)
    }
}

/// `RFC3339`: what is read (and why the rest is not), and what is written.
@Suite(.tags(.unit)) struct RFC3339Tests {
    @Test(arguments: [
        ("2026-11-27T09:00:00Z", 1_795_770_000.0),
        ("2026-11-27T10:00:00+01:00", 1_795_770_000.0),
        ("2026-11-27T04:00:00-05:00", 1_795_770_000.0),
        ("2026-11-27T14:30:00+05:30", 1_795_770_000.0),
        ("2026-11-27T09:00:00-00:00", 1_795_770_000.0),
        ("2026-11-27t09:00:00z", 1_795_770_000.0),
        ("2026-11-27T09:00:00.250Z", 1_795_770_000.25),
        ("2026-11-27T10:00:00.5+01:00", 1_795_770_000.5),
        ("2026-11-27T09:00:00.123456789123Z", 1_795_770_000.123456789),
        ("2024-02-29T00:00:00Z", 1_709_164_800.0),
        ("1969-12-31T23:59:59Z", -1.0),
    ])
    func reads(_ text: String, _ epoch: Double) throws {
        let date = try RFC3339.parse(text)
        #expect(abs(date.timeIntervalSince1970 - epoch) < 0.000_001)
    }

    @Test(arguments: [
        ("2026-11-27T09:00:00", "expected an offset, Z or ±HH:MM", 19),
        ("2026-11-27 09:00:00Z", "expected 'T' between the date and the time", 10),
        ("2026-11-27T09:00Z", "expected ':' after the minute (seconds are required)", 16),
        ("2026-13-01T00:00:00Z", "month 13 is not 01–12", 5),
        ("2026-02-29T00:00:00Z", "day 29 is not 01–28 in that month", 8),
        ("2026-06-31T00:00:00Z", "day 31 is not 01–30 in that month", 8),
        ("2026-11-27T24:00:00Z", "hour 24 is not 00–23", 11),
        ("2026-11-27T09:60:00Z", "minute 60 is not 00–59", 14),
        ("2026-12-31T23:59:60Z", "second 60 is not 00–59 (leap seconds are not kept)", 17),
        ("2026-11-27T09:00:00+0100", "expected the offset as ±HH:MM", 22),
        ("2026-11-27T09:00:00+24:00", "offset 24:0 is out of range", 25),
        ("2026-11-27T09:00:00.Z", "expected digits after '.'", 20),
        ("2026-11-27T09:00:00Z ", "unexpected text after the offset", 20),
        ("20261127T090000Z", "expected '-' after the year", 4),
        ("tomorrow", "expected a 4-digit year", 0),
        ("", "expected a 4-digit year", 0),
    ])
    func refusesWithItsReason(_ text: String, _ reason: String, _ position: Int) {
        #expect(throws: RFC3339.ParseError(reason, at: position)) { try RFC3339.parse(text) }
        #expect(RFC3339.date(text) == nil)
    }

    @Test func theErrorSaysWhatItIs() {
        let error = RFC3339.ParseError("hour 24 is not 00–23", at: 11)
        #expect("\(error)" == "not an RFC 3339 time: hour 24 is not 00–23")
    }

    @Test func writesWhatFoundationWritesToTheSecond() throws {
        var state: UInt64 = 0x9E37_79B9_7F4A_7C15
        var instants: [Double] = [0, -1, 86_399, 86_400, 951_782_400, 1_795_740_000.999, -2_208_988_800, 4_102_444_800]
        for _ in 0..<20_000 {
            state = state &* 6_364_136_223_846_793_005 &+ 1_442_695_040_888_963_407
            // From 1601 to 2338.
            instants.append(Double(Int64(state >> 30) % 11_644_473_600) * (state & 1 == 0 ? 1 : -1) + 0.25)
        }
        for t in instants {
            let date = Date(timeIntervalSince1970: t)
            #expect(RFC3339.format(date) == date.ISO8601Format(), "\(t)")
            let whole = Date(timeIntervalSince1970: t.rounded(.down))
            #expect(try RFC3339.parse(RFC3339.format(date)) == whole, "\(t)")
        }
    }

    @Test func writesMillisecondsTruncated() throws {
        func ms(_ t: Double) -> String { RFC3339.format(Date(timeIntervalSince1970: t), .milliseconds) }
        #expect(ms(1_795_770_000.25) == "2026-11-27T09:00:00.250Z")
        #expect(ms(1_795_770_000.9996) == "2026-11-27T09:00:00.999Z")
        #expect(ms(-0.5) == "1969-12-31T23:59:59.500Z")
        for text in ["2019-06-25T18:24:31.123Z", "2019-06-25T18:24:31.001Z", "2019-06-25T18:24:31.999Z"] {
            #expect(RFC3339.format(try RFC3339.parse(text), .milliseconds) == text)
        }
    }

    @Test func codableDatesGoThroughTheCodec() throws {
        struct Stamp: Codable, Equatable { var at: Date }
        let e = JSONEncoder()
        e.dateEncodingStrategy = RFC3339.encodingStrategy(.milliseconds)
        let d = JSONDecoder()
        d.dateDecodingStrategy = RFC3339.decodingStrategy
        let stamp = Stamp(at: Date(timeIntervalSince1970: 1_795_770_000.25))
        #expect(String(decoding: try e.encode(stamp), as: UTF8.self) == #"{"at":"2026-11-27T09:00:00.250Z"}"#)
        #expect(try d.decode(Stamp.self, from: e.encode(stamp)) == stamp)
        #expect(throws: DecodingError.self) { try d.decode(Stamp.self, from: Data(#"{"at":"2026-11-27"}"#.utf8)) }
    }

    /// Years past 9999 take the digits they need; earlier ones keep four.
    @Test func yearsWiderThanFourDigitsAreWrittenWhole() {
        let y10k = Double(CivilDate.days(year: 10_000, month: 1, day: 2)) * 86_400 + 3_723
        #expect(RFC3339.format(Date(timeIntervalSince1970: y10k)) == "10000-01-02T01:02:03Z")
        let y1 = Double(CivilDate.days(year: 1, month: 1, day: 1)) * 86_400
        #expect(RFC3339.format(Date(timeIntervalSince1970: y1), .milliseconds) == "0001-01-01T00:00:00.000Z")
    }

    /// ISO 8601's basic offset (`±HHMM`) only where a reader asks for it (the Salesforce routes).
    @Test func theBasicOffsetIsReadOnlyWhenAskedFor() throws {
        #expect(
            try RFC3339.parse("2026-11-27T10:00:00.000+0100", offsets: .rfc3339OrBasic).timeIntervalSince1970
                == 1_795_770_000)
        #expect(
            try RFC3339.parse("2026-11-27T04:00:00-0500", offsets: .rfc3339OrBasic).timeIntervalSince1970
                == 1_795_770_000)
        #expect(
            try RFC3339.parse("2026-11-27T10:00:00+01:00", offsets: .rfc3339OrBasic).timeIntervalSince1970
                == 1_795_770_000)
        #expect(RFC3339.date("2026-11-27T10:00:00+0100") == nil)
        #expect(throws: RFC3339.ParseError.self) {
            try RFC3339.parse("2026-11-27T10:00:00+01", offsets: .rfc3339OrBasic)
        }
        #expect(throws: RFC3339.ParseError.self) {
            try RFC3339.parse("2026-11-27T10:00:00+010", offsets: .rfc3339OrBasic)
        }
    }
}
