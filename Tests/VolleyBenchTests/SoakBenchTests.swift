import Foundation
import Testing
import VolleyCore
import VolleyTestTags

@testable import VolleyBench

/// `volley-bench soak`'s decisions without a process: its timetable on a manual clock, the growth it reports, the
/// labels its series carry and the `--json` keys users' scripts read. The run itself is `volley-bench soak`
/// (docs/guarantees.md).
@Suite(.tags(.unit))
struct SoakBenchTests {
    // MARK: - faults

    @Test func faultsTakeTurnsEveryIntervalAndNoneIsOnAtTheEnd() {
        let kinds = SoakBench.faultKinds(cluster: false)
        let plan = SoakPlan.faultTimetable(minutes: 60, every: 120, kinds: kinds, hold: SoakBench.hold)
        // 120 s, 240 s, … 3,480 s: the one at 3,600 s would still be on when the hour ends.
        #expect(plan.count == 29)
        #expect(plan.map(\.at) == (1...29).map { Double($0) * 120 })
        #expect(plan.prefix(4).map(\.fault) == [.providerKill, .providerGoAway, .workerKill, .providerKill])
        #expect(plan.allSatisfy { $0.at + $0.hold <= 3600 })
        #expect(plan[1].hold == 10 && plan[0].hold == 3)
    }

    @Test func aShortRunGetsTheFaultsThatFitAndAClusterRunBeginsWithTheFailover() {
        let three = SoakPlan.faultTimetable(
            minutes: 3, every: 120, kinds: SoakBench.faultKinds(cluster: false), hold: SoakBench.hold)
        #expect(three == [SoakPlan.PlannedFault(fault: .providerKill, at: 120, hold: 3)])
        let cluster = SoakPlan.faultTimetable(
            minutes: 3, every: 40, kinds: SoakBench.faultKinds(cluster: true), hold: SoakBench.hold)
        #expect(cluster.map(\.fault) == [.clusterPrimaryKill, .providerKill, .providerGoAway, .workerKill])
        #expect(cluster.map(\.at) == [40, 80, 120, 160])
        #expect(SoakPlan.faultTimetable(minutes: 60, every: 0, kinds: [.providerKill], hold: SoakBench.hold).isEmpty)
    }

