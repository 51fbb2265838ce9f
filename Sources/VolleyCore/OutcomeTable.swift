/// The one table that says what a provider's answer means, for APNs and FCM alike.
/// Every sender decides with `OutcomeTable.decide(...)`; the README's table is `OutcomeTable.markdown()`.
/// Sources: Apple, "Handling notification responses from APNs"; Google, FCM HTTP v1 "ErrorCode" and "Best
/// practices for handling errors".

/// Which provider answered.
public enum PushProvider: String, Sendable, Hashable, Codable, CaseIterable {
    case apns
    case fcm
}

/// What Volley does about one answer.
public enum OutcomeDecision: String, Sendable, Hashable, Codable, CaseIterable {
    /// Accepted: record it (the outcome; no message id is kept).
    case accepted = "accepted"
    /// The token is dead: remove it from the registry, unless it was registered again after APNs 410's timestamp.
    case removeToken = "remove-token"
    /// Transient: retry with exponential backoff and jitter (honour Retry-After), bounded, then failed.
    case retry = "retry"
    /// The credential is stale: refresh it and resend once.
    case refreshCredential = "refresh-credential"
    /// The app is misconfigured: its sends stop with a clear error, other apps keep going.
    case fixApp = "fix-app"
    /// The notification itself is invalid: job error, never retried.
    case invalidNotification = "invalid-notification"
    /// A reason we do not know: kept verbatim, not retried, counted.
    case unknown = "unknown"

    /// The rejection action for decisions that end in a rejection.
    public var rejectionAction: RejectionAction? {
        switch self {
        case .removeToken: .removeToken
        case .fixApp: .fixApp
        case .invalidNotification: .invalidNotification
        case .unknown: .unknown
        case .accepted, .retry, .refreshCredential: nil
        }
    }
}

/// One provider answer, reduced to what the table looks at.
public struct ProviderAnswer: Sendable, Hashable {
    public var provider: PushProvider
    /// HTTP status; 0 when no response arrived (transport failure).
    public var status: Int
    /// APNs `reason`, or FCM `details[].errorCode` when present, else FCM `error.status`.
    public var reason: OutcomeReason?
    /// FCM: the error names the token (`fieldViolations[].field == "message.token"`, or an INVALID_ARGUMENT
    /// whose message is about the registration token).
    public var namesToken: Bool
    /// Transport failure that provably never reached the provider.
    public var transportResendIsSafe: Bool

    public init(
        provider: PushProvider, status: Int, reason: OutcomeReason? = nil, namesToken: Bool = false,
        transportResendIsSafe: Bool = false
    ) {
        self.provider = provider
        self.status = status
        self.reason = reason
        self.namesToken = namesToken
        self.transportResendIsSafe = transportResendIsSafe
    }
}

public enum OutcomeTable {
    // MARK: APNs

    /// APNs reasons with a decision of their own (Apple's complete list, plus the newer ExpiredToken and
    /// BadEnvironmentKeyIdInToken). Reasons not listed fall back to the status rules in `decide`.
    public static let apnsReasons: [(reason: String, status: Int, decision: OutcomeDecision)] = [
        ("Unregistered", 410, .removeToken),
        ("ExpiredToken", 410, .removeToken),
        ("BadDeviceToken", 400, .removeToken),
        ("DeviceTokenNotForTopic", 400, .removeToken),
        ("TooManyRequests", 429, .retry),
        ("InternalServerError", 500, .retry),
        ("ServiceUnavailable", 503, .retry),
        ("Shutdown", 503, .retry),
        // Volley's choice: an idle connection closed by APNs; the request was not processed.
        ("IdleTimeout", 400, .retry),
        // Volley's choice: the cadence below makes this impossible unless another process shares the key. The
        // connection that got it is retired and replaced after a back-off (APNSProvider); the request, which APNs
        // rejected, is retried on another connection.
        ("TooManyProviderTokenUpdates", 429, .retry),
        ("ExpiredProviderToken", 403, .refreshCredential),
        ("InvalidProviderToken", 403, .fixApp),
        ("MissingProviderToken", 403, .fixApp),
        ("BadCertificate", 403, .fixApp),
        ("BadCertificateEnvironment", 403, .fixApp),
        ("BadEnvironmentKeyIdInToken", 403, .fixApp),
        ("UnrelatedKeyIdInToken", 403, .fixApp),
        ("TopicDisallowed", 400, .fixApp),
        ("MissingTopic", 400, .fixApp),
        ("BadTopic", 400, .fixApp),
        ("Forbidden", 403, .fixApp),
        ("PayloadEmpty", 400, .invalidNotification),
        ("PayloadTooLarge", 413, .invalidNotification),
        ("BadCollapseId", 400, .invalidNotification),
        ("BadExpirationDate", 400, .invalidNotification),
        ("BadMessageId", 400, .invalidNotification),
        ("BadPriority", 400, .invalidNotification),
        ("BadPath", 404, .invalidNotification),
        ("InvalidPushType", 400, .invalidNotification),
        ("MissingDeviceToken", 400, .invalidNotification),
        ("DuplicateHeaders", 400, .invalidNotification),
        ("MethodNotAllowed", 405, .invalidNotification),
    ]

