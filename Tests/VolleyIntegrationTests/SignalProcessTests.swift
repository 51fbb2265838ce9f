import Foundation
import Testing
import VolleyService
import VolleyTestDoubles
import VolleyTestSupport
import VolleyTestTags

/// `volley worker` and `volley api` stop on SIGTERM/SIGINT at any time, Redis or not: pointed at a Redis address
/// where nothing listens, they exit within their drain deadline (plus process teardown), exit status 0.
@Suite(.serialized, .tags(.integration)) struct SignalProcessTests {
    /// A `volley` child process with its output in a log file; `exited` is set from its termination handler.
    final class VolleyProcess: @unchecked Sendable {
        let process = Process()
        let logFile: String
        private let lock = NSLock()
        private var exitedAt: Date?

        init(_ arguments: [String], logFile: String) throws {
            self.logFile = logFile
            FileManager.default.createFile(atPath: logFile, contents: nil)
            process.executableURL = URL(fileURLWithPath: try WorkerProcess.binary())
            process.arguments = arguments
            let log = try FileHandle(forWritingTo: URL(fileURLWithPath: logFile))
            process.standardOutput = log
            process.standardError = log
            process.terminationHandler = { [self] _ in lock.withLock { exitedAt = Date() } }
            try process.run()
        }

        var exited: Date? { lock.withLock { exitedAt } }
        var log: String { (try? String(contentsOfFile: logFile, encoding: .utf8)) ?? "" }
        func signal(_ s: Int32) { kill(process.processIdentifier, s) }
        func kill9() {
            kill(process.processIdentifier, SIGKILL)
            process.waitUntilExit()
        }
    }

    /// A TCP port on 127.0.0.1 that nothing listens on (bound, then closed): connecting is refused.
    static func deadPort() throws -> Int {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        #expect(fd >= 0)
        defer { close(fd) }
        var addr = sockaddr_in()
        addr.sin_family = sa_family_t(AF_INET)
        addr.sin_addr.s_addr = inet_addr("127.0.0.1")
        var len = socklen_t(MemoryLayout<sockaddr_in>.size)
        let bound = withUnsafeMutablePointer(to: &addr) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { p in
                bind(fd, p, len) == 0 && getsockname(fd, p, &len) == 0
            }
        }
        try #require(bound)
        return Int(UInt16(bigEndian: addr.sin_port))
    }

    /// A configuration whose Redis never answers (the mock's apps), with `extra` YAML sections.
    static func config(dir: URL, mock: MockServerFixture, extra: String) throws -> String {
        var l = LocalConfiguration(
            mockHost: mock.host, mockPort: mock.port, caFile: mock.caFile, apnsKeyFile: mock.apnsKeyFile,
            apnsKeyID: mock.apnsKeyID, apnsTeamID: mock.apnsTeamID, apnsTopic: mock.apnsTopic,
            serviceAccountFile: mock.serviceAccountFile, redisURL: "redis://127.0.0.1:\(try deadPort())")
        l.appName = "app1"
        l.logLevel = "info"
        let path = dir.appendingPathComponent("volley-\(UUID().uuidString.prefix(6)).yaml").path
        try (l.yaml + extra).write(toFile: path, atomically: true, encoding: .utf8)
        return path
    }

    static func tempDir() throws -> URL {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent(
            "volley-signals-\(UUID().uuidString.prefix(8))")
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        return dir
    }

    /// Sends `signal` once `ready` shows in the log, then waits for the exit: within `drainSeconds` + `margin`.
    static func stops(
        _ p: VolleyProcess, on signal: Int32, when ready: String, drainSeconds: Double, margin: Double = 4
    ) async throws {
        try await waitUntil("\(ready) in the log: \(p.log.suffix(2000))", timeout: .seconds(30)) {
            p.log.contains(ready)
        }
        let sent = Date()
        p.signal(signal)
        try await waitUntil(
            "the process to exit after the signal: \(p.log.suffix(2000))",
            timeout: .seconds(drainSeconds + margin + 10)
        ) { p.exited != nil }
        let took = try #require(p.exited).timeIntervalSince(sent)
        #expect(took < drainSeconds + margin, "exited \(took) s after the signal: \(p.log.suffix(2000))")
        #expect(p.process.terminationStatus == 0, "\(p.log.suffix(2000))")
    }

    @Test(arguments: [SIGTERM, SIGINT])
    func workerWaitingForRedisStops(_ signal: Int32) async throws {
        let dir = try Self.tempDir()
        defer { try? FileManager.default.removeItem(at: dir) }
        let mock = try MockServerFixture()
        defer { mock.stop() }
        let config = try Self.config(dir: dir, mock: mock, extra: "worker:\n  drainSeconds: 2\n")
        let p = try VolleyProcess(
            ["worker", "--config", config, "--consumer", "w"], logFile: dir.appendingPathComponent("w.log").path)
        defer { if p.exited == nil { p.kill9() } }
        // The reader's wait for Redis: the worker runs under its service group, which takes the signals.
        try await Self.stops(p, on: signal, when: "conn=reader", drainSeconds: 2)
        #expect(p.log.contains("stopped before Redis answered"))
    }

    @Test(arguments: [SIGTERM, SIGINT])
    func apiWithoutRedisStops(_ signal: Int32) async throws {
        let dir = try Self.tempDir()
        defer { try? FileManager.default.removeItem(at: dir) }
        let mock = try MockServerFixture()
        defer { mock.stop() }
        let config = try Self.config(dir: dir, mock: mock, extra: "api:\n  port: 0\n  drainSeconds: 1\n")
        let p = try VolleyProcess(["api", "--config", config], logFile: dir.appendingPathComponent("api.log").path)
        defer { if p.exited == nil { p.kill9() } }
        // Hummingbird's line, logged once the service group (which takes the signals) runs the server.
        try await Self.stops(p, on: signal, when: "Server started and listening", drainSeconds: 1)
    }
}
