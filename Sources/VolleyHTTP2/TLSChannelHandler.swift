private import COpenSSL
import Foundation
import NIOCore

/// A certificate chain and its key, loaded and checked once, for serving TLS on NIO channels
/// (`TLSChannelHandler`): the same OpenSSL, protocol floor and options as every other TLS connection Volley
/// makes, so the process carries one TLS stack.
public struct TLSServerIdentity: Sendable {
    let context: TLSContext

    /// Why the files cannot serve.
    public enum Failure: Error, Sendable, CustomStringConvertible {
        /// The certificate chain file cannot be read as PEM certificates.
        case certificate(String)
        /// The key file cannot be read as a PEM private key.
        case key(String)
        /// The key is not the leaf certificate's.
        case mismatch(String)

        public var description: String {
            switch self {
            case .certificate(let m), .key(let m), .mismatch(let m): m
            }
        }
    }

    /// Reads the PEM chain (leaf first) and the PEM key and proves that they belong together; the server offers
    /// `alpnProtocols` in ALPN.
    public init(certificateChainFile: String, privateKeyFile: String, alpnProtocols: [String]) throws(Failure) {
        do {
            context = try TLSContext.nioServer(
                certificateChainFile: certificateChainFile, privateKeyFile: privateKeyFile,
                alpnProtocols: alpnProtocols)
        } catch {
            switch error {
            case .certificate(let m): throw .certificate(m)
            case .key(let m): throw .key(m)
            case .mismatch(let m): throw .mismatch(m)
            }
        }
    }
}

/// Why a TLS connection on a NIO channel ended.
public struct TLSChannelError: Error, Sendable, CustomStringConvertible {
    public let description: String
}

/// TLS on a NIO channel, server side (the API's HTTPS) or client side (Redis over TLS from the API's event loops):
/// ciphertext in and out on the channel, plaintext to and from the handlers after it. OpenSSL runs on two memory
/// BIOs, so it never touches the socket: the channel's event loop owns the `SSL*`, and every call into OpenSSL
/// happens on it.
///
/// Plaintext written before the handshake completes is held and encrypted once it does. A close first sends
/// `close_notify`. A handshake that fails closes the connection; the error goes down the pipeline first. The client
/// side starts the handshake when the channel becomes active and verifies the server's certificate and name.
public final class TLSChannelHandler: ChannelDuplexHandler {
    public typealias InboundIn = ByteBuffer
    public typealias InboundOut = ByteBuffer
    public typealias OutboundIn = ByteBuffer
    public typealias OutboundOut = ByteBuffer

    private let ssl: OpaquePointer
    /// Ciphertext from the peer, read by OpenSSL. Owned by `ssl` (SSL_set_bio).
    private let networkIn: OpaquePointer
    /// Ciphertext for the peer, written by OpenSSL. Owned by `ssl`.
    private let networkOut: OpaquePointer
    private let isClient: Bool
    private var handshakeStarted = false
    private var handshakeDone = false
    private var failed = false
    private var shutdownSent = false
    /// Plaintext written and not yet encrypted, with the promise of each write.
    private var unencrypted: [(ByteBuffer, EventLoopPromise<Void>?)] = []
    /// How many of `unencrypted` a flush has asked for (the rest were written after the last flush).
    private var flushedCount = 0
    /// Whether a channelRead since the last channelReadComplete produced plaintext for the handlers after this one.
    private var deliveredPlaintext = false

    /// One record's worth of plaintext at a time (TLS records carry at most 16 KiB).
    private static let readChunk = 16_384

    /// The server side, showing `identity`.
    public convenience init(identity: TLSServerIdentity) throws {
        try self.init(context: identity.context, serverName: nil)
    }

    /// The client side: the server must show a certificate `trust` verifies, naming `serverName` (a DNS name, also
    /// sent as SNI, or an IP literal).
    public convenience init(client trust: TLSClientTrust, serverName: String) throws {
        try self.init(context: trust.context, serverName: serverName)
    }

