import Foundation
import Testing
import VolleyCore
import VolleyTestTags

@testable import VolleyEngine

/// A delivery's decisions about time, pauses and cancels: parking a job due later, stopping a paused or cancelled one
/// before its next send (giving back what was charged and not sent), and waiting for a local-time job's later waves,
/// on a manual clock.
@Suite(.tags(.unit)) struct JobRunScheduleMachineTests {
    typealias Machine = JobRun.StateMachine
    let clock = ManualClock()

    func devices(_ n: Int, from first: Int = 0) -> [Device] {
        (first..<(first + n)).map { Device(platform: .ios, token: DeviceToken("ios-\($0)"), user: "u") }
    }
    func none(_ d: [Device]) -> [RecordedOutcome?] { Array(repeating: nil, count: d.count) }
    func until(_ s: Double) -> Date { clock.now().addingTimeInterval(s) }

    @Test func aJobDueLaterIsParkedWithoutReadingItsLedger() {
        var m = Machine(quotaWait: nil)
        let due = until(3600)
        #expect(m.dueLater(due) == .park(until: due))
        #expect(m.isFinished)
    }

    /// A machine sending `first`, its first chunk.
    func sending(_ first: [Device], quota: QuotaWaitPolicy? = nil) -> Machine {
        var m = Machine(quotaWait: quota)
        _ = m.ledgerRead(.empty, deliveryCount: 1)
        _ = m.deliveryOpened()
        let credits = Machine.Action.reserveCredits(upTo: first.count, until: until(0.2))
        if quota == nil {
            #expect(m.chunkResolved(first, recorded: none(first), now: clock.now()) == credits)
        } else {
            #expect(
                m.chunkResolved(first, recorded: none(first), now: clock.now()) == .charge(.ios, count: first.count))
            #expect(m.quotaGranted(count: first.count, now: clock.now()) == credits)
        }
        return m
    }

    @Test func aCancelSeenWhileSendingStopsBeforeTheNextCreditsAndPublishes() {
        let first = devices(3)
        var m = sending(first)
        #expect(m.creditsReserved(2, now: clock.now()) == .send(first[0..<2]))
        // A record in the middle of the chunk saw the mark: nothing more starts, not even the chunk's rest.
        m.steeringSeen(.cancelled)
        #expect(m.devicesSent(now: clock.now()) == .stopSending)
        #expect(m.sendingStopped(outstanding: 1, now: clock.now()) == .awaitOutcomes(until: until(0.2)))
        #expect(m.outcomesAwaited(outstanding: 0, now: clock.now()) == .recordRemaining)
        #expect(m.remainingRecorded(outstanding: 0, shardedInto: 0) == .publishReport)
        #expect(m.cancelled)
        #expect(m.reportPublished() == .acknowledge(.completed))
    }

    @Test func theChargesOfDevicesACancelKeptBackAreGivenBack() {
        let first = devices(5)
        var m = sending(first, quota: QuotaWaitPolicy())
        #expect(m.creditsReserved(2, now: clock.now()) == .send(first[0..<2]))
        m.steeringSeen(.cancelled)
        #expect(m.devicesSent(now: clock.now()) == .releaseUnsent(Array(first[2...])))
        #expect(m.unsentReleased(now: clock.now()) == .stopSending)
    }

    @Test func aPausedJobRecordsWhatWentThenParksUntilItsResume() {
        let first = devices(4)
        var m = sending(first)
        #expect(m.creditsReserved(1, now: clock.now()) == .send(first[0..<1]))
        m.steeringSeen(.paused)
        #expect(m.devicesSent(now: clock.now()) == .stopSending)
        #expect(m.sendingStopped(outstanding: 1, now: clock.now()) == .awaitOutcomes(until: until(0.2)))
        #expect(m.outcomesAwaited(outstanding: 0, now: clock.now()) == .recordRemaining)
        #expect(m.remainingRecorded(outstanding: 0, shardedInto: 0, laterWaves: true) == .parkPaused)
        #expect(m.isFinished)
    }

    @Test func aPauseLiftedBeforeItTookEffectChangesNothing() {
        let first = devices(2)
        var m = sending(first)
        m.steeringSeen(.paused)
        m.steeringSeen(.run)
        #expect(m.creditsReserved(2, now: clock.now()) == .send(first[0..<2]))
        #expect(m.devicesSent(now: clock.now()) == .recordReadyOutcomes)
        #expect(m.outcomesRecorded() == .takeChunk)
    }

    @Test func aJobPausedBeforeItsDeliveryIsParkedWithoutReadingAChunk() {
        var m = Machine(quotaWait: nil)
        #expect(m.ledgerRead(.paused, deliveryCount: 1) == .parkPaused)
        #expect(m.isFinished)
    }

    @Test func aPauseAfterTheLastDeviceWentPublishesTheReport() {
        // Every device was sent before the pause took effect: nothing waits for a resume.
        let first = devices(1)
        var m = sending(first)
        #expect(m.creditsReserved(1, now: clock.now()) == .send(first[0..<1]))
        #expect(m.devicesSent(now: clock.now()) == .recordReadyOutcomes)
        #expect(m.outcomesRecorded() == .takeChunk)
        m.steeringSeen(.paused)
        #expect(m.devicesExhausted(outstanding: 0, now: clock.now()) == .recordRemaining)
        #expect(m.remainingRecorded(outstanding: 0, shardedInto: 0) == .publishReport)
    }

    @Test func aJobCancelledBeforeItsDeliveryCountsItsChunksAndSendsNothing() {
        var m = Machine(quotaWait: QuotaWaitPolicy())
        #expect(m.ledgerRead(.cancelled, deliveryCount: 1) == .openDelivery(readLedger: true))
        #expect(m.deliveryOpened() == .takeChunk)
        let chunk = devices(4)
        // Read (to count what earlier waves recorded), never charged or sent.
        #expect(m.chunkResolved(chunk, recorded: none(chunk), now: clock.now()) == .takeChunk)
        #expect(m.devicesExhausted(outstanding: 0, now: clock.now()) == .recordRemaining)
        #expect(m.remainingRecorded(outstanding: 0, shardedInto: 0, laterWaves: true) == .publishReport)
    }

    @Test func aLocalTimeDeliveryWithDevicesDueLaterParksItsWavesInsteadOfReporting() {
        var m = Machine(quotaWait: nil)
        _ = m.ledgerRead(.partial, deliveryCount: 1)
        _ = m.deliveryOpened()
        #expect(m.devicesExhausted(outstanding: 0, now: clock.now()) == .recordRemaining)
        #expect(m.remainingRecorded(outstanding: 0, shardedInto: 0, laterWaves: true) == .parkWaves)
        #expect(!m.isFinished)
        #expect(m.wavesParked() == .acknowledge(.waitingForWaves))
        #expect(m.isFinished)
    }

    @Test func aWaveIsNotMistakenForADuplicate() {
        // Between waves the ledger holds outcomes and the next due time, never the report: a wave reads `partial`.
        var m = Machine(quotaWait: nil)
        #expect(m.ledgerRead(.partial, deliveryCount: 1) == .openDelivery(readLedger: true))
    }
}

