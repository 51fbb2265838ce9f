import Foundation

/// What every send of one app goes through before and around its request, the same for APNs and FCM: the app's
/// stop switch, the platform check, the fleet's pause (and, for FCM, the fleet's send budget), the throttling
/// answers that pause the fleet, the `fix-app` stop, and the timer that holds a send or spaces its retries.
/// The provider supplies the request itself (`ShellSender`). No Dispatch here: `schedule` is the provider's timer,
/// on a queue the provider owns.
package final class ProviderSendShell: Sendable {
    /// Runs `work` after `seconds`, on the provider's own timer queue.
    package typealias Timer = @Sendable (_ seconds: Double, _ work: @escaping @Sendable () -> Void) -> Void

    /// Set by the first `fix-app` answer: every later send of this app fails fast with the same outcome.
    package let stopSwitch = AppStopSwitch()
    package let retryPolicy: RetryPolicy
    /// The clock a Retry-After or a pause is read against.
    package let clock: any WallClock
    /// The fleet's pause for this app: read once per send (one atomic load), set by a throttling answer.
    private let pauseGate: FleetPauseGate?
    /// The fleet's send budget for this app: one atomic decrement per send, a block from the store now and then.
    private let budgetGate: FleetBudgetGate?
    /// The statuses that pause the fleet (APNs: 503; FCM: 429 and 503).
    private let pausingStatuses: [Int]
    /// `app <name>: <provider>`, the start of the message a `fix-app` stop logs.
    private let stopMessagePrefix: String
    private let logStop: @Sendable (String) -> Void
    private let timer: Timer

    /// - Parameters:
    ///   - app: the app's name, for the stop message.
    ///   - providerName: `APNs` or `FCM`, for the stop message.
    ///   - pausingStatuses: the statuses whose answer pauses the fleet's sends through `pauseGate`.
    ///   - logStop: logs the one message of a `fix-app` stop (called once).
    ///   - schedule: the provider's timer.
    package init(
        app: String, providerName: String, retryPolicy: RetryPolicy, clock: any WallClock,
        pauseGate: FleetPauseGate?, budgetGate: FleetBudgetGate? = nil, pausingStatuses: [Int],
        logStop: @escaping @Sendable (String) -> Void, schedule: @escaping Timer
    ) {
        self.retryPolicy = retryPolicy
        self.clock = clock
        self.pauseGate = pauseGate
        self.budgetGate = budgetGate
        self.pausingStatuses = pausingStatuses
        stopMessagePrefix = "app \(app): \(providerName)"
        self.logStop = logStop
        timer = schedule
    }

    /// How long a send must wait before its request, and the `heldSince` to come back with; nil: send now.
    /// The fleet's pause first (a send held longer than the retry budget goes anyway, `FleetPauseGate.hold`), then
    /// the budget, which keeps the send's `heldSince` as it was.
    package func admission(heldSince: Date?) -> (seconds: Double, heldSince: Date?)? {
        if let gate = pauseGate, let wait = gate.hold(policy: retryPolicy, clock: clock, heldSince: heldSince) {
            return (wait, heldSince ?? clock.now())
        }
        if let budget = budgetGate, let wait = budget.take(clock: clock) { return (wait, heldSince) }
        return nil
    }

    /// The fleet's pause is in force now: a send handed to the transport before it began is held as its connection
    /// is about to write it (`HTTP2PendingRequest.holdsBeforeWriting`), so a 429's Retry-After also holds what each
    /// worker had already queued. One atomic load while no pause was ever set.
    package var pausedNow: Bool { pauseGate?.holdSeconds(clock: clock) != nil }

    /// A throttling answer pauses the app across the fleet (Retry-After, else exponential back-off with jitter).
    package func answered(_ result: AttemptResult) {
        if let gate = pauseGate, pausingStatuses.contains(result.answer.status) {
            gate.throttled(retryAfter: result.retryAfter, clock: clock)
        }
    }

    package func schedule(after seconds: Double, _ work: @escaping @Sendable () -> Void) {
        timer(seconds, work)
    }

    /// A `fix-app` answer stops the app; the first stop logs why.
    package func stopApp(_ outcome: DeliveryOutcome) {
        guard case .rejected(let status, let reason, _) = outcome else { return }
        // Status 0: no answer, the transport could not be set up (`transport:certificate-verification`, …).
        let what = status == 0 ? "failed: \(reason)" : "answered \(status) \(reason)"
        let message = "\(stopMessagePrefix) \(what) — " + OutcomeTable.explanation(.fixApp)
        if stopSwitch.stop(outcome, message: message) { logStop(message) }
    }
}

