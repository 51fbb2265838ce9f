internal import COpenSSL
// The server's arrival-time read BIO: an OpenSSL BIO of our own that reads the socket with recvmsg and
// SO_TIMESTAMPNS, so delayed answers count from when a request reached this host.
import Foundation
import VolleyHTTP2

extension TLSConnection {
    /// Reads the socket with recvmsg and SO_TIMESTAMPNS through a BIO of our own (writes keep OpenSSL's socket BIO),
    /// so a server can count a delay from when a request arrived rather than from when its thread got to read it.
    /// Call before the handshake. Returns the times the BIO records (`latestNanos`); nil (and nothing changed) when
    /// the kernel or OpenSSL refuses.
    func readWithArrivalTimes(fd: Int32) -> ArrivalTimes? {
        guard let method = arrivalBIOMethod else { return nil }
        var one: Int32 = 1
        guard setsockopt(fd, SOL_SOCKET, soTimestampNS, &one, socklen_t(MemoryLayout<Int32>.size)) == 0,
            let bio = BIO_new(method)
        else { return nil }
        let times = ArrivalTimes(fd: fd)
        BIO_set_data(bio, Unmanaged.passRetained(times).toOpaque()) // released by the method's destroy
        SSL_set0_rbio(pointer, bio) // the SSL takes ownership; the socket BIO stays the write BIO
        return times
    }
}

// MARK: the arrival-time read BIO

/// SO_TIMESTAMPNS with a 64-bit time_t (x86-64, arm64: SO_TIMESTAMPNS_OLD); the macro itself does not import.
private let soTimestampNS: Int32 = 35

/// The state of one arrival-time BIO: its socket and the latest receive time seen. Touched only by the BIO's read,
/// which runs inside SSL calls on the connection's queue.
final class ArrivalTimes {
    let fd: Int32
    /// When the bytes read so far reached this host, as CLOCK_MONOTONIC nanoseconds: the kernel's receive time of
    /// the last segment consumed (a bound no earlier than any byte read so far); 0 until a timestamp was seen.
    var latestNanos: UInt64 = 0
    init(fd: Int32) { self.fd = fd }
}

/// Read-only source/sink BIO over a socket: recvmsg, then the SCM_TIMESTAMPNS control message (CLOCK_REALTIME)
/// converted to CLOCK_MONOTONIC. Made once per process; nil if OpenSSL refuses.
nonisolated(unsafe) private let arrivalBIOMethod: OpaquePointer? = {
    let index = BIO_get_new_index()
    guard index > 0, let m = BIO_meth_new(index | BIO_TYPE_SOURCE_SINK, "volley socket reader with arrival times")
    else {
        return nil
    }
    BIO_meth_set_read(m, arrivalBIORead)
    BIO_meth_set_ctrl(m) { bio, cmd, _, _ in
        switch cmd {
        case BIO_CTRL_FLUSH: return 1
        case BIO_CTRL_EOF: return BIO_test_flags(bio, BIO_FLAGS_IN_EOF) != 0 ? 1 : 0 // as the socket BIO answers
        default: return 0
        }
    }
    BIO_meth_set_create(m) { bio in
        BIO_set_init(bio, 1)
        return 1
    }
    BIO_meth_set_destroy(m) { bio in
        if let data = BIO_get_data(bio) { Unmanaged<ArrivalTimes>.fromOpaque(data).release() }
        BIO_set_data(bio, nil)
        return 1
    }
    return m
}()

private let arrivalBIORead: @convention(c) (OpaquePointer?, UnsafeMutablePointer<CChar>?, Int32) -> Int32 = {
    bio, buf, len in
    guard let bio, let buf, len > 0, let data = BIO_get_data(bio) else { return 0 }
    let times = Unmanaged<ArrivalTimes>.fromOpaque(data).takeUnretainedValue()
    // BIO_clear_retry_flags, a macro Swift cannot call.
    BIO_clear_flags(bio, BIO_FLAGS_READ | BIO_FLAGS_WRITE | BIO_FLAGS_IO_SPECIAL | BIO_FLAGS_SHOULD_RETRY)
    var control: (UInt64, UInt64, UInt64, UInt64, UInt64, UInt64, UInt64, UInt64) = (0, 0, 0, 0, 0, 0, 0, 0)
    let n: Int = withUnsafeMutableBytes(of: &control) { ctl in
        var iov = iovec(iov_base: UnsafeMutableRawPointer(buf), iov_len: Int(len))
        return withUnsafeMutablePointer(to: &iov) { iovp in
            var msg = msghdr()
            msg.msg_iov = iovp
            msg.msg_iovlen = 1
            msg.msg_control = ctl.baseAddress
            msg.msg_controllen = ctl.count
            let n = recvmsg(times.fd, &msg, 0)
            if n > 0 {
                recordArrival(
                    control: UnsafeRawBufferPointer(rebasing: ctl[0..<min(ctl.count, Int(msg.msg_controllen))]), times)
            }
            return n
        }
    }
    if n > 0 { return Int32(n) }
    if n == 0 { // the peer closed: flagged like OpenSSL's socket BIO, so TLS reports an unexpected EOF the same way
        BIO_set_flags(bio, BIO_FLAGS_IN_EOF)
        return 0
    }
    if errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR {
        BIO_set_flags(bio, BIO_FLAGS_READ | BIO_FLAGS_SHOULD_RETRY)
    }
    return -1
}

/// Walks the control messages (cmsghdr: 8-byte length, level, type; data 8-aligned) for SCM_TIMESTAMPNS.
private func recordArrival(control: UnsafeRawBufferPointer, _ times: ArrivalTimes) {
    let header = MemoryLayout<cmsghdr>.size
    var at = 0
    while at + header <= control.count {
        let length = Int(control.loadUnaligned(fromByteOffset: at, as: Int.self))
        let level = control.loadUnaligned(fromByteOffset: at + 8, as: Int32.self)
        let type = control.loadUnaligned(fromByteOffset: at + 12, as: Int32.self)
        guard length >= header, at + length <= control.count else { return }
        if level == SOL_SOCKET && type == soTimestampNS && length >= header + 16 {
            let sec = control.loadUnaligned(fromByteOffset: at + header, as: Int64.self)
            let nsec = control.loadUnaligned(fromByteOffset: at + header + 8, as: Int64.self)
            var real = timespec()
            var mono = timespec()
            clock_gettime(CLOCK_REALTIME, &real)
            clock_gettime(CLOCK_MONOTONIC, &mono)
            let realNow = Int64(real.tv_sec) * 1_000_000_000 + Int64(real.tv_nsec)
            let monoNow = Int64(mono.tv_sec) * 1_000_000_000 + Int64(mono.tv_nsec)
            let age = max(0, realNow - (sec * 1_000_000_000 + nsec)) // never in the future
            let arrival = UInt64(max(0, monoNow - age))
            if arrival > times.latestNanos { times.latestNanos = arrival }
            return
        }
        at += (length + 7) & ~7
    }
}
