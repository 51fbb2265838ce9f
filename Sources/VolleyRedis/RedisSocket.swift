import Foundation
import VolleyHTTP2

/// The byte stream under a blocking `RedisConnection`: a TCP or unix socket, with TLS on it for `rediss://`. The
/// socket is non-blocking and every wait is a `poll` bounded by the timeout given, so a connect, a TLS handshake, a
/// write and a read each fail with a connection error when Redis stays silent that long (as hiredis's socket
/// timeouts did), and a plain and a TLS connection wait the same way. Owned by one thread at a time.
final class RedisSocket {
    private let fd: Int32
    private let tls: TLSClientSession?
    private let endpoint: RedisEndpoint

    /// Connects within `timeout` seconds and, for TLS, completes the handshake within the same budget.
    init(endpoint: RedisEndpoint, timeout: Double) throws {
        self.endpoint = endpoint
        let deadline = Self.now() + max(0.001, timeout)
        let fd: Int32
        switch endpoint.address {
        case .tcp(let host, let port): fd = try Self.connectTCP(host: host, port: port, deadline: deadline, endpoint)
        case .unix(let path): fd = try Self.connectUnix(path: path, deadline: deadline, endpoint)
        }
        self.fd = fd
        guard let settings = endpoint.tls else {
            tls = nil
            return
        }
        let session: TLSClientSession
        do {
            let trust = try settings.trust()
            session = try TLSClientSession(trust: trust, fd: fd, serverName: settings.serverName(for: endpoint))
        } catch let e as RedisError {
            close(fd)
            throw e
        } catch {
            close(fd)
            throw RedisError(.connection, "TLS to \(endpoint): \(error)")
        }
        tls = session
        // From here the socket is whole: a throw deinitializes it, and `deinit` closes the fd, once. (Closing it here
        // too closed it twice, and the second close could take the fd number another thread had just been given:
        // an API test's listening socket, in a parallel run beside a refused TLS connection.)
        while true {
            switch session.handshake() {
            case .done: return
            case .wantRead: try wait(POLLIN, until: deadline, "TLS handshake with")
            case .wantWrite: try wait(POLLOUT, until: deadline, "TLS handshake with")
            case .closed:
                throw RedisError(.connection, "TLS handshake with \(endpoint): the server closed the connection")
            case .rejectedCertificate(let why):
                throw RedisError(
                    .certificate,
                    "TLS to \(endpoint): \(why) (server name \(settings.serverName(for: endpoint))); check "
                        + "redis.tls.caFile and redis.tls.serverName")
            case .failed(let why):
                throw RedisError(.connection, "TLS handshake with \(endpoint): \(why)")
            }
        }
    }

    deinit {
        tls?.close()
        close(fd)
    }

    /// Writes all of `bytes`, waiting at most `timeout` seconds each time the socket cannot take more.
    func write(_ bytes: UnsafeRawBufferPointer, timeout: Double) throws {
        guard let base = bytes.baseAddress else { return }
        var done = 0
        while done < bytes.count {
            let rest = base + done
            let count = bytes.count - done
            done += try transfer("write to", timeout: timeout) {
                if let tls { return tls.write(rest, count) }
                return Self.plain(Glibc.write(fd, rest, count), blocked: .wantWrite)
            }
        }
    }

    /// Reads what has arrived (at least one byte) into `buffer`, waiting at most `timeout` seconds for it.
    func read(into buffer: UnsafeMutableRawBufferPointer, timeout: Double) throws -> Int {
        guard let base = buffer.baseAddress, buffer.count > 0 else { return 0 }
        return try transfer("read from", timeout: timeout) {
            if let tls { return tls.read(base, buffer.count) }
            return Self.plain(Glibc.read(fd, base, buffer.count), blocked: .wantRead)
        }
    }

    /// Runs `attempt` until it moves bytes, waiting for the socket as it asks (at most `timeout` seconds a wait);
    /// the end of the stream and any error are a connection error, `what` the endpoint.
    private func transfer(_ what: String, timeout: Double, _ attempt: () -> TLSClientSession.Step) throws -> Int {
        while true {
            switch attempt() {
            case .done(0): continue // interrupted: at once again
            case .done(let n): return n
            case .wantRead: try wait(POLLIN, timeout: timeout, what)
            case .wantWrite: try wait(POLLOUT, timeout: timeout, what)
            case .closed: throw RedisError(.connection, "\(what) \(endpoint): the server closed the connection")
            case .rejectedCertificate(let why), .failed(let why):
                throw RedisError(.connection, "\(what) \(endpoint): \(why)")
            }
        }
    }

    /// A plain read(2) or write(2) result as the TLS session states it: bytes, the wait a full or empty socket
    /// needs (`blocked`), the end of the stream, or the error; an interrupted call is tried again at once.
    private static func plain(_ n: Int, blocked: TLSClientSession.Step) -> TLSClientSession.Step {
        if n > 0 { return .done(n) }
        if n == 0 { return .closed }
        switch errno {
        case EAGAIN, EWOULDBLOCK: return blocked
        case EINTR: return .done(0)
        default: return .failed(errorText(errno))
        }
    }

    // MARK: - waiting

    private func wait(_ events: Int32, timeout: Double, _ what: String) throws {
        try wait(events, until: Self.now() + max(0, timeout), what)
    }

    private func wait(_ events: Int32, until deadline: Double, _ what: String) throws {
        try Self.poll(fd, events, until: deadline) { "\(what) \(endpoint): \($0)" }
    }

