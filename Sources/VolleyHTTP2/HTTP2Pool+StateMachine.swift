// The connection pool's decisions, without I/O.
//
// `HTTP2PoolStateMachine` is a value: events come in (a request submitted, a connection established, streams
// closed, GOAWAY, a timer fired…), the machine updates its state and returns an `Action` saying what the caller
// must do: hand requests to a connection, open or retire connections, arm the timer, run completions. It reads
// time from an injected clock and randomness from an injected generator, and never touches a socket, a queue or
// a lock, so tests drive it with a manual clock. `HTTP2ConnectionPool` keeps it behind its Mutex and carries out
// the actions after releasing the lock.

import VolleyCore

/// A point on a monotonic clock, in nanoseconds from an arbitrary origin.
struct HTTP2PoolInstant: Comparable, Hashable, Sendable {
    var nanoseconds: UInt64

    static let zero = HTTP2PoolInstant(nanoseconds: 0)

    /// This instant plus `seconds` (negative counts as zero; saturates instead of overflowing).
    func advanced(bySeconds seconds: Double) -> HTTP2PoolInstant {
        let delta = seconds > 0 ? min(seconds * 1e9, Double(UInt64.max >> 1)) : 0
        let (sum, overflow) = nanoseconds.addingReportingOverflow(UInt64(delta))
        return HTTP2PoolInstant(nanoseconds: overflow ? .max : sum)
    }

    static func < (a: HTTP2PoolInstant, b: HTTP2PoolInstant) -> Bool { a.nanoseconds < b.nanoseconds }
}

/// Where the pool's state machine reads the time.
protocol HTTP2PoolClock {
    var now: HTTP2PoolInstant { get }
}

/// A connection of one pool, as the state machine knows it (the driver maps it to its connection object). Public so
/// a response can name the connection that answered it (`HTTP2Response.connection`, `retireConnection(_:)`).
public struct HTTP2PoolConnectionID: Hashable, Sendable, CustomStringConvertible {
    let rawValue: Int
    init(rawValue: Int) { self.rawValue = rawValue }
    public var description: String { "connection \(rawValue)" }
}

/// Who holds a request inside the pool. Read and written only by the pool's state machine (under the pool lock);
/// it is how the machine tells a completion it expects from one it has already taken.
enum HTTP2PoolCustody: Equatable, Sendable {
    /// Not submitted yet.
    case outside
    /// In the pool's queue, waiting for a stream.
    case queued
    /// Handed to this connection (its inbox, its own queue, or a stream).
    case connection(HTTP2PoolConnectionID)
    /// Its completion was handed to the caller.
    case completed
}

/// FIFO with cheap push-front (resends go first) and pop-front.
struct HTTP2PoolRequestQueue {
    private var items: [HTTP2PendingRequest?] = []
    private var head = 0
    var count: Int { items.count - head }
    var isEmpty: Bool { count == 0 }
    mutating func append(_ p: HTTP2PendingRequest) { items.append(p) }
    mutating func pushFront(_ p: HTTP2PendingRequest) {
        if head > 0 {
            head -= 1
            items[head] = p
        } else {
            items.insert(p, at: 0)
        }
    }
    mutating func popFirst() -> HTTP2PendingRequest? {
        guard head < items.count else { return nil }
        let p = items[head]
        items[head] = nil
        head += 1
        if head > 1024 && head * 2 > items.count {
            items.removeFirst(head)
            head = 0
        }
        return p
    }
    /// Removes and returns the requests `matching` says to take, keeping the others in order.
    mutating func removeAll(where matching: (HTTP2PendingRequest) -> Bool) -> [HTTP2PendingRequest] {
        var out: [HTTP2PendingRequest] = []
        var keep: [HTTP2PendingRequest?] = []
        keep.reserveCapacity(count)
        for case let p? in items[head...] { if matching(p) { out.append(p) } else { keep.append(p) } }
        items = keep
        head = 0
        return out
    }
    mutating func drain() -> [HTTP2PendingRequest] { removeAll(where: { _ in true }) }
    /// The earliest deadline of the waiting requests.
    var earliestDeadline: HTTP2PoolInstant? {
        var earliest: HTTP2PoolInstant?
        for case let p? in items[head...] where earliest == nil || p.deadline < earliest! { earliest = p.deadline }
        return earliest
    }
}

