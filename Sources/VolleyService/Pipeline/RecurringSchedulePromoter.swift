import Foundation
import Logging
import VolleyCore
import VolleyRedis
import VolleyStore

/// A worker's promotion of recurring schedules' due runs: one thread, its own Redis connection, driven by
/// `RecurringPromotionStateMachine` (which decides when, and how the fleet shares the work through a lease). Each
/// promoted run is logged with its schedule and job id.
public final class RecurringSchedulePromoter: @unchecked Sendable {
    private let schedules: RedisSchedules
    private let logger: Logger
    private let clock: any WallClock
    private let owner: String
    private let condition = NSCondition()
    private var machine: RecurringPromotionStateMachine
    private var stopped = false

    public init(
        configuration: RecurringPromotionStateMachine.Configuration = .init(), settings: PipelineSettings,
        logger: Logger, clock: any WallClock = SystemClock()
    ) {
        machine = RecurringPromotionStateMachine(configuration: configuration)
        var options = settings.redisOptions
        options.giveUpAfter = 10
        owner = "\(settings.worker.consumer)-\(UUID().uuidString.prefix(8))"
        schedules = RedisSchedules(
            client: RedisClient(endpoint: settings.endpoint, options: options, name: "\(owner)-schedules"),
            store: settings.store)
        self.logger = logger
        self.clock = clock
    }

    /// Starts the promotion thread.
    public func start() {
        let t = Thread { [self] in loop() }
        t.name = "volley-schedules"
        t.start()
    }

    /// Tells the thread to stop, without waiting for it: each run's submission and each advance is one script, so
    /// a pass left behind at exit leaves nothing half done (a submitted run not yet advanced is submitted again as
    /// a replay by the next pass, and accepted once).
    public func stop() {
        condition.withLock {
            stopped = true
            condition.broadcast()
        }
    }

    private func loop() {
        var action = condition.withLock { machine.tick(now: clock.now()) }
        while true {
            switch action {
            case .wait(let until):
                let stop: Bool = condition.withLock {
                    while !stopped && clock.now() < until {
                        _ = condition.wait(
                            until: Date().addingTimeInterval(min(60, until.timeIntervalSince(clock.now()))))
                    }
                    return stopped
                }
                if stop { return }
                action = condition.withLock { machine.tick(now: clock.now()) }
            case .promote(let dueBy, let leaseSeconds):
                if condition.withLock({ stopped }) { return }
                do {
                    let r = try schedules.promoteDue(
                        dueBy: dueBy, now: clock.now(), leaseSeconds: leaseSeconds, owner: owner)
                    for run in r.promoted {
                        logger.info(
                            "scheduled run promoted",
                            metadata: [
                                "org": "\(run.org)", "schedule": "\(run.schedule)", "job": "\(run.job)",
                                "run": "\(Schedule.rfc3339(run.run))", "replayed": "\(run.replayed)",
                            ])
                    }
                    action = condition.withLock { machine.promoted(now: clock.now(), leased: r.leased, more: r.more) }
                } catch {
                    logger.warning(
                        "schedule promotion failed; next attempt after the interval", metadata: ["error": "\(error)"])
                    action = condition.withLock { machine.failed(now: clock.now()) }
                }
            }
        }
    }
}
