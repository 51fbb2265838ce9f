import Testing
import VolleyTestTags

@testable import VolleyHTTP2

/// Everything one session reported to its delegate.
private final class SessionEvents: HTTP2SessionDelegate {
    var received: [HTTP2FrameSummary] = []
    var sent: [HTTP2FrameSummary] = []
    var began: [Int32] = []
    var fields: [Int32: [(name: String, value: String)]] = [:]
    var data: [Int32: [UInt8]] = [:]
    var closed: [Int32: UInt32] = [:]

    func headersBegan(streamID: Int32) { began.append(streamID) }
    func headerReceived(streamID: Int32, name: UnsafeBufferPointer<UInt8>, value: UnsafeBufferPointer<UInt8>) {
        fields[streamID, default: []].append(
            (String(decoding: name, as: UTF8.self), String(decoding: value, as: UTF8.self)))
    }
    func dataReceived(streamID: Int32, _ data: UnsafeBufferPointer<UInt8>) {
        self.data[streamID, default: []].append(contentsOf: data)
    }
    func frameReceived(_ frame: HTTP2FrameSummary) { received.append(frame) }
    func frameSent(_ frame: HTTP2FrameSummary) { sent.append(frame) }
    func streamClosed(_ streamID: Int32, errorCode: UInt32) { closed[streamID] = errorCode }

    func field(_ streamID: Int32, _ name: String) -> String? {
        fields[streamID]?.first { $0.name == name }?.value
    }
    func receivedCount(_ kind: HTTP2FrameKind, ack: Bool = false) -> Int {
        received.filter { $0.kind == kind && $0.isAck == ack }.count
    }
}

/// One end of an in-memory connection: a session and its delegate (which outlives it: both are owned here).
private final class Peer {
    let events: SessionEvents
    let session: HTTP2Session
    init(_ role: HTTP2Session.Role) throws {
        let events = SessionEvents()
        self.events = events
        session = try HTTP2Session(role: role, delegate: events)
    }
}

/// Moves bytes both ways until neither session has anything more to send.
private func exchange(_ a: Peer, _ b: Peer) throws {
    for _ in 0..<64 {
        let ab = try a.session.pendingOutput()
        let ba = try b.session.pendingOutput()
        if ab.isEmpty && ba.isEmpty { return }
        try ab.withUnsafeBytes { try b.session.receive($0) }
        try ba.withUnsafeBytes { try a.session.receive($0) }
    }
    Issue.record("the sessions kept sending")
}

/// A client and a server after both SETTINGS frames were exchanged and acknowledged, set up as the connections do.
private func connectedPair(maxConcurrentStreams: UInt32 = 100) throws -> (client: Peer, server: Peer) {
    let client = try Peer(.client)
    let server = try Peer(.server)
    client.session.submitSettings([.enablePush(false), .initialWindowSize(1 << 20)], connectionWindow: 1 << 24)
    server.session.submitSettings([.maxConcurrentStreams(maxConcurrentStreams), .initialWindowSize(1 << 20)])
    try exchange(client, server)
    return (client, server)
}

private func request(_ path: String, body: String = "") -> HTTP2Request {
    HTTP2Request(
        method: "POST", authority: "push.example", path: path, headers: [HTTP2Header("apns-topic", "app.example")],
        body: Array(body.utf8))
}

private func submit(_ request: HTTP2Request, on peer: Peer, body: OutgoingBody? = nil) -> Int32? {
    guard case .submitted(let sid) = peer.session.submitRequest(request, body: body) else { return nil }
    return sid
}

@Suite("nghttp2 session wrapper, client and server in memory", .tags(.unit))
struct HTTP2SessionTests {
    @Test func settingsAreExchangedAndAcknowledged() throws {
        let client = try Peer(.client)
        let server = try Peer(.server)
        client.session.submitSettings([.enablePush(false), .initialWindowSize(1 << 20)], connectionWindow: 1 << 24)
        server.session.submitSettings([.maxConcurrentStreams(250)])
        #expect(client.session.remoteMaxConcurrentStreams != 250)
        try exchange(client, server)

        #expect(client.session.remoteMaxConcurrentStreams == 250)
        for peer in [client, server] {
            #expect(peer.events.receivedCount(.settings) == 1)
            #expect(peer.events.receivedCount(.settings, ack: true) == 1)
        }
        // The client widened the connection's receive window (RFC 9113 §6.9.2).
        #expect(client.events.sent.contains { $0.kind == .windowUpdate && $0.streamID == 0 })
        #expect(server.events.received.contains { $0.kind == .windowUpdate && $0.streamID == 0 })
        #expect(client.session.wantsRead && server.session.wantsRead)
    }

