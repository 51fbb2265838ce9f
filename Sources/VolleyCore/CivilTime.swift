import Foundation

// Volley's one reading of time as people write it: the proleptic Gregorian calendar by integer arithmetic
// (`CivilDate`), a wall-clock reading without a zone (`CivilDateTime`), the one rule that turns such a reading in an
// IANA zone into an instant (`CivilTime.instant(of:in:)`), and the one RFC 3339 codec (`RFC3339`). `sendAt`, recurring
// schedules, local-time waves, sync-hint acks, reports and the Salesforce routes all read and write through these.

/// Proleptic Gregorian dates by integer arithmetic (H. Hinnant, "chrono-Compatible Low-Level Date Algorithms":
/// `days_from_civil`, `civil_from_days`), for the readers of RFC 3339 and HTTP dates and for the timestamps written on
/// hot paths, where Foundation's date formatting costs more than the rest of a request's bookkeeping.
public enum CivilDate {
    /// Days from 1970-01-01 to `year`-`month`-`day`.
    public static func days(year: Int, month: Int, day: Int) -> Int {
        let y = month <= 2 ? year - 1 : year
        let era = (y >= 0 ? y : y - 399) / 400
        let yoe = y - era * 400
        let doy = (153 * (month > 2 ? month - 3 : month + 9) + 2) / 5 + day - 1
        let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy
        return era * 146_097 + doe - 719_468
    }

    /// The date `days` after 1970-01-01.
    public static func date(days: Int) -> (year: Int, month: Int, day: Int) {
        let z = days + 719_468
        let era = (z >= 0 ? z : z - 146_096) / 146_097
        let doe = z - era * 146_097
        let yoe = (doe - doe / 1_460 + doe / 36_524 - doe / 146_096) / 365
        let doy = doe - (365 * yoe + yoe / 4 - yoe / 100)
        let mp = (5 * doy + 2) / 153
        let day = doy - (153 * mp + 2) / 5 + 1
        let month = mp < 10 ? mp + 3 : mp - 9
        return (yoe + era * 400 + (month <= 2 ? 1 : 0), month, day)
    }

    /// The number of days in `month` (1–12) of `year`.
    public static func daysIn(month: Int, year: Int) -> Int {
        switch month {
        case 2: return (year % 4 == 0 && year % 100 != 0) || year % 400 == 0 ? 29 : 28
        case 4, 6, 9, 11: return 30
        default: return 31
        }
    }

    /// The day of the week `days` after 1970-01-01 (a Thursday), as `Calendar` numbers them: 1 is Sunday.
    public static func weekday(days: Int) -> Int {
        let r = (days + 4) % 7
        return (r < 0 ? r + 7 : r) + 1
    }
}

/// A wall-clock reading, a date and a time of day to the second, in no zone: what a clock on a wall in some zone
/// shows. Fields outside their ranges carry over as arithmetic does (day 32 of January is 1 February).
public struct CivilDateTime: Sendable, Hashable, CustomStringConvertible {
    public var year: Int
    public var month: Int
    public var day: Int
    public var hour: Int
    public var minute: Int
    public var second: Int

    public init(year: Int, month: Int, day: Int, hour: Int = 0, minute: Int = 0, second: Int = 0) {
        self.year = year
        self.month = month
        self.day = day
        self.hour = hour
        self.minute = minute
        self.second = second
    }

    /// The reading `days` after 1970-01-01 at `hour`:`minute`:`second`.
    public init(days: Int, hour: Int = 0, minute: Int = 0, second: Int = 0) {
        let d = CivilDate.date(days: days)
        self.init(year: d.year, month: d.month, day: d.day, hour: hour, minute: minute, second: second)
    }

    /// Days from 1970-01-01 to this reading's date.
    public var days: Int { CivilDate.days(year: year, month: month, day: day) }

    /// The day of the week, as `Calendar` numbers them: 1 is Sunday.
    public var weekday: Int { CivilDate.weekday(days: days) }

    /// Seconds since 1970 of this reading taken as UTC.
    public var secondsAsUTC: Int { days * 86_400 + hour * 3_600 + minute * 60 + second }

    /// `2026-03-29T02:30:00`.
    public var description: String {
        func two(_ v: Int) -> String { v < 10 ? "0\(v)" : "\(v)" }
        let y = String(year)
        return String(repeating: "0", count: max(0, 4 - y.count)) + y + "-\(two(month))-\(two(day))T"
            + "\(two(hour)):\(two(minute)):\(two(second))"
    }
}

