import Foundation
import Logging
import Testing
import VolleyCore
import VolleyHTTP2
import VolleyMock
import VolleyTestSupport
import VolleyTestTags

/// Over-the-wire tests of the mock: real TLS + HTTP/2 from curl and h2load (nghttp2-client) against the in-process
/// server started by `MockServerFixture`.

struct ToolResult {
    var status: Int32
    var output: String
}

func run(_ path: String, _ args: [String]) throws -> ToolResult {
    let p = Process()
    p.executableURL = URL(fileURLWithPath: path)
    p.arguments = args
    let pipe = Pipe()
    p.standardOutput = pipe
    p.standardError = pipe
    try p.run()
    let data = pipe.fileHandleForReading.readDataToEndOfFile()
    p.waitUntilExit()
    return ToolResult(status: p.terminationStatus, output: String(decoding: data, as: UTF8.self))
}

/// `curl --http2` with the mock's CA; returns (status, body).
func curl(
    _ mock: MockServerFixture, _ path: String, method: String = "POST", headers: [String] = [], body: String? = nil,
    clientCert: Bool = false
) throws -> (Int, String) {
    var args = ["-s", "--http2", "--cacert", mock.caFile, "-X", method, "-o", "-", "-w", "\n%{http_code}"]
    for h in headers { args += ["-H", h] }
    if let body { args += ["--data-binary", body] }
    if clientCert { args += ["--cert", mock.clientCertificateFile, "--key", mock.clientKeyFile] }
    args.append("https://\(mock.host):\(mock.port)\(path)")
    let r = try run("/usr/bin/curl", args)
    let lines = r.output.split(separator: "\n", omittingEmptySubsequences: false)
    let code = Int(lines.last ?? "") ?? -1
    return (code, lines.dropLast().joined(separator: "\n"))
}

func apnsHeaders(_ mock: MockServerFixture, jwt: String?) -> [String] {
    var h = ["apns-topic: \(mock.apnsTopic)", "apns-push-type: alert", "content-type: application/json"]
    if let jwt { h.append("authorization: bearer \(jwt)") }
    return h
}

let wireBody = #"{"aps":{"alert":{"title":"Hi","body":"there"}}}"#

