import Foundation
import Testing
import VolleyHTTP2
import VolleyTestTags

@testable import VolleyHTTP2Server

/// The server's batched delayed answers (the mock's injected latency) and the packed request fields.

@Suite(.tags(.integration)) struct DelayedResponseQueueTests {
    @Test func popsInDeadlineOrderWithTiesInArrivalOrder() {
        var q = DelayedResponseQueue()
        var rng = SystemRandomNumberGenerator()
        var expected: [(UInt64, Int32)] = []
        for sid in Int32(1)...500 {
            let d = UInt64.random(in: 0...50, using: &rng) * 1_000 // many equal deadlines
            q.push(deadline: d, streamID: sid)
            expected.append((d, sid))
        }
        // Stable sort: equal deadlines keep arrival order.
        let order = expected.enumerated().sorted { a, b in
            a.element.0 != b.element.0 ? a.element.0 < b.element.0 : a.offset < b.offset
        }.map { $0.element.1 }
        var popped: [Int32] = []
        while let sid = q.popDue(now: .max) { popped.append(sid) }
        #expect(popped == order)
        #expect(q.isEmpty)
    }

    @Test func popDueLeavesLaterDeadlines() {
        var q = DelayedResponseQueue()
        for (i, d) in [30, 10, 20, 40].enumerated() { q.push(deadline: UInt64(d), streamID: Int32(i)) }
        #expect(q.first == 10)
        #expect(q.popDue(now: 9) == nil)
        #expect(q.popDue(now: 25) == 1)
        #expect(q.popDue(now: 25) == 2)
        #expect(q.popDue(now: 25) == nil)
        #expect(q.count == 2)
        #expect(q.first == 30)
    }
}

@Suite(.tags(.integration)) struct ServerRequestFieldsTests {
    @Test func requestFieldsRoundTrip() {
        var r = HTTP2ServerRequest(
            method: "POST", path: "/3/device/abc", authority: "example", scheme: "https",
            headers: [HTTP2Header("Apns-Topic", "t"), HTTP2Header("x", "1"), HTTP2Header("x", "2")])
        #expect(r.method == "POST")
        #expect(r.path == "/3/device/abc")
        #expect(r.authority == "example")
        #expect(r.scheme == "https")
        #expect(r.headers == [HTTP2Header("apns-topic", "t"), HTTP2Header("x", "1"), HTTP2Header("x", "2")])
        #expect(r.header("APNS-TOPIC") == "t")
        #expect(r.header(":path") == nil)
        r.path = "/other"
        #expect(r.path == "/other")
        #expect(r.method == "POST")
        #expect(r.headers.count == 3)
        r.headers = [HTTP2Header("y", "3")]
        #expect(r.headers == [HTTP2Header("y", "3")])
        #expect(r.path == "/other")
    }

    @Test func rawBytesAreKeptAsReceived() {
        var f = HTTP2HeaderBlock()
        let invalid: [UInt8] = [0xFF, 0x41, 0x00, 0x80]
        invalid.withUnsafeBufferPointer { v in
            Array("k".utf8).withUnsafeBufferPointer { n in f.append(nameBytes: n, valueBytes: v) }
        }
        f.append("", "")
        let seen = f.withUnsafeFields { fields in fields.map { (Array($0.name), Array($0.value)) } }
        #expect(seen.count == 2)
        #expect(seen.first?.0 == Array("k".utf8) && seen.first?.1 == invalid)
        #expect(seen.last?.0 == [] && seen.last?.1 == [])
    }
}
