import Foundation
import Logging
import Metrics
import VolleyCore

/// One delivery of one job entry, on a lane thread: the I/O of a delivery whose decisions `StateMachine` makes.
final class JobRun {
    let worker: PipelineWorker
    let session: any PipelineSession
    let prefetcher: ChunkPrefetcher
    let entry: JobEntry
    let credits: Int
    let mailbox = LaneMailbox()
    /// This delivery's quota charges (nil: no quota configured).
    private var quota: (any QuotaAccount)?
    var logger: Logger
    /// Set once the entry parsed as a job with `"debug": true`: where its debug events go, and how many more it
    /// may record.
    private var debug: (org: OrgID, job: JobID, remaining: Int)?
    /// The delivery's decisions (`JobRun+StateMachine.swift`); this class carries out its actions.
    private var machine: StateMachine
    /// What the current chunk knows of its users, for a job whose push is per person.
    private var recipients: [UserID: RecipientContext] = [:]
    /// The due time of a job the schedule brought back, until its first send (`volley_schedule_due_to_send_seconds`).
    private var dueAt: Date?
    /// A `deliverAtLocalTime` job's decisions: which devices are due by now, which wait for a later wave.
    private var local: LocalTimeWaves?

    init(
        worker: PipelineWorker, session: any PipelineSession, prefetcher: ChunkPrefetcher, entry: JobEntry, credits: Int
    ) {
        self.worker = worker
        self.session = session
        self.prefetcher = prefetcher
        self.entry = entry
        self.credits = credits
        machine = StateMachine(quotaWait: worker.quota?.waitPolicy)
        logger = worker.logger
        logger[metadataKey: "entry"] = "\(entry.entryID)"
    }

    /// Why a run stopped without acknowledging: the entry stays pending for another delivery. `failed`: a step
    /// failed (rather than a drain running out of time).
    struct Abandoned: Error {
        let why: String
        var failed = false
    }

    /// What failed, for the log line and the abandon reason: the store's own message says what Redis answered.
    static func describe(_ error: any Error) -> String {
        let text = "\(error)"
        return text.isEmpty ? "a step failed (\(type(of: error)))" : "a step failed: \(text)"
    }

    func process() {
        let metrics = worker.metrics
        let started = worker.clock.now()
        // Queue wait: from the entry id's time (when it was added) to now; a redelivery's would include the
        // earlier attempts, so only first deliveries count.
        if entry.deliveryCount <= 1, let ms = entry.entryID.milliseconds {
            let waited = started.timeIntervalSince1970 * 1000 - Double(ms)
            metrics.queueWait.recordNanoseconds(Int64(max(0, waited) * 1_000_000))
        }
        do {
            if try run() {
                let took = max(0, worker.clock.now().timeIntervalSince(started))
                metrics.jobDuration.recordNanoseconds(Int64(took * 1e9))
            }
        } catch let r as JobRejection {
            // A job error found after the delivery opened (a resolver may find one): dead-lettered all the same.
            deadLetter(r)
        } catch let a as Abandoned where a.failed {
            worker.addStats { $0.jobsAbandoned += 1 }
            metrics.job("abandoned")
            metrics.redisErrors.increment()
            logger.error("job failed; left pending for redelivery", metadata: ["why": "\(a.why)"])
        } catch let a as Abandoned {
            worker.addStats { $0.jobsAbandoned += 1 }
            metrics.job("abandoned")
            logger.warning("job left pending for another worker", metadata: ["why": "\(a.why)"])
        } catch {
            worker.addStats { $0.jobsAbandoned += 1 }
            metrics.job("abandoned")
            metrics.redisErrors.increment()
            logger.error("job failed; left pending for redelivery", metadata: ["error": "\(error)"])
        }
    }

    private func deadLetter(_ r: JobRejection) {
        do {
            try session.deadLetter(entry, reason: r.reason, detail: r.message)
            switch r.reason {
            case .unknownApp: recordDebugEvents([DebugEvent(.invalidApp, at: worker.clock.now(), answer: r.message)])
            case .invalidNotification:
                recordDebugEvents([DebugEvent(.invalidNotification, at: worker.clock.now(), answer: r.message)])
            default: break
            }
            worker.addStats { $0.jobsDeadLettered += 1 }
            worker.metrics.job("dead_lettered")
            worker.metrics.deadLettered(r.reason)
            logger.warning("job dead-lettered", metadata: ["reason": "\(r.reason)", "detail": "\(r.message)"])
        } catch {
            worker.metrics.redisErrors.increment()
            logger.error("dead-lettering failed; left pending", metadata: ["error": "\(error)"])
        }
    }

    /// The worker's clock, after telling the machine of a drain that began since its last event.
    private func now() -> Date {
        if machine.drain == nil, let d = worker.state.drainDeadlines { machine.drainBegan(d) }
        return worker.clock.now()
    }

    /// How long to block, in real time, for a wait the machine set to end at `until` on the worker's clock.
    private func seconds(until: Date) -> TimeInterval { max(0, until.timeIntervalSince(worker.clock.now())) }

