// A throwaway PKI made with the openssl CLI, and small HTTP2Server handlers for the transport tests.
import Dispatch
import Foundation
import Logging
import Synchronization
import VolleyHTTP2
import VolleyHTTP2Server

enum PKIError: Error { case openssl(String) }

/// Certificates for the tests, created once per test process in a temp directory.
struct TestPKI: Sendable {
    let dir: String
    var caFile: String { dir + "/ca.pem" }
    var otherCAFile: String { dir + "/other-ca.pem" }
    var serverCert: String { dir + "/server.pem" }
    var serverKey: String { dir + "/server.key" }
    var wrongHostCert: String { dir + "/wrong.pem" }
    var wrongHostKey: String { dir + "/wrong.key" }
    var clientCert: String { dir + "/client.pem" }
    var clientKey: String { dir + "/client.key" }
    var clientKeyEncrypted: String { dir + "/client-enc.key" }
    var clientP12: String { dir + "/client.p12" }
    var expiredCert: String { dir + "/expired.pem" }
    var expiredKey: String { dir + "/expired.key" }
    var futureCert: String { dir + "/future.pem" }
    var futureKey: String { dir + "/future.key" }
    static let p12Password = "p12-secret"
    static let keyPassphrase = "pem-secret"

    static let shared: Result<TestPKI, Error> = Result { try TestPKI.make() }

    static func get() throws -> TestPKI { try shared.get() }

    private static func run(_ args: [String], in dir: String) throws {
        let p = Process()
        p.executableURL = URL(fileURLWithPath: "/usr/bin/openssl")
        p.arguments = args
        p.currentDirectoryURL = URL(fileURLWithPath: dir)
        let err = Pipe()
        p.standardError = err
        p.standardOutput = FileHandle.nullDevice
        try p.run()
        let data = err.fileHandleForReading.readDataToEndOfFile()
        p.waitUntilExit()
        if p.terminationStatus != 0 {
            throw PKIError.openssl("openssl \(args.joined(separator: " ")): \(String(decoding: data, as: UTF8.self))")
        }
    }

    private static func make() throws -> TestPKI {
        let dir = NSTemporaryDirectory() + "volley-http2-tests-\(getpid())-\(UInt32.random(in: 0...UInt32.max))"
        try FileManager.default.createDirectory(atPath: dir + "/newcerts", withIntermediateDirectories: true)
        func r(_ s: String) throws { try run(s.split(separator: " ").map(String.init), in: dir) }
        func ca(_ name: String, _ cn: String) throws {
            try run(
                [
                    "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes",
                    "-keyout", "\(name).key", "-out", "\(name).pem", "-days", "30", "-subj", "/CN=\(cn)",
                    "-addext", "basicConstraints=critical,CA:TRUE", "-addext", "keyUsage=critical,keyCertSign,cRLSign",
                ], in: dir)
        }
        try ca("ca", "Volley Test CA")
        try ca("other-ca", "Some Other CA")
        func leaf(_ name: String, _ cn: String, _ ext: String) throws {
            try run(
                [
                    "req", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes",
                    "-keyout", "\(name).key", "-out", "\(name).csr", "-subj", "/CN=\(cn)",
                ], in: dir)
            try ext.write(toFile: dir + "/\(name).ext", atomically: true, encoding: .utf8)
            try r(
                "x509 -req -in \(name).csr -CA ca.pem -CAkey ca.key -CAcreateserial -out \(name).pem -days 30 "
                    + "-extfile \(name).ext"
            )
        }
        try leaf("server", "localhost", "subjectAltName=IP:127.0.0.1,DNS:localhost\nextendedKeyUsage=serverAuth\n")
        try leaf("wrong", "wrong.example", "subjectAltName=DNS:wrong.example\nextendedKeyUsage=serverAuth\n")
        try leaf("client", "volley-test-client", "extendedKeyUsage=clientAuth\n")
        try r("pkcs8 -topk8 -in client.key -out client-enc.key -passout pass:\(keyPassphrase)")
        try r(
            "pkcs12 -export -in client.pem -inkey client.key -certfile ca.pem -out client.p12 -passout "
                + "pass:\(p12Password)"
        )
        // Expired and not-yet-valid client certificates need explicit dates: `openssl ca` can set them.
        try "".write(toFile: dir + "/index.txt", atomically: true, encoding: .utf8)
        try "1000\n".write(toFile: dir + "/serial", atomically: true, encoding: .utf8)
        let cnf = """
            [ ca ]
            default_ca = CA_default
            [ CA_default ]
            dir = \(dir)
            database = \(dir)/index.txt
            new_certs_dir = \(dir)/newcerts
            serial = \(dir)/serial
            default_md = sha256
            policy = policy_any
            unique_subject = no
            [ policy_any ]
            commonName = supplied
            """
        try cnf.write(toFile: dir + "/ca.cnf", atomically: true, encoding: .utf8)
        for (name, start, end) in [
            ("expired", "20200101000000Z", "20200201000000Z"),
            ("future", "20990101000000Z", "20990201000000Z"),
        ] {
            try run(
                [
                    "req", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes",
                    "-keyout", "\(name).key", "-out", "\(name).csr", "-subj", "/CN=\(name)-client",
                ], in: dir)
            try r(
                "ca -batch -config ca.cnf -cert ca.pem -keyfile ca.key -in \(name).csr -out \(name).pem -startdate "
                    + "\(start) -enddate \(end) -notext"
            )
        }
        return TestPKI(dir: dir)
    }
}

