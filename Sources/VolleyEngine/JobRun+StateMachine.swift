import Foundation
import VolleyCore

// The decisions of one delivery of one job entry, without I/O.
//
// `JobRun.StateMachine` is a value: events come in (the ledger was read, a chunk was resolved, the quota answered,
// credits were reserved, outcomes were awaited, a drain began…), the machine updates its state and returns the one
// `Action` the lane carries out next, answering with the next event. Every event that decides something in time
// carries the clock's `now`; the machine never reads a clock, a queue or a lock, so tests drive a whole delivery —
// the quota wait, the drain cut-off, the abandon deadline — on a manual clock. `JobRun` owns the I/O: the job's
// parsing, the sessions, the mailbox, the report.
//
//     claiming  --ledgerRead-->        acknowledge(.duplicate) | parkPaused | openDelivery(readLedger:);
//               --dueLater--> park
//     (a cancelled or paused job stops before its next credit or throttle slice: the devices charged and not sent
//     are released (releaseUnsent --unsentReleased-->), then stopSending; a cancelled job's report is published, a
//     paused one is parked (parkPaused) until its resume. The marks are read with the ledger when the delivery
//     starts, with each record, and once more (checkSteering --steeringChecked-->) before each throttle slice)
//     opening   --deliveryOpened-->    takeChunk;       (claiming, opening) --entryRejected--> deadLetter
//     taking    --chunkResolved-->     takeChunk | charge | reserveCredits | stopSending | recordReadyOutcomes
//               --devicesExhausted-->  awaitOutcomes | recordRemaining
//     charging  --quotaGranted/quotaDenied--> charge (next platform) | waitForQuota | refuseOverQuota | …the sends
//     throttling --throttleAnswered--> charge | reserveCredits | waitForThrottle;  a throttled job's chunk is sent
//               a granted slice at a time: each slice is charged, then sent, then the gate is asked again
//     waitingForThrottle --throttleWaitEnded--> throttle | waitForThrottle | stopSending
//     expiring  --devicesExpired--> …as after a send: devices whose send would start after the notification's
//               `ttl` ran out are given `expired` instead (a chunk at once, or a throttled chunk's rest)
//     sending   --creditsReserved-->   send | reserveCredits | stopSending;   --devicesSent--> the same, or record
//     awaiting  --outcomesAwaited-->   awaitOutcomes | recordRemaining
//     remaining --remainingRecorded--> abandon | acknowledge(.sharded) | publishReport --reportPublished--> acknowledge
//               | parkWaves --wavesParked--> acknowledge(.waitingForWaves) (a local-time job's later devices)
//     (any state after opening) --stepFailed--> awaitOutcomes | recordRemaining, then abandon: a delivery that must
//               give up records the outcomes it holds first, so its redelivery resends none of them

/// When a draining worker stops starting sends, and when its lanes stop waiting for the sends still out. Set once,
/// when the drain begins, and the same for every lane.
struct DrainDeadlines: Sendable, Hashable {
    /// No send starts at or after this instant.
    var sendCutoff: Date
    /// At this instant a lane records what came back and leaves its entry pending.
    var abandonAt: Date

    /// A drain that began at `now`: sends stop `deadline` seconds later, waiting for answers `grace` after that.
    init(beganAt now: Date, deadline: TimeInterval, grace: TimeInterval) {
        sendCutoff = now.addingTimeInterval(deadline)
        abandonAt = sendCutoff.addingTimeInterval(grace)
    }

    func allowsSends(at now: Date) -> Bool { now < sendCutoff }
    func abandons(at now: Date) -> Bool { now >= abandonAt }
}

