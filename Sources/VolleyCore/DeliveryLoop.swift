/// The per-device send loop both senders run: one attempt, decide with `OutcomeTable`, then retry with
/// backoff, refresh the credential and resend once, or finish with a terminal `DeliveryOutcome`.
/// No Dispatch here: the sender injects how to wait (`schedule`).

/// What one attempt produced.
public struct AttemptResult: Sendable {
    public var answer: ProviderAnswer
    /// APNs `apns-id` / FCM message `name` when accepted.
    public var messageID: String?
    public var retryAfterSeconds: Double?
    /// The provider's or transport's own words, for errors and `volley test-push`.
    public var message: String?
    public init(answer: ProviderAnswer, messageID: String? = nil, retryAfterSeconds: Double? = nil, message: String? = nil) {
        self.answer = answer; self.messageID = messageID; self.retryAfterSeconds = retryAfterSeconds; self.message = message
    }

    public var decision: OutcomeDecision { OutcomeTable.decide(answer) }
    /// The answer calls for another attempt (retry with backoff, or refresh the credential and resend once).
    public var needsAnotherAttempt: Bool {
        switch decision {
        case .retry, .refreshCredential: return true
        default: return false
        }
    }

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
            return .rejected(status: answer.status, reason: reportedReason, action: decision.rejectionAction ?? .unknown)
        }
    }
}

/// Runs attempts for one (job, device) until a terminal outcome. Steps happen strictly one after another
/// (each attempt starts from the previous one's completion or timer), so the mutable state is never touched
/// concurrently.
public final class DeliveryLoop: @unchecked Sendable {
    public typealias Attempt = @Sendable (_ completion: @escaping @Sendable (AttemptResult) -> Void) -> Void

    private let policy: RetryPolicy
    private let attempt: Attempt
    /// Called on `refreshCredential`; returns true when a newer credential is ready for the resend.
    private let refreshCredential: @Sendable (AttemptResult) -> Bool
    private let schedule: @Sendable (Double, @escaping @Sendable () -> Void) -> Void
    private let random: @Sendable () -> Double
    private let completion: @Sendable (DeliveryOutcome, AttemptResult) -> Void

    private var attempts = 0
    private var resentAfterRefresh = false

    public init(policy: RetryPolicy, attempt: @escaping Attempt,
                refreshCredential: @escaping @Sendable (AttemptResult) -> Bool,
                schedule: @escaping @Sendable (Double, @escaping @Sendable () -> Void) -> Void,
                random: @escaping @Sendable () -> Double = { Double.random(in: 0..<1) },
                completion: @escaping @Sendable (DeliveryOutcome, AttemptResult) -> Void) {
        self.policy = policy; self.attempt = attempt; self.refreshCredential = refreshCredential
        self.schedule = schedule; self.random = random; self.completion = completion
    }

    public func start() { step() }

    private func step() {
        attempts += 1
        attempt { [self] result in handle(result) }
    }

    private func handle(_ result: AttemptResult) {
        switch result.decision {
        case .refreshCredential:
            if !resentAfterRefresh && refreshCredential(result) {
                resentAfterRefresh = true
                step()
                return
            }
            // Already resent once, or the credential may not be refreshed yet (APNs: 20 minutes): back off.
            if resentAfterRefresh { completion(result.terminalOutcome(), result); return }
            retryLater(result)
        case .retry:
            retryLater(result)
        default:
            completion(result.terminalOutcome(), result)
        }
    }

    private func retryLater(_ result: AttemptResult) {
        guard let delay = policy.delay(afterAttempt: attempts, retryAfterSeconds: result.retryAfterSeconds,
                                       random: random()) else {
            completion(result.terminalOutcome(), result)
            return
        }
        schedule(delay) { [self] in step() }
    }
}

extension DeliveryLoop {
    /// The loop both providers run: `attempt` is one request that reports the credential it sent (authorization
    /// header or access token, nil for certificate auth); on a credential rejection `refresh` gets the credential
    /// the last attempt used and says whether a newer one is ready; `schedule` waits between attempts.
    public static func sendingCredential(
        policy: RetryPolicy,
        schedule: @escaping @Sendable (Double, @escaping @Sendable () -> Void) -> Void,
        attempt: @escaping @Sendable (_ done: @escaping @Sendable (AttemptResult, String?) -> Void) -> Void,
        refresh: @escaping @Sendable (_ used: String?) -> Bool,
        completion: @escaping @Sendable (DeliveryOutcome, AttemptResult) -> Void
    ) -> DeliveryLoop {
        // Written by an attempt's completion, read by the refresh that follows it: the loop's steps never overlap.
        final class SentCredential: @unchecked Sendable { var value: String? }
        let sent = SentCredential()
        return DeliveryLoop(
            policy: policy,
            attempt: { done in
                attempt { result, credential in
                    sent.value = credential
                    done(result)
                }
            },
            refreshCredential: { _ in refresh(sent.value) },
            schedule: schedule,
            completion: completion)
    }

