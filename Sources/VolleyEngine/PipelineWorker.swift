import Foundation
import Logging
import VolleyCore

/// A worker: one reader thread that takes entries from the job stream only while a job slot is free, and
/// `concurrentJobs` lane threads that each process one job at a time on their own Redis session, each with a
/// prefetch thread and session that reads the job's next chunks while the lane sends.
///
/// Per job: parse and validate (bad input → dead letter) → prepare the notification once per platform →
/// resolve devices in chunks → skip devices whose outcome an earlier delivery recorded → send with at most the
/// lane's share of `inFlight` outstanding → record outcomes in batches (and remove dead tokens) → publish the
/// report → XACK. Nothing is acknowledged before every device has a recorded terminal outcome.
///
/// Threads, not Dispatch queues or tasks, own the sessions because hiredis blocks (a blocking XREADGROUP holds its
/// connection and thread); provider
/// completions arrive on the providers' queues and are handed to the lane as values through its mailbox.
public final class PipelineWorker: @unchecked Sendable {
    public let configuration: WorkerConfiguration
    let backend: any PipelineBackend
    let apps: any AppDirectory
    let resolver: any RecipientResolver
    let quota: (any HourlyQuota)?
    /// The fleet's gate for jobs with `throttlePerMinute` (nil: such jobs are dead-lettered).
    let throttle: (any JobThrottle)?
    /// Decides per job whether its push is per person (`PersonalContent`); nil: every job's payload is shared.
    let personalContent: (any PersonalContentPlanner)?
    let clock: any WallClock
    let logger: Logger
    let state: WorkerState
    /// The engine's counters and timers (swift-metrics; a no-op unless `main` bootstrapped a backend).
    public let metrics: EngineMetrics
    /// Liveness: when each loop last went round (reader) and how many lanes run (see `liveness`).
    private let heartbeat: Heartbeat
    private let statsLock = NSLock()
    private var _stats = WorkerStats()
    private let startLock = NSLock()
    private var started = false
    /// Called on a lane thread after each job's report is published (demo progress, tests).
    public var onReport: (@Sendable (JobReport) -> Void)?
    /// Where entries of the job stream that carry a sync hint (field `syncHint`) are stored; nil: such entries are
    /// dead-lettered. Set before `start`.
    public var syncHints: (any SyncHintIntake)?
    /// Where a tracked delivery registers its message ids' campaign (`MessageTrackingStore`); nil: pushes carry no
    /// message id. Set before `start`.
    public var messageTracking: (any MessageTrackingStore)?

    public init(
        configuration: WorkerConfiguration, backend: any PipelineBackend, apps: any AppDirectory,
        resolver: any RecipientResolver = UserRecipientResolver(), quota: (any HourlyQuota)? = nil,
        personalContent: (any PersonalContentPlanner)? = nil, throttle: (any JobThrottle)? = nil,
        clock: any WallClock = SystemClock(), logger: Logger = Logger(label: "volley.worker"),
        metrics: EngineMetrics? = nil
    ) {
        self.throttle = throttle
        self.personalContent = personalContent
        self.metrics = metrics ?? EngineMetrics(apps: [])
        self.configuration = configuration
        self.backend = backend
        self.apps = apps
        self.resolver = resolver
        self.quota = quota
        self.clock = clock
        var l = logger
        l[metadataKey: "worker"] = "\(configuration.consumer)"
        self.logger = l
        self.state = WorkerState(
            lanes: configuration.concurrentJobs, keepAliveIntervalMillis: configuration.keepAliveIntervalMillis,
            reclaimIntervalMillis: configuration.reclaimIntervalMillis, clock: clock)
        self.heartbeat = Heartbeat(clock: clock)
    }

    public var stats: WorkerStats { statsLock.withLock { _stats } }
    func addStats(_ body: (inout WorkerStats) -> Void) { statsLock.withLock { body(&_stats) } }

    /// Connects, creates the consumer group, and starts the threads. Throws when Redis refuses the setup
    /// (authentication, wrong type at the stream key); waits and retries while Redis is unreachable, until
    /// `stopStarting()`. Returns false when it was stopped before Redis answered (nothing was started).
    @discardableResult
    public func start() throws -> Bool {
        try startLock.withLock {
            guard !started else { return true }
            started = true
            let st = state
            let readerSession: any PipelineSession
            do {
                readerSession = try backend.makeSession(name: "reader") { st.draining || st.isStartCancelled }
                try readerSession.ensureGroup()
            } catch  where st.isStartCancelled {
                logger.notice("stopped before Redis answered: no job was read", metadata: ["error": "\(error)"])
                return false
            }
            state.readerStarted()
            let readerBox = Handoff(readerSession)
            let reader = Thread { [self] in self.readLoop(readerBox.value) }
            reader.name = "volley-reader"
            reader.start()
            for i in 0..<configuration.concurrentJobs {
                let session = try backend.makeSession(name: "lane-\(i)") { st.shouldAbandon }
                let prefetchSession = try backend.makeSession(name: "lane-\(i)-prefetch") { st.shouldAbandon }
                let prefetcher = ChunkPrefetcher(session: prefetchSession, name: "volley-prefetch-\(i)")
                state.laneStarted()
                let box = Handoff(session)
                let lane = Thread { [self] in self.laneLoop(box.value, prefetcher: prefetcher, index: i) }
                lane.name = "volley-lane-\(i)"
                lane.start()
            }
            heartbeat.beat()
            logger.info(
                "worker started",
                metadata: [
                    "concurrentJobs": "\(configuration.concurrentJobs)",
                    "inFlight": "\(configuration.inFlight)",
                ])
            return true
        }
    }

