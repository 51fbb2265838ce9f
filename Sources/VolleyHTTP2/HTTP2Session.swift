internal import CNGHTTP2

// The nghttp2 session as bytes in, bytes out and events: no socket, no TLS, no queue. The connection that owns it
// (`HTTP2Channel`) moves bytes between it and the TLS stream; tests drive two sessions against each other in memory.
// Every nghttp2 call of Volley's HTTP/2 code is in this file (the allocator is in HTTP2SessionMemory.swift).

/// What a session reports while it parses received bytes or produces output. nghttp2 calls these from inside
/// `HTTP2Session.receive(_:)` and `HTTP2Session.nextOutput()`, on the caller's thread; the buffers they pass are
/// valid only during the call. A method may submit frames on the session (they go out with the next output), but
/// must not call `receive` or `nextOutput` again.
package protocol HTTP2SessionDelegate: AnyObject {
    /// A HEADERS frame opened a header block on `streamID` (a request, a response or trailers).
    func headersBegan(streamID: Int32)
    /// One decoded header field of the block being received. Names are lower case (nghttp2 rejects others).
    func headerReceived(streamID: Int32, name: UnsafeBufferPointer<UInt8>, value: UnsafeBufferPointer<UInt8>)
    /// A piece of a DATA frame's payload (padding removed).
    func dataReceived(streamID: Int32, _ data: UnsafeBufferPointer<UInt8>)
    /// A whole frame arrived; for HEADERS, after its last CONTINUATION.
    func frameReceived(_ frame: HTTP2FrameSummary)
    /// A frame was serialised into the output (it has not necessarily reached the peer).
    func frameSent(_ frame: HTTP2FrameSummary)
    /// The stream closed; `errorCode` is the RST_STREAM or GOAWAY code (`HTTP2ErrorCode`), 0 when it ended cleanly.
    func streamClosed(_ streamID: Int32, errorCode: UInt32)
}

/// Frame types (RFC 9113 §6).
package enum HTTP2FrameKind: UInt8, Sendable {
    case data = 0
    case headers, priority, rstStream, settings, pushPromise, ping, goAway, windowUpdate, continuation
    case other = 255
}

/// Error codes of RST_STREAM and GOAWAY (RFC 9113 §7).
package enum HTTP2ErrorCode {
    package static let noError: UInt32 = 0x0
    package static let protocolError: UInt32 = 0x1
    package static let internalError: UInt32 = 0x2
    package static let refusedStream: UInt32 = 0x7
    package static let cancel: UInt32 = 0x8
}

/// The parts of a frame that the connections act on, copied out of nghttp2's frame (plain values).
package struct HTTP2FrameSummary: Sendable {
    package var kind: HTTP2FrameKind
    package var flags: UInt8
    package var streamID: Int32
    /// RST_STREAM's and GOAWAY's error code; 0 for other frames.
    package var errorCode: UInt32
    /// GOAWAY's last-stream-id; 0 for other frames.
    package var lastStreamID: Int32

    /// ACK on SETTINGS and PING (RFC 9113 §6.5, §6.7).
    package var isAck: Bool { kind == .settings || kind == .ping ? flags & 0x1 != 0 : false }
    /// END_STREAM on HEADERS and DATA (RFC 9113 §6.1, §6.2).
    package var endsStream: Bool { kind == .headers || kind == .data ? flags & 0x1 != 0 : false }
}

/// One SETTINGS parameter (RFC 9113 §6.5.2).
package struct HTTP2Setting: Sendable {
    package var id: Int32
    package var value: UInt32
    package static func enablePush(_ on: Bool) -> HTTP2Setting {
        HTTP2Setting(id: Int32(NGHTTP2_SETTINGS_ENABLE_PUSH.rawValue), value: on ? 1 : 0)
    }
    package static func maxConcurrentStreams(_ n: UInt32) -> HTTP2Setting {
        HTTP2Setting(id: Int32(NGHTTP2_SETTINGS_MAX_CONCURRENT_STREAMS.rawValue), value: n)
    }
    package static func initialWindowSize(_ n: UInt32) -> HTTP2Setting {
        HTTP2Setting(id: Int32(NGHTTP2_SETTINGS_INITIAL_WINDOW_SIZE.rawValue), value: n)
    }
}

