import Foundation
import Logging
import Metrics
import VolleyCore
import VolleyRedis
import VolleyStore

/// A worker's promotion of scheduled jobs and of recurring schedules' runs: one thread, its own Redis connections,
/// driven by `SchedulePromotionStateMachine` (when to go round, and how the fleet shares the work through leases).
/// Each pass is one script per job stream shard; a job moves from the schedule to the stream inside it, so a worker
/// killed at any moment leaves every job either parked or on the stream. Then the schedules due
/// (`RedisSchedules.promoteDue`, under a lease of its own): each run is submitted with its derived id, then the
/// schedule advances, so a run submitted twice is accepted once. Also keeps `volley_scheduled_jobs` (jobs parked).
public final class SchedulePromoter: @unchecked Sendable {
    private let session: RedisPipelineSession
    private let schedules: RedisSchedules
    private let logger: Logger
    private let clock: any WallClock
    private let owner: String
    private let thread = WorkerThread(name: "volley-schedule")
    /// The promotion thread's own (nothing else reads it).
    private var machine: SchedulePromotionStateMachine
    private let promotedCounter = Counter(label: "volley_schedule_promoted_total")
    private let scheduledGauge = Gauge(label: "volley_scheduled_jobs")
    /// The gauge is read every `gaugeSeconds` (a ZCARD per shard) by every worker, so any one of them shows it.
    private static let gaugeSeconds: Double = 5
    private var gaugeReadAt = Date.distantPast

    public init(
        settings: PipelineSettings, logger: Logger, clock: any WallClock = SystemClock(),
        configuration: SchedulePromotionStateMachine.Configuration = .init()
    ) {
        machine = SchedulePromotionStateMachine(configuration: configuration)
        var options = settings.redisOptions
        options.giveUpAfter = 10
        owner = "\(settings.worker.consumer)-\(UUID().uuidString.prefix(8))"
        session = RedisPipelineBackend(
            endpoint: settings.endpoint, store: settings.store, consumer: owner, options: options
        ).makeRedisSession(name: "schedule")
        schedules = RedisSchedules(
            client: RedisClient(endpoint: settings.endpoint, options: options, name: "\(owner)-schedules"),
            store: settings.store)
        self.logger = logger
        self.clock = clock
    }

    /// Starts the promotion thread.
    public func start() { thread.start { [self] in loop() } }

    /// Tells the thread to stop, without waiting for it (a pass is one script per shard: nothing is left half done).
    public func stop() { thread.stop() }

    private func loop() {
        var action = machine.started(now: clock.now())
        while true {
            switch action {
            case .wait(let until):
                if thread.sleep(seconds: until.timeIntervalSince(clock.now())) { return }
                action = machine.waited(now: clock.now())
            case .promote(let now, let batch, let leaseSeconds, let recurring):
                if thread.isStopped { return }
                do {
                    let pass = try session.promoteDue(owner: owner, leaseSeconds: leaseSeconds, now: now, batch: batch)
                    var recurringPass: SchedulePromotionStateMachine.RecurringPass?
                    if recurring {
                        let runs = try schedules.promoteDue(
                            dueBy: now, now: now, leaseSeconds: leaseSeconds, owner: owner)
                        for run in runs.promoted {
                            logger.info(
                                "scheduled run promoted",
                                metadata: [
                                    "org": "\(run.org)", "schedule": "\(run.schedule)", "job": "\(run.job)",
                                    "run": "\(RFC3339.format(run.run))", "replayed": "\(run.replayed)",
                                ])
                        }
                        recurringPass = .init(leased: runs.leased, more: runs.more)
                    }
                    if pass.promoted > 0 {
                        promotedCounter.increment(by: pass.promoted)
                        logger.info(
                            "scheduled jobs due: back on the job stream", metadata: ["jobs": "\(pass.promoted)"])
                    }
                    if now.timeIntervalSince(gaugeReadAt) >= Self.gaugeSeconds {
                        gaugeReadAt = now
                        scheduledGauge.record(try session.scheduledCount())
                    }
                    action = machine.passed(pass, recurring: recurringPass, now: clock.now())
                } catch {
                    logger.warning("promoting scheduled jobs failed; retrying", metadata: ["error": "\(error)"])
                    action = machine.failed(now: clock.now())
                }
            }
        }
    }
}
