/// Carrying out `DeliveryStateMachine`'s actions for a provider: the provider supplies one attempt, a credential
/// refresh, a timer and the app's `fix-app` stop; the machine decides. No Dispatch here: the provider's
/// `schedule` waits.

/// What a provider supplies to run its deliveries. APNs and FCM implement it; their `send` makes the first attempt
/// itself (one object per send) and hands the answer to `PendingDelivery.firstAttemptCompleted(_:)`.
package protocol DeliverySender: AnyObject, Sendable {
    var retryPolicy: RetryPolicy { get }
    /// The clock a Retry-After given as an HTTP-date is read against.
    var clock: any WallClock { get }
    /// One more attempt: what the provider answered, and the credential the request carried (nil for none).
    func attempt(
        _ prepared: any PreparedNotification, to device: Device,
        completion: @escaping @Sendable (AttemptResult, _ credential: String?) -> Void)
    /// After the provider rejected the credential `used`: true when a resend with a newer one may go now.
    func refreshCredential(rejected used: String?) -> Bool
    /// Runs `work` after `seconds` (the back-off between attempts).
    func schedule(after seconds: Double, _ work: @escaping @Sendable () -> Void)
    /// A `fix-app` outcome: stop the app (`AppStopSwitch.stop`) and log why, once.
    func stopApp(_ outcome: DeliveryOutcome)
    /// Every answer that was not a 200, before the machine decides (a 429/503 pauses the fleet's sends).
    func answered(_ result: AttemptResult)
}

extension DeliverySender {
    package func answered(_ result: AttemptResult) {}
}

extension DeliveryOutcome {
    /// A notification prepared for one platform handed to the other platform's sender.
    package static var wrongPlatform: DeliveryOutcome {
        .rejected(status: 0, reason: "WrongPlatform", action: .invalidNotification)
    }
}

/// One send whose first attempt is under way: what its answer needs. A provider keeps it inside the one request
/// object it makes per send, so the common case (a 200) costs no object besides that request.
package struct PendingDelivery: Sendable {
    package let sender: any DeliverySender
    package let prepared: any PreparedNotification
    package let device: Device
    /// The credential the first attempt carried: a rejection of it is what a refresh replaces.
    package let credential: String?
    package let receiver: any DeliveryReceiver

    package init(
        sender: any DeliverySender, prepared: any PreparedNotification, device: Device, credential: String?,
        receiver: any DeliveryReceiver
    ) {
        self.sender = sender
        self.prepared = prepared
        self.device = device
        self.credential = credential
        self.receiver = receiver
    }

    /// A 200 (`OutcomeTable.isAccepted(status:)`): delivered, with no machine and no decoding.
    package func accepted() { receiver.delivered(device, .accepted) }

    /// The first attempt's answer, decided by a new machine: a terminal answer is delivered at once; otherwise a
    /// `DeliveryRun` carries on (the only object a retry or a refresh adds).
    package func firstAttemptCompleted(_ result: AttemptResult) {
        sender.answered(result)
        var machine = DeliveryStateMachine(policy: sender.retryPolicy, clock: sender.clock)
        let action = machine.attemptCompleted(result)
        if case .finish(let outcome) = action { return finish(outcome) }
        DeliveryRun(self, machine).perform(action)
    }

    func finish(_ outcome: DeliveryOutcome) {
        if case .rejected(_, _, .fixApp) = outcome { sender.stopApp(outcome) }
        receiver.delivered(device, outcome)
    }
}

/// One delivery after its first answer asked for more: performs the machine's actions until it finishes.
/// Its steps happen strictly one after another (each starts from the previous attempt's answer, refresh or
/// timer), so the machine and `credential` are never touched concurrently.
final class DeliveryRun: @unchecked Sendable {
    private let delivery: PendingDelivery
    private var machine: DeliveryStateMachine
    /// The credential the last attempt carried.
    private var credential: String?

    init(_ delivery: PendingDelivery, _ machine: DeliveryStateMachine) {
        self.delivery = delivery
        self.machine = machine
        credential = delivery.credential
    }

    func perform(_ action: DeliveryStateMachine.Action) {
        switch action {
        case .send:
            delivery.sender.attempt(delivery.prepared, to: delivery.device) { [self] result, credential in
                self.credential = credential
                if result.answer.status != 200 { delivery.sender.answered(result) }
                perform(machine.attemptCompleted(result))
            }
        case .refreshCredential:
            let refreshed = delivery.sender.refreshCredential(rejected: credential)
            perform(refreshed ? machine.credentialRefreshed() : machine.credentialRefreshFailed())
        case .wait(let seconds):
            delivery.sender.schedule(after: seconds) { [self] in perform(machine.backoffElapsed()) }
        case .finish(let outcome):
            delivery.finish(outcome)
        }
    }
}
