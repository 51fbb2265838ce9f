// `package`: `outgoingBodyRead` (an nghttp2 callback) is shared with VolleyHTTP2Server's responses.
package import CNGHTTP2
internal import COpenSSL
// The socket + TLS + nghttp2 machinery shared by client and server connections.
//
// Ownership: one serial `queue` owns everything here: the fd, both DispatchSources, the `SSL*`, the
// `nghttp2_session*` and the buffers. Every method that touches them runs on `queue`.
// Lifetime: the sources retain `self` until their cancel handlers have run; the fd is closed only after
// both cancel handlers ran (libdispatch may still be watching the fd until then); session, SSL and buffers are
// freed in deinit.
import Dispatch
import Foundation

@inline(__always) package func monotonicNanos() -> UInt64 { DispatchTime.now().uptimeNanoseconds }

/// Base of the client connection and of VolleyHTTP2Server's `HTTP2ServerConnection`; open only because that
/// subclass lives in another module, and its hooks are open for the same reason. Everything else is `package`:
/// nothing in it is usable from outside Volley.
open class HTTP2Channel: @unchecked Sendable {
    package enum ChannelState { case connecting, handshaking, open, closed }

    package final let queue: DispatchQueue
    var fd: Int32 = -1
    package final var tls: TLSConnection?
    package final var session: OpaquePointer?
    /// The session's allocator; a stored property, so it is freed after `deinit` has deleted the session.
    private let sessionMemory = HTTP2SessionMemory()
    package final var state: ChannelState = .connecting

    private var readSource: DispatchSourceRead?
    private var writeSource: DispatchSourceWrite?
    private var writeArmed = false

    /// Coalesced output: frames from nghttp2_session_mem_send copied here, written with few SSL_writes.
    private var outBuffer: UnsafeMutablePointer<UInt8>
    private var outCapacity: Int
    private var outStart = 0
    private var outEnd = 0
    static let outTarget = 64 * 1024
    private let inBuffer: UnsafeMutableRawPointer
    static let inCapacity = 64 * 1024

    /// Bytes produced by nghttp2 and bytes accepted by SSL_write: a frame produced at an offset not yet
    /// written provably never reached the peer (used for "safe to resend").
    var producedBytes: UInt64 = 0
    var writtenBytes: UInt64 = 0
    /// Offset at which the chunk currently being produced by mem_send starts.
    var currentChunkStart: UInt64 = 0
    package final var lastReadNanos: UInt64 = monotonicNanos()
    /// True while inside the read loop; flushes are deferred to its end so frames coalesce.
    var inReadLoop = false
    var closeError: HTTP2Error?

    package init(queue: DispatchQueue) {
        self.queue = queue
        outCapacity = Self.outTarget + 16 * 1024 + 64
        outBuffer = .allocate(capacity: outCapacity)
        inBuffer = .allocate(byteCount: Self.inCapacity, alignment: 16)
    }

    deinit {
        if let session { nghttp2_session_del(session) }
        outBuffer.deallocate()
        inBuffer.deallocate()
    }

    // MARK: hooks for subclasses (all on `queue`)
    open func handshakeCompleted() throws(HTTP2Error) {}
    open func channelClosed(_ error: HTTP2Error) {}
    /// Called before each flush of a read pass: after an early flush's slice (`wantsEarlyFlush`) and at its end.
    open func readLoopFinished() {}
    /// Asked after each slice of received bytes: true = hand finished work on and write now, before the rest of
    /// what was read is processed.
    open func wantsEarlyFlush() -> Bool { false }
    /// Received bytes are fed to nghttp2 in slices of this size, so a large read can be answered in parts.
    static let receiveSlice = 1024
    open func onBeginHeaders(_ streamID: Int32) -> Int32 { 0 }
    open func onHeader(
        _ streamID: Int32, _ name: UnsafeBufferPointer<UInt8>,
        _ value: UnsafeBufferPointer<UInt8>
    ) -> Int32 { 0 }
    open func onDataChunk(_ streamID: Int32, _ data: UnsafeBufferPointer<UInt8>) -> Int32 { 0 }
    open func onFrameRecv(_ frame: HTTP2FrameReference) -> Int32 { 0 }
    open func onFrameSend(_ frame: HTTP2FrameReference) -> Int32 { 0 }
    open func onStreamClose(_ streamID: Int32, _ errorCode: UInt32) -> Int32 { 0 }

