import Foundation

/// A worker's background thread (schedule promotion, stale-device sweeps, sync-hint flushes): started once, told to
/// stop without being waited for, and asleep between its passes until a time on the wall clock or until stopped.
/// What it does and when is its owner's state machine's decision; this is only the thread and its sleep.
final class WorkerThread: @unchecked Sendable {
    private let name: String
    private let condition = NSCondition()
    private var stopped = false

    init(name: String) { self.name = name }

    /// Runs `body` on a new thread.
    func start(_ body: @escaping @Sendable () -> Void) {
        let t = Thread(block: body)
        t.name = name
        t.start()
    }

    /// Wakes the thread if it sleeps and makes `sleep` and `isStopped` say so. Returns at once: a pass in progress
    /// may be waiting for an unreachable Redis, and shutdown does not wait on it.
    func stop() {
        condition.withLock {
            stopped = true
            condition.broadcast()
        }
    }

    var isStopped: Bool { condition.withLock { stopped } }

    /// Sleeps until `until` on the wall clock, or until `stop`; answers true when stopped. Waits at most a minute at
    /// a time, so a wall clock set back does not stretch one sleep.
    func sleep(until: Date) -> Bool {
        condition.withLock {
            while !stopped && Date() < until { _ = condition.wait(until: min(until, Date() + 60)) }
            return stopped
        }
    }
}
