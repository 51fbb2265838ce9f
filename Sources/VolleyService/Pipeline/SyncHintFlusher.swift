import Foundation
import Logging
import Metrics
import VolleyCore
import VolleyRedis
import VolleyStore

/// A worker's pushes of waiting sync hints: one thread, its own Redis connection. Each pass reads the keys due in
/// each org that has had hints (a range of a sorted set, never a scan), lets `SyncHintStateMachine` decide each, and
/// carries the decisions out: a key to push becomes a taken batch, its silent job goes onto the job stream under the
/// batch's own id, and only then is the batch let go. A worker killed in between leaves the batch taken; when its
/// lease ends any worker pushes it again under the same id, which the job record answers as a replay: no id is
/// lost and none is pushed twice.
///
/// Every worker runs one; two deciding on the same key at once take it once (the take is guarded by the last push
/// time the decision saw).
public final class SyncHintFlusher: @unchecked Sendable {
    private let store: RedisSyncHintStore
    private let settings: PipelineSettings
    private let machine: SyncHintStateMachine
    private let logger: Logger
    private let clock: any WallClock
    private let tickSeconds: Double
    private let thread = WorkerThread(name: "volley-sync-hints")
    private var lastGauges = Date.distantPast
    private let pushes = Counter(label: "volley_sync_hint_pushes_total")
    private let fullSyncPushes = Counter(label: "volley_sync_hint_full_sync_pushes_total")
    private let idsPerPush = Recorder(label: "volley_sync_hint_ids_per_push", aggregate: true)
    private let waitingUsers = Gauge(label: "volley_sync_hint_waiting_users")
    private let oldestWaiting = Gauge(label: "volley_sync_hint_oldest_waiting_seconds")
    /// Keys read per script call.
    static let batch = 200

    public init(
        configuration: SyncHintConfiguration, settings: PipelineSettings, logger: Logger,
        clock: any WallClock = SystemClock(), tickSeconds: Double = 0.25
    ) {
        machine = SyncHintStateMachine(configuration: configuration)
        self.settings = settings
        self.logger = logger
        self.clock = clock
        self.tickSeconds = tickSeconds
        store = RedisSyncHintStore(
            client: settings.client(name: "sync-hints", giveUpAfter: 10, logger: logger),
            maxRecordIds: configuration.maxRecordIds)
    }

    /// Starts the flushing thread.
    public func start() { thread.start { [self] in loop() } }

    /// Tells the thread to stop, without waiting for it. A pass cut short leaves at most a taken batch, which the
    /// next worker pushes again when its lease ends.
    public func stop() { thread.stop() }

    /// The wait between passes while they fail: twice the tick after the first failure, doubling to 5 s.
    private var retry: ExponentialBackoff { ExponentialBackoff(base: 2 * tickSeconds, max: 5) }

    private func loop() {
        var failures = 0
        while !thread.isStopped {
            do {
                _ = try flushOnce()
                if failures > 0 { logger.info("sync hint passes succeed again", metadata: ["failed": "\(failures)"]) }
                failures = 0
            } catch {
                // Logged once per outage; the passes go on, further apart (up to 5 s), until Redis answers.
                if failures == 0 {
                    logger.warning("sync hint pass failed; retrying", metadata: ["error": "\(error)"])
                }
                failures += 1
            }
            let wait = failures == 0 ? tickSeconds : retry.delay(afterFailures: failures)
            if thread.sleep(seconds: wait) { return }
        }
    }

    /// One pass over every org: answers the pushes put on the job stream.
    @discardableResult
    public func flushOnce() throws -> Int {
        var total = 0
        let orgs = try store.orgs()
        for org in orgs {
            // A full read asks for the next at once; a bounded number per pass, so one org cannot hold the thread.
            for _ in 0..<50 {
                let now = clock.now()
                let due = try store.due(org: org, now: now, limit: Self.batch)
                if due.isEmpty { break }
                var steps: [SyncHintStep] = []
                for d in due {
                    switch machine.decide(d.window, now: now) {
                    case .forget: steps.append(.forget(d.key))
                    case .wait(let until): steps.append(.wait(d.key, until: until))
                    case .push: steps.append(.take(d.key, lastStamp: d.lastStamp))
                    case .pushAgain(let batch): steps.append(.takeAgain(d.key, batch: batch))
                    }
                }
                let taken = try store.apply(
                    org: org, steps, now: now, leaseSeconds: machine.configuration.leaseSeconds)
                let submitted = try store.submit(org: org, taken, store: settings.store, now: now)
                try store.confirm(org: org, submitted, now: now)
                for b in submitted {
                    pushes.increment()
                    if let ids = SyncHintPush.listed(b.recordIds) {
                        idsPerPush.record(ids.count)
                    } else {
                        fullSyncPushes.increment()
                    }
                }
                total += submitted.count
                if due.count < Self.batch { break }
            }
        }
        let now = clock.now()
        if now.timeIntervalSince(lastGauges) >= 5 || now < lastGauges {
            lastGauges = now
            var waiting = 0
            var oldest: Date?
            for org in orgs {
                let b = try store.backlog(org: org)
                waiting += b.waiting
                if let o = b.oldest { oldest = min(oldest ?? o, o) }
            }
            waitingUsers.record(waiting)
            oldestWaiting.record(oldest.map { max(0, now.timeIntervalSince($0)) } ?? 0)
        }
        return total
    }
}