    private static let apnsIndex: [String: OutcomeDecision] = {
        var d: [String: OutcomeDecision] = [:]
        for row in apnsReasons { d[row.reason] = row.decision }
        return d
    }()

    // MARK: FCM

    /// FCM error codes (`details[].errorCode`, else `error.status`) with a decision of their own.
    /// INVALID_ARGUMENT is split by whether it names the token (see `decide`).
    public static let fcmReasons: [(reason: String, status: Int, decision: OutcomeDecision)] = [
        ("UNREGISTERED", 404, .removeToken),
        ("QUOTA_EXCEEDED", 429, .retry),
        ("RESOURCE_EXHAUSTED", 429, .retry),
        ("INTERNAL", 500, .retry),
        ("UNAVAILABLE", 503, .retry),
        ("UNAUTHENTICATED", 401, .refreshCredential),
        ("SENDER_ID_MISMATCH", 403, .fixApp),
        ("THIRD_PARTY_AUTH_ERROR", 401, .fixApp),
        ("APNS_AUTH_ERROR", 401, .fixApp),
        ("PERMISSION_DENIED", 403, .fixApp),
        ("INVALID_ARGUMENT", 400, .invalidNotification),
        // Volley's own: the OAuth token endpoint refused the service account (RFC 6749 §5.2 error codes).
        ("oauth:invalid_grant", 400, .fixApp),
        ("oauth:invalid_client", 401, .fixApp),
        ("oauth:unauthorized_client", 400, .fixApp),
    ]

    private static let fcmIndex: [String: OutcomeDecision] = {
        var d: [String: OutcomeDecision] = [:]
        for row in fcmReasons { d[row.reason] = row.decision }
        return d
    }()

    /// Transport failures (reason `transport:<HTTP2Error.Kind>`) that mean the app's endpoint settings are wrong:
    /// a bad CA file, a server certificate the app does not trust, a TLS handshake the server refuses, no h2. A
    /// connection refused, reset or timed out is none of these (the transport says whether a resend is safe).
    public static let transportConfigurationReasons: Set<String> = [
        "transport:configuration", "transport:certificate-verification", "transport:tls-handshake",
        "transport:alpn-not-h2",
    ]

    /// Transport failures that end the delivery although the request never left: the connection pool already
    /// waited its outage budget (`worker.providerOutageSeconds`) for a connection, resending the request meanwhile,
    /// and another attempt would wait as long again. They end as `failed(resendWasSafe: true)`, apart from requests
    /// written and unanswered (`transport:written-unanswered`, `failed(resendWasSafe: false)`).
    public static let transportGaveUpReasons: Set<String> = ["transport:provider-unreachable"]

    /// A status that means accepted whatever else the answer says (`decide` gives `.accepted`): the senders' fan-out
    /// path checks it before decoding anything.
    @inlinable public static func isAccepted(status: Int) -> Bool { status == 200 }