    /// Told to stop (SIGTERM/SIGINT) while `start` may still wait for Redis: that wait gives up within one
    /// connect attempt, so a worker whose Redis never answers still exits. No effect once the threads run.
    public func stopStarting() { state.cancelStart() }

    /// Graceful drain: stop reading, let lanes finish within `drainDeadlineSeconds` (then stop sending, record
    /// what finished, leave unfinished jobs pending for other workers). Blocks the calling thread until stopped.
    /// Returns true when every thread stopped in time.
    @discardableResult
    public func drain(deadline: Double? = nil) -> Bool {
        let d = deadline ?? configuration.drainDeadlineSeconds
        // Grace after the cutoff: outstanding sends get a few seconds to report before being abandoned.
        let grace = min(5, max(1, d / 5))
        logger.info("draining", metadata: ["deadlineSeconds": "\(d)"])
        metrics.setDraining(true)
        state.beginDrain(deadline: d, grace: grace)
        let ok = state.waitStopped(timeout: d + grace + 10)
        logger.info("drained", metadata: ["clean": "\(ok)"])
        return ok
    }

    /// Whether the worker's threads are alive, for `/livez`: the reader went round its loop recently (it wakes at
    /// least every `blockMillis`, Redis up or down) and no lane thread has exited before a drain. Never touches
    /// Redis. Before `start` and after a drain it reports what it finds, without judging. `now` defaults to the
    /// worker's clock.
    public func liveness(now: Date? = nil) -> WorkerLiveness {
        let now = now ?? clock.now()
        let (lastBeat, readerStarted) = heartbeat.last
        let (lanes, reader, draining) = state.withLock {
            (state.runningLaneCount, state.isReaderRunning, state.draining)
        }
        // A blocking read, a Redis command timeout and the one-second retry pause all fit well inside this.
        let limit = max(60, 3 * Double(configuration.blockMillis) / 1000)
        let age = readerStarted ? now.timeIntervalSince(lastBeat) : 0
        return WorkerLiveness(
            readerAlive: draining || !readerStarted || (reader && age < limit), readerLoopAgeSeconds: age,
            lanesRunning: lanes, lanesConfigured: configuration.concurrentJobs, draining: draining,
            started: readerStarted)
    }

    /// True while the worker is draining (SIGTERM received): `/readyz` answers 503.
    public var isDraining: Bool { state.draining }

    // MARK: - reader

    private func readLoop(_ session: any PipelineSession) {
        defer { state.readerStopped() }
        let c = configuration
        while !state.draining {
            heartbeat.beat()
            do {
                // The cadence (keep-alive, reclaim) is decided by `WorkerStateMachine` on the worker's clock.
                if state.readerLooped() == .keepAlive {
                    try session.keepAlive(state.activeEntries())
                }
                let free = min(c.readBatch, state.waitForFreeSlots(timeout: Double(c.blockMillis) / 1000))
                if free == 0 { continue }
                var entries: [JobEntry] = []
                if state.slotsFreed() == .reclaimIdle {
                    entries = try session.claimIdle(minIdleMillis: c.reclaimIdleMillis, count: free)
                    if !entries.isEmpty {
                        addStats { $0.reclaimed += entries.count }
                        logger.info("reclaimed idle entries", metadata: ["count": "\(entries.count)"])
                    }
                }
                if entries.isEmpty {
                    // Block at most until the next keep-alive is due.
                    let block = min(c.blockMillis, max(1, c.keepAliveIntervalMillis / 2))
                    entries = try session.readNew(count: free, blockMillis: block)
                }
                if state.draining { break } // read during drain: left pending, reclaimed by others
                state.enqueue(entries)
            } catch {
                if state.draining { break }
                metrics.redisErrors.increment()
                logger.error("reading the job stream failed; retrying in 1 s", metadata: ["error": "\(error)"])
                Thread.sleep(forTimeInterval: 1)
            }
        }
    }

    // MARK: - lanes

    private func laneLoop(_ session: any PipelineSession, prefetcher: ChunkPrefetcher, index: Int) {
        defer {
            prefetcher.stop()
            state.laneStopped()
        }
        let credits = max(1, configuration.inFlight / configuration.concurrentJobs)
        while let entry = state.take() {
            let run = JobRun(worker: self, session: session, prefetcher: prefetcher, entry: entry, credits: credits)
            run.process()
            state.finished(entry.entryID)
        }
    }
}

/// Hands a thread-owned object to the thread that will own it (it is never used by the creating thread again).
final class Handoff<T>: @unchecked Sendable {
    let value: T
    init(_ value: T) { self.value = value }
}