extension JobRun {
    /// The decisions of one delivery (see the top of this file).
    struct StateMachine {
        enum State: Equatable {
            /// The entry is being parsed and validated, its app found, its ledger read.
            case claiming
            /// The quota account is being opened, the notification prepared, the chunk reader started.
            case opening
            /// Waiting for the next chunk of devices.
            case takingChunk
            /// A chunk's devices are being charged, one platform at a time.
            case charging
            /// A denied charge waits for in-flight charges to settle before it asks again.
            case waitingForQuota
            /// A throttled job's gate is being asked for the next slice of the chunk.
            case throttling
            /// The gate's next slice is not free yet: waiting for it, recording what arrives.
            case waitingForThrottle
            /// Devices too late to send are being given `expired`.
            case expiring
            /// The devices the quota refused are being given `quotaExceeded`.
            case refusingOverQuota
            /// A chunk's devices are being sent within the lane's credits.
            case sending
            /// The chunk is sent; what has arrived is being recorded.
            case recordingChunk
            /// The drain's cut-off passed: the lane stops its chunk reader and counts what is still out.
            case stoppingSends
            /// No more sends: waiting for the ones still out.
            case awaiting
            /// Recording what came back, before deciding how the delivery ends.
            case recordingRemaining
            case publishing
            /// A local-time job's later waves are being parked.
            case parkingWaves
            /// The job's pause and cancel marks are being looked at before a send.
            case checkingSteering
            /// The charges of devices a pause or cancel kept from being sent are being given back.
            case releasingUnsent
            case finished
        }

        /// Why the entry is acknowledged.
        enum Completion: Equatable, Sendable {
            /// An earlier delivery published the report and crashed before the ack: nothing is sent.
            case duplicate
            /// The job was split into shard jobs; the last shard publishes its report.
            case sharded
            /// Every device has a recorded outcome and the report is published.
            case completed
            /// A local-time job sent the devices due so far; the later ones wait in the schedule as its waves, and
            /// the last wave publishes the report.
            case waitingForWaves
        }

        /// What the lane does next; each names the event that answers it.
        enum Action: Equatable {
            /// Open the quota account (a redelivery adopts earlier charges when `readLedger`), prepare the
            /// notification once per platform, start reading chunks (looking recorded outcomes up when
            /// `readLedger`); answer `deliveryOpened()` or `entryRejected(_:)`.
            case openDelivery(readLedger: Bool)
            /// Take the next chunk; answer `chunkResolved` or `devicesExhausted`.
            case takeChunk
            /// Charge `count` pushes to the platform; answer `quotaGranted` or `quotaDenied`.
            case charge(Platform, count: Int)
            /// Record outcomes as they arrive (they settle charges, which may free quota) until `until`, then
            /// answer `quotaWaitEnded()`.
            case waitForQuota(until: Date)
            /// Ask the job's throttle gate for up to `count` pushes; answer
            /// `throttleAnswered(granted:retryAfter:now:)`.
            case throttle(count: Int)
            /// Record outcomes as they arrive until `until`, then answer `throttleWaitEnded(now:)`.
            case waitForThrottle(until: Date)
            /// Give these devices `expired` without a send; answer `devicesExpired(now:)`.
            case expire([Device])
            /// Give these devices `quotaExceeded` without a send; answer `overQuotaRefused(now:)`.
            case refuseOverQuota([Device])
            /// Wait until `until` at most for free credits, recording what arrives, then reserve up to `upTo`;
            /// answer `creditsReserved(_:now:)`.
            case reserveCredits(upTo: Int, until: Date)
            /// Send these devices (their credits are reserved); answer `devicesSent(now:)`.
            case send(ArraySlice<Device>)
            /// Record the outcomes that have arrived if a batch is ready, without waiting; answer
            /// `outcomesRecorded()`.
            case recordReadyOutcomes
            /// The drain's cut-off passed: stop reading chunks; answer `sendingStopped(outstanding:now:)`.
            case stopSending
            /// Wait until `until` at most for the sends still out, recording what arrives; answer
            /// `outcomesAwaited(outstanding:now:)`.
            case awaitOutcomes(until: Date)
            /// Record every outcome that has arrived; answer `remainingRecorded(outstanding:shardedInto:)`.
            case recordRemaining
            /// Publish the report (a shard also counts into its parent); answer `reportPublished()`.
            case publishReport
            /// Park the job's later local-time waves (and note when the next is due); answer `wavesParked()`.
            case parkWaves
            /// Look at the job's pause and cancel marks now; answer `steeringChecked(_:now:)`.
            case checkSteering
            /// Give back the quota charges of these devices, charged and not sent; answer `unsentReleased(now:)`.
            case releaseUnsent([Device])
            /// Park the paused job until its resume and acknowledge the entry, in one step. The delivery is over.
            case parkPaused
            /// Acknowledge the entry. The delivery is over.
            case acknowledge(Completion)
            /// Dead-letter the entry. The delivery is over.
            case deadLetter(JobRejection)
            /// Park the job in the schedule until `until` and acknowledge the entry, in one step. The delivery is
            /// over; the promoter brings the job back to the stream when it is due.
            case park(until: Date)
            /// Leave the entry pending for another delivery; what came back is recorded. The delivery is over.
            case abandon(why: String)
        }

