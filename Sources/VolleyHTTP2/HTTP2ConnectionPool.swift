// A pool of HTTP/2 connections to one endpoint.
//
// The pool's state is a small state machine behind one Mutex: events come in from submitters and from the
// connections (each on its own queue), the machine mutates its state and returns `Effects`, which are
// executed after the lock is released (completions, connection starts, drain requests). A Mutex instead
// of a serial queue keeps the hot path (submit → connection inbox, stream closed → next request) free of
// extra queue hops; no C calls and no blocking happen under it.
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
    /// Requests resent after a safe-to-resend failure (refused stream, GOAWAY, never written).
    public var resends = 0
    /// Highest number of streams in flight on any one connection.
    public var peakStreamsPerConnection = 0
    public var pingsSent = 0
    public var goAwaysReceived = 0
    /// Requests waiting for a free stream right now.
    public var queued = 0
    public init() {}
}

/// FIFO with cheap push-front (resends go first) and pop-front.
struct RequestQueue {
    private var items: [HTTP2PendingRequest?] = []
    private var head = 0
    var count: Int { items.count - head }
    var isEmpty: Bool { count == 0 }
    mutating func append(_ p: HTTP2PendingRequest) { items.append(p) }
    mutating func pushFront(_ p: HTTP2PendingRequest) {
        if head > 0 { head -= 1; items[head] = p } else { items.insert(p, at: 0) }
    }
    mutating func popFirst() -> HTTP2PendingRequest? {
        guard head < items.count else { return nil }
        let p = items[head]; items[head] = nil; head += 1
        if head > 1024 && head * 2 > items.count { items.removeFirst(head); head = 0 }
        return p
    }
    mutating func removeAll(where expired: (HTTP2PendingRequest) -> Bool) -> [HTTP2PendingRequest] {
        var out: [HTTP2PendingRequest] = []
        var keep: [HTTP2PendingRequest?] = []
        keep.reserveCapacity(count)
        for case let p? in items[head...] { if expired(p) { out.append(p) } else { keep.append(p) } }
        items = keep; head = 0
        return out
    }
    mutating func drain() -> [HTTP2PendingRequest] { removeAll(where: { _ in true }) }
}

public final class HTTP2ConnectionPool: @unchecked Sendable {
    public let configuration: HTTP2ClientConfiguration
    let logger: Logger
    private let context: Result<TLSContext, HTTP2Error>
    private let state = Mutex(State())
    private let timerQueue = DispatchQueue(label: "volley.http2.pool.timer")
    private var sweepTimer: DispatchSourceTimer?   // set once under `state` lock via `timerStarted`

    /// Serial queues that connection queues target (≈ core count), shared by every pool in the process.
    static let sharedTargets: [DispatchQueue] = (0..<max(1, ProcessInfo.processInfo.activeProcessorCount)).map {
        DispatchQueue(label: "volley.http2.client.\($0)")
    }

    struct State {
        var connections: [HTTP2ClientConnection] = []
        var waiting = RequestQueue()
        var failures = 0
        var nextConnectNanos: UInt64 = 0
        var reconnectScheduled = false
        var hasDemand = false
        var timerStarted = false
        var shuttingDown = false
        var shutdownCompletions: [@Sendable () -> Void] = []
        var stats = HTTP2PoolStatistics()
        var nextConnectionIndex = 0
    }

    /// What to do after leaving the lock.
    struct Effects {
        var completions: [FinishedRequest] = []
        var drains: [HTTP2ClientConnection] = []
        var starts: [HTTP2ClientConnection] = []
        var shutdowns: [HTTP2ClientConnection] = []
        var reconnectAfter: Double?
        var shutdownDone: [@Sendable () -> Void] = []
        var startTimer = false
        /// `requestsFinished` takes the connection's inbox again after the completions ran.
        var collectAfterCompletions = false
    }

    public init(configuration: HTTP2ClientConfiguration, logger: Logger) {
        self.configuration = configuration
        self.logger = logger
        do {
            context = .success(try TLSContext.client(caFile: configuration.caFile, clientCertificate: configuration.clientCertificate))
        } catch {
            context = .failure(error)
        }
    }

    public var statistics: HTTP2PoolStatistics {
        state.withLock { s in var st = s.stats; st.queued = s.waiting.count; return st }
    }

