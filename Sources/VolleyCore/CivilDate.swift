import Foundation

/// Proleptic Gregorian dates in UTC by integer arithmetic (H. Hinnant, "chrono-Compatible Low-Level Date
/// Algorithms": `days_from_civil`, `civil_from_days`), for the readers of RFC 3339 and HTTP dates and for the
/// timestamps written on hot paths, where Foundation's date formatting costs more than the rest of a request's
/// bookkeeping.
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

    /// `date` as RFC 3339 in UTC to the whole second, `2026-11-27T08:00:00Z` (what `Date.ISO8601Format()` writes,
    /// the fraction dropped), for years 0–9999.
    public static func iso8601Seconds(_ date: Date) -> String {
        let total = Int(date.timeIntervalSince1970.rounded(.down))
        let days = total >= 0 ? total / 86_400 : (total - 86_399) / 86_400
        let second = total - days * 86_400
        let d = Self.date(days: days)
        // Written in place: the String is the only allocation (the API stamps every job POST with one).
        return String(unsafeUninitializedCapacity: 20) { out in
            func put(_ value: Int, at index: Int, width: Int) {
                var v = value
                for k in stride(from: index + width - 1, through: index, by: -1) {
                    out[k] = UInt8(ascii: "0") + UInt8(v % 10)
                    v /= 10
                }
            }
            put(d.year, at: 0, width: 4)
            out[4] = UInt8(ascii: "-")
            put(d.month, at: 5, width: 2)
            out[7] = UInt8(ascii: "-")
            put(d.day, at: 8, width: 2)
            out[10] = UInt8(ascii: "T")
            put(second / 3600, at: 11, width: 2)
            out[13] = UInt8(ascii: ":")
            put(second % 3600 / 60, at: 14, width: 2)
            out[16] = UInt8(ascii: ":")
            put(second % 60, at: 17, width: 2)
            out[19] = UInt8(ascii: "Z")
            return 20
        }
    }
}