/// The decisions of a pool of HTTP/2 connections to one endpoint (see the top of this file).
///
/// Requests go to the ready connection with the fewest requests assigned, up to its stream limit
/// (min(peer's SETTINGS_MAX_CONCURRENT_STREAMS, our cap)); when every stream is taken they wait in a FIFO queue and
/// go out as streams close. Connections are opened lazily up to `configuration.connections`; one that received
/// GOAWAY takes no new requests and a replacement is opened beside it. A connection that closes before it was
/// established counts as a failed connect: the next one waits an exponential back-off with jitter. Requests that
/// failed "safe to resend" are resent (up to `maxResends`), first in line; a connection that received GOAWAY
/// takes none of them.
///
/// A request that was never written is never given up for want of a connection before its outage budget
/// (`providerOutageSeconds` from its submit) is spent: while no connection is ready it stays queued (its queue
/// deadline does not apply), and when the connection it was on dies or goes away it is resent even past
/// `maxResends`, since the next try waits for a new connection and its back-off. Past the budget it fails with
/// `.providerUnreachable` and the last connect error. A request written and not answered when its connection dies
/// fails with `.writtenUnanswered`, counted apart (at most once), unless the pool resends those
/// (`resendUnanswered`: its requests carry a collapse identity): then it is resent like one never written, within
/// the same budget.
struct HTTP2PoolStateMachine<Clock: HTTP2PoolClock, Random: RandomNumberGenerator> {
    typealias ConnectionID = HTTP2PoolConnectionID
    typealias Request = HTTP2PendingRequest

    enum ConnectionState: Equatable {
        /// Opened; its first SETTINGS has not arrived yet.
        case connecting
        /// Takes requests up to its stream limit.
        case ready
        /// Received GOAWAY, or the pool is shutting down: takes no new requests, closes when its streams are done.
        case draining
    }

    struct Connection {
        let id: ConnectionID
        var state = ConnectionState.connecting
        /// Requests assigned to it and not reported finished (its inbox, its own queue and its streams).
        var reserved = 0
        /// min(peer's SETTINGS_MAX_CONCURRENT_STREAMS, our cap); 0 until the first SETTINGS.
        var limit = 0
        /// Requests assigned to it that it has not collected yet.
        var inbox: [Request] = []
        /// The connection has been told to collect its inbox and has not done so yet.
        var drainScheduled = false
        /// It was established once (a close afterwards is not a failed connect).
        var wasEstablished = false
        init(id: ConnectionID) { self.id = id }
    }

    /// What the caller does after an event, in this order: run `complete`, hand `start` to the connection that
    /// reported the event, tell `drain` connections to collect their inbox, open `open`, retire `retire`, arm the
    /// timer, run `shutdownCompleted`.
    struct Action {
        /// Requests whose result is set: run their completion. Failures say whether a resend is safe.
        var complete: [Request] = []
        /// Requests the connection that reported the event takes now (`workRequested` returns them directly).
        var start: [Request] = []
        /// Connections with new requests in their inbox: each collects them with `workRequested`.
        var drain: [ConnectionID] = []
        /// Connections to open; each reports `connectionEstablished` or `connectionClosed`.
        var open: [ConnectionID] = []
        /// Connections to retire: no new streams, GOAWAY to the peer, close once their streams are answered.
        var retire: [ConnectionID] = []
        /// Arm the pool's timer for this instant and report `timerFired` then. An arming replaces an earlier one
        /// for the machine; a stale one that still fires is ignored.
        var scheduleTimer: HTTP2PoolInstant?
        /// Every connection closed after `shutdownRequested`: run these.
        var shutdownCompleted: [@Sendable () -> Void] = []
        /// The reporting connection collects its inbox again right after `complete` ran: completions often submit
        /// the next request at once, and this spares that submit a drain (one queue hop per batch).
        var collectAfterCompletions = false
        /// Completions for requests the reporting connection did not hold (completed twice, or never submitted):
        /// not completed again. A bug in the caller; the driver asserts in debug builds.
        var ignored: [Request] = []
    }

