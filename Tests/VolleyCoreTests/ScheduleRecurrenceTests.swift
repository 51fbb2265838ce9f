import Foundation
import Testing
import VolleyCore
import VolleyTestTags

/// Next-run computation of recurring schedules: the start's wall-clock time kept in its zone across daylight-saving
/// changes (a skipped time runs at the moment of the change, a repeated one once), weekly days, half-hour zones, `end`.
@Suite(.tags(.unit)) struct ScheduleRecurrenceTests {
    func at(_ s: String) -> Date { RFC3339.date(s)! }
    func zone(_ id: String) -> TimeZone { TimeZone(identifier: id)! }

    /// Runs from the first on, `n` of them.
    func runs(_ r: ScheduleRecurrence, _ n: Int) -> [Date] {
        var out: [Date] = []
        var next = r.run(onOrAfter: r.start)
        while let t = next, out.count < n {
            out.append(t)
            next = r.run(after: t)
        }
        return out
    }

    @Test func dailyKeepsTheWallClockTimeAcrossTheSpringAndAutumnChanges() {
        // 09:00 in Berlin: 08:00Z in winter, 07:00Z in summer (clocks went forward on 28 March 2027).
        let r = ScheduleRecurrence(
            start: at("2027-03-26T09:00:00+01:00"), frequency: .daily, timeZone: zone("Europe/Berlin"))
        #expect(
            runs(r, 4) == [
                at("2027-03-26T08:00:00Z"), at("2027-03-27T08:00:00Z"), at("2027-03-28T07:00:00Z"),
                at("2027-03-29T07:00:00Z"),
            ])
        let autumn = ScheduleRecurrence(
            start: at("2027-10-30T09:00:00+02:00"), frequency: .daily, timeZone: zone("Europe/Berlin"))
        #expect(runs(autumn, 2) == [at("2027-10-30T07:00:00Z"), at("2027-10-31T08:00:00Z")])
    }

    @Test func aTimeThatDoesNotExistThatDayRunsAtTheNextValidMinute() {
        // 02:30 does not exist in Berlin on 28 March 2027 (02:00 → 03:00): that day's run is at 03:00 CEST.
        let r = ScheduleRecurrence(
            start: at("2027-03-27T02:30:00+01:00"), frequency: .daily, timeZone: zone("Europe/Berlin"))
        #expect(
            runs(r, 3) == [at("2027-03-27T01:30:00Z"), at("2027-03-28T01:00:00Z"), at("2027-03-29T00:30:00Z")])
    }

    @Test func aTimeThatHappensTwiceRunsOnce() {
        // 02:30 happens twice in Berlin on 31 October 2027 (03:00 CEST → 02:00 CET): one run, the first.
        let r = ScheduleRecurrence(
            start: at("2027-10-30T02:30:00+02:00"), frequency: .daily, timeZone: zone("Europe/Berlin"))
        #expect(
            runs(r, 3) == [at("2027-10-30T00:30:00Z"), at("2027-10-31T00:30:00Z"), at("2027-11-01T01:30:00Z")])
    }

    @Test func aSkippedDayRunsAtTheChange() {
        // Samoa skipped 30 December 2011 (−10 → +14 at midnight): that day's 09:00 runs when the clocks landed,
        // 31 December 00:00, and 31 December's own 09:00 follows.
        let r = ScheduleRecurrence(
            start: at("2011-12-29T09:00:00-10:00"), frequency: .daily, timeZone: zone("Pacific/Apia"))
        #expect(
            runs(r, 3) == [at("2011-12-29T19:00:00Z"), at("2011-12-30T10:00:00Z"), at("2011-12-30T19:00:00Z")])
    }

    @Test func weeklyRunsOnItsDaysInItsZone() {
        // Mondays and Wednesdays at 08:15 in New York, across the change of 14 March 2027 (EST → EDT).
        let r = ScheduleRecurrence(
            start: at("2027-03-08T08:15:00-05:00"), frequency: .weekly, days: [.mon, .wed],
            timeZone: zone("America/New_York"))
        #expect(
            runs(r, 4) == [
                at("2027-03-08T13:15:00Z"), at("2027-03-10T13:15:00Z"), at("2027-03-15T12:15:00Z"),
                at("2027-03-17T12:15:00Z"),
            ])
        // No days: the start's own weekday.
        let fridays = ScheduleRecurrence(
            start: at("2027-03-05T18:00:00+05:30"), frequency: .weekly, timeZone: zone("Asia/Kolkata"))
        #expect(runs(fridays, 2) == [at("2027-03-05T12:30:00Z"), at("2027-03-12T12:30:00Z")])
    }

    @Test func aWeeklyStartOnAnotherDayBeginsOnItsFirstDay() {
        // Starts on a Thursday, runs on Mondays: the first run is the next Monday.
        let r = ScheduleRecurrence(
            start: at("2027-03-04T10:00:00Z"), frequency: .weekly, days: [.mon], timeZone: zone("UTC"))
        #expect(runs(r, 2) == [at("2027-03-08T10:00:00Z"), at("2027-03-15T10:00:00Z")])
    }

    @Test func onceRunsOnceAndEndStopsTheRuns() {
        let once = ScheduleRecurrence(start: at("2027-05-01T12:00:00Z"), frequency: .once, timeZone: zone("UTC"))
        #expect(runs(once, 5) == [at("2027-05-01T12:00:00Z")])
        #expect(once.run(after: at("2027-05-01T12:00:00Z")) == nil)
        let ending = ScheduleRecurrence(
            start: at("2027-05-01T12:00:00Z"), frequency: .daily, timeZone: zone("UTC"), end: at("2027-05-03T12:00:00Z")
        )
        #expect(runs(ending, 10).count == 3)
    }

    @Test func aRunAfterALongPauseIsTheNextOneNotTheMissedOnes() {
        let r = ScheduleRecurrence(start: at("2027-01-01T06:00:00Z"), frequency: .daily, timeZone: zone("UTC"))
        #expect(r.run(onOrAfter: at("2027-06-15T07:00:00Z")) == at("2027-06-16T06:00:00Z"))
    }
}