/// A provider whose sends go through a `ProviderSendShell`: it makes the requests (the first attempt as one object
/// per send, a retry through `attemptOnce`) and refreshes its credential; the extension below does the rest of
/// `DeliverySender` and the gates of `PushSender.send`.
package protocol ShellSender: DeliverySender {
    /// The provider's own prepared notification; any other is the wrong platform.
    associatedtype Prepared: PreparedNotification
    var shell: ProviderSendShell { get }
    /// The first attempt of a send the gates let through. `prepared` is `notification` as the engine passed it, for
    /// the `PendingDelivery` that takes the answer. `holdable`: its request asks the shell's pause again just before
    /// it is written (`ProviderSendShell.pausedNow`), and one held there comes back through `sendHeld`; false for a
    /// send the pause already held once (its hold is bounded by the retry budget, `FleetPauseGate.hold`).
    func sendFirstAttempt(
        _ notification: Prepared, prepared: any PreparedNotification, to device: Device,
        receiver: any DeliveryReceiver, holdable: Bool)
    /// One request, no retries: what the provider answered, and the credential the request carried.
    func attemptOnce(
        _ notification: Prepared, to device: Device,
        completion: @escaping @Sendable (AttemptResult, String?) -> Void)
    /// The answer to a retry of a notification prepared for another platform.
    static var wrongPlatformAttempt: AttemptResult { get }
}

extension ShellSender {
    package var retryPolicy: RetryPolicy { shell.retryPolicy }
    package var clock: any WallClock { shell.clock }

    /// `PushSender.send`: a stopped app and a notification of another platform finish at once; a send the fleet's
    /// pause or budget holds comes back here after the wait (the stop switch is read again); the rest go to
    /// `sendFirstAttempt`.
    package func sendThroughShell(
        _ prepared: any PreparedNotification, to device: Device, receiver: any DeliveryReceiver,
        heldSince: Date? = nil
    ) {
        if let stopped = shell.stopSwitch.outcome { return receiver.delivered(device, stopped) }
        guard let notification = prepared as? Prepared else { return receiver.delivered(device, .wrongPlatform) }
        if let hold = shell.admission(heldSince: heldSince) {
            return shell.schedule(after: hold.seconds) { [self] in
                sendThroughShell(prepared, to: device, receiver: receiver, heldSince: hold.heldSince)
            }
        }
        sendFirstAttempt(notification, prepared: prepared, to: device, receiver: receiver, holdable: heldSince == nil)
    }

    /// A first attempt held as it was about to be written (the transport's `.held`): it waits for the pause like a
    /// send that met it at the gate, from now.
    package func sendHeld(_ delivery: PendingDelivery) {
        sendThroughShell(delivery.prepared, to: delivery.device, receiver: delivery.receiver, heldSince: clock.now())
    }

    /// A retry or the resend after a refresh (`DeliveryRun`): it waits for the fleet's pause and budget like a
    /// first send.
    package func attempt(
        _ prepared: any PreparedNotification, to device: Device,
        completion: @escaping @Sendable (AttemptResult, String?) -> Void
    ) {
        guard let notification = prepared as? Prepared else { return completion(Self.wrongPlatformAttempt, nil) }
        attemptHeld(notification, to: device, heldSince: nil, completion: completion)
    }

    private func attemptHeld(
        _ notification: Prepared, to device: Device, heldSince: Date?,
        completion: @escaping @Sendable (AttemptResult, String?) -> Void
    ) {
        if let hold = shell.admission(heldSince: heldSince) {
            return shell.schedule(after: hold.seconds) { [self] in
                attemptHeld(notification, to: device, heldSince: hold.heldSince, completion: completion)
            }
        }
        attemptOnce(notification, to: device, completion: completion)
    }

    package func answered(_ result: AttemptResult) { shell.answered(result) }

    package func schedule(after seconds: Double, _ work: @escaping @Sendable () -> Void) {
        shell.schedule(after: seconds, work)
    }

    package func stopApp(_ outcome: DeliveryOutcome) { shell.stopApp(outcome) }
}
