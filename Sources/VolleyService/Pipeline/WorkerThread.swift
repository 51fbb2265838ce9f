import Foundation

/// A worker's background thread (schedule promotion, stale-device sweeps, sync-hint flushes): started once, told to
/// stop without being waited for, and asleep between its passes for a time on the monotonic clock or until stopped.
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

    /// Sleeps `seconds` on the monotonic clock (a wall clock stepped by NTP neither shortens nor stretches it), or
    /// until `stop`; answers true when stopped. A wait of zero or less returns at once.
    func sleep(seconds: Double) -> Bool {
        let deadline = ContinuousClock.now + .milliseconds(Int64((max(0, seconds) * 1000).rounded(.up)))
        return condition.withLock {
            while !stopped {
                let left = ContinuousClock.now.duration(to: deadline)
                guard left > .zero else { break }
                let c = left.components
                let s = Double(c.seconds) + Double(c.attoseconds) / 1e18
                // NSCondition takes a wall-clock time: each wait is short (a minute at most) and the monotonic
                // deadline is checked again after it, so a step of the wall clock cannot move the end of the sleep.
                _ = condition.wait(until: Date() + min(s, 60))
            }
            return stopped
        }
    }
}
