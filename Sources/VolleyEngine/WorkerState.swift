import Foundation
import VolleyCore

/// The one piece of state the reader thread and the job lanes share: the hand-off queue of entries (bounded by
/// the number of lanes), which entries are being worked on, and the drain state. Behind one condition lock.
final class WorkerState: @unchecked Sendable {
    private let cond = NSCondition()
    private var queue: [JobEntry] = []
    private var idleLanes: Int
    private var active: [StreamEntryID: Int] = [:]
    private(set) var draining = false
    /// After this, lanes send nothing new; after `abandonAt`, they stop waiting for outcomes.
    private var sendCutoff: Date = .distantFuture
    private var abandonAt: Date = .distantFuture
    private var runningLanes = 0
    private var readerRunning = false

    init(lanes: Int) { idleLanes = lanes }

    func withLock<T>(_ body: () -> T) -> T {
        cond.lock()
        defer { cond.unlock() }
        return body()
    }

    // MARK: reader side

    /// Slots free for new entries: idle lanes not already promised to a queued entry. Waits up to `timeout`
    /// for one to free up (no reading while every lane is busy: admission by credits).
    func waitForFreeSlots(timeout: TimeInterval) -> Int {
        cond.lock()
        defer { cond.unlock() }
        let until = Date().addingTimeInterval(timeout)
        while !draining && idleLanes - queue.count <= 0 {
            if !cond.wait(until: until) { break }
        }
        return draining ? 0 : max(0, idleLanes - queue.count)
    }

    func enqueue(_ entries: [JobEntry]) {
        guard !entries.isEmpty else { return }
        cond.lock()
        for e in entries where active[e.entryID] == nil {
            queue.append(e)
            active[e.entryID] = 1
        }
        cond.broadcast()
        cond.unlock()
    }

    /// Entries this worker owns and has not finished (queued or in a lane), for keep-alive.
    func activeEntries() -> [StreamEntryID] { withLock { Array(active.keys) } }

    // MARK: lane side

    /// Next entry for a lane; nil when draining (queued entries stay pending in Redis for others).
    func take() -> JobEntry? {
        cond.lock()
        defer { cond.unlock() }
        while !draining && queue.isEmpty { cond.wait() }
        if draining { return nil }
        idleLanes -= 1
        return queue.removeFirst()
    }

    func finished(_ entry: StreamEntryID) {
        cond.lock()
        active[entry] = nil
        idleLanes += 1
        cond.broadcast()
        cond.unlock()
    }

    var mayStartSends: Bool { withLock { Date() < sendCutoff } }
    var shouldAbandon: Bool { withLock { Date() >= abandonAt } }
    func abandonDeadline() -> Date { withLock { abandonAt } }

    // MARK: lifecycle

    /// Caller holds the lock (`withLock`).
    var runningLaneCount: Int { runningLanes }
    var isReaderRunning: Bool { readerRunning }

    func laneStarted() { withLock { runningLanes += 1 } }
    func laneStopped() {
        cond.lock()
        runningLanes -= 1
        cond.broadcast()
        cond.unlock()
    }
    func readerStarted() { withLock { readerRunning = true } }
    func readerStopped() {
        cond.lock()
        readerRunning = false
        cond.broadcast()
        cond.unlock()
    }

    func beginDrain(deadline: TimeInterval, grace: TimeInterval) {
        cond.lock()
        if !draining {
            draining = true
            sendCutoff = Date().addingTimeInterval(deadline)
            abandonAt = sendCutoff.addingTimeInterval(grace)
        }
        // Entries queued but not started are simply left pending.
        for e in queue { active[e.entryID] = nil }
        queue.removeAll()
        cond.broadcast()
        cond.unlock()
    }

    /// Blocks until the reader and every lane have stopped (or `timeout`). Returns true when all stopped.
    func waitStopped(timeout: TimeInterval) -> Bool {
        cond.lock()
        defer { cond.unlock() }
        let until = Date().addingTimeInterval(timeout)
        while runningLanes > 0 || readerRunning {
            if !cond.wait(until: until) { return runningLanes == 0 && !readerRunning }
        }
        return true
    }
}