    /// A delivery, carrying out the machine's actions: accept the entry (or find it reported already), open it,
    /// then chunk by chunk skip what is recorded, charge the quota, send within the lane's credits and record
    /// outcomes; wait for the sends still out, then publish the report and acknowledge. A `JobRejection`
    /// dead-letters the entry; a drain past its deadline abandons it (throws `Abandoned`) with the outcomes so far
    /// recorded. Returns true when the entry was acknowledged.
    private func run() throws -> Bool {
        if let hint = entry.fields["syncHint"] {
            do { return try storeSyncHint(hint) } catch let r as JobRejection {
                return try end(machine.entryRejected(r))
            }
        }
        let claim: Claim
        do {
            claim = try accept()
        } catch let r as JobRejection {
            return try end(machine.entryRejected(r))
        }
        // A first delivery of a promoted entry measures how late its first send is.
        if entry.deliveryCount <= 1, let ms = entry.fields["due"].flatMap(Double.init) {
            dueAt = Date(timeIntervalSince1970: ms / 1000)
        }
        if let due = claim.due {
            guard case .park(let until) = machine.dueLater(due) else { preconditionFailure("dueLater must park") }
            try park(claim, until: until)
            return true
        }
        let readLedger: Bool
        switch machine.ledgerRead(claim.ledger, deliveryCount: entry.deliveryCount) {
        case .openDelivery(let r): readLedger = r
        case .parkPaused:
            try parkPaused(claim)
            return true
        case let other: return try end(other)
        }
        var plan: Plan
        do {
            plan = try open(claim, readLedger: readLedger)
        } catch let r as JobRejection {
            return try end(machine.entryRejected(r))
        }
        var report = JobReport(
            job: plan.jobID, entry: entry.entryID, org: plan.job.org, app: plan.job.app,
            startedAt: worker.clock.now())
        report.recipients = plan.job.recipients?.count ?? 0
        report.deliveries = entry.deliveryCount
        report.worker = worker.configuration.consumer
        // The resolver names in-app notifications and resolutions after the job id, and stores the notification
        // the planner decided (a template's).
        var cursorJob = plan.job
        cursorJob.id = plan.jobID
        cursorJob.notification = plan.notification
        // The cursor reads on the prefetch session, one or two chunks ahead of the sends (ChunkPrefetcher).
        // A local-time job reads the users' directory attributes too: a user's `timeZone` places the devices that
        // registered none.
        var needs = plan.personal?.needs ?? .none
        if let local {
            needs.attributes = true
            // One instant for the delivery: the recipient step stores and caps the users due by it (each at their
            // own wave, never before their push), and the chunks' devices are split at it, so every device sent
            // belongs to a user already stored.
            needs.localTime = LocalTimeGate(
                time: local.time, reference: local.reference, fallbackZone: local.fallbackZone,
                asOf: worker.clock.now())
        }
        // A job cancelled before this delivery reads its chunks only to count them: no inbox, no cap.
        needs.countOnly = machine.countingOnly
        let cursor = try worker.resolver.cursor(for: cursorJob, session: prefetcher.session, needs: needs)
        let config = worker.configuration
        let ahead = prefetcher.start(
            cursor: cursor, job: plan.job, jobID: plan.jobID, chunkSize: config.chunkSize,
            readLedger: plan.readLedger)
        defer { ahead.cancelAndWait() }
        var facts = RecipientFacts()
        var action = machine.deliveryOpened(throttle: plan.job.throttle, expiresAt: plan.expiresAt)
        while true {
            do {
                switch action {
                case .takeChunk:
                    switch ahead.take() {
                    case .end:
                        ahead.cancelAndWait()
                        let t = now()
                        action = machine.devicesExhausted(outstanding: mailbox.pending.outstanding, now: t)
                    case .failed(let error): throw error
                    case .chunk(let chunk, let recorded):
                        // The machine sends a chunk's devices before it takes the next chunk.
                        recipients = chunk.recipients
                        count(chunk, recorded: recorded, plan, &report)
                        try recordSkipped(chunk, plan)
                        let t = now()
                        if var waves = local {
                            // A local-time job sends the devices due by now; the others wait for their wave.
                            let due = waves.split(
                                chunk.devices, recorded: recorded, now: needs.localTime?.asOf ?? t,
                                recipients: chunk.recipients)
                            waves.waitFor(chunk.usersDueLater)
                            local = waves
                            action = machine.chunkResolved(due.devices, recorded: due.recorded, now: t)
                        } else {
                            action = machine.chunkResolved(chunk.devices, recorded: recorded, now: t)
                        }
                    }
                case .charge(let platform, let count):
                    guard let quota else {
                        // Charged only with a quota configured; without one every push goes.
                        let t = now()
                        action = machine.quotaGranted(count: count, now: t)
                        continue
                    }
                    let g = try quota.charge(platform: platform, count: count)
                    let t = now()
                    action =
                        g.denied == 0
                        ? machine.quotaGranted(count: g.granted, now: t)
                        : machine.quotaDenied(granted: g.granted, retryable: g.shouldRetryDenied, now: t)
                case .waitForQuota(let until):
                    // Outcomes arriving settle charges, which may refund some: record each at once.
                    let batch = mailbox.wait(outstandingBelow: 1, flushAt: 1, timeout: seconds(until: until))
                    if !batch.isEmpty { try record(batch, plan, &report) }
                    action = machine.quotaWaitEnded()
                case .throttle(let count):
                    // A throttled job's gate (the fleet's, keyed by the job a shard belongs to): one round trip
                    // per slice.
                    guard let gate = worker.throttle, let rate = machine.throttle else {
                        throw JobRejection(.invalidJob, "throttlePerMinute: this worker has no throttle store")
                    }
                    let g = try gate.take(
                        org: plan.job.org, job: plan.progressJob, rate: rate, count: count, now: worker.clock.now())
                    let t = now()
                    action = machine.throttleAnswered(granted: g.granted, retryAfter: g.retryAfter, now: t)
                case .waitForThrottle(let until):
                    let batch = mailbox.hold(flushAt: config.recordBatch, timeout: seconds(until: until))
                    if !batch.isEmpty { try record(batch, plan, &report) }
                    let t = now()
                    action = machine.throttleWaitEnded(now: t)
                case .expire(let devices):
                    // Too late: a terminal `expired` without a send (nothing was charged for them).
                    mailbox.settleUnsent(devices, as: .expired)
                    let t = now()
                    action = machine.devicesExpired(now: t)
                case .refuseOverQuota(let devices):
                    // Over quota: a terminal `quotaExceeded` without a send, recorded with the other outcomes.
                    mailbox.settleUnsent(devices, as: .quotaExceeded)
                    let t = now()
                    action = machine.overQuotaRefused(now: t)
                case .reserveCredits(let upTo, let until):
                    // Credits in bursts (one lock for many sends): block until a slice is free, record what came
                    // back meanwhile, then take as many as are free.
                    let batch = mailbox.wait(
                        outstandingBelow: credits, flushAt: config.recordBatch, timeout: seconds(until: until))
                    if !batch.isEmpty { try record(batch, plan, &report) }
                    let granted = mailbox.reserve(upTo: upTo, outstandingBelow: credits)
                    let t = now()
                    action = machine.creditsReserved(granted, now: t)
                case .send(let devices):
                    if let due = dueAt {
                        dueAt = nil
                        let lag = max(0, worker.clock.now().timeIntervalSince(due))
                        worker.metrics.scheduleLag.recordNanoseconds(Int64(lag * 1e9))
                    }
                    refreshLifetime(&plan)
                    send(devices, plan)
                    let t = now()
                    action = machine.devicesSent(now: t)
                case .recordReadyOutcomes:
                    // Record what has arrived, so a crash repeats at most what is in flight plus one batch.
                    let batch = mailbox.wait(outstandingBelow: .max, flushAt: config.recordBatch, timeout: 0)
                    if !batch.isEmpty { try record(batch, plan, &report) }
                    action = machine.outcomesRecorded()
                case .stopSending:
                    ahead.cancelAndWait()
                    let t = now()
                    action = machine.sendingStopped(outstanding: mailbox.pending.outstanding, now: t)
                case .awaitOutcomes(let until):
                    let batch = mailbox.wait(
                        outstandingBelow: 1, flushAt: config.recordBatch, timeout: seconds(until: until))
                    if !batch.isEmpty { try record(batch, plan, &report) }
                    let t = now()
                    action = machine.outcomesAwaited(outstanding: mailbox.pending.outstanding, now: t)
                case .recordRemaining:
                    let rest = mailbox.takeAll()
                    if !rest.isEmpty { try record(rest, plan, &report) }
                    facts = cursor.facts
                    action = machine.remainingRecorded(
                        outstanding: mailbox.pending.outstanding, shardedInto: facts.shardedInto,
                        laterWaves: local.map { !$0.later.isEmpty } ?? false)
                case .parkWaves:
                    if let local {
                        try session.parkWaves(
                            entry, org: plan.job.org, job: plan.jobID, reference: local.reference, waves: local.later)
                    }
                    action = machine.wavesParked()
                case .checkSteering:
                    let steering = try session.checkSteering()
                    let t = now()
                    action = machine.steeringChecked(steering, now: t)
                case .releaseUnsent(let devices):
                    try releaseCharges(of: devices, plan)
                    let t = now()
                    action = machine.unsentReleased(now: t)
                case .parkPaused:
                    try parkPaused(Claim(job: plan.job, jobID: plan.jobID, senders: [:], ledger: .paused, due: nil))
                    return true
                case .publishReport:
                    try publish(plan, facts: facts, &report)
                    action = machine.reportPublished()
                case .acknowledge(let completion):
                    try acknowledge(completion, plan: plan, facts: facts, report: report)
                    return true
                case .openDelivery, .deadLetter, .abandon, .park:
                    return try end(action)
                }
            } catch let r as JobRejection {
                throw r
            } catch let a as Abandoned {
                throw a
            } catch {
                // Give up, but first record what the sends still out answer: the redelivery then resends none
                // of them. A second failure while doing so ends the delivery at once.
                if machine.failure != nil { throw error }
                ahead.cancelAndWait()
                let t = now()
                action = machine.stepFailed(
                    Self.describe(error), outstanding: mailbox.pending.outstanding,
                    waitUntil: t.addingTimeInterval(config.drainDeadlineSeconds), now: t)
            }
        }
    }