    let configuration: HTTP2ClientConfiguration
    let clock: Clock
    private var random: Random

    private(set) var connections: [Connection] = []
    private var waiting = HTTP2PoolRequestQueue()
    /// Failed connects in a row.
    private(set) var failures = 0
    /// No connection is opened before this (back-off after failed connects).
    private(set) var nextConnectAt = HTTP2PoolInstant.zero
    /// No replacement for a connection retired on request (`retireRequested`) is opened before this.
    private(set) var replaceAt = HTTP2PoolInstant.zero
    /// Someone submitted a request: connections are opened lazily, on the first one.
    private var hasDemand = false
    /// Why the last connect failed, for the error of requests that outwait their outage budget.
    private var lastConnectError: HTTP2Error?
    /// The instant the caller was last asked to arm the timer for, while it has not fired.
    private(set) var timerAt: HTTP2PoolInstant?
    private(set) var shuttingDown = false
    private var shutdownWaiters: [@Sendable () -> Void] = []
    private var stats = HTTP2PoolStatistics()
    private var nextConnectionID = 0

    init(configuration: HTTP2ClientConfiguration, clock: Clock, random: Random) {
        self.configuration = configuration
        self.clock = clock
        self.random = random
    }

    var statistics: HTTP2PoolStatistics {
        var s = stats
        s.queued = waiting.count
        return s
    }

    /// Requests waiting for a stream.
    var queuedCount: Int { waiting.count }

    // MARK: events

    /// A request was submitted.
    mutating func requestSubmitted(_ request: Request) -> Action {
        var a = Action()
        if shuttingDown {
            complete(request, .failure(Self.shutdownError("the connection pool is shut down")), &a)
            return a
        }
        stats.requestsSubmitted += 1
        hasDemand = true
        let now = clock.now
        request.deadline = now.advanced(bySeconds: max(configuration.requestTimeoutSeconds, 0.001))
        request.giveUpAt = now.advanced(bySeconds: max(configuration.providerOutageSeconds, 0.001))
        if let i = bestConnection() {
            assign(request, to: i, &a)
        } else if waiting.count >= configuration.maxQueuedRequests {
            stats.requestsFailed += 1
            complete(
                request,
                .failure(
                    HTTP2Error(
                        .queueFull, resendIsSafe: true,
                        "\(waiting.count) requests already wait for a stream to \(configuration.host); "
                            + "slow down or add connections")), &a)
        } else {
            request.custody = .queued
            waiting.append(request)
            ensureConnections(&a)
            if timerAt == nil { armTimer(request.deadline, &a) }
        }
        return a
    }

    /// The connection's first SETTINGS arrived: it may open `maxStreams` streams.
    mutating func connectionEstablished(_ id: ConnectionID, maxStreams: Int) -> Action {
        var a = Action()
        guard let i = index(of: id) else { return a }
        connections[i].state = .ready
        connections[i].wasEstablished = true
        connections[i].limit = maxStreams
        failures = 0
        lastConnectError = nil
        nextConnectAt = .zero
        stats.connectionsReady += 1
        if shuttingDown {
            connections[i].state = .draining
            a.retire.append(id)
            return a
        }
        a.start = take(i)
        assignWaiting(excluding: i, &a)
        return a
    }

    /// A later SETTINGS changed the connection's stream limit (RFC 9113 §6.5.2 SETTINGS_MAX_CONCURRENT_STREAMS).
    /// A lower limit takes effect for new requests; streams already open stay open (RFC 9113 §5.1.2).
    mutating func settingsChanged(_ id: ConnectionID, maxConcurrentStreams: Int) -> Action {
        var a = Action()
        guard let i = index(of: id) else { return a }
        connections[i].limit = maxConcurrentStreams
        if connections[i].state == .ready { a.start = take(i) }
        return a
    }

