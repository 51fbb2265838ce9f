import Foundation
import Testing
import VolleyHTTP2
import VolleyHTTP2Server
import VolleyTestSupport
import VolleyTestTags

@testable import VolleyMock

/// The mock's injected latency over the wire, and the byte-level APNs checks that must decide exactly what the
/// String checks they replaced decided.

@Suite(.tags(.integration)) struct MockByteRulesTests {
    func decide(path: String? = nil, fields extra: [(String, [UInt8])] = [], jwt: Bool = true) throws -> (Int, String?)
    {
        let engine = try makeEngine()
        let (state, _) = openConnection(engine)
        let token = jwt ? try MockTokenMinter.apnsProviderToken(credentials: try mockTestCredentials.get()) : nil
        var req = try apnsRequest(jwt: token)
        if let path { req.path = path }
        for (name, value) in extra {
            req.fields.set(name, nil)
            value.withUnsafeBufferPointer { v in
                Array(name.utf8).withUnsafeBufferPointer { n in req.fields.append(nameBytes: n, valueBytes: v) }
            }
        }
        let r = try #require(engine.process(req, state: state).response)
        return (r.status, reason(r))
    }

    /// A combining mark right after "/3/device/" joins the "/" into one Character: String.hasPrefix said no.
    @Test func combiningMarkAfterThePrefixIsABadPath() throws {
        let (status, why) = try decide(path: "/3/device/\u{301}abc")
        #expect(status == 404 && why == "BadPath")
        let (s2, w2) = try decide(path: "/3/device/é")
        #expect(s2 == 400 && w2 == "BadDeviceToken")
    }

    /// 22 invalid bytes decode to 22 U+FFFD (66 UTF-8 bytes): over the 64-byte collapse-id limit, as before.
    @Test func invalidUTF8IsMeasuredAfterDecoding() throws {
        let (status, why) = try decide(fields: [("apns-collapse-id", Array(repeating: 0xFF, count: 22))])
        #expect(status == 400 && why == "BadCollapseId")
        let (ok, _) = try decide(fields: [("apns-collapse-id", Array(repeating: 0x63, count: 22))])
        #expect(ok == 200)
    }

    @Test func jwtVerdictIsCachedByBytes() throws {
        let engine = try makeEngine()
        let (state, _) = openConnection(engine)
        let jwt = try MockTokenMinter.apnsProviderToken(credentials: try mockTestCredentials.get())
        for _ in 0..<3 { #expect(engine.process(try apnsRequest(jwt: jwt), state: state).response?.status == 200) }
        #expect(engine.stats().jwtVerifications == 1)
        // A different value (same token, upper-case scheme) is verified once more, then cached too.
        var upper = try apnsRequest(jwt: nil)
        upper.fields.append("authorization", "Bearer " + jwt)
        for _ in 0..<2 { #expect(engine.process(upper, state: state).response?.status == 200) }
        #expect(engine.stats().jwtVerifications == 2)
        // Back to the first value: answered from the per-connection table, no new verification.
        #expect(engine.process(try apnsRequest(jwt: jwt), state: state).response?.status == 200)
        #expect(engine.stats().jwtVerifications == 2)
        let (status, why) = try decide(fields: [("authorization", Array("bearer x".utf8))])
        #expect(status == 403 && why == "InvalidProviderToken")
        let (s2, w2) = try decide(fields: [("authorization", Array("bearer ".utf8))])
        #expect(s2 == 403 && w2 == "MissingProviderToken")
    }
}

/// Injected latency over the wire (h2load): every answer waits at least the latency, none is lost, and GOAWAY /
/// reset still cut the run where they did without latency.
@Suite(.serialized, .tags(.integration)) struct MockLatencyWireTests {
    /// h2load's "time for request:  min  max  mean ..." in milliseconds.
    func requestTimes(_ output: String) -> (min: Double, max: Double)? {
        guard let line = output.split(separator: "\n").first(where: { $0.hasPrefix("time for request:") }) else {
            return nil
        }
        let cols = line.dropFirst("time for request:".count).split(separator: " ")
        func ms(_ s: Substring) -> Double? {
            if s.hasSuffix("us") { return Double(s.dropLast(2)).map { $0 / 1000 } }
            if s.hasSuffix("ms") { return Double(s.dropLast(2)) }
            if s.hasSuffix("s") { return Double(s.dropLast(1)).map { $0 * 1000 } }
            return nil
        }
        guard cols.count >= 2, let a = ms(cols[0]), let b = ms(cols[1]) else { return nil }
        return (a, b)
    }

    func wire(_ config: String, n: Int, m: Int) throws -> (ToolResult, MockServerFixture) {
        let mock = try MockServerFixture(configuration: config)
        let jwt = try MockTokenMinter.apnsProviderToken(credentials: mock.server.credentials)
        let bodyFile = mock.stateDirectory + "/h2load-body.json"
        try wireBody.write(toFile: bodyFile, atomically: true, encoding: .utf8)
        var args = ["-n", String(n), "-c", "1", "-m", String(m), "-d", bodyFile]
        for h in apnsHeaders(mock, jwt: jwt) { args += ["-H", h] }
        args.append("https://127.0.0.1:\(mock.port)/3/device/0123456789abcdef")
        return (try run("/usr/bin/h2load", args), mock)
    }

    @Test func everyAnswerWaitsAtLeastTheLatency() throws {
        let (r, mock) = try wire(#"{"latencyMs": 40, "latencyJitterMs": 20}"#, n: 400, m: 100)
        defer { mock.stop() }
        #expect(r.output.contains("400 succeeded"), "\(r.output)")
        let t = try #require(requestTimes(r.output), "\(r.output)")
        #expect(t.min >= 40, "\(r.output)")
        #expect(mock.stats().acceptedAPNs == 400)
    }

    @Test func withoutLatencyAnswersAreImmediate() throws {
        let (r, mock) = try wire(#"{"latencyMs": 0}"#, n: 200, m: 10)
        defer { mock.stop() }
        #expect(r.output.contains("200 succeeded"), "\(r.output)")
        let t = try #require(requestTimes(r.output), "\(r.output)")
        #expect(t.min < 40, "\(r.output)")
    }

    @Test func goAwayAfterNStreamsWithLatency() throws {
        let (r, mock) = try wire(#"{"latencyMs": 30, "goAwayAfterStreams": 5}"#, n: 20, m: 1)
        defer { mock.stop() }
        #expect(r.output.contains("5 succeeded"), "\(r.output)")
        #expect(mock.stats().acceptedAPNs == 5)
    }

    @Test func resetAfterMStreamsWithLatency() throws {
        let (r, mock) = try wire(#"{"latencyMs": 30, "resetAfterStreams": 4}"#, n: 20, m: 1)
        defer { mock.stop() }
        #expect(r.output.contains("3 succeeded"), "\(r.output)")
        #expect(mock.stats().count(.apns, 0, "TCPReset") == 1)
    }
}

/// The JSON validator skips plain string bytes eight at a time: every special byte at every offset around the word
/// boundaries must still be seen.
@Suite(.tags(.integration)) struct MockJSONWordScanTests {
    func check(_ inner: [UInt8], closed: Bool = true) -> MockJSONKind? {
        var doc = Array(#"{"k":""#.utf8) + inner
        if closed { doc += Array(#""}"#.utf8) }
        return MockJSONValidator.validate(doc)
    }

    @Test func everyOffset() {
        for n in 0...40 {
            let plain = [UInt8](repeating: UInt8(ascii: "a"), count: n)
            #expect(check(plain) == .object, "plain \(n)")
            #expect(check(plain, closed: false) == nil, "unterminated \(n)")
            for p in 0...n {
                var ctl = plain
                ctl.insert(0x01, at: p)
                #expect(check(ctl) == nil, "control at \(p) of \(n)")
                var esc = plain
                esc.insert(contentsOf: Array(#"\""#.utf8), at: p)
                #expect(check(esc) == .object, "escaped quote at \(p) of \(n)")
                var bad = plain
                bad.insert(contentsOf: Array(#"\x"#.utf8), at: p)
                #expect(check(bad) == nil, "bad escape at \(p) of \(n)")
                var quote = plain
                quote.insert(UInt8(ascii: "\""), at: p)
                #expect(check(quote) == nil, "bare quote at \(p) of \(n)")
                var utf8 = plain
                utf8.insert(contentsOf: Array("é".utf8), at: p)
                #expect(check(utf8) == .object, "é at \(p) of \(n)")
                var invalid = plain
                invalid.insert(0xFF, at: p)
                #expect(check(invalid) == nil, "0xFF at \(p) of \(n)")
            }
        }
    }
}
