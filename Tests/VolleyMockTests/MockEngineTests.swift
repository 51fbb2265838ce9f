import Foundation
import Testing
import VolleyCore
import VolleyHTTP2
import VolleyTestTags

@testable import VolleyMock

/// Pure request-handling tests of the mock (no sockets): validation table, JWT caching, FCM, fault injection, stats.

/// One state directory for the whole file: creating RSA/EC keys and certificates is the slow part.
let mockTestCredentials: Result<MockCredentials, any Error> = Result {
    try MockCredentials.loadOrCreate(
        stateDirectory: NSTemporaryDirectory() + "volley-mock-unit-" + UUID().uuidString.prefix(8))
}

func makeEngine(_ json: String? = nil) throws -> MockEngine {
    let creds = try mockTestCredentials.get()
    var config = MockConfiguration()
    if let json { try config.merge(json: json) }
    let engine = MockEngine(credentials: creds, host: "127.0.0.1", configuration: config)
    engine.port.withLock { $0 = 8443 }
    return engine
}

func openConnection(_ engine: MockEngine, id: UInt64 = 1, clientCertificate: Bool = false) -> (
    MockConnectionState, UInt32?
) {
    engine.connectionOpened(id: id, clientCertificate: clientCertificate, serverMaxStreams: 1000)
}

