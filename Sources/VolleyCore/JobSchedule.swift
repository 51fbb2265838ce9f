import Foundation

/// An instant as a job gives it (`sendAt`): RFC 3339 with an explicit offset (`2026-11-27T09:00:00Z`,
/// `2026-11-27T10:00:00.250+01:00`). The caller's text is kept as written, so the job stored on the stream and shown
/// back reads as it was sent; `date` is the instant it names.
public struct ScheduledTime: Sendable, Hashable, Codable, CustomStringConvertible {
    /// The text as the caller wrote it.
    public let text: String
    public let date: Date

    /// Reads `text` as `RFC3339` does (an explicit offset, `T` and `Z` in either case, no leap second); nil
    /// for anything else, whose reason `RFC3339.parse` gives.
    public init?(_ text: String) {
        guard let date = RFC3339.date(text) else { return nil }
        self.text = text
        self.date = date
    }

    public init(from decoder: any Decoder) throws {
        let c = try decoder.singleValueContainer()
        let s = try c.decode(String.self)
        do {
            self.date = try RFC3339.parse(s)
            self.text = s
        } catch {
            throw DecodingError.dataCorruptedError(in: c, debugDescription: "\(error): \(s)")
        }
    }

    public func encode(to encoder: any Encoder) throws {
        var c = encoder.singleValueContainer()
        try c.encode(text)
    }

    public var description: String { text }

    /// An instant as RFC 3339 in UTC with milliseconds (`2026-11-27T08:00:00.000Z`), as status reads show due times.
    public static func utcText(_ date: Date) -> String {
        RFC3339.format(date, .milliseconds)
    }

    /// Milliseconds since 1970 (what the schedule's sorted set scores by).
    public var epochMillis: Int64 { Int64((date.timeIntervalSince1970 * 1000).rounded(.down)) }
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