    /// The connection asks for the requests assigned to it (after a `drain`). Returns what it takes now.
    mutating func workRequested(_ id: ConnectionID) -> [Request] {
        guard let i = index(of: id) else { return [] }
        return take(i)
    }

    /// Streams of the connection closed: `batch` holds requests whose result is set. `peakStreams` is the most
    /// streams it had open at once (statistics).
    mutating func requestsCompleted(_ batch: [Request], on id: ConnectionID, peakStreams: Int) -> Action {
        var a = Action()
        guard let i = index(of: id) else {
            a.ignored = batch
            return a
        }
        if peakStreams > stats.peakStreamsPerConnection { stats.peakStreamsPerConnection = peakStreams }
        process(batch, from: i, connectionLost: connections[i].state == .draining, &a)
        if connections[i].state == .ready { a.start = take(i) }
        if !waiting.isEmpty { assignWaiting(excluding: i, &a) }
        if !a.complete.isEmpty && !connections[i].drainScheduled {
            connections[i].drainScheduled = true
            a.collectAfterCompletions = true
        }
        return a
    }

    /// The connection gives back requests it cannot start (it can no longer open streams). They wait again, first
    /// in line, and do not count as resends.
    mutating func requestsReturned(_ requests: [Request], by id: ConnectionID) -> Action {
        var a = Action()
        guard !requests.isEmpty else { return a }
        guard let i = index(of: id) else {
            a.ignored = requests
            return a
        }
        let returned = accepted(requests, from: id, &a)
        connections[i].reserved -= returned.count
        if shuttingDown {
            for p in returned { complete(p, .failure(Self.shutdownError()), &a) }
        } else {
            requeue(returned)
            assignWaiting(excluding: i, &a)
            ensureConnections(&a)
        }
        return a
    }

    /// The peer sent GOAWAY (RFC 9113 §6.8): the connection takes no new streams. `unstarted` are requests it held
    /// without a stream; they and its inbox go to other connections. Streams above the last-stream-id close
    /// afterwards as failures safe to resend (`requestsCompleted` resends them); a replacement is opened.
    mutating func goAwayReceived(_ id: ConnectionID, unstarted: [Request]) -> Action {
        var a = Action()
        guard let i = index(of: id) else {
            a.ignored = unstarted
            return a
        }
        connections[i].state = .draining
        stats.goAwaysReceived += 1
        let returned = accepted(unstarted, from: id, &a) + connections[i].inbox
        connections[i].inbox.removeAll()
        connections[i].reserved -= returned.count
        if shuttingDown {
            for p in returned { complete(p, .failure(Self.shutdownError()), &a) }
            return a
        }
        requeue(returned)
        ensureConnections(&a)
        assignWaiting(excluding: i, &a)
        return a
    }

