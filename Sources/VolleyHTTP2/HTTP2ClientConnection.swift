// One client connection: TCP + TLS + one nghttp2 client session, owned by `queue`.
// The pool hands it requests (it collects them from the pool on `drainInbox`); it reports finished requests back in
// batches (one pool-lock acquisition per read loop) and gets new work in return.
import Dispatch
import Foundation
import Logging

/// One request on its way through a pool, and what its answer is for: subclass it and override `complete`, so one
/// object per request carries both (no closure context beside it). `submit(_ request:completion:)` wraps a closure
/// in `HTTP2ClosureRequest` for callers that prefer one.
///
/// Submit each object once. The pool calls `complete` exactly once, on an internal queue; it must not block.
/// Mutable fields are touched only under the pool lock (`deadline`, `resends`, `custody`) or on the owning
/// connection's queue (`result`).
open class HTTP2PendingRequest: @unchecked Sendable {
    public let request: HTTP2Request
    /// Set by the pool when it accepts the request: past it the request fails with `.timeout`.
    var deadline = HTTP2PoolInstant.zero
    /// Set by the pool when it accepts the request: while it was never written it may wait for a connection until
    /// then (`HTTP2ClientConfiguration.providerOutageSeconds`).
    var giveUpAt = HTTP2PoolInstant.zero
    /// It waited in the queue while no connection was ready: it gets a whole `requestTimeoutSeconds` from when a
    /// connection takes it.
    var heldThroughOutage = false
    var resends = 0
    /// Who holds the request inside the pool (its state machine's bookkeeping).
    var custody = HTTP2PoolCustody.outside
    /// The answer once the request finished; the pool runs `complete` with it (nil again if it is resent).
    /// Kept here rather than beside the request in a tuple: a batch of finished requests is then an array of
    /// references, released one by one, instead of tuples that the runtime destroys field by field.
    var result: Result<HTTP2Response, HTTP2Error>?

    public init(_ request: HTTP2Request) { self.request = request }

    /// The request's answer or the transport's failure (after the pool's own resends).
    open func complete(_ result: Result<HTTP2Response, HTTP2Error>) {}

    /// Asked by the connection just before it writes the request: true holds it (it completes with `.held`, never
    /// written, and the pool does not resend it). A provider's fan-out send answers from its target's pause, so a
    /// 429's Retry-After also holds what was already handed to the pool. Called on the connection's queue: one
    /// cheap read.
    open var holdsBeforeWriting: Bool { false }

    /// It completed with a failure of `kind` (`.held`: its owner held it; `.writtenUnanswered`: its connection
    /// died before the answer).
    final func failed(_ kind: HTTP2Error.Kind) -> Bool {
        if case .failure(let e)? = result { return e.kind == kind }
        return false
    }

    /// What `result` holds, for the pool's decisions.
    enum Outcome { case pending, succeeded, failedResendable, failed }

    final var outcome: Outcome {
        switch result {
        case nil: return .pending
        case .success?: return .succeeded
        case .failure(let e)?: return e.resendIsSafe ? .failedResendable : .failed
        }
    }

    /// Records the answer and returns self (for appending to a batch of finished requests).
    @inline(__always) final func finished(_ result: Result<HTTP2Response, HTTP2Error>) -> HTTP2PendingRequest {
        assert(self.result == nil, "a request finished twice before its completion ran")
        self.result = result
        return self
    }

    /// Runs `complete` with the answer, moved out (the request is done with it, and a move saves a copy).
    /// Every request completes exactly once: a second delivery traps in debug builds and does nothing otherwise.
    final func deliver() {
        guard let r = result.take() else {
            assertionFailure("a request completed twice")
            return
        }
        complete(r)
    }
}

/// A request whose answer goes to a closure.
public final class HTTP2ClosureRequest: HTTP2PendingRequest, @unchecked Sendable {
    private let completion: @Sendable (Result<HTTP2Response, HTTP2Error>) -> Void
    public init(_ request: HTTP2Request, completion: @escaping @Sendable (Result<HTTP2Response, HTTP2Error>) -> Void) {
        self.completion = completion
        super.init(request)
    }
    public override func complete(_ result: Result<HTTP2Response, HTTP2Error>) { completion(result) }
}