    /// The rest of a send whose first attempt (made without the loop, to keep the common case to one closure)
    /// answered `first`: when that answer needs a retry or a credential refresh, builds the loop, which replays it
    /// as its first attempt, so retries behave exactly as if the loop had run from the start; otherwise completes.
    public static func resume(
        after first: AttemptResult, credential: String?,
        policy: RetryPolicy,
        schedule: @escaping @Sendable (Double, @escaping @Sendable () -> Void) -> Void,
        attempt: @escaping @Sendable (_ done: @escaping @Sendable (AttemptResult, String?) -> Void) -> Void,
        refresh: @escaping @Sendable (_ used: String?) -> Bool,
        completion: @escaping @Sendable (DeliveryOutcome, AttemptResult) -> Void
    ) {
        if first.needsAnotherAttempt {
            // Read and cleared by the loop's first step; its steps never overlap.
            final class Replay: @unchecked Sendable { var first: (AttemptResult, String?)? }
            let replay = Replay()
            replay.first = (first, credential)
            sendingCredential(
                policy: policy, schedule: schedule,
                attempt: { done in
                    if let answered = replay.first {
                        replay.first = nil
                        done(answered.0, answered.1)
                    } else {
                        attempt(done)
                    }
                },
                refresh: refresh, completion: completion
            ).start()
        } else {
            completion(first.terminalOutcome(), first)
        }
    }
}

/// A provider's side of the send path both providers share: the app's `fix-app` stop, how to wait between attempts,
/// and how to refresh a credential the provider rejected. Each provider's `send` is the same few lines:
///
///     if let stopped = stopSwitch.outcome { return completion(stopped) }
///     guard let prepared = prepared as? MyPrepared else { return completion(.wrongPlatform) }
///     attemptOnce(prepared, to: device) { [self] first, credential in
///         guard first.needsAnotherAttempt else { return finish(first, completion) }
///         retry(after: first, credential: credential, completion: completion) { [self] done in
///             attemptOnce(prepared, to: device, completion: done)
///         }
///     }
///
/// The first attempt runs without the loop, and the retry closure exists only when an answer asks for a retry.
/// This stays in the concrete provider on purpose: a generic `send` here ran unspecialised in the provider's
/// module, paying a generic metadata lookup and a dynamic cast on every send.
package protocol RetryingSender: AnyObject, Sendable {
    var retryPolicy: RetryPolicy { get }
    var stopSwitch: AppStopSwitch { get }
    /// Runs `work` after `seconds` (the backoff between attempts).
    func schedule(after seconds: Double, _ work: @escaping @Sendable () -> Void)
    /// After the provider rejected the credential `used`: true when a resend with a fresh one may go now.
    func refreshCredential(rejected used: String?) -> Bool
    /// A `fix-app` answer: stop the app (`stopSwitch.stop`) and log why, once.
    func stopApp(_ outcome: DeliveryOutcome, reason: OutcomeReason, result: AttemptResult)
}

extension DeliveryOutcome {
    /// A notification prepared for one platform handed to the other platform's sender.
    package static var wrongPlatform: DeliveryOutcome {
        .rejected(status: 0, reason: "WrongPlatform", action: .invalidNotification)
    }
}

extension RetryingSender {
    /// Completes a send whose last attempt answered `result` (no further attempt): stops the app on `fix-app`.
    package func finish(_ result: AttemptResult, _ completion: @Sendable (DeliveryOutcome) -> Void) {
        finish(result.terminalOutcome(), result, completion)
    }

    /// The rest of a send whose first attempt answered `first` with a retry or a credential refresh: the loop
    /// replays that answer as its first attempt, so retries behave exactly as if it had run from the start.
    package func retry(after first: AttemptResult, credential: String?,
                       completion: @escaping @Sendable (DeliveryOutcome) -> Void,
                       attempt: @escaping @Sendable (_ done: @escaping @Sendable (AttemptResult, String?) -> Void) -> Void) {
        DeliveryLoop.resume(
            after: first, credential: credential, policy: retryPolicy,
            schedule: { [self] delay, work in schedule(after: delay, work) },
            attempt: attempt,
            refresh: { [self] used in refreshCredential(rejected: used) },
            completion: { [self] outcome, result in finish(outcome, result, completion) })
    }

    /// After a first attempt that was not accepted: deliver its outcome to `receiver`, or (retry, refresh the
    /// credential) hand over to the retry loop, whose further attempts are `attempt`.
    package func continueSend(
        after first: AttemptResult, credential: String?, device: Device, receiver: any DeliveryReceiver,
        attempt: @escaping @Sendable (_ done: @escaping @Sendable (AttemptResult, String?) -> Void) -> Void
    ) {
        let completion: @Sendable (DeliveryOutcome) -> Void = { receiver.delivered(device, $0) }
        guard first.needsAnotherAttempt else { return finish(first, completion) }
        retry(after: first, credential: credential, completion: completion, attempt: attempt)
    }

    private func finish(_ outcome: DeliveryOutcome, _ result: AttemptResult, _ completion: @Sendable (DeliveryOutcome) -> Void) {
        if case .rejected(_, let reason, .fixApp) = outcome { stopApp(outcome, reason: reason, result: result) }
        completion(outcome)
    }
}