    /// The connection closed. `finished` are requests whose result is set (they complete or are resent),
    /// `unstarted` ones it held without a stream (they wait again). A connection that closes before it was
    /// established is a failed connect: the next connect waits a back-off, and when no connection is ready the
    /// waiting requests keep waiting, each until its outage budget is spent (then it fails with
    /// `.providerUnreachable` and this connection's error). That is for an endpoint that is down
    /// (`.connectFailed`: refused, unreachable, timed out, cut during the TLS handshake); one that answered and
    /// refused (certificate not trusted, a TLS alert, no h2) fails them at once instead, not resent.
    mutating func connectionClosed(
        _ id: ConnectionID, error: HTTP2Error, finished: [Request], unstarted: [Request],
        peakStreams: Int
    ) -> Action {
        var a = Action()
        guard let i = index(of: id) else {
            a.ignored = finished + unstarted
            return a
        }
        if peakStreams > stats.peakStreamsPerConnection { stats.peakStreamsPerConnection = peakStreams }
        process(finished, from: i, connectionLost: true, &a)
        let returned = accepted(unstarted, from: id, &a) + connections[i].inbox
        let wasEstablished = connections[i].wasEstablished
        connections.remove(at: i)
        stats.connectionsClosed += 1
        if shuttingDown {
            for p in returned { complete(p, .failure(Self.shutdownError()), &a) }
            if connections.isEmpty {
                a.shutdownCompleted = shutdownWaiters
                shutdownWaiters.removeAll()
            }
            return a
        }
        requeue(returned)
        if wasEstablished {
            failures = 0
            nextConnectAt = .zero
        } else {
            failures += 1
            stats.connectsFailed += 1
            lastConnectError = error
            nextConnectAt = clock.now.advanced(bySeconds: backoffSeconds(afterFailures: failures))
            if !hasReadyConnection && error.kind != .connectFailed {
                // The endpoint answered and said no (certificate not trusted, a TLS alert, no h2): waiting cannot
                // help, the queue fails with the error at once, not resent.
                let e = HTTP2Error(error.kind, resendIsSafe: false, error.message)
                for p in waiting.drain() {
                    stats.requestsFailed += 1
                    complete(p, .failure(e), &a)
                }
            } else if !hasReadyConnection {
                // Nothing could take the queue: each request waits out its own budget (timers only: the
                // reconnect after the back-off, and the earliest queue deadline).
                let now = clock.now
                for p in waiting.removeAll(where: { p in
                    if now < p.giveUpAt {
                        p.heldThroughOutage = true
                        return false
                    }
                    return true
                }) {
                    giveUp(p, &a)
                }
                if let next = waiting.earliestDeadline { armTimer(next, &a) }
            }
        }
        assignWaiting(excluding: nil, &a)
        ensureConnections(&a)
        return a
    }

    /// The timer armed by `scheduleTimer` fired: queued requests past their deadline fail (never sent, so safe to
    /// resend), and a connect waiting for its back-off starts. While no connection is ready the queue deadline
    /// does not apply: a request waits until its outage budget is spent, then fails with `.providerUnreachable`.
    /// A fire well before the armed instant is stale (an instant since superseded): ignored. A fire just before it
    /// is taken for the armed timer come early (Dispatch's
    /// timer clock and ours may disagree by a tick): it is armed again for the same instant, so that a fire always
    /// follows it.
    mutating func timerFired() -> Action {
        var a = Action()
        let now = clock.now
        guard let at = timerAt else { return a }
        guard at <= now else {
            if at.nanoseconds - now.nanoseconds <= Self.earlyFireTolerance { a.scheduleTimer = at }
            return a
        }
        timerAt = nil
        if !waiting.isEmpty {
            // With a connection ready the queue is only waiting for streams: its deadline applies. Without one,
            // a request waits on until its budget is spent (the timer comes back then).
            let outage = !hasReadyConnection
            let expired = waiting.removeAll(where: { p in
                guard p.deadline <= now else { return false }
                guard outage else { return true }
                guard now < p.giveUpAt else { return true }
                p.heldThroughOutage = true
                p.deadline = p.giveUpAt
                return false
            })
            if outage {
                for p in expired { giveUp(p, &a) }
            } else {
                for p in expired {
                    stats.requestsFailed += 1
                    complete(
                        p,
                        .failure(
                            HTTP2Error(
                                .timeout, resendIsSafe: true,
                                "no connection to \(configuration.host):\(configuration.port) could take the request "
                                    + "within "
                                    + "\(configuration.requestTimeoutSeconds) s (never sent)")), &a)
                }
            }
        }
        ensureConnections(&a)
        if let next = waiting.earliestDeadline {
            // Expiries closer together than the granularity share one fire.
            armTimer(max(next, now.advanced(bySeconds: timerGranularity)), &a)
        }
        return a
    }

