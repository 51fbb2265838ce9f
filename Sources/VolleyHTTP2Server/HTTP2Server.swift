// HTTP/2 + TLS server on nghttp2's server side. Used by the mock APNs/FCM server, `volley-bench serve` and tests.
// Runs on the connection machinery of VolleyHTTP2: its socket + TLS driver and its nghttp2 session wrapper.
import Dispatch
import Foundation
import Logging
import Synchronization
import VolleyHTTP2

public struct HTTP2ServerConfiguration: Sendable {
    public var host: String
    /// 0 = ephemeral; `HTTP2Server.start()` returns the bound port.
    public var port: Int
    public var certificateChainFile: String
    public var privateKeyFile: String
    /// When set, clients must present a certificate signed by this CA.
    public var clientCAFile: String?
    /// ALPN protocols the server accepts, in preference order. Default ["h2"]; ["http/1.1"] makes a server without h2.
    public var alpnProtocols: [String]
    /// SETTINGS_MAX_CONCURRENT_STREAMS sent at connection start.
    public var maxConcurrentStreams: UInt32
    /// Shared serial target queues for connection queues (default: active cores).
    public var queues: Int
    /// Request bodies above this are answered with RST_STREAM (protects the server, not a protocol limit).
    public var maxRequestBodyBytes: Int

    public init(
        certificateChainFile: String, privateKeyFile: String, host: String = "127.0.0.1", port: Int = 0,
        clientCAFile: String? = nil, alpnProtocols: [String] = ["h2"], maxConcurrentStreams: UInt32 = 1000,
        queues: Int = ProcessInfo.processInfo.activeProcessorCount, maxRequestBodyBytes: Int = 1 << 20
    ) {
        self.host = host
        self.port = port
        self.certificateChainFile = certificateChainFile
        self.privateKeyFile = privateKeyFile
        self.clientCAFile = clientCAFile
        self.alpnProtocols = alpnProtocols
        self.maxConcurrentStreams = maxConcurrentStreams
        self.queues = max(1, queues)
        self.maxRequestBodyBytes = maxRequestBodyBytes
    }
}

/// A complete request as the server handler sees it.
public struct HTTP2ServerRequest: Sendable {
    /// Every field as received, pseudo-headers included, in arrival order, in one buffer (one allocation per request
    /// instead of two Strings and an array slot per field). Names are lower case (RFC 9113 §8.2.1; nghttp2 rejects
    /// others). Read them as bytes with `withUnsafeFields`, or as Strings with `value(for:)` / `headers`.
    public var fields: HTTP2HeaderBlock
    public var body: [UInt8]
    /// The HTTP/2 stream id (odd, increasing per connection).
    public var streamID: Int32

    public var method: String {
        get { fields.value(for: ":method") ?? "" }
        set { fields.set(":method", newValue) }
    }
    public var path: String {
        get { fields.value(for: ":path") ?? "" }
        set { fields.set(":path", newValue) }
    }
    public var authority: String? {
        get { fields.value(for: ":authority") }
        set { fields.set(":authority", newValue) }
    }
    public var scheme: String? {
        get { fields.value(for: ":scheme") }
        set { fields.set(":scheme", newValue) }
    }
    /// Regular headers with lower-case names (pseudo-headers excluded). Decoded on each access.
    public var headers: [HTTP2Header] {
        get { fields.headers.filter { !$0.name.hasPrefix(":") } }
        set {
            var f = HTTP2HeaderBlock()
            fields.withUnsafeFields { old in
                for x in old where x.name.first == UInt8(ascii: ":") {
                    f.append(nameBytes: x.name, valueBytes: x.value)
                }
            }
            for h in newValue { f.append(name: h.name, value: h.value) }
            fields = f
        }
    }