/// Records what the server saw and answers 200, optionally after a delay. Hooks run on the connection queue.
final class RecordingHandler: HTTP2ServerHandler, @unchecked Sendable {
    struct Seen {
        var ids: [String: Int] = [:]
        var requests = 0
        var opened = 0
        var closed = 0
        var subjects: [String] = []
    }
    let seen = Mutex(Seen())
    let delayMs: Int
    /// Called for each request before answering; return false to not answer (the hook decides).
    let hook: (@Sendable (HTTP2ServerRequest, HTTP2ServerConnection, HTTP2Responder, Int) -> Bool)?
    private let delayQueue = DispatchQueue(label: "test.delay", attributes: .concurrent)

    init(
        delayMs: Int = 0,
        hook: (@Sendable (HTTP2ServerRequest, HTTP2ServerConnection, HTTP2Responder, Int) -> Bool)? = nil
    ) {
        self.delayMs = delayMs
        self.hook = hook
    }

    func connectionOpened(_ connection: HTTP2ServerConnection) {
        seen.withLock { s in
            s.opened += 1
            if let sub = connection.clientCertificateSubject { s.subjects.append(sub) }
        }
    }
    func connectionClosed(_ connection: HTTP2ServerConnection) { seen.withLock { $0.closed += 1 } }

    func handle(_ request: HTTP2ServerRequest, on connection: HTTP2ServerConnection, respond: HTTP2Responder) {
        let n: Int = seen.withLock { s in
            s.requests += 1
            if let id = request.header("x-id") { s.ids[id, default: 0] += 1 }
            return s.requests
        }
        if let hook, !hook(request, connection, respond, n) { return }
        let response = HTTP2Response(
            status: 200, headers: [HTTP2Header("apns-id", request.header("x-id") ?? "")],
            body: Array(#"{"ok":true}"#.utf8))
        if delayMs > 0 {
            delayQueue.asyncAfter(deadline: .now() + .milliseconds(delayMs)) { respond(response) }
        } else {
            respond(response)
        }
    }
}

let testLogger = Logger(label: "volley.http2.tests")

struct TestServer {
    let server: HTTP2Server
    let port: Int
    let handler: RecordingHandler
}

func startServer(
    _ pki: TestPKI, handler: RecordingHandler, maxStreams: UInt32 = 1000, cert: String? = nil, key: String? = nil,
    clientCA: String? = nil, alpn: [String] = ["h2"]
) throws -> TestServer {
    let cfg = HTTP2ServerConfiguration(
        certificateChainFile: cert ?? pki.serverCert, privateKeyFile: key ?? pki.serverKey,
        clientCAFile: clientCA, alpnProtocols: alpn, maxConcurrentStreams: maxStreams)
    let server = HTTP2Server(configuration: cfg, handler: handler, logger: testLogger)
    let port = try server.start()
    return TestServer(server: server, port: port, handler: handler)
}

func request(_ id: Int, port: Int) -> HTTP2Request {
    HTTP2Request(
        method: "POST", authority: "127.0.0.1:\(port)", path: "/3/device/\(id)",
        headers: [HTTP2Header("x-id", String(id)), HTTP2Header("content-type", "application/json")],
        body: Array(#"{"aps":{"alert":"hello"}}"#.utf8))
}

/// Collects completions; `wait` suspends until `expected` completions arrived (or the deadline passed).
final class Completions: @unchecked Sendable {
    struct State {
        var results: [Int: [Result<HTTP2Response, HTTP2Error>]] = [:]
        var count = 0
        var waiter: CheckedContinuation<Void, Never>?
        var expected = Int.max
    }
    let state = Mutex(State())

    func record(_ id: Int, _ r: Result<HTTP2Response, HTTP2Error>) {
        let w: CheckedContinuation<Void, Never>? = state.withLock { s in
            s.results[id, default: []].append(r)
            s.count += 1
            if s.count >= s.expected, let w = s.waiter {
                s.waiter = nil
                return w
            }
            return nil
        }
        w?.resume()
    }

    func wait(for expected: Int, seconds: Double = 30) async {
        let timeout = DispatchWorkItem { [self] in
            let w = state.withLock { s -> CheckedContinuation<Void, Never>? in
                let w = s.waiter
                s.waiter = nil
                return w
            }
            w?.resume()
        }
        DispatchQueue.global().asyncAfter(deadline: .now() + seconds, execute: timeout)
        await withCheckedContinuation { (c: CheckedContinuation<Void, Never>) in
            let now: Bool = state.withLock { s in
                s.expected = expected
                if s.count >= expected { return true }
                s.waiter = c
                return false
            }
            if now { c.resume() }
        }
        timeout.cancel()
    }

    var snapshot: State {
        state.withLock { s in
            var c = State()
            c.results = s.results
            c.count = s.count
            return c
        }
    }
}

func send(_ pool: HTTP2ConnectionPool, _ r: HTTP2Request) async -> Result<HTTP2Response, HTTP2Error> {
    await withCheckedContinuation { c in pool.submit(r) { c.resume(returning: $0) } }
}

/// `send`, with the time from the submit to the answer as the pool delivered it. Measured in the completion
/// handler, not after the awaiting task resumes: in a parallel test run that task may wait for a free thread.
func timedSend(_ pool: HTTP2ConnectionPool, _ r: HTTP2Request) async -> (Result<HTTP2Response, HTTP2Error>, Duration) {
    await withCheckedContinuation { c in
        let started = ContinuousClock.now
        pool.submit(r) { result in c.resume(returning: (result, ContinuousClock.now - started)) }
    }
}

func shutdown(_ pool: HTTP2ConnectionPool) async {
    await withCheckedContinuation { c in pool.shutdown { c.resume() } }
}