/// How `HTTP2Session.submitRequest` went.
package enum HTTP2SubmitResult {
    case submitted(streamID: Int32)
    /// The connection has used every client stream id (2^31, RFC 9113 §5.1.1): open a new one.
    case streamIDsExhausted
    case failed(HTTP2Error)
}

/// A body that nghttp2 reads through a data provider; referenced by `nghttp2_data_source.ptr`,
/// retained by the owning stream table until the stream closes. Not final: the client's stream state
/// extends it so one object per stream serves both.
package class OutgoingBody {
    let bytes: [UInt8]
    var offset = 0
    package init(_ bytes: [UInt8]) { self.bytes = bytes }
}

/// One `nghttp2_session` (client or server side) and its callbacks.
///
/// Not thread-safe: one owner calls it, from one queue at a time (a connection's serial queue, or a test). The
/// delegate is held `unowned(unsafe)` (no retain per callback, no side table on the delegate): it must outlive the
/// session, which holds when the delegate owns the session. The session is deleted in `deinit`; its allocator
/// (`HTTP2SessionMemory`) is a stored property, so it is freed after that.
package final class HTTP2Session {
    private let session: OpaquePointer
    private unowned(unsafe) let delegate: any HTTP2SessionDelegate
    /// nghttp2's memory; a stored property, so it is freed after `deinit` has deleted the session.
    private let memory: HTTP2SessionMemory

    package enum Role { case client, server }

    package init(role: Role, delegate: any HTTP2SessionDelegate) throws(HTTP2Error) {
        self.delegate = delegate
        let memory = HTTP2SessionMemory()
        self.memory = memory
        var cbs: OpaquePointer?
        let created = nghttp2_session_callbacks_new(&cbs)
        guard created == 0, let cbs else {
            throw HTTP2Error.nghttp2(created, "nghttp2_session_callbacks_new failed", in: .setup)
        }
        defer { nghttp2_session_callbacks_del(cbs) }
        Self.install(cbs)
        var opt: OpaquePointer?
        nghttp2_option_new(&opt)
        defer { nghttp2_option_del(opt) }
        // The user data is filled in below, once `self` exists: nghttp2 calls nothing back while creating.
        var s: OpaquePointer?
        var mem = memory.mem
        let rv =
            role == .server
            ? nghttp2_session_server_new3(&s, cbs, nil, opt, &mem)
            : nghttp2_session_client_new3(&s, cbs, nil, opt, &mem)
        guard rv == 0, let s else {
            throw HTTP2Error.nghttp2(rv, "nghttp2 session creation failed", in: .setup)
        }
        session = s
        nghttp2_session_set_user_data(s, Unmanaged.passUnretained(self).toOpaque())
    }

    deinit { nghttp2_session_del(session) }

    /// Calls `body` with the session behind a callback's user data, without retaining it: nghttp2 calls back only
    /// from inside a call on this object, so it is alive. (A retain and a release per callback were a seventh of
    /// the worker's retains: several callbacks per request.)
    @inline(__always) private static func with<R>(_ ud: UnsafeMutableRawPointer, _ body: (HTTP2Session) -> R) -> R {
        Unmanaged<HTTP2Session>.fromOpaque(ud)._withUnsafeGuaranteedRef(body)
    }

    private static func install(_ cbs: OpaquePointer) {
        nghttp2_session_callbacks_set_on_begin_headers_callback(cbs) { _, frame, ud in
            guard let frame, let ud else { return 0 }
            HTTP2Session.with(ud) { $0.delegate.headersBegan(streamID: frame.pointee.hd.stream_id) }
            return 0
        }
        nghttp2_session_callbacks_set_on_header_callback(cbs) { _, frame, name, namelen, value, valuelen, _, ud in
            guard let frame, let ud, let name, let value else { return 0 }
            HTTP2Session.with(ud) {
                $0.delegate.headerReceived(
                    streamID: frame.pointee.hd.stream_id, name: UnsafeBufferPointer(start: name, count: namelen),
                    value: UnsafeBufferPointer(start: value, count: valuelen))
            }
            return 0
        }
        nghttp2_session_callbacks_set_on_data_chunk_recv_callback(cbs) { _, _, sid, data, len, ud in
            guard let ud, let data else { return 0 }
            HTTP2Session.with(ud) {
                $0.delegate.dataReceived(streamID: sid, UnsafeBufferPointer(start: data, count: len))
            }
            return 0
        }
        nghttp2_session_callbacks_set_on_frame_recv_callback(cbs) { _, frame, ud in
            guard let frame, let ud else { return 0 }
            HTTP2Session.with(ud) { $0.delegate.frameReceived(HTTP2FrameSummary(frame)) }
            return 0
        }
        nghttp2_session_callbacks_set_on_frame_send_callback(cbs) { _, frame, ud in
            guard let frame, let ud else { return 0 }
            HTTP2Session.with(ud) { $0.delegate.frameSent(HTTP2FrameSummary(frame)) }
            return 0
        }
        nghttp2_session_callbacks_set_on_stream_close_callback(cbs) { _, sid, code, ud in
            guard let ud else { return 0 }
            HTTP2Session.with(ud) { $0.delegate.streamClosed(sid, errorCode: code) }
            return 0
        }
    }

    // MARK: bytes in, bytes out

    /// Parses received bytes (nghttp2 copies what it keeps); the delegate hears of what they held before this
    /// returns. Throws on a protocol violation: the connection must close.
    @inline(__always) package func receive(_ bytes: UnsafeRawBufferPointer) throws(HTTP2Error) {
        guard let base = bytes.baseAddress, bytes.count > 0 else { return }
        let rv = nghttp2_session_mem_recv(session, base.assumingMemoryBound(to: UInt8.self), bytes.count)
        if rv < 0 { throw HTTP2Error.nghttp2(Int32(rv), "HTTP/2 protocol error", in: .established) }
    }

    /// The next serialised frame(s) to send, or nil when nothing is pending. The buffer belongs to nghttp2 and is
    /// valid only until the next call on this session: copy it out first (no copy is made here).
    @inline(__always) package func nextOutput() throws(HTTP2Error) -> UnsafeRawBufferPointer? {
        var data: UnsafePointer<UInt8>?
        let n = nghttp2_session_mem_send(session, &data)
        if n < 0 { throw HTTP2Error.nghttp2(Int32(n), "HTTP/2 send error", in: .established) }
        guard n > 0, let data else { return nil }
        return UnsafeRawBufferPointer(start: data, count: n)
    }

    /// Everything pending, copied into one array (for tests and cold paths; the connection uses `nextOutput`).
    package func pendingOutput() throws(HTTP2Error) -> [UInt8] {
        var out: [UInt8] = []
        while let chunk = try nextOutput() { out.append(contentsOf: chunk) }
        return out
    }

    /// False once both sides are done with the connection (after GOAWAY and the last stream closed).
    package var wantsRead: Bool { nghttp2_session_want_read(session) != 0 }
    package var wantsWrite: Bool { nghttp2_session_want_write(session) != 0 }

    /// The peer's SETTINGS_MAX_CONCURRENT_STREAMS (unlimited until its first SETTINGS says otherwise).
    package var remoteMaxConcurrentStreams: Int {
        Int(nghttp2_session_get_remote_settings(session, NGHTTP2_SETTINGS_MAX_CONCURRENT_STREAMS))
    }

    /// The highest peer-opened stream id this session has processed (a GOAWAY's last-stream-id).
    package var lastProcessedStreamID: Int32 { nghttp2_session_get_last_proc_stream_id(session) }

    // MARK: frames to send

    /// Queues a SETTINGS frame; with `connectionWindow`, also widens the connection-level receive window
    /// (RFC 9113 §6.9.2: only WINDOW_UPDATE changes it), so many concurrent uploads are not throttled by the
    /// 64 KiB default.
    package func submitSettings(_ settings: [HTTP2Setting], connectionWindow: Int32? = nil) {
        var iv = settings.map { nghttp2_settings_entry(settings_id: $0.id, value: $0.value) }
        nghttp2_submit_settings(session, UInt8(NGHTTP2_FLAG_NONE.rawValue), &iv, iv.count)
        if let connectionWindow {
            nghttp2_session_set_local_window_size(session, UInt8(NGHTTP2_FLAG_NONE.rawValue), 0, connectionWindow)
        }
    }

    package func submitPing() { nghttp2_submit_ping(session, UInt8(NGHTTP2_FLAG_NONE.rawValue), nil) }

    /// Queues GOAWAY (RFC 9113 §6.8): streams above `lastStreamID` will not be processed.
    package func submitGoAway(lastStreamID: Int32, errorCode: UInt32 = HTTP2ErrorCode.noError, debugData: [UInt8] = [])
    {
        debugData.withUnsafeBufferPointer { d in
            _ = nghttp2_submit_goaway(
                session, UInt8(NGHTTP2_FLAG_NONE.rawValue), lastStreamID, errorCode, d.baseAddress, d.count)
        }
    }

    /// Queues RST_STREAM; the stream closes (`streamClosed`) once it is sent.
    package func submitReset(streamID: Int32, errorCode: UInt32) {
        nghttp2_submit_rst_stream(session, UInt8(NGHTTP2_FLAG_NONE.rawValue), streamID, errorCode)
    }

    /// Opens a stream for `request`. `body`, when given, is read by nghttp2 as DATA frames; the caller keeps it
    /// (and the request's header blocks, which nghttp2 references without copying) alive until the stream closes.
    package func submitRequest(_ request: HTTP2Request, body: OutgoingBody?) -> HTTP2SubmitResult {
        let sid: Int32
        if let body {
            var provider = nghttp2_data_provider(
                source: nghttp2_data_source(ptr: Unmanaged.passUnretained(body).toOpaque()),
                read_callback: outgoingBodyRead)
            sid = withRequestNameValues(request) { nva, n in
                nghttp2_submit_request(session, nil, nva, n, &provider, nil)
            }
        } else {
            sid = withRequestNameValues(request) { nva, n in nghttp2_submit_request(session, nil, nva, n, nil, nil) }
        }
        if sid >= 0 { return .submitted(streamID: sid) }
        if sid == NGHTTP2_ERR_STREAM_ID_NOT_AVAILABLE.rawValue { return .streamIDsExhausted }
        return .failed(HTTP2Error.nghttp2(sid, "nghttp2_submit_request failed", in: .submitting))
    }

    /// Queues the response on `streamID` (nghttp2 copies the fields). `body`, when given, must stay alive until the
    /// stream closes. Returns nghttp2's error text when the stream cannot take a response (closed, answered).
    package func submitResponse(streamID: Int32, _ response: HTTP2Response, body: OutgoingBody?) -> String? {
        let rv: Int32
        if let body {
            var provider = nghttp2_data_provider(
                source: nghttp2_data_source(ptr: Unmanaged.passUnretained(body).toOpaque()),
                read_callback: outgoingBodyRead)
            rv = withResponseNameValues(response) { nva, n in
                nghttp2_submit_response(session, streamID, nva, n, &provider)
            }
        } else {
            rv = withResponseNameValues(response) { nva, n in nghttp2_submit_response(session, streamID, nva, n, nil) }
        }
        return rv == 0 ? nil : String(cString: nghttp2_strerror(rv))
    }
}

