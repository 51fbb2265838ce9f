import Foundation
import Logging
import VolleyCore

/// One delivery of one job entry, on a lane thread.
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

    init(
        worker: PipelineWorker, session: any PipelineSession, prefetcher: ChunkPrefetcher, entry: JobEntry, credits: Int
    ) {
        self.worker = worker
        self.session = session
        self.prefetcher = prefetcher
        self.entry = entry
        self.credits = credits
        logger = worker.logger
        logger[metadataKey: "entry"] = "\(entry.entryID)"
    }

    /// Why a run stopped without acknowledging: the entry stays pending for another delivery.
    struct Abandoned: Error { let why: String }

    func process() {
        let metrics = worker.metrics
        let started = DispatchTime.now().uptimeNanoseconds
        // Queue wait: from the entry id's time (when it was added) to now; a redelivery's would include the
        // earlier attempts, so only first deliveries count.
        if entry.deliveryCount <= 1, let ms = entry.entryID.milliseconds {
            let waited = Date().timeIntervalSince1970 * 1000 - Double(ms)
            metrics.queueWait.recordNanoseconds(Int64(max(0, waited) * 1_000_000))
        }
        do {
            try run()
            metrics.jobDuration.recordNanoseconds(Int64(DispatchTime.now().uptimeNanoseconds - started))
        } catch let r as JobRejection {
            deadLetter(r)
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

    /// A delivery in its steps: accept the entry (or find it reported already), resolve and send chunk by chunk
    /// (skip what is recorded, charge the quota, send within the lane's credits, record outcomes), wait for the
    /// sends still out, then publish the report and acknowledge. A `JobRejection` dead-letters the entry; an
    /// `Abandoned` (drain) leaves it pending with the outcomes so far recorded.
    private func run() throws {
        guard let plan = try accept() else { return }
        var report = JobReport(
            job: plan.jobID, entry: entry.entryID, org: plan.job.org, app: plan.job.app,
            startedAt: worker.clock.now())
        report.recipients = plan.job.recipients?.count ?? 0
        report.deliveries = entry.deliveryCount
        report.worker = worker.configuration.consumer
        // The resolver names in-app notifications and resolutions after the job id.
        var cursorJob = plan.job
        cursorJob.id = plan.jobID
        // The cursor reads on the prefetch session, one or two chunks ahead of the sends (ChunkPrefetcher).
        let cursor = try worker.resolver.cursor(for: cursorJob, session: prefetcher.session)
        let finished = try sendChunks(of: cursor, plan, &report)
        try awaitOutstanding(plan, &report, stoppedEarly: !finished)
        try complete(plan, facts: cursor.facts, &report)
    }

    /// What `accept` decided for a delivery: the job, its id, and what is sent per platform.
    struct Plan {
        let job: PushJob
        let jobID: JobID
        /// Indexed by `Platform.index`: the per-device lookup is an array read, not a hash.
        let prepared: [(any PushSender, any PreparedNotification)?]
        /// False on a first delivery that found no ledger: its chunks are not looked up.
        let readLedger: Bool
        /// Where progress counts: a shard counts into its parent, so `send --wait` on a campaign sees all of it.
        var progressJob: JobID { job.shard?.parent ?? jobID }
    }

    /// Step 1: parse and validate the entry, find its app for its org, read what earlier deliveries left, open the
    /// quota account and prepare the notification once per platform. Returns nil when an earlier delivery already
    /// published the report (it crashed before the ack): the entry is acknowledged and nothing is sent.
    private func accept() throws -> Plan? {
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
        logger[metadataKey: "job"] = "\(job.id ?? JobID(entry.entryID.rawValue))"
        if job.debug == true {
            // A shard's events go to its parent: `volley events --job` names the job that was sent.
            debug = (job.org, job.shard?.parent ?? job.id ?? JobID(entry.entryID.rawValue), DebugEvent.maxPerJob)
        }
        if let object = parsed.objectValue, case let unknown = JobKeys.unknownKeys(in: object), !unknown.isEmpty {
            throw JobRejection(
                .invalidJob,
                "unknown key\(unknown.count == 1 ? "" : "s") "
                    + unknown.map(\.description).joined(separator: ", "))
        }
        if entry.deliveryCount > config.maxDeliveries {
            throw JobRejection(
                .tooManyDeliveries,
                "delivered \(entry.deliveryCount) times; maximum \(config.maxDeliveries)")
        }
        try job.validate()
        let senders: [Platform: any PushSender]
        switch worker.apps.lookup(org: job.org, app: job.app) {
        case .senders(let s): senders = s
        case .unknownApp: throw JobRejection(.unknownApp, "app '\(job.app)' is not configured")
        case .orgNotAllowed:
            throw JobRejection(.unknownApp, "org '\(job.org)' may not send through app '\(job.app)' (apps[].orgs)")
        }
        let jobID = job.id ?? JobID(entry.entryID.rawValue)
        logger[metadataKey: "job"] = "\(jobID)"
        let ledger = try session.ledgerState(org: job.org, job: jobID)
        if ledger == .reported {
            // Crashed after the report, before the ack: nothing left to do.
            try session.ack(entry.entryID)
            worker.addStats { $0.jobsCompleted += 1 }
            worker.metrics.job("duplicate")
            return nil
        }
        // A first delivery that finds no ledger has nothing to skip, so its chunks are not looked up: that saves
        // an HMGET of every device (a fifth of Redis's CPU in `bench e2e`). Any redelivery looks, even with no
        // ledger yet: the delivery before it may still be running and recording.
        let readLedger = ledger == .partial || entry.deliveryCount > 1
        // A redelivery adopts the quota charges an earlier delivery left unsettled: it resends those devices.
        quota = try worker.quota?.account(
            org: job.org, job: jobID,
            delivery: "\(config.consumer)#\(entry.deliveryCount)",
            adoptingEarlierCharges: readLedger)
        // Prepare once per targeted platform: an invalid notification is a job error, before anything is sent.
        let notification = job.effectiveNotification
        var prepared = [(any PushSender, any PreparedNotification)?](repeating: nil, count: Platform.allCases.count)
        for platform in Platform.allCases where job.targets(platform) {
            guard let sender = senders[platform] else { continue }
            do {
                prepared[platform.index] = (sender, try sender.prepare(notification, jobID: jobID))
            } catch let e as NotificationError {
                throw JobRejection(.invalidNotification, "\(platform): \(e)")
            }
        }
        return Plan(job: job, jobID: jobID, prepared: prepared, readLedger: readLedger)
    }

    /// Step 2, chunk by chunk: skip devices an earlier delivery recorded, charge the quota, send within the lane's
    /// credits, record what came back. Returns false when a drain stopped it before every device was sent.
    private func sendChunks(of cursor: any DeviceCursor, _ plan: Plan, _ report: inout JobReport) throws -> Bool {
        let config = worker.configuration
        let ahead = prefetcher.start(
            cursor: cursor, job: plan.job, jobID: plan.jobID, chunkSize: config.chunkSize,
            readLedger: plan.readLedger)
        defer { ahead.cancelAndWait() }
        while true {
            let chunk: DeviceChunk
            let recorded: [RecordedOutcome?]
            switch ahead.take() {
            case .end: return true
            case .failed(let error): throw error
            case .chunk(let c, let r):
                chunk = c
                recorded = r
            }
            report.users += chunk.users
            report.noDevices += chunk.usersWithoutDevices
            if debug != nil, !chunk.usersWithoutDevicesIDs.isEmpty {
                let now = worker.clock.now()
                let answer = "no registered device for app \(plan.job.app)"
                recordDebugEvents(
                    chunk.usersWithoutDevicesIDs.map { DebugEvent(.noDevices, at: now, user: $0, answer: answer) })
            }
            report.unknownRecipients += chunk.unknownRecipients
            worker.metrics.recipients("no_devices", chunk.usersWithoutDevices, app: plan.job.app)
            worker.metrics.recipients("unknown_recipient", chunk.unknownRecipients, app: plan.job.app)
            let devices = chunk.devices // the job's platforms only (the prefetcher filtered them)
            if devices.isEmpty { continue }
            report.devices += devices.count
            session.noteProgress(org: plan.job.org, job: plan.progressJob, resolved: devices.count, done: 0)
            var toSend: [Device] = []
            toSend.reserveCapacity(devices.count)
            var skipped = 0
            for (d, rec) in zip(devices, recorded) {
                if let rec {
                    report.count(rec.outcome, platform: d.platform)
                    skipped += 1
                } else {
                    toSend.append(d)
                }
            }
            report.alreadyRecorded += skipped
            if skipped > 0 { worker.addStats { $0.devicesSkippedAsRecorded += skipped } }

            // Quota: devices over quota get a terminal `quotaExceeded` without a send.
            if let quota, !toSend.isEmpty {
                toSend = try admit(toSend, quota: quota, plan, &report)
            }
            if !(try send(toSend, plan, &report)) { return false }
            // Record what has arrived, so a crash repeats at most what is in flight plus one batch.
            let batch = mailbox.wait(outstandingBelow: .max, flushAt: config.recordBatch, until: Date())
            if !batch.isEmpty { try record(batch, plan, &report) }
        }
    }

    /// Sends `devices`, taking credits in bursts (one lock for many sends): the lane blocks until a slice of
    /// credits is free, records what came back meanwhile, then starts as many sends as it was granted. Returns
    /// false when a drain stops new sends.
    private func send(_ devices: [Device], _ plan: Plan, _ report: inout JobReport) throws -> Bool {
        let config = worker.configuration
        var next = 0
        while next < devices.count {
            var granted = 0
            while granted == 0 {
                if !worker.state.mayStartSends { return false }
                let batch = mailbox.wait(
                    outstandingBelow: credits, flushAt: config.recordBatch,
                    until: Date().addingTimeInterval(0.2))
                if !batch.isEmpty { try record(batch, plan, &report) }
                granted = mailbox.reserve(upTo: devices.count - next, outstandingBelow: credits)
            }
            var sent = 0
            for d in devices[next..<(next + granted)] {
                guard let (sender, prep) = plan.prepared[d.platform.index] else {
                    mailbox.post(d, .failed(reason: "PlatformNotConfigured", resendWasSafe: true))
                    continue
                }
                sender.send(prep, to: d, jobID: plan.jobID, receiver: mailbox)
                sent += 1
            }
            next += granted
            if sent > 0 { worker.addStats { $0.sends += sent } }
        }
        return true
    }

    /// Step 3: waits for every outstanding send and records it. Throws `Abandoned` when a drain stopped the sends
    /// or its deadline passed with sends still out: what finished is recorded, the entry stays pending.
    private func awaitOutstanding(_ plan: Plan, _ report: inout JobReport, stoppedEarly: Bool) throws {
        let config = worker.configuration
        while mailbox.pending.outstanding > 0 {
            if worker.state.shouldAbandon { break }
            let until = min(Date().addingTimeInterval(0.2), worker.state.abandonDeadline())
            let batch = mailbox.wait(outstandingBelow: 1, flushAt: config.recordBatch, until: until)
            if !batch.isEmpty { try record(batch, plan, &report) }
        }
        let rest = mailbox.takeAll()
        if !rest.isEmpty { try record(rest, plan, &report) }
        if stoppedEarly || mailbox.pending.outstanding > 0 {
            throw Abandoned(
                why: "drain deadline reached with \(mailbox.pending.outstanding) sends outstanding; "
                    + "outcomes so far are recorded")
        }
    }

    /// Step 4: every device has a recorded outcome. Publishes the report (once per job), lets a shard count into
    /// its parent, and only then acknowledges the entry.
    private func complete(_ plan: Plan, facts: RecipientFacts, _ report: inout JobReport) throws {
        if facts.shardedInto > 0 {
            // Split into shard jobs; the last shard publishes this job's report.
            try session.ack(entry.entryID)
            worker.addStats { $0.jobsCompleted += 1 }
            worker.metrics.job("sharded")
            logger.info("job split into shards", metadata: ["shards": "\(facts.shardedInto)"])
            return
        }
        report.inAppStored = facts.inAppStored
        if !facts.unknownRecipientIDs.isEmpty { report.unknownRecipientIDs = facts.unknownRecipientIDs.map(\.rawValue) }
        if let why = facts.notEnabledReason {
            report.status = "not_enabled"
            report.statusDetail = why
            recordDebugEvents([DebugEvent(.notEnabled, at: worker.clock.now(), answer: why)])
            worker.metrics.recipients("not_enabled", max(1, report.recipients), app: plan.job.app)
        }
        report.finishedAt = worker.clock.now()
        try session.publish(report)
        // A shard adds its counts to its parent; the last one publishes the parent's report.
        if let shard = plan.job.shard, let shards = worker.resolver.shards,
            let parent = try shards.shardFinished(report, shard: shard)
        {
            if try session.publish(parent) { worker.onReport?(parent) }
        }
        try session.ack(entry.entryID)
        worker.addStats { $0.jobsCompleted += 1 }
        worker.metrics.job("completed")
        worker.onReport?(report)
        // Per-device failures are summarised here, a count per reason, never a line per device.
        var metadata: Logger.Metadata = [
            "devices": "\(report.devices)", "accepted": "\(report.accepted)",
            "rejected": "\(report.rejected)", "failed": "\(report.failed)",
            "tokensRemoved": "\(report.tokensRemoved)", "quotaExceeded": "\(report.quotaExceeded)",
        ]
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

    /// Charges each platform's devices of the chunk; the first `granted` of each platform are sent, the rest get
    /// `quotaExceeded`. When everything is granted (the usual case) the chunk is returned as it is, uncopied.
    private func admit(
        _ devices: [Device], quota: any QuotaAccount, _ plan: Plan,
        _ report: inout JobReport
    ) throws -> [Device] {
        var wanted = [Int](repeating: 0, count: Platform.allCases.count)
        for d in devices { wanted[d.platform.index] += 1 }
        var granted = wanted
        for platform in Platform.allCases where wanted[platform.index] > 0 {
            granted[platform.index] = try admit(
                wanted[platform.index], platform: platform, quota: quota, plan,
                &report)
        }
        if granted == wanted { return devices }
        var out: [Device] = []
        out.reserveCapacity(devices.count)
        var taken = [Int](repeating: 0, count: Platform.allCases.count)
        for d in devices {
            let p = d.platform.index
            if taken[p] < granted[p] {
                taken[p] += 1
                out.append(d)
            } else {
                mailbox.willSend()
                mailbox.post(d, .quotaExceeded)
            }
        }
        return out
    }

    /// Charges `count` pushes; while some are denied but others' charges are still in flight (they may be
    /// refunded), records arriving outcomes (which settles them) and asks again, for at most the policy's wait.
    private func admit(
        _ count: Int, platform: Platform, quota: any QuotaAccount, _ plan: Plan,
        _ report: inout JobReport
    ) throws -> Int {
        let policy = worker.quota?.waitPolicy ?? QuotaWaitPolicy()
        var granted = 0
        let deadline = Date().addingTimeInterval(policy.maxWait)
        while granted < count {
            let g = try quota.charge(platform: platform, count: count - granted)
            granted += g.granted
            if granted >= count || !g.shouldRetryDenied || Date() >= deadline || worker.state.shouldAbandon { break }
            let batch = mailbox.wait(
                outstandingBelow: 1, flushAt: 1,
                until: min(deadline, Date().addingTimeInterval(policy.pollInterval)))
            if !batch.isEmpty { try record(batch, plan, &report) }
        }
        return granted
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
            }
            report.count(batch[i].1, platform: platform)
        }
        for p in Platform.allCases { report.countAccepted(delivered[p.index], platform: p) }
        // Every charged push is settled: accepted ones stay charged, the rest are refunded. The ledger write
        // releases the charges with the outcomes, in one transaction; the hour's counters follow.
        var settlement: QuotaSettlement?
        if let quota {
            for p in Platform.allCases where delivered[p.index] > 0 || refunds[p.index] > 0 {
                let s = quota.settlement(platform: p, delivered: delivered[p.index], refunded: refunds[p.index])
                if settlement == nil { settlement = s } else { settlement?.append(s) }
            }
        }
        session.noteProgress(org: job.org, job: plan.progressJob, resolved: 0, done: batch.count)
        try session.record(org: job.org, job: plan.jobID, outcomes: batch, releasing: settlement)
        if let d = debug, d.remaining > 0 {
            let now = worker.clock.now()
            recordDebugEvents(batch.prefix(d.remaining).map { DebugEvent(device: $0.0, outcome: $0.1, at: now) })
        }
        for p in Platform.allCases { tally.byPlatform[p.index].accepted = Int64(delivered[p.index]) }
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
    }
}