    /// Submits a request; its `complete` is called exactly once, on an internal queue, and must not block.
    public func submit(_ p: HTTP2PendingRequest) {
        p.deadlineNanos = monotonicNanos() + UInt64(max(configuration.requestTimeoutSeconds, 0.001) * 1e9)
        if case .failure(let e) = context { p.complete(.failure(e)); return }
        var fx = Effects()
        state.withLock { s in
            if s.shuttingDown {
                fx.completions.append(p.finished(.failure(HTTP2Error(.shutdown, resendIsSafe: true, "the connection pool is shut down"))))
                return
            }
            s.stats.requestsSubmitted += 1
            s.hasDemand = true
            if !s.timerStarted { s.timerStarted = true; fx.startTimer = true }
            if let c = Self.bestConnection(s.connections) {
                c.reserved += 1
                c.inbox.append(p)
                if !c.drainScheduled { c.drainScheduled = true; fx.drains.append(c) }
            } else if s.waiting.count >= configuration.maxQueuedRequests {
                fx.completions.append(p.finished(.failure(HTTP2Error(.queueFull, resendIsSafe: true,
                    "\(s.waiting.count) requests already wait for a stream to \(configuration.host); slow down or add connections"))))
            } else {
                s.waiting.append(p)
                ensureConnections(&s, &fx)
            }
        }
        run(fx)
    }

    /// Graceful shutdown: queued requests fail with `.shutdown`, connections send GOAWAY and close once
    /// their open streams are answered; `completion` runs when every connection is closed.
    public func shutdown(completion: @escaping @Sendable () -> Void = {}) {
        var fx = Effects()
        state.withLock { s in
            s.shuttingDown = true
            let err = HTTP2Error(.shutdown, resendIsSafe: true, "the connection pool shut down before the request was sent")
            for p in s.waiting.drain() { fx.completions.append(p.finished(.failure(err))) }
            for c in s.connections {
                for p in c.inbox { fx.completions.append(p.finished(.failure(err))) }
                c.reserved -= c.inbox.count
                c.inbox.removeAll()
                fx.shutdowns.append(c)
            }
            if s.connections.isEmpty { fx.shutdownDone.append(completion) } else { s.shutdownCompletions.append(completion) }
        }
        run(fx)
    }

    // MARK: the state machine (called with the lock held)

    private static func bestConnection(_ cs: [HTTP2ClientConnection], excluding: HTTP2ClientConnection? = nil) -> HTTP2ClientConnection? {
        var best: HTTP2ClientConnection?
        for c in cs where c.slotState == .ready && c.reserved < c.slotLimit && c !== excluding {
            if best == nil || c.reserved < best!.reserved { best = c }
        }
        return best
    }

    private func assignWaiting(_ s: inout State, _ fx: inout Effects, excluding: HTTP2ClientConnection? = nil) {
        while !s.waiting.isEmpty {
            guard let c = Self.bestConnection(s.connections, excluding: excluding) else { return }
            let room = c.slotLimit - c.reserved
            for _ in 0..<room {
                guard let p = s.waiting.popFirst() else { break }
                c.inbox.append(p); c.reserved += 1
            }
            if !c.drainScheduled { c.drainScheduled = true; fx.drains.append(c) }
        }
    }

    private func backoffSeconds(_ failures: Int) -> Double {
        let exp = configuration.reconnectBaseSeconds * pow(2, Double(min(failures, 20) - 1))
        return min(configuration.reconnectMaxSeconds, exp) * Double.random(in: 0.5...1.0)
    }

    private func ensureConnections(_ s: inout State, _ fx: inout Effects) {
        guard !s.shuttingDown, s.hasDemand else { return }
        // Counted without a filtered copy: this runs on every submit that has to wait for a stream.
        var live = 0
        for c in s.connections where c.slotState != .draining { live += 1 }
        guard live < configuration.connections else { return }
        // After failures, reconnect only while someone waits (lazy), and not before the backoff expires.
        if s.failures > 0 && s.waiting.isEmpty { return }
        let now = monotonicNanos()
        if now < s.nextConnectNanos {
            if !s.reconnectScheduled {
                s.reconnectScheduled = true
                fx.reconnectAfter = Double(s.nextConnectNanos - now) / 1e9
            }
            return
        }
        guard case .success(let ctx) = context else { return }
        for _ in live..<configuration.connections {
            let targets = Self.sharedTargets
            let q = DispatchQueue(label: "volley.http2.client.conn", target: targets[s.nextConnectionIndex % targets.count])
            s.nextConnectionIndex += 1
            let c = HTTP2ClientConnection(pool: self, configuration: configuration, context: ctx, queue: q, logger: logger)
            s.connections.append(c)
            s.stats.connectionsOpened += 1
            fx.starts.append(c)
        }
    }

