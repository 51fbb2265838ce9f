import Logging
import VolleyAPNs
import VolleyHTTP2

/// The production transport for providers: one `HTTP2ConnectionPool` per endpoint.
public enum ProviderTransport {
    public static func pools(logger: Logger) -> HTTP2SubmitterFactory {
        { configuration in
            // PROVIDERS BRANCH: replaced by `HTTP2ConnectionPool(configuration:logger:)` once `transport` is merged.
            throw HTTP2Error(.configuration, resendIsSafe: false, "the HTTP/2 transport is not built into this binary yet")
        }
    }
}