    /// An entry carrying a sync hint (field `syncHint`: JSON `{org, app, users, type, recordIds}`): stored for the
    /// flushers (`SyncHintIntake`) and acknowledged; a malformed one is dead-lettered, its detail naming the field.
    /// Redelivered after a crash, it is stored again: its ids merge with themselves.
    private func storeSyncHint(_ json: String) throws -> Bool {
        let hint: SyncHintRequest
        do {
            hint = try SyncHintRequest(json: try JSONValue(parsing: json), at: [])
        } catch let e as JSONFieldError {
            throw JobRejection(.invalidJob, "syncHint.\(e.field): \(e.message)")
        } catch {
            throw JobRejection(.invalidJSON, "syncHint is not valid JSON: \(error)")
        }
        try checkDeliveryCount()
        guard let org = hint.org, !org.rawValue.isEmpty else {
            throw JobRejection(.invalidJob, "syncHint.org: required")
        }
        if let p = hint.problem { throw JobRejection(.invalidJob, "syncHint.\(p.field): \(p.message)") }
        _ = try senders(org: org, app: hint.app, field: "syncHint.app")
        guard let store = worker.syncHints else {
            throw JobRejection(.invalidJob, "syncHint: this worker does not take sync hints")
        }
        _ = try store.add(
            org: org, app: hint.app, users: hint.users, type: hint.type, recordIds: hint.recordIds,
            now: worker.clock.now())
        try session.ack(entry.entryID)
        Self.syncHintsReceived.increment(by: hint.users.count)
        worker.addStats { $0.jobsCompleted += 1 }
        worker.metrics.job("completed")
        return true
    }

    /// Sync hints stored from the job stream, per user named (the API counts its own under the same name).
    static let syncHintsReceived = Counter(label: "volley_sync_hints_received_total")