    private init(context: TLSContext, serverName: String?) throws {
        guard let ssl = SSL_new(context.pointer) else {
            throw TLSChannelError(description: openSSLErrorString("SSL_new failed"))
        }
        guard let rbio = BIO_new(BIO_s_mem()), let wbio = BIO_new(BIO_s_mem()) else {
            SSL_free(ssl)
            throw TLSChannelError(description: "BIO_new failed")
        }
        self.ssl = ssl
        networkIn = rbio
        networkOut = wbio
        isClient = serverName != nil
        SSL_set_bio(ssl, rbio, wbio)
        if let serverName {
            SSL_set_connect_state(ssl)
            do { try TLSConnection.setPeerName(serverName, on: ssl) } catch {
                throw TLSChannelError(description: error.message)
            }
        } else {
            SSL_set_accept_state(ssl)
        }
    }

    deinit { SSL_free(ssl) }

    public func handlerAdded(context: ChannelHandlerContext) {
        if context.channel.isActive { startClientHandshake(context: context) }
    }

    public func channelActive(context: ChannelHandlerContext) {
        startClientHandshake(context: context)
        context.fireChannelActive()
    }

    /// A client speaks first: its ClientHello goes out as soon as the connection is up.
    private func startClientHandshake(context: ChannelHandlerContext) {
        guard isClient, !handshakeStarted else { return }
        handshakeStarted = true
        advance(context: context)
    }

