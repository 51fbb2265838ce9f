import Foundation
import Testing
import VolleyCore
import VolleyTestTags

@testable import VolleyEngine

/// A delivery's decisions, driven event by event on a manual clock: no backend, no threads, no waiting.
@Suite(.tags(.unit)) struct JobRunStateMachineTests {
    typealias Machine = JobRun.StateMachine

    let clock = ManualClock()
    var t0: Date { Date(timeIntervalSince1970: 1_800_000_000) }

    func devices(_ n: Int, _ platform: Platform = .ios, from first: Int = 0) -> [Device] {
        (first..<(first + n)).map { Device(platform: platform, token: DeviceToken("\(platform)-\($0)"), user: "u") }
    }

    func nothingRecorded(_ devices: [Device]) -> [RecordedOutcome?] { Array(repeating: nil, count: devices.count) }

    /// A first delivery past its claim, waiting for its first chunk.
    func opened(quota: QuotaWaitPolicy? = nil) -> Machine {
        var m = Machine(quotaWait: quota)
        #expect(m.ledgerRead(.empty, deliveryCount: 1) == .openDelivery(readLedger: false))
        #expect(m.deliveryOpened() == .takeChunk)
        return m
    }

    /// Reserves credits for, and sends, everything of the chunk at once; returns the action after the sends.
    func sendAll(_ m: inout Machine, _ sent: [Device]) -> Machine.Action {
        #expect(m.creditsReserved(sent.count, now: clock.now()) == .send(sent[...]))
        return m.devicesSent(now: clock.now())
    }

    func until(_ seconds: Double) -> Date { clock.now().addingTimeInterval(seconds) }

    // MARK: claim

    @Test func aFirstDeliveryWithoutLedgerDoesNotLookOutcomesUp() {
        var first = Machine(quotaWait: nil)
        #expect(first.ledgerRead(.empty, deliveryCount: 1) == .openDelivery(readLedger: false))
        var partial = Machine(quotaWait: nil)
        #expect(partial.ledgerRead(.partial, deliveryCount: 1) == .openDelivery(readLedger: true))
        // The delivery before a redelivery may still be recording: it looks even with no ledger yet.
        var redelivery = Machine(quotaWait: nil)
        #expect(redelivery.ledgerRead(.empty, deliveryCount: 2) == .openDelivery(readLedger: true))
    }

    @Test func aDeliveryThatFindsTheReportPublishedAcknowledgesWithoutSending() {
        var m = Machine(quotaWait: QuotaWaitPolicy())
        #expect(m.ledgerRead(.reported, deliveryCount: 2) == .acknowledge(.duplicate))
        #expect(m.isFinished)
    }

    @Test func aRejectedEntryIsDeadLetteredBeforeOrAfterItsLedgerIsRead() {
        let bad = JobRejection(.invalidJSON, "not valid JSON")
        var claiming = Machine(quotaWait: nil)
        #expect(claiming.entryRejected(bad) == .deadLetter(bad))
        #expect(claiming.isFinished)
        let badNotification = JobRejection(.invalidNotification, "ios: payload too large")
        var opening = Machine(quotaWait: nil)
        _ = opening.ledgerRead(.partial, deliveryCount: 1)
        #expect(opening.entryRejected(badNotification) == .deadLetter(badNotification))
    }

    // MARK: chunks and credits

    @Test func aDeliveryRunsChunkByChunkThenPublishesBeforeItAcknowledges() {
        var m = opened()
        let chunk = devices(3)
        #expect(
            m.chunkResolved(chunk, recorded: nothingRecorded(chunk), now: clock.now())
                == .reserveCredits(upTo: 3, until: until(0.2)))
        // Two credits free, then none, then the last one.
        #expect(m.creditsReserved(2, now: clock.now()) == .send(chunk[0..<2]))
        #expect(m.devicesSent(now: clock.now()) == .reserveCredits(upTo: 1, until: until(0.2)))
        clock.advance(by: 0.2)
        #expect(m.creditsReserved(0, now: clock.now()) == .reserveCredits(upTo: 1, until: until(0.2)))
        #expect(m.creditsReserved(1, now: clock.now()) == .send(chunk[2..<3]))
        #expect(m.devicesSent(now: clock.now()) == .recordReadyOutcomes)
        #expect(m.outcomesRecorded() == .takeChunk)
        #expect(m.chunkResolved([], recorded: [], now: clock.now()) == .takeChunk)
        #expect(m.devicesExhausted(outstanding: 2, now: clock.now()) == .awaitOutcomes(until: until(0.2)))
        clock.advance(by: 0.2)
        #expect(m.outcomesAwaited(outstanding: 1, now: clock.now()) == .awaitOutcomes(until: until(0.2)))
        #expect(m.outcomesAwaited(outstanding: 0, now: clock.now()) == .recordRemaining)
        #expect(m.remainingRecorded(outstanding: 0, shardedInto: 0) == .publishReport)
        #expect(!m.isFinished)
        #expect(m.reportPublished() == .acknowledge(.completed))
        #expect(m.isFinished)
    }

    @Test func aRedeliverySendsOnlyTheDevicesNotRecorded() {
        var m = Machine(quotaWait: nil)
        #expect(m.ledgerRead(.partial, deliveryCount: 2) == .openDelivery(readLedger: true))
        _ = m.deliveryOpened()
        let chunk = devices(4)
        let recorded: [RecordedOutcome?] = [
            RecordedOutcome(.accepted), nil,
            RecordedOutcome(.rejected(status: 410, reason: "Unregistered", action: .removeToken)), nil,
        ]
        #expect(
            m.chunkResolved(chunk, recorded: recorded, now: clock.now())
                == .reserveCredits(upTo: 2, until: until(0.2)))
        #expect(m.creditsReserved(2, now: clock.now()) == .send([chunk[1], chunk[3]][...]))
        #expect(m.devicesSent(now: clock.now()) == .recordReadyOutcomes)
    }

    @Test func aChunkWhollyRecordedSendsNothingEvenAfterTheCutoff() {
        var m = opened(quota: QuotaWaitPolicy())
        m.drainBegan(DrainDeadlines(beganAt: t0, deadline: 0, grace: 5))
        let chunk = devices(2)
        let recorded = chunk.map { _ in RecordedOutcome(.accepted) }
        // Nothing to charge, nothing to send: the chunk's counts are kept and the next chunk is taken.
        #expect(m.chunkResolved(chunk, recorded: recorded, now: clock.now()) == .recordReadyOutcomes)
        #expect(m.outcomesRecorded() == .takeChunk)
    }

    @Test func aShardedJobIsAcknowledgedWithoutItsOwnReport() {
        var m = opened()
        #expect(m.devicesExhausted(outstanding: 0, now: clock.now()) == .recordRemaining)
        #expect(m.remainingRecorded(outstanding: 0, shardedInto: 3) == .acknowledge(.sharded))
        #expect(m.isFinished)
    }

    // MARK: quota

    @Test func aDeniedChargeWaitsAPollIntervalAndAsksAgain() {
        var m = opened(quota: QuotaWaitPolicy(maxWait: 5, pollInterval: 0.05))
        let chunk = devices(10)
        #expect(m.chunkResolved(chunk, recorded: nothingRecorded(chunk), now: clock.now()) == .charge(.ios, count: 10))
        // Six granted; the other four might fit once in-flight charges settle.
        #expect(m.quotaDenied(granted: 6, retryable: true, now: clock.now()) == .waitForQuota(until: until(0.05)))
        clock.advance(by: 0.05)
        #expect(m.quotaWaitEnded() == .charge(.ios, count: 4))
        #expect(m.quotaDenied(granted: 1, retryable: true, now: clock.now()) == .waitForQuota(until: until(0.05)))
        clock.advance(by: 0.05)
        #expect(m.quotaWaitEnded() == .charge(.ios, count: 3))
        #expect(m.quotaGranted(count: 3, now: clock.now()) == .reserveCredits(upTo: 10, until: until(0.2)))
    }

    @Test func deniedUntilTheMaximumWaitTheRestIsOverQuota() {
        var m = opened(quota: QuotaWaitPolicy(maxWait: 1, pollInterval: 0.375))
        let deadline = clock.now().addingTimeInterval(1)
        let chunk = devices(10)
        #expect(m.chunkResolved(chunk, recorded: nothingRecorded(chunk), now: clock.now()) == .charge(.ios, count: 10))
        var action = m.quotaDenied(granted: 4, retryable: true, now: clock.now())
        var waits: [Date] = []
        while case .waitForQuota(let until) = action {
            waits.append(until)
            clock.set(until)
            #expect(m.quotaWaitEnded() == .charge(.ios, count: 6))
            action = m.quotaDenied(granted: 0, retryable: true, now: clock.now())
        }
        // Polls every 0.375 s, the last wait cut to the deadline; then the six denied get `quotaExceeded`.
        #expect(waits == [0.375, 0.75, 1].map { t0 + $0 })
        #expect(clock.now() == deadline)
        #expect(action == .refuseOverQuota(Array(chunk[4...])))
        #expect(m.overQuotaRefused(now: clock.now()) == .reserveCredits(upTo: 4, until: until(0.2)))
        #expect(m.creditsReserved(4, now: clock.now()) == .send(chunk[0..<4]))
    }

    @Test func deniedWithNothingInFlightIsOverQuotaWithoutWaiting() {
        var m = opened(quota: QuotaWaitPolicy(maxWait: 5, pollInterval: 0.05))
        let chunk = devices(3)
        _ = m.chunkResolved(chunk, recorded: nothingRecorded(chunk), now: clock.now())
        #expect(m.quotaDenied(granted: 0, retryable: false, now: clock.now()) == .refuseOverQuota(chunk))
        // Nothing left to send: straight to recording.
        #expect(m.overQuotaRefused(now: clock.now()) == .recordReadyOutcomes)
    }

    @Test func eachPlatformIsChargedInTurnAndTheChunkKeepsItsOrder() {
        var m = opened(quota: QuotaWaitPolicy())
        let ios = devices(2, .ios)
        let android = devices(3, .android)
        let chunk = [ios[0], android[0], ios[1], android[1], android[2]]
        #expect(m.chunkResolved(chunk, recorded: nothingRecorded(chunk), now: clock.now()) == .charge(.ios, count: 2))
        #expect(m.quotaGranted(count: 2, now: clock.now()) == .charge(.android, count: 3))
        #expect(
            m.quotaDenied(granted: 1, retryable: false, now: clock.now()) == .refuseOverQuota([android[1], android[2]]))
        #expect(m.overQuotaRefused(now: clock.now()) == .reserveCredits(upTo: 3, until: until(0.2)))
        #expect(sendAll(&m, [ios[0], android[0], ios[1]]) == .recordReadyOutcomes)
    }

    @Test func aQuotaWaitEndsAtTheDrainsAbandonDeadline() {
        var m = opened(quota: QuotaWaitPolicy(maxWait: 60, pollInterval: 1))
        m.drainBegan(DrainDeadlines(beganAt: t0, deadline: 2, grace: 1))
        let chunk = devices(4)
        _ = m.chunkResolved(chunk, recorded: nothingRecorded(chunk), now: clock.now())
        #expect(m.quotaDenied(granted: 0, retryable: true, now: clock.now()) == .waitForQuota(until: until(1)))
        clock.advance(by: 3)
        _ = m.quotaWaitEnded()
        #expect(m.quotaDenied(granted: 0, retryable: true, now: clock.now()) == .refuseOverQuota(chunk))
    }

    // MARK: a failed step

    @Test func aFailedStepStopsSendingAwaitsWhatIsOutAndAbandonsWithTheReason() {
        var m = opened()
        let chunk = devices(3)
        _ = m.chunkResolved(chunk, recorded: nothingRecorded(chunk), now: clock.now())
        #expect(sendAll(&m, chunk) == .recordReadyOutcomes)
        #expect(m.outcomesRecorded() == .takeChunk)
        // The next chunk's read fails with three sends still out: no more sends, wait for them until the deadline.
        let why = "a step failed: resolution vanished"
        #expect(
            m.stepFailed(why, outstanding: 3, waitUntil: until(5), now: clock.now())
                == .awaitOutcomes(until: until(0.2)))
        clock.advance(by: 0.2)
        #expect(m.outcomesAwaited(outstanding: 1, now: clock.now()) == .awaitOutcomes(until: until(0.2)))
        clock.advance(by: 0.2)
        #expect(m.outcomesAwaited(outstanding: 0, now: clock.now()) == .recordRemaining)
        #expect(
            m.remainingRecorded(outstanding: 0, shardedInto: 0)
                == .abandon(why: "\(why); the outcomes that came back are recorded"))
        #expect(m.isFinished)
    }

    @Test func aFailedStepWaitsForSilentSendsOnlyUntilItsDeadline() {
        var m = opened()
        let chunk = devices(2)
        _ = m.chunkResolved(chunk, recorded: nothingRecorded(chunk), now: clock.now())
        #expect(m.creditsReserved(2, now: clock.now()) == .send(chunk[...]))
        let deadline = until(0.3)
        let action = m.stepFailed("a step failed: x", outstanding: 2, waitUntil: deadline, now: clock.now())
        #expect(action == .awaitOutcomes(until: until(0.2)))
        clock.advance(by: 0.2)
        #expect(m.outcomesAwaited(outstanding: 2, now: clock.now()) == .awaitOutcomes(until: deadline))
        clock.advance(by: 0.1)
        #expect(m.outcomesAwaited(outstanding: 2, now: clock.now()) == .recordRemaining)
        #expect(
            m.remainingRecorded(outstanding: 2, shardedInto: 0)
                == .abandon(
                    why: "a step failed: x; the outcomes that came back are recorded, 2 sends did not answer in time"))
    }

    @Test func aFailedReportPublicationAbandonsWithEverythingRecorded() {
        var m = opened()
        #expect(m.devicesExhausted(outstanding: 0, now: clock.now()) == .recordRemaining)
        #expect(m.remainingRecorded(outstanding: 0, shardedInto: 0) == .publishReport)
        #expect(
            m.stepFailed("a step failed: y", outstanding: 0, waitUntil: until(5), now: clock.now()) == .recordRemaining)
        #expect(
            m.remainingRecorded(outstanding: 0, shardedInto: 0)
                == .abandon(why: "a step failed: y; the outcomes that came back are recorded"))
    }

    // MARK: drain

    @Test func sendsStopAtTheCutoffAndTheRunAbandonsAtTheDeadlineWithOutcomesRecorded() {
        var m = opened()
        m.drainBegan(DrainDeadlines(beganAt: t0, deadline: 10, grace: 2))
        let chunk = devices(4)
        clock.advance(by: 9)
        #expect(
            m.chunkResolved(chunk, recorded: nothingRecorded(chunk), now: clock.now())
                == .reserveCredits(upTo: 4, until: until(0.2)))
        #expect(m.creditsReserved(2, now: clock.now()) == .send(chunk[0..<2]))
        clock.advance(by: 1) // the cut-off: the other two are never sent
        #expect(m.devicesSent(now: clock.now()) == .stopSending)
        #expect(m.sendingStopped(outstanding: 2, now: clock.now()) == .awaitOutcomes(until: until(0.2)))
        clock.advance(by: 1.9)
        // The last wait ends at the abandon deadline, not a recheck interval later.
        #expect(m.outcomesAwaited(outstanding: 1, now: clock.now()) == .awaitOutcomes(until: t0 + 12))
        clock.set(t0 + 12)
        #expect(m.outcomesAwaited(outstanding: 1, now: clock.now()) == .recordRemaining)
        // What came back is recorded first; then the entry is left pending: no report, no ack.
        let ending = m.remainingRecorded(outstanding: 1, shardedInto: 0)
        #expect(
            ending == .abandon(why: "drain deadline reached with 1 sends outstanding; outcomes so far are recorded"))
        #expect(m.isFinished)
    }

    @Test func aDeliveryStoppedAtTheCutoffIsAbandonedEvenWithEverySendBack() {
        var m = opened()
        m.drainBegan(DrainDeadlines(beganAt: t0, deadline: 1, grace: 1))
        clock.advance(by: 1)
        let chunk = devices(2)
        // A chunk resolved after the cut-off is not sent at all.
        #expect(m.chunkResolved(chunk, recorded: nothingRecorded(chunk), now: clock.now()) == .stopSending)
        #expect(m.sendingStopped(outstanding: 0, now: clock.now()) == .recordRemaining)
        #expect(
            m.remainingRecorded(outstanding: 0, shardedInto: 0)
                == .abandon(
                    why: "drain deadline reached with 0 sends outstanding; outcomes so far are recorded"))
    }

    @Test func aDeliveryThatFinishesBeforeTheCutoffCompletes() {
        var m = opened()
        m.drainBegan(DrainDeadlines(beganAt: t0, deadline: 10, grace: 2))
        let chunk = devices(2)
        _ = m.chunkResolved(chunk, recorded: nothingRecorded(chunk), now: clock.now())
        #expect(sendAll(&m, chunk) == .recordReadyOutcomes)
        _ = m.outcomesRecorded()
        clock.advance(by: 5)
        #expect(m.devicesExhausted(outstanding: 2, now: clock.now()) == .awaitOutcomes(until: until(0.2)))
        #expect(m.outcomesAwaited(outstanding: 0, now: clock.now()) == .recordRemaining)
        #expect(m.remainingRecorded(outstanding: 0, shardedInto: 0) == .publishReport)
    }

    @Test func aSecondDrainKeepsTheFirstDeadlines() {
        var m = opened()
        let first = DrainDeadlines(beganAt: t0, deadline: 10, grace: 2)
        m.drainBegan(first)
        m.drainBegan(DrainDeadlines(beganAt: t0, deadline: 1, grace: 1))
        #expect(m.drain == first)
    }
}