/// The rule between wall-clock readings in an IANA zone and instants, the one every zoned time in Volley follows
/// (local-time waves, recurring schedules):
///
/// - a reading that happens once is that instant;
/// - a reading that happens twice (clocks go back: 01:30 on the night New York falls back) is its **first**
///   occurrence, the earlier instant;
/// - a reading that never happens (clocks go forward: 02:30 on the night Berlin springs forward) is **the moment of
///   the change**, the first instant after the gap, whose reading is the first valid one (03:00). A whole skipped day
///   (Pacific/Apia, 30 December 2011) moves every reading of it to the start of the next day.
///
/// Pure: the same reading and zone give the same instant on any machine with the same zone data.
public enum CivilTime {
    /// The instant `wall` names in `zone`, by the rule above.
    public static func instant(of wall: CivilDateTime, in zone: TimeZone) -> Date {
        let w = wall.secondsAsUTC
        func offset(_ t: Int) -> Int { zone.secondsFromGMT(for: Date(timeIntervalSince1970: Double(t))) }
        // The instant lies within 14 h of the reading (offsets run from −12 h to +14 h), and a zone changes its
        // offset at most once in that span: the offsets either side are the only candidates.
        let before = offset(w - 14 * 3_600)
        let after = offset(w + 14 * 3_600)
        let early = w - max(before, after)
        let late = w - min(before, after)
        if offset(early) == max(before, after) { return Date(timeIntervalSince1970: Double(early)) }
        if offset(late) == min(before, after) { return Date(timeIntervalSince1970: Double(late)) }
        // In the gap: the clocks jumped from `before` to `after` between `w - after` (still `before`) and
        // `w - before` (already `after`). The change is found to the second; zone data changes on whole seconds.
        var lo = w - after
        var hi = w - before
        while hi - lo > 1 {
            let mid = lo + (hi - lo) / 2
            if offset(mid) == after { hi = mid } else { lo = mid }
        }
        return Date(timeIntervalSince1970: Double(hi))
    }

    /// The reading a clock in `zone` shows at `instant`, to the second (the fraction dropped).
    public static func wallClock(of instant: Date, in zone: TimeZone) -> CivilDateTime {
        let utc = Int(instant.timeIntervalSince1970.rounded(.down))
        let local = utc + zone.secondsFromGMT(for: instant)
        let days = local >= 0 ? local / 86_400 : (local - 86_399) / 86_400
        let s = local - days * 86_400
        return CivilDateTime(days: days, hour: s / 3_600, minute: s % 3_600 / 60, second: s % 60)
    }
}

/// The one reading of a time zone's name at Volley's doors (schedules, the org's zone, device registrations, user
/// attributes): an IANA tz database name in its `Area/Location` form (`Europe/Berlin`, `America/Indiana/Knox`,
/// `Etc/GMT+5`), or `UTC` or `GMT`, that the system's zone database knows under that very name.
///
/// What `TimeZone(identifier:)` takes besides is refused: offsets (`GMT+5`, `UTC+05:00`, which Foundation makes
/// zones of its own), abbreviations (`PST`, `CET`: Foundation maps some to a city, and the same letters mean different
/// places), `Factory` (tzdata's zone for "not set yet"), and the tz database's older names outside the areas below
/// (`US/Pacific`, `Japan`; their `Area/Location` twins are taken). Case matters, as in the tz database.
public enum IANAZone {
    /// The tz database's areas (its region files, and `Etc` for the fixed offsets).
    public static let areas: Set<Substring> = [
        "Africa", "America", "Antarctica", "Arctic", "Asia", "Atlantic", "Australia", "Europe", "Indian", "Pacific",
        "Etc",
    ]

    /// The longest name taken; the tz database's longest is 32 bytes.
    public static let maxBytes = 64

    /// The zone `name` names, or nil when it is not an IANA zone name the system knows (see the type).
    public static func named(_ name: String) -> TimeZone? {
        guard !name.isEmpty, name.utf8.count <= maxBytes else { return nil }
        if name == "UTC" || name == "GMT" { return TimeZone(identifier: name) }
        guard let slash = name.firstIndex(of: "/"), areas.contains(name[..<slash]) else { return nil }
        guard let zone = TimeZone(identifier: name), zone.identifier == name else { return nil }
        return zone
    }

    /// The problem to answer for `name`, or nil when `named(_:)` takes it.
    public static func problem(_ name: String) -> String? {
        named(name) == nil
            ? "'\(name.prefix(maxBytes))' is not an IANA time zone; use its Area/Location name (Europe/Berlin) or UTC"
            : nil
    }
}

