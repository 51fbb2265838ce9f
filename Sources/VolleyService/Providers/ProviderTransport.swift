import Logging
import VolleyAPNs
import VolleyHTTP2

/// The production transport for providers: one `HTTP2ConnectionPool` per endpoint, client certificates
/// checked before the pool is made.
public enum ProviderTransport {
    /// `providerOutageSeconds`: how long a send that never left waits for a connection
    /// (`worker.providerOutageSeconds`). `resendUnanswered`: a request written and unanswered when its connection
    /// dies is resent within that budget (`worker.unansweredSends: resend`, whose jobs carry a collapse identity);
    /// off for a single test push, which has no job to take an identity from.
    public static func pools(
        logger: Logger, providerOutageSeconds: Double = WorkerSettings().providerOutageSeconds,
        resendUnanswered: Bool = false
    ) -> HTTP2SubmitterFactory {
        let pools = HTTP2ConnectionPool.submitterFactory(logger: logger)
        return { configuration in
            var c = configuration
            c.providerOutageSeconds = providerOutageSeconds
            c.resendUnanswered = resendUnanswered
            return try pools(c)
        }
    }
}
