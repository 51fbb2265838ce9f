import Foundation
import Logging
import Metrics
import VolleyCore
import VolleyRedis
import VolleyStore

/// A worker's removal of stale devices (`devices.staleAfterDays`): one thread, its own Redis connection, driven by
/// `StaleDeviceSweepStateMachine` (which decides when, and how the fleet shares the work through a lease). Each
/// removal is counted (`volley_devices_stale_removed_total`) and logged with its count, never with a token.
public final class StaleDeviceSweeper: @unchecked Sendable {
    private let session: RedisPipelineSession
    private let logger: Logger
    private let clock: any WallClock
    private let owner: String
    private let thread = WorkerThread(name: "volley-stale-devices")
    /// The sweep thread's own (nothing else reads it).
    private var machine: StaleDeviceSweepStateMachine
    private let removedCounter = Counter(label: "volley_devices_stale_removed_total")

    /// Nil when `devices.staleAfterDays` is 0 (no sweeping).
    public init?(
        configuration: StaleDeviceSweepStateMachine.Configuration, settings: PipelineSettings, logger: Logger,
        clock: any WallClock = SystemClock()
    ) {
        guard configuration.staleAfterDays > 0 else { return nil }
        machine = StaleDeviceSweepStateMachine(configuration: configuration)
        var options = settings.redisOptions
        options.giveUpAfter = 10
        owner = "\(settings.worker.consumer)-\(UUID().uuidString.prefix(8))"
        session = RedisPipelineBackend(
            endpoint: settings.endpoint, store: settings.store, consumer: owner, options: options
        ).makeRedisSession(name: "stale-devices")
        self.logger = logger
        self.clock = clock
    }

    /// Starts the sweep thread.
    public func start() { thread.start { [self] in loop() } }

    /// Tells the thread to stop, without waiting for it: a pass in progress may be waiting for an unreachable Redis
    /// (up to the client's give-up time), and shutdown must not wait on it. Each app's removal is one script, so a
    /// pass left behind at exit leaves nothing half done.
    public func stop() { thread.stop() }

    private func loop() {
        var action = machine.tick(now: clock.now())
        while true {
            switch action {
            case .wait(let until):
                if thread.sleep(seconds: until.timeIntervalSince(clock.now())) { return }
                action = machine.tick(now: clock.now())
            case .sweep(let cutoff, let leaseSeconds):
                if thread.isStopped { return }
                do {
                    let r = try session.sweepStaleDevices(cutoff: cutoff, leaseSeconds: leaseSeconds, owner: owner)
                    if r.removed > 0 {
                        removedCounter.increment(by: r.removed)
                        logger.info(
                            "removed stale devices",
                            metadata: [
                                "removed": "\(r.removed)", "notRegisteredSince": "\(RFC3339.format(cutoff))",
                            ])
                    }
                    action = machine.swept(now: clock.now(), leased: r.leased, more: r.more)
                } catch {
                    logger.warning(
                        "stale device sweep failed; next attempt after the interval",
                        metadata: [
                            "error": "\(error)"
                        ])
                    action = machine.failed(now: clock.now())
                }
            }
        }
    }
}
