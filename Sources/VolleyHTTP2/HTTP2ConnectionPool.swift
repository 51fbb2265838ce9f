// A pool of HTTP/2 connections to one endpoint: the driver of `HTTP2PoolStateMachine`.
//
// The machine decides (which connection takes a request, when to open or retire one, what to resend, when a
// queued request times out); this class keeps it behind one Mutex, feeds it the events that arrive from
// submitters and from the connections (each on its own queue), and carries out the machine's actions after the
// lock is released: completions, telling connections to collect work, opening and retiring connections, arming
// the timer. A Mutex instead of a serial queue keeps the hot path (submit → connection inbox, stream closed →
// next request) free of extra queue hops; no C calls and no blocking happen under it.
import Dispatch
import Foundation
import Logging
import Synchronization

public struct HTTP2PoolStatistics: Sendable, Hashable {
    public var connectionsOpened = 0
    public var connectionsClosed = 0
    public var connectionsReady = 0
    public var requestsSubmitted = 0
    public var requestsSucceeded = 0
    public var requestsFailed = 0
    /// Of the failed: requests that were never sent and waited `providerOutageSeconds` for a connection in vain.
    public var requestsUnreachable = 0
    /// Of the failed: requests written whose connection died before the answer (not resent: at most once).
    public var requestsWrittenUnanswered = 0
    /// Requests their owner held as they were about to be written (`HTTP2PendingRequest.holdsBeforeWriting`):
    /// completed `.held`, neither failed nor succeeded.
    public var requestsHeld = 0
    /// Of `resends`: requests written whose connection died before the answer, resent (`resendUnanswered`).
    public var unansweredResends = 0
    /// Connects that failed (the connection closed before it was established).
    public var connectsFailed = 0
    /// Requests resent after a safe-to-resend failure (refused stream, GOAWAY, never written), or written and
    /// unanswered when the pool resends those.
    public var resends = 0
    /// Highest number of streams in flight on any one connection.
    public var peakStreamsPerConnection = 0
    public var pingsSent = 0
    public var goAwaysReceived = 0
    /// Connections retired on request (`retireConnection(_:)`).
    public var connectionsRetired = 0
    /// Requests waiting for a free stream right now.
    public var queued = 0
    public init() {}
}

/// The system's monotonic clock, the one connections measure request deadlines with.
struct HTTP2MonotonicClock: HTTP2PoolClock {
    var now: HTTP2PoolInstant { HTTP2PoolInstant(nanoseconds: monotonicNanos()) }
}

public final class HTTP2ConnectionPool: @unchecked Sendable {
    public let configuration: HTTP2ClientConfiguration
    let logger: Logger
    private let context: Result<TLSContext, HTTP2Error>
    private let state: Mutex<Locked>
    private let timerQueue = DispatchQueue(label: "volley.http2.pool.timer")
    /// Connection objects made and not yet freed, and who waits for none to be left (`shutdown`'s completion).
    /// Its own lock: a connection may be freed while `state` is held (taken in the order state → released).
    private let released = Mutex<(live: Int, waiters: [@Sendable () -> Void])>((0, []))

    /// Serial queues that connection queues target (≈ core count), shared by every pool in the process.
    static let sharedTargets: [DispatchQueue] = (0..<max(1, ProcessInfo.processInfo.activeProcessorCount)).map {
        DispatchQueue(label: "volley.http2.client.\($0)")
    }

    typealias StateMachine = HTTP2PoolStateMachine<HTTP2MonotonicClock, SystemRandomNumberGenerator>

    /// What the lock guards: the machine, and the connection objects of its connections.
    struct Locked {
        var machine: StateMachine
        /// Few per pool: looked up by scanning.
        var connections: [HTTP2ClientConnection] = []
    }

    /// A machine's action with its connections resolved to objects, carried out after the lock is released.
    struct Effects {
        var action: StateMachine.Action
        var drain: [HTTP2ClientConnection] = []
        var open: [HTTP2ClientConnection] = []
        var retire: [HTTP2ClientConnection] = []
    }

    public init(configuration: HTTP2ClientConfiguration, logger: Logger) {
        self.configuration = configuration
        self.logger = logger
        do {
            context = .success(
                try TLSContext.client(
                    caFile: configuration.caFile,
                    clientCertificate: configuration.clientCertificate))
        } catch {
            context = .failure(error)
        }
        state = Mutex(
            Locked(
                machine: StateMachine(
                    configuration: configuration, clock: HTTP2MonotonicClock(),
                    random: SystemRandomNumberGenerator())))
    }

    public var statistics: HTTP2PoolStatistics {
        state.withLock { $0.machine.statistics }
    }

    /// Submits a request; its `complete` is called exactly once, on an internal queue, and must not block.
    public func submit(_ p: HTTP2PendingRequest) {
        if case .failure(let e) = context {
            p.complete(.failure(e))
            return
        }
        run(state.withLock { s in resolve(s.machine.requestSubmitted(p), &s) })
    }

    /// Graceful shutdown: queued requests fail with `.shutdown`, connections send GOAWAY and close once
    /// their open streams are answered; `completion` runs when every connection is closed and freed (socket
    /// closed, `SSL*` and nghttp2 session released on its queue), so a process may exit right after it: nothing of
    /// the pool's is still inside OpenSSL while `exit` runs its cleanup.
    public func shutdown(completion: @escaping @Sendable () -> Void = {}) {
        let closed: @Sendable () -> Void = { [self] in whenConnectionsFreed(completion) }
        run(state.withLock { s in resolve(s.machine.shutdownRequested(completion: closed), &s) })
    }

