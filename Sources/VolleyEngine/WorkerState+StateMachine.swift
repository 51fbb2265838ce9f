import Foundation

/// The worker's decisions in time, without I/O: when the reader refreshes the idle time of the entries it holds
/// (keep-alive), when it looks for other workers' idle entries to reclaim, and, once a drain began, whether a send
/// may still start and whether lanes stop waiting for answers. Events carry the clock's `now`; `WorkerState` keeps
/// the machine behind its lock and reads the worker's injected clock, so tests drive it on a manual clock.
struct WorkerStateMachine {
    /// What the reader does at the top of its loop.
    enum ReaderAction: Equatable {
        /// Refresh the idle time of this worker's entries (`XCLAIM … JUSTID`), then wait for a free lane.
        case keepAlive
        /// Wait for a free lane.
        case waitForSlots
    }

    /// What the reader does once lanes are free.
    enum SlotsAction: Equatable {
        /// Claim entries idle longer than `reclaimIdleMillis` (`XAUTOCLAIM`); read new ones if none were idle.
        case reclaimIdle
        /// Read new entries.
        case readNew
    }

    let keepAliveIntervalMillis: Int
    let reclaimIntervalMillis: Int
    private(set) var drain: DrainDeadlines?
    private var lastKeepAlive: Date
    /// nil: not yet looked, so the reader's first read looks.
    private var lastReclaim: Date?

    init(keepAliveIntervalMillis: Int, reclaimIntervalMillis: Int, now: Date) {
        self.keepAliveIntervalMillis = keepAliveIntervalMillis
        self.reclaimIntervalMillis = reclaimIntervalMillis
        lastKeepAlive = now
    }

    var isDraining: Bool { drain != nil }

    // MARK: events

    /// The reader started: the entries it holds are fresh, and it looks for idle ones at its first read.
    mutating func readerStarted(now: Date) {
        lastKeepAlive = now
        lastReclaim = nil
    }

    /// The reader went round its loop.
    mutating func readerLooped(now: Date) -> ReaderAction {
        guard Self.elapsed(since: lastKeepAlive, now: now, atLeast: keepAliveIntervalMillis) else {
            return .waitForSlots
        }
        lastKeepAlive = now
        return .keepAlive
    }

    /// Lanes are free for new entries.
    mutating func slotsFreed(now: Date) -> SlotsAction {
        if let lastReclaim, !Self.elapsed(since: lastReclaim, now: now, atLeast: reclaimIntervalMillis) {
            return .readNew
        }
        lastReclaim = now
        return .reclaimIdle
    }

    /// A drain began at `now`: sends stop `deadline` seconds later and lanes wait `grace` more for answers. Only
    /// the first drain sets the deadlines; they are returned either way.
    mutating func drainBegan(deadline: TimeInterval, grace: TimeInterval, now: Date) -> DrainDeadlines {
        if let drain { return drain }
        let d = DrainDeadlines(beganAt: now, deadline: deadline, grace: grace)
        drain = d
        return d
    }

    // MARK: questions

    func mayStartSends(now: Date) -> Bool { drain?.allowsSends(at: now) ?? true }
    func shouldAbandon(now: Date) -> Bool { drain?.abandons(at: now) ?? false }

    private static func elapsed(since last: Date, now: Date, atLeast millis: Int) -> Bool {
        now.timeIntervalSince(last) * 1000 >= Double(millis)
    }
}