    /// Carries out an action that ends a delivery before it was opened (or abandons it): returns whether the
    /// entry was acknowledged.
    private func end(_ action: StateMachine.Action) throws -> Bool {
        switch action {
        case .acknowledge(.duplicate):
            try session.ack(entry.entryID)
            worker.addStats { $0.jobsCompleted += 1 }
            worker.metrics.job("duplicate")
            return true
        case .deadLetter(let r):
            deadLetter(r)
            return false
        case .abandon(let why):
            throw Abandoned(why: why, failed: machine.failure != nil)
        default:
            preconditionFailure("\(action) does not end a delivery")
        }
    }

    /// An entry delivered more often than `worker.maxDeliveries` is dead-lettered, whatever it holds.
    private func checkDeliveryCount() throws {
        let limit = worker.configuration.maxDeliveries
        if entry.deliveryCount > limit {
            throw JobRejection(.tooManyDeliveries, "delivered \(entry.deliveryCount) times; maximum \(limit)")
        }
    }

    /// The app's senders for `org`, or the rejection that dead-letters the entry; `field` (`syncHint.app`) leads
    /// the message when the app is not the entry's top-level `app`.
    private func senders(org: OrgID, app: AppName, field: String? = nil) throws -> [Platform: any PushSender] {
        let lead = field.map { "\($0): " } ?? ""
        switch worker.apps.lookup(org: org, app: app) {
        case .senders(let s): return s
        case .unknownApp: throw JobRejection(.unknownApp, "\(lead)app '\(app)' is not configured")
        case .orgNotAllowed:
            throw JobRejection(.unknownApp, "\(lead)org '\(org)' may not send through app '\(app)' (apps[].orgs)")
        }
    }

    /// The jobs whose pause and cancel marks steer a delivery: the job, and the campaign it is a shard of.
    static func steeredBy(_ claim: Claim) -> [JobID] { [claim.jobID] + (claim.job.shard.map { [$0.parent] } ?? []) }

    /// Parks a paused job until its resume and acknowledges its entry (one script); what it sent is recorded.
    private func parkPaused(_ claim: Claim) throws {
        try session.parkPaused(
            entry, org: claim.job.org, job: claim.jobID, pausedBy: Self.steeredBy(claim), now: worker.clock.now())
        worker.addStats { $0.jobsParked += 1 }
        worker.metrics.job("paused")
        logger.info("job paused: parked until it is resumed")
    }

    /// Gives back the quota charges of devices that were charged and will not be sent (a pause or cancel came
    /// between the charge and their send).
    private func releaseCharges(of devices: [Device], _ plan: Plan) throws {
        guard let quota, !devices.isEmpty else { return }
        var counts = [Int](repeating: 0, count: Platform.allCases.count)
        for d in devices { counts[d.platform.index] += 1 }
        let none = [Int](repeating: 0, count: counts.count)
        guard let settlement = Self.settlement(quota, delivered: none, refunded: counts) else { return }
        try session.releaseCharges(org: plan.job.org, job: plan.jobID, settlement)
        try quota.settle(settlement)
    }

    /// Parks a job due later in the schedule and acknowledges its entry (one script).
    private func park(_ claim: Claim, until due: Date) throws {
        try session.park(entry, org: claim.job.org, job: claim.jobID, due: due)
        worker.addStats { $0.jobsParked += 1 }
        worker.metrics.job("parked")
        logger.info("job parked until its time", metadata: ["sendAt": "\(claim.job.sendAt?.text ?? "")"])
    }

    /// What `accept` found: the job, its id, its app's senders and what earlier deliveries left in the ledger.
    struct Claim {
        let job: PushJob
        let jobID: JobID
        let senders: [Platform: any PushSender]
        let ledger: LedgerState
        /// Set when the job is due later: it is parked, not sent.
        let due: Date?
    }

    /// What `open` decided for a delivery: the job, its id, and what is sent per platform.
    struct Plan {
        let job: PushJob
        let jobID: JobID
        /// The notification prepared per platform and stored in the inbox (a template's, for a templated job).
        let notification: VolleyCore.Notification
        /// Each device's own payload, for a job whose push is per person; nil: `prepared` goes to every device.
        let personal: (any PersonalContent)?
        /// Indexed by `Platform.index`: the per-device lookup is an array read, not a hash.
        var prepared: [(any PushSender, any PreparedNotification)?]
        /// The `ttl` (seconds left) the relative-lifetime platforms were prepared with (`refreshLifetime`).
        var preparedTTL: Int?
        /// False on a first delivery that found no ledger: its chunks are not looked up.
        let readLedger: Bool
        /// When the notification's `ttl` runs out: no send starts at or after it (nil: `ttl` 0, now or never,
        /// which the providers enforce themselves).
        let expiresAt: Date?
        /// Where progress counts: a shard counts into its parent, so `send --wait` on a campaign sees all of it.
        var progressJob: JobID { job.shard?.parent ?? jobID }
        /// The message ids the pushes carry (nil: none), kept for `refreshLifetime`.
        var tracking: MessageTracking?
        /// What the delivery tells of its outcomes on the event stream and in the users' histories.
        var trail: DeliveryTrail {
            DeliveryTrail(org: job.org, campaign: progressJob, app: job.app, tracking: tracking)
        }
    }