    public init(
        method: String, path: String, authority: String? = nil, scheme: String? = nil,
        headers: [HTTP2Header] = [], body: [UInt8] = [], streamID: Int32 = 0
    ) {
        var f = HTTP2HeaderBlock()
        f.append(":method", method)
        if let scheme { f.append(":scheme", scheme) }
        if let authority { f.append(":authority", authority) }
        f.append(":path", path)
        for h in headers { f.append(name: h.name, value: h.value) }
        self.init(fields: f, body: body, streamID: streamID)
    }

    public init(fields: HTTP2HeaderBlock, body: [UInt8] = [], streamID: Int32 = 0) {
        self.fields = fields
        self.body = body
        self.streamID = streamID
    }

    /// A regular header's value (names compared lower-case; pseudo-headers are not headers).
    public func header(_ name: String) -> String? {
        if name.utf8.first == UInt8(ascii: ":") { return nil }
        return fields.value(for: name)
    }
}

public protocol HTTP2ServerHandler: AnyObject, Sendable {
    /// On the connection's queue, after the TLS handshake.
    func connectionOpened(_ connection: HTTP2ServerConnection)
    /// Called on the connection's queue. `respond` must be called exactly once, from any queue/thread,
    /// now or later. Calling it on the connection's queue does not re-dispatch (fast path).
    func handle(_ request: HTTP2ServerRequest, on connection: HTTP2ServerConnection, respond: HTTP2Responder)
    /// On the connection's queue, once, when the connection is gone.
    func connectionClosed(_ connection: HTTP2ServerConnection)
}

/// Answers one request. Calling it more than once, or after the stream was reset, does nothing.
public struct HTTP2Responder: Sendable {
    let connection: HTTP2ServerConnection
    let streamID: Int32
    public func callAsFunction(_ response: HTTP2Response) {
        if connection.isCurrentQueue {
            connection.respond(streamID, response)
        } else {
            connection.respondFromElsewhere(streamID, response)
        }
    }

    /// Answers `delaySeconds` after the request arrived (the kernel's receive time of the last segment read when
    /// it completed, else the read's time), like a server that takes that long: the time this process took to wake
    /// up and parse a burst of requests is part of the delay, not added to it. The connection keeps its delayed
    /// answers in one deadline-ordered queue served by one timer on the connection's queue: every answer due when
    /// the timer fires, or when a read pass ends, goes out in one batch with a single flush — no timer, thread hop
    /// or SSL_write per response. Cheapest when called on the connection's queue (inside `handle`).
    public func callAsFunction(_ response: HTTP2Response, after delaySeconds: Double) {
        guard delaySeconds > 0 else { return callAsFunction(response) } // also NaN
        let delay = UInt64(min(delaySeconds, 86_400) * 1e9) // a day at most (and not inf)
        if connection.isCurrentQueue {
            connection.respond(streamID, response, afterArrivalNanos: delay)
        } else {
            let (c, sid) = (connection, streamID)
            c.queue.async { c.respond(sid, response, afterArrivalNanos: delay) }
        }
    }
}

/// Delayed answers of one connection, ordered by deadline (ties: arrival order). Deadlines that arrive in order
/// (a fixed latency: always) go to a FIFO, O(1) both ways; out-of-order ones (jitter) to a binary min-heap.
/// `popDue` takes the earlier head of the two. Plain values only: the responses wait in their streams.
struct DelayedResponseQueue {
    struct Entry {
        var deadline: UInt64
        var sequence: UInt64
        var streamID: Int32
        @inline(__always) func before(_ other: Entry) -> Bool {
            if deadline != other.deadline { return deadline < other.deadline }
            return sequence < other.sequence
        }
    }
    private var fifo: [Entry] = []
    private var fifoHead = 0
    private var heap: [Entry] = []
    private var nextSequence: UInt64 = 0

    var isEmpty: Bool { fifoHead == fifo.count && heap.isEmpty }
    var count: Int { fifo.count - fifoHead + heap.count }
    /// The earliest deadline, if any.
    var first: UInt64? {
        let f: UInt64? = fifoHead < fifo.count ? fifo[fifoHead].deadline : nil
        guard let h = heap.first?.deadline else { return f }
        guard let f else { return h }
        return min(h, f)
    }

