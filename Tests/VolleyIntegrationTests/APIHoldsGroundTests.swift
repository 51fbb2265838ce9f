import Foundation
import Testing
import VolleyAPI
import VolleyCore
import VolleyService
import VolleyTestDoubles
import VolleyTestSupport
import VolleyTestTags

#if canImport(Glibc)
    import Glibc
#endif
#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// A `volley api` child process, its ports read from its log (both listeners take free ports).
final class APIProcess: @unchecked Sendable {
    let process = Process()
    let logFile: String

    init(config: String, logDirectory: URL) throws {
        logFile = logDirectory.appendingPathComponent("api-\(UUID().uuidString.prefix(6)).log").path
        FileManager.default.createFile(atPath: logFile, contents: nil)
        process.executableURL = URL(fileURLWithPath: try WorkerProcess.binary())
        process.arguments = ["api", "--config", config]
        let log = try FileHandle(forWritingTo: URL(fileURLWithPath: logFile))
        process.standardOutput = log
        process.standardError = log
        try process.run()
    }

    var log: String { (try? String(contentsOfFile: logFile, encoding: .utf8)) ?? "" }

    /// The operations endpoint's port (`operations endpoint listening … address=127.0.0.1:P`).
    var operationsPort: Int? {
        guard let r = log.range(of: #"address=127\.0\.0\.1:[0-9]+"#, options: .regularExpression) else { return nil }
        return Int(log[r].split(separator: ":").last ?? "")
    }

    /// The API's port: the listener that is not the operations endpoint.
    var apiPort: Int? {
        guard let operations = operationsPort else { return nil }
        let text = log
        var found: Int?
        var rest = text[...]
        while let r = rest.range(of: #"listening on 127\.0\.0\.1:[0-9]+"#, options: .regularExpression) {
            if let p = Int(rest[r].split(separator: ":").last ?? ""), p != operations, p != 0 { found = p }
            rest = rest[r.upperBound...]
        }
        return found
    }

    func stop() {
        kill(process.processIdentifier, SIGKILL)
        process.waitUntilExit()
    }
}

/// One TCP connection to 127.0.0.1, read without blocking: what a hostile or slow client holds open.
final class RawConnection {
    let fd: Int32
    private(set) var received: [UInt8] = []
    private(set) var closed = false

    init(port: Int) throws {
        fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = in_port_t(UInt16(port).bigEndian)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        let result = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size))
            }
        }
        if result != 0 {
            close(fd)
            throw Failure(message: "connect to \(port): errno \(errno)")
        }
    }

    deinit { close(fd) }

    func send(_ text: String) {
        var bytes = Array(text.utf8)
        _ = bytes.withUnsafeMutableBytes { Glibc.send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
    }

    /// Reads what has arrived; true once the server has closed the connection.
    @discardableResult
    func poll() -> Bool {
        var buffer = [UInt8](repeating: 0, count: 4096)
        while !closed {
            let n = buffer.withUnsafeMutableBytes { recv(fd, $0.baseAddress, $0.count, Int32(MSG_DONTWAIT)) }
            if n > 0 {
                received += buffer[0..<n]
            } else if n == 0 || (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) {
                closed = true
            } else {
                break
            }
        }
        return closed
    }

    var text: String { String(decoding: received, as: UTF8.self) }

    struct Failure: Error { let message: String }
}