    /// Step 1: parse and validate the entry, find its app for its org, and read what earlier deliveries left.
    private func accept() throws -> Claim {
        let config = worker.configuration
        guard let json = entry.fields["job"] else {
            throw JobRejection(
                .invalidJSON,
                "entry has no 'job' field (fields: \(entry.fields.keys.sorted().joined(separator: ",")))")
        }
        let parsed: JSONValue
        do { parsed = try JSONValue(parsing: json) } catch {
            throw JobRejection(.invalidJSON, "not valid JSON: \(error)")
        }
        let job: PushJob
        do { job = try PushJob(json: parsed, defaultOrg: nil) } catch {
            switch error.problem {
            case .expected where error.path.isEmpty: throw JobRejection(.invalidJSON, "the job is not a JSON object")
            case .missing: throw JobRejection(.invalidJSON, "missing key '\(error.field)'")
            case .expected: throw JobRejection(.invalidJSON, "wrong type at '\(error.field)': \(error.message)")
            }
        }
        // Every line about the job carries job, entry, org and app.
        logger[metadataKey: "org"] = "\(job.org)"
        logger[metadataKey: "app"] = "\(job.app)"
        // A job parked without an id keeps the id it had on its first entry (`jobId`, written on promotion).
        let jobID = job.id ?? entry.fields["jobId"].map(JobID.init) ?? JobID(entry.entryID.rawValue)
        logger[metadataKey: "job"] = "\(jobID)"
        if job.debug == true {
            // A shard's events go to its parent: `volley events --job` names the job that was sent.
            debug = (job.org, job.shard?.parent ?? jobID, DebugEvent.maxPerJob)
        }
        if let object = parsed.objectValue, case let unknown = JobKeys.unknownKeys(in: object), !unknown.isEmpty {
            throw JobRejection(
                .invalidJob,
                "unknown key\(unknown.count == 1 ? "" : "s") "
                    + unknown.map(\.description).joined(separator: ", "))
        }
        try checkDeliveryCount()
        try job.validate()
        let senders = try senders(org: job.org, app: job.app)
        // A job due later waits in the schedule; its ledger is not read (a parked job has sent nothing). An entry
        // the promoter brought back (`due`) is due, however late it is read.
        switch JobTiming.of(
            sendAt: job.sendAt, now: worker.clock.now(), maxAheadDays: config.scheduleMaxAheadDays,
            promoted: entry.fields["due"] != nil)
        {
        case .refused(let r): throw r
        case .later(let due): return Claim(job: job, jobID: jobID, senders: senders, ledger: .empty, due: due)
        case .now: break
        }
        let ledger = try session.ledgerState(org: job.org, job: jobID)
        return Claim(job: job, jobID: jobID, senders: senders, ledger: ledger, due: nil)
    }

    /// Step 2: open the quota account and prepare the notification once per platform. An invalid notification is
    /// a job error (`JobRejection`), found before anything is sent.
    private func open(_ claim: Claim, readLedger: Bool) throws -> Plan {
        let job = claim.job
        if job.throttlePerMinute != nil && worker.throttle == nil {
            throw JobRejection(.invalidJob, "throttlePerMinute: this worker has no throttle store")
        }
        // A redelivery adopts the quota charges an earlier delivery left unsettled: it resends those devices.
        quota = try worker.quota?.account(
            org: job.org, job: claim.jobID,
            delivery: "\(worker.configuration.consumer)#\(entry.deliveryCount)",
            adoptingEarlierCharges: readLedger)
        if let time = job.deliverAtLocalTime {
            // Due times count from `sendAt`, else from when the job was first added (its first entry, which a wave
            // carries): every delivery of the job decides from the same instant, to the millisecond.
            let ms =
                job.sendAt.map { $0.date.timeIntervalSince1970 * 1000 }
                ?? entry.fields["wave"].flatMap(LocalTimeWaves.reference(fromWaveField:)).map {
                    $0.timeIntervalSince1970 * 1000
                }
                ?? entry.entryID.milliseconds.map(Double.init) ?? worker.clock.now().timeIntervalSince1970 * 1000
            // The org's zone: the one set through the API (one read per delivery of a local-time job), else the
            // configuration's, else UTC.
            let stored = try session.orgTimeZone(org: job.org).flatMap(TimeZone.init(identifier:))
            local = LocalTimeWaves(
                time: time, reference: Date(timeIntervalSince1970: ms.rounded(.down) / 1000),
                fallbackZone: stored ?? worker.configuration.orgTimeZones[job.org] ?? TimeZone(identifier: "UTC")!)
        }
        // A pause or cancel (of the job or of the campaign it is a shard of) is seen by the outcome records' own
        // round trips, and looked at before a throttle slice and before the first send.
        session.watchSteering(org: job.org, jobs: Self.steeredBy(claim))
        let personal = try worker.personalContent?.plan(for: job, jobID: claim.jobID)
        var notification = personal?.notification ?? job.effectiveNotification
        if worker.configuration.unansweredSends == .resend && notification.collapseId == nil {
            // Every push of the job shows under one identity, so a send resent after its connection died
            // unanswered replaces its first copy on the device (the campaign's, for a shard).
            notification.resendCollapseId = MessageTracking.resendCollapseID(
                org: job.org, job: job.shard?.parent ?? claim.jobID)
        }
        let tracking = try messageTracking(for: job, jobID: claim.jobID, notification: notification)
        // The lifetime counts from when the notification was due: a delivery that starts later (a queue, a
        // redelivery, a throttle) gives the providers what is left of it, not the whole `ttl` again.
        let lifetime = Self.lifetime(of: notification, start: lifetimeStart(of: job), now: worker.clock.now())
        var toPrepare = notification
        if let left = lifetime?.remaining { toPrepare.ttl = left }
        var prepared = [(any PushSender, any PreparedNotification)?](repeating: nil, count: Platform.allCases.count)
        for platform in Platform.allCases where job.targets(platform) {
            guard let sender = claim.senders[platform] else { continue }
            do {
                prepared[platform.index] = (
                    sender, try sender.prepare(toPrepare, jobID: claim.jobID, tracking: tracking)
                )
            } catch let e as NotificationError {
                throw JobRejection(.invalidNotification, "\(platform): \(e)")
            }
        }
        return Plan(
            job: job, jobID: claim.jobID, notification: notification, personal: personal?.content,
            prepared: prepared, preparedTTL: lifetime?.remaining, readLedger: readLedger,
            expiresAt: lifetime?.expiresAt, tracking: tracking)
    }