extension HTTP2FrameSummary {
    @inline(__always) init(_ frame: UnsafePointer<nghttp2_frame>) {
        let hd = frame.pointee.hd
        kind = HTTP2FrameKind(rawValue: hd.type) ?? .other
        flags = hd.flags
        streamID = hd.stream_id
        switch kind {
        case .rstStream:
            errorCode = frame.pointee.rst_stream.error_code
            lastStreamID = 0
        case .goAway:
            errorCode = frame.pointee.goaway.error_code
            lastStreamID = frame.pointee.goaway.last_stream_id
        default:
            errorCode = 0
            lastStreamID = 0
        }
    }
}

/// nghttp2 data read callback that copies from an `OutgoingBody`.
private let outgoingBodyRead: nghttp2_data_source_read_callback = { _, _, buf, length, flags, source, _ in
    guard let buf, let flags, let ptr = source?.pointee.ptr else { return Int(NGHTTP2_ERR_CALLBACK_FAILURE.rawValue) }
    let body = Unmanaged<OutgoingBody>.fromOpaque(ptr).takeUnretainedValue()
    let n = min(length, body.bytes.count - body.offset)
    if n > 0 {
        body.bytes.withUnsafeBufferPointer { src in
            guard let base = src.baseAddress else { return }
            buf.update(from: base + body.offset, count: n)
        }
        body.offset += n
    }
    if body.offset >= body.bytes.count { flags.pointee |= UInt32(NGHTTP2_DATA_FLAG_EOF.rawValue) }
    return n
}