/// Hostile clients and bad input against a real `volley api` on real Redis: silent connections are closed and make
/// room for clients that speak, a connection over a cap of busy ones is refused with 503, both `/livez` answer;
/// what every worker would refuse is a 400 naming the field that writes nothing and leaves the Idempotency-Key
/// unused; `/readyz` has a deadline.
@Suite(.serialized, .tags(.integration)) struct APIHoldsGroundTests {
    /// `GET /livez` on its own connection (so no client pool holds a connection slot); the status, 0 when the API
    /// closed without answering.
    static func livez(port: Int) async throws -> Int {
        let c = try RawConnection(port: port)
        c.send("GET /livez HTTP/1.1\r\nHost: volley\r\nConnection: close\r\n\r\n")
        try await waitUntil("an answer to GET /livez", timeout: .seconds(30)) { c.poll() }
        guard let line = c.text.split(separator: "\r\n").first, line.hasPrefix("HTTP/1.1 ") else { return 0 }
        return Int(line.split(separator: " ")[1]) ?? 0
    }

    static func operationsLivez(port: Int) async -> Int {
        guard let url = URL(string: "http://127.0.0.1:\(port)/livez") else { return 0 }
        var request = URLRequest(url: url)
        request.timeoutInterval = 5
        guard let (_, response) = try? await URLSession.shared.data(for: request) else { return 0 }
        return (response as? HTTPURLResponse)?.statusCode ?? 0
    }

    /// A `volley api` process on `w`'s Redis with these limits, once both its listeners are in its log.
    static func api(
        _ w: MockWorld, headerTimeoutSeconds: Double, idleTimeoutSeconds: Double, maxConnections: Int
    ) async throws -> APIProcess {
        var l = w.local
        l.logLevel = "info"
        let yaml =
            l.yaml + """
                api:
                  host: 127.0.0.1
                  port: 0
                  drainSeconds: 0
                  headerTimeoutSeconds: \(headerTimeoutSeconds)
                  idleTimeoutSeconds: \(idleTimeoutSeconds)
                  maxConnections: \(maxConnections)

                """
        let config = w.dir.appendingPathComponent("api-\(UUID().uuidString.prefix(6)).yaml").path
        try yaml.write(toFile: config, atomically: true, encoding: .utf8)
        let api = try APIProcess(config: config, logDirectory: w.dir)
        do {
            try await waitUntil("both listeners in the log", timeout: .seconds(60)) { api.apiPort != nil }
        } catch {
            api.stop()
            throw error
        }
        return api
    }

    @Test func silentConnectionsAreClosedAndConnectionsOverACapOfBusyOnesAreRefused() async throws {
        let w = try MockWorld()
        defer { w.stop() }
        // The idle timeout is far above the header timeout: a silent connection closed well before it was closed
        // by the header timeout.
        let api = try await Self.api(w, headerTimeoutSeconds: 2, idleTimeoutSeconds: 120, maxConnections: 20)
        defer { api.stop() }
        let port = try #require(api.apiPort, "\(api.log.suffix(2000))")
        let operations = try #require(api.operationsPort)
        #expect(try await Self.livez(port: port) == 200)

        // 20 keep-alive connections that have each had an answer: in use, the cap's 20.
        var busy: [RawConnection] = []
        for _ in 0..<20 {
            let c = try RawConnection(port: port)
            c.send("GET /livez HTTP/1.1\r\nHost: volley\r\n\r\n")
            busy.append(c)
        }
        try await waitUntil("every busy connection to have its answer", timeout: .seconds(30)) {
            busy.allSatisfy {
                _ = $0.poll()
                return $0.text.hasPrefix("HTTP/1.1 200 ")
            }
        }
        // Beyond the cap with no silent connection to close: answered 503 and closed at once.
        let over = try (0..<5).map { _ in try RawConnection(port: port) }
        try await waitUntil("the connections over the cap to be refused", timeout: .seconds(30)) {
            over.allSatisfy { $0.poll() }
        }
        for c in over { #expect(c.text.hasPrefix("HTTP/1.1 503 "), "\(c.text)") }
        #expect(busy.allSatisfy { !$0.poll() }, "a connection in use was closed to make room")
        // The operations endpoint is its own listener: it answers while the API is full.
        #expect(await Self.operationsLivez(port: operations) == 200)
        busy.removeAll()

        // 19 silent connections and one that stops in the middle of its header: the cap's 20, once the API has
        // counted the busy ones closed.
        try await waitUntil("the API to answer /livez after the busy connections closed", timeout: .seconds(30)) {
            (try? await Self.livez(port: port)) == 200
        }
        var held = try (0..<19).map { _ in try RawConnection(port: port) }
        let halfHeader = try RawConnection(port: port)
        halfHeader.send("GET /livez HTTP/1.1\r\nHost: volley\r\n")
        held.append(halfHeader)
        // Silent and half-sent connections are closed by the header timeout, long before the idle timeout.
        try await waitUntil("the silent connections to be closed", timeout: .seconds(60)) {
            held.allSatisfy { $0.poll() }
        }
        #expect(held.allSatisfy { $0.received.isEmpty }, "a silent connection got an answer")
        try await waitUntil("the API to answer /livez again", timeout: .seconds(30)) {
            (try? await Self.livez(port: port)) == 200
        }
        #expect(await Self.operationsLivez(port: operations) == 200)
    }

    @Test func aConnectionBeyondTheCapTakesTheLongestSilentOnesPlace() async throws {
        let w = try MockWorld()
        defer { w.stop() }
        // The header timeout is far above the test's waits: a silent connection closed here made room.
        let api = try await Self.api(w, headerTimeoutSeconds: 300, idleTimeoutSeconds: 60, maxConnections: 20)
        defer { api.stop() }
        let port = try #require(api.apiPort, "\(api.log.suffix(2000))")
        let held = try (0..<20).map { _ in try RawConnection(port: port) }
        // A client that speaks is served at the cap: the longest-silent connection is closed for it, unanswered.
        // It keeps its connection (keep-alive), so the count stays at the cap.
        let speaker = try RawConnection(port: port)
        speaker.send("GET /livez HTTP/1.1\r\nHost: volley\r\n\r\n")
        try await waitUntil("an answer to the client that spoke", timeout: .seconds(30)) {
            _ = speaker.poll()
            return speaker.text.contains("\r\n\r\n")
        }
        #expect(speaker.text.hasPrefix("HTTP/1.1 200 "), "\(speaker.text)")
        // (Which silent connection is the longest-silent depends on when each event loop set it up.)
        func closed() -> [RawConnection] { held.filter { $0.poll() } }
        try await waitUntil("a silent connection to be closed to make room", timeout: .seconds(30)) {
            closed().count == 1
        }
        // Five more silent connections close five more of the older ones; the rest stay.
        let newer = try (0..<5).map { _ in try RawConnection(port: port) }
        try await waitUntil("five more to be closed to make room", timeout: .seconds(30)) { closed().count == 6 }
        #expect(closed().allSatisfy { $0.received.isEmpty }, "a connection closed to make room got an answer")
        #expect(newer.allSatisfy { !$0.poll() })
        #expect(!speaker.poll(), "a connection that spoke was closed to make room")
    }

    // MARK: - What every worker would refuse

    static let job = #"{"app":"app1","recipients":["005A"],"notification":{"title":"Hi","body":"There"}}"#

    /// Notifications the providers' preparation refuses, the field the 400 names, and the fixed notification.
    static let refused: [(notification: String, field: String)] = [
        (#"{"title":"Hi","ttl":-1}"#, "notification.ttl"),
        (#"{"title":"Hi","ttl":2419201}"#, "notification.ttl"),
        (#"{"title":"Hi","priority":10.5}"#, "notification.priority"),
        (#"{"title":"\#(String(repeating: "x", count: 5000))"}"#, "notification"),
        (#"{"title":"Hi","pushType":"telegram"}"#, "notification.pushType"),
        (#"{"title":"Hi","relevanceScore":5}"#, "notification.relevanceScore"),
        (#"{"title":"Hi","collapseId":"\#(String(repeating: "c", count: 100))"}"#, "notification.collapseId"),
        (#"{"title":"Hi","interruptionLevel":"loud"}"#, "notification.interruptionLevel"),
        (#"{"title":"Hi","badge":-1}"#, "notification.badge"),
    ]

    @Test func whatEveryWorkerWouldRefuseIsA400ThatWritesNothing() async throws {
        let w = try MockWorld()
        defer { w.stop() }
        let api = try await RunningAPI(configFile: try APIServerTests.config(w))
        let send = try APIServerTests.key(w, org: "orgA", role: .send)
        for (i, bad) in Self.refused.enumerated() {
            let before = try APIServerTests.streamLength(w)
            let key = "refused-\(i)"
            let answer = try await api.call(
                "POST", "/v1/jobs", token: send,
                json: #"{"app":"app1","recipients":["005A"],"notification":\#(bad.notification)}"#,
                headers: ["Idempotency-Key": key])
            #expect(answer.status == 400, "\(bad.field): \(answer.text)")
            #expect(answer.field == bad.field, "\(answer.text)")
            #expect(try APIServerTests.streamLength(w) == before, "\(bad.field): a refused job reached the stream")
            // The key was not used up: the corrected job under the same key is a new job.
            let fixed = try await api.call(
                "POST", "/v1/jobs", token: send, json: Self.job, headers: ["Idempotency-Key": key])
            #expect(fixed.status == 202, "\(bad.field): \(fixed.text)")
            #expect(fixed.headers["idempotent-replayed"] == nil)
            #expect(try APIServerTests.streamLength(w) == before + 1)
        }
        // OneSignal's spellings are taken as APNs's and Volley's.
        let spelled = try await api.call(
            "POST", "/v1/jobs", token: send,
            json: #"""
                {"app":"app1","recipients":["005A"],
                 "notification":{"title":"Hi","interruptionLevel":"time_sensitive","priority":7,"ttl":2419200}}
                """#)
        #expect(spelled.status == 202, "\(spelled.text)")
        await api.stop()
    }

    @Test func bodiesAreJSONOfOneDialectAndErrorsNameTheField() async throws {
        let w = try MockWorld()
        defer { w.stop() }
        let api = try await RunningAPI(configFile: try APIServerTests.config(w))
        let admin = try APIServerTests.key(w, org: "orgA", role: .admin)
        let before = try APIServerTests.streamLength(w)
        let form = try await api.call(
            "POST", "/v1/jobs", token: admin, body: Data(Self.job.utf8),
            headers: ["Content-Type": "application/x-www-form-urlencoded"])
        #expect(form.status == 415, "\(form.text)")
        #expect(form.field == "Content-Type")
        #expect(try APIServerTests.streamLength(w) == before)
        let charset = try await api.call(
            "POST", "/v1/jobs", token: admin, body: Data(Self.job.utf8),
            headers: ["Content-Type": "application/json; charset=utf-8"])
        #expect(charset.status == 202, "\(charset.text)")
        let connect = try await api.call(
            "POST", "/services/data/v60.0/connect/notifications/push", token: admin, body: Data("{}".utf8),
            headers: ["Content-Type": "text/plain"])
        #expect(connect.status == 415)
        #expect(connect.text.contains("UNSUPPORTED_MEDIA_TYPE"), "\(connect.text)")

        let trailingComma = try await api.call(
            "PUT", "/v1/types/t1", token: admin, json: #"{"name":"Orders",}"#)
        #expect(trailingComma.status == 400, "\(trailingComma.text)")
        #expect(trailingComma.field == "body")
        let comment = try await api.call(
            "POST", "/v1/user-tokens", token: admin, json: "{\"userId\":\"005A\" /* who */, \"appName\":\"app1\"}")
        #expect(comment.status == 400, "\(comment.text)")
        let wrongType = try await api.call("PUT", "/v1/types/t1", token: admin, json: #"{"name":5}"#)
        #expect(wrongType.status == 400)
        #expect(wrongType.field == "name", "\(wrongType.text)")
        let ttl = try await api.call(
            "POST", "/v1/user-tokens", token: admin, json: #"{"userId":"005A","appName":"app1","ttlSeconds":"x"}"#)
        #expect(ttl.status == 400)
        #expect(ttl.field == "ttlSeconds", "\(ttl.text)")
        let title = try await api.call(
            "POST", "/v1/test-push", token: admin,
            json: #"{"app":"app1","platform":"ios","token":"abc","notification":{"title":7},"dryRun":true}"#)
        #expect(title.status == 400)
        #expect(title.field == "notification.title", "\(title.text)")
        await api.stop()
    }

    @Test func readyzTurns503WhileRedisStallsAndRecovers() async throws {
        let w = try MockWorld()
        defer { w.stop() }
        let api = try await RunningAPI(
            configFile: try APIServerTests.config(w, extra: "  readinessTimeoutSeconds: 0.5\n"))
        #expect(try await api.call("GET", "/readyz").status == 200)
        w.redis.pause()
        defer { w.redis.resume() }
        let stalled = try await api.call("GET", "/readyz")
        #expect(stalled.status == 503, "\(stalled.text)")
        #expect(stalled.text.contains("api.readinessTimeoutSeconds"), "\(stalled.text)")
        w.redis.resume()
        try await waitUntil("/readyz to answer 200 again", timeout: .seconds(30)) {
            (try? await api.call("GET", "/readyz").status) == 200
        }
        await api.stop()
    }
}