    @Test func aFaultNeverBeginsBeforeTheOneBeforeItEnded() {
        // Every 5 s against a 10 s storm: the turn after the storm waits for its end.
        let plan = SoakPlan.faultTimetable(
            minutes: 1, every: 5, kinds: [.providerGoAway, .workerKill], hold: SoakBench.hold)
        #expect(plan.map(\.at) == [5, 15, 18, 28, 31, 41, 44, 54])
        for (a, b) in zip(plan, plan.dropFirst()) { #expect(b.at >= a.at + a.hold) }
    }

    // MARK: - the timetable on a clock

    @Test func theTimetableSamplesEachMinuteInjectsOnTimeAndStartsOneCampaignAtATime() {
        let clock = ManualClock()
        let faults = SoakPlan.faultTimetable(
            minutes: 3, every: 60, kinds: [.providerGoAway, .workerKill], hold: SoakBench.hold)
        var plan = SoakPlan(start: clock.now(), minutes: 3, faults: faults, campaignEvery: 15)
        var actions: [SoakPlan.Action]

        actions = plan.due(now: clock.now())
        #expect(actions == [.sample(minute: 0), .startCampaign])
        clock.advance(by: 20)
        // The first campaign has not reported: no second one, however long ago it started.
        actions = plan.due(now: clock.now())
        #expect(actions.isEmpty)
        plan.campaignFinished()
        actions = plan.due(now: clock.now())
        #expect(actions == [.startCampaign])
        plan.campaignFinished()
        clock.advance(by: 10)
        // Reported within 10 s of its start: the next waits for 15 s from it.
        actions = plan.due(now: clock.now())
        #expect(actions.isEmpty)
        clock.advance(by: 5)
        actions = plan.due(now: clock.now())
        #expect(actions == [.startCampaign])
        plan.campaignSending()

        clock.advance(by: 25) // 60 s
        actions = plan.due(now: clock.now())
        #expect(actions == [.sample(minute: 1), .beginFault(0)])
        clock.advance(by: 9.5)
        actions = plan.due(now: clock.now())
        #expect(actions.isEmpty)
        clock.advance(by: 0.5)
        actions = plan.due(now: clock.now())
        #expect(actions == [.endFault(0)])
        plan.campaignFinished()
        actions = plan.due(now: clock.now())
        #expect(actions == [.startCampaign])
        plan.campaignSending()

        clock.advance(by: 50) // 120 s
        actions = plan.due(now: clock.now())
        #expect(actions == [.sample(minute: 2), .beginFault(1)])
        plan.faultFailed()
        clock.advance(by: 3)
        actions = plan.due(now: clock.now())
        #expect(actions.isEmpty)

        // At the end: the last minute and the finish, and no campaign after it.
        plan.campaignFinished()
        clock.advance(by: 57) // 180 s
        actions = plan.due(now: clock.now())
        #expect(actions == [.sample(minute: 3), .finish])
        clock.advance(by: 60)
        actions = plan.due(now: clock.now())
        #expect(actions.isEmpty)
    }

    @Test func aFaultWaitsForACampaignToBeSendingAtMostThirtySecondsAndEndsWithTheRun() {
        let clock = ManualClock()
        let faults = [
            SoakPlan.PlannedFault(fault: .providerKill, at: 60, hold: 3),
            SoakPlan.PlannedFault(fault: .workerKill, at: 100, hold: 3),
            SoakPlan.PlannedFault(fault: .providerGoAway, at: 160, hold: 10),
        ]
        var plan = SoakPlan(start: clock.now(), minutes: 3, faults: faults, campaignEvery: 100)
        var actions = plan.due(now: clock.now())
        #expect(actions == [.sample(minute: 0), .startCampaign])
        plan.campaignFinished()

        // Its time, and no campaign sending before the next one at 100 s: it waits 30 s, no longer.
        clock.advance(by: 60)
        actions = plan.due(now: clock.now())
        #expect(actions == [.sample(minute: 1)])
        clock.advance(by: 29.5)
        actions = plan.due(now: clock.now())
        #expect(actions.isEmpty)
        clock.advance(by: 0.5) // 90 s
        actions = plan.due(now: clock.now())
        #expect(actions == [.beginFault(0)])
        clock.advance(by: 3)
        actions = plan.due(now: clock.now())
        #expect(actions == [.endFault(0)])

        // A campaign starts at the next one's time: it begins once the campaign's pushes reach the provider.
        clock.advance(by: 7) // 100 s
        actions = plan.due(now: clock.now())
        #expect(actions == [.startCampaign])
        clock.advance(by: 0.5)
        actions = plan.due(now: clock.now())
        #expect(actions.isEmpty)
        plan.campaignSending()
        clock.advance(by: 0.5)
        actions = plan.due(now: clock.now())
        #expect(actions == [.beginFault(1)])
        clock.advance(by: 3)
        actions = plan.due(now: clock.now())
        #expect(actions == [.endFault(1)])
        plan.campaignFinished()
        // Sending was the finished campaign's: the storm does not take it for a campaign sending now.
        plan.campaignSending()

        // The storm may wait only until it can still end with the run: 170 s.
        clock.advance(by: 65.5) // 169.5 s
        actions = plan.due(now: clock.now())
        #expect(actions == [.sample(minute: 2)])
        clock.advance(by: 0.5)
        actions = plan.due(now: clock.now())
        #expect(actions == [.beginFault(2)])
        clock.advance(by: 10)
        actions = plan.due(now: clock.now())
        #expect(actions == [.sample(minute: 3), .endFault(2), .finish])
    }

    @Test func aLateLoopStillSamplesEveryMinuteOnce() {
        let clock = ManualClock()
        var plan = SoakPlan(start: clock.now(), minutes: 2, faults: [], campaignEvery: 15)
        clock.advance(by: 125)
        let actions = plan.due(now: clock.now())
        #expect(actions == [.sample(minute: 0), .sample(minute: 1), .sample(minute: 2), .finish])
    }

    @Test func aCadenceComesDueOnTimeAndDoesNotMakeUpMissedTurns() {
        let clock = ManualClock()
        var every = SoakCadence(every: 2, first: clock.now())
        var taken: Bool
        taken = every.due(clock.now())
        #expect(taken)
        taken = every.due(clock.now())
        #expect(!taken)
        clock.advance(by: 1.5)
        taken = every.due(clock.now())
        #expect(!taken)
        clock.advance(by: 7.5) // 9 s: three turns missed, one taken
        taken = every.due(clock.now())
        #expect(taken)
        taken = every.due(clock.now())
        #expect(!taken)
        #expect(every.next == clock.now().addingTimeInterval(1))
        var never = SoakCadence(every: 0, first: clock.now())
        taken = never.due(clock.now())
        #expect(!taken)
    }

    // MARK: - growth

    static func minute(_ m: Int, _ processes: [String: (rss: Int, fds: Int)]) -> SoakBench.Minute {
        SoakBench.Minute(
            minute: m, at_s: Double(m) * 60,
            processes: processes.mapValues { SoakBench.Usage(rss_kb: $0.rss, fds: $0.fds, threads: 20) })
    }

    @Test func growthRunsFromMinuteTenToTheLastAndLeavesOutProcessesNotRunningAtBoth() {
        var minutes = (0...9).map { Self.minute($0, ["bench-0": (50_000, 30), "volley-mock": (40_000, 20)]) }
        minutes.append(Self.minute(10, ["bench-0": (100_000, 40), "volley-mock": (40_000, 20), "bench-1": (1, 1)]))
        minutes.append(Self.minute(11, ["bench-0": (101_000, 41), "volley-mock#2": (30_000, 10)]))
        minutes.append(Self.minute(12, ["bench-0": (102_000, 43), "volley-mock#2": (31_000, 11)]))
        let (rss, fds) = SoakBench.growth(minutes)
        #expect(rss.from_minute == 10 && rss.to_minute == 12 && !rss.short_run)
        #expect(rss.per_process == ["bench-0": 2])
        #expect(rss.max == 2 && rss.max_process == "bench-0")
        #expect(rss.unmeasured == ["bench-1", "volley-mock", "volley-mock#2"])
        #expect(fds.per_process == ["bench-0": 3] && fds.max == 3)
    }

    @Test func aRunShorterThanElevenMinutesIsMeasuredFromMinuteOneAndSaysSo() {
        let minutes = [
            Self.minute(0, ["a": (1_000, 10), "b": (1_000, 10)]),
            Self.minute(1, ["a": (2_000, 12), "b": (3_000, 10)]),
            Self.minute(2, ["a": (2_100, 11), "b": (2_700, 10)]),
            Self.minute(3, ["a": (2_050, 12), "b": (2_400, 9)]),
        ]
        let (rss, fds) = SoakBench.growth(minutes)
        #expect(rss.from_minute == 1 && rss.to_minute == 3 && rss.short_run)
        #expect(rss.per_process == ["a": 2.5, "b": -20])
        #expect(rss.max == 2.5 && rss.max_process == "a")
        #expect(fds.per_process == ["a": 0, "b": -1] && fds.max == 0 && fds.max_process == "a")
        #expect(SoakBench.baselineMinute(last: 60) == 10)
        #expect(SoakBench.baselineMinute(last: 11) == 10)
        #expect(SoakBench.baselineMinute(last: 10) == 1)
        #expect(SoakBench.baselineMinute(last: 0) == 0)
        let none = SoakBench.growth([])
        #expect(none.rss.max == nil && none.rss.per_process.isEmpty && none.fds.max_process == nil)
    }

    @Test func aProcessStartedAgainUnderTheSameNameGetsASeriesOfItsOwn() {
        var labels = ProcessLabels()
        #expect(labels.label("volley-mock", pid: 100) == "volley-mock")
        #expect(labels.label("volley-mock", pid: 100) == "volley-mock")
        #expect(labels.label("volley-mock", pid: 200) == "volley-mock#2")
        #expect(labels.label("bench-0", pid: 100) == "bench-0")
        #expect(labels.label("volley-mock", pid: 300) == "volley-mock#3")
        #expect(labels.label("volley-mock", pid: 200) == "volley-mock#2")
    }

    @Test func procStatusNumbersAreReadPastTheTabAndThePadding() {
        #expect(ProcessSample.number("VmRSS:\t   58888 kB") == 58888)
        #expect(ProcessSample.number("Threads:\t29") == 29)
        #expect(ProcessSample.number("Threads:") == 0)
        let me = ProcessSample.read(pid: getpid())
        #expect((me?.threads ?? 0) >= 1 && (me?.fds ?? 0) >= 3 && (me?.rssKB ?? 0) > 0)
    }

    // MARK: - readings

    @Test func aCampaignShardIsToldFromTheCampaignAndFromOtherJobs() {
        let campaigns: Set = ["soak-ab12cd-c1"]
        #expect(SoakBench.isShard("soak-ab12cd-c1.s0", of: campaigns))
        #expect(SoakBench.isShard("soak-ab12cd-c1.s12", of: campaigns))
        #expect(!SoakBench.isShard("soak-ab12cd-c1", of: campaigns))
        #expect(!SoakBench.isShard("soak-ab12cd-c1.s", of: campaigns))
        #expect(!SoakBench.isShard("soak-ab12cd-c1.x1", of: campaigns))
        #expect(!SoakBench.isShard("soak-ab12cd-c2.s0", of: campaigns))
    }

    @Test func theJournalIsReadPerDeviceOfTheCampaignOnly() {
        let journal = """
            apns aaaa 1 volley-x
            fcm bbbb tag:volley-x
            apns aaaa 2 volley-x
            fcm bbbb -
            apns cccc 3 -
            fcm dddd mid:q.r
            apns eeee

            """
        let identities = FaultRig.identities(lines: journal, of: ["aaaa", "bbbb", "dddd", "eeee"])
        #expect(identities["aaaa"] == ["volley-x", "volley-x"])
        #expect(identities["bbbb"] == ["tag:volley-x", "-"])
        #expect(identities["cccc"] == nil)
        #expect(identities["eeee"] == ["-"])
        let tally = FaultRig.JournalTally(identities)
        #expect(tally.devices == 4 && tally.pushes == 6 && tally.duplicatePushes == 2)
        #expect(tally.duplicatedDevices == 2 && tally.shownTwice == 1)
    }

    // MARK: - JSON

    @Test func theJSONKeysAreTheContract() throws {
        let minutes = [0, 1, 2].map { Self.minute($0, ["bench-0": ($0 == 2 ? 1_010 : 1_000, 10)]) }
        let (rss, fds) = SoakBench.growth(minutes)
        let r = SoakBench.Result(
            lost: 0, shown_twice: 0, quota_exact: true, rss_growth_pct: rss, fd_growth: fds, minutes: minutes,
            campaigns: 2, devices_sent: 10_000,
            faults: [SoakBench.FaultRecord(fault: "provider-kill", at_s: 30, held_s: 3.1, detail: "kill -9")],
            api_requests: 10, api_errors: 0, api_errors_by_status: [:], sync_hints: 20, sync_hint_errors: 0,
            sync_hint_pushes: 4, schedule_runs: 1, schedules_created: 1, run_minutes: 2, devices_per_campaign: 5_000,
            workers: 2, cluster: false, build: "debug", accepted: 10_000, rejected: 0, failed: 0, failed_by_reason: [:],
            duplicate_pushes: 0, duplicated_devices: 0, never_reached: 0, campaign_s_max: 4, unfinished_campaigns: [],
            quota_used: 10_004, quota_pending: 0, jobs_accepted: 10_004, api_jobs: 3, api_jobs_lost: 0,
            unreported_jobs: [], worker_exits: [], duration_s: 121, command: "volley-bench soak --minutes 2")
        let data = try JSONEncoder().encode(r)
        let object = try #require(try JSONSerialization.jsonObject(with: data) as? [String: Any])
        let contract: Set = [
            "lost", "shown_twice", "quota_exact", "rss_growth_pct", "fd_growth", "minutes", "campaigns",
            "devices_sent", "faults", "api_requests", "api_errors", "sync_hints", "schedule_runs",
        ]
        #expect(contract.isSubset(of: Set(object.keys)), "\(contract.subtracting(object.keys))")
        let growth = try #require(object["rss_growth_pct"] as? [String: Any])
        #expect(
            Set(growth.keys) == [
                "from_minute", "to_minute", "short_run", "per_process", "max", "max_process", "unmeasured",
            ])
        #expect((growth["per_process"] as? [String: Double])?["bench-0"] == 1)
        #expect(growth["short_run"] as? Bool == true)
        let fd = try #require(object["fd_growth"] as? [String: Any])
        #expect(fd["max"] as? Int == 0)
        let first = try #require((object["minutes"] as? [[String: Any]])?.first)
        #expect(Set(first.keys) == ["minute", "at_s", "processes"])
        let usage = try #require((first["processes"] as? [String: [String: Any]])?["bench-0"])
        #expect(Set(usage.keys) == ["rss_kb", "fds", "threads"])
        let fault = try #require((object["faults"] as? [[String: Any]])?.first)
        #expect(Set(fault.keys) == ["fault", "at_s", "held_s", "detail"])
        #expect(SoakBench.table(r).contains("shown twice 0") && SoakBench.table(r).contains("bench-0"))
    }
}