/// RFC 3339 `date-time` (§5.6), the one form Volley reads and writes instants in: `sendAt`, schedules' `start` and
/// `end`, sync-hint acks' `upTo`, reports, and the Salesforce routes' dates.
///
/// Reading is strict: `YYYY-MM-DDTHH:MM:SS[.fraction](Z|±HH:MM)`, every field in range (the day within its month),
/// `T` and `Z` in either case (§5.6 allows lower case), any number of fraction digits (nanoseconds kept). Refused,
/// each with its reason: a time without an offset (its instant would depend on where it is read), an offset without
/// its colon, a space for `T`, `24:00`, and a leap second (`:60`), which an instant since 1970 cannot hold.
/// `-00:00` reads as UTC (§4.3). Writing is always UTC with `Z`.
public enum RFC3339 {
    /// Why a text is not an RFC 3339 time: `reason` names the part and `position` the 0-based byte where reading
    /// stopped.
    public struct ParseError: Error, Sendable, Hashable, CustomStringConvertible {
        public var reason: String
        public var position: Int
        public init(_ reason: String, at position: Int) {
            self.reason = reason
            self.position = position
        }
        public var description: String { "not an RFC 3339 time: \(reason)" }
    }

    /// Which forms of the offset a reader takes besides `Z`.
    public enum Offsets: Sendable {
        /// RFC 3339's own: `±HH:MM`.
        case rfc3339
        /// `±HH:MM` or ISO 8601's basic `±HHMM`, as the Salesforce Mobile SDKs write their dates
        /// (`yyyy-MM-dd'T'HH:mm:ss.SSSZ`, e.g. `2015-02-05T13:12:03.956-0800`), for the Salesforce-compatible routes.
        case rfc3339OrBasic
    }

    /// The instant `text` names.
    public static func parse(_ text: String, offsets: Offsets = .rfc3339) throws(ParseError) -> Date {
        var copy = text
        let result = copy.withUTF8 { parse(bytes: $0, offsets: offsets) }
        return try result.get()
    }

    /// The instant `text` names, nil when it is not an RFC 3339 time.
    public static func date(_ text: String) -> Date? { try? parse(text) }

    private static func parse(bytes b: UnsafeBufferPointer<UInt8>, offsets: Offsets) -> Result<Date, ParseError> {
        var i = 0
        func fail(_ reason: String) -> Result<Date, ParseError> { .failure(ParseError(reason, at: i)) }
        func digits(_ n: Int) -> Int? {
            guard i + n <= b.count else { return nil }
            var v = 0
            for k in i..<(i + n) {
                guard b[k] >= 0x30, b[k] <= 0x39 else { return nil }
                v = v * 10 + Int(b[k] - 0x30)
            }
            i += n
            return v
        }
        func take(_ c: UInt8, or lower: UInt8? = nil) -> Bool {
            guard i < b.count, b[i] == c || b[i] == lower else { return false }
            i += 1
            return true
        }
        guard let year = digits(4) else { return fail("expected a 4-digit year") }
        guard take(0x2D) else { return fail("expected '-' after the year") }
        guard let month = digits(2) else { return fail("expected a 2-digit month") }
        guard take(0x2D) else { return fail("expected '-' after the month") }
        guard let day = digits(2) else { return fail("expected a 2-digit day") }
        guard take(0x54, or: 0x74) else { return fail("expected 'T' between the date and the time") }
        guard let hour = digits(2) else { return fail("expected a 2-digit hour") }
        guard take(0x3A) else { return fail("expected ':' after the hour") }
        guard let minute = digits(2) else { return fail("expected a 2-digit minute") }
        guard take(0x3A) else { return fail("expected ':' after the minute (seconds are required)") }
        guard let second = digits(2) else { return fail("expected 2-digit seconds") }
        guard (1...12).contains(month) else { return .failure(ParseError("month \(month) is not 01–12", at: 5)) }
        let monthDays = CivilDate.daysIn(month: month, year: year)
        guard (1...monthDays).contains(day) else {
            return .failure(ParseError("day \(day) is not 01–\(monthDays) in that month", at: 8))
        }
        guard hour <= 23 else { return .failure(ParseError("hour \(hour) is not 00–23", at: 11)) }
        guard minute <= 59 else { return .failure(ParseError("minute \(minute) is not 00–59", at: 14)) }
        guard second <= 59 else {
            return .failure(ParseError("second \(second) is not 00–59 (leap seconds are not kept)", at: 17))
        }
        var nanoseconds = 0
        if take(0x2E) {
            let start = i
            var scale = 100_000_000
            while i < b.count, b[i] >= 0x30, b[i] <= 0x39 {
                nanoseconds += Int(b[i] - 0x30) * scale
                scale /= 10
                i += 1
            }
            if i == start { return fail("expected digits after '.'") }
        }
        var offset = 0
        if take(0x5A, or: 0x7A) {
            offset = 0
        } else if i < b.count, b[i] == 0x2B || b[i] == 0x2D {
            let sign = b[i] == 0x2D ? -1 : 1
            i += 1
            let expected =
                offsets == .rfc3339 ? "expected the offset as ±HH:MM" : "expected the offset as ±HH:MM or ±HHMM"
            guard let oh = digits(2) else { return fail(expected) }
            let colon = take(0x3A)
            guard colon || offsets == .rfc3339OrBasic, let om = digits(2) else { return fail(expected) }
            guard oh <= 23, om <= 59 else { return fail("offset \(oh):\(om) is out of range") }
            offset = sign * (oh * 3_600 + om * 60)
        } else {
            return fail("expected an offset, Z or ±HH:MM")
        }
        guard i == b.count else { return fail("unexpected text after the offset") }
        let whole = CivilDate.days(year: year, month: month, day: day) * 86_400 + hour * 3_600 + minute * 60 + second
        return .success(Date(timeIntervalSince1970: Double(whole - offset) + Double(nanoseconds) / 1e9))
    }