    private func process(_ s: inout State, _ fx: inout Effects, _ c: HTTP2ClientConnection, _ batch: [FinishedRequest], peak: Int) {
        c.reserved -= batch.count
        if peak > s.stats.peakStreamsPerConnection { s.stats.peakStreamsPerConnection = peak }
        // Common case: nothing to resend. The batch itself becomes the completion list (no copy, no new buffer).
        let anyResend = batch.contains { f in
            f.failedResendably && f.resends < configuration.maxResends && !s.shuttingDown
        }
        if !anyResend {
            var failed = 0
            for f in batch where f.failed { failed += 1 }
            s.stats.requestsFailed += failed
            s.stats.requestsSucceeded += batch.count - failed
            if fx.completions.isEmpty { fx.completions = batch } else { fx.completions.append(contentsOf: batch) }
            return
        }
        for f in batch {
            if f.failedResendably && f.resends < configuration.maxResends && !s.shuttingDown {
                f.resends += 1
                f.clearForResend()
                s.stats.resends += 1
                s.waiting.pushFront(f)
            } else {
                if f.failed { s.stats.requestsFailed += 1 } else { s.stats.requestsSucceeded += 1 }
                fx.completions.append(f)
            }
        }
    }

    /// Moves the connection's inbox and as much of the waiting queue as fits into a batch for it.
    private func take(_ s: inout State, _ c: HTTP2ClientConnection) -> [HTTP2PendingRequest] {
        c.drainScheduled = false
        var work: [HTTP2PendingRequest] = []
        if !c.inbox.isEmpty {
            work = c.inbox
            // A buffer of the same size for the next batch at once, instead of regrowing it from empty.
            c.inbox.removeAll(keepingCapacity: true)
        }
        if c.slotState == .ready {
            while c.reserved < c.slotLimit, let p = s.waiting.popFirst() {
                work.append(p); c.reserved += 1
            }
        }
        return work
    }

    // MARK: events from connections (on the connection's queue)

    func takeWork(_ c: HTTP2ClientConnection) -> [HTTP2PendingRequest] {
        state.withLock { s in take(&s, c) }
    }

    func connectionReady(_ c: HTTP2ClientConnection, limit: Int) -> [HTTP2PendingRequest] {
        var fx = Effects()
        let work: [HTTP2PendingRequest] = state.withLock { s in
            c.slotState = .ready
            c.slotLimit = limit
            s.failures = 0
            s.nextConnectNanos = 0
            s.stats.connectionsReady += 1
            if s.shuttingDown { fx.shutdowns.append(c); return [] }
            let w = take(&s, c)
            assignWaiting(&s, &fx, excluding: c)
            return w
        }
        run(fx)
        return work
    }

    func limitChanged(_ c: HTTP2ClientConnection, limit: Int) -> [HTTP2PendingRequest] {
        state.withLock { s in
            c.slotLimit = limit
            return c.slotState == .ready ? take(&s, c) : []
        }
    }

    func requestsFinished(_ c: HTTP2ClientConnection, _ batch: [FinishedRequest], peak: Int) -> [HTTP2PendingRequest] {
        var fx = Effects()
        var work: [HTTP2PendingRequest] = state.withLock { s in
            process(&s, &fx, c, batch, peak: peak)
            let w = c.slotState == .ready ? take(&s, c) : []
            if !s.waiting.isEmpty { assignWaiting(&s, &fx, excluding: c) }
            // Completions often submit the next request at once (closed loops, the pipeline's credit refill). This
            // connection collects that work right after running them, so a submit that lands here need not
            // schedule a drain (one queue hop per batch saved).
            if !fx.completions.isEmpty && !c.drainScheduled { c.drainScheduled = true; fx.collectAfterCompletions = true }
            return w
        }
        let collect = fx.collectAfterCompletions
        run(fx)
        if collect { work += takeWork(c) }
        return work
    }

    /// Requests handed to a connection that can no longer open streams: back to the queue, not counted as resends.
    func giveBack(_ c: HTTP2ClientConnection, _ work: [HTTP2PendingRequest]) {
        guard !work.isEmpty else { return }
        var fx = Effects()
        state.withLock { s in
            c.reserved -= work.count
            if s.shuttingDown {
                for p in work { fx.completions.append(p.finished(.failure(HTTP2Error(.shutdown, resendIsSafe: true, "the connection pool shut down before the request was sent")))) }
            } else {
                for p in work.reversed() { s.waiting.pushFront(p) }
                assignWaiting(&s, &fx, excluding: c)
                ensureConnections(&s, &fx)
            }
        }
        run(fx)
    }

