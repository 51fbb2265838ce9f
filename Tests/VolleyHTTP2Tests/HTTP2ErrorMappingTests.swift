import Glibc
import Testing
import VolleyHTTP2
import VolleyTestTags

/// The C libraries' errors become `HTTP2Error`s in one place each; the phase decides whether a resend is safe.
@Suite(.tags(.unit)) struct HTTP2ErrorMappingTests {
    @Test(
        arguments: [
            (HTTP2ConnectionPhase.connecting, HTTP2Error.Kind.connectFailed, true),
            (.established, .connectionReset, false),
            (.listening, .configuration, false),
            (.handshake, .tlsHandshake, false),
        ] as [(HTTP2ConnectionPhase, HTTP2Error.Kind, Bool)])
    func posix(_ phase: HTTP2ConnectionPhase, _ kind: HTTP2Error.Kind, _ safe: Bool) {
        let e = HTTP2Error.posix(ECONNREFUSED, "connect failed", in: phase)
        #expect(e.kind == kind && e.resendIsSafe == safe)
        #expect(e.message == "connect failed: Connection refused")
    }

    @Test func handshakeRefusalIsTLSAndAClosedSocketIsAConnectionFailure() {
        // OpenSSL's SSL_get_error: SSL_ERROR_SSL is 1 (a protocol failure: alert, no shared cipher),
        // SSL_ERROR_SYSCALL is 5 (the socket failed or the peer closed it).
        let refused = HTTP2Error.openSSL("TLS handshake failed", sslError: 1, in: .handshake)
        #expect(refused.kind == .tlsHandshake && !refused.resendIsSafe)
        let closed = HTTP2Error.openSSL("TLS handshake failed", sslError: 5, in: .handshake)
        #expect(closed.kind == .connectFailed && closed.resendIsSafe, "no request leaves before the handshake ends")
    }

    @Test func nghttp2ErrorsAreSafeOnlyBeforeARequestIsQueued() {
        // NGHTTP2_ERR_NOMEM is -901.
        #expect(HTTP2Error.nghttp2(-901, "submit", in: .submitting).resendIsSafe)
        #expect(HTTP2Error.nghttp2(-901, "session", in: .setup).resendIsSafe)
        let onTheWire = HTTP2Error.nghttp2(-901, "HTTP/2 protocol error", in: .established)
        #expect(onTheWire.kind == .protocolError && !onTheWire.resendIsSafe)
        #expect(onTheWire.message.hasPrefix("HTTP/2 protocol error: "))
    }

    @Test func streamCloseCodes() throws {
        // RFC 9113 §7: NO_ERROR 0x0, PROTOCOL_ERROR 0x1, REFUSED_STREAM 0x7, CANCEL 0x8.
        #expect(HTTP2Error.streamClosed(1, errorCode: 0, hasStatus: true, aboveGoAway: false) == nil)
        let refused = try #require(HTTP2Error.streamClosed(3, errorCode: 7, hasStatus: false, aboveGoAway: false))
        #expect(refused.kind == .refusedStream && refused.resendIsSafe)
        let unprocessed = try #require(HTTP2Error.streamClosed(5, errorCode: 7, hasStatus: false, aboveGoAway: true))
        #expect(unprocessed.kind == .goAway && unprocessed.resendIsSafe)
        let noStatus = try #require(HTTP2Error.streamClosed(7, errorCode: 0, hasStatus: false, aboveGoAway: false))
        #expect(noStatus.kind == .protocolError && !noStatus.resendIsSafe)
        let cancelled = try #require(HTTP2Error.streamClosed(9, errorCode: 8, hasStatus: true, aboveGoAway: false))
        #expect(cancelled.kind == .streamReset && !cancelled.resendIsSafe && cancelled.message.contains("CANCEL"))
    }
}