    mutating func push(deadline: UInt64, streamID: Int32) {
        let e = Entry(deadline: deadline, sequence: nextSequence, streamID: streamID)
        nextSequence &+= 1
        if fifoHead == fifo.count {
            fifo.removeAll(keepingCapacity: true)
            fifoHead = 0
            fifo.append(e)
            return
        }
        if fifo[fifo.count - 1].deadline <= deadline {
            fifo.append(e)
            return
        }
        heap.append(e)
        var i = heap.count - 1
        while i > 0 {
            let parent = (i - 1) / 2
            guard heap[i].before(heap[parent]) else { break }
            heap.swapAt(i, parent)
            i = parent
        }
    }

    /// Removes and returns the earliest entry if its deadline is at or before `now`.
    mutating func popDue(now: UInt64) -> Int32? {
        var fromHeap = false
        if let h = heap.first {
            fromHeap = fifoHead == fifo.count || h.before(fifo[fifoHead])
        }
        if fromHeap {
            let h = heap[0]
            guard h.deadline <= now else { return nil }
            popHeap()
            return h.streamID
        }
        guard fifoHead < fifo.count else { return nil }
        let f = fifo[fifoHead]
        guard f.deadline <= now else { return nil }
        fifoHead += 1
        if fifoHead == fifo.count {
            fifo.removeAll(keepingCapacity: true)
            fifoHead = 0
        } else if fifoHead >= 4096, fifoHead * 2 >= fifo.count {
            fifo.removeFirst(fifoHead) // compact now and then: amortised O(1)
            fifoHead = 0
        }
        return f.streamID
    }

    private mutating func popHeap() {
        let last = heap.removeLast()
        guard !heap.isEmpty else { return }
        heap[0] = last
        var i = 0
        let n = heap.count
        while true {
            let l = 2 * i + 1
            let r = l + 1
            var m = i
            if l < n, heap[l].before(heap[m]) { m = l }
            if r < n, heap[r].before(heap[m]) { m = r }
            if m == i { break }
            heap.swapAt(i, m)
            i = m
        }
    }

    mutating func removeAll() {
        fifo.removeAll()
        fifoHead = 0
        heap.removeAll()
    }
}

public struct HTTP2ServerConnectionStatistics: Sendable {
    /// Requests handed to the handler.
    public var requests: Int = 0
    public var currentStreams: Int = 0
    public var peakConcurrentStreams: Int = 0
    /// Streams the server reset with REFUSED_STREAM (client exceeded SETTINGS_MAX_CONCURRENT_STREAMS).
    public var refusedStreams: Int = 0
    /// Highest stream id seen.
    public var lastStreamID: Int32 = 0
    public var pingsReceived: Int = 0
    public var goAwaysSent: Int = 0
    /// SETTINGS frames the client acknowledged, and the highest stream id it had opened when the last ACK arrived:
    /// streams above that id were opened under the settings it acknowledged.
    public var settingsAcksReceived: Int = 0
    public var lastStreamIDAtSettingsAck: Int32 = 0
}

private let connectionQueueKey = DispatchSpecificKey<UInt64>()

/// One accepted connection. All state lives on `queue`; the public methods may be called from anywhere.
public final class HTTP2ServerConnection: HTTP2Channel, HTTP2SessionDelegate, @unchecked Sendable {
    public let id: UInt64
    private let handler: any HTTP2ServerHandler
    private let configuration: HTTP2ServerConfiguration
    private let logger: Logger
    private weak var server: HTTP2Server?
    private let stats = Mutex(HTTP2ServerConnectionStatistics())
    private let subject = Mutex<String?>(nil)
    private var streams: [Int32: ServerStream] = [:]
    private var opened = false
    /// After we sent GOAWAY(last): streams above it are not handed to the handler (RFC 9113 §6.8 promise).
    private var goAwayLastStreamID: Int32?
    /// Responses made off the connection queue (e.g. after injected latency), batched so that one queue hop and
    /// one flush serve every response that became ready meanwhile, instead of a hop and an SSL_write each.
    private let lateResponses = Mutex<(items: [(Int32, HTTP2Response)], scheduled: Bool)>(([], false))