        /// How long a lane blocks on credits or on outstanding sends before it looks at the drain again.
        static let recheckInterval: TimeInterval = 0.2

        /// The bounded wait of a denied charge; nil when no quota is configured (nothing is charged).
        let quotaWait: QuotaWaitPolicy?
        private(set) var state = State.claiming
        private(set) var drain: DrainDeadlines?
        /// The drain's cut-off stopped the sends before every device was sent.
        private(set) var stoppedEarly = false
        /// A step failed (`stepFailed`): why, and until when the sends still out are awaited.
        private(set) var failure: (why: String, waitUntil: Date)?
        /// The job was cancelled: no more sends start, what went is recorded and reported (`status: cancelled`).
        private(set) var cancelled = false
        /// Cancelled before this delivery began: chunks are counted, nothing is sent.
        private(set) var countingOnly = false
        /// The job (or its campaign) is paused: nothing more is sent; once what is out is recorded, it is parked.
        private(set) var paused = false
        /// A pause or cancel stopped the sends before every device was sent.
        private(set) var halted = false
        /// The marks were looked at since the gate last granted a slice.
        private var steeringFresh = false

        /// The chunk's devices to send, and how many of them have been handed to `send`.
        private var toSend: [Device] = []
        private var next = 0
        /// Charging: pushes wanted and granted per platform (by `Platform.index`), the platform being charged, and
        /// when its denied pushes stop waiting.
        private var wanted: [Int] = []
        private var granted: [Int] = []
        private var charging = -1
        private var chargeDeadline = Date.distantPast
        /// A throttled job's rate (nil: not throttled), the chunk's devices the gate has not granted yet, and when
        /// the gate said its next slice is free.
        private(set) var throttle: ThrottleRate?
        private var held: [Device] = []
        private var heldNext = 0
        private var throttleFreeAt = Date.distantPast
        /// When the notification's `ttl` runs out: no send starts at or after it (nil: never, for this machine).
        private(set) var expiresAt: Date?

        init(quotaWait: QuotaWaitPolicy?) { self.quotaWait = quotaWait }

        var isFinished: Bool { state == .finished }

        // MARK: events

        /// A drain began. It takes effect from the next event that carries `now`; a second drain changes nothing.
        mutating func drainBegan(_ deadlines: DrainDeadlines) {
            if drain == nil { drain = deadlines }
        }

        /// The entry is not a job this worker can send (bad JSON, invalid job, unknown app, too many deliveries,
        /// a notification that does not encode).
        mutating func entryRejected(_ rejection: JobRejection) -> Action {
            precondition(state == .claiming || state == .opening, "entryRejected in \(state)")
            state = .finished
            return .deadLetter(rejection)
        }

        /// The job was accepted and is due later than now (`sendAt`): it waits in the schedule, without reading its
        /// ledger (a parked job has sent nothing).
        mutating func dueLater(_ due: Date) -> Action {
            precondition(state == .claiming, "dueLater in \(state)")
            state = .finished
            return .park(until: due)
        }