let validBody = Array(
    #"{"aps":{"alert":{"title":"Hello","body":"World"},"badge":1,"sound":"default"},"k":[1,2.5e3,true,null]}"#.utf8)

func apnsRequest(
    token: String = "a1b2c3d4e5f6", jwt: String?, headers extra: [HTTP2Header] = [],
    method: String = "POST", body: [UInt8] = validBody, topic: String? = nil, streamID: Int32 = 1
) throws -> MockRequest {
    let creds = try mockTestCredentials.get()
    var headers: [HTTP2Header] = []
    if let jwt { headers.append(HTTP2Header("authorization", "bearer " + jwt)) }
    headers.append(HTTP2Header("apns-topic", topic ?? creds.apnsTopic))
    headers.append(HTTP2Header("apns-push-type", "alert"))
    for h in extra {
        headers.removeAll { $0.name == h.name }
        if !h.value.isEmpty || h.name == "apns-collapse-id" { headers.append(h) }
    }
    return MockRequest(method: method, path: "/3/device/" + token, headers: headers, body: body, streamID: streamID)
}

func reason(_ r: HTTP2Response) -> String? {
    JSONValue.parse(r.body)?["reason"]?.stringValue
}

@Suite(.tags(.integration)) struct MockStateDirectoryTests {
    @Test func createdThenReused() throws {
        let dir = NSTemporaryDirectory() + "volley-mock-state-" + UUID().uuidString.prefix(8)
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let a = try MockCredentials.loadOrCreate(stateDirectory: dir)
        let b = try MockCredentials.loadOrCreate(stateDirectory: dir)
        #expect(a.apnsKeyID == b.apnsKeyID)
        #expect(a.apnsTeamID == b.apnsTeamID)
        #expect(a.apnsKeyID.count == 10 && a.apnsTeamID.count == 10)
        #expect(a.apnsKeyFile.hasSuffix("/AuthKey_\(a.apnsKeyID).p8"))
        #expect(a.apnsKeyFile.hasPrefix("/"))
        let p8 = try String(contentsOfFile: a.apnsKeyFile, encoding: .utf8)
        #expect(p8.hasPrefix("-----BEGIN PRIVATE KEY-----"))
        let rsa = try String(contentsOfFile: a.fcmKeyFile, encoding: .utf8)
        #expect(rsa.hasPrefix("-----BEGIN PRIVATE KEY-----"))
        let ca1 = try String(contentsOfFile: a.caFile, encoding: .utf8)
        let ca2 = try String(contentsOfFile: b.caFile, encoding: .utf8)
        #expect(ca1 == ca2)
        #expect(ca1.hasPrefix("-----BEGIN CERTIFICATE-----"))
        #expect(a.clientP12File != nil, "openssl pkcs12 -export should have produced client.p12")
        // The server certificate verifies against the CA with the SAN the clients use (openssl CLI as a witness).
        let out = try runTool(
            "/usr/bin/openssl", ["verify", "-CAfile", a.caFile, "-verify_ip", "127.0.0.1", a.serverCertificateFile])
        #expect(out.contains(": OK"))
        let out2 = try runTool(
            "/usr/bin/openssl",
            ["verify", "-CAfile", a.caFile, "-verify_hostname", "localhost", a.serverCertificateFile])
        #expect(out2.contains(": OK"))
        let out3 = try runTool(
            "/usr/bin/openssl", ["verify", "-CAfile", a.clientCAFile, "-purpose", "sslclient", a.clientCertificateFile])
        #expect(out3.contains(": OK"))
    }

    @Test func serviceAccountJSONHasGoogleShape() throws {
        let creds = try mockTestCredentials.get()
        let text = try creds.serviceAccountJSON(host: "127.0.0.1", port: 4443)
        let doc = try #require(JSONValue.parse(text))
        #expect(doc["type"]?.stringValue == "service_account")
        #expect(doc["project_id"]?.stringValue == creds.fcmProjectID)
        #expect(doc["private_key_id"]?.stringValue == creds.fcmPrivateKeyID)
        #expect(doc["private_key"]?.stringValue?.hasPrefix("-----BEGIN PRIVATE KEY-----") == true)
        #expect(doc["client_email"]?.stringValue == creds.fcmClientEmail)
        #expect(doc["token_uri"]?.stringValue == "https://127.0.0.1:4443/token")
    }
}

func runTool(_ path: String, _ args: [String]) throws -> String {
    let p = Process()
    p.executableURL = URL(fileURLWithPath: path)
    p.arguments = args
    let pipe = Pipe()
    p.standardOutput = pipe
    p.standardError = pipe
    try p.run()
    let data = pipe.fileHandleForReading.readDataToEndOfFile()
    p.waitUntilExit()
    return String(decoding: data, as: UTF8.self)
}

@Suite(.tags(.integration)) struct MockJSONValidatorTests {
    @Test(arguments: [
        (#"{}"#, MockJSONKind?.some(.object)), (#" {"a":1} "#, .object), (#"[1,2,3]"#, .array), (#""x""#, .string),
        (#"{"a":"\u00e9\n","b":[true,false,null],"c":-0.5e-3}"#, .object), ("{\"é\":\"日本\"}", .object),
        (#"{"a":1,}"#, nil), (#"{"a" 1}"#, nil), (#"{'a':1}"#, nil), (#"{"a":01}"#, nil), (#"{"a":1} x"#, nil),
        (#"{"a":"\x"}"#, nil), (#"{"a":tru}"#, nil), (#"["#, nil), ("", nil), ("{\"a\":\"\u{01}\"}", nil),
        (#"{"a":.5}"#, nil), (#"{"a":1.}"#, nil),
        (String(repeating: "[", count: 100) + String(repeating: "]", count: 100), nil),
    ])
    func validate(_ text: String, _ expected: MockJSONKind?) {
        #expect(MockJSONValidator.validate(Array(text.utf8)) == expected, "\(text)")
    }

    @Test func parseUnescapes() throws {
        let v = try #require(JSONValue.parse(#"{"a":"x\"y\u00e9\ud83d\ude00","n":12}"#))
        #expect(v["a"]?.stringValue == "x\"yé😀")
        #expect(v["n"]?.intValue == 12)
    }
}

/// One row of the APNs validation table.
struct APNsCase: Sendable, CustomTestStringConvertible {
    var name: String
    var status: Int
    var reason: String
    var token = "a1b2c3d4e5f6"
    var method = "POST"
    var headers: [HTTP2Header] = []
    var body: [UInt8] = validBody
    var jwt: JWTKind = .valid
    var topic: String? = nil
    var path: String? = nil
    enum JWTKind: Sendable { case valid, none, badSignature, wrongKid, wrongIss, expired, garbage }
    var testDescription: String { name }
}

@Suite(.tags(.integration)) struct MockAPNsValidationTests {
    static let cases: [APNsCase] = [
        APNsCase(name: "valid", status: 200, reason: ""),
        APNsCase(name: "GET", status: 405, reason: "MethodNotAllowed", method: "GET"),
        APNsCase(name: "bad path", status: 404, reason: "BadPath", path: "/3/devices/abc"),
        APNsCase(name: "empty token", status: 400, reason: "MissingDeviceToken", token: ""),
        APNsCase(name: "non-hex token", status: 400, reason: "BadDeviceToken", token: "xyz123"),
        APNsCase(name: "no jwt", status: 403, reason: "MissingProviderToken", jwt: .none),
        APNsCase(name: "bad signature", status: 403, reason: "InvalidProviderToken", jwt: .badSignature),
        APNsCase(name: "wrong kid", status: 403, reason: "InvalidProviderToken", jwt: .wrongKid),
        APNsCase(name: "wrong iss", status: 403, reason: "InvalidProviderToken", jwt: .wrongIss),
        APNsCase(name: "garbage jwt", status: 403, reason: "InvalidProviderToken", jwt: .garbage),
        APNsCase(name: "expired jwt", status: 403, reason: "ExpiredProviderToken", jwt: .expired),
        APNsCase(name: "no topic", status: 400, reason: "MissingTopic", headers: [HTTP2Header("apns-topic", "")]),
        APNsCase(name: "other topic", status: 400, reason: "DeviceTokenNotForTopic", topic: "com.other.app"),
        APNsCase(
            name: "voip topic", status: 200, reason: "", headers: [HTTP2Header("apns-push-type", "voip")],
            topic: "com.example.volley.voip"),
        APNsCase(
            name: "liveactivity topic", status: 200, reason: "", topic: "com.example.volley.push-type.liveactivity"),
        APNsCase(name: "bad suffix", status: 400, reason: "DeviceTokenNotForTopic", topic: "com.example.volley.other"),
        APNsCase(
            name: "unknown push type", status: 400, reason: "InvalidPushType",
            headers: [HTTP2Header("apns-push-type", "banner")]),
        APNsCase(name: "priority 7", status: 400, reason: "BadPriority", headers: [HTTP2Header("apns-priority", "7")]),
        APNsCase(name: "priority 5", status: 200, reason: "", headers: [HTTP2Header("apns-priority", "5")]),
        APNsCase(
            name: "background + 10", status: 400, reason: "BadPriority",
            headers: [HTTP2Header("apns-push-type", "background"), HTTP2Header("apns-priority", "10")]),
        APNsCase(
            name: "background + 5", status: 200, reason: "",
            headers: [HTTP2Header("apns-push-type", "background"), HTTP2Header("apns-priority", "5")]),
        APNsCase(
            name: "expiration text", status: 400, reason: "BadExpirationDate",
            headers: [HTTP2Header("apns-expiration", "soon")]),
        APNsCase(name: "expiration 0", status: 200, reason: "", headers: [HTTP2Header("apns-expiration", "0")]),
        APNsCase(
            name: "collapse 65", status: 400, reason: "BadCollapseId",
            headers: [HTTP2Header("apns-collapse-id", String(repeating: "c", count: 65))]),
        APNsCase(
            name: "collapse 64", status: 200, reason: "",
            headers: [HTTP2Header("apns-collapse-id", String(repeating: "c", count: 64))]),
        APNsCase(
            name: "bad apns-id", status: 400, reason: "BadMessageId", headers: [HTTP2Header("apns-id", "not-a-uuid")]),
        APNsCase(name: "empty payload", status: 400, reason: "PayloadEmpty", body: []),
        APNsCase(name: "not json", status: 400, reason: "BadPayload", body: Array("{aps".utf8)),
        APNsCase(name: "json array", status: 400, reason: "BadPayload", body: Array("[1]".utf8)),
        APNsCase(
            name: "4097 bytes", status: 413, reason: "PayloadTooLarge",
            body: Array(("{\"a\":\"" + String(repeating: "x", count: 4089) + "\"}").utf8)),
        APNsCase(
            name: "4096 bytes", status: 200, reason: "",
            body: Array(("{\"a\":\"" + String(repeating: "x", count: 4088) + "\"}").utf8)),
        APNsCase(
            name: "voip 5120 bytes", status: 200, reason: "", headers: [HTTP2Header("apns-push-type", "voip")],
            body: Array(("{\"a\":\"" + String(repeating: "x", count: 5112) + "\"}").utf8),
            topic: "com.example.volley.voip"),
        APNsCase(
            name: "voip 5121 bytes", status: 413, reason: "PayloadTooLarge",
            headers: [HTTP2Header("apns-push-type", "voip")],
            body: Array(("{\"a\":\"" + String(repeating: "x", count: 5113) + "\"}").utf8),
            topic: "com.example.volley.voip"),
    ]

    @Test(arguments: cases)
    func answer(_ c: APNsCase) throws {
        let creds = try mockTestCredentials.get()
        let engine = try makeEngine()
        let (state, _) = openConnection(engine)
        let now = Int64(Date().timeIntervalSince1970)
        let jwt: String?
        switch c.jwt {
        case .valid: jwt = try MockTokenMinter.apnsProviderToken(credentials: creds, issuedAt: now)
        case .none: jwt = nil
        case .badSignature:
            let t = try MockTokenMinter.apnsProviderToken(credentials: creds, issuedAt: now)
            jwt = String(t.dropLast(4)) + (t.hasSuffix("AAAA") ? "BBBB" : "AAAA")
        case .wrongKid:
            jwt = try MockTokenMinter.apnsProviderToken(credentials: creds, issuedAt: now, keyID: "ZZZZZZZZZZ")
        case .wrongIss:
            jwt = try MockTokenMinter.apnsProviderToken(credentials: creds, issuedAt: now, teamID: "ZZZZZZZZZZ")
        case .expired: jwt = try MockTokenMinter.apnsProviderToken(credentials: creds, issuedAt: now - 3700)
        case .garbage: jwt = "not.a.jwt"
        }
        var req = try apnsRequest(
            token: c.token, jwt: jwt, headers: c.headers, method: c.method, body: c.body, topic: c.topic)
        if let p = c.path { req.path = p }
        let d = engine.process(req, state: state)
        let r = try #require(d.response)
        #expect(r.status == c.status)
        if c.status == 200 {
            #expect(r.body.isEmpty)
            #expect(r.header("apns-id").map(MockEngine.isUUID) == true)
            #expect(engine.stats().acceptedAPNs == 1)
        } else {
            #expect(reason(r) == c.reason)
            #expect(engine.stats().count(.apns, c.status, c.reason) == 1)
        }
    }

    @Test func apnsIDIsEchoed() throws {
        let engine = try makeEngine()
        let (state, _) = openConnection(engine)
        let jwt = try MockTokenMinter.apnsProviderToken(credentials: try mockTestCredentials.get())
        let id = "123e4567-e89b-12d3-a456-426614174000"
        let r = try #require(
            engine.process(try apnsRequest(jwt: jwt, headers: [HTTP2Header("apns-id", id)]), state: state).response)
        #expect(r.header("apns-id") == id)
        // The same apns-id accepted twice is a duplicate delivery.
        _ = engine.process(try apnsRequest(jwt: jwt, headers: [HTTP2Header("apns-id", id)]), state: state)
        #expect(engine.stats().duplicateDeliveries == 1)
        #expect(engine.stats().acceptedAPNs == 2)
    }

    @Test func jwtVerifiedOncePerConnection() throws {
        let creds = try mockTestCredentials.get()
        let engine = try makeEngine()
        let (a, _) = openConnection(engine, id: 1)
        let (b, _) = openConnection(engine, id: 2)
        let jwt = try MockTokenMinter.apnsProviderToken(credentials: creds)
        for _ in 0..<50 { #expect(engine.process(try apnsRequest(jwt: jwt), state: a).response?.status == 200) }
        #expect(engine.stats().jwtVerifications == 1)
        _ = engine.process(try apnsRequest(jwt: jwt), state: b)
        #expect(engine.stats().jwtVerifications == 2)
        // A second distinct token on connection a is verified once more, then both are remembered.
        let jwt2 = try MockTokenMinter.apnsProviderToken(
            credentials: creds, issuedAt: Int64(Date().timeIntervalSince1970) - 5)
        for t in [jwt2, jwt, jwt2, jwt] { _ = engine.process(try apnsRequest(jwt: t), state: a) }
        #expect(engine.stats().jwtVerifications == 3)
        #expect(engine.stats().acceptedAPNs == 55)
    }

    @Test func jwtMaxAgeSetting() throws {
        let creds = try mockTestCredentials.get()
        let engine = try makeEngine(#"{"apns":{"jwtMaxAgeSeconds":10}}"#)
        let (state, _) = openConnection(engine)
        let now = Date().timeIntervalSince1970
        let jwt = try MockTokenMinter.apnsProviderToken(credentials: creds, issuedAt: Int64(now) - 5)
        #expect(engine.process(try apnsRequest(jwt: jwt), state: state, now: now).response?.status == 200)
        // Same token, later clock: now expired (verdict cached, age re-checked per request).
        let r = try #require(engine.process(try apnsRequest(jwt: jwt), state: state, now: now + 20).response)
        #expect(r.status == 403 && reason(r) == "ExpiredProviderToken")
        #expect(engine.stats().jwtVerifications == 1)
    }

    @Test func certificateConnectionNeedsNoJWT() throws {
        let engine = try makeEngine()
        let (state, _) = openConnection(engine, clientCertificate: true)
        #expect(engine.process(try apnsRequest(jwt: nil), state: state).response?.status == 200)
        let r = try #require(engine.process(try apnsRequest(jwt: nil, topic: "com.other.app"), state: state).response)
        #expect(r.status == 400 && reason(r) == "TopicDisallowed")
        #expect(engine.stats().jwtVerifications == 0)
    }
}

@Suite(.tags(.integration)) struct MockFaultInjectionTests {
    func jwt() throws -> String { try MockTokenMinter.apnsProviderToken(credentials: try mockTestCredentials.get()) }

    @Test func unregisteredInvalidAndReasons() throws {
        let engine = try makeEngine(
            """
            {"apns": {"unregisteredPrefixes": ["dead"], "unregisteredTokens": ["0a0a"], "invalidTokens": ["0b0b"],
                      "invalidPrefixes": ["bad0"],
                      "tokenReasons": {"0c0c": {"status": 429, "reason": "TooManyRequests"},
                                       "0d0d": {"status": 403, "reason": "ExpiredProviderToken"},
                                       "0e0e": {"status": 400, "reason": "TopicDisallowed"}}}}
            """)
        let (state, _) = openConnection(engine)
        let t = try jwt()
        let expectations: [(String, Int, String)] = [
            ("deadbeef01", 410, "Unregistered"), ("0a0a", 410, "Unregistered"), ("0b0b", 400, "BadDeviceToken"),
            ("bad0ff", 400, "BadDeviceToken"), ("0c0c", 429, "TooManyRequests"), ("0d0d", 403, "ExpiredProviderToken"),
            ("0e0e", 400, "TopicDisallowed"), ("beefdead", 200, ""),
        ]
        for (token, status, why) in expectations {
            let r = try #require(engine.process(try apnsRequest(token: token, jwt: t), state: state).response)
            #expect(r.status == status, "\(token)")
            if status != 200 { #expect(reason(r) == why, "\(token)") }
            if status == 410 {
                let ts = JSONValue.parse(r.body)?["timestamp"]?.intValue ?? 0
                #expect(ts > 1_600_000_000_000)
            }
        }
        let s = engine.stats()
        #expect(s.count(.apns, 410, "Unregistered") == 2)
        #expect(s.count(.apns, 400, "BadDeviceToken") == 2)
        #expect(s.acceptedAPNs == 1)
        #expect(s.totalRequests == expectations.count)
    }

    @Test func errorRateAnswersOnlyInjectedStatuses() throws {
        let engine = try makeEngine(#"{"errorRate": 1, "errorStatuses": [429, 503]}"#)
        let (state, _) = openConnection(engine)
        let t = try jwt()
        var seen = Set<Int>()
        for _ in 0..<40 {
            let r = try #require(engine.process(try apnsRequest(jwt: t), state: state).response)
            seen.insert(r.status)
        }
        #expect(seen == [429, 503])
        try engine.applyConfiguration(json: #"{"errorRate": 0}"#)
        #expect(engine.process(try apnsRequest(jwt: t), state: state).response?.status == 200)
    }

    @Test func goAwayAfterNStreams() throws {
        let engine = try makeEngine(#"{"goAwayAfterStreams": 3}"#)
        let (state, _) = openConnection(engine)
        let t = try jwt()
        for i in 1...4 {
            let d = engine.process(try apnsRequest(jwt: t, streamID: Int32(2 * i - 1)), state: state)
            #expect(d.response?.status == 200)
            if i == 3 {
                let g = try #require(d.goAway)
                #expect(g.lastStreamID == 5)
                #expect(String(decoding: g.debugData, as: UTF8.self) == #"{"reason":"Shutdown"}"#)
            } else {
                #expect(d.goAway == nil)
            }
        }
    }

    @Test func resetAfterMStreams() throws {
        let engine = try makeEngine(#"{"resetAfterStreams": 2}"#)
        let (state, _) = openConnection(engine)
        let t = try jwt()
        #expect(engine.process(try apnsRequest(jwt: t), state: state).response?.status == 200)
        let d = engine.process(try apnsRequest(jwt: t), state: state)
        #expect(d.resetTCP)
        #expect(d.response == nil)
    }

    @Test func oneStreamUntilAuthenticated() throws {
        let engine = try makeEngine(#"{"apns": {"oneStreamUntilAuthenticated": true}, "maxConcurrentStreams": 500}"#)
        let (state, initial) = openConnection(engine)
        #expect(initial == 1)
        // A request with a bad token does not lift the limit …
        let bad = engine.process(try apnsRequest(jwt: "x.y.z"), state: state)
        #expect(bad.response?.status == 403)
        #expect(bad.setMaxConcurrentStreams == nil)
        // … the first accepted one raises it to the configured limit, once.
        let good = engine.process(try apnsRequest(jwt: try jwt()), state: state)
        #expect(good.response?.status == 200)
        #expect(good.setMaxConcurrentStreams == 500)
        #expect(engine.process(try apnsRequest(jwt: try jwt()), state: state).setMaxConcurrentStreams == nil)
    }

    @Test func maxConcurrentStreamsAtRuntime() throws {
        let engine = try makeEngine()
        let (state, initial) = openConnection(engine)
        #expect(initial == nil)
        try engine.applyConfiguration(json: #"{"maxConcurrentStreams": 7}"#)
        #expect(engine.process(try apnsRequest(jwt: try jwt()), state: state).setMaxConcurrentStreams == 7)
        #expect(openConnection(engine, id: 9).1 == 7)
    }

    @Test func latencyIsADelayNotABlock() throws {
        let engine = try makeEngine(#"{"latencyMs": 50, "latencyJitterMs": 10}"#)
        let (state, _) = openConnection(engine)
        let d = engine.process(try apnsRequest(jwt: try jwt()), state: state)
        #expect(d.delaySeconds >= 0.05 && d.delaySeconds <= 0.06)
    }

    @Test func configurationMergeAndErrors() throws {
        var c = MockConfiguration()
        try c.merge(json: #"{"fcm": {"unregisteredPrefixes": ["x"]}, "latencyMs": 5}"#)
        try c.merge(json: #"{"latencyJitterMs": 2}"#)
        #expect(c.fcm.unregisteredPrefixes == ["x"] && c.latencyMs == 5 && c.latencyJitterMs == 2)
        try c.merge(json: #"{"replace": true, "goAwayAfterStreams": 4}"#)
        #expect(c.latencyMs == 0 && c.fcm.unregisteredPrefixes.isEmpty && c.goAwayAfterStreams == 4)
        #expect(throws: MockConfigurationError.self) { try c.merge(json: #"{"latency": 5}"#) }
        #expect(throws: MockConfigurationError.self) { try c.merge(json: #"{"errorRate": 2}"#) }
        #expect(throws: MockConfigurationError.self) {
            try c.merge(json: #"{"apns": {"tokenReasons": {"a": {"status": 400}}}}"#)
        }
        // Round trip through the JSON the stats endpoint serves.
        var d = MockConfiguration()
        try c.merge(json: #"{"fcm": {"tokenReasons": {"t1": {"reason": "QUOTA_EXCEEDED", "retryAfter": 30}}}}"#)
        try d.merge(json: c.json)
        #expect(d == c)
        #expect(c.fcm.tokenReasons["t1"]?.status == 429)
    }

    @Test func statsCountAndReset() throws {
        let engine = try makeEngine()
        let (state, _) = openConnection(engine)
        _ = engine.process(try apnsRequest(jwt: try jwt()), state: state)
        _ = engine.process(try apnsRequest(jwt: nil), state: state)
        // Admin routes are not counted.
        let statsAnswer = try #require(
            engine.process(MockRequest(method: "GET", path: "/_mock/stats"), state: state).response)
        let doc = try #require(JSONValue.parse(statsAnswer.body))
        #expect(doc["total_requests"]?.intValue == 2)
        #expect(doc["accepted"]?["apns"]?.intValue == 1)
        #expect(doc["connections_open"]?.intValue == 1)
        #expect(doc["jwt_verifications"]?.intValue == 1)
        #expect(engine.stats().count(.apns, 403, "MissingProviderToken") == 1)
        _ = engine.process(MockRequest(method: "POST", path: "/_mock/reset-stats"), state: state)
        #expect(engine.stats().totalRequests == 0)
        engine.connectionClosed(state, peakStreams: 17, refusedStreams: 2)
        let s = engine.stats()
        #expect(s.connectionsOpen == 0 && s.maxConcurrentStreamsSeen == 17 && s.refusedStreams == 2)
    }
}

@Suite(.tags(.integration)) struct MockFCMTests {
    func token(_ engine: MockEngine, _ state: MockConnectionState, lifetime: Int64 = 3600) throws -> String {
        let creds = try mockTestCredentials.get()
        let assertion = try MockTokenMinter.fcmAssertion(
            credentials: creds, audience: "https://127.0.0.1:8443/token", lifetime: lifetime)
        let body = "grant_type=urn%3Aietf%3Aparams%3Aoauth%3Agrant-type%3Ajwt-bearer&assertion=" + assertion
        let r = try #require(
            engine.process(
                MockRequest(
                    path: "/token", headers: [HTTP2Header("content-type", "application/x-www-form-urlencoded")],
                    body: Array(body.utf8)), state: state
            ).response)
        #expect(r.status == 200)
        let doc = try #require(JSONValue.parse(r.body))
        #expect(doc["token_type"]?.stringValue == "Bearer")
        return try #require(doc["access_token"]?.stringValue)
    }

    func send(
        _ engine: MockEngine, _ state: MockConnectionState, access: String?, body: String,
        project: String? = nil
    ) throws -> HTTP2Response {
        let creds = try mockTestCredentials.get()
        var headers = [HTTP2Header("content-type", "application/json")]
        if let access { headers.append(HTTP2Header("authorization", "Bearer " + access)) }
        return try #require(
            engine.process(
                MockRequest(
                    path: "/v1/projects/\(project ?? creds.fcmProjectID)/messages:send",
                    headers: headers, body: Array(body.utf8)), state: state
            ).response)
    }

    @Test func tokenExchangeAndSend() throws {
        let engine = try makeEngine(#"{"fcm": {"accessTokenLifetimeSeconds": 120}}"#)
        let (state, _) = openConnection(engine)
        let access = try token(engine, state)
        let r = try send(
            engine, state, access: access,
            body: #"{"message":{"token":"tok-1","data":{"k":"v"},"android":{"priority":"HIGH","ttl":"3.5s"}}}"#)
        #expect(r.status == 200)
        let name = JSONValue.parse(r.body)?["name"]?.stringValue ?? ""
        #expect(name.hasPrefix("projects/\(try mockTestCredentials.get().fcmProjectID)/messages/"))
        let s = engine.stats()
        #expect(s.tokenRequests == 1 && s.acceptedFCM == 1)
        // Another connection accepts the same access token (issued tokens are global).
        let (other, _) = openConnection(engine, id: 2)
        #expect(try send(engine, other, access: access, body: #"{"message":{"token":"t"}}"#).status == 200)
    }

    @Test func tokenLifetimeIsConfigurable() throws {
        let creds = try mockTestCredentials.get()
        let engine = try makeEngine(#"{"fcm": {"accessTokenLifetimeSeconds": 120}}"#)
        let (state, _) = openConnection(engine)
        let assertion = try MockTokenMinter.fcmAssertion(credentials: creds, audience: "https://127.0.0.1:8443/token")
        let body = "grant_type=urn:ietf:params:oauth:grant-type:jwt-bearer&assertion=" + assertion
        let r = try #require(engine.process(MockRequest(path: "/token", body: Array(body.utf8)), state: state).response)
        #expect(JSONValue.parse(r.body)?["expires_in"]?.intValue == 120)
        let access = try #require(JSONValue.parse(r.body)?["access_token"]?.stringValue)
        // Past its lifetime the access token is refused.
        let later = MockRequest(
            path: "/v1/projects/\(creds.fcmProjectID)/messages:send",
            headers: [HTTP2Header("authorization", "Bearer " + access)],
            body: Array(#"{"message":{"token":"t"}}"#.utf8))
        let expired = try #require(
            engine.process(later, state: state, now: Date().timeIntervalSince1970 + 200).response)
        #expect(expired.status == 401)
        #expect(JSONValue.parse(expired.body)?["error"]?["status"]?.stringValue == "UNAUTHENTICATED")
    }

    @Test func badAssertions() throws {
        let creds = try mockTestCredentials.get()
        let engine = try makeEngine()
        let (state, _) = openConnection(engine)
        let wrongAud = try MockTokenMinter.fcmAssertion(credentials: creds, audience: "https://example.com/token")
        let wrongScope = try MockTokenMinter.fcmAssertion(
            credentials: creds, audience: "https://127.0.0.1:8443/token", scope: "email")
        let tooLong = try MockTokenMinter.fcmAssertion(
            credentials: creds, audience: "https://127.0.0.1:8443/token", lifetime: 7200)
        for a in [wrongAud, wrongScope, tooLong, "a.b.c"] {
            let body = "grant_type=urn:ietf:params:oauth:grant-type:jwt-bearer&assertion=" + a
            let r = try #require(
                engine.process(MockRequest(path: "/token", body: Array(body.utf8)), state: state).response)
            #expect(r.status == 400)
            #expect(JSONValue.parse(r.body)?["error"]?.stringValue == "invalid_grant")
        }
        #expect(engine.stats().tokenRequests == 4)
        #expect(engine.stats().count(.oauth, 400, "invalid_grant") == 4)
    }

    @Test func unregisteredHasGoogleShape() throws {
        let engine = try makeEngine(#"{"fcm": {"unregisteredPrefixes": ["dead"]}}"#)
        let (state, _) = openConnection(engine)
        let access = try token(engine, state)
        let r = try send(
            engine, state, access: access, body: #"{"message":{"token":"dead-1","notification":{"title":"x"}}}"#)
        #expect(r.status == 404)
        #expect(
            String(decoding: r.body, as: UTF8.self)
                == #"{"error":{"code":404,"message":"Requested entity was not "#
                + #"found.","status":"NOT_FOUND","details":[{"@type":"type.googleapis.com/google.firebase.fcm.v1.Fc"#
                + #"mError","errorCode":"UNREGISTERED"}]}}"#
        )
        #expect(engine.stats().count(.fcm, 404, "UNREGISTERED") == 1)
    }

    @Test func invalidArgumentRows() throws {
        let engine = try makeEngine(
            #"{"fcm": {"invalidTokens": ["bad-token"], "tokenReasons": {"q": {"reason": "QUOTA_EXCEEDED", "#
                + #""retryAfter": 30}, "s": {"reason": "SENDER_ID_MISMATCH"}, "a": {"reason": "#
                + #""THIRD_PARTY_AUTH_ERROR"}}}}"#
        )
        let (state, _) = openConnection(engine)
        let access = try token(engine, state)
        let bad = try send(engine, state, access: access, body: #"{"message":{"token":"bad-token"}}"#)
        #expect(bad.status == 400)
        let doc = try #require(JSONValue.parse(bad.body))
        #expect(doc["error"]?["status"]?.stringValue == "INVALID_ARGUMENT")
        let details = doc["error"]?["details"]?.arrayValue ?? []
        #expect(
            details.contains {
                $0["@type"]?.stringValue == "type.googleapis.com/google.rpc.BadRequest"
                    && $0["fieldViolations"]?.arrayValue?.first?["field"]?.stringValue == "message.token"
            })
        let rows: [(String, Int, String)] = [
            (#"{"message":{}}"#, 400, "INVALID_ARGUMENT"),
            (#"{"message":{"token":"t","data":{"n":1}}}"#, 400, "INVALID_ARGUMENT"),
            (#"{"message":{"token":"t","android":{"priority":"URGENT"}}}"#, 400, "INVALID_ARGUMENT"),
            (#"{"message":{"token":"t","android":{"ttl":"10"}}}"#, 400, "INVALID_ARGUMENT"),
            (#"{"message":{"token":"t","android":{"ttl":"1.s"}}}"#, 400, "INVALID_ARGUMENT"),
            (
                #"{"message":{"token":"t","data":{"k":""# + String(repeating: "x", count: 4100) + #""}}}"#, 400,
                "INVALID_ARGUMENT"
            ),
            (#"{"message":{"token":"q"}}"#, 429, "RESOURCE_EXHAUSTED"),
            (#"{"message":{"token":"s"}}"#, 403, "PERMISSION_DENIED"),
            (#"{"message":{"token":"a"}}"#, 401, "UNAUTHENTICATED"),
            (#"{"message":{"token":"t"},"validate_only":true}"#, 200, ""),
            ("not json", 400, "INVALID_ARGUMENT"),
        ]
        for (body, status, googleStatus) in rows {
            let r = try send(engine, state, access: access, body: body)
            #expect(r.status == status, "\(body.prefix(60))")
            if status != 200 {
                #expect(
                    JSONValue.parse(r.body)?["error"]?["status"]?.stringValue == googleStatus, "\(body.prefix(60))")
            }
            if body.contains("\"q\"") { #expect(r.header("retry-after") == "30") }
        }
        #expect(try send(engine, state, access: "nope", body: #"{"message":{"token":"t"}}"#).status == 401)
        #expect(try send(engine, state, access: nil, body: #"{"message":{"token":"t"}}"#).status == 401)
        #expect(
            try send(engine, state, access: access, body: #"{"message":{"token":"t"}}"#, project: "other").status == 403
        )
        #expect(engine.stats().fcmValidateOnly == 1)
    }

    /// A campaign's bodies differ only in the token: after one passed, the next with the same tail is not parsed
    /// again, and every answer is still the one a full reading gives (a new connection's, which has kept nothing).
    @Test func campaignBodiesAnswerAsAFullReadingDoes() throws {
        let engine = try makeEngine(#"{"fcm": {"unregisteredPrefixes": ["dead"]}}"#)
        let (state, _) = openConnection(engine)
        let access = try token(engine, state)
        var fresh: UInt64 = 100
        func body(_ token: String, _ tail: String) -> String { #"{"message":{"token":""# + token + "\"" + tail }
        func answers(_ token: String, _ tail: String) throws -> (kept: Int, full: Int) {
            fresh += 1
            let (other, _) = openConnection(engine, id: fresh)
            return (
                try send(engine, state, access: access, body: body(token, tail)).status,
                try send(engine, other, access: access, body: body(token, tail)).status
            )
        }
        let tail = #","data":{"k":"v"},"android":{"priority":"HIGH","ttl":"3.5s"}}}"#
        let urgent = #","android":{"priority":"URGENT"}}}"#
        let dry = #"},"validate_only":true}"#
        let cases: [(token: String, tail: String, status: Int)] = [
            ("tok-1", tail, 200),
            // The same tail after other tokens: the token's own rules still decide.
            ("tok-2", tail, 200), ("dead-1", tail, 404), ("to k", tail, 400),
            // An escaped token is read in full (it decodes to tok1).
            (#"tok\u0031"#, tail, 200),
            // Another tail is read in full, whichever tail was kept; a refused one is never kept.
            ("tok-3", urgent, 400), ("tok-4", urgent, 400), ("tok-5", #","data":{"k":1}}}"#, 400),
            ("tok-6", tail, 200),
            // validate_only belongs to the tail.
            ("tok-7", dry, 200), ("tok-8", dry, 200), ("dead-2", dry, 404),
        ]
        for c in cases {
            let a = try answers(c.token, c.tail)
            #expect(a.kept == c.status && a.full == c.status, "\(c.token) \(c.tail)")
        }
        // The connection keeps the last tail that passed: the next body after it is answered without a reading.
        let kept = Array(body("tok-10", dry).utf8).withUnsafeBufferPointer { b in
            state.fcmBodies.match(b).map { (String(decoding: $0.token, as: UTF8.self), $0.validateOnly) }
        }
        #expect(kept?.0 == "tok-10" && kept?.1 == true)
        #expect(Array(body("tok-10", tail).utf8).withUnsafeBufferPointer { state.fcmBodies.match($0) } == nil)
        // A tail that names the token again is never answered from the memo, whatever a full reading makes of it.
        let twice = try answers("tok-9", #","token":"dead-3"}}"#)
        #expect(twice.kept == twice.full)
        let s = engine.stats()
        #expect(s.fcmValidateOnly == 4)
        #expect(s.count(.fcm, 404, "UNREGISTERED") == 4 + (twice.full == 404 ? 2 : 0))
    }

    @Test func campaignBodyMemoSplitsOnlyPlainTokens() {
        func split(_ s: String) -> (String, String)? {
            Array(s.utf8).withUnsafeBufferPointer { b in
                MockFCMBodyMemo.split(b).map {
                    (String(decoding: $0.token, as: UTF8.self), String(decoding: $0.tail, as: UTF8.self))
                }
            }
        }
        #expect(split(#"{"message":{"token":"abc","data":{"k":"v"}}}"#)! == ("abc", #","data":{"k":"v"}}}"#))
        #expect(split(#"{"message":{"token":"abc"}}"#)! == ("abc", "}}"))
        for refused in [
            #"{"message":{"token":""}}"#, #"{"message":{"token":"a b"}}"#, #"{"message":{"token":"a\"b"}}"#,
            #"{"message":{"token":"abc"#, #"{"message":{"token":"a","data":{"x":"\n"}}}"#,
            #"{"message":{"token":"a","token":"b"}}"#, #"{"message":{"token":"a"},"message":{}}"#,
            #"{"message": {"token":"a"}}"#, #"{"validate_only":true,"message":{"token":"a"}}"#,
        ] {
            #expect(split(refused) == nil, "\(refused)")
        }
    }

    /// `last_accepted_ns`: CLOCK_MONOTONIC of the latest accepted send (what `bench e2e` times idle probes with);
    /// rejected and validate-only sends leave it alone; reset clears it.
    @Test func lastAcceptedIsStampedWithTheMonotonicClock() throws {
        func now() -> UInt64 {
            var ts = timespec()
            clock_gettime(CLOCK_MONOTONIC, &ts)
            return UInt64(ts.tv_sec) * 1_000_000_000 + UInt64(ts.tv_nsec)
        }
        let engine = try makeEngine(#"{"fcm": {"unregisteredPrefixes": ["dead"]}}"#)
        let (state, _) = openConnection(engine)
        let access = try token(engine, state)
        #expect(engine.stats().lastAcceptedNanos == 0)
        let before = now()
        #expect(try send(engine, state, access: access, body: #"{"message":{"token":"t"}}"#).status == 200)
        let after = now()
        let stamp = engine.stats().lastAcceptedNanos
        #expect(stamp >= before && stamp <= after)
        #expect(try send(engine, state, access: access, body: #"{"message":{"token":"dead-1"}}"#).status == 404)
        #expect(
            try send(engine, state, access: access, body: #"{"message":{"token":"t"},"validate_only":true}"#).status
                == 200)
        #expect(engine.stats().lastAcceptedNanos == stamp)
        #expect(engine.stats().json.contains("\"last_accepted_ns\":\(stamp)}"))
        engine.resetStats()
        #expect(engine.stats().lastAcceptedNanos == 0)
    }

    @Test func fcmErrorRateCarriesRetryAfter() throws {
        let engine = try makeEngine(#"{"errorRate": 1, "errorStatuses": [503], "retryAfterSeconds": 7}"#)
        let (state, _) = openConnection(engine)
        let access = try token(engine, state)
        let r = try send(engine, state, access: access, body: #"{"message":{"token":"t"}}"#)
        #expect(r.status == 503 && r.header("retry-after") == "7")
        #expect(engine.stats().count(.fcm, 503, "UNAVAILABLE") == 1)
    }
}