    // MARK: sources

    /// Takes ownership of a connected or connecting non-blocking fd and starts watching it.
    package final func attach(fd: Int32) {
        dispatchPrecondition(condition: .onQueue(queue))
        self.fd = fd
        let group = DispatchGroup()
        let rs = DispatchSource.makeReadSource(fileDescriptor: fd, queue: queue)
        let ws = DispatchSource.makeWriteSource(fileDescriptor: fd, queue: queue)
        group.enter()
        group.enter()
        rs.setEventHandler { [unowned self] in self.readable() }
        ws.setEventHandler { [unowned self] in self.writable() }
        // The handlers above are unowned; the cancel handlers keep self alive until the fd is closed.
        rs.setCancelHandler { group.leave() }
        ws.setCancelHandler { group.leave() }
        group.notify(queue: queue) { [self] in
            Glibc.close(self.fd)
            self.fd = -1
            self.readSource = nil
            self.writeSource = nil
        }
        readSource = rs
        writeSource = ws
        rs.resume()
    }

    func armWrite() {
        if !writeArmed, let ws = writeSource {
            writeArmed = true
            ws.resume()
        }
    }
    func disarmWrite() {
        if writeArmed, let ws = writeSource {
            writeArmed = false
            ws.suspend()
        }
    }

    private func readable() {
        switch state {
        case .connecting, .closed: return
        case .handshaking: continueHandshake()
        case .open: readLoop()
        }
    }

    private func writable() {
        switch state {
        case .connecting: connectCompleted()
        case .handshaking: continueHandshake()
        case .open: flush()
        case .closed: disarmWrite()
        }
    }