    /// Answers waiting for their deadline (`HTTP2Responder.callAsFunction(_:after:)`); the responses themselves
    /// wait in their stream (`ServerStream.delayed`), so a reset stream drops its answer with it.
    private var delayed = DelayedResponseQueue()
    /// One timer per connection, on `queue`, created on first use, resumed once and cancelled in `channelClosed`
    /// (never suspended: libdispatch traps on releasing a suspended source). `timerDeadline` is what it is set to fire
    /// at (.max: nothing).
    private var delayTimer: DispatchSourceTimer?
    private var timerDeadline = UInt64.max
    /// Timer fires at most this often: answers due in between wait for the next fire or the next read pass, so
    /// one wake-up carries a batch (a per-connection coarse timer wheel). It bounds the added latency.
    static let delayGranularityNanos: UInt64 = 100_000
    private var lastTimerFire: UInt64 = 0

    /// The header block being received, encoded as in `HTTP2HeaderBlock` (owned here, freed in deinit).
    private var scratch = UnsafeMutableRawPointer.allocate(byteCount: 2048, alignment: 8)
    private var scratchCapacity = 2048
    private var scratchCount = 0
    private var scratchFields = 0
    private var scratchStreamID: Int32 = 0
    /// What the arrival-time read BIO records (nil: the kernel or OpenSSL refused it; the read's time is used).
    private(set) var arrivals: ArrivalTimes?

    /// Connection-scoped storage for the handler; touch it only on the connection queue (inside `handle`).
    public var userState: AnyObject?

    /// The verified client certificate subject (OpenSSL one-line form), if the client presented one.
    public var clientCertificateSubject: String? { subject.withLock { $0 } }
    public var statistics: HTTP2ServerConnectionStatistics { stats.withLock { $0 } }

    final class ServerStream {
        var fields = HTTP2HeaderBlock()
        var body: [UInt8] = []
        var response: OutgoingBody?
        /// An answer waiting in `delayed` for its deadline.
        var delayed: HTTP2Response?
        /// When the read that completed the request returned (monotonic nanoseconds).
        var arrivalNanos: UInt64 = 0
        var responded = false
        var tooLarge = false
    }

    init(
        id: UInt64, queue: DispatchQueue, handler: any HTTP2ServerHandler, configuration: HTTP2ServerConfiguration,
        logger: Logger, server: HTTP2Server
    ) {
        self.id = id
        self.handler = handler
        self.configuration = configuration
        self.logger = logger
        self.server = server
        queue.setSpecific(key: connectionQueueKey, value: id)
        super.init(queue: queue)
    }

    deinit { scratch.deallocate() }

    var isCurrentQueue: Bool { DispatchQueue.getSpecific(key: connectionQueueKey) == id }

    func start(fd: Int32, context: TLSContext) {
        dispatchPrecondition(condition: .onQueue(queue))
        attach(fd: fd)
        do {
            let t = try TLSConnection(context: context, fd: fd, serverSide: true)
            // Delayed answers count from when a request reached this host, not from when this queue got to read it.
            arrivals = t.readWithArrivalTimes(fd: fd)
            tls = t
        } catch {
            close(error)
            return
        }
        startHandshake()
    }

    public override func handshakeCompleted() throws(HTTP2Error) {
        guard tls?.selectedALPN == "h2" else {
            // A server configured without h2 (tests): keep the TLS session, speak nothing, close.
            throw HTTP2Error(.alpnNotH2, resendIsSafe: false, "client and server did not agree on h2")
        }
        if let s = tls?.peerCertificateSubject { subject.withLock { $0 = s } }
        let s = try HTTP2Session(role: .server, delegate: self)
        session = s
        s.submitSettings(
            [.maxConcurrentStreams(configuration.maxConcurrentStreams), .initialWindowSize(1 << 20)],
            connectionWindow: 1 << 26)
        opened = true
        handler.connectionOpened(self)
    }

