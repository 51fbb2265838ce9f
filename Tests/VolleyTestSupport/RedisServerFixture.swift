import Foundation
import VolleyMock
import VolleyRedis

/// A test CA and what it signed, for Redis over TLS: the server certificate names `localhost` and 127.0.0.1; the
/// client certificate comes from a second CA the servers trust for clients (`tls-auth-clients optional`).
public struct RedisTestTLS: Sendable {
    public let caFile: String
    public let serverCertificateFile: String
    public let serverKeyFile: String
    public let clientCAFile: String
    public let clientCertificateFile: String
    public let clientKeyFile: String

    /// What a server trusts: the clients' CA, and the servers' CA for a cluster node's connections to the others.
    public let serverTrustFile: String

    /// Makes a fresh CA and certificates in `directory` (the mock's generator: real X.509, P-256).
    public init(directory: String) throws {
        let c = try MockCredentials.loadOrCreate(stateDirectory: directory)
        serverTrustFile = directory + "/server-trust.pem"
        let bundle =
            try String(contentsOfFile: c.clientCAFile, encoding: .utf8)
            + String(contentsOfFile: c.caFile, encoding: .utf8)
        try bundle.write(toFile: serverTrustFile, atomically: true, encoding: .utf8)
        caFile = c.caFile
        serverCertificateFile = c.serverCertificateFile
        serverKeyFile = c.serverKeyFile
        clientCAFile = c.clientCAFile
        clientCertificateFile = c.clientCertificateFile
        clientKeyFile = c.clientKeyFile
    }

    /// redis-server's arguments to serve TLS on `port` with these files.
    func serverArguments(port: Int) -> [String] {
        [
            "--tls-port", String(port), "--tls-cert-file", serverCertificateFile, "--tls-key-file", serverKeyFile,
            "--tls-ca-cert-file", serverTrustFile, "--tls-auth-clients", "optional",
            // A cluster node's own connections to the others (bus, replication) show the client certificate.
            "--tls-client-cert-file", clientCertificateFile, "--tls-client-key-file", clientKeyFile,
        ]
    }
}

/// A real `redis-server` on a unix socket in a fresh temp dir (`--port 0` disables TCP), and with `tls: true` also on
/// a loopback TLS port signed by a test CA (`tlsEndpoint`, `tls`).
/// Stop it with `stop()` (SIGKILL: Swift Testing's blocked-signal mask is inherited by children, §35) — call it
/// from a `defer`, since ARC may end the fixture's life early (§36). `restart()` keeps the socket path, so
/// clients reconnect to the same endpoint.
public final class RedisServerFixture: @unchecked Sendable {
    public let directory: URL
    public let socketPath: String
    public let extraArguments: [String]
    private var process: Process?
    private let lock = NSLock()

    public var endpoint: RedisEndpoint { .unix(socketPath) }
    public var url: String { "unix://\(socketPath)" }

    /// Starts the server. `extraArguments` are passed through (for example `--user alice on >pw ~* &* +@all`).
    /// `persistent`: append-only file fsynced on every write, so a SIGKILL + `restart()` loses nothing
    /// (for "Redis restarted mid-job" tests).
    public let persistent: Bool

    /// The test CA and certificates when started with `tls: true`.
    public let tls: RedisTestTLS?
    /// The TLS port when started with `tls: true`.
    public let tlsPort: Int?

    public init(extraArguments: [String] = [], persistent: Bool = false, tls: Bool = false) throws {
        self.persistent = persistent
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent(
            "volley-redis-\(UUID().uuidString.prefix(8))")
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        directory = dir
        socketPath = dir.appendingPathComponent("r.sock").path
        if tls {
            let material = try RedisTestTLS(directory: dir.appendingPathComponent("tls").path)
            let port = try RedisClusterFixture.freePorts(1)[0]
            self.tls = material
            tlsPort = port
            // The test's own arguments last: redis-server takes the last of a repeated option.
            self.extraArguments = material.serverArguments(port: port) + extraArguments
        } else {
            self.tls = nil
            tlsPort = nil
            self.extraArguments = extraArguments
        }
        try start()
    }

