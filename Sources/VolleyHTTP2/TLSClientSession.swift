internal import COpenSSL
import Foundation

/// What a TLS client that is not a provider connection trusts and shows: Redis over TLS (`rediss://`). A CA file
/// (PEM, one or more certificates) or, without one, the system trust store; optionally a client certificate and its
/// key for servers that ask for one. Loaded and checked once; every connection made with it verifies the server's
/// certificate and name, on the same OpenSSL, protocol floor and options as the providers' connections.
public final class TLSClientTrust: Sendable, Hashable, CustomStringConvertible {
    /// The files the trust is read from.
    public struct Files: Sendable, Hashable {
        /// PEM CA certificates; nil: the system trust store.
        public var caFile: String?
        /// PEM client certificate (chain, leaf first), with `keyFile`; both or neither.
        public var certFile: String?
        /// PEM private key of `certFile`, unencrypted.
        public var keyFile: String?
        public init(caFile: String? = nil, certFile: String? = nil, keyFile: String? = nil) {
            self.caFile = caFile
            self.certFile = certFile
            self.keyFile = keyFile
        }
    }

    /// Which file cannot serve, and why.
    public enum Failure: Error, Sendable, CustomStringConvertible {
        case caFile(String)
        case certFile(String)
        case keyFile(String)
        public var description: String {
            switch self {
            case .caFile(let m), .certFile(let m), .keyFile(let m): m
            }
        }

        /// The property of `Files` at fault: `caFile`, `certFile` or `keyFile`.
        public var file: String {
            switch self {
            case .caFile: "caFile"
            case .certFile: "certFile"
            case .keyFile: "keyFile"
            }
        }
    }

    public let files: Files
    let context: TLSContext

    public init(_ files: Files) throws(Failure) {
        self.files = files
        if (files.certFile == nil) != (files.keyFile == nil) {
            throw files.certFile == nil
                ? .certFile("a client key needs its certificate") : .keyFile("a client certificate needs its key")
        }
        let certificate = files.certFile.flatMap { cert in
            files.keyFile.map { TLSClientCertificate.pem(certificateFile: cert, privateKeyFile: $0, passphrase: nil) }
        }
        if let certificate {
            do { _ = try LoadedClientCertificate.load(certificate) } catch {
                // Expired and not-yet-valid name the certificate; an unreadable pair or a key that is not the
                // certificate's cannot tell which file is wrong, and the message says so.
                if error.message.hasPrefix("Certificate") { throw .certFile(error.message) }
                throw .keyFile("\(error.message): the key must be the certificate's, unencrypted PEM")
            }
        }
        do {
            context = try TLSContext.client(caFile: files.caFile, clientCertificate: certificate, alpn: [])
        } catch {
            if files.caFile == nil { throw .caFile("cannot load the system trust store: \(error.message)") }
            throw .caFile("cannot read PEM CA certificates: \(error.message)")
        }
    }

    public var description: String {
        "TLS trusting \(files.caFile ?? "the system trust store")"
            + (files.certFile.map { ", client certificate \($0)" } ?? "")
    }

    public static func == (a: TLSClientTrust, b: TLSClientTrust) -> Bool { a.files == b.files }
    public func hash(into h: inout Hasher) { h.combine(files) }
}

/// The client side of one TLS connection on a socket the caller owns and waits on (non-blocking; `read`, `write`
/// and `handshake` say what to wait for). Verifies the server's certificate against the trust and its name
/// against `serverName` (a DNS name, also sent as SNI, or an IP literal). Used by one thread at a time.
public final class TLSClientSession {
    private let connection: TLSConnection

    /// The result of one call.
    public enum Step: Sendable, Equatable {
        /// Bytes read or written (0 when a handshake completed).
        case done(Int)
        case wantRead, wantWrite
        /// The server closed the connection (close_notify or end of stream).
        case closed
        /// The server's certificate did not verify against the trust or did not name `serverName`.
        case rejectedCertificate(String)
        case failed(String)
    }

    public init(trust: TLSClientTrust, fd: Int32, serverName: String) throws(TLSChannelError) {
        do {
            connection = try TLSConnection(context: trust.context, fd: fd, serverSide: false)
            try connection.setPeerName(serverName)
        } catch {
            throw TLSChannelError(description: error.message)
        }
    }

    public func handshake() -> Step {
        switch connection.handshake() {
        case .done: return .done(0)
        case .wantRead: return .wantRead
        case .wantWrite: return .wantWrite
        case .failed(let e):
            return e.kind == .certificateVerification ? .rejectedCertificate(e.message) : .failed(e.message)
        }
    }

    public func read(_ buffer: UnsafeMutableRawPointer, _ count: Int) -> Step {
        ERR_clear_error()
        return step(connection.read(buffer, count))
    }

    public func write(_ buffer: UnsafeRawPointer, _ count: Int) -> Step {
        ERR_clear_error()
        return step(connection.write(buffer, count))
    }

    /// Sends close_notify (best effort: the socket is closed after it either way).
    public func close() { connection.shutdown() }

    private func step(_ r: TLSConnection.IOResult) -> Step {
        switch r {
        case .bytes(let n): .done(n)
        case .wantRead: .wantRead
        case .wantWrite: .wantWrite
        case .closed: .closed
        case .failed(let e): .failed(e.message)
        }
    }
}
