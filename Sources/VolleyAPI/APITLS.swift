import Foundation
import HummingbirdCore
import HummingbirdTLS
import NIOSSL

/// HTTPS for `volley api` (`api.tls.certFile` / `api.tls.keyFile`): HTTP/1.1 over TLS, ALPN `http/1.1`.
///
/// Loaded and checked once at startup, so an unreadable or malformed file, or a key that is not the certificate's,
/// stops the process with the configuration key named instead of failing every handshake later.
public struct APITLS: Sendable {
    public let certFile: String
    public let keyFile: String
    let configuration: TLSConfiguration

    /// Why the files cannot serve: `key` is the configuration key to fix.
    public struct Failure: Error, Sendable, CustomStringConvertible {
        public let key: String
        public let message: String
        public var description: String { "\(key): \(message)" }
    }

    /// Reads the PEM certificate chain (leaf first) and the PEM private key and proves they belong together.
    public init(certFile: String, keyFile: String) throws {
        self.certFile = certFile
        self.keyFile = keyFile
        let chain: [NIOSSLCertificate]
        do { chain = try NIOSSLCertificate.fromPEMFile(certFile) } catch {
            throw Failure(key: "api.tls.certFile", message: "cannot read a PEM certificate from \(certFile): \(error)")
        }
        if chain.isEmpty {
            throw Failure(key: "api.tls.certFile", message: "no PEM certificate in \(certFile)")
        }
        let key: NIOSSLPrivateKey
        do { key = try NIOSSLPrivateKey(file: keyFile, format: .pem) } catch {
            throw Failure(key: "api.tls.keyFile", message: "cannot read a PEM private key from \(keyFile): \(error)")
        }
        var c = TLSConfiguration.makeServerConfiguration(
            certificateChain: chain.map { .certificate($0) }, privateKey: .privateKey(key))
        c.applicationProtocols = ["http/1.1"]
        // Building a context is where BoringSSL compares the key with the leaf certificate.
        do { _ = try NIOSSLContext(configuration: c) } catch {
            throw Failure(
                key: "api.tls.keyFile",
                message: "the private key in \(keyFile) does not match the certificate in \(certFile) "
                    + "(api.tls.certFile): \(error)")
        }
        configuration = c
    }

    /// The listener's channel: TLS first, then HTTP/1.1.
    func serverBuilder(http: HTTP1Channel.Configuration, connections: ConnectionCount) -> HTTPServerBuilder {
        let c = configuration
        return HTTPServerBuilder { responder in
            CappedChildChannel(
                base: try TLSChannel(HTTP1Channel(responder: responder, configuration: http), tlsConfiguration: c),
                count: connections)
        }
    }
}