    /// Waits until `fd` is ready for `events` or `deadline` (monotonic seconds) passes.
    private static func poll(_ fd: Int32, _ events: Int32, until deadline: Double, _ message: (String) -> String)
        throws
    {
        while true {
            let left = deadline - now()
            if left <= 0 { throw RedisError(.connection, message("timed out")) }
            var p = pollfd(fd: fd, events: Int16(events), revents: 0)
            let rc = Glibc.poll(&p, 1, Int32(min(left * 1000, Double(Int32.max)).rounded(.up)))
            if rc > 0 { return } // readable, writable, or an error the next call reports
            if rc < 0, errno != EINTR { throw RedisError(.connection, message(errorText(errno))) }
        }
    }

    /// Monotonic seconds (the transport's clock): deadlines do not move with the wall clock.
    private static func now() -> Double { Double(monotonicNanos()) / 1e9 }

    private static func errorText(_ code: Int32) -> String { String(cString: strerror(code)) }

    // MARK: - connecting

    /// Tries each address the name resolves to until one connects.
    private static func connectTCP(host: String, port: Int, deadline: Double, _ endpoint: RedisEndpoint) throws
        -> Int32
    {
        var hints = addrinfo()
        hints.ai_family = AF_UNSPEC
        hints.ai_socktype = Int32(SOCK_STREAM.rawValue)
        var list: UnsafeMutablePointer<addrinfo>?
        let rc = getaddrinfo(host, String(port), &hints, &list)
        guard rc == 0, let list else {
            throw RedisError(
                .connection, "connect to \(endpoint): cannot resolve \(host): \(String(cString: gai_strerror(rc)))")
        }
        defer { freeaddrinfo(list) }
        var lastError = "no address"
        var next: UnsafeMutablePointer<addrinfo>? = list
        while let a = next {
            next = a.pointee.ai_next
            do {
                let fd = try connectSocket(
                    family: a.pointee.ai_family, address: a.pointee.ai_addr, length: a.pointee.ai_addrlen,
                    deadline: deadline, endpoint)
                var one: Int32 = 1
                setsockopt(fd, Int32(IPPROTO_TCP), TCP_NODELAY, &one, socklen_t(MemoryLayout<Int32>.size))
                setKeepAlive(fd)
                return fd
            } catch let e as RedisError {
                lastError = e.message
            }
        }
        throw RedisError(.connection, lastError)
    }

    private static func connectUnix(path: String, deadline: Double, _ endpoint: RedisEndpoint) throws -> Int32 {
        var address = sockaddr_un()
        address.sun_family = sa_family_t(AF_UNIX)
        let bytes = Array(path.utf8)
        let capacity = MemoryLayout.size(ofValue: address.sun_path)
        guard bytes.count < capacity else {
            throw RedisError(.invalidEndpoint, "unix socket path longer than \(capacity - 1) bytes: \(path)")
        }
        withUnsafeMutableBytes(of: &address.sun_path) { raw in
            raw.copyBytes(from: bytes)
            raw[bytes.count] = 0
        }
        return try withUnsafePointer(to: &address) { p in
            try p.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                try connectSocket(
                    family: AF_UNIX, address: $0, length: socklen_t(MemoryLayout<sockaddr_un>.size),
                    deadline: deadline, endpoint)
            }
        }
    }

    /// A non-blocking socket connected to `address`, or a connection error naming the endpoint.
    private static func connectSocket(
        family: Int32, address: UnsafePointer<sockaddr>?, length: socklen_t, deadline: Double,
        _ endpoint: RedisEndpoint
    ) throws -> Int32 {
        let fd = socket(
            family, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_NONBLOCK.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard fd >= 0 else { throw RedisError(.connection, "connect to \(endpoint): socket: \(errorText(errno))") }
        var rc: Int32
        repeat { rc = connect(fd, address, length) } while rc < 0 && errno == EINTR
        if rc < 0 && errno != EINPROGRESS && errno != EAGAIN {
            let e = errno
            close(fd)
            throw RedisError(.connection, "connect to \(endpoint): \(errorText(e))")
        }
        if rc < 0 {
            do {
                try poll(fd, POLLOUT, until: deadline) { "connect to \(endpoint): \($0)" }
            } catch {
                close(fd)
                throw error
            }
            var failure: Int32 = 0
            var size = socklen_t(MemoryLayout<Int32>.size)
            getsockopt(fd, SOL_SOCKET, SO_ERROR, &failure, &size)
            if failure != 0 {
                close(fd)
                throw RedisError(.connection, "connect to \(endpoint): \(errorText(failure))")
            }
        }
        return fd
    }

    /// TCP keep-alive as hiredis set it: probes after 15 s idle, every 5 s, three missed ones end the connection, so
    /// a connection whose peer vanished (a failed-over node, a dropped NAT entry) is found dead.
    private static func setKeepAlive(_ fd: Int32) {
        var on: Int32 = 1
        var idle: Int32 = 15
        var interval: Int32 = 5
        var count: Int32 = 3
        let size = socklen_t(MemoryLayout<Int32>.size)
        setsockopt(fd, SOL_SOCKET, SO_KEEPALIVE, &on, size)
        setsockopt(fd, Int32(IPPROTO_TCP), TCP_KEEPIDLE, &idle, size)
        setsockopt(fd, Int32(IPPROTO_TCP), TCP_KEEPINTVL, &interval, size)
        setsockopt(fd, Int32(IPPROTO_TCP), TCP_KEEPCNT, &count, size)
    }
}