    public func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        guard !failed else { return }
        let bytes = unwrapInboundIn(data)
        bytes.withUnsafeReadableBytes { raw in
            // A memory BIO takes everything it is given (it grows); it fails only when memory does.
            if let base = raw.baseAddress, raw.count > 0 { _ = BIO_write(networkIn, base, Int32(raw.count)) }
        }
        advance(context: context)
    }

    public func channelReadComplete(context: ChannelHandlerContext) {
        if deliveredPlaintext {
            deliveredPlaintext = false
            context.fireChannelReadComplete()
        } else if !failed {
            // The bytes so far made no plaintext (a handshake message, half a record): the handlers after this one
            // still wait for the data they asked for, so ask the channel for more on their behalf.
            context.read()
        }
    }

    public func write(context: ChannelHandlerContext, data: NIOAny, promise: EventLoopPromise<Void>?) {
        guard !failed, !shutdownSent else {
            promise?.fail(ChannelError.ioOnClosedChannel)
            return
        }
        unencrypted.append((unwrapOutboundIn(data), promise))
    }

    public func flush(context: ChannelHandlerContext) {
        flushedCount = unencrypted.count
        if handshakeDone { encryptFlushed(context: context) }
    }

    public func close(context: ChannelHandlerContext, mode: CloseMode, promise: EventLoopPromise<Void>?) {
        guard mode == .all, handshakeDone, !failed, !shutdownSent else {
            context.close(mode: mode, promise: promise)
            return
        }
        shutdownSent = true
        ERR_clear_error()
        _ = SSL_shutdown(ssl)
        ERR_clear_error()
        let sent = context.eventLoop.makePromise(of: Void.self)
        sendCiphertext(context: context, promise: sent)
        // close_notify is a courtesy: the connection closes whether or not it could be written.
        let loopBound = NIOLoopBound(context, eventLoop: context.eventLoop)
        sent.futureResult.whenComplete { _ in loopBound.value.close(mode: mode, promise: promise) }
    }

    public func channelInactive(context: ChannelHandlerContext) {
        failUnencrypted(ChannelError.ioOnClosedChannel)
        context.fireChannelInactive()
    }

    public func handlerRemoved(context: ChannelHandlerContext) {
        failUnencrypted(ChannelError.ioOnClosedChannel)
    }

    /// Moves the connection on with the ciphertext that arrived: the handshake, then every whole record's
    /// plaintext up the pipeline, then what waits to be encrypted, then whatever OpenSSL has to send.
    private func advance(context: ChannelHandlerContext) {
        if !handshakeDone {
            ERR_clear_error()
            let rv = SSL_do_handshake(ssl)
            if rv == 1 {
                handshakeDone = true
            } else {
                let err = SSL_get_error(ssl, rv)
                guard err == SSL_ERROR_WANT_READ || err == SSL_ERROR_WANT_WRITE else {
                    let verify = SSL_get_verify_result(ssl)
                    if verify != X509_V_OK {
                        ERR_clear_error()
                        fail(context: context, HTTP2Error.certificateVerification(verify).message)
                    } else {
                        fail(context: context, openSSLErrorString("TLS handshake failed"))
                    }
                    return
                }
                sendCiphertext(context: context, promise: nil)
                return
            }
        }
        readPlaintext(context: context)
        guard !failed else { return }
        if flushedCount > 0 { encryptFlushed(context: context) } else { sendCiphertext(context: context, promise: nil) }
    }

    private func readPlaintext(context: ChannelHandlerContext) {
        while true {
            var buffer = context.channel.allocator.buffer(capacity: Self.readChunk)
            ERR_clear_error()
            var rv: Int32 = 0
            let n = buffer.writeWithUnsafeMutableBytes(minimumWritableBytes: Self.readChunk) { raw in
                rv = SSL_read(ssl, raw.baseAddress, Int32(Self.readChunk))
                return Int(max(0, rv))
            }
            if n > 0 {
                deliveredPlaintext = true
                context.fireChannelRead(wrapInboundOut(buffer))
                if failed { return }
                continue
            }
            let err = SSL_get_error(ssl, rv)
            switch err {
            case SSL_ERROR_WANT_READ, SSL_ERROR_WANT_WRITE:
                return
            case SSL_ERROR_ZERO_RETURN:
                // The peer's close_notify: answer it and close.
                context.close(promise: nil)
                return
            default:
                fail(context: context, openSSLErrorString("TLS read failed"))
                return
            }
        }
    }

    /// Encrypts the writes a flush asked for and sends their ciphertext; their promises follow the channel write.
    private func encryptFlushed(context: ChannelHandlerContext) {
        guard flushedCount > 0 else { return }
        let batch = unencrypted.prefix(flushedCount)
        unencrypted.removeFirst(flushedCount)
        flushedCount = 0
        var promises: [EventLoopPromise<Void>] = []
        for (plaintext, promise) in batch {
            if let promise { promises.append(promise) }
            var rest = plaintext
            while rest.readableBytes > 0 {
                ERR_clear_error()
                let written = rest.withUnsafeReadableBytes { raw in
                    SSL_write(ssl, raw.baseAddress, Int32(min(raw.count, Int(Int32.max))))
                }
                guard written > 0 else {
                    for p in promises { p.fail(TLSChannelError(description: "TLS write failed")) }
                    fail(context: context, openSSLErrorString("TLS write failed"))
                    return
                }
                rest.moveReaderIndex(forwardBy: Int(written))
            }
        }
        let sent: EventLoopPromise<Void>? = promises.isEmpty ? nil : context.eventLoop.makePromise()
        if let sent {
            let waiting = promises
            sent.futureResult.whenComplete { result in
                for p in waiting { p.completeWith(result) }
            }
        }
        sendCiphertext(context: context, promise: sent)
    }

    /// Writes and flushes whatever ciphertext OpenSSL has produced; completes `promise` with that write (at once
    /// when there is none).
    private func sendCiphertext(context: ChannelHandlerContext, promise: EventLoopPromise<Void>?) {
        let pending = Int(BIO_ctrl_pending(networkOut))
        guard pending > 0 else {
            promise?.succeed(())
            return
        }
        var out = context.channel.allocator.buffer(capacity: pending)
        out.writeWithUnsafeMutableBytes(minimumWritableBytes: pending) { raw in
            Int(max(0, BIO_read(networkOut, raw.baseAddress, Int32(pending))))
        }
        context.writeAndFlush(wrapOutboundOut(out), promise: promise)
    }

    private func fail(context: ChannelHandlerContext, _ message: String) {
        guard !failed else { return }
        failed = true
        // An alert OpenSSL queued for the peer goes out before the connection closes.
        sendCiphertext(context: context, promise: nil)
        let error = TLSChannelError(description: message)
        failUnencrypted(error)
        context.fireErrorCaught(error)
        context.close(promise: nil)
    }

    private func failUnencrypted(_ error: any Error) {
        let waiting = unencrypted
        unencrypted = []
        flushedCount = 0
        for (_, promise) in waiting { promise?.fail(error) }
    }
}

@available(*, unavailable)
extension TLSChannelHandler: Sendable {}