    /// Client: the non-blocking connect finished (or failed).
    private func connectCompleted() {
        var err: Int32 = 0
        var len = socklen_t(MemoryLayout<Int32>.size)
        getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len)
        if err != 0 {
            close(HTTP2Error.posix(err, "connect failed", in: .connecting))
            return
        }
        state = .handshaking
        continueHandshake()
    }

    /// Called by subclasses once the socket is connected (server: accepted) and TLS is attached.
    package final func startHandshake() {
        state = .handshaking
        continueHandshake()
    }

    private func continueHandshake() {
        guard let tls else { return }
        switch tls.handshake() {
        case .wantRead: disarmWrite()
        case .wantWrite: armWrite()
        case .failed(let e): close(e)
        case .done:
            disarmWrite()
            state = .open
            lastReadNanos = monotonicNanos()
            do {
                try handshakeCompleted()
            } catch {
                close(error)
                return
            }
            readLoop()
        }
    }

    // MARK: read / write

    private func readLoop() {
        guard let tls, let session else { return }
        inReadLoop = true
        var failure: HTTP2Error?
        loop: while state == .open {
            switch tls.read(inBuffer, Self.inCapacity) {
            case .bytes(let n):
                lastReadNanos = monotonicNanos()
                let bytes = inBuffer.assumingMemoryBound(to: UInt8.self)
                var at = 0
                while at < n {
                    let len = min(n - at, Self.receiveSlice)
                    let rv = nghttp2_session_mem_recv(session, bytes + at, len)
                    if rv < 0 {
                        failure = HTTP2Error.nghttp2(Int32(rv), "HTTP/2 protocol error", in: .established)
                        break loop
                    }
                    at += len
                    if midReadWriteFailure == nil && wantsEarlyFlush() {
                        // The peer and we work in parallel: it starts on these requests while we process the rest.
                        inReadLoop = false
                        readLoopFinished()
                        flush(midRead: true)
                        inReadLoop = true
                        if state != .open { break loop }
                    }
                }
            case .wantRead: break loop
            case .wantWrite:
                armWrite()
                break loop
            case .closed:
                failure = HTTP2Error.peerClosed
                break loop
            case .failed(let error):
                failure = error
                break loop
            }
        }
        inReadLoop = false
        if let f = midReadWriteFailure, failure == nil { failure = f }
        if state == .open { readLoopFinished() }
        if let failure {
            close(failure)
            return
        }
        flush()
    }

    /// Set when a write fails during a mid-read flush. The loop then reads on until the socket has nothing more
    /// and closes with this error only after that: a GOAWAY or answers the peer sent before it went away still
    /// count (they decide which requests are safe to resend).
    private var midReadWriteFailure: HTTP2Error?

    /// Moves frames from nghttp2 into the output buffer and writes them with as few SSL_writes as possible.
    /// Arms the write source only when TLS says WANT_WRITE (an armed write source on a writable socket fires
    /// continuously). When nghttp2 wants neither to read
    /// nor to write (after GOAWAY) the connection closes. `midRead`: received bytes are still unprocessed, so
    /// nothing closes here (closing with unread data would reset the peer, and would drop frames already received).
    package final func flush(midRead: Bool = false) {
        guard state == .open, !inReadLoop, let tls, let session else { return }
        while true {
            if outStart == outEnd {
                outStart = 0
                outEnd = 0
                while outEnd < Self.outTarget {
                    var data: UnsafePointer<UInt8>?
                    currentChunkStart = producedBytes
                    let n = nghttp2_session_mem_send(session, &data)
                    if n < 0 {
                        close(HTTP2Error.nghttp2(Int32(n), "HTTP/2 send error", in: .established))
                        return
                    }
                    guard n > 0, let data else { break }
                    if outEnd + n > outCapacity {
                        let newCap = outEnd + n + Self.outTarget
                        let nb = UnsafeMutablePointer<UInt8>.allocate(capacity: newCap)
                        nb.update(from: outBuffer, count: outEnd)
                        outBuffer.deallocate()
                        outBuffer = nb
                        outCapacity = newCap
                    }
                    (outBuffer + outEnd).update(from: data, count: n)
                    outEnd += n
                    producedBytes += UInt64(n)
                }
                if outEnd == 0 { break }
            }
            while outStart < outEnd {
                switch tls.write(outBuffer + outStart, outEnd - outStart) {
                case .bytes(let n):
                    outStart += n
                    writtenBytes += UInt64(n)
                case .wantWrite, .wantRead:
                    armWrite()
                    return
                case .closed:
                    writeFailed(HTTP2Error.peerClosed, midRead)
                    return
                case .failed(let error):
                    writeFailed(error, midRead)
                    return
                }
            }
        }
        disarmWrite()
        if !midRead && nghttp2_session_want_read(session) == 0 && nghttp2_session_want_write(session) == 0 {
            close(HTTP2Error(.goAway, resendIsSafe: true, "connection closed after GOAWAY"))
        }
    }

    private func writeFailed(_ error: HTTP2Error, _ midRead: Bool) {
        if midRead { midReadWriteFailure = error } else { close(error) }
    }

    /// Closes the connection (idempotent). `abortive` sends a TCP RST (SO_LINGER 0).
    package final func close(_ error: HTTP2Error, abortive: Bool = false) {
        guard state != .closed else { return }
        let wasOpen = state == .open
        state = .closed
        closeError = error
        if fd >= 0 {
            if abortive {
                var lg = linger(l_onoff: 1, l_linger: 0)
                setsockopt(fd, SOL_SOCKET, SO_LINGER, &lg, socklen_t(MemoryLayout<linger>.size))
            } else if wasOpen {
                tls?.shutdown()
            }
        }
        if let ws = writeSource {
            if !writeArmed {
                writeArmed = true
                ws.resume()
            } // never cancel/release a suspended source
            ws.cancel()
        }
        readSource?.cancel()
        channelClosed(error)
    }

    // MARK: nghttp2 session

    /// Creates the nghttp2 session with callbacks that forward to the hooks above.
    package final func makeSession(server: Bool) throws(HTTP2Error) {
        var cbs: OpaquePointer?
        let created = nghttp2_session_callbacks_new(&cbs)
        guard created == 0, let cbs else {
            throw HTTP2Error.nghttp2(created, "nghttp2_session_callbacks_new failed", in: .setup)
        }
        defer { nghttp2_session_callbacks_del(cbs) }
        nghttp2_session_callbacks_set_on_begin_headers_callback(cbs) { _, frame, ud in
            guard let frame, let ud else { return 0 }
            return HTTP2Channel.with(ud) { $0.onBeginHeaders(frame.pointee.hd.stream_id) }
        }
        nghttp2_session_callbacks_set_on_header_callback(cbs) { _, frame, name, namelen, value, valuelen, _, ud in
            guard let frame, let ud, let name, let value else { return 0 }
            return HTTP2Channel.with(ud) {
                $0.onHeader(
                    frame.pointee.hd.stream_id, UnsafeBufferPointer(start: name, count: namelen),
                    UnsafeBufferPointer(start: value, count: valuelen))
            }
        }
        nghttp2_session_callbacks_set_on_data_chunk_recv_callback(cbs) { _, _, sid, data, len, ud in
            guard let ud, let data else { return 0 }
            return HTTP2Channel.with(ud) { $0.onDataChunk(sid, UnsafeBufferPointer(start: data, count: len)) }
        }
        nghttp2_session_callbacks_set_on_frame_recv_callback(cbs) { _, frame, ud in
            guard let frame, let ud else { return 0 }
            return HTTP2Channel.with(ud) { $0.onFrameRecv(HTTP2FrameReference(frame)) }
        }
        nghttp2_session_callbacks_set_on_frame_send_callback(cbs) { _, frame, ud in
            guard let frame, let ud else { return 0 }
            return HTTP2Channel.with(ud) { $0.onFrameSend(HTTP2FrameReference(frame)) }
        }
        nghttp2_session_callbacks_set_on_stream_close_callback(cbs) { _, sid, code, ud in
            guard let ud else { return 0 }
            return HTTP2Channel.with(ud) { $0.onStreamClose(sid, code) }
        }
        var opt: OpaquePointer?
        nghttp2_option_new(&opt)
        defer { nghttp2_option_del(opt) }
        var s: OpaquePointer?
        let ud = Unmanaged.passUnretained(self).toOpaque()
        var mem = sessionMemory.mem
        let rv =
            server
            ? nghttp2_session_server_new3(&s, cbs, ud, opt, &mem)
            : nghttp2_session_client_new3(&s, cbs, ud, opt, &mem)
        guard rv == 0, let s else {
            throw HTTP2Error.nghttp2(rv, "nghttp2 session creation failed", in: .setup)
        }
        session = s
    }

    /// Calls `body` with the channel behind a callback's user data, without retaining it: nghttp2 calls back only
    /// from inside a session call made on the channel's queue, by a method of the channel itself, so it is alive.
    /// (A retain and a release per callback were a seventh of the worker's retains: several callbacks per request.)
    @inline(__always) static func with<R>(_ ud: UnsafeMutableRawPointer, _ body: (HTTP2Channel) -> R) -> R {
        Unmanaged<HTTP2Channel>.fromOpaque(ud)._withUnsafeGuaranteedRef(body)
    }

    /// Sends our SETTINGS and widens the connection-level receive window (RFC 9113 §6.9.2: only
    /// WINDOW_UPDATE changes it), so many concurrent uploads are not throttled by the 64 KiB default.
    package final func submitSettings(_ entries: [(Int32, UInt32)], connectionWindow: Int32) {
        guard let session else { return }
        var iv = entries.map { nghttp2_settings_entry(settings_id: $0.0, value: $0.1) }
        nghttp2_submit_settings(session, UInt8(NGHTTP2_FLAG_NONE.rawValue), &iv, iv.count)
        nghttp2_session_set_local_window_size(session, UInt8(NGHTTP2_FLAG_NONE.rawValue), 0, connectionWindow)
    }
}