        /// The job was accepted and its ledger read.
        mutating func ledgerRead(_ ledger: LedgerState, deliveryCount: Int) -> Action {
            precondition(state == .claiming, "ledgerRead in \(state)")
            if ledger == .reported {
                // Crashed after the report, before the ack: nothing left to do.
                state = .finished
                return .acknowledge(.duplicate)
            }
            if ledger == .paused {
                // Paused before this delivery: it waits, parked, for its resume; nothing is read or sent.
                state = .finished
                return .parkPaused
            }
            if ledger == .cancelled {
                // Cancelled before this delivery: its chunks are read only to count what earlier deliveries (a
                // local-time job's waves, a crashed delivery) recorded, for the report that says so; nothing is sent.
                cancelled = true
                countingOnly = true
                state = .opening
                return .openDelivery(readLedger: true)
            }
            // A first delivery that finds no ledger has nothing to skip, so its chunks are not looked up: that
            // saves an HMGET of every device (a fifth of Redis's CPU in `bench e2e`). Any redelivery looks, even
            // with no ledger yet: the delivery before it may still be running and recording.
            state = .opening
            return .openDelivery(readLedger: ledger == .partial || deliveryCount > 1)
        }

        /// The delivery is open; `throttle`: the job's `throttlePerMinute` (nil: sent as fast as credits allow).
        /// `expiresAt`: when the notification's `ttl` runs out (nil: it does not, for this delivery).
        mutating func deliveryOpened(throttle: ThrottleRate? = nil, expiresAt: Date? = nil) -> Action {
            precondition(state == .opening, "deliveryOpened in \(state)")
            self.throttle = throttle
            self.expiresAt = expiresAt
            state = .takingChunk
            return .takeChunk
        }

        /// A record found the job paused or cancelled (or a pause lifted). It takes effect before the next credit
        /// or throttle slice: what is out is recorded, nothing more starts.
        mutating func steeringSeen(_ steering: JobSteering) {
            if state == .finished { return }
            switch steering {
            case .cancelled: cancelled = true
            case .paused: paused = true
            case .run: if !halted { paused = false }
            }
        }

        /// The job's marks were looked at (`checkSteering`).
        mutating func steeringChecked(_ steering: JobSteering, now: Date) -> Action {
            precondition(state == .checkingSteering, "steeringChecked in \(state)")
            steeringSeen(steering)
            steeringFresh = true
            return askThrottle(now: now)
        }

        /// The charges of the devices of `releaseUnsent` are given back: stop.
        mutating func unsentReleased(now: Date) -> Action {
            precondition(state == .releasingUnsent, "unsentReleased in \(state)")
            return stopForCancel()
        }

        /// A pause or cancel is in force.
        var stopped: Bool { cancelled || paused }

        /// A chunk of the job's devices, with the outcome an earlier delivery recorded for each (or nil). Recorded
        /// devices are skipped; the rest are charged (when a quota is configured) and sent.
        mutating func chunkResolved(_ devices: [Device], recorded: [RecordedOutcome?], now: Date) -> Action {
            precondition(state == .takingChunk, "chunkResolved in \(state)")
            if countingOnly { return .takeChunk }
            if stopped { return stopForCancel() }
            if devices.isEmpty { return .takeChunk }
            if recorded.contains(where: { $0 != nil }) {
                toSend = []
                toSend.reserveCapacity(devices.count)
                for (d, r) in zip(devices, recorded) where r == nil { toSend.append(d) }
            } else {
                toSend = devices
            }
            next = 0
            if let expiresAt, now >= expiresAt, !toSend.isEmpty {
                let late = toSend
                toSend = []
                state = .expiring
                return .expire(late)
            }
            if throttle != nil, !toSend.isEmpty {
                // Throttled: the gate grants the chunk a slice at a time; each slice is charged when it is granted,
                // so the quota is charged in the hour the push goes.
                held = toSend
                heldNext = 0
                toSend = []
                return askThrottle(now: now)
            }
            if quotaWait != nil, !toSend.isEmpty { return startCharging(now: now) }
            return continueSending(now: now)
        }