    /// Graceful shutdown: queued requests fail with `.shutdown` (safe to resend), every connection is retired;
    /// `completion` runs once all have closed.
    mutating func shutdownRequested(completion: @escaping @Sendable () -> Void) -> Action {
        var a = Action()
        shuttingDown = true
        for p in waiting.drain() { complete(p, .failure(Self.shutdownError()), &a) }
        for i in connections.indices {
            for p in connections[i].inbox { complete(p, .failure(Self.shutdownError()), &a) }
            connections[i].reserved -= connections[i].inbox.count
            connections[i].inbox.removeAll()
            connections[i].state = .draining
            a.retire.append(connections[i].id)
        }
        if connections.isEmpty { a.shutdownCompleted.append(completion) } else { shutdownWaiters.append(completion) }
        return a
    }

    /// A connection sent a PING (statistics).
    mutating func pingSent() { stats.pingsSent += 1 }

    /// The user of the pool asks to retire a connection (an answer on it says the peer wants a new one, such as
    /// APNs `TooManyProviderTokenUpdates`): it takes no new requests, its unstarted ones go to other connections or
    /// wait, it sends GOAWAY and closes once its open streams are answered. Its replacement opens after a back-off
    /// with jitter (`retireBackoffSeconds()`), so a peer refusing new connections' first requests is not hammered.
    /// Asking again for a connection already retiring (every stream it had open may answer the same) does nothing.
    mutating func retireRequested(_ id: ConnectionID) -> Action {
        var a = Action()
        guard !shuttingDown, let i = index(of: id), connections[i].state != .draining else { return a }
        connections[i].state = .draining
        stats.connectionsRetired += 1
        a.retire.append(id)
        let returned = connections[i].inbox
        connections[i].inbox.removeAll()
        connections[i].reserved -= returned.count
        requeue(returned)
        replaceAt = max(replaceAt, clock.now.advanced(bySeconds: retireBackoffSeconds()))
        assignWaiting(excluding: i, &a)
        ensureConnections(&a)
        return a
    }

    // MARK: decisions

    /// How long to wait before the next connect after `failures` failed ones in a row: base × 2^(failures − 1),
    /// capped, times a jitter between 0.5 and 1 so that many pools that lost the same endpoint do not reconnect in
    /// step.
    mutating func backoffSeconds(afterFailures failures: Int) -> Double {
        let unit = Double(random.next() >> 11) * 0x1p-53
        // Twenty-nine doublings at most, far past any cap.
        return configuration.reconnectBackoff.delay(afterFailures: min(failures, 30), unit: unit)
    }

    /// How long a retired connection's replacement waits: uniform in [retireBackoffMinSeconds,
    /// retireBackoffMaxSeconds] (1–5 s by default), so that the workers of a fleet told the same do not reconnect in
    /// step.
    mutating func retireBackoffSeconds() -> Double {
        let low = max(0, configuration.retireBackoffMinSeconds)
        let high = max(low, configuration.retireBackoffMaxSeconds)
        let unit = Double(random.next() >> 11) * 0x1p-53
        return low + (high - low) * unit
    }

    /// How far apart queue expiries may be grouped into one timer fire.
    /// How early a timer may come and still be taken for the armed one (a coarse clock tick is 1–10 ms).
    static var earlyFireTolerance: UInt64 { 50_000_000 }

    private var timerGranularity: Double { min(max(configuration.requestTimeoutSeconds / 4, 0.02), 1.0) }

    private func index(of id: ConnectionID) -> Int? {
        // Few connections per pool: a scan is cheaper than hashing.
        for i in connections.indices where connections[i].id == id { return i }
        return nil
    }

    /// The ready connection with a free stream and the fewest requests assigned.
    private func bestConnection(excluding: Int? = nil) -> Int? {
        var best: Int?
        for i in connections.indices where i != excluding {
            let c = connections[i]
            guard c.state == .ready && c.reserved < c.limit else { continue }
            if best == nil || c.reserved < connections[best!].reserved { best = i }
        }
        return best
    }