/// A request whose `result` is set.
typealias FinishedRequest = HTTP2PendingRequest

// `package`, as `ClientStream`, though only this module uses them: Swift 6.3 warns of an "infinite recursion" in a
// subclass less visible than its superclass's (package) initialiser.
package final class HTTP2ClientConnection: HTTP2Channel, HTTP2SessionDelegate, @unchecked Sendable {
    /// How the pool's state machine names this connection.
    let id: HTTP2PoolConnectionID

    // MARK: owned by `queue`
    /// Strong: the pool lives until its connections are closed (call `shutdown`).
    private let pool: HTTP2ConnectionPool
    private let configuration: HTTP2ClientConfiguration
    private let context: TLSContext
    private let logger: Logger
    private var streams: [Int32: ClientStream] = [:]
    private var pending: [HTTP2PendingRequest] = []
    private var finished: [FinishedRequest] = []
    private var ready = false
    private var goAwayLastStreamID: Int32?
    private var localGoAway = false
    private var limit = 0
    private var peakActive = 0
    private var timer: DispatchSourceTimer?
    private var connectDeadline: UInt64 = 0
    private var pingSentAt: UInt64?
    static let maxResponseBody = 64 * 1024

    /// One stream's state; it is also the request body's data source (one object per stream, not two).
    package final class ClientStream: OutgoingBody {
        let pending: HTTP2PendingRequest
        var status = 0
        /// Response fields as received (no Strings until someone asks for a value).
        var fields = HTTP2HeaderBlock()
        var responseBody: [UInt8] = []
        /// Output offset of the chunk holding this stream's HEADERS; nil = not produced yet.
        var headersAt: UInt64?
        var done = false
        /// A 2xx answer to a `statusOnlyOnSuccess` request: its fields and body are not kept.
        var statusOnly = false
        init(_ pending: HTTP2PendingRequest) {
            self.pending = pending
            super.init(pending.request.body)
        }
    }

    init(
        id: HTTP2PoolConnectionID, pool: HTTP2ConnectionPool, configuration: HTTP2ClientConfiguration,
        context: TLSContext, queue: DispatchQueue, logger: Logger
    ) {
        self.id = id
        self.pool = pool
        self.configuration = configuration
        self.context = context
        self.logger = logger
        super.init(queue: queue)
    }

    // Nothing else refers to the connection now: free its session and `SSL*` here, before telling the pool (the
    // channel's own properties would go only after this subclass's deinit).
    deinit {
        session = nil
        tls = nil
        pool.connectionFreed()
    }

    /// On `queue`: resolve, non-blocking connect, then TLS handshake from the socket sources.
    func connect() {
        dispatchPrecondition(condition: .onQueue(queue))
        connectDeadline = monotonicNanos() + UInt64(configuration.connectTimeoutSeconds * 1e9)
        startTimer()
        do {
            let addr = try SocketAddress.resolve(configuration.host, configuration.port)
            let fd = socket(addr.family, Int32(SOCK_STREAM.rawValue | SOCK_CLOEXEC.rawValue), 0)
            guard fd >= 0 else {
                throw HTTP2Error.posix(errno, "socket", in: .connecting)
            }
            SocketAddress.setNonBlocking(fd)
            var storage = addr.storage
            let rv = withUnsafePointer(to: &storage) { p in
                p.withMemoryRebound(to: sockaddr.self, capacity: 1) { Glibc.connect(fd, $0, addr.length) }
            }
            let connectErrno = errno
            // Sources only after connect(): an unconnected socket polls as HUP.
            attach(fd: fd)
            let t = try TLSConnection(context: context, fd: fd, serverSide: false)
            try t.setPeerName(configuration.host)
            tls = t
            errno = connectErrno
            if rv == 0 {
                startHandshake()
            } else if errno == EINPROGRESS {
                armWrite() // writable = connect finished (state .connecting)
            } else {
                throw HTTP2Error.posix(
                    errno, "cannot connect to \(configuration.host):\(configuration.port)",
                    in: .connecting)
            }
        } catch let error as HTTP2Error {
            close(error)
        } catch {
            close(HTTP2Error(.connectFailed, resendIsSafe: true, "\(error)"))
        }
    }

    private func startTimer() {
        let t = DispatchSource.makeTimerSource(queue: queue)
        var interval = configuration.requestTimeoutSeconds / 4
        if configuration.idlePingSeconds > 0 { interval = min(interval, configuration.idlePingSeconds / 2) }
        interval = min(max(interval, 0.01), 1.0)
        t.schedule(deadline: .now() + interval, repeating: interval, leeway: .milliseconds(5))
        t.setEventHandler { [unowned self] in self.tick() }
        timer = t
        t.resume()
    }

    package override func handshakeCompleted() throws(HTTP2Error) {
        guard tls?.selectedALPN == "h2" else {
            throw HTTP2Error(
                .alpnNotH2, resendIsSafe: false,
                "\(configuration.host):\(configuration.port) did not select h2 in TLS ALPN: the peer does not "
                    + "speak HTTP/2 over TLS"
            )
        }
        let s = try HTTP2Session(role: .client, delegate: self)
        session = s
        s.submitSettings([.enablePush(false), .initialWindowSize(1 << 20)], connectionWindow: 1 << 24)
        // Not ready yet: streams are opened only after the peer's first SETTINGS (its stream limit is unknown
        // before; APNs starts at 1 until the first authenticated request).
    }

    private func currentLimit() -> Int {
        guard let session else { return 0 }
        return min(session.remoteMaxConcurrentStreams, configuration.maxConcurrentStreamsCap)
    }

    private var canOpenStreams: Bool { ready && state == .open && goAwayLastStreamID == nil && !localGoAway }

    // MARK: requests

    /// On `queue`: take everything the pool assigned to us and submit it.
    func drainInbox() {
        dispatchPrecondition(condition: .onQueue(queue))
        let work = pool.takeWork(self)
        start(work)
        flushAndReport()
    }

    private func start(_ work: [HTTP2PendingRequest]) {
        guard !work.isEmpty else { return }
        if !canOpenStreams {
            pool.giveBack(self, work)
            return
        }
        for p in work {
            if streams.count >= limit { pending.append(p) } else { submit(p) }
        }
    }

    private func submit(_ p: HTTP2PendingRequest) {
        guard let session else {
            finished.append(p.finished(.failure(HTTP2Error(.connectionReset, resendIsSafe: true, "no session"))))
            return
        }
        if p.holdsBeforeWriting {
            finished.append(p.finished(.failure(Self.heldError)))
            return
        }
        let stream = ClientStream(p)
        // The stream table retains `stream` until the stream closes, so the body and the request's fields outlive
        // nghttp2's reads of them.
        let sid: Int32
        switch session.submitRequest(p.request, body: stream.bytes.isEmpty ? nil : stream) {
        case .submitted(let id):
            sid = id
        case .streamIDsExhausted:
            // Stream ids exhausted (2^31, RFC 9113 §5.1.1): rotate like after GOAWAY.
            localGoAway = true
            pool.goAwayReceived(self, returning: [p] + pending)
            pending.removeAll()
            return
        case .failed(let error):
            finished.append(p.finished(.failure(error)))
            return
        }
        streams[sid] = stream
        if streams.count > peakActive { peakActive = streams.count }
    }

    static let heldError = HTTP2Error(.held, resendIsSafe: true, "held before writing: the target is paused")

    private func fillFromPending() {
        while !pending.isEmpty && streams.count < limit && canOpenStreams {
            submit(pending.removeFirst())
        }
    }

    /// Reports finished requests to the pool and starts what it hands back; then writes.
    private func flushAndReport() {
        var rounds = 0
        while !finished.isEmpty && rounds < 4 {
            start(reportFinished())
            rounds += 1
        }
        flush()
        if !finished.isEmpty && state == .open {
            // Streams closed while writing (for example a response that arrived before our request ended).
            queue.async { [self] in flushAndReport() }
        }
    }

    /// Once 16 streams of a large read have finished, their completions run and the requests they submit are
    /// written before the rest of the read is parsed (the server starts on them meanwhile).
    package override func wantsEarlyFlush() -> Bool { finished.count >= Self.earlyFlushResponses }
    static let earlyFlushResponses = 16

    package override func readLoopFinished() {
        fillFromPending()
        if !finished.isEmpty {
            start(reportFinished())
        }
    }

    /// Hands `finished` to the pool and returns the work it gives back. The batch's buffer is reused for the next
    /// batch once the pool is done with it (no buffer allocated per batch).
    private func reportFinished() -> [HTTP2PendingRequest] {
        var batch: [FinishedRequest] = []
        swap(&batch, &finished)
        let work = pool.requestsFinished(self, batch, peak: peakActive)
        if finished.isEmpty {
            batch.removeAll(keepingCapacity: true)
            swap(&batch, &finished)
        }
        return work
    }

    // MARK: nghttp2 callbacks

    /// The stream the last header or data callback was for: a response's fields and body arrive back to back,
    /// so this saves a table lookup per field. Cleared when that stream leaves the table.
    private var lastStream: (id: Int32, stream: ClientStream)?

    @inline(__always) private func stream(_ streamID: Int32) -> ClientStream? {
        if let last = lastStream, last.id == streamID { return last.stream }
        guard let st = streams[streamID] else { return nil }
        lastStream = (streamID, st)
        return st
    }

    package func headersBegan(streamID: Int32) {}

    package func headerReceived(streamID: Int32, name: UnsafeBufferPointer<UInt8>, value: UnsafeBufferPointer<UInt8>) {
        guard let st = stream(streamID) else { return }
        if name.count > 0 && name[0] == UInt8(ascii: ":") {
            // ":status"
            if name.count == 7 && name[1] == 0x73 && name[2] == 0x74 && name[3] == 0x61 && name[4] == 0x74
                && name[5] == 0x75 && name[6] == 0x73
            {
                var v = 0
                for b in value where b >= 48 && b <= 57 { v = v * 10 + Int(b - 48) }
                st.status = v
                st.statusOnly = v >= 200 && v < 300 && st.pending.request.statusOnlyOnSuccess
            }
            return
        }
        if st.statusOnly { return }
        if st.fields.isEmpty { st.fields.reserveCapacity(128) }
        st.fields.append(nameBytes: name, valueBytes: value)
    }

    package func dataReceived(streamID: Int32, _ data: UnsafeBufferPointer<UInt8>) {
        guard let st = stream(streamID), !st.done, !st.statusOnly else { return }
        if st.responseBody.count + data.count > Self.maxResponseBody {
            st.done = true
            finished.append(
                st.pending.finished(
                    .failure(
                        HTTP2Error(
                            .protocolError, resendIsSafe: false,
                            "response body larger than \(Self.maxResponseBody) bytes"))))
            session?.submitReset(streamID: streamID, errorCode: HTTP2ErrorCode.cancel)
            return
        }
        st.responseBody.append(contentsOf: data)
    }

    package func frameReceived(_ frame: HTTP2FrameSummary) {
        switch frame.kind {
        case .settings where !frame.isAck:
            limit = currentLimit()
            if !ready {
                ready = true
                start(pool.connectionReady(self, limit: limit))
            } else {
                start(pool.limitChanged(self, limit: limit))
            }
            fillFromPending()
        case .ping where frame.isAck:
            pingSentAt = nil
        case .goAway:
            // RFC 9113 §6.8: streams above last-stream-id were not processed; nghttp2 closes them with
            // REFUSED_STREAM, and we report those as `.goAway` (safe to resend).
            let last = frame.lastStreamID
            goAwayLastStreamID = last
            logger.debug(
                "GOAWAY received", metadata: ["lastStreamID": "\(last)", "errorCode": "\(frame.errorCode)"])
            pool.goAwayReceived(self, returning: pending)
            pending.removeAll()
        default:
            break
        }
    }

    package func frameSent(_ frame: HTTP2FrameSummary) {
        if frame.kind == .headers, let st = streams[frame.streamID], st.headersAt == nil {
            st.headersAt = currentChunkStart
        }
    }

    package func streamClosed(_ streamID: Int32, errorCode: UInt32) {
        if lastStream?.id == streamID { lastStream = nil }
        guard let st = streams.removeValue(forKey: streamID) else { return }
        if !st.done {
            st.done = true
            let result: Result<HTTP2Response, HTTP2Error>
            let aboveGoAway = goAwayLastStreamID.map { streamID > $0 } ?? false
            if let error = HTTP2Error.streamClosed(
                streamID, errorCode: errorCode, hasStatus: st.status > 0,
                aboveGoAway: aboveGoAway)
            {
                result = .failure(error)
            } else {
                var response = HTTP2Response(status: st.status, fields: st.fields, body: st.responseBody)
                response.connection = id
                result = .success(response)
            }
            finished.append(st.pending.finished(result))
        }
    }

    // MARK: timers, ping, close

    private func tick() {
        let now = monotonicNanos()
        if state == .connecting || state == .handshaking {
            if now > connectDeadline {
                close(
                    HTTP2Error(
                        .connectFailed, resendIsSafe: true,
                        "timed out connecting to \(configuration.host):\(configuration.port) after "
                            + "\(configuration.connectTimeoutSeconds) s"
                    ))
            }
            return
        }
        guard state == .open, let session else { return }
        for (sid, st) in streams where !st.done && st.pending.deadline.nanoseconds <= now {
            st.done = true
            let safe = isUnwritten(st)
            finished.append(
                st.pending.finished(
                    .failure(
                        HTTP2Error(
                            .timeout, resendIsSafe: safe,
                            "no response within \(configuration.requestTimeoutSeconds) s"))))
            session.submitReset(streamID: sid, errorCode: HTTP2ErrorCode.cancel)
        }
        if !pending.isEmpty {
            var keep: [HTTP2PendingRequest] = []
            for p in pending {
                if p.deadline.nanoseconds <= now {
                    finished.append(
                        p.finished(
                            .failure(
                                HTTP2Error(
                                    .timeout, resendIsSafe: true,
                                    "no free stream within \(configuration.requestTimeoutSeconds) s (never sent)"))))
                } else {
                    keep.append(p)
                }
            }
            pending = keep
        }
        if configuration.idlePingSeconds > 0 {
            if let sent = pingSentAt {
                if now - sent > UInt64(configuration.pingTimeoutSeconds * 1e9) {
                    close(
                        HTTP2Error(
                            .connectionReset, resendIsSafe: false,
                            "PING not answered within \(configuration.pingTimeoutSeconds) s"))
                    return
                }
            } else if now - lastReadNanos > UInt64(configuration.idlePingSeconds * 1e9) {
                session.submitPing()
                pingSentAt = now
                pool.pingSent()
            }
        }
        flushAndReport()
    }

    private func isUnwritten(_ st: ClientStream) -> Bool {
        guard let at = st.headersAt else { return true }
        return writtenBytes <= at
    }

    /// On `queue`: no new streams; GOAWAY to the server; close once the open streams are answered.
    func shutdownGracefully() {
        dispatchPrecondition(condition: .onQueue(queue))
        localGoAway = true
        if !pending.isEmpty {
            pool.giveBack(self, pending)
            pending.removeAll()
        }
        guard state == .open, let session else {
            close(HTTP2Error(.shutdown, resendIsSafe: true, "pool shut down"))
            return
        }
        session.submitGoAway(lastStreamID: 0)
        flushAndReport()
    }

    package override func channelClosed(_ error: HTTP2Error) {
        timer?.cancel()
        timer = nil
        for (_, st) in streams where !st.done {
            st.done = true
            // Never written: the pool resends it. Written: it may have reached the server, so it is not resent
            // (at most once), and its own kind counts it apart from requests that never left.
            let safe = isUnwritten(st)
            let e =
                safe
                ? HTTP2Error(
                    error.kind == .goAway ? .connectionReset : error.kind, resendIsSafe: true,
                    "\(error.message) (request never written)")
                : HTTP2Error(
                    .writtenUnanswered, resendIsSafe: false,
                    "\(error.message) (written, no answer: not resent)")
            finished.append(st.pending.finished(.failure(e)))
        }
        streams.removeAll()
        lastStream = nil
        let unstarted = pending
        pending.removeAll()
        let batch = finished
        finished.removeAll()
        pool.connectionClosed(self, error: error, finished: batch, unstarted: unstarted, peak: peakActive)
    }
}
