import Foundation
import HummingbirdCore
import Logging
import NIOCore
import VolleyHTTP2

/// HTTPS for `volley api` (`api.tls.certFile` / `api.tls.keyFile`): HTTP/1.1 over TLS, ALPN `http/1.1`, on the
/// same OpenSSL as the worker's connections to the providers (`TLSChannelHandler`).
///
/// Loaded and checked once at startup, so an unreadable or malformed file, or a key that is not the certificate's,
/// stops the process with the configuration key named instead of failing every handshake later.
public struct APITLS: Sendable {
    public let certFile: String
    public let keyFile: String
    let identity: TLSServerIdentity

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
        do {
            identity = try TLSServerIdentity(
                certificateChainFile: certFile, privateKeyFile: keyFile, alpnProtocols: ["http/1.1"])
        } catch {
            switch error {
            case .certificate(let m): throw Failure(key: "api.tls.certFile", message: m)
            case .key(let m): throw Failure(key: "api.tls.keyFile", message: m)
            case .mismatch(let m): throw Failure(key: "api.tls.keyFile", message: m + " (api.tls.certFile)")
            }
        }
    }

    /// The listener's channel: TLS first, then HTTP/1.1.
    func serverBuilder(http: HTTP1Channel.Configuration, connections: ConnectionCount) -> HTTPServerBuilder {
        let identity = self.identity
        return HTTPServerBuilder { responder in
            CappedChildChannel(
                base: TLSChildChannel(
                    base: HTTP1Channel(responder: responder, configuration: http), identity: identity),
                count: connections)
        }
    }
}

/// A child channel that speaks TLS (`TLSChannelHandler`) before its base's handlers.
struct TLSChildChannel<Base: ServerChildChannel>: ServerChildChannel {
    typealias Value = Base.Value
    let base: Base
    let identity: TLSServerIdentity

    func setup(channel: any Channel, logger: Logger) -> EventLoopFuture<Value> {
        channel.eventLoop.makeCompletedFuture {
            try channel.pipeline.syncOperations.addHandler(TLSChannelHandler(identity: identity))
        }.flatMap {
            base.setup(channel: channel, logger: logger)
        }
    }

    func handle(value: Value, logger: Logger) async {
        await base.handle(value: value, logger: logger)
    }
}
