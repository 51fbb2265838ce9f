import Foundation
import Logging

/// Something that sends one HTTP/2 request and completes exactly once: `HTTP2ConnectionPool` in production.
/// Providers are written against this so their request/response logic does not depend on the pool's internals.
/// (Added by the providers branch.)
public protocol HTTP2RequestSubmitter: AnyObject, Sendable {
    /// The request's `complete` is called exactly once, on any queue.
    func submit(_ request: HTTP2PendingRequest)
    /// Close connections; pending requests complete with `.shutdown`; `completion` runs when all are closed.
    func shutdown(completion: @escaping @Sendable () -> Void)
    /// Retire the connection that received a response (`HTTP2Response.connection`): no new requests on it, GOAWAY
    /// once its open streams are answered, a replacement after a back-off. For answers that mean "not on this
    /// connection any more" (APNs `TooManyProviderTokenUpdates`).
    func retireConnection(_ connection: HTTP2PoolConnectionID)
}

extension HTTP2RequestSubmitter {
    /// Submitters without connections of their own (test doubles) have nothing to retire.
    public func retireConnection(_ connection: HTTP2PoolConnectionID) {}
}

extension HTTP2RequestSubmitter {
    /// Submits a request whose answer goes to `completion` (called exactly once, on any queue).
    public func submit(
        _ request: HTTP2Request,
        completion: @escaping @Sendable (Result<HTTP2Response, HTTP2Error>) -> Void
    ) {
        submit(HTTP2ClosureRequest(request, completion: completion))
    }
}

extension HTTP2ConnectionPool: HTTP2RequestSubmitter {}

extension HTTP2ConnectionPool {
    /// A factory for providers: checks the client certificate first (so a bad one stops the app at startup
    /// with "Certificate expired", "Certificate not valid yet" or "Invalid certificate or password"),
    /// then opens a pool (connections are made lazily).
    /// `now` is injectable so tests can check the expired / not-yet-valid messages.
    public static func submitterFactory(logger: Logger, now: @escaping @Sendable () -> Date = { Date() })
        -> @Sendable (HTTP2ClientConfiguration) throws -> any HTTP2RequestSubmitter
    {
        { configuration in
            if let certificate = configuration.clientCertificate {
                _ = try TLSClientCertificateCheck.validate(certificate, now: now())
            }
            return HTTP2ConnectionPool(configuration: configuration, logger: logger)
        }
    }
}