    public override func channelClosed(_ error: HTTP2Error) {
        streams.removeAll()
        delayed.removeAll()
        delayTimer?.cancel()
        delayTimer = nil
        timerDeadline = .max
        if opened {
            opened = false
            handler.connectionClosed(self)
        }
        server?.connectionClosed(self)
    }

    package func headersBegan(streamID: Int32) {
        scratchCount = 0
        scratchFields = 0
        scratchStreamID = streamID
        if streams[streamID] != nil { return } // trailers: same stream, second header block
        streams[streamID] = ServerStream()
        stats.withLock { s in
            s.currentStreams += 1
            if s.currentStreams > s.peakConcurrentStreams { s.peakConcurrentStreams = s.currentStreams }
            if streamID > s.lastStreamID { s.lastStreamID = streamID }
        }
    }

    package func headerReceived(streamID: Int32, name: UnsafeBufferPointer<UInt8>, value: UnsafeBufferPointer<UInt8>) {
        // Bytes only, into the connection's scratch (header blocks never interleave, RFC 9113 §4.3); the stream
        // gets one exact-size copy when the block ends. Strings are made by the handler for what it reads.
        guard streamID == scratchStreamID else {
            streams[streamID]?.fields.append(nameBytes: name, valueBytes: value)
            return
        }
        let need = scratchCount + HTTP2HeaderBlock.fieldOverhead + name.count + value.count
        if need > scratchCapacity {
            let cap = max(need, scratchCapacity * 2)
            let nb = UnsafeMutableRawPointer.allocate(byteCount: cap, alignment: 8)
            nb.copyMemory(from: scratch, byteCount: scratchCount)
            scratch.deallocate()
            scratch = nb
            scratchCapacity = cap
        }
        HTTP2HeaderBlock.encode(name: name, value: value, at: scratch + scratchCount)
        scratchCount = need
        scratchFields += 1
    }

    package func dataReceived(streamID: Int32, _ data: UnsafeBufferPointer<UInt8>) {
        guard let st = streams[streamID] else { return }
        if st.body.count + data.count > configuration.maxRequestBodyBytes {
            if !st.tooLarge, let session {
                st.tooLarge = true
                session.submitReset(streamID: streamID, errorCode: HTTP2ErrorCode.internalError)
            }
            return
        }
        st.body.append(contentsOf: data)
    }

    package func frameReceived(_ frame: HTTP2FrameSummary) {
        switch frame.kind {
        case .headers, .data:
            // HEADERS reaches here once its whole block (with CONTINUATIONs) was received.
            if frame.kind == .headers, frame.streamID == scratchStreamID {
                streams[frame.streamID]?.fields.append(
                    encoded: UnsafeRawBufferPointer(start: scratch, count: scratchCount),
                    fields: scratchFields)
                scratchCount = 0
                scratchFields = 0
                scratchStreamID = 0
            }
            if frame.endsStream, let st = streams[frame.streamID], !st.tooLarge {
                dispatch(st, streamID: frame.streamID)
            }
        case .ping:
            if !frame.isAck { stats.withLock { $0.pingsReceived += 1 } }
        case .settings:
            if frame.isAck {
                stats.withLock { s in
                    s.settingsAcksReceived += 1
                    s.lastStreamIDAtSettingsAck = s.lastStreamID
                }
            }
        default: break
        }
    }

    package func frameSent(_ frame: HTTP2FrameSummary) {
        if frame.kind == .rstStream && frame.errorCode == HTTP2ErrorCode.refusedStream {
            stats.withLock { $0.refusedStreams += 1 }
        } else if frame.kind == .goAway {
            stats.withLock { $0.goAwaysSent += 1 }
        }
    }