/// Where a lane's sends report back: outcomes arrive as values from any queue; the lane thread takes them.
final class LaneMailbox: DeliveryReceiver, @unchecked Sendable {
    private let cond = NSCondition()
    private var ready: [(Device, DeliveryOutcome)] = []
    private(set) var outstanding = 0
    /// What the waiting lane waits for; `post` signals only when it becomes true, so a lane blocked on credits is
    /// woken once per slice of freed credits, not once per outcome (a thread wake-up costs more than a send).
    private var waiterWantsOutstandingBelow = Int.min
    private var waiterWantsReady = Int.max

    func willSend() {
        cond.lock()
        outstanding += 1
        cond.unlock()
    }

    /// Takes up to `count` credits at once while fewer than `limit` sends are outstanding; returns how many.
    func reserve(upTo count: Int, outstandingBelow limit: Int) -> Int {
        cond.lock()
        defer { cond.unlock() }
        let n = max(0, min(count, limit - outstanding))
        outstanding += n
        return n
    }

    /// A send's outcome (`DeliveryReceiver`: providers call this on their transport's queue).
    func delivered(_ device: Device, _ outcome: DeliveryOutcome) { post(device, outcome) }

    func post(_ device: Device, _ outcome: DeliveryOutcome) {
        cond.lock()
        ready.append((device, outcome))
        outstanding -= 1
        if outstanding < waiterWantsOutstandingBelow || ready.count >= waiterWantsReady { cond.signal() }
        cond.unlock()
    }

    /// Waits until fewer than `limit` sends are outstanding, or `flushAt` outcomes are ready, or `until`.
    /// Once it has to block on credits, it waits for an eighth of `limit` to free up (hysteresis), so the caller
    /// then sends a burst. Returns the ready outcomes when at least `flushAt` are waiting (or `takeAll`), else [].
    func wait(outstandingBelow limit: Int, flushAt: Int, until: Date, takeAll: Bool = false) -> [(
        Device, DeliveryOutcome
    )] {
        cond.lock()
        defer { cond.unlock() }
        if outstanding >= limit && ready.count < flushAt {
            let resumeBelow = limit == .max ? limit : max(1, limit - max(1, limit / 8))
            waiterWantsOutstandingBelow = resumeBelow
            waiterWantsReady = flushAt
            while outstanding >= resumeBelow && ready.count < flushAt {
                if !cond.wait(until: until) { break }
            }
            waiterWantsOutstandingBelow = Int.min
            waiterWantsReady = Int.max
        }
        if ready.count >= flushAt || (takeAll && !ready.isEmpty) {
            let out = ready
            ready.removeAll(keepingCapacity: true)
            return out
        }
        return []
    }

    func takeAll() -> [(Device, DeliveryOutcome)] {
        cond.lock()
        defer { cond.unlock() }
        let out = ready
        ready.removeAll(keepingCapacity: true)
        return out
    }

    var pending: (outstanding: Int, ready: Int) {
        cond.lock()
        defer { cond.unlock() }
        return (outstanding, ready.count)
    }
}

/// Counters a worker keeps (each lane adds; read for progress and tests).
public struct WorkerStats: Sendable, Hashable {
    public var jobsCompleted = 0
    public var jobsDeadLettered = 0
    public var jobsAbandoned = 0
    public var sends = 0
    public var outcomesRecorded = 0
    public var devicesSkippedAsRecorded = 0
    public var reclaimed = 0
    public init() {}
}

/// When the reader last went round its loop.
final class Heartbeat: @unchecked Sendable {
    private let lock = NSLock()
    private var at = Date()
    private var started = false
    func beat() {
        lock.withLock {
            at = Date()
            started = true
        }
    }
    var last: (Date, Bool) { lock.withLock { (at, started) } }
}

/// What `/livez` reports of a worker.
public struct WorkerLiveness: Sendable, Hashable {
    public var readerAlive: Bool
    public var readerLoopAgeSeconds: Double
    public var lanesRunning: Int
    public var lanesConfigured: Int
    public var draining: Bool
    /// False until the worker has connected and started its threads (it waits for Redis to do so).
    public var started: Bool
    /// Lanes exit only when draining; a lane gone before that is a dead thread.
    public var lanesAlive: Bool { draining || !started || lanesRunning == lanesConfigured }
    public var alive: Bool { readerAlive && lanesAlive }
}