/// Points an `nghttp2_nv` array into the request's encoded fields for the duration of `body` (the array itself
/// is copied by nghttp2 in the submit call; the bytes it points at are not, see below): `:scheme: https`, then
/// every pseudo-header field, then the rest,
/// so pseudo-headers come first whichever block holds them (RFC 9113 §8.3). Sensitive fields (`:path`,
/// `authorization`, per-request ids) go out NO_INDEX: never entered into either HPACK table.
///
/// Names and values are passed NO_COPY: nghttp2 keeps the pointers until it has sent (or given up on) the
/// HEADERS frame, instead of copying every field and lower-casing the names (already lower case:
/// `HTTP2HeaderBlock`). They point into the request's blocks, which the pending request holds immutably; the
/// client's stream state stays in its stream table until nghttp2 closes the stream, which comes after HEADERS was
/// sent or dropped (a refused or cancelled request is closed too). The body's data source relies on the same.
/// After the connection closes nothing is sent again, and deleting the session frees only nghttp2's own array.
private func withRequestNameValues<R>(_ r: HTTP2Request, _ body: (UnsafeMutablePointer<nghttp2_nv>, Int) -> R) -> R {
    let total = 1 + r.sharedFields.count + r.fields.count
    return r.sharedFields.withUnsafeFields { shared in
        r.fields.withUnsafeFields { own in
            withUnsafeTemporaryAllocation(of: nghttp2_nv.self, capacity: total) { nva in
                guard let nvBase = nva.baseAddress else {
                    preconditionFailure("a temporary allocation of nonzero capacity has a base address")
                }
                let scheme: StaticString = ":scheme"
                let https: StaticString = "https"
                let uncopied = UInt8(NGHTTP2_NV_FLAG_NO_COPY_NAME.rawValue | NGHTTP2_NV_FLAG_NO_COPY_VALUE.rawValue)
                let neverIndexed = uncopied | UInt8(NGHTTP2_NV_FLAG_NO_INDEX.rawValue)
                nvBase[0] = nghttp2_nv(
                    name: UnsafeMutablePointer(mutating: scheme.utf8Start),
                    value: UnsafeMutablePointer(mutating: https.utf8Start),
                    namelen: scheme.utf8CodeUnitCount, valuelen: https.utf8CodeUnitCount,
                    flags: uncopied)
                var i = 1
                func add(_ fields: HTTP2HeaderBlock.UnsafeFields, pseudo: Bool) {
                    for f in fields where (f.name.first == UInt8(ascii: ":")) == pseudo && i < total {
                        guard let name = f.name.baseAddress, let value = f.value.baseAddress else { continue }
                        nvBase[i] = nghttp2_nv(
                            name: UnsafeMutablePointer(mutating: name),
                            value: UnsafeMutablePointer(mutating: value),
                            namelen: f.name.count, valuelen: f.value.count,
                            flags: f.sensitive ? neverIndexed : uncopied)
                        i += 1
                    }
                }
                add(shared, pseudo: true)
                add(own, pseudo: true)
                add(shared, pseudo: false)
                add(own, pseudo: false)
                return body(nvBase, i)
            }
        }
    }
}