    private func whenConnectionsFreed(_ body: @escaping @Sendable () -> Void) {
        let now = released.withLock { r -> Bool in
            if r.live == 0 { return true }
            r.waiters.append(body)
            return false
        }
        if now { body() }
    }

    /// From a connection's `deinit` (any thread, possibly while `state` is held): one fewer left to free.
    func connectionFreed() {
        let waiters = released.withLock { r -> [@Sendable () -> Void] in
            r.live -= 1
            guard r.live == 0 else { return [] }
            defer { r.waiters = [] }
            return r.waiters
        }
        if !waiters.isEmpty { timerQueue.async { for w in waiters { w() } } }
    }

    /// Retires `connection` (see `HTTP2RequestSubmitter.retireConnection(_:)`); nothing when it is already gone or
    /// retiring.
    public func retireConnection(_ connection: HTTP2PoolConnectionID) {
        run(state.withLock { s in resolve(s.machine.retireRequested(connection), &s) })
    }

    // MARK: events from connections (on the connection's queue); each returns the work the connection takes now

    func takeWork(_ c: HTTP2ClientConnection) -> [HTTP2PendingRequest] {
        state.withLock { $0.machine.workRequested(c.id) }
    }

    func connectionReady(_ c: HTTP2ClientConnection, limit: Int) -> [HTTP2PendingRequest] {
        let fx = state.withLock { s in resolve(s.machine.connectionEstablished(c.id, maxStreams: limit), &s) }
        run(fx)
        return fx.action.start
    }

    func limitChanged(_ c: HTTP2ClientConnection, limit: Int) -> [HTTP2PendingRequest] {
        let fx = state.withLock { s in resolve(s.machine.settingsChanged(c.id, maxConcurrentStreams: limit), &s) }
        run(fx)
        return fx.action.start
    }

    func requestsFinished(_ c: HTTP2ClientConnection, _ batch: [FinishedRequest], peak: Int) -> [HTTP2PendingRequest] {
        let fx = state.withLock { s in
            resolve(s.machine.requestsCompleted(batch, on: c.id, peakStreams: peak), &s)
        }
        run(fx)
        // Completions often submit the next request at once (closed loops, the pipeline's credit refill): collect
        // it now rather than after a drain.
        if fx.action.collectAfterCompletions { return fx.action.start + takeWork(c) }
        return fx.action.start
    }

    /// Requests handed to a connection that can no longer open streams: back to the queue, not counted as resends.
    func giveBack(_ c: HTTP2ClientConnection, _ work: [HTTP2PendingRequest]) {
        guard !work.isEmpty else { return }
        run(state.withLock { s in resolve(s.machine.requestsReturned(work, by: c.id), &s) })
    }

    func goAwayReceived(_ c: HTTP2ClientConnection, returning work: [HTTP2PendingRequest]) {
        run(state.withLock { s in resolve(s.machine.goAwayReceived(c.id, unstarted: work), &s) })
    }

    func pingSent() { state.withLock { $0.machine.pingSent() } }

    func connectionClosed(
        _ c: HTTP2ClientConnection, error: HTTP2Error, finished: [FinishedRequest],
        unstarted: [HTTP2PendingRequest], peak: Int
    ) {
        logger.debug("connection closed", metadata: ["host": "\(configuration.host)", "error": "\(error)"])
        run(
            state.withLock { s in
                let a = s.machine.connectionClosed(
                    c.id, error: error, finished: finished, unstarted: unstarted,
                    peakStreams: peak)
                s.connections.removeAll { $0 === c }
                return resolve(a, &s)
            })
    }

    private func timerFired() {
        run(state.withLock { s in resolve(s.machine.timerFired(), &s) })
    }

    // MARK: actions

    /// Under the lock: the action's connection ids as objects; connections to open are made (not started) here.
    private func resolve(_ a: StateMachine.Action, _ s: inout Locked) -> Effects {
        var fx = Effects(action: a)
        for id in a.drain { if let c = s.connection(id) { fx.drain.append(c) } }
        for id in a.retire { if let c = s.connection(id) { fx.retire.append(c) } }
        if !a.open.isEmpty, case .success(let ctx) = context {
            let targets = Self.sharedTargets
            for id in a.open {
                let q = DispatchQueue(label: "volley.http2.client.conn", target: targets[id.rawValue % targets.count])
                let c = HTTP2ClientConnection(
                    id: id, pool: self, configuration: configuration, context: ctx, queue: q,
                    logger: logger)
                released.withLock { $0.live += 1 }
                s.connections.append(c)
                fx.open.append(c)
            }
        }
        return fx
    }

    /// After the lock: completions first (they may submit more, which the drains then carry), then connections.
    private func run(_ fx: Effects) {
        for p in fx.action.complete { p.deliver() }
        assert(fx.action.ignored.isEmpty, "a request completed twice: \(fx.action.ignored.count) completions ignored")
        for c in fx.drain { c.queue.async { c.drainInbox() } }
        for c in fx.open { c.queue.async { c.connect() } }
        for c in fx.retire { c.queue.async { c.shutdownGracefully() } }
        if let at = fx.action.scheduleTimer {
            timerQueue.asyncAfter(deadline: DispatchTime(uptimeNanoseconds: at.nanoseconds)) { [weak self] in
                self?.timerFired()
            }
        }
        for done in fx.action.shutdownCompleted { done() }
    }
}

extension HTTP2ConnectionPool.Locked {
    func connection(_ id: HTTP2PoolConnectionID) -> HTTP2ClientConnection? {
        for c in connections where c.id == id { return c }
        return nil
    }
}
