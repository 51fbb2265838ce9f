import Logging
import VolleyAPNs
import VolleyHTTP2

/// The production transport for providers: one `HTTP2ConnectionPool` per endpoint, client certificates
/// checked before the pool is made.
public enum ProviderTransport {
    public static func pools(logger: Logger) -> HTTP2SubmitterFactory {
        HTTP2ConnectionPool.submitterFactory(logger: logger)
    }
}
