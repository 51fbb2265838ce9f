import Dispatch
import Foundation
import Logging
import VolleyCore
import VolleyRedis
import VolleyStore

/// What a worker shares with the rest of the fleet through Redis: one APNs provider token per (team, key), and the
/// providers' pauses (FCM 429/503 per project, APNs 503 per app).
///
/// Nothing here is on the per-send path: a throttle is published at once from its own queue (the pause, then an
/// announcement on `FleetKeys.pauseEvents`), and every worker learns of it the moment it is announced: one thread
/// per worker waits on that stream (XREAD BLOCK) and moves the local pause, which every send reads. A second thread
/// reads the pauses every `FleetPauses.refreshSeconds` too, for announcements missed while Redis was unreachable.
/// The Redis clients give up after a second when Redis is unreachable; sends then go on with what the worker knows.
public final class FleetSync: @unchecked Sendable {
    public let store: RedisFleetStore
    /// Blocks on the pause announcements: a store (and connection) of its own, so nothing waits behind it.
    private let watcher: RedisFleetStore?
    public let pauses: FleetPauses
    /// Names this worker in the mint lease.
    public let owner: String
    private let logger: Logger
    private let publishQueue: DispatchQueue
    private let stopped: NSCondition
    private var isStopped = false
    /// Set (under `stopped`) when a budget wants a refill.
    private let refillWanted: RefillFlag
    private var thread: Thread?
    private var watchThread: Thread?

    /// `watcher`: where the pause announcements are awaited (nil: the pauses are only read every
    /// `FleetPauses.refreshSeconds`).
    public init(store: RedisFleetStore, watcher: RedisFleetStore? = nil, owner: String, logger: Logger) {
        self.store = store
        self.watcher = watcher
        self.owner = owner
        self.logger = logger
        let queue = DispatchQueue(label: "volley.fleet.publish")
        publishQueue = queue
        let condition = NSCondition()
        let flag = RefillFlag()
        stopped = condition
        refillWanted = flag
        pauses = FleetPauses(
            onThrottle: { key, until in
                queue.async {
                    do {
                        let shared = try store.extendPause(key, until: until)
                        try store.announcePause(key, until: shared)
                        logger.warning(
                            "provider throttled: the fleet pauses its sends",
                            metadata: ["target": "\(key)", "until": "\(until)"])
                    } catch {
                        logger.warning(
                            "cannot publish the pause to the fleet",
                            metadata: ["target": "\(key)", "error": "\(error)"])
                    }
                }
            },
            wake: {
                condition.withLock {
                    flag.value = true
                    condition.broadcast()
                }
            })
    }

    /// A sync over its own Redis connections (one for tokens and pauses), from the worker's settings.
    public convenience init(settings: PipelineSettings, logger: Logger) {
        var options = settings.redisOptions
        options.giveUpAfter = 1
        options.connectTimeout = min(options.connectTimeout, 1)
        options.commandTimeout = min(options.commandTimeout, 1)
        let client = RedisClient(
            endpoint: settings.endpoint, options: options, name: "fleet", logger: logger)
        let watchClient = RedisClient(
            endpoint: settings.endpoint, options: options, name: "fleet-pauses", logger: logger)
        self.init(
            store: RedisFleetStore(client: client), watcher: RedisFleetStore(client: watchClient),
            owner: settings.worker.consumer, logger: logger)
    }

    /// Starts reading the fleet's pauses (and waiting for their announcements).
    public func start() {
        let t = Thread { [self] in refreshLoop() }
        t.name = "volley-fleet-sync"
        thread = t
        t.start()
        if let watcher {
            let w = Thread { [self] in watchLoop(watcher) }
            w.name = "volley-fleet-pauses"
            watchThread = w
            w.start()
        }
    }

    /// How long one wait for announcements blocks: also how long a stop may take to reach the watching thread.
    static let watchBlockMillis = 1000

    /// Applies each announced pause to this worker's gate for it the moment it arrives. Starts from the
    /// announcements made after it first asks (`$`), then continues after the last one seen.
    private func watchLoop(_ watcher: RedisFleetStore) {
        var lastID = "$"
        var failing = false
        while !stopped.withLock({ isStopped }) {
            do {
                let (events, last) = try watcher.pauseEvents(after: lastID, blockMillis: Self.watchBlockMillis)
                lastID = last
                if !events.isEmpty {
                    let gates = pauses.all
                    for e in events {
                        for g in gates where FleetKeys.pause(g.key) == e.key { g.sharedRead(e.until) }
                    }
                }
                if failing { logger.info("fleet pause announcements readable again") }
                failing = false
            } catch {
                if !failing {
                    logger.warning("cannot wait for the fleet's pause announcements", metadata: ["error": "\(error)"])
                }
                failing = true
                // Redis unreachable (the client gave up after a second): the periodic read covers the gap; try
                // again after one refresh period unless stopping.
                stopped.withLock {
                    if !isStopped { _ = stopped.wait(until: Date().addingTimeInterval(FleetPauses.refreshSeconds)) }
                }
            }
        }
    }

    public func stop() {
        stopped.withLock {
            isStopped = true
            stopped.broadcast()
        }
    }

    private func refreshLoop() {
        var failing = false
        var lastRead = Date.distantPast
        let clock = SystemClock()
        while true {
            for budget in pauses.allBudgets {
                do { try budget.refill(from: store, clock: clock) } catch {
                    if !failing {
                        logger.warning("cannot take from the fleet's send budget", metadata: ["error": "\(error)"])
                    }
                    failing = true
                }
            }
            let gates = pauses.all
            if !gates.isEmpty && Date().timeIntervalSince(lastRead) >= FleetPauses.refreshSeconds {
                lastRead = Date()
                do {
                    let shared = try store.pauses(gates.map(\.key))
                    for g in gates { g.sharedRead(shared[g.key]) }
                    if failing { logger.info("fleet pauses readable again") }
                    failing = false
                } catch {
                    if !failing { logger.warning("cannot read the fleet's pauses", metadata: ["error": "\(error)"]) }
                    failing = true
                }
            }
            let done = stopped.withLock { () -> Bool in
                if !isStopped && !refillWanted.value {
                    _ = stopped.wait(until: Date().addingTimeInterval(FleetPauses.refreshSeconds))
                }
                refillWanted.value = false
                return isStopped
            }
            if done { return }
        }
    }
}

/// Whether a budget asked for a refill since the sync last looked; guarded by `FleetSync.stopped`.
final class RefillFlag: @unchecked Sendable {
    var value = false
}
