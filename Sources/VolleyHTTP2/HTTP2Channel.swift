// The socket + TLS driver shared by client and server connections: it moves bytes between the TLS stream and an
// `HTTP2Session` (which knows HTTP/2 and nothing of sockets).
//
// Ownership: one serial `queue` owns everything here: the fd, both DispatchSources, the TLS connection, the
// session and the buffers. Every method that touches them runs on `queue`.
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
    /// The HTTP/2 session, created by the subclass once TLS agreed on h2 (`handshakeCompleted`), with the subclass
    /// as its delegate.
    package final var session: HTTP2Session?
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
                    do {
                        try session.receive(UnsafeRawBufferPointer(start: bytes + at, count: len))
                    } catch {
                        failure = error
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
                    currentChunkStart = producedBytes
                    let chunk: UnsafeRawBufferPointer
                    do {
                        guard let next = try session.nextOutput() else { break }
                        chunk = next
                    } catch {
                        close(error)
                        return
                    }
                    // Valid until the next session call: copied into the coalescing buffer now.
                    guard let data = chunk.baseAddress else { break }
                    let n = chunk.count
                    if outEnd + n > outCapacity {
                        let newCap = outEnd + n + Self.outTarget
                        let nb = UnsafeMutablePointer<UInt8>.allocate(capacity: newCap)
                        nb.update(from: outBuffer, count: outEnd)
                        outBuffer.deallocate()
                        outBuffer = nb
                        outCapacity = newCap
                    }
                    UnsafeMutableRawPointer(outBuffer + outEnd).copyMemory(from: data, byteCount: n)
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
        if !midRead && !session.wantsRead && !session.wantsWrite {
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
}

/// Header names must be lower case in HTTP/2 (RFC 9113 §8.2.1); lower-cases only when needed.
@inline(__always) func lowercasedHeaderName(_ name: String) -> String {
    for b in name.utf8 where b >= 65 && b <= 90 { return name.lowercased() }
    return name
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