        /// The gate granted `granted` pushes (maybe none); its next slice is free `retryAfter` seconds from `now`.
        mutating func throttleAnswered(granted: Int, retryAfter: TimeInterval, now: Date) -> Action {
            precondition(state == .throttling, "throttleAnswered in \(state)")
            throttleFreeAt = now.addingTimeInterval(max(0, retryAfter))
            steeringFresh = false
            let n = min(max(0, granted), held.count - heldNext)
            guard n > 0 else { return askThrottle(now: now) }
            toSend = Array(held[heldNext..<heldNext + n])
            heldNext += n
            next = 0
            if quotaWait != nil { return startCharging(now: now) }
            return continueSending(now: now)
        }

        /// The devices of `expire` have their outcome: on with the chunk (its rest, or the next one).
        mutating func devicesExpired(now: Date) -> Action {
            precondition(state == .expiring, "devicesExpired in \(state)")
            return continueSending(now: now)
        }

        /// The wait of `waitForThrottle` is over (what arrived is recorded).
        mutating func throttleWaitEnded(now: Date) -> Action {
            precondition(state == .waitingForThrottle, "throttleWaitEnded in \(state)")
            return askThrottle(now: now)
        }

        /// The chunk reader has no more devices.
        mutating func devicesExhausted(outstanding: Int, now: Date) -> Action {
            precondition(state == .takingChunk, "devicesExhausted in \(state)")
            return awaitOutstanding(outstanding, now: now)
        }

        /// The quota granted `count` pushes and denied none.
        mutating func quotaGranted(count: Int, now: Date) -> Action {
            chargeAnswered(granted: count, retryable: false, now: now)
        }

        /// The quota granted `granted` pushes and denied the rest; `retryable` when charges still in flight might
        /// be refunded (`QuotaGrant.shouldRetryDenied`).
        mutating func quotaDenied(granted: Int, retryable: Bool, now: Date) -> Action {
            chargeAnswered(granted: granted, retryable: retryable, now: now)
        }

        /// The wait of `waitForQuota` is over: ask again for what was denied.
        mutating func quotaWaitEnded() -> Action {
            precondition(state == .waitingForQuota, "quotaWaitEnded in \(state)")
            state = .charging
            return .charge(Platform.allCases[charging], count: wanted[charging] - granted[charging])
        }

        mutating func overQuotaRefused(now: Date) -> Action {
            precondition(state == .refusingOverQuota, "overQuotaRefused in \(state)")
            return continueSending(now: now)
        }

        /// `count` credits were reserved (0: none freed up in time).
        mutating func creditsReserved(_ count: Int, now: Date) -> Action {
            precondition(state == .sending, "creditsReserved in \(state)")
            guard count > 0 else { return continueSending(now: now) }
            let end = min(toSend.count, next + count)
            let slice = toSend[next..<end]
            next = end
            return .send(slice)
        }

        /// The devices of the last `send` were handed to their senders.
        mutating func devicesSent(now: Date) -> Action {
            precondition(state == .sending, "devicesSent in \(state)")
            return continueSending(now: now)
        }

        /// The chunk's ready outcomes are recorded: on to the next chunk.
        mutating func outcomesRecorded() -> Action {
            precondition(state == .recordingChunk, "outcomesRecorded in \(state)")
            if stopped { return stopForCancel() }
            state = .takingChunk
            return .takeChunk
        }

        /// The chunk reader stopped after the cut-off; `outstanding` sends are still out.
        mutating func sendingStopped(outstanding: Int, now: Date) -> Action {
            precondition(state == .stoppingSends, "sendingStopped in \(state)")
            return awaitOutstanding(outstanding, now: now)
        }

        /// The wait of `awaitOutcomes` is over (what arrived is recorded); `outstanding` sends are still out.
        mutating func outcomesAwaited(outstanding: Int, now: Date) -> Action {
            precondition(state == .awaiting, "outcomesAwaited in \(state)")
            return awaitOutstanding(outstanding, now: now)
        }