    func goAwayReceived(_ c: HTTP2ClientConnection, returning work: [HTTP2PendingRequest]) {
        var fx = Effects()
        state.withLock { s in
            c.slotState = .draining
            s.stats.goAwaysReceived += 1
            let inbox = c.inbox
            c.inbox.removeAll()
            c.reserved -= inbox.count + work.count
            for p in (work + inbox).reversed() { s.waiting.pushFront(p) }
            ensureConnections(&s, &fx)
            assignWaiting(&s, &fx, excluding: c)
        }
        run(fx)
    }

    func pingSent() { state.withLock { $0.stats.pingsSent += 1 } }

    func connectionClosed(_ c: HTTP2ClientConnection, error: HTTP2Error, wasReady: Bool, finished: [FinishedRequest],
                          unstarted: [HTTP2PendingRequest], peak: Int) {
        var fx = Effects()
        state.withLock { s in
            s.connections.removeAll { $0 === c }
            s.stats.connectionsClosed += 1
            process(&s, &fx, c, finished, peak: peak)
            let returned = unstarted + c.inbox
            c.inbox.removeAll()
            c.reserved = 0
            c.slotState = .draining
            if s.shuttingDown {
                for p in returned { fx.completions.append(p.finished(.failure(HTTP2Error(.shutdown, resendIsSafe: true, "the connection pool shut down before the request was sent")))) }
                if s.connections.isEmpty {
                    fx.shutdownDone = s.shutdownCompletions
                    s.shutdownCompletions.removeAll()
                }
                return
            }
            for p in returned.reversed() { s.waiting.pushFront(p) }
            if wasReady {
                s.failures = 0
            } else {
                s.failures += 1
                s.nextConnectNanos = monotonicNanos() + UInt64(backoffSeconds(s.failures) * 1e9)
                logger.debug("connection failed", metadata: ["host": "\(configuration.host)", "error": "\(error)"])
                // Nobody can serve the queue: fail it with the reason instead of retrying forever.
                if !s.connections.contains(where: { $0.slotState == .ready }) {
                    let e = HTTP2Error(error.kind, resendIsSafe: false, error.message)
                    for p in s.waiting.drain() {
                        s.stats.requestsFailed += 1
                        fx.completions.append(p.finished(.failure(e)))
                    }
                }
            }
            assignWaiting(&s, &fx)
            ensureConnections(&s, &fx)
        }
        run(fx)
    }

    // MARK: effects

    private func run(_ fx: Effects) {
        for f in fx.completions { if let r = f.takeResult() { f.complete(r) } }
        for c in fx.drains { c.queue.async { c.drainInbox() } }
        for c in fx.starts { c.queue.async { c.connect() } }
        for c in fx.shutdowns { c.queue.async { c.shutdownGracefully() } }
        if let after = fx.reconnectAfter {
            timerQueue.asyncAfter(deadline: .now() + after) { [weak self] in self?.reconnectTimerFired() }
        }
        if fx.startTimer { startSweepTimer() }
        for done in fx.shutdownDone { done() }
    }

    private func reconnectTimerFired() {
        var fx = Effects()
        state.withLock { s in
            s.reconnectScheduled = false
            ensureConnections(&s, &fx)
        }
        run(fx)
    }

    /// Fails queued requests whose deadline passed (they were never sent: safe to resend by the caller).
    private func startSweepTimer() {
        timerQueue.async { [weak self] in
            guard let self, self.sweepTimer == nil else { return }
            let t = DispatchSource.makeTimerSource(queue: self.timerQueue)
            let interval = min(max(self.configuration.requestTimeoutSeconds / 4, 0.02), 1.0)
            t.schedule(deadline: .now() + interval, repeating: interval, leeway: .milliseconds(10))
            t.setEventHandler { [weak self] in self?.sweep() }
            self.sweepTimer = t
            t.resume()
        }
    }

    private func sweep() {
        let now = monotonicNanos()
        var fx = Effects()
        state.withLock { s in
            guard !s.waiting.isEmpty else { return }
            for p in s.waiting.removeAll(where: { $0.deadlineNanos <= now }) {
                s.stats.requestsFailed += 1
                fx.completions.append(p.finished(.failure(HTTP2Error(.timeout, resendIsSafe: true,
                    "no connection to \(configuration.host):\(configuration.port) could take the request within \(configuration.requestTimeoutSeconds) s (never sent)"))))
            }
        }
        run(fx)
    }

    deinit {
        sweepTimer?.cancel()
    }
}