    package func streamClosed(_ streamID: Int32, errorCode: UInt32) {
        if streams.removeValue(forKey: streamID) != nil {
            stats.withLock { $0.currentStreams -= 1 }
        }
    }

    private func dispatch(_ st: ServerStream, streamID: Int32) {
        if let last = goAwayLastStreamID, streamID > last { return }
        stats.withLock { $0.requests += 1 }
        st.arrivalNanos = arrivalOfLastRead
        let request = HTTP2ServerRequest(fields: st.fields, body: st.body, streamID: streamID)
        st.fields = HTTP2HeaderBlock()
        st.body = []
        handler.handle(request, on: self, respond: HTTP2Responder(connection: self, streamID: streamID))
    }

    /// When the bytes of the current read reached this host: the kernel's receive time of the last segment TLS has
    /// consumed (no earlier than any byte of the request being dispatched), else the time the read returned.
    private var arrivalOfLastRead: UInt64 {
        guard let arrived = arrivals?.latestNanos, arrived > 0, arrived <= lastReadNanos else { return lastReadNanos }
        return arrived
    }

    /// On `queue`: submits the response (once) and flushes unless inside the read loop.
    func respondFromElsewhere(_ streamID: Int32, _ response: HTTP2Response) {
        let schedule = lateResponses.withLock { s -> Bool in
            s.items.append((streamID, response))
            if s.scheduled { return false }
            s.scheduled = true
            return true
        }
        if schedule { queue.async { self.respondToLateResponses() } }
    }

    private func respondToLateResponses() {
        let items = lateResponses.withLock { s -> [(Int32, HTTP2Response)] in
            let items = s.items
            s.items.removeAll(keepingCapacity: true)
            s.scheduled = false
            return items
        }
        for (sid, response) in items { respond(sid, response, flushNow: false) }
        flush()
    }

    // MARK: delayed answers

    /// On `queue`: keeps `response` in its stream until `delay` after the request arrived.
    func respond(_ streamID: Int32, _ response: HTTP2Response, afterArrivalNanos delay: UInt64) {
        dispatchPrecondition(condition: .onQueue(queue))
        guard state == .open, let st = streams[streamID], !st.responded, st.delayed == nil else { return }
        let deadline = st.arrivalNanos &+ delay
        st.delayed = response
        delayed.push(deadline: deadline, streamID: streamID)
        armDelayTimer()
    }

    /// Sets the timer to the earliest deadline, no sooner than `delayGranularityNanos` after its last fire.
    /// With a fixed latency new deadlines are later than the armed one, so this is one comparison.
    private func armDelayTimer() {
        guard let first = delayed.first else { return } // a stale fire finds nothing and goes idle
        let target = max(first, lastTimerFire &+ Self.delayGranularityNanos)
        if target >= timerDeadline { return }
        let timer: DispatchSourceTimer
        if let t = delayTimer {
            timer = t
        } else {
            timer = DispatchSource.makeTimerSource(queue: queue)
            // Strong on purpose: the cycle timer → handler → self ends in `channelClosed` (cancel + nil). A weak
            // reference would give the connection a side table and make every retain/release of it slow.
            timer.setEventHandler { [self] in self.delayTimerFired() }
            delayTimer = timer
            timer.schedule(deadline: .distantFuture)
            timer.resume()
        }
        timerDeadline = target
        timer.schedule(
            deadline: DispatchTime(uptimeNanoseconds: target), repeating: .never,
            leeway: .nanoseconds(Int(Self.delayGranularityNanos / 4)))
    }

    private func delayTimerFired() {
        let now = monotonicNanos()
        lastTimerFire = now
        timerDeadline = .max
        if sendDueResponses(now: now) { flush() }
        armDelayTimer()
    }

    /// Submits every delayed answer whose deadline has passed; true if any was submitted. No flush.
    private func sendDueResponses(now: UInt64) -> Bool {
        var any = false
        while let sid = delayed.popDue(now: now) {
            guard let st = streams[sid], let response = st.delayed else { continue }
            st.delayed = nil
            respond(sid, response, flushNow: false)
            any = true
        }
        return any
    }

