import Foundation

/// The decisions of one (job, device) delivery, for APNs and FCM alike, without I/O: events in (an attempt's
/// answer, a credential refresh's result, a back-off timer), one `Action` out, which the provider carries out and
/// answers with the next event. What an answer means comes from `OutcomeTable`; how long to wait from
/// `RetryPolicy`, with Retry-After read against the injected clock and jitter from the injected random source.
///
/// The first attempt is under way when the machine is made: a provider sends it before any machine exists (most
/// answers are a 200 and need none), then hands its answer to `attemptCompleted(_:)`.
///
///     attempting --attemptCompleted-->    finish | refreshCredential (once a delivery) | wait | finish (bounded)
///     refreshing --credentialRefreshed--> send(n + 1);   --credentialRefreshFailed--> wait | finish (bounded)
///     waiting    --backoffElapsed-->      send(n + 1)
public struct DeliveryStateMachine: Sendable {
    /// What the provider does next.
    public enum Action: Sendable, Hashable {
        /// Send attempt number `attempt` (the first is 1) and report its answer with `attemptCompleted(_:)`.
        case send(attempt: Int)
        /// The provider rejected the credential: refresh it, then report `credentialRefreshed()` (a resend with
        /// the new one follows, once per delivery) or `credentialRefreshFailed()` (none is ready yet).
        case refreshCredential
        /// Wait this many seconds (back-off with jitter, or Retry-After), then report `backoffElapsed()`.
        case wait(seconds: Double)
        /// The delivery is over: this is its one terminal outcome.
        case finish(DeliveryOutcome)
    }

    enum State: Sendable {
        /// An attempt is under way.
        case attempting
        /// The last attempt was answered with a credential rejection (`last`); a refresh is under way.
        case refreshing(last: AttemptResult)
        /// The last attempt was answered with something transient; a back-off timer is running.
        case waiting
        case finished
    }

    public let policy: RetryPolicy
    private let clock: any WallClock
    private var random: any RandomNumberGenerator & Sendable
    private(set) var state = State.attempting
    /// Sends made so far, the one under way included (the resend after a refresh counts too).
    public private(set) var attempts = 1
    /// The one resend after a credential refresh has been made.
    private var resentAfterRefresh = false

    /// A machine for a delivery whose first attempt is under way. `clock` dates a Retry-After given as an HTTP-date;
    /// `random` spreads the back-off (jitter), so a burst of retries does not come back at once.
    public init(
        policy: RetryPolicy, clock: any WallClock,
        random: any RandomNumberGenerator & Sendable = SystemRandomNumberGenerator()
    ) {
        self.policy = policy
        self.clock = clock
        self.random = random
    }

    public var isFinished: Bool { if case .finished = state { true } else { false } }

    /// The answer to the attempt under way.
    public mutating func attemptCompleted(_ result: AttemptResult) -> Action {
        guard case .attempting = state else { preconditionFailure("attemptCompleted in \(state)") }
        switch result.decision {
        case .refreshCredential:
            // APNs ExpiredProviderToken, FCM 401: refresh and resend once; a second rejection ends the delivery.
            if resentAfterRefresh { return finish(result.terminalOutcome()) }
            state = .refreshing(last: result)
            return .refreshCredential
        case .retry:
            return backOff(result)
        case .accepted, .removeToken, .fixApp, .invalidNotification, .unknown:
            return finish(result.terminalOutcome())
        }
    }

    /// A newer credential is ready: resend with it (this is the one resend a refresh allows).
    public mutating func credentialRefreshed() -> Action {
        guard case .refreshing = state else { preconditionFailure("credentialRefreshed in \(state)") }
        resentAfterRefresh = true
        return sendNext()
    }

    /// No newer credential may be made yet (APNs: one provider token per 20 minutes): back off as for a
    /// transient answer, and the next rejection may refresh again.
    public mutating func credentialRefreshFailed() -> Action {
        guard case .refreshing(let last) = state else { preconditionFailure("credentialRefreshFailed in \(state)") }
        return backOff(last)
    }

    /// The back-off timer fired: send the next attempt.
    public mutating func backoffElapsed() -> Action {
        guard case .waiting = state else { preconditionFailure("backoffElapsed in \(state)") }
        return sendNext()
    }

    private mutating func sendNext() -> Action {
        attempts += 1
        state = .attempting
        return .send(attempt: attempts)
    }

    /// Retry with back-off while attempts remain and Retry-After asks for no more than the policy waits; else the
    /// last answer is the outcome.
    private mutating func backOff(_ result: AttemptResult) -> Action {
        let retryAfter = result.retryAfter.flatMap { RetryAfter.seconds($0, now: clock.now()) }
        let jitter = Double(random.next() >> 11) * 0x1p-53 // uniform in 0..<1 from the top 53 bits
        guard let delay = policy.delay(afterAttempt: attempts, retryAfterSeconds: retryAfter, random: jitter) else {
            return finish(result.terminalOutcome())
        }
        state = .waiting
        return .wait(seconds: delay)
    }

    private mutating func finish(_ outcome: DeliveryOutcome) -> Action {
        state = .finished
        return .finish(outcome)
    }
}