    @Test func requestAndResponseCrossInBothDirections() throws {
        let (client, server) = try connectedPair()
        let req = request("/3/device/abc", body: "{\"aps\":{}}")
        let requestBody = OutgoingBody(req.body)
        try withExtendedLifetime((req, requestBody)) {
            let sid = try #require(submit(req, on: client, body: requestBody))
            #expect(sid == 1)
            try exchange(client, server)

            #expect(server.events.began == [sid])
            #expect(server.events.field(sid, ":method") == "POST")
            #expect(server.events.field(sid, ":scheme") == "https")
            #expect(server.events.field(sid, ":authority") == "push.example")
            #expect(server.events.field(sid, ":path") == "/3/device/abc")
            #expect(server.events.field(sid, "apns-topic") == "app.example")
            #expect(server.events.data[sid] == Array("{\"aps\":{}}".utf8))
            #expect(server.events.received.contains { $0.streamID == sid && $0.endsStream })
            // Pseudo-header fields come first (RFC 9113 §8.3).
            let names = server.events.fields[sid]?.map(\.name) ?? []
            #expect(names.prefix(4).allSatisfy { $0.hasPrefix(":") })

            let responseBody = OutgoingBody(Array("{\"reason\":\"BadDeviceToken\"}".utf8))
            let response = HTTP2Response(status: 400, headers: [HTTP2Header("APNS-ID", "42")])
            #expect(server.session.submitResponse(streamID: sid, response, body: responseBody) == nil)
            try exchange(client, server)

            #expect(client.events.field(sid, ":status") == "400")
            #expect(client.events.field(sid, "apns-id") == "42")
            #expect(client.events.data[sid] == Array("{\"reason\":\"BadDeviceToken\"}".utf8))
            #expect(client.events.closed[sid] == HTTP2ErrorCode.noError)
            #expect(server.events.closed[sid] == HTTP2ErrorCode.noError)
        }
    }

    @Test func goAwayRefusesTheStreamsAboveItsLastStreamID() throws {
        let (client, server) = try connectedPair()
        let reqs = (0..<3).map { request("/3/device/\($0)") }
        try withExtendedLifetime(reqs) {
            let sids = reqs.compactMap { submit($0, on: client) }
            #expect(sids == [1, 3, 5])
            try exchange(client, server)
            #expect(server.events.began == sids)

            server.session.submitGoAway(
                lastStreamID: 1, errorCode: HTTP2ErrorCode.noError, debugData: Array("bye".utf8))
            #expect(server.session.submitResponse(streamID: 1, HTTP2Response(status: 200), body: nil) == nil)
            try exchange(client, server)

            let goAway = try #require(client.events.received.first { $0.kind == .goAway })
            #expect(goAway.lastStreamID == 1)
            #expect(goAway.errorCode == HTTP2ErrorCode.noError)
            #expect(server.events.sent.contains { $0.kind == .goAway })
            // RFC 9113 §6.8: streams above last-stream-id were not processed; nghttp2 closes them as refused.
            #expect(client.events.closed[1] == HTTP2ErrorCode.noError)
            #expect(client.events.closed[3] == HTTP2ErrorCode.refusedStream)
            #expect(client.events.closed[5] == HTTP2ErrorCode.refusedStream)
            #expect(client.events.field(1, ":status") == "200")
            // Nothing left to do on either side: the driver closes the connection on this.
            #expect(!client.session.wantsRead && !client.session.wantsWrite)
        }
    }

    @Test func resetStreamClosesItOnBothSides() throws {
        let (client, server) = try connectedPair()
        let reqs = [request("/3/device/a"), request("/3/device/b")]
        try withExtendedLifetime(reqs) {
            let sids = reqs.compactMap { submit($0, on: client) }
            #expect(sids == [1, 3])
            try exchange(client, server)

            // The server refuses one stream; the client cancels the other (as on a request timeout).
            server.session.submitReset(streamID: 1, errorCode: HTTP2ErrorCode.refusedStream)
            client.session.submitReset(streamID: 3, errorCode: HTTP2ErrorCode.cancel)
            try exchange(client, server)

            #expect(client.events.received.contains { $0.kind == .rstStream && $0.streamID == 1 && $0.errorCode == 7 })
            #expect(server.events.received.contains { $0.kind == .rstStream && $0.streamID == 3 && $0.errorCode == 8 })
            #expect(client.events.closed == [1: HTTP2ErrorCode.refusedStream, 3: HTTP2ErrorCode.cancel])
            #expect(server.events.closed == [1: HTTP2ErrorCode.refusedStream, 3: HTTP2ErrorCode.cancel])
            #expect(client.events.fields[1] == nil && client.events.fields[3] == nil)
            // The connection lives on.
            #expect(client.session.wantsRead && server.session.wantsRead)
        }
    }

    @Test func loweredMaxConcurrentStreamsHoldsBackNewStreams() throws {
        let (client, server) = try connectedPair(maxConcurrentStreams: 100)
        #expect(client.session.remoteMaxConcurrentStreams == 100)
        server.session.submitSettings([.maxConcurrentStreams(1)])
        try exchange(client, server)
        #expect(client.session.remoteMaxConcurrentStreams == 1)
        #expect(client.events.receivedCount(.settings) == 2)

        let reqs = [request("/3/device/a"), request("/3/device/b")]
        try withExtendedLifetime(reqs) {
            let sids = reqs.compactMap { submit($0, on: client) }
            #expect(sids == [1, 3])
            try exchange(client, server)
            // Only one stream may be open: the second waits in the client until the first closes.
            #expect(server.events.began == [1])

            #expect(server.session.submitResponse(streamID: 1, HTTP2Response(status: 200), body: nil) == nil)
            try exchange(client, server)
            #expect(client.events.closed[1] == HTTP2ErrorCode.noError)
            #expect(server.events.began == [1, 3])
        }
    }

    @Test func bytesThatAreNotHTTP2AreAProtocolError() throws {
        let server = try Peer(.server)
        let garbage = Array("GET / HTTP/1.1\r\nHost: x\r\n\r\n".utf8)
        let error = #expect(throws: HTTP2Error.self) {
            try garbage.withUnsafeBytes { try server.session.receive($0) }
        }
        #expect(error?.kind == .protocolError)
        #expect(error?.resendIsSafe == false)
    }
}
