/// Something that sends one HTTP/2 request and completes exactly once: `HTTP2ConnectionPool` in production.
/// Providers are written against this so their request/response logic does not depend on the pool's internals.
/// (Added by the providers branch; the pool conforms in VolleyAPNs/VolleyFCM or here once merged.)
public protocol HTTP2RequestSubmitter: AnyObject, Sendable {
    /// `completion` is called exactly once, on any queue.
    func submit(_ request: HTTP2Request, completion: @escaping @Sendable (Result<HTTP2Response, HTTP2Error>) -> Void)
    /// Close connections; pending requests complete with `.shutdown`.
    func shutdown()
}