/// An `nghttp2_frame` as a frame hook receives it: valid only during the call. Opaque outside the package, so no C
/// type appears in the open hooks' signatures; the nghttp2 wrappers read it through `frame`.
public struct HTTP2FrameReference {
    package let pointer: UnsafeRawPointer
    package init(_ pointer: UnsafeRawPointer) { self.pointer = pointer }
}

extension HTTP2FrameReference {
    /// The frame, typed (nghttp2 made it: the memory is bound to `nghttp2_frame`).
    @inline(__always) var frame: UnsafePointer<nghttp2_frame> { pointer.assumingMemoryBound(to: nghttp2_frame.self) }
}

/// Header names must be lower case in HTTP/2 (RFC 9113 §8.2.1); lower-cases only when needed.
@inline(__always) func lowercasedHeaderName(_ name: String) -> String {
    for b in name.utf8 where b >= 65 && b <= 90 { return name.lowercased() }
    return name
}

/// A body that nghttp2 reads through a data provider; referenced by `nghttp2_data_source.ptr`,
/// retained by the owning stream table until the stream closes. Not final: the client's stream state
/// extends it so one object per stream serves both.
package class OutgoingBody {
    let bytes: [UInt8]
    var offset = 0
    package init(_ bytes: [UInt8]) { self.bytes = bytes }
}

