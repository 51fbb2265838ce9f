import Foundation
import VolleyCore

/// The one piece of state the reader thread and the job lanes share: the hand-off queue of entries (bounded by
/// the number of lanes), which entries are being worked on, and the worker's decisions in time (the drain, the
/// reader's keep-alive and reclaim cadence: `WorkerStateMachine`, on the injected clock). Behind one condition lock.
final class WorkerState: @unchecked Sendable {
    private let cond = NSCondition()
    private var queue: [JobEntry] = []
    private var idleLanes: Int
    private var active: [StreamEntryID: Int] = [:]
    private(set) var draining = false
    /// Set when the worker is told to stop while `start` still waits for Redis: that wait gives up.
    private(set) var startCancelled = false
    private var machine: WorkerStateMachine
    private let clock: any WallClock
    private var runningLanes = 0
    private var readerRunning = false

    init(lanes: Int, keepAliveIntervalMillis: Int, reclaimIntervalMillis: Int, clock: any WallClock) {
        idleLanes = lanes
        self.clock = clock
        machine = WorkerStateMachine(
            keepAliveIntervalMillis: keepAliveIntervalMillis, reclaimIntervalMillis: reclaimIntervalMillis,
            now: clock.now())
    }

    func withLock<T>(_ body: () -> T) -> T {
        cond.lock()
        defer { cond.unlock() }
        return body()
    }

    // MARK: reader side

    /// The reader went round its loop: whether a keep-alive is due.
    func readerLooped() -> WorkerStateMachine.ReaderAction { withLock { machine.readerLooped(now: clock.now()) } }

    /// Lanes are free: whether to look for idle entries to reclaim first.
    func slotsFreed() -> WorkerStateMachine.SlotsAction { withLock { machine.slotsFreed(now: clock.now()) } }

    /// Slots free for new entries: idle lanes not already promised to a queued entry. Waits up to `timeout`
    /// for one to free up (no reading while every lane is busy: admission by credits).
    func waitForFreeSlots(timeout: TimeInterval) -> Int {
        cond.lock()
        defer { cond.unlock() }
        // Real time, for how long to block only: nothing is decided from it.
        let until = Date(timeIntervalSinceNow: timeout)
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

    /// The drain's deadlines, once a drain began (the same for every lane).
    var drainDeadlines: DrainDeadlines? { withLock { machine.drain } }
    /// Past the drain's abandon deadline: blocking Redis calls of the lanes give up.
    var shouldAbandon: Bool { withLock { machine.shouldAbandon(now: clock.now()) } }

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
    func readerStarted() {
        withLock {
            readerRunning = true
            machine.readerStarted(now: clock.now())
        }
    }
    func readerStopped() {
        cond.lock()
        readerRunning = false
        cond.broadcast()
        cond.unlock()
    }

    func cancelStart() { withLock { startCancelled = true } }
    var isStartCancelled: Bool { withLock { startCancelled } }

    func beginDrain(deadline: TimeInterval, grace: TimeInterval) {
        cond.lock()
        _ = machine.drainBegan(deadline: deadline, grace: grace, now: clock.now())
        draining = true
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
        let until = Date(timeIntervalSinceNow: timeout) // real time: how long to block
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

    /// Takes up to `count` credits at once while fewer than `limit` sends are outstanding; returns how many.
    func reserve(upTo count: Int, outstandingBelow limit: Int) -> Int {
        cond.lock()
        defer { cond.unlock() }
        let n = max(0, min(count, limit - outstanding))
        outstanding += n
        return n
    }

    /// Terminal outcomes of devices that are not sent (expired, over quota): ready with the sends' outcomes, and
    /// no credit taken for them.
    func settleUnsent<Devices: Sequence<Device>>(_ devices: Devices, as outcome: DeliveryOutcome) {
        cond.lock()
        for d in devices { ready.append((d, outcome)) }
        if outstanding < waiterWantsOutstandingBelow || ready.count >= waiterWantsReady { cond.signal() }
        cond.unlock()
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

    /// Waits until fewer than `limit` sends are outstanding, or `flushAt` outcomes are ready, or `timeout` seconds
    /// passed (real time: the lane decides on its clock how long to wait, this only blocks that long).
    /// Once it has to block on credits, it waits for an eighth of `limit` to free up (hysteresis), so the caller
    /// then sends a burst. Returns the ready outcomes when at least `flushAt` are waiting (or `takeAll`), else [].
    func wait(outstandingBelow limit: Int, flushAt: Int, timeout: TimeInterval, takeAll: Bool = false) -> [(
        Device, DeliveryOutcome
    )] {
        cond.lock()
        defer { cond.unlock() }
        if outstanding >= limit && ready.count < flushAt {
            let until = Date(timeIntervalSinceNow: max(0, timeout))
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

    /// Blocks until `flushAt` outcomes are ready or `timeout` seconds passed, however many sends are out (a
    /// throttled lane waiting for its next slice). Returns every ready outcome.
    func hold(flushAt: Int, timeout: TimeInterval) -> [(Device, DeliveryOutcome)] {
        cond.lock()
        defer { cond.unlock() }
        if ready.count < flushAt {
            let until = Date(timeIntervalSinceNow: max(0, timeout))
            waiterWantsReady = flushAt
            while ready.count < flushAt {
                if !cond.wait(until: until) { break }
            }
            waiterWantsReady = Int.max
        }
        let out = ready
        ready.removeAll(keepingCapacity: true)
        return out
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
    /// Jobs due later, parked in the schedule.
    public var jobsParked = 0
    public var sends = 0
    public var outcomesRecorded = 0
    public var devicesSkippedAsRecorded = 0
    public var reclaimed = 0
    public init() {}
}

/// When the reader last went round its loop, on the worker's clock.
final class Heartbeat: @unchecked Sendable {
    private let lock = NSLock()
    private let clock: any WallClock
    private var at: Date
    private var started = false
    init(clock: any WallClock) {
        self.clock = clock
        at = clock.now()
    }
    func beat() {
        let now = clock.now()
        lock.withLock {
            at = now
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