/// Builds the `nghttp2_nv` array of a response (":status" first) in temporary memory for the duration of `body`
/// (nghttp2 copies names and values). No intermediate arrays or Strings: one response costs no allocation here.
private func withResponseNameValues<R>(
    _ response: HTTP2Response,
    _ body: (UnsafeMutablePointer<nghttp2_nv>, Int) -> R
) -> R {
    let headers = response.headers
    var total = 3
    for h in headers { total += h.name.utf8.count + h.value.utf8.count }
    let statusText: String? = (100...999).contains(response.status) ? nil : String(response.status)
    if let t = statusText { total += t.utf8.count }
    return withUnsafeTemporaryAllocation(of: UInt8.self, capacity: total) { bytes in
        withUnsafeTemporaryAllocation(of: nghttp2_nv.self, capacity: headers.count + 1) { nva in
            guard let base = bytes.baseAddress, let nvBase = nva.baseAddress else {
                preconditionFailure("a temporary allocation of nonzero capacity has a base address")
            }
            var off = 0
            @inline(__always) func put(_ s: String, lowercase: Bool) -> Int {
                let start = base + off
                let k =
                    s.utf8.withContiguousStorageIfAvailable { src -> Int in
                        if let a = src.baseAddress { start.update(from: a, count: src.count) }
                        return src.count
                    }
                    ?? {
                        var k = 0
                        for b in s.utf8 {
                            start[k] = b
                            k += 1
                        }
                        return k
                    }()
                if lowercase {
                    for j in 0..<k where start[j] >= 65 && start[j] <= 90 { start[j] |= 0x20 } // RFC 9113 §8.2.1
                }
                off += k
                return k
            }
            let statusName: StaticString = ":status"
            let statusStart = base + off
            let statusLength: Int
            if let t = statusText {
                statusLength = put(t, lowercase: false)
            } else {
                let v = response.status
                base[off] = UInt8(48 + v / 100)
                base[off + 1] = UInt8(48 + v / 10 % 10)
                base[off + 2] = UInt8(48 + v % 10)
                off += 3
                statusLength = 3
            }
            nvBase[0] = nghttp2_nv(
                name: UnsafeMutablePointer(mutating: statusName.utf8Start), value: statusStart,
                namelen: statusName.utf8CodeUnitCount, valuelen: statusLength,
                flags: UInt8(NGHTTP2_NV_FLAG_NONE.rawValue))
            for (i, h) in headers.enumerated() {
                let nameStart = base + off
                let nlen = put(h.name, lowercase: true)
                let valueStart = base + off
                let vlen = put(h.value, lowercase: false)
                let flags =
                    h.sensitive ? UInt8(NGHTTP2_NV_FLAG_NO_INDEX.rawValue) : UInt8(NGHTTP2_NV_FLAG_NONE.rawValue)
                nvBase[i + 1] = nghttp2_nv(
                    name: nameStart, value: valueStart, namelen: nlen, valuelen: vlen, flags: flags)
            }
            return body(nvBase, headers.count + 1)
        }
    }
}
