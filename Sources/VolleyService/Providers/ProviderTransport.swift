import Logging
import VolleyAPNs
import VolleyHTTP2

/// The production transport for providers: one `HTTP2ConnectionPool` per endpoint, client certificates
/// checked before the pool is made.
public enum ProviderTransport {
    /// `providerOutageSeconds`: how long a send that never left waits for a connection
    /// (`worker.providerOutageSeconds`).
    public static func pools(
        logger: Logger, providerOutageSeconds: Double = WorkerSettings().providerOutageSeconds
    ) -> HTTP2SubmitterFactory {
        let pools = HTTP2ConnectionPool.submitterFactory(logger: logger)
        return { configuration in
            var c = configuration
            c.providerOutageSeconds = providerOutageSeconds
            return try pools(c)
        }
    }
}