/// The worker's cadence and drain, on a manual clock.
@Suite(.tags(.unit)) struct WorkerStateMachineTests {
    let t0 = Date(timeIntervalSince1970: 1_800_000_000)

    @Test func keepAliveComesEveryIntervalFromTheReadersStart() {
        var m = WorkerStateMachine(keepAliveIntervalMillis: 1000, reclaimIntervalMillis: 5000, now: t0 - 100)
        m.readerStarted(now: t0)
        #expect(m.readerLooped(now: t0 + 0.999) == .waitForSlots)
        #expect(m.readerLooped(now: t0 + 1) == .keepAlive)
        #expect(m.readerLooped(now: t0 + 1.5) == .waitForSlots)
        #expect(m.readerLooped(now: t0 + 2.2) == .keepAlive)
        #expect(m.readerLooped(now: t0 + 3.1) == .waitForSlots)
    }

    @Test func theFirstReadReclaimsThenEveryReclaimInterval() {
        var m = WorkerStateMachine(keepAliveIntervalMillis: 1000, reclaimIntervalMillis: 5000, now: t0)
        m.readerStarted(now: t0)
        #expect(m.slotsFreed(now: t0) == .reclaimIdle)
        #expect(m.slotsFreed(now: t0 + 4.9) == .readNew)
        #expect(m.slotsFreed(now: t0 + 5) == .reclaimIdle)
        #expect(m.slotsFreed(now: t0 + 6) == .readNew)
    }

    @Test func aDrainStopsSendsAtItsDeadlineAndAbandonsAfterTheGrace() {
        var m = WorkerStateMachine(keepAliveIntervalMillis: 1000, reclaimIntervalMillis: 5000, now: t0)
        #expect(m.mayStartSends(now: t0 + 1_000_000) && !m.shouldAbandon(now: t0 + 1_000_000))
        let d = m.drainBegan(deadline: 10, grace: 2, now: t0)
        #expect(d == DrainDeadlines(beganAt: t0, deadline: 10, grace: 2))
        #expect(m.mayStartSends(now: t0 + 9.999))
        #expect(!m.mayStartSends(now: t0 + 10))
        #expect(!m.shouldAbandon(now: t0 + 11.999))
        #expect(m.shouldAbandon(now: t0 + 12))
        // A second signal does not move the deadlines.
        #expect(m.drainBegan(deadline: 100, grace: 5, now: t0 + 3) == d)
    }
}