/// nghttp2 data read callback that copies from an `OutgoingBody`.
package let outgoingBodyRead: nghttp2_data_source_read_callback = { _, _, buf, length, flags, source, _ in
    guard let buf, let flags, let ptr = source?.pointee.ptr else { return Int(NGHTTP2_ERR_CALLBACK_FAILURE.rawValue) }
    let body = Unmanaged<OutgoingBody>.fromOpaque(ptr).takeUnretainedValue()
    let n = min(length, body.bytes.count - body.offset)
    if n > 0 {
        body.bytes.withUnsafeBufferPointer { src in
            buf.update(from: src.baseAddress! + body.offset, count: n)
        }
        body.offset += n
    }
    if body.offset >= body.bytes.count { flags.pointee |= UInt32(NGHTTP2_DATA_FLAG_EOF.rawValue) }
    return n
}

// MARK: sockets

package enum SocketAddress {
    /// Resolves host:port (blocking getaddrinfo; IP literals resolve without DNS).
    package static func resolve(_ host: String, _ port: Int)
        throws(HTTP2Error) -> (family: Int32, storage: sockaddr_storage, length: socklen_t)
    {
        var hints = addrinfo()
        hints.ai_socktype = Int32(SOCK_STREAM.rawValue)
        hints.ai_family = AF_UNSPEC
        var res: UnsafeMutablePointer<addrinfo>?
        let rv = getaddrinfo(host, String(port), &hints, &res)
        guard rv == 0, let res, let addr = res.pointee.ai_addr else {
            throw HTTP2Error.resolver(rv, host: host)
        }
        defer { freeaddrinfo(res) }
        var storage = sockaddr_storage()
        let len = res.pointee.ai_addrlen
        withUnsafeMutableBytes(of: &storage) { dst in
            dst.copyMemory(from: UnsafeRawBufferPointer(start: addr, count: Int(len)))
        }
        return (res.pointee.ai_family, storage, len)
    }

    package static func setNonBlocking(_ fd: Int32) {
        let flags = fcntl(fd, F_GETFL, 0)
        _ = fcntl(fd, F_SETFL, flags | O_NONBLOCK)
        var one: Int32 = 1
        setsockopt(fd, Int32(IPPROTO_TCP), TCP_NODELAY, &one, socklen_t(MemoryLayout<Int32>.size))
    }
}