    /// `rediss://localhost:<tlsPort>` (nil without TLS).
    public var tlsURL: String? { tlsPort.map { "rediss://localhost:\($0)" } }

    deinit {
        stop()
        try? FileManager.default.removeItem(at: directory)
    }

    public static func redisServerPath() -> String {
        for p in ["/usr/bin/redis-server", "/usr/local/bin/redis-server", "/opt/homebrew/bin/redis-server"]
        where FileManager.default.isExecutableFile(atPath: p) { return p }
        return "redis-server"
    }

    public func start() throws {
        lock.lock()
        defer { lock.unlock() }
        guard process == nil else { return }
        try? FileManager.default.removeItem(atPath: socketPath)
        let p = Process()
        p.executableURL = URL(fileURLWithPath: RedisServerFixture.redisServerPath())
        p.arguments =
            [
                "--port", "0", "--unixsocket", socketPath, "--unixsocketperm", "700", "--save", "",
                "--appendonly", persistent ? "yes" : "no", "--appendfsync", "always", "--dir", directory.path,
                "--logfile", directory.appendingPathComponent("redis.log").path,
            ]
            + extraArguments
        p.standardOutput = FileHandle.nullDevice
        p.standardError = FileHandle.nullDevice
        try p.run()
        process = p
        // Wait until it answers PING (at most ~5 s).
        let deadline = Date().addingTimeInterval(5)
        var lastError = "socket file never appeared"
        while Date() < deadline {
            if FileManager.default.fileExists(atPath: socketPath) {
                do {
                    // With ACLs the default user may be refused: any reply means the server is up.
                    _ = try RedisConnection(endpoint: .unix(socketPath), connectTimeout: 0.5, commandTimeout: 1)
                        .command(["PING"])
                    return
                } catch {
                    lastError = "\(error)"
                }
            }
            usleep(20_000)
        }
        throw RedisError(
            .connection, "redis-server did not start on \(socketPath) (\(lastError)); see \(directory.path)/redis.log")
    }

    /// SIGKILL the server (a crash, from the clients' point of view).
    public func stop() {
        lock.lock()
        defer { lock.unlock() }
        guard let p = process else { return }
        kill(p.processIdentifier, SIGKILL)
        p.waitUntilExit()
        process = nil
    }

    /// SIGSTOP the server: a stall, from the clients' point of view (their connections stay open, nothing answers).
    /// Commands written meanwhile run when it resumes, even on connections their clients have given up.
    /// Returns once the kernel shows the server stopped: the signal is delivered asynchronously, and a command sent
    /// before it lands would still be answered.
    public func pause() {
        guard let pid = lock.withLock({ process?.processIdentifier }) else { return }
        _ = kill(pid, SIGSTOP)
        let deadline = Date().addingTimeInterval(5)
        while Date() < deadline, !Self.isStopped(pid) { sched_yield() }
    }

    /// `/proc/<pid>/stat`'s state (the field after the command's closing parenthesis) is `T`: stopped by a signal.
    static func isStopped(_ pid: pid_t) -> Bool {
        guard let stat = try? String(contentsOfFile: "/proc/\(pid)/stat", encoding: .utf8),
            let close = stat.lastIndex(of: ")")
        else { return false }
        return stat[stat.index(after: close)...].trimmingCharacters(in: .whitespaces).first == "T"
    }

    /// SIGCONT: the stall is over.
    public func resume() {
        lock.withLock { if let p = process { _ = kill(p.processIdentifier, SIGCONT) } }
    }

    /// Kill and start again on the same socket (all data lost: `--save ''`).
    public func restart() throws {
        stop()
        try start()
    }

    /// A fresh client for test assertions.
    public func client(name: String = "test") -> RedisClient {
        RedisClient(endpoint: endpoint, options: .init(giveUpAfter: 10), name: name)
    }
}
