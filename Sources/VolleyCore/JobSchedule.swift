import Foundation

/// An instant as a job gives it (`sendAt`): RFC 3339 with an explicit offset (`2026-11-27T09:00:00Z`,
/// `2026-11-27T10:00:00.250+01:00`). The caller's text is kept as written, so the job stored on the stream and shown
/// back reads as it was sent; `date` is the instant it names.
public struct ScheduledTime: Sendable, Hashable, Codable, CustomStringConvertible {
    /// The text as the caller wrote it.
    public let text: String
    public let date: Date

    /// Parses RFC 3339 `date-time` (§5.6): `YYYY-MM-DDTHH:MM:SS[.fraction](Z|±HH:MM)`. `T` and `Z` may be lower
    /// case; a leap second (`:60`) is refused, as is a time without an offset (its instant would depend on where it
    /// is read).
    public init?(_ text: String) {
        guard let date = Self.parse(Array(text.utf8)) else { return nil }
        self.text = text
        self.date = date
    }

    public init(from decoder: any Decoder) throws {
        let c = try decoder.singleValueContainer()
        let s = try c.decode(String.self)
        guard let t = ScheduledTime(s) else {
            throw DecodingError.dataCorruptedError(in: c, debugDescription: "not an RFC 3339 time with offset: \(s)")
        }
        self = t
    }

    public func encode(to encoder: any Encoder) throws {
        var c = encoder.singleValueContainer()
        try c.encode(text)
    }

    public var description: String { text }

    /// An instant as RFC 3339 in UTC with milliseconds (`2026-11-27T08:00:00.000Z`), as status reads show due times.
    public static func utcText(_ date: Date) -> String {
        date.ISO8601Format(Date.ISO8601FormatStyle(includingFractionalSeconds: true))
    }

    /// Milliseconds since 1970 (what the schedule's sorted set scores by).
    public var epochMillis: Int64 { Int64((date.timeIntervalSince1970 * 1000).rounded(.down)) }

    private static func parse(_ b: [UInt8]) -> Date? {
        var i = 0
        func digits(_ n: Int) -> Int? {
            guard i + n <= b.count else { return nil }
            var v = 0
            for k in i..<(i + n) {
                guard b[k] >= 48, b[k] <= 57 else { return nil }
                v = v * 10 + Int(b[k] - 48)
            }
            i += n
            return v
        }
        func expect(_ c: Character) -> Bool {
            guard i < b.count, Character(UnicodeScalar(b[i])).lowercased() == c.lowercased() else { return false }
            i += 1
            return true
        }
        guard let year = digits(4), expect("-"), let month = digits(2), expect("-"), let day = digits(2),
            expect("T"), let hour = digits(2), expect(":"), let minute = digits(2), expect(":"),
            let second = digits(2)
        else { return nil }
        guard (1...12).contains(month), day >= 1, day <= daysIn(month: month, year: year), hour <= 23,
            minute <= 59, second <= 59
        else { return nil }
        var fraction = 0.0
        if i < b.count, b[i] == UInt8(ascii: ".") {
            i += 1
            var scale = 0.1
            let start = i
            while i < b.count, b[i] >= 48, b[i] <= 57 {
                fraction += Double(b[i] - 48) * scale
                scale /= 10
                i += 1
            }
            if i == start { return nil }
        }
        var offset = 0
        if expect("Z") {
            offset = 0
        } else if i < b.count, b[i] == UInt8(ascii: "+") || b[i] == UInt8(ascii: "-") {
            let sign = b[i] == UInt8(ascii: "-") ? -1 : 1
            i += 1
            guard let oh = digits(2), expect(":"), let om = digits(2), oh <= 23, om <= 59 else { return nil }
            offset = sign * (oh * 3600 + om * 60)
        } else {
            return nil
        }
        guard i == b.count else { return nil }
        let days = CivilDate.days(year: year, month: month, day: day)
        let seconds = Double(days * 86_400 + hour * 3600 + minute * 60 + second - offset) + fraction
        return Date(timeIntervalSince1970: seconds)
    }

    private static func daysIn(month: Int, year: Int) -> Int {
        switch month {
        case 2: return (year % 4 == 0 && year % 100 != 0) || year % 400 == 0 ? 29 : 28
        case 4, 6, 9, 11: return 30
        default: return 31
        }
    }
}

/// When a job read from the stream is sent: now, later (parked in the schedule until its `sendAt`), or never (its
/// `sendAt` is refused). A pure decision on the worker's clock.
public enum JobTiming: Sendable, Hashable {
    case now
    /// Park the job until this instant.
    case later(Date)
    case refused(JobRejection)

    /// How far in the past a `sendAt` may be and still be sent at once: a job that took a little while to reach the
    /// stream is sent, one that names yesterday is a mistake.
    public static let pastTolerance: TimeInterval = 60

    /// The timing of a job with `sendAt` read at `now`. `promoted`: the entry came back from the schedule, so its
    /// time has come whatever the clock says since. `maxAheadDays`: `schedule.maxAheadDays`.
    public static func of(sendAt: ScheduledTime?, now: Date, maxAheadDays: Int, promoted: Bool) -> JobTiming {
        guard let sendAt, !promoted else { return .now }
        let ahead = sendAt.date.timeIntervalSince(now)
        if ahead < -pastTolerance {
            return .refused(
                JobRejection(
                    .invalidJob,
                    "sendAt \(sendAt.text) is \(Int(-ahead)) s in the past; at most \(Int(pastTolerance)) s is sent "
                        + "at once"))
        }
        if ahead > Double(maxAheadDays) * 86_400 {
            return .refused(
                JobRejection(
                    .invalidJob,
                    "sendAt \(sendAt.text) is more than \(maxAheadDays) days ahead (schedule.maxAheadDays)"))
        }
        return ahead > 0 ? .later(sendAt.date) : .now
    }
}