    /// Before a send: FCM's `ttl` counts from when FCM accepts the message, so a send that starts a second or more
    /// after the plan was prepared (a throttled job's later slices, a long campaign) gets FCM's notification
    /// prepared again with what is left of the lifetime. APNs's `apns-expiration` is an instant and stays. At most
    /// one preparation a second per job.
    private func refreshLifetime(_ plan: inout Plan) {
        let android = Platform.android.index
        guard let expiresAt = plan.expiresAt, let ttl = plan.preparedTTL, let (sender, _) = plan.prepared[android]
        else { return }
        let left = max(1, Int(expiresAt.timeIntervalSince(worker.clock.now()).rounded(.down)))
        guard left < ttl else { return }
        var n = plan.notification
        n.ttl = left
        // The same notification prepared at open; a failure now would be a bug, and the open one stays.
        guard let p = try? sender.prepare(n, jobID: plan.jobID, tracking: plan.tracking) else { return }
        plan.prepared[android] = (sender, p)
        plan.preparedTTL = left
    }

    /// When the job's notification starts to live: a local-time wave's own instant; else the job's `sendAt` (a
    /// parked job comes back on a later entry); else when its entry entered the stream (the entry id's time); now
    /// for an entry whose id carries no time.
    private func lifetimeStart(of job: PushJob) -> Date {
        if let wave = entry.fields["wave"].flatMap(LocalTimeWaves.instant(fromWaveField:)) { return wave }
        if let sendAt = job.sendAt { return sendAt.date }
        return entry.entryID.milliseconds.map { Date(timeIntervalSince1970: Double($0) / 1000) } ?? worker.clock.now()
    }

    /// When a notification that started to live at `start` expires, and the whole seconds it has left at `now`
    /// (at least 1: a send that starts in time is not handed a `ttl` of 0, which means now or never). nil for
    /// `ttl` 0 or an invalid `ttl` (preparation refuses that one, naming the field).
    static func lifetime(of n: VolleyCore.Notification, start: Date, now: Date) -> (expiresAt: Date, remaining: Int)? {
        guard let ttl = try? n.effectiveTTL(reason: "BadExpirationDate"), ttl > 0 else { return nil }
        let expiresAt = start.addingTimeInterval(TimeInterval(ttl))
        let left = Int(expiresAt.timeIntervalSince(now).rounded(.down))
        return (expiresAt, max(1, min(ttl, left)))
    }

    /// Step 3, per chunk: counts what resolution found into the report, and the devices an earlier delivery
    /// recorded (the machine skips them).
    private func count(_ chunk: DeviceChunk, recorded: [RecordedOutcome?], _ plan: Plan, _ report: inout JobReport) {
        report.users += chunk.users
        report.noDevices += chunk.usersWithoutDevices
        if debug != nil, !chunk.usersWithoutDevicesIDs.isEmpty {
            let now = worker.clock.now()
            let answer = "no registered device for app \(plan.job.app)"
            recordDebugEvents(
                chunk.usersWithoutDevicesIDs.map { DebugEvent(.noDevices, at: now, user: $0, answer: answer) })
        }
        report.unknownRecipients += chunk.unknownRecipients
        if !chunk.cappedUserIDs.isEmpty {
            worker.metrics.recipients("frequency_capped", chunk.cappedUserIDs.count, app: plan.job.app)
            if debug != nil {
                let now = worker.clock.now()
                recordDebugEvents(
                    chunk.cappedUserIDs.map {
                        DebugEvent(.notEnabled, at: now, user: $0, answer: "frequency cap: stored in the inbox only")
                    })
            }
        }
        worker.metrics.recipients("no_devices", chunk.usersWithoutDevices, app: plan.job.app)
        worker.metrics.recipients("unknown_recipient", chunk.unknownRecipients, app: plan.job.app)
        let devices = chunk.devices // the job's platforms only (the prefetcher filtered them)
        if devices.isEmpty { return }
        report.devices += devices.count
        session.noteProgress(org: plan.job.org, job: plan.progressJob, resolved: devices.count, done: 0)
        var skipped = 0
        for (d, rec) in zip(devices, recorded) {
            if let rec {
                report.count(rec.outcome, platform: d.platform)
                skipped += 1
            }
        }
        report.alreadyRecorded += skipped
        if skipped > 0 { worker.addStats { $0.devicesSkippedAsRecorded += skipped } }
    }

    /// Tells the event stream and the users' histories who of a chunk's audience got nothing, and why (each once
    /// per job and user, however often a redelivery resolves the chunk again).
    private func recordSkipped(_ chunk: DeviceChunk, _ plan: Plan) throws {
        if machine.countingOnly || (chunk.cappedUserIDs.isEmpty && chunk.usersWithoutDevicesIDs.isEmpty) { return }
        let trail = plan.trail
        let now = worker.clock.now()
        try session.recordSkipped(trail, users: chunk.cappedUserIDs, reason: .capped, at: now)
        try session.recordSkipped(trail, users: chunk.usersWithoutDevicesIDs, reason: .noDevice, at: now)
    }

    /// Sends devices whose credits are reserved.
    private func send(_ devices: ArraySlice<Device>, _ plan: Plan) {
        if let personal = plan.personal { return sendPersonal(devices, plan, personal) }
        var sent = 0
        for d in devices {
            guard let (sender, prep) = plan.prepared[d.platform.index] else {
                mailbox.post(d, .failed(reason: "PlatformNotConfigured", resendWasSafe: true))
                continue
            }
            sender.send(prep, to: d, jobID: plan.jobID, receiver: mailbox)
            sent += 1
        }
        if sent > 0 { worker.addStats { $0.sends += sent } }
    }