/// Which devices a local-time delivery sends and which wait, per zone, on fixed instants.
@Suite(.tags(.unit)) struct LocalTimeWavesTests {
    func device(_ i: Int, _ zone: String?) -> Device {
        Device(platform: .android, token: DeviceToken("t\(i)"), user: UserID("u\(i)"), timeZone: zone)
    }
    func at(_ s: String) -> Date { ScheduledTime(s)!.date }

    @Test func sendsTheDevicesDueNowAndCountsTheRestByTheirInstant() {
        var w = LocalTimeWaves(
            time: LocalDeliveryTime("09:00")!, reference: at("2026-11-27T07:59:00Z"),
            fallbackZone: TimeZone(identifier: "Europe/Berlin")!)
        let d = [
            device(0, "Europe/Berlin"), device(1, "Asia/Kolkata"), device(2, "America/New_York"), device(3, nil),
            device(4, "Not/AZone"), device(5, "America/New_York"),
        ]
        let first = w.split(d, recorded: Array(repeating: nil, count: d.count), now: at("2026-11-27T08:00:00Z"))
        // Berlin 09:00 = 08:00Z: the Berlin device, the one without a zone and the one with an unknown zone (the
        // org's zone, Berlin) go now.
        #expect(first.devices.map(\.token.rawValue) == ["t0", "t3", "t4"])
        #expect(w.later == [at("2026-11-28T03:30:00Z"): 1, at("2026-11-27T14:00:00Z"): 2])
        #expect(w.waiting == 3 && w.nextDue == at("2026-11-27T14:00:00Z"))
    }

    @Test func aWaveSendsWhatIsDueByThenAndSkipsNothingRecorded() {
        var w = LocalTimeWaves(
            time: LocalDeliveryTime("09:00")!, reference: at("2026-11-27T07:59:00Z"),
            fallbackZone: TimeZone(identifier: "UTC")!)
        let d = [device(0, "Europe/Berlin"), device(1, "America/New_York"), device(2, "Asia/Kolkata")]
        let recorded: [RecordedOutcome?] = [RecordedOutcome(.accepted), nil, nil]
        let wave = w.split(d, recorded: recorded, now: at("2026-11-27T14:00:00Z"))
        // The recorded device is handed on (the machine skips it and the report counts it); Kolkata waits.
        #expect(wave.devices.map(\.token.rawValue) == ["t0", "t1"])
        #expect(wave.recorded.map { $0 != nil } == [true, false])
        #expect(w.later == [at("2026-11-28T03:30:00Z"): 1])
    }

    @Test func theWaveFieldCarriesTheReference() {
        let field = LocalTimeWaves.waveField(reference: at("2026-11-27T07:59:00Z"), at: at("2026-11-27T14:00:00Z"))
        #expect(field == "1795766340000@1795788000000")
        #expect(LocalTimeWaves.reference(fromWaveField: field) == at("2026-11-27T07:59:00Z"))
    }
}
