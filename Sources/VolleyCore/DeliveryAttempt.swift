/// What one attempt produced, in words both providers share: the answer the outcome table reads, the
/// provider's message id, the Retry-After header and the provider's or transport's own words.
public struct AttemptResult: Sendable {
    public var answer: ProviderAnswer
    /// APNs `apns-id` / FCM message `name` when accepted.
    public var messageID: String?
    /// The Retry-After header as received (`RetryAfter.seconds` reads it: delta-seconds or an HTTP-date).
    public var retryAfter: String?
    /// The provider's or transport's own words, for errors and `volley test-push`.
    public var message: String?
    public init(answer: ProviderAnswer, messageID: String? = nil, retryAfter: String? = nil, message: String? = nil) {
        self.answer = answer
        self.messageID = messageID
        self.retryAfter = retryAfter
        self.message = message
    }

    /// No answer arrived: the transport failed (`reason` names how) and says whether a resend is safe
    /// (the request provably never reached the provider).
    public static func transportFailure(
        _ provider: PushProvider, reason: OutcomeReason, resendIsSafe: Bool,
        message: String?
    ) -> AttemptResult {
        AttemptResult(
            answer: ProviderAnswer(
                provider: provider, status: 0, reason: reason,
                transportResendIsSafe: resendIsSafe), message: message)
    }

    public var decision: OutcomeDecision { OutcomeTable.decide(answer) }

    /// The reason to report: the provider's reason, else the transport's message, else "HTTP <status>".
    public var reportedReason: OutcomeReason {
        if let r = answer.reason { return r }
        if answer.status == 0 { return OutcomeReason(message ?? "transport failure") }
        return OutcomeReason("HTTP \(answer.status)")
    }

    /// The terminal outcome when this attempt is the last one.
    public func terminalOutcome() -> DeliveryOutcome {
        let decision = self.decision
        switch decision {
        case .accepted:
            return .accepted
        case .retry, .refreshCredential:
            return .failed(reason: reportedReason, resendWasSafe: true)
        case .unknown where answer.status == 0:
            return .failed(reason: reportedReason, resendWasSafe: answer.transportResendIsSafe)
        case .removeToken, .fixApp, .invalidNotification, .unknown:
            return .rejected(
                status: answer.status, reason: reportedReason,
                action: decision.rejectionAction ?? .unknown)
        }
    }
}
