import Dispatch
import Foundation
import Synchronization
import Testing
import VolleyTestDoubles
import VolleyTestTags

@testable import VolleyHTTP2
@testable import VolleyHTTP2Server

private func clientConfig(
    _ pki: TestPKI, port: Int, connections: Int = 1, cap: Int = 1000, timeout: Double = 10,
    ping: Double = 60, cert: TLSClientCertificate? = nil, host: String = "127.0.0.1",
    caFile: String? = nil, connectTimeout: Double = 5, pingTimeout: Double = 2
) -> HTTP2ClientConfiguration {
    HTTP2ClientConfiguration(
        host: host, port: port, caFile: caFile ?? pki.caFile, clientCertificate: cert,
        connections: connections, maxConcurrentStreamsCap: cap, connectTimeoutSeconds: connectTimeout,
        requestTimeoutSeconds: timeout, idlePingSeconds: ping, pingTimeoutSeconds: pingTimeout,
        maxResends: 3, reconnectBaseSeconds: 0.01, reconnectMaxSeconds: 0.2)
}

@Suite("HTTP/2 client and server over real TLS", .tags(.integration))
struct HTTP2ClientServerTests {

    @Test func multiplexesManyStreamsOnOneConnection() async throws {
        let pki = try TestPKI.get()
        let h = RecordingHandler(delayMs: 20)
        let s = try startServer(pki, handler: h)
        defer { s.server.stop() }
        let pool = HTTP2ConnectionPool(configuration: clientConfig(pki, port: s.port), logger: testLogger)
        let done = Completions()
        for i in 0..<500 { pool.submit(request(i, port: s.port)) { done.record(i, $0) } }
        await done.wait(for: 500)
        let snap = done.snapshot
        #expect(snap.count == 500)
        #expect(snap.results.values.allSatisfy { $0.count == 1 && ((try? $0[0].get().status) == 200) })
        let st = pool.statistics
        #expect(st.connectionsOpened == 1)
        #expect(st.peakStreamsPerConnection > 1)
        #expect(h.seen.withLock { $0.opened } == 1)
        // The server saw more than one concurrent stream on that connection.
        await shutdown(pool)
        #expect(s.server.openConnections.allSatisfy { $0.statistics.peakConcurrentStreams > 1 })
    }

    /// Delayed answers count from the kernel's receive time of the request (the server reads through its
    /// arrival-time BIO): that time is known, never after the read, and no answer comes back before its delay.
    @Test func delayedAnswersCountFromKernelArrivalAndNeverComeEarly() async throws {
        let pki = try TestPKI.get()
        let arrivals = Mutex<[(arrived: UInt64, read: UInt64)]>([])
        let h = RecordingHandler { _, conn, respond, _ in
            arrivals.withLock { $0.append((conn.arrivals?.latestNanos ?? 0, conn.lastReadNanos)) }
            respond(HTTP2Response(status: 200), after: 0.03)
            return false
        }
        let s = try startServer(pki, handler: h)
        defer { s.server.stop() }
        let pool = HTTP2ConnectionPool(configuration: clientConfig(pki, port: s.port), logger: testLogger)
        let done = Completions()
        let rtts = Mutex<[UInt64]>([])
        for i in 0..<200 {
            let t0 = DispatchTime.now().uptimeNanoseconds
            pool.submit(request(i, port: s.port)) { r in
                rtts.withLock { $0.append(DispatchTime.now().uptimeNanoseconds - t0) }
                done.record(i, r)
            }
        }
        await done.wait(for: 200)
        #expect(done.snapshot.results.values.allSatisfy { (try? $0[0].get().status) == 200 })
        let seen = arrivals.withLock { $0 }
        #expect(seen.count == 200)
        #expect(seen.allSatisfy { $0.arrived > 0 && $0.arrived <= $0.read })
        let shortest = rtts.withLock { $0.min() ?? 0 }
        #expect(shortest >= 30_000_000, "an answer came back \(shortest) ns after its request, before the 30 ms delay")
        await shutdown(pool)
    }