    /// Sends devices of a job whose push is per person: each device's own payload is made first (an RSA operation
    /// each when encrypted), on every core for a large slice, then the slice is sent in order. A payload that
    /// cannot be made is that device's outcome; nothing is sent to it.
    private func sendPersonal(_ devices: ArraySlice<Device>, _ plan: Plan, _ personal: any PersonalContent) {
        let list = Array(devices)
        typealias Made = (sender: any PushSender, payload: Result<any PreparedNotification, PersonalPayloadError>)
        var made = [Made?](repeating: nil, count: list.count)
        let recipients = self.recipients
        @Sendable func make(_ i: Int) -> Made? {
            let d = list[i]
            guard let (sender, prep) = plan.prepared[d.platform.index] else { return nil }
            let context = d.user.flatMap { recipients[$0] } ?? RecipientContext()
            do throws(PersonalPayloadError) {
                return (
                    sender,
                    .success(try sender.personalized(prep, for: d, with: personal.payload(for: d, recipient: context)))
                )
            } catch {
                return (sender, .failure(error))
            }
        }
        let stripes = list.count >= Self.parallelPayloadsFrom ? Self.payloadThreads : 1
        if stripes == 1 {
            for i in list.indices { made[i] = make(i) }
        } else {
            made.withUnsafeMutableBufferPointer { out in
                nonisolated(unsafe) let out = out
                DispatchQueue.concurrentPerform(iterations: stripes) { stripe in
                    var i = stripe
                    while i < list.count {
                        out[i] = make(i)
                        i += stripes
                    }
                }
            }
        }
        var sent = 0
        for (d, result) in zip(list, made) {
            guard let (sender, payload) = result else {
                mailbox.post(d, .failed(reason: "PlatformNotConfigured", resendWasSafe: true))
                continue
            }
            switch payload {
            case .failure(let error):
                mailbox.post(d, .rejected(status: 0, reason: OutcomeReason(error.reason), action: .invalidNotification))
            case .success(let mine):
                sender.send(mine, to: d, jobID: plan.jobID, receiver: mailbox)
                sent += 1
            }
        }
        if sent > 0 { worker.addStats { $0.sends += sent } }
    }

    /// Slices of at least this many devices have their per-person payloads made on `payloadThreads` threads.
    static let parallelPayloadsFrom = 64
    static let payloadThreads = max(1, ProcessInfo.processInfo.activeProcessorCount)

    /// Step 4: every device has a recorded outcome. Publishes the report (once per job) and lets a shard count
    /// into its parent; the machine acknowledges only after this.
    private func publish(_ plan: Plan, facts: RecipientFacts, _ report: inout JobReport) throws {
        report.inAppStored = facts.inAppStored
        report.capped = facts.frequencyCapped
        if let personal = plan.personal { report.personalContent = personal.tally }
        if !facts.unknownRecipientIDs.isEmpty { report.unknownRecipientIDs = facts.unknownRecipientIDs.map(\.rawValue) }
        func markCancelled() {
            report.status = "cancelled"
            report.statusDetail = "cancelled (DELETE /v1/jobs/{id}); \(report.accepted) pushes were accepted before"
        }
        if machine.cancelled { markCancelled() }
        if let why = facts.notEnabledReason {
            report.status = "not_enabled"
            report.statusDetail = why
            recordDebugEvents([DebugEvent(.notEnabled, at: worker.clock.now(), answer: why)])
            worker.metrics.recipients("not_enabled", max(1, report.recipients), app: plan.job.app)
        }
        report.finishedAt = worker.clock.now()
        do {
            try session.publish(report)
        } catch is CancelledBeforeReport {
            // Cancelled after the last look, with every device sent: the report says so.
            machine.steeringSeen(.cancelled)
            markCancelled()
            try session.publish(report)
        }
        // A shard adds its counts to its parent; the last one publishes the parent's report.
        if let shard = plan.job.shard, let shards = worker.resolver.shards,
            var parent = try shards.shardFinished(report, shard: shard)
        {
            do {
                if try session.publish(parent) { worker.onReport?(parent) }
            } catch is CancelledBeforeReport {
                // The campaign was cancelled after its last shard's last look: its report says so.
                parent.status = "cancelled"
                parent.statusDetail = "cancelled (DELETE /v1/jobs/{id}); \(parent.accepted) pushes were accepted before"
                if try session.publish(parent) { worker.onReport?(parent) }
            }
        }
    }

    /// Step 5: acknowledges the entry of a delivery that sent (or split) its job.
    private func acknowledge(
        _ completion: StateMachine.Completion, plan: Plan, facts: RecipientFacts, report: JobReport
    ) throws {
        if completion == .duplicate {
            _ = try end(.acknowledge(.duplicate))
            return
        }
        try session.ack(entry.entryID)
        worker.addStats { $0.jobsCompleted += 1 }
        if completion == .waitingForWaves, let local {
            worker.metrics.job("waves_waiting")
            logger.info(
                "sent the devices due at their local time; the others wait for their waves",
                metadata: [
                    "waiting": "\(local.waiting)", "waves": "\(local.later.count)",
                    "nextDue": "\(local.nextDue.map(ScheduledTime.utcText) ?? "")",
                ])
            return
        }
        if completion == .sharded {
            // Split into shard jobs; the last shard publishes this job's report.
            worker.metrics.job("sharded")
            logger.info("job split into shards", metadata: ["shards": "\(facts.shardedInto)"])
            return
        }
        worker.metrics.job(machine.cancelled ? "cancelled" : "completed")
        worker.onReport?(report)
        // Per-device failures are summarised here, a count per reason, never a line per device.
        var metadata: Logger.Metadata = [
            "devices": "\(report.devices)", "accepted": "\(report.accepted)",
            "rejected": "\(report.rejected)", "failed": "\(report.failed)",
            "tokensRemoved": "\(report.tokensRemoved)", "quotaExceeded": "\(report.quotaExceeded)",
        ]
        if let expired = report.expired { metadata["expired"] = "\(expired)" }
        if !report.rejectedByReason.isEmpty {
            metadata["rejectedByReason"] = .dictionary(report.rejectedByReason.mapValues { "\($0)" })
        }
        if !report.failedByReason.isEmpty {
            metadata["failedByReason"] = .dictionary(report.failedByReason.mapValues { "\($0)" })
        }
        logger.info("job done", metadata: metadata)
    }