    private mutating func assign(_ p: Request, to i: Int, _ a: inout Action) {
        if p.heldThroughOutage { refreshDeadline(p) }
        p.custody = .connection(connections[i].id)
        connections[i].reserved += 1
        connections[i].inbox.append(p)
        if !connections[i].drainScheduled {
            connections[i].drainScheduled = true
            a.drain.append(connections[i].id)
        }
    }

    /// Hands waiting requests to ready connections with free streams (not to `excluding`, which takes its share
    /// itself through `take`).
    private mutating func assignWaiting(excluding: Int?, _ a: inout Action) {
        while !waiting.isEmpty {
            guard let i = bestConnection(excluding: excluding) else { return }
            let room = connections[i].limit - connections[i].reserved
            for _ in 0..<room {
                guard let p = waiting.popFirst() else { break }
                assign(p, to: i, &a)
            }
        }
    }

    /// The connection's inbox and as many waiting requests as its free streams take.
    private mutating func take(_ i: Int) -> [Request] {
        connections[i].drainScheduled = false
        var work: [Request] = []
        if !connections[i].inbox.isEmpty {
            work = connections[i].inbox
            // A buffer of the same size for the next batch at once, instead of regrowing it from empty.
            connections[i].inbox.removeAll(keepingCapacity: true)
        }
        if connections[i].state == .ready {
            let id = connections[i].id
            while connections[i].reserved < connections[i].limit, let p = waiting.popFirst() {
                if p.heldThroughOutage { refreshDeadline(p) }
                p.custody = .connection(id)
                work.append(p)
                connections[i].reserved += 1
            }
        }
        return work
    }

    /// Opens connections up to the configured count while someone needs them, once any back-off has passed.
    private mutating func ensureConnections(_ a: inout Action) {
        guard !shuttingDown, hasDemand else { return }
        // Counted without a filtered copy: this runs on every submit that has to wait for a stream.
        var live = 0
        for c in connections where c.state != .draining { live += 1 }
        guard live < configuration.connections else { return }
        // A retired connection's replacement waits its back-off (`retireRequested`).
        if clock.now < replaceAt {
            armTimer(replaceAt, &a)
            return
        }
        // After failed connects, reconnect only while someone waits (lazy), and not before the back-off passed.
        if failures > 0 {
            if waiting.isEmpty { return }
            if clock.now < nextConnectAt {
                armTimer(nextConnectAt, &a)
                return
            }
        }
        for _ in live..<configuration.connections {
            let id = ConnectionID(rawValue: nextConnectionID)
            nextConnectionID += 1
            connections.append(Connection(id: id))
            stats.connectionsOpened += 1
            a.open.append(id)
        }
    }

    private mutating func armTimer(_ at: HTTP2PoolInstant, _ a: inout Action) {
        if let armed = timerAt, armed <= at { return }
        timerAt = at
        a.scheduleTimer = at
    }