    /// `statusOnlyOnSuccess`: a 2xx arrives as its status alone; any other status keeps its fields and body.
    @Test func statusOnlyOnSuccessDropsA2xxsFieldsAndBodyOnly() async throws {
        let pki = try TestPKI.get()
        let h = RecordingHandler { req, _, respond, _ in
            let status = req.path.hasSuffix("/2") ? 410 : 200
            respond(
                HTTP2Response(
                    status: status, headers: [HTTP2Header("apns-id", "id-\(req.path)")],
                    body: Array(#"{"reason":"x"}"#.utf8)), after: 0)
            return false
        }
        let s = try startServer(pki, handler: h)
        defer { s.server.stop() }
        let pool = HTTP2ConnectionPool(configuration: clientConfig(pki, port: s.port), logger: testLogger)
        let done = Completions()
        for i in 0..<4 {
            var r = request(i, port: s.port)
            r.statusOnlyOnSuccess = i != 0 // 0: a whole 200; 1, 3: status only; 2: a 410, whole
            pool.submit(r) { done.record(i, $0) }
        }
        await done.wait(for: 4)
        let answers = done.snapshot.results.mapValues { try? $0.first?.get() }
        #expect(answers[0]??.status == 200 && answers[0]??.header("apns-id") == "id-/3/device/0")
        #expect(answers[0]??.body == Array(#"{"reason":"x"}"#.utf8))
        for i in [1, 3] {
            #expect(answers[i]??.status == 200)
            #expect(answers[i]??.header("apns-id") == nil && answers[i]??.body.isEmpty == true)
        }
        #expect(answers[2]??.status == 410 && answers[2]??.header("apns-id") == "id-/3/device/2")
        #expect(answers[2]??.body == Array(#"{"reason":"x"}"#.utf8))
        await shutdown(pool)
    }

    @Test func honoursAStreamLimitOfFive() async throws {
        let pki = try TestPKI.get()
        let peak = Mutex(0)
        let h = RecordingHandler(delayMs: 5) { _, conn, _, _ in
            let cur = conn.statistics.currentStreams
            peak.withLock { $0 = max($0, cur) }
            return true
        }
        let s = try startServer(pki, handler: h, maxStreams: 5)
        defer { s.server.stop() }
        let pool = HTTP2ConnectionPool(configuration: clientConfig(pki, port: s.port), logger: testLogger)
        let done = Completions()
        for i in 0..<300 { pool.submit(request(i, port: s.port)) { done.record(i, $0) } }
        await done.wait(for: 300)
        #expect(done.snapshot.count == 300)
        #expect(done.snapshot.results.values.allSatisfy { (try? $0[0].get().status) == 200 })
        #expect(peak.withLock { $0 } <= 5)
        #expect(peak.withLock { $0 } >= 2)
        #expect(pool.statistics.peakStreamsPerConnection <= 5)
        let conns = s.server.openConnections
        #expect(conns.allSatisfy { $0.statistics.refusedStreams == 0 && $0.statistics.peakConcurrentStreams <= 5 })
        await shutdown(pool)
    }

    @Test func honoursALimitLoweredMidBurst() async throws {
        let pki = try TestPKI.get()
        struct Phase {
            /// SETTINGS ACKs the server had received when it lowered the limit.
            var acksBeforeLowering: Int?
            var latePeak = 0
            var lateRequests = 0
        }
        let phase = Mutex(Phase())
        let h = RecordingHandler(delayMs: 5) { request, conn, _, n in
            let st = conn.statistics
            if n == 200 {
                phase.withLock { $0.acksBeforeLowering = st.settingsAcksReceived }
                conn.setMaxConcurrentStreams(3)
            }
            phase.withLock { p in
                // A stream the client opened after acknowledging the lowered limit: the client counts every
                // stream it still has open (the server closes its side first), so the server sees at most 3.
                // Whatever the load, no fixed window: the ACK says when the client applied the setting.
                if let acks = p.acksBeforeLowering, st.settingsAcksReceived > acks,
                    request.streamID > st.lastStreamIDAtSettingsAck
                {
                    p.latePeak = max(p.latePeak, st.currentStreams)
                    p.lateRequests += 1
                }
            }
            return true
        }
        let s = try startServer(pki, handler: h, maxStreams: 50)
        defer { s.server.stop() }
        let pool = HTTP2ConnectionPool(configuration: clientConfig(pki, port: s.port), logger: testLogger)
        let done = Completions()
        for i in 0..<1500 { pool.submit(request(i, port: s.port)) { done.record(i, $0) } }
        await done.wait(for: 1500)
        let snap = done.snapshot
        #expect(snap.count == 1500)
        #expect(snap.results.values.allSatisfy { $0.count == 1 && (try? $0[0].get().status) == 200 })
        let p = phase.withLock { $0 }
        #expect(p.lateRequests > 0)
        #expect(p.latePeak <= 3)
        await shutdown(pool)
    }

    /// Every request completes exactly once; the server never handles one twice.
    private func burst(disrupt: @escaping @Sendable (HTTP2ServerConnection, HTTP2ServerRequest) -> Void, at: Int)
        async throws
        -> (Completions, RecordingHandler, HTTP2PoolStatistics)
    {
        let pki = try TestPKI.get()
        let h = RecordingHandler(delayMs: 0) { req, conn, _, n in
            if n == at { disrupt(conn, req) }
            return true
        }
        let s = try startServer(pki, handler: h, maxStreams: 200)
        defer { s.server.stop() }
        let pool = HTTP2ConnectionPool(
            configuration: clientConfig(pki, port: s.port, connections: 2), logger: testLogger)
        let done = Completions()
        let total = 10_000
        for i in 0..<total { pool.submit(request(i, port: s.port)) { done.record(i, $0) } }
        await done.wait(for: total, seconds: 60)
        let stats = pool.statistics
        await shutdown(pool)
        let snap = done.snapshot
        #expect(snap.count == total)
        #expect(snap.results.count == total)
        #expect(snap.results.values.allSatisfy { $0.count == 1 })
        let seen = h.seen.withLock { $0.ids }
        #expect(seen.values.allSatisfy { $0 == 1 }, "a request reached the server twice")
        // Every success was seen by the server.
        for (id, rs) in snap.results where (try? rs[0].get()) != nil { #expect(seen[String(id)] == 1) }
        return (done, h, stats)
    }

    @Test func goAwayInTheMiddleOfABurstLosesNothing() async throws {
        let (done, _, stats) = try await burst(
            disrupt: { conn, req in conn.sendGoAway(lastStreamID: req.streamID) }, at: 3000)
        let failures = done.snapshot.results.values.compactMap { r -> HTTP2Error? in
            if case .failure(let e) = r[0] { return e } else { return nil }
        }
        #expect(failures.isEmpty, "\(failures.count) GOAWAY failures: \(failures.prefix(3))")
        #expect(stats.goAwaysReceived >= 1)
        #expect(stats.connectionsOpened >= 3)
    }

    @Test func tcpResetInTheMiddleOfABurstCompletesEveryRequestOnce() async throws {
        let (done, _, stats) = try await burst(disrupt: { conn, _ in conn.resetTCP() }, at: 5000)
        let failures = done.snapshot.results.values.compactMap { r -> HTTP2Error? in
            if case .failure(let e) = r[0] { return e } else { return nil }
        }
        #expect(
            failures.allSatisfy { $0.kind == .writtenUnanswered && !$0.resendIsSafe },
            "\(failures.count) failures: \(failures.prefix(3))")
        #expect(stats.connectionsOpened >= 3)
    }

    /// A request whose owner holds it from a given moment (a provider's pause).
    final class HoldableRequest: HTTP2PendingRequest, @unchecked Sendable {
        final class Switch: Sendable { let on = Atomic(false) }
        let id: Int
        let done: Completions
        let held: Switch
        init(_ id: Int, port: Int, done: Completions, held: Switch) {
            self.id = id
            self.done = done
            self.held = held
            super.init(VolleyHTTP2Tests.request(id, port: port))
        }
        override var holdsBeforeWriting: Bool { held.on.load(ordering: .relaxed) }
        override func complete(_ result: Result<HTTP2Response, HTTP2Error>) { done.record(id, result) }
    }

    @Test func requestsHeldByTheirOwnerBeforeWritingNeverReachTheServer() async throws {
        let pki = try TestPKI.get()
        let h = RecordingHandler(delayMs: 0)
        let s = try startServer(pki, handler: h, maxStreams: 200)
        defer { s.server.stop() }
        let pool = HTTP2ConnectionPool(configuration: clientConfig(pki, port: s.port), logger: testLogger)
        let done = Completions()
        let held = HoldableRequest.Switch()
        // Answered before the hold; then 1,000 handed to the pool while their owner holds them.
        pool.submit(HoldableRequest(0, port: s.port, done: done, held: held))
        await done.wait(for: 1)
        held.on.store(true, ordering: .relaxed)
        for i in 1...1000 { pool.submit(HoldableRequest(i, port: s.port, done: done, held: held)) }
        await done.wait(for: 1001)
        let snap = done.snapshot
        #expect((try? snap.results[0]?[0].get())?.status == 200)
        let heldKinds = (1...1000).compactMap { i -> HTTP2Error.Kind? in
            guard case .failure(let e)? = snap.results[i]?.first else { return nil }
            return e.kind
        }
        #expect(heldKinds.count == 1000 && heldKinds.allSatisfy { $0 == .held })
        #expect(h.seen.withLock { $0.ids.count } == 1, "a held request reached the server")
        #expect(pool.statistics.requestsHeld == 1000 && pool.statistics.resends == 0)
        await shutdown(pool)
    }

    @Test func wrongCAFailsWithVerificationError() async throws {
        let pki = try TestPKI.get()
        let s = try startServer(pki, handler: RecordingHandler())
        defer { s.server.stop() }
        let pool = HTTP2ConnectionPool(
            configuration: clientConfig(pki, port: s.port, caFile: pki.otherCAFile), logger: testLogger)
        let r = await send(pool, request(1, port: s.port))
        guard case .failure(let e) = r else {
            Issue.record("expected failure")
            return
        }
        #expect(e.kind == .certificateVerification)
        #expect(e.message.contains("unable to get local issuer certificate"))
        await shutdown(pool)
    }

    @Test func wrongHostNameFailsWithVerificationError() async throws {
        let pki = try TestPKI.get()
        let s = try startServer(pki, handler: RecordingHandler(), cert: pki.wrongHostCert, key: pki.wrongHostKey)
        defer { s.server.stop() }
        let pool = HTTP2ConnectionPool(configuration: clientConfig(pki, port: s.port), logger: testLogger)
        let r = await send(pool, request(1, port: s.port))
        guard case .failure(let e) = r else {
            Issue.record("expected failure")
            return
        }
        #expect(e.kind == .certificateVerification)
        #expect(e.message.contains("IP address mismatch"))
        await shutdown(pool)

        let pool2 = HTTP2ConnectionPool(
            configuration: clientConfig(pki, port: s.port, host: "localhost"), logger: testLogger)
        let r2 = await send(pool2, request(1, port: s.port))
        guard case .failure(let e2) = r2 else {
            Issue.record("expected failure")
            return
        }
        #expect(e2.kind == .certificateVerification)
        #expect(e2.message.contains("hostname mismatch"))
        await shutdown(pool2)
    }

    @Test func serverWithoutH2FailsWithALPNError() async throws {
        let pki = try TestPKI.get()
        let s = try startServer(pki, handler: RecordingHandler(), alpn: ["http/1.1"])
        defer { s.server.stop() }
        let pool = HTTP2ConnectionPool(configuration: clientConfig(pki, port: s.port), logger: testLogger)
        let r = await send(pool, request(1, port: s.port))
        guard case .failure(let e) = r else {
            Issue.record("expected failure")
            return
        }
        #expect(e.kind == .alpnNotH2)
        #expect(e.message.contains("did not select h2"))
        await shutdown(pool)
    }

    @Test func requestTimeoutFires() async throws {
        let pki = try TestPKI.get()
        let h = RecordingHandler { req, _, _, _ in req.path != "/3/device/1" } // never answers id 1
        let s = try startServer(pki, handler: h)
        defer { s.server.stop() }
        let pool = HTTP2ConnectionPool(configuration: clientConfig(pki, port: s.port, timeout: 0.4), logger: testLogger)
        // Connect first: on a loaded machine the handshake alone can outlast 0.4 s, and a request that times out
        // before any connection took it is "never sent" (safe to resend) — not the case under test.
        var connected = false
        for _ in 0..<25 where !connected {
            if case .success(let r) = await send(pool, request(2, port: s.port)), r.status == 200 { connected = true }
        }
        #expect(connected)
        let r = await send(pool, request(1, port: s.port))
        guard case .failure(let e) = r else {
            Issue.record("expected timeout")
            return
        }
        #expect(e.kind == .timeout)
        #expect(!e.resendIsSafe)
        // The connection is still usable: a request answered on it, and no other connection opened. On a loaded
        // machine a request can outlast the 0.4 s itself, as the connect step above allows for; any that does must
        // have timed out on this connection, not failed it.
        var answered = false
        for _ in 0..<25 where !answered {
            switch await send(pool, request(2, port: s.port)) {
            case .success(let ok): answered = ok.status == 200
            case .failure(let e): #expect(e.kind == .timeout, "\(e)")
            }
        }
        #expect(answered)
        #expect(pool.statistics.connectionsOpened == 1)
        await shutdown(pool)
    }

    /// A request no connection could take fails past its outage budget through the pool's own timer, safe to
    /// resend: the only connection hangs in its TLS handshake (the listener never accepts), well inside its connect
    /// timeout. Its request timeout (shorter) does not fail it while no connection is ready.
    @Test func queuedRequestFailsPastItsOutageBudgetWhileNoConnectionIsReady() async throws {
        let pki = try TestPKI.get()
        let listener = try SilentListener()
        // A connect timeout far beyond the budget: however loaded the machine, the failure is the request's own.
        var configuration = clientConfig(pki, port: listener.port, timeout: 0.1, connectTimeout: 60)
        configuration.providerOutageSeconds = 0.3
        let pool = HTTP2ConnectionPool(configuration: configuration, logger: testLogger)
        let (r, waited) = await timedSend(pool, request(1, port: listener.port))
        guard case .failure(let e) = r else {
            Issue.record("expected a failure past the outage budget")
            return
        }
        #expect(e.kind == .providerUnreachable)
        #expect(e.resendIsSafe)
        #expect(e.message.contains("no connection became ready"), "\(e.message)")
        #expect(waited >= .milliseconds(300) && waited < .seconds(30), "\(waited)")
        #expect(pool.statistics.queued == 0)
        await shutdown(pool)
    }

    @Test func idlePingKeepsTheConnectionAlive() async throws {
        let pki = try TestPKI.get()
        let h = RecordingHandler()
        let s = try startServer(pki, handler: h)
        defer { s.server.stop() }
        // A generous PONG deadline: the subject is that pings go out and keep the connection, not how fast a
        // loaded machine answers them.
        let pool = HTTP2ConnectionPool(
            configuration: clientConfig(pki, port: s.port, ping: 0.1, pingTimeout: 30), logger: testLogger)
        let first = await send(pool, request(1, port: s.port))
        #expect((try? first.get().status) == 200)
        // Idle pings every 0.1 s: wait until two went out and came back, never by a fixed sleep.
        try await waitUntil("two idle pings sent", timeout: .seconds(10)) { pool.statistics.pingsSent >= 2 }
        try await waitUntil("two idle pings received by the server", timeout: .seconds(10)) {
            s.server.openConnections.first.map { $0.statistics.pingsReceived >= 2 } == true
        }
        #expect(h.seen.withLock { $0.closed } == 0)
        let second = await send(pool, request(2, port: s.port))
        #expect((try? second.get().status) == 200)
        #expect(pool.statistics.connectionsOpened == 1)
        await shutdown(pool)
    }
}

@Suite("TLS client certificates", .tags(.integration))
struct TLSClientCertificateTests {
    private func mtls(_ cert: TLSClientCertificate?) async throws -> (Result<HTTP2Response, HTTP2Error>, [String]) {
        let pki = try TestPKI.get()
        let h = RecordingHandler()
        let s = try startServer(pki, handler: h, clientCA: pki.caFile)
        defer { s.server.stop() }
        let pool = HTTP2ConnectionPool(configuration: clientConfig(pki, port: s.port, cert: cert), logger: testLogger)
        let r = await send(pool, request(1, port: s.port))
        await shutdown(pool)
        return (r, h.seen.withLock { $0.subjects })
    }

    @Test func pemClientCertificateIsAccepted() async throws {
        let pki = try TestPKI.get()
        let (r, subjects) = try await mtls(
            .pem(certificateFile: pki.clientCert, privateKeyFile: pki.clientKey, passphrase: nil))
        #expect((try? r.get().status) == 200)
        #expect(subjects.contains { $0.contains("volley-test-client") })
    }

    @Test func encryptedPEMKeyWithPassphraseIsAccepted() async throws {
        let pki = try TestPKI.get()
        let (r, _) = try await mtls(
            .pem(
                certificateFile: pki.clientCert, privateKeyFile: pki.clientKeyEncrypted,
                passphrase: TestPKI.keyPassphrase))
        #expect((try? r.get().status) == 200)
    }

    @Test func pkcs12ClientCertificateIsAccepted() async throws {
        let pki = try TestPKI.get()
        let (r, subjects) = try await mtls(.pkcs12(file: pki.clientP12, password: TestPKI.p12Password))
        #expect((try? r.get().status) == 200)
        #expect(subjects.contains { $0.contains("volley-test-client") })
    }

    @Test func missingClientCertificateIsRejectedByTheServer() async throws {
        let (r, _) = try await mtls(nil)
        guard case .failure = r else {
            Issue.record("expected failure without a client certificate")
            return
        }
    }

    @Test func badCertificatesGiveClearMessages() throws {
        let pki = try TestPKI.get()
        let cases: [(TLSClientCertificate, String)] = [
            (
                .pem(certificateFile: pki.expiredCert, privateKeyFile: pki.expiredKey, passphrase: nil),
                "Certificate expired"
            ),
            (
                .pem(certificateFile: pki.futureCert, privateKeyFile: pki.futureKey, passphrase: nil),
                "Certificate not valid yet"
            ),
            (.pkcs12(file: pki.clientP12, password: "wrong"), "Invalid certificate or password"),
            (
                .pem(certificateFile: pki.clientCert, privateKeyFile: pki.clientKeyEncrypted, passphrase: "wrong"),
                "Invalid certificate or password"
            ),
            (
                .pem(certificateFile: pki.dir + "/missing.pem", privateKeyFile: pki.clientKey, passphrase: nil),
                "Invalid certificate or password"
            ),
        ]
        for (cert, message) in cases {
            #expect(throws: HTTP2Error(.configuration, resendIsSafe: false, message)) {
                _ = try TLSClientCertificateCheck.validate(cert)
            }
        }
        let ok = try TLSClientCertificateCheck.validate(.pkcs12(file: pki.clientP12, password: TestPKI.p12Password))
        #expect(ok.subject.contains("volley-test-client"))
        #expect(ok.notAfter > Date())
    }

    @Test func expiredCertificateFailsRequestsWithTheMessage() async throws {
        let pki = try TestPKI.get()
        let (r, _) = try await mtls(
            .pem(certificateFile: pki.expiredCert, privateKeyFile: pki.expiredKey, passphrase: nil))
        guard case .failure(let e) = r else {
            Issue.record("expected failure")
            return
        }
        #expect(e.message == "Certificate expired")
    }
}

/// A TCP listener that never accepts: connects complete in the kernel's backlog, and nothing ever answers.
private final class SilentListener {
    let fd: Int32
    let port: Int

    struct Failed: Error { let call: String }

    init() throws {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard fd >= 0 else { throw Failed(call: "socket") }
        var addr = sockaddr_in()
        addr.sin_family = sa_family_t(AF_INET)
        addr.sin_addr.s_addr = inet_addr("127.0.0.1")
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        let bound = withUnsafeMutablePointer(to: &addr) { p in
            p.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                bind(fd, $0, length) == 0 && listen(fd, 16) == 0
                    && getsockname(fd, $0, &length) == 0
            }
        }
        guard bound else {
            Glibc.close(fd)
            throw Failed(call: "bind/listen")
        }
        self.fd = fd
        port = Int(UInt16(bigEndian: addr.sin_port))
    }

    deinit { Glibc.close(fd) }
}