@Suite(.serialized, .tags(.integration)) struct MockServerWireTests {
    @Test func endpointsFileAndValidRequest() throws {
        let mock = try MockServerFixture()
        defer { mock.stop() }
        let text = try String(contentsOfFile: mock.endpoints.endpointsFile, encoding: .utf8)
        let doc = try #require(JSONValue.parsed(text))
        #expect(doc["host"]?.stringValue == "127.0.0.1")
        #expect(doc["port"]?.intValue == mock.port)
        #expect(doc["ca_file"]?.stringValue == mock.caFile)
        #expect(doc["apns"]?["p8_file"]?.stringValue == mock.apnsKeyFile)
        #expect(doc["apns"]?["key_id"]?.stringValue == mock.apnsKeyID)
        #expect(doc["apns"]?["team_id"]?.stringValue == mock.apnsTeamID)
        #expect(doc["apns"]?["topic"]?.stringValue == mock.apnsTopic)
        #expect(doc["fcm"]?["service_account_file"]?.stringValue == mock.serviceAccountFile)
        #expect(doc["fcm"]?["project_id"]?.stringValue == mock.fcmProjectID)
        #expect(doc["stats_url"]?.stringValue == "https://127.0.0.1:\(mock.port)/_mock/stats")
        #expect(doc["client_certificate"]?["p12_password"]?.stringValue == mock.clientP12Password)
        for path in [mock.caFile, mock.apnsKeyFile, mock.serviceAccountFile, mock.clientCertificateFile] {
            #expect(path.hasPrefix("/") && FileManager.default.fileExists(atPath: path))
        }
        let sa = try #require(JSONValue.parsed(try String(contentsOfFile: mock.serviceAccountFile, encoding: .utf8)))
        #expect(sa["token_uri"]?.stringValue == "https://127.0.0.1:\(mock.port)/token")

        let jwt = try MockTokenMinter.apnsProviderToken(credentials: mock.server.credentials)
        let (ok, _) = try curl(mock, "/3/device/abcdef0123", headers: apnsHeaders(mock, jwt: jwt), body: wireBody)
        #expect(ok == 200)
        let (missing, body) = try curl(
            mock, "/3/device/abcdef0123", headers: apnsHeaders(mock, jwt: nil), body: wireBody)
        #expect(missing == 403)
        #expect(body == #"{"reason":"MissingProviderToken"}"#)
        let (statsCode, statsBody) = try curl(mock, "/_mock/stats", method: "GET")
        #expect(statsCode == 200)
        let stats = try #require(JSONValue.parsed(statsBody))
        #expect(stats["accepted"]?["apns"]?.intValue == 1)
        #expect(stats["total_requests"]?.intValue == 2)
    }

    @Test func stateDirectoryIsReusedAcrossRuns() throws {
        let dir = NSTemporaryDirectory() + "volley-mock-reuse-" + UUID().uuidString.prefix(8)
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let first = try MockServerFixture(stateDirectory: dir)
        let keyID = first.apnsKeyID
        let ca = try String(contentsOfFile: first.caFile, encoding: .utf8)
        first.stop()
        let second = try MockServerFixture(stateDirectory: dir)
        defer { second.stop() }
        #expect(second.apnsKeyID == keyID)
        #expect(try String(contentsOfFile: second.caFile, encoding: .utf8) == ca)
    }

    @Test func runtimeConfigurationOverTheWire() throws {
        let mock = try MockServerFixture()
        defer { mock.stop() }
        let (code, _) = try curl(mock, "/_mock/config", body: #"{"apns": {"unregisteredPrefixes": ["dead"]}}"#)
        #expect(code == 200)
        let jwt = try MockTokenMinter.apnsProviderToken(credentials: mock.server.credentials)
        let (gone, body) = try curl(mock, "/3/device/deadbeef", headers: apnsHeaders(mock, jwt: jwt), body: wireBody)
        #expect(gone == 410)
        #expect(JSONValue.parsed(body)?["reason"]?.stringValue == "Unregistered")
        let (bad, _) = try curl(mock, "/_mock/config", body: #"{"nonsense": 1}"#)
        #expect(bad == 400)
        let (reset, _) = try curl(mock, "/_mock/reset-stats", body: "")
        #expect(reset == 200)
        #expect(mock.stats().totalRequests == 0)
    }

    @Test func clientCertificateAuth() throws {
        let mock = try MockServerFixture(requireClientCertificate: true)
        defer { mock.stop() }
        let (ok, _) = try curl(
            mock, "/3/device/abcdef", headers: apnsHeaders(mock, jwt: nil), body: wireBody, clientCert: true)
        #expect(ok == 200)
        // Without a certificate the TLS handshake fails (curl reports no HTTP status).
        let (refused, _) = try curl(mock, "/3/device/abcdef", headers: apnsHeaders(mock, jwt: nil), body: wireBody)
        #expect(refused != 200)
    }

    @Test func fcmOverTheWire() throws {
        let mock = try MockServerFixture(configuration: #"{"fcm": {"unregisteredTokens": ["gone"]}}"#)
        defer { mock.stop() }
        let assertion = try MockTokenMinter.fcmAssertion(credentials: mock.server.credentials, audience: mock.tokenURI)
        let (code, body) = try curl(
            mock, "/token", headers: ["content-type: application/x-www-form-urlencoded"],
            body: "grant_type=urn%3Aietf%3Aparams%3Aoauth%3Agrant-type%3Ajwt-bearer&assertion=\(assertion)")
        #expect(code == 200)
        let access = try #require(JSONValue.parsed(body)?["access_token"]?.stringValue)
        let path = "/v1/projects/\(mock.fcmProjectID)/messages:send"
        let (sent, _) = try curl(
            mock, path, headers: ["authorization: Bearer \(access)", "content-type: application/json"],
            body: #"{"message":{"token":"abc","data":{"a":"b"}}}"#)
        #expect(sent == 200)
        let (gone, goneBody) = try curl(
            mock, path, headers: ["authorization: Bearer \(access)"], body: #"{"message":{"token":"gone"}}"#)
        #expect(gone == 404)
        #expect(
            JSONValue.parsed(goneBody)?["error"]?["details"]?.arrayValue?.first?["errorCode"]?.stringValue
                == "UNREGISTERED")
        #expect(mock.stats().tokenRequests == 1)
        #expect(mock.stats().acceptedFCM == 1)
    }

    /// h2load: one connection, many streams with the same JWT → one verification; GOAWAY / reset cut the run short.
    func h2load(_ mock: MockServerFixture, n: Int, m: Int, jwt: String, extra: [String] = []) throws -> ToolResult {
        let bodyFile = mock.stateDirectory + "/h2load-body.json"
        try wireBody.write(toFile: bodyFile, atomically: true, encoding: .utf8)
        var args = ["-n", String(n), "-c", "1", "-m", String(m), "-d", bodyFile]
        for h in apnsHeaders(mock, jwt: jwt) { args += ["-H", h] }
        args += extra
        args.append("https://127.0.0.1:\(mock.port)/3/device/0123456789abcdef")
        return try run("/usr/bin/h2load", args)
    }

    @Test func jwtVerifiedOncePerConnectionOverTheWire() throws {
        let mock = try MockServerFixture()
        defer { mock.stop() }
        let jwt = try MockTokenMinter.apnsProviderToken(credentials: mock.server.credentials)
        let r = try h2load(mock, n: 300, m: 20, jwt: jwt)
        #expect(r.output.contains("300 succeeded"), "\(r.output)")
        let s = mock.stats()
        #expect(s.acceptedAPNs == 300)
        #expect(s.jwtVerifications == 1)
        #expect(s.connectionsOpened == 1)
        #expect(s.maxConcurrentStreamsSeen >= 1 && s.maxConcurrentStreamsSeen <= 20)
    }

    @Test func maxConcurrentStreamsIsAdvertised() throws {
        let mock = try MockServerFixture(configuration: #"{"maxConcurrentStreams": 4}"#)
        defer { mock.stop() }
        let jwt = try MockTokenMinter.apnsProviderToken(credentials: mock.server.credentials)
        let r = try h2load(mock, n: 200, m: 50, jwt: jwt)
        #expect(r.output.contains("200 done"), "\(r.output)")
        // A client that opens streams before it has read the server's SETTINGS gets REFUSED_STREAM for the excess
        // (h2load does not resend them); every other request is answered, never more than 4 at a time.
        let s = mock.stats()
        #expect(s.maxConcurrentStreamsSeen >= 1 && s.maxConcurrentStreamsSeen <= 4)
        #expect(s.acceptedAPNs >= 4)
        #expect(s.acceptedAPNs + s.refusedStreams <= 200)
    }

    @Test func goAwayAfterNStreams() throws {
        let mock = try MockServerFixture(configuration: #"{"goAwayAfterStreams": 5}"#)
        defer { mock.stop() }
        let jwt = try MockTokenMinter.apnsProviderToken(credentials: mock.server.credentials)
        let r = try h2load(mock, n: 20, m: 1, jwt: jwt)
        #expect(r.output.contains("5 succeeded"), "\(r.output)")
        #expect(mock.stats().acceptedAPNs == 5)
    }

    @Test func resetAfterMStreams() throws {
        let mock = try MockServerFixture(configuration: #"{"resetAfterStreams": 4}"#)
        defer { mock.stop() }
        let jwt = try MockTokenMinter.apnsProviderToken(credentials: mock.server.credentials)
        let r = try h2load(mock, n: 20, m: 1, jwt: jwt)
        #expect(r.output.contains("3 succeeded"), "\(r.output)")
        let s = mock.stats()
        #expect(s.acceptedAPNs == 3)
        #expect(s.count(.apns, 0, "TCPReset") == 1)
    }

    /// APNs allows one stream until a request with a valid token succeeds. h2load opens streams before it reads
    /// the server's SETTINGS (it gets REFUSED_STREAM for the extras), so this drives Volley's own client, which
    /// waits for SETTINGS and follows the limit as the mock raises it.
    @Test func oneStreamUntilAuthenticated() async throws {
        let mock = try MockServerFixture(
            configuration: #"{"apns": {"oneStreamUntilAuthenticated": true}, "maxConcurrentStreams": 8}"#)
        defer { mock.stop() }
        let jwt = try MockTokenMinter.apnsProviderToken(credentials: mock.server.credentials)
        let pool = HTTP2ConnectionPool(
            configuration: HTTP2ClientConfiguration(
                host: "127.0.0.1", port: mock.port,
                caFile: mock.caFile, connections: 1),
            logger: Logger(label: "test"))
        var headers = [HTTP2Header("authorization", "bearer \(jwt)", sensitive: true)]
        for h in apnsHeaders(mock, jwt: nil) {
            let parts = h.split(separator: ":", maxSplits: 1).map { $0.trimmingCharacters(in: .whitespaces) }
            headers.append(HTTP2Header(parts[0], parts[1]))
        }
        let statuses = await withTaskGroup(of: Int.self) { group in
            for i in 0..<200 {
                let request = HTTP2Request(
                    authority: "127.0.0.1", path: "/3/device/\(String(format: "%064x", i))",
                    headers: headers, body: Array(wireBody.utf8))
                group.addTask {
                    await withCheckedContinuation { c in
                        pool.submit(request) { r in c.resume(returning: (try? r.get().status) ?? -1) }
                    }
                }
            }
            return await group.reduce(into: [Int]()) { $0.append($1) }
        }
        await withCheckedContinuation { c in pool.shutdown { c.resume() } }
        #expect(statuses.count == 200 && statuses.allSatisfy { $0 == 200 }, "\(Set(statuses))")
        let s = mock.stats()
        #expect(s.acceptedAPNs == 200)
        #expect(s.refusedStreams == 0)
        // The limit was lifted to 8 after the first accepted request, and never exceeded.
        #expect(s.maxConcurrentStreamsSeen > 1 && s.maxConcurrentStreamsSeen <= 8)
    }
}

extension JSONValue {
    /// The document `text` holds, or nil when it is not JSON.
    static func parsed(_ text: String) -> JSONValue? { try? JSONValue(parsing: text) }
}