    /// Answers submitted during the current read pass and not yet handed to `flush`.
    private var unflushedResponses = 0

    /// A large read (many requests) is answered in parts: the client starts on the first answers while this
    /// connection parses the rest, instead of waiting for the whole read to be answered. Delayed answers that
    /// fall due meanwhile go out too (a long read pass would otherwise hold them past their deadline).
    public override func wantsEarlyFlush() -> Bool {
        if unflushedResponses >= Self.earlyFlushResponses { return true }
        guard let first = delayed.first else { return false }
        return first <= monotonicNanos()
    }
    static let earlyFlushResponses = 16

    /// The read pass is about to flush (mid-read or at its end): answers already due ride along.
    public override func readLoopFinished() {
        unflushedResponses = 0
        guard let first = delayed.first else { return }
        let now = monotonicNanos()
        if first <= now { _ = sendDueResponses(now: now) }
    }

    func respond(_ streamID: Int32, _ response: HTTP2Response, flushNow: Bool = true) {
        dispatchPrecondition(condition: .onQueue(queue))
        guard state == .open, let session, let st = streams[streamID], !st.responded else { return }
        st.responded = true
        unflushedResponses += 1
        var body: OutgoingBody?
        if !response.body.isEmpty {
            // Kept by the stream until it closes: nghttp2 reads the body as the flow-control window allows.
            body = OutgoingBody(response.body)
            st.response = body
        }
        if let failure = session.submitResponse(streamID: streamID, response, body: body) {
            logger.debug("submit_response failed", metadata: ["stream": "\(streamID)", "error": "\(failure)"])
        }
        if flushNow { flush() }
    }

    // MARK: public controls (any thread)

    private func onQueue(_ body: @escaping @Sendable () -> Void) {
        if isCurrentQueue { body() } else { queue.async(execute: body) }
    }

    /// Sends GOAWAY. `lastStreamID` nil = the last stream the server processed. The connection closes
    /// once the streams at or below it are answered.
    public func sendGoAway(lastStreamID: Int32? = nil, errorCode: UInt32 = 0, debugData: [UInt8] = []) {
        onQueue { [self] in
            guard state == .open, let session else { return }
            let last = lastStreamID ?? session.lastProcessedStreamID
            goAwayLastStreamID = min(goAwayLastStreamID ?? Int32.max, last)
            session.submitGoAway(lastStreamID: last, errorCode: errorCode, debugData: debugData)
            flush()
        }
    }

    /// Abortive close now: SO_LINGER 0, the client sees a TCP reset.
    public func resetTCP() {
        onQueue { [self] in
            close(HTTP2Error(.connectionReset, resendIsSafe: false, "reset by server"), abortive: true)
        }
    }

    /// Sends a new SETTINGS frame with SETTINGS_MAX_CONCURRENT_STREAMS = n.
    public func setMaxConcurrentStreams(_ n: UInt32) {
        onQueue { [self] in
            guard state == .open, let session else { return }
            session.submitSettings([.maxConcurrentStreams(n)])
            flush()
        }
    }

    /// Graceful close: GOAWAY now, close when drained.
    public func close() { sendGoAway() }
}

/// A TLS + HTTP/2 listener. Connections are spread over `configuration.queues` shared serial queues.
public final class HTTP2Server: @unchecked Sendable {
    public let configuration: HTTP2ServerConfiguration
    private let handler: any HTTP2ServerHandler
    private let logger: Logger
    private let listenQueue = DispatchQueue(label: "volley.http2.server.listen")
    private let targets: [DispatchQueue]
    private let connections = Mutex<[UInt64: HTTP2ServerConnection]>([:])
    private let nextID = Atomic<UInt64>(1)
    private var listenFD: Int32 = -1
    private var listenSource: DispatchSourceRead?
    private var context: TLSContext?

