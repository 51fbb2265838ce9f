internal import CNGHTTP2
internal import COpenSSL
// The C libraries' errors as `HTTP2Error`s: one function per library (POSIX sockets, nghttp2, OpenSSL) decides the
// kind and whether the requests the error fails may be sent again, from the phase the connection was in. Call
// sites name what failed and the phase; they never pick a kind or a resend flag by hand.
import Glibc

/// Where a connection was when a C call failed. It decides what a failure may have cost: nothing a request carried
/// reaches the peer before the connection is established and the request submitted.
package enum HTTP2ConnectionPhase: Sendable {
    /// Building contexts and sessions, before any socket: a bad configuration or no memory.
    case setup
    /// Resolving, connecting, creating the TLS object: no request has left.
    case connecting
    /// The TLS handshake: the peer's certificate or TLS parameters are refused; resending elsewhere will not help.
    case handshake
    /// Requests are on the wire: what was written may have reached the server.
    case established
    /// A request is being handed to nghttp2; it was never queued for the wire.
    case submitting
    /// A server binding its listening socket.
    case listening
}

extension HTTP2Error {
    /// A POSIX call failed with `code` (`errno`, or `SO_ERROR` after a non-blocking connect).
    package static func posix(_ code: Int32, _ what: String, in phase: HTTP2ConnectionPhase) -> HTTP2Error {
        let text = "\(what): \(String(cString: strerror(code)))"
        switch phase {
        case .setup, .listening: return HTTP2Error(.configuration, resendIsSafe: false, text)
        case .connecting, .submitting: return HTTP2Error(.connectFailed, resendIsSafe: true, text)
        case .handshake: return HTTP2Error(.tlsHandshake, resendIsSafe: false, text)
        case .established: return HTTP2Error(.connectionReset, resendIsSafe: false, text)
        }
    }

    /// `getaddrinfo` failed with `code` (its own codes, not `errno`): nothing was sent.
    package static func resolver(_ code: Int32, host: String) -> HTTP2Error {
        HTTP2Error(.connectFailed, resendIsSafe: true, "cannot resolve \(host): \(String(cString: gai_strerror(code)))")
    }

    /// The peer closed the connection (TLS close_notify or EOF) while requests may have been on the wire.
    package static let peerClosed = HTTP2Error(.connectionReset, resendIsSafe: false, "the peer closed the connection")

    /// An nghttp2 library call failed with `code` (a negative `nghttp2_error`).
    package static func nghttp2(_ code: Int32, _ what: String, in phase: HTTP2ConnectionPhase) -> HTTP2Error {
        let text = "\(what): \(String(cString: nghttp2_strerror(code)))"
        switch phase {
        // Before a request is queued on the session, it can go to another connection unchanged.
        case .setup, .connecting, .submitting, .listening: return HTTP2Error(.protocolError, resendIsSafe: true, text)
        case .handshake, .established: return HTTP2Error(.protocolError, resendIsSafe: false, text)
        }
    }

    /// How a client stream closed (RFC 9113 §5.4.2, §6.8, §8.7): nil when it closed cleanly with a response status.
    /// REFUSED_STREAM, and streams above a GOAWAY's last-stream-id, were not processed: safe to resend.
    package static func streamClosed(
        _ streamID: Int32, errorCode: UInt32, hasStatus: Bool,
        aboveGoAway: Bool
    ) -> HTTP2Error? {
        if errorCode == NGHTTP2_NO_ERROR.rawValue && hasStatus { return nil }
        if errorCode == NGHTTP2_REFUSED_STREAM.rawValue {
            return aboveGoAway
                ? HTTP2Error(.goAway, resendIsSafe: true, "stream \(streamID) above the GOAWAY's last stream id")
                : HTTP2Error(.refusedStream, resendIsSafe: true, "stream \(streamID) refused by the server")
        }
        if errorCode == NGHTTP2_NO_ERROR.rawValue {
            return HTTP2Error(.protocolError, resendIsSafe: false, "stream \(streamID) ended without a response status")
        }
        return HTTP2Error(
            .streamReset, resendIsSafe: false,
            "stream \(streamID) reset by the server: \(String(cString: nghttp2_http2_strerror(errorCode)))")
    }

    /// An OpenSSL call failed: the error queue's entries (drained) become the message. `sslError` is
    /// `SSL_get_error`'s answer, when the call was on an `SSL*`; a system-call failure names its `errno`.
    package static func openSSL(_ what: String, sslError: Int32? = nil, in phase: HTTP2ConnectionPhase) -> HTTP2Error {
        let sysErrno = errno
        var text = openSSLErrorString(what)
        if sslError == SSL_ERROR_SYSCALL && text == what {
            text += sysErrno == 0 ? ": peer closed the connection" : ": \(String(cString: strerror(sysErrno)))"
        }
        switch phase {
        case .setup, .listening: return HTTP2Error(.configuration, resendIsSafe: false, text)
        // An SSL object that cannot be made: nothing was sent.
        case .connecting, .submitting: return HTTP2Error(.configuration, resendIsSafe: true, text)
        // The connection cut during the handshake without a TLS alert (a load balancer whose backend is down, a
        // server going away): nothing was sent, and the endpoint may come back, so it counts as a failed connect.
        case .handshake where sslError == SSL_ERROR_SYSCALL:
            return HTTP2Error(.connectFailed, resendIsSafe: true, text)
        case .handshake: return HTTP2Error(.tlsHandshake, resendIsSafe: false, text)
        case .established: return HTTP2Error(.connectionReset, resendIsSafe: false, "connection failed: \(text)")
        }
    }

    /// The peer's certificate did not verify (`SSL_get_verify_result`): the app's trust settings must change.
    package static func certificateVerification(_ verifyResult: Int) -> HTTP2Error {
        HTTP2Error(
            .certificateVerification, resendIsSafe: false,
            "TLS certificate verification failed: \(String(cString: X509_verify_cert_error_string(verifyResult)))")
    }
}

/// The most recent OpenSSL error queue entries as text, after `fallback` (and clears the queue).
func openSSLErrorString(_ fallback: String) -> String {
    var parts: [String] = []
    while true {
        let code = ERR_get_error()
        if code == 0 { break }
        var buf = [CChar](repeating: 0, count: 256)
        ERR_error_string_n(code, &buf, buf.count)
        parts.append(String(decoding: buf.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self))
    }
    return parts.isEmpty ? fallback : "\(fallback): \(parts.joined(separator: "; "))"
}
