import Foundation
import Synchronization
import Testing
import VolleyTestTags

@testable import VolleyHTTP2

@Suite("Pre-encoded header fields", .tags(.integration))
struct HTTP2HeaderBlockTests {
    @Test func roundTripsFieldsInOrderWithFlags() {
        var b = HTTP2HeaderBlock()
        b.append(":method", "POST")
        b.append(":path", "/3/device/", "abc", sensitive: true)
        b.append(name: "Apns-Topic", value: "com.example")
        let bytes: [UInt8] = Array("x".utf8)
        bytes.withUnsafeBufferPointer { b.append("apns-id", bytes: $0, sensitive: true) }
        #expect(b.count == 4)
        #expect(
            b.headers == [
                HTTP2Header(":method", "POST"), HTTP2Header(":path", "/3/device/abc", sensitive: true),
                HTTP2Header("apns-topic", "com.example"), HTTP2Header("apns-id", "x", sensitive: true),
            ])
        #expect(b.value(for: "APNS-TOPIC") == "com.example")
        #expect(b.value(for: "missing") == nil)
        var c = HTTP2HeaderBlock([HTTP2Header("a", "1")])
        c.append(contentsOf: b)
        #expect(c.count == 5)
        #expect(c.headers.map(\.name) == ["a", ":method", ":path", "apns-topic", "apns-id"])
        #expect(HTTP2HeaderBlock().headers.isEmpty)
    }

    /// Names are stored lower case whichever append made them: the client hands them to nghttp2 uncopied, so
    /// nghttp2 no longer lower-cases them on the way out.
    @Test func namesFromBytesAreStoredLowerCase() {
        var b = HTTP2HeaderBlock()
        let name: [UInt8] = Array("X-Trace-ID".utf8)
        let value: [UInt8] = Array("AbC".utf8)
        name.withUnsafeBufferPointer { n in value.withUnsafeBufferPointer { b.append(nameBytes: n, valueBytes: $0) } }
        #expect(b.headers == [HTTP2Header("x-trace-id", "AbC")])
    }

    @Test func requestFromListedHeadersKeepsItsAccessors() {
        let r = HTTP2Request(
            method: "POST", authority: "h:1", path: "/p",
            headers: [
                HTTP2Header("X-Id", "7"),
                HTTP2Header("authorization", "bearer t", sensitive: true),
            ], body: [1])
        #expect(r.method == "POST")
        #expect(r.authority == "h:1")
        #expect(r.path == "/p")
        #expect(r.headers == [HTTP2Header("x-id", "7"), HTTP2Header("authorization", "bearer t", sensitive: true)])
        #expect(r.fields.headers.first(where: { $0.name == ":path" })?.sensitive == true)
        var m = r
        m.path = "/q"
        m.headers.append(HTTP2Header("x-more", "1"))
        #expect(m.method == "POST" && m.authority == "h:1" && m.path == "/q" && m.body == [1])
        #expect(m.headers.map(\.name) == ["x-id", "authorization", "x-more"])
        #expect(m.headers[1].sensitive)
    }

    @Test func responseLooksUpListedAndReceivedFields() {
        var f = HTTP2HeaderBlock()
        f.append("apns-id", "id-1")
        let received = HTTP2Response(status: 200, fields: f)
        #expect(received.header("APNS-ID") == "id-1")
        #expect(received.headers == [HTTP2Header("apns-id", "id-1")])
        let listed = HTTP2Response(status: 200, headers: [HTTP2Header("retry-after", "5")])
        #expect(listed.header("Retry-After") == "5")
        #expect(listed.headers == [HTTP2Header("retry-after", "5")])
    }

    /// Pseudo-header fields in the per-request block still go out before the shared regular fields
    /// (RFC 9113 §8.3: a server resets a stream whose pseudo-headers follow a regular field).
    @Test func sharedAndPerRequestFieldsReachTheServer() async throws {
        let pki = try TestPKI.get()
        let seen = Mutex<[String: String]>([:])
        let h = RecordingHandler { req, _, _, _ in
            seen.withLock { s in
                s["method"] = req.method
                s["path"] = req.path
                s["topic"] = req.header("apns-topic")
                s["x-id"] = req.header("x-id")
                s["x-trace"] = req.header("x-trace")
            }
            return true
        }
        let s = try startServer(pki, handler: h)
        defer { s.server.stop() }
        let pool = HTTP2ConnectionPool(
            configuration: HTTP2ClientConfiguration(
                host: "127.0.0.1", port: s.port, caFile: pki.caFile, connectTimeoutSeconds: 5, requestTimeoutSeconds: 10
            ),
            logger: testLogger)
        var shared = HTTP2HeaderBlock()
        shared.append("apns-topic", "com.example.app")
        var own = HTTP2HeaderBlock()
        own.append(":method", "POST")
        own.append(":authority", "127.0.0.1:\(s.port)")
        own.append(":path", "/3/device/", "feed", sensitive: true)
        own.append("x-id", "42", sensitive: true)
        // Raw upper-case name bytes: nghttp2 gets the name uncopied, so the block must have lower-cased it
        // (a server resets a stream with an upper-case field name, RFC 9113 §8.2.1).
        let name: [UInt8] = Array("X-Trace".utf8)
        let value: [UInt8] = Array("7".utf8)
        name.withUnsafeBufferPointer { n in value.withUnsafeBufferPointer { own.append(nameBytes: n, valueBytes: $0) } }
        let r = await send(pool, HTTP2Request(sharedFields: shared, fields: own, body: Array("{}".utf8)))
        let response = try r.get()
        #expect(response.status == 200)
        #expect(response.header("apns-id") == "42")
        #expect(
            seen.withLock { $0 } == [
                "method": "POST", "path": "/3/device/feed", "topic": "com.example.app",
                "x-id": "42", "x-trace": "7",
            ])
        await shutdown(pool)
    }
}