    /// Records debug events of a debug job, up to its cap. A failure to record them is logged, never fatal: they
    /// are a diagnostic, not an outcome.
    private func recordDebugEvents(_ events: [DebugEvent]) {
        guard let d = debug, d.remaining > 0, !events.isEmpty else { return }
        let kept = Array(events.prefix(d.remaining))
        debug?.remaining -= kept.count
        do {
            try session.recordDebugEvents(org: d.org, job: d.job, kept)
        } catch {
            logger.warning("recording debug events failed", metadata: ["error": "\(error)"])
        }
    }

    /// What pushes settle of this delivery's charges, per platform (by `Platform.index`): `delivered` stay charged,
    /// `refunded` are given back. nil when there is nothing to settle.
    static func settlement(_ quota: any QuotaAccount, delivered: [Int], refunded: [Int]) -> QuotaSettlement? {
        var settlement: QuotaSettlement?
        for p in Platform.allCases where delivered[p.index] > 0 || refunded[p.index] > 0 {
            let s = quota.settlement(platform: p, delivered: delivered[p.index], refunded: refunded[p.index])
            if settlement == nil { settlement = s } else { settlement?.append(s) }
        }
        return settlement
    }

    /// A batch's additions to its campaign's live counts (`GET /v1/jobs/{id}`'s `counts`, docs/api.md): each outcome,
    /// per platform, each failure's reason, the tokens removed, and the accepted pushes of the batch's minute.
    /// A local-time wave's delivery (`wave`: the wave's instant) also counts its outcomes under the wave.
    static func liveCounts(_ tally: BatchTally, tokensRemoved: Int, at now: Date, wave: Date? = nil) -> [String: Int64]
    {
        var counts: [String: Int64] = [:]
        let waveKey = wave.map { "wave:\(Int64($0.timeIntervalSince1970.rounded(.down)))" }
        for p in Platform.allCases {
            let t = tally.byPlatform[p.index]
            for (name, n) in [
                ("accepted", t.accepted), ("rejected", t.rejected), ("failed", t.failed),
                ("quotaExceeded", t.quotaExceeded), ("expired", t.expired),
            ] where n > 0 {
                counts[name, default: 0] += n
                counts["\(p.rawValue):\(name)", default: 0] += n
                if let waveKey { counts["\(waveKey):\(name)", default: 0] += n }
            }
            if t.accepted > 0 {
                counts["accepted:\(Int64((now.timeIntervalSince1970 / 60).rounded(.down)))", default: 0] += t.accepted
            }
        }
        for (key, n) in tally.failures { counts["reason:\(key.reason)", default: 0] += n }
        if tokensRemoved > 0 { counts["tokensRemoved"] = Int64(tokensRemoved) }
        return counts
    }

    /// Records a batch of outcomes (one pipelined write), removes dead tokens, refunds quota, counts the report.
    private func record(_ batch: [(Device, DeliveryOutcome)], _ plan: Plan, _ report: inout JobReport) throws {
        let job = plan.job
        // One pass, per-platform arrays: accepted outcomes (nearly all) are counted per batch, not one by one.
        var dead: [DeadToken] = []
        var delivered = [Int](repeating: 0, count: Platform.allCases.count)
        var refunds = delivered
        var tally = BatchTally()
        for i in batch.indices {
            let platform = batch[i].0.platform
            switch batch[i].1 {
            case .accepted:
                delivered[platform.index] += 1
                continue
            case .rejected(_, let reason, let action):
                if action == .removeToken { dead.append(DeadToken(batch[i].0, invalidSince: reason.tokenInvalidSince)) }
                refunds[platform.index] += 1
                tally.byPlatform[platform.index].rejected += 1
                tally.failure(reason, platform: platform)
            case .failed(let reason, _):
                refunds[platform.index] += 1
                tally.byPlatform[platform.index].failed += 1
                tally.failure(reason, platform: platform)
            case .quotaExceeded: tally.byPlatform[platform.index].quotaExceeded += 1
            case .expired: tally.byPlatform[platform.index].expired += 1
            }
            report.count(batch[i].1, platform: platform)
        }
        for p in Platform.allCases { report.countAccepted(delivered[p.index], platform: p) }
        // Every charged push is settled: accepted ones stay charged, the rest are refunded. The ledger write
        // releases the charges with the outcomes, in one transaction; the hour's counters follow.
        let settlement = quota.flatMap { Self.settlement($0, delivered: delivered, refunded: refunds) }
        session.noteProgress(org: job.org, job: plan.progressJob, resolved: 0, done: batch.count)
        for p in Platform.allCases { tally.byPlatform[p.index].accepted = Int64(delivered[p.index]) }
        let now = worker.clock.now()
        session.noteCounts(
            org: job.org, job: plan.progressJob,
            Self.liveCounts(
                tally, tokensRemoved: dead.count, at: now,
                wave: entry.fields["wave"].flatMap(LocalTimeWaves.instant(fromWaveField:))))
        session.noteTrail(plan.trail, at: now)
        try session.record(org: job.org, job: plan.jobID, outcomes: batch, releasing: settlement)
        if let d = debug, d.remaining > 0 {
            recordDebugEvents(batch.prefix(d.remaining).map { DebugEvent(device: $0.0, outcome: $0.1, at: now) })
        }
        worker.metrics.recorded(tally, app: job.app)
        if !dead.isEmpty {
            for p in Platform.allCases {
                let ofPlatform = dead.filter { $0.device.platform == p }
                if ofPlatform.isEmpty { continue }
                let removed = try session.remove(org: job.org, app: job.app, tokens: ofPlatform)
                worker.metrics.tokensRemoved(removed, platform: p)
            }
        }
        if let quota, let settlement { try quota.settle(settlement) }
        worker.addStats { $0.outcomesRecorded += batch.count }
        machine.steeringSeen(session.steeringSeen)
    }
}
