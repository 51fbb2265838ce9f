import Foundation

/// When a recurring schedule runs, as a Salesforce Flow schedule says it: a `start` instant, a `frequency` (`once`,
/// `daily`, `weekly` on some `days`), an IANA `timeZone` whose wall clock keeps the start's time of day across
/// daylight-saving changes, and an optional `end`.
///
/// A pure function of its fields: `run(onOrAfter:)` and `run(after:)` answer the same for the same input, on any
/// clock. A time of day that does not exist on a day (the hour skipped when clocks go forward) runs at the next
/// valid minute, the instant clocks jumped; one that happens twice (clocks go back) runs once, the first time.
public struct ScheduleRecurrence: Sendable, Hashable {
    public enum Frequency: String, Sendable, Hashable, CaseIterable {
        case once, daily, weekly
    }

    /// Days of the week, as a weekly schedule names them.
    public enum Day: String, Sendable, Hashable, CaseIterable, Comparable {
        case sun, mon, tue, wed, thu, fri, sat
        /// `Calendar`'s weekday: 1 is Sunday.
        public var weekday: Int {
            switch self {
            case .sun: 1
            case .mon: 2
            case .tue: 3
            case .wed: 4
            case .thu: 5
            case .fri: 6
            case .sat: 7
            }
        }
        public static func < (a: Day, b: Day) -> Bool { a.weekday < b.weekday }
    }

    /// The first run: its wall-clock time in `timeZone` is every run's time of day.
    public var start: Date
    public var frequency: Frequency
    /// Weekly: the days it runs (empty: the start's weekday). Ignored otherwise.
    public var days: Set<Day>
    public var timeZone: TimeZone
    /// No run after this instant (nil: none).
    public var end: Date?

    public init(start: Date, frequency: Frequency, days: Set<Day> = [], timeZone: TimeZone, end: Date? = nil) {
        self.start = start
        self.frequency = frequency
        self.days = days
        self.timeZone = timeZone
        self.end = end
    }

    /// The first run at or after `t` (nil: none left).
    public func run(onOrAfter t: Date) -> Date? {
        if frequency == .once { return start >= t && within(start) ? start : nil }
        let from = max(t, start)
        var cal = Calendar(identifier: .gregorian)
        cal.timeZone = timeZone
        let time = cal.dateComponents([.hour, .minute, .second], from: start)
        let runDays: Set<Int> =
            frequency == .weekly
            ? Set((days.isEmpty ? [Self.day(of: start, in: cal)] : Array(days)).map(\.weekday))
            : Set(1...7)
        // From the day before `from` (a run late on it may fall after `from` in another offset), at most a week on.
        let first = cal.dateComponents([.year, .month, .day], from: from)
        guard var day = Self.utc.date(from: DateComponents(year: first.year, month: first.month, day: first.day))
        else { return nil }
        day = day.addingTimeInterval(-86_400)
        for _ in 0..<9 {
            let ymd = Self.utc.dateComponents([.year, .month, .day, .weekday], from: day)
            if let weekday = ymd.weekday, runDays.contains(weekday),
                let wall = Self.utc.date(
                    from: DateComponents(
                        year: ymd.year, month: ymd.month, day: ymd.day, hour: time.hour, minute: time.minute,
                        second: time.second)),
                let instant = Self.instant(wall: wall, in: timeZone), instant >= from
            {
                return within(instant) ? instant : nil
            }
            day = day.addingTimeInterval(86_400)
        }
        return nil
    }

    /// The first run strictly after `t`.
    public func run(after t: Date) -> Date? { run(onOrAfter: t.addingTimeInterval(0.001)) }

    private func within(_ t: Date) -> Bool { end.map { t <= $0 } ?? true }

    private static func day(of t: Date, in cal: Calendar) -> Day {
        Day.allCases[max(0, min(6, cal.component(.weekday, from: t) - 1))]
    }

    static let utc: Calendar = {
        var c = Calendar(identifier: .gregorian)
        c.timeZone = TimeZone(secondsFromGMT: 0)!
        return c
    }()

    /// The instant a wall-clock time (given as if it were UTC) happens in `zone`: the earlier one when it happens
    /// twice, the end of the gap (the next valid minute) when it does not happen.
    static func instant(wall: Date, in zone: TimeZone) -> Date? {
        // A zone changes its offset at most once in a day: the offsets half a day either side are the candidates.
        let before = zone.secondsFromGMT(for: wall.addingTimeInterval(-14 * 3600))
        let after = zone.secondsFromGMT(for: wall.addingTimeInterval(14 * 3600))
        let valid = Set([before, after]).compactMap { offset -> Date? in
            let t = wall.addingTimeInterval(-TimeInterval(offset))
            return zone.secondsFromGMT(for: t) == offset ? t : nil
        }
        if let earliest = valid.min() { return earliest }
        // In the gap: clocks jumped over this time; run when they landed, rounded up to a whole minute.
        guard let jump = zone.nextDaylightSavingTimeTransition(after: wall.addingTimeInterval(-TimeInterval(after)))
        else { return nil }
        return Date(timeIntervalSince1970: (jump.timeIntervalSince1970 / 60).rounded(.up) * 60)
    }
}