        /// Everything that came back is recorded; `outstanding` sends never answered. `shardedInto`: shard jobs
        /// the resolver split the job into (0: none). `laterWaves`: a local-time job found devices due later than
        /// now; they wait for their waves, and the report waits for the last one (unless the job was cancelled).
        mutating func remainingRecorded(outstanding: Int, shardedInto: Int, laterWaves: Bool = false) -> Action {
            precondition(state == .recordingRemaining, "remainingRecorded in \(state)")
            state = .finished
            if let failure {
                return .abandon(
                    why: "\(failure.why); the outcomes that came back are recorded"
                        + (outstanding > 0 ? ", \(outstanding) sends did not answer in time" : ""))
            }
            if stoppedEarly || outstanding > 0 {
                return .abandon(
                    why: "drain deadline reached with \(outstanding) sends outstanding; outcomes so far are recorded")
            }
            if shardedInto > 0 { return .acknowledge(.sharded) }
            if paused && halted && !cancelled {
                // Stopped by a pause: parked until its resume, which sends the devices not recorded yet.
                return .parkPaused
            }
            if laterWaves && !cancelled {
                state = .parkingWaves
                return .parkWaves
            }
            state = .publishing
            return .publishReport
        }

        /// The later waves are parked: the entry is acknowledged without a report.
        mutating func wavesParked() -> Action {
            precondition(state == .parkingWaves, "wavesParked in \(state)")
            state = .finished
            return .acknowledge(.waitingForWaves)
        }

        /// The report is published: only now is the entry acknowledged.
        mutating func reportPublished() -> Action {
            precondition(state == .publishing, "reportPublished in \(state)")
            state = .finished
            return .acknowledge(.completed)
        }

        /// A step of an opened delivery failed (a store answered an error, the recipients' resolution was lost).
        /// No more sends start; the sends still out are awaited until `waitUntil` and what came back is recorded,
        /// then the entry is left pending (`abandon`) with `why` in the reason. A failure while giving up ends the
        /// delivery at once: the caller throws it.
        mutating func stepFailed(_ why: String, outstanding: Int, waitUntil: Date, now: Date) -> Action {
            precondition(state != .claiming && state != .opening && state != .finished, "stepFailed in \(state)")
            precondition(failure == nil, "stepFailed twice")
            failure = (why, waitUntil)
            stoppedEarly = true
            toSend = []
            held = []
            return awaitOutstanding(outstanding, now: now)
        }

        // MARK: decisions

        private func drainAbandons(at now: Date) -> Bool {
            if let failure, now >= failure.waitUntil { return true }
            return drain?.abandons(at: now) ?? false
        }

        /// Counts the chunk's pushes per platform and charges the first platform that has any.
        private mutating func startCharging(now: Date) -> Action {
            wanted = [Int](repeating: 0, count: Platform.allCases.count)
            for d in toSend { wanted[d.platform.index] += 1 }
            granted = [Int](repeating: 0, count: wanted.count)
            charging = -1
            return chargeNextPlatform(now: now)
        }

        private mutating func chargeNextPlatform(now: Date) -> Action {
            let platforms = Platform.allCases
            var p = charging + 1
            while p < platforms.count && wanted[platforms[p].index] == 0 { p += 1 }
            guard p < platforms.count, let policy = quotaWait else { return admitCharged(now: now) }
            charging = p
            chargeDeadline = now.addingTimeInterval(policy.maxWait)
            state = .charging
            return .charge(platforms[p], count: wanted[platforms[p].index])
        }

        /// While some pushes are denied but others' charges are still in flight (they may be refunded), wait a
        /// poll interval and ask again, for at most the policy's wait, and never past the drain's abandon deadline.
        private mutating func chargeAnswered(granted count: Int, retryable: Bool, now: Date) -> Action {
            precondition(state == .charging, "quota answer in \(state)")
            let i = Platform.allCases[charging].index
            granted[i] += count
            if granted[i] >= wanted[i] || !retryable || now >= chargeDeadline || drainAbandons(at: now) {
                return chargeNextPlatform(now: now)
            }
            state = .waitingForQuota
            let poll = quotaWait?.pollInterval ?? 0
            return .waitForQuota(until: min(chargeDeadline, now.addingTimeInterval(poll)))
        }