    /// Sorts a batch of finished requests of connection `i`: completions, or resends when the failure is safe to
    /// resend and resends are left. When the connection is lost or going away (`connectionLost`), a request that
    /// never left is resent past `maxResends` while its outage budget lasts: it waits for another connection, not
    /// for this one again, so this cannot spin. Requests the connection did not hold go to `ignored`.
    private mutating func process(_ batch: [Request], from i: Int, connectionLost: Bool, _ a: inout Action) {
        let id = connections[i].id
        let resendAllowed = !shuttingDown && (configuration.maxResends > 0 || connectionLost)
        let now = connectionLost ? clock.now : .zero
        var unanswered = 0
        var failed = 0
        var held = 0
        var resend = 0
        var foreign = 0
        // One pass in the common case: nothing to resend, nothing foreign; the batch itself becomes the
        // completion list (no copy, no new buffer).
        for f in batch {
            guard f.custody == .connection(id) else {
                foreign += 1
                a.ignored.append(f)
                continue
            }
            switch f.outcome {
            case .succeeded:
                f.custody = .completed
            case .failedResendable where f.failed(.held):
                // Its owner holds it (a paused target) and sends it again itself.
                held += 1
                f.custody = .completed
            case .failedResendable
            where resendAllowed && (f.resends < configuration.maxResends || (connectionLost && now < f.giveUpAt)):
                resend += 1
            case .failedResendable:
                failed += 1
                f.custody = .completed
            case .failed
            where connectionLost && resendAllowed && configuration.resendUnanswered && now < f.giveUpAt
                && f.failed(.writtenUnanswered):
                // Written, and the connection died before the answer: resent as one never written is (the
                // requests of such a pool carry a collapse identity, so a second arrival replaces the first).
                resend += 1
                stats.unansweredResends += 1
            case .failed:
                failed += 1
                f.custody = .completed
                if f.failed(.writtenUnanswered) { unanswered += 1 }
            case .pending:
                // A request reported finished without a result: complete it as a failure rather than lose it.
                failed += 1
                f.custody = .completed
                f.result = .failure(HTTP2Error(.protocolError, resendIsSafe: false, "finished without a result"))
            }
        }
        connections[i].reserved -= batch.count - foreign
        stats.requestsFailed += failed
        stats.requestsWrittenUnanswered += unanswered
        stats.requestsHeld += held
        stats.requestsSucceeded += batch.count - foreign - failed - resend - held
        if resend == 0 && foreign == 0 {
            if a.complete.isEmpty { a.complete = batch } else { a.complete.append(contentsOf: batch) }
            return
        }
        var resends: [Request] = []
        for f in batch {
            if f.custody == .connection(id) {
                f.resends += 1
                f.result = nil
                stats.resends += 1
                resends.append(f)
            } else if foreign == 0 || !a.ignored.contains(where: { $0 === f }) {
                a.complete.append(f)
            }
        }
        requeue(resends)
    }

    /// The requests of `requests` that connection `id` holds; the others go to `ignored`.
    private func accepted(_ requests: [Request], from id: ConnectionID, _ a: inout Action) -> [Request] {
        guard requests.contains(where: { $0.custody != .connection(id) }) else { return requests }
        var ok: [Request] = []
        for p in requests {
            if p.custody == .connection(id) { ok.append(p) } else { a.ignored.append(p) }
        }
        return ok
    }

    /// Puts requests back at the front of the queue, in their order.
    private mutating func requeue(_ requests: [Request]) {
        for p in requests.reversed() {
            p.custody = .queued
            waiting.pushFront(p)
        }
    }

    /// A connection is ready to take requests (one that received GOAWAY or is connecting is not).
    private var hasReadyConnection: Bool { connections.contains { $0.state == .ready } }

    /// A request that waited out a provider outage gets its whole request timeout from when a connection takes it.
    private func refreshDeadline(_ p: Request) {
        p.heldThroughOutage = false
        p.deadline = clock.now.advanced(bySeconds: max(configuration.requestTimeoutSeconds, 0.001))
    }

    /// A request never sent whose outage budget is spent: it fails, safe to resend, naming why no connection was
    /// made. The outcome table ends the delivery there (retrying would wait another budget).
    private mutating func giveUp(_ p: Request, _ a: inout Action) {
        stats.requestsFailed += 1
        stats.requestsUnreachable += 1
        let budget = configuration.providerOutageSeconds
        let seconds = budget < 1e9 && budget == budget.rounded() ? String(Int(budget)) : String(budget)
        let why = lastConnectError.map { "\($0.kind): \($0.message)" } ?? "no connection became ready"
        complete(
            p,
            .failure(
                HTTP2Error(
                    .providerUnreachable, resendIsSafe: true,
                    "\(configuration.host):\(configuration.port) unreachable for \(seconds) s: \(why) (never sent)")),
            &a)
    }

    private func complete(_ p: Request, _ result: Result<HTTP2Response, HTTP2Error>, _ a: inout Action) {
        p.custody = .completed
        a.complete.append(p.finished(result))
    }

    private static func shutdownError(
        _ message: String = "the connection pool shut down before the request was sent"
    ) -> HTTP2Error {
        HTTP2Error(.shutdown, resendIsSafe: true, message)
    }
}