    /// How many digits of a second `format` writes.
    public enum Precision: Sendable {
        /// `2026-11-27T08:00:00Z` (what `Date.ISO8601Format()` writes).
        case seconds
        /// `2026-11-27T08:00:00.000Z` (status reads, reports, the Salesforce routes).
        case milliseconds
    }

    /// `date` in UTC, truncated to `precision`: `2026-11-27T08:00:00Z` or `2026-11-27T08:00:00.250Z`.
    public static func format(_ date: Date, _ precision: Precision = .seconds) -> String {
        // To the microsecond first, so an instant read from `…:00.250Z` (stored as a Double since 2001) writes 250.
        let micros = Int64((date.timeIntervalSince1970 * 1_000_000).rounded())
        let millis = micros >= 0 ? micros / 1_000 : (micros - 999) / 1_000
        let total = Int(millis >= 0 ? millis / 1_000 : (millis - 999) / 1_000)
        let fraction = Int(millis - Int64(total) * 1_000)
        let days = total >= 0 ? total / 86_400 : (total - 86_399) / 86_400
        let second = total - days * 86_400
        let d = CivilDate.date(days: days)
        var digits = 1
        var rest = abs(d.year) / 10
        while rest > 0 {
            digits += 1
            rest /= 10
        }
        let yearWidth = max(4, digits) + (d.year < 0 ? 1 : 0)
        let length = yearWidth + 16 + (precision == .milliseconds ? 4 : 0)
        // Written in place: the String is the only allocation (the API stamps every job POST with one).
        return String(unsafeUninitializedCapacity: length) { out in
            func put(_ value: Int, at index: Int, width: Int) {
                var v = value
                for k in stride(from: index + width - 1, through: index, by: -1) {
                    out[k] = 0x30 + UInt8(v % 10)
                    v /= 10
                }
            }
            if d.year < 0 {
                out[0] = 0x2D
                put(-d.year, at: 1, width: yearWidth - 1)
            } else {
                put(d.year, at: 0, width: yearWidth)
            }
            var i = yearWidth
            out[i] = 0x2D
            put(d.month, at: i + 1, width: 2)
            out[i + 3] = 0x2D
            put(d.day, at: i + 4, width: 2)
            out[i + 6] = 0x54
            put(second / 3_600, at: i + 7, width: 2)
            out[i + 9] = 0x3A
            put(second % 3_600 / 60, at: i + 10, width: 2)
            out[i + 12] = 0x3A
            put(second % 60, at: i + 13, width: 2)
            i += 15
            if precision == .milliseconds {
                out[i] = 0x2E
                put(fraction, at: i + 1, width: 3)
                i += 4
            }
            out[i] = 0x5A
            return i + 1
        }
    }
}

extension RFC3339 {
    /// Dates in `Codable` JSON written by `format` at `precision`.
    public static func encodingStrategy(_ precision: Precision = .seconds) -> JSONEncoder.DateEncodingStrategy {
        .custom { date, encoder in
            var c = encoder.singleValueContainer()
            try c.encode(format(date, precision))
        }
    }

    /// Dates in `Codable` JSON read by `parse`; the decoding error carries its reason.
    public static let decodingStrategy: JSONDecoder.DateDecodingStrategy = .custom { decoder in
        let c = try decoder.singleValueContainer()
        let text = try c.decode(String.self)
        do throws(ParseError) { return try parse(text) } catch {
            throw DecodingError.dataCorruptedError(in: c, debugDescription: "\(error): \(text)")
        }
    }
}