        /// Every platform is charged: the first `granted` devices of each platform are sent, the rest get
        /// `quotaExceeded`. When everything is granted (the usual case) the chunk goes as it is, uncopied.
        private mutating func admitCharged(now: Date) -> Action {
            if granted == wanted { return continueSending(now: now) }
            var out: [Device] = []
            out.reserveCapacity(toSend.count)
            var refused: [Device] = []
            var taken = [Int](repeating: 0, count: wanted.count)
            for d in toSend {
                let p = d.platform.index
                if taken[p] < granted[p] {
                    taken[p] += 1
                    out.append(d)
                } else {
                    refused.append(d)
                }
            }
            toSend = out
            next = 0
            if refused.isEmpty { return continueSending(now: now) }
            state = .refusingOverQuota
            return .refuseOverQuota(refused)
        }

        /// A throttled chunk's next slice: asks the gate once its slice is free, waits until then otherwise (at
        /// most `recheckInterval` at a time, to see a drain begin); when the chunk is sent, records.
        private mutating func askThrottle(now: Date) -> Action {
            guard let throttle, heldNext < held.count else {
                held = []
                heldNext = 0
                toSend = []
                state = .recordingChunk
                return .recordReadyOutcomes
            }
            if let drain, !drain.allowsSends(at: now) {
                stoppedEarly = true
                held = []
                toSend = []
                state = .stoppingSends
                return .stopSending
            }
            if let expiresAt, max(now, throttleFreeAt) >= expiresAt {
                // The next slice would start too late, and every later one later still: the rest expire now.
                let late = Array(held[heldNext...])
                heldNext = held.count
                state = .expiring
                return .expire(late)
            }
            if now < throttleFreeAt {
                state = .waitingForThrottle
                return .waitForThrottle(until: min(throttleFreeAt, now.addingTimeInterval(Self.recheckInterval)))
            }
            if stopped {
                // Nothing of the held devices is charged yet (a slice is charged when granted): just stop.
                held = []
                heldNext = 0
                return stopForCancel()
            }
            if !steeringFresh {
                // A throttled job's slices are far apart: one look at the marks before each.
                state = .checkingSteering
                return .checkSteering
            }
            state = .throttling
            // Up to a burst: a sender that fell behind catches up in one round trip.
            return .throttle(count: min(held.count - heldNext, throttle.burst))
        }

        /// Stops reading chunks for a paused or cancelled job; the sends still out are awaited, then a cancelled
        /// job's report is published and a paused one parked.
        private mutating func stopForCancel() -> Action {
            toSend = []
            held = []
            heldNext = 0
            halted = true
            state = .stoppingSends
            return .stopSending
        }

        /// The next slice of the chunk, unless the drain's cut-off has passed or a pause or cancel is in force (the
        /// chunk's devices charged and not sent are then given back); when the chunk is sent, record.
        private mutating func continueSending(now: Date) -> Action {
            if stopped, next < toSend.count {
                let unsent = Array(toSend[next...])
                toSend = []
                if quotaWait == nil { return stopForCancel() }
                state = .releasingUnsent
                return .releaseUnsent(unsent)
            }

            if next >= toSend.count, throttle != nil, heldNext < held.count {
                toSend = []
                return askThrottle(now: now)
            }
            if next >= toSend.count {
                toSend = []
                held = []
                state = .recordingChunk
                return .recordReadyOutcomes
            }
            if let drain, !drain.allowsSends(at: now) {
                stoppedEarly = true
                toSend = []
                state = .stoppingSends
                return .stopSending
            }
            state = .sending
            return .reserveCredits(upTo: toSend.count - next, until: now.addingTimeInterval(Self.recheckInterval))
        }

        /// Waits for the sends still out, looking at the drain's abandon deadline at least every
        /// `recheckInterval`; then records what came back.
        private mutating func awaitOutstanding(_ outstanding: Int, now: Date) -> Action {
            if outstanding > 0 && !drainAbandons(at: now) {
                state = .awaiting
                let recheck = now.addingTimeInterval(Self.recheckInterval)
                let deadline = min(drain?.abandonAt ?? recheck, failure?.waitUntil ?? recheck)
                return .awaitOutcomes(until: min(recheck, deadline))
            }
            state = .recordingRemaining
            return .recordRemaining
        }
    }
}
