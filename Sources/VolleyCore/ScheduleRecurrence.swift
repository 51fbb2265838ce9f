import Foundation

/// When a recurring schedule runs, as a Salesforce Flow schedule says it: a `start` instant, a `frequency` (`once`,
/// `daily`, `weekly` on some `days`), an IANA `timeZone` whose wall clock keeps the start's time of day across
/// daylight-saving changes, and an optional `end`.
///
/// A pure function of its fields: `run(onOrAfter:)` and `run(after:)` answer the same for the same input, on any
/// clock. Each run is the time of day on a run day in `timeZone` by `CivilTime`'s rule: a time that does not exist on
/// a day (the hour skipped when clocks go forward) runs at the moment of the change, the next valid minute; one that
/// happens twice (clocks go back) runs once, the first time.
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
        let time = CivilTime.wallClock(of: start, in: timeZone)
        let runDays: Set<Int> =
            frequency == .weekly ? (days.isEmpty ? [time.weekday] : Set(days.map(\.weekday))) : Set(1...7)
        // From the day before `from` (a run late on it may fall after `from` in another offset), at most a week on.
        let first = CivilTime.wallClock(of: from, in: timeZone).days - 1
        for day in first..<(first + 9) where runDays.contains(CivilDate.weekday(days: day)) {
            let wall = CivilDateTime(days: day, hour: time.hour, minute: time.minute, second: time.second)
            let instant = CivilTime.instant(of: wall, in: timeZone)
            if instant >= from { return within(instant) ? instant : nil }
        }
        return nil
    }

    /// The first run strictly after `t`.
    public func run(after t: Date) -> Date? { run(onOrAfter: t.addingTimeInterval(0.001)) }

    private func within(_ t: Date) -> Bool { end.map { t <= $0 } ?? true }
}