    public init(configuration: HTTP2ServerConfiguration, handler: any HTTP2ServerHandler, logger: Logger) {
        self.configuration = configuration
        self.handler = handler
        self.logger = logger
        targets = (0..<configuration.queues).map { DispatchQueue(label: "volley.http2.server.\($0)") }
    }

    /// Binds, listens and starts accepting. Returns the bound port.
    public func start() throws(HTTP2Error) -> Int {
        let ctx = try TLSContext.server(
            certificateChainFile: configuration.certificateChainFile,
            privateKeyFile: configuration.privateKeyFile,
            clientCAFile: configuration.clientCAFile,
            alpnProtocols: configuration.alpnProtocols)
        context = ctx
        let addr = try SocketAddress.resolve(configuration.host, configuration.port)
        let fd = socket(addr.family, Int32(SOCK_STREAM.rawValue), 0)
        guard fd >= 0 else { throw HTTP2Error.posix(errno, "socket", in: .listening) }
        var one: Int32 = 1
        setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, socklen_t(MemoryLayout<Int32>.size))
        var storage = addr.storage
        let bound = withUnsafePointer(to: &storage) { p in
            p.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, addr.length) }
        }
        guard bound == 0, listen(fd, 1024) == 0 else {
            let code = errno
            Glibc.close(fd)
            throw HTTP2Error.posix(code, "cannot listen on \(configuration.host):\(configuration.port)", in: .listening)
        }
        SocketAddress.setNonBlocking(fd)
        var local = sockaddr_storage()
        var len = socklen_t(MemoryLayout<sockaddr_storage>.size)
        _ = withUnsafeMutablePointer(to: &local) { p in
            p.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(fd, $0, &len) }
        }
        let family = Int32(local.ss_family)
        let port: Int = withUnsafePointer(to: &local) { p in
            if family == AF_INET6 {
                return p.withMemoryRebound(to: sockaddr_in6.self, capacity: 1) {
                    Int(UInt16(bigEndian: $0.pointee.sin6_port))
                }
            }
            return p.withMemoryRebound(to: sockaddr_in.self, capacity: 1) {
                Int(UInt16(bigEndian: $0.pointee.sin_port))
            }
        }
        listenFD = fd
        let src = DispatchSource.makeReadSource(fileDescriptor: fd, queue: listenQueue)
        src.setEventHandler { [weak self] in self?.acceptAll() }
        src.setCancelHandler { Glibc.close(fd) }
        listenSource = src
        src.resume()
        logger.debug("HTTP/2 server listening", metadata: ["port": "\(port)"])
        return port
    }

    private func acceptAll() {
        guard let ctx = context else { return }
        while true {
            let cfd = accept(listenFD, nil, nil)
            if cfd < 0 { return }
            SocketAddress.setNonBlocking(cfd)
            let id = nextID.add(1, ordering: .relaxed).oldValue
            let q = DispatchQueue(label: "volley.http2.server.conn", target: targets[Int(id % UInt64(targets.count))])
            let conn = HTTP2ServerConnection(
                id: id, queue: q, handler: handler, configuration: configuration,
                logger: logger, server: self)
            connections.withLock { $0[id] = conn }
            q.async { conn.start(fd: cfd, context: ctx) }
        }
    }

    func connectionClosed(_ connection: HTTP2ServerConnection) {
        _ = connections.withLock { $0.removeValue(forKey: connection.id) }
    }

    /// Live connections (for tests and the mock's controls).
    public var openConnections: [HTTP2ServerConnection] { connections.withLock { Array($0.values) } }

    /// Stops accepting and closes every connection abruptly.
    public func stop() {
        listenQueue.sync {
            if let src = listenSource {
                src.cancel()
                listenSource = nil
            }
        }
        for c in openConnections {
            c.queue.async { c.close(HTTP2Error(.shutdown, resendIsSafe: false, "server stopped")) }
        }
    }
}