    /// The decision for one answer. Pure; the senders act on it.
    public static func decide(_ answer: ProviderAnswer) -> OutcomeDecision {
        if answer.status == 0 {
            // No response. A transport that cannot be set up for this app (bad CA file, server certificate not
            // trusted, no h2) is the app's configuration; otherwise the transport says whether the request
            // provably never reached the provider.
            if let r = answer.reason?.rawValue, transportConfigurationReasons.contains(r) { return .fixApp }
            if let r = answer.reason?.rawValue, transportGaveUpReasons.contains(r) { return .unknown }
            return answer.transportResendIsSafe ? .retry : .unknown
        }
        if isAccepted(status: answer.status) { return .accepted }
        switch answer.provider {
        case .apns:
            if let r = answer.reason?.rawValue, let d = apnsIndex[r] { return d }
            // Status rules for reasons we do not know: 5xx are the server's problem.
            if answer.status == 500 || answer.status == 503 { return .retry }
            return .unknown
        case .fcm:
            let r = answer.reason?.rawValue
            if r == "INVALID_ARGUMENT" && answer.namesToken { return .removeToken }
            if let r, r.hasPrefix("oauth:") { return fcmIndex[r] ?? .fixApp }
            if let r, let d = fcmIndex[r] {
                // THIRD_PARTY_AUTH_ERROR arrives as 401 too: the error code wins over the status.
                return d
            }
            switch answer.status {
            case 401: return .refreshCredential
            case 429, 500, 503: return .retry
            default: return .unknown
            }
        }
    }

    /// Human-readable wording for `fixApp` and friends, used in logs and `volley test-push`.
    public static func explanation(_ decision: OutcomeDecision) -> String {
        switch decision {
        case .accepted: "accepted by the provider"
        case .removeToken: "the device token is no longer valid: remove it from the registry"
        case .retry: "transient: retry with backoff"
        case .refreshCredential: "credential stale: refresh it and resend once"
        case .fixApp: "the app's credentials or topic are wrong: this app's sends stop until the configuration is fixed"
        case .invalidNotification: "the notification is invalid: fix the job; it is not retried"
        case .unknown: "unknown answer: kept verbatim, not retried"
        }
    }

    /// The table as Markdown, one row per decision, for the README (same data as `decide`).
    public static func markdown() -> String {
        func names(_ rows: [(reason: String, status: Int, decision: OutcomeDecision)], _ d: OutcomeDecision) -> String {
            rows.filter { $0.decision == d && !$0.reason.hasPrefix("oauth:") }.map { "\($0.status) \($0.reason)" }
                .joined(separator: ", ")
        }
        var lines = ["| answer | outcome |", "|---|---|"]
        lines.append("| APNs 200 / FCM 200 | accepted (recorded; no message id kept, `test-push` shows it) |")
        for d in OutcomeDecision.allCases where d != .accepted {
            var answer = "APNs \(names(apnsReasons, d))"
            var fcm = names(fcmReasons, d)
            switch d {
            case .removeToken: fcm += ", 400 INVALID_ARGUMENT naming the token (message.token)"
            case .retry:
                answer += ", any other 500/503"
                fcm += ", any other 429/500/503 (Retry-After honoured); transport failure \"safe to resend\""
            case .refreshCredential: fcm += ", any other 401"
            case .invalidNotification: fcm = "400 INVALID_ARGUMENT about the message"
            case .fixApp:
                fcm +=
                    "; OAuth token endpoint refusing the service account (4xx); transport misconfigured (CA file, "
                    + "server certificate, TLS handshake, no h2), the token endpoint's included"
            case .unknown:
                answer = "APNs any other reason"
                fcm = "any other code; transport failure not safe to resend"
            default: break
            }
            let outcome: String =
                switch d {
                case .removeToken:
                    "rejected → remove the token from the registry "
                        + "(unless registered again after APNs 410's timestamp)"
                case .retry: "retry with exponential backoff and jitter, bounded attempts, then failed"
                case .refreshCredential: "refresh credential, resend once"
                case .fixApp: "app is misconfigured → its sends stop with a clear error, other apps keep going"
                case .invalidNotification: "the notification is invalid → job error, never retried"
                case .unknown: "kept verbatim, treated as not retryable, counted"
                case .accepted: ""
                }
            lines.append("| \(answer); FCM \(fcm) | \(outcome) |")
        }
        // No answer at all: a device whose notification expired before its send could start is never sent.
        lines.append(
            "| no send: the notification's `ttl` (from its `sendAt` or local-time wave, else from when the job "
                + "entered the stream) ran out before the device's send could start, a throttled job's waiting "
                + "devices included | expired (terminal, not charged to the quota; ledger `x`, report `expired`, "
                + "metric outcome `expired`) |")
        return lines.joined(separator: "\n") + "\n"
    }
}
