import Synchronization

/// A notification encoded once for one platform and one job, ready to be sent to many devices.
/// Providers define the concrete type; the engine only passes it back.
public protocol PreparedNotification: Sendable {
    var platform: Platform { get }
    /// Encoded payload size in bytes (after validation against the provider's limit).
    var payloadBytes: Int { get }
}

/// One provider (APNs for an app, FCM for an app). Implementations own retries and the outcome table:
/// what comes back is terminal.
public protocol PushSender: AnyObject, Sendable {
    var platform: Platform { get }
    /// Validate and encode once per job. Throws `NotificationError` when the notification is invalid. With
    /// `tracking`, each device's push carries its message id (`mid`) when the push is a visible one.
    func prepare(_ notification: Notification, jobID: JobID, tracking: MessageTracking?) throws
        -> any PreparedNotification
    /// Send to one device. `receiver` gets exactly one terminal outcome for it, on any queue.
    func send(_ prepared: any PreparedNotification, to device: Device, jobID: JobID, receiver: any DeliveryReceiver)
    /// `prepared` (the job's) with one device's own payload (`PersonalContent`): the job's headers, that device's
    /// body, checked against the provider's limit. Throws when the payload cannot be sent on this platform.
    func personalized(_ prepared: any PreparedNotification, for device: Device, with payload: PersonalPayload)
        throws(PersonalPayloadError) -> any PreparedNotification
}

/// Where a send's terminal outcome goes: the engine's lane mailbox. A receiver (not a closure per send) lets a
/// provider keep the device and its receiver in the one object it makes per request anyway.
public protocol DeliveryReceiver: AnyObject, Sendable {
    /// Called exactly once per send, on any queue; must not block.
    func delivered(_ device: Device, _ outcome: DeliveryOutcome)
}

extension PushSender {
    /// `prepare` without message ids.
    public func prepare(_ notification: Notification, jobID: JobID) throws -> any PreparedNotification {
        try prepare(notification, jobID: jobID, tracking: nil)
    }

    /// Send to one device; `completion` is called exactly once, on any queue, with a terminal outcome.
    public func send(
        _ prepared: any PreparedNotification, to device: Device, jobID: JobID,
        completion: @escaping @Sendable (DeliveryOutcome) -> Void
    ) {
        send(prepared, to: device, jobID: jobID, receiver: ClosureDeliveryReceiver(completion))
    }
}

/// A receiver that hands the outcome to a closure (tests, the provider bench, one-off sends).
public final class ClosureDeliveryReceiver: DeliveryReceiver {
    private let completion: @Sendable (DeliveryOutcome) -> Void
    public init(_ completion: @escaping @Sendable (DeliveryOutcome) -> Void) { self.completion = completion }
    public func delivered(_ device: Device, _ outcome: DeliveryOutcome) { completion(outcome) }
}

/// A sender's stop after a `fix-app` answer: from then on every send of that app fails at once with the
/// same outcome while other apps go on. Set once; read on every send without a lock (an atomic flag in front).
public final class AppStopSwitch: Sendable {
    private let isSet = Atomic<Bool>(false)
    private let state = Mutex<(outcome: DeliveryOutcome, message: String)?>(nil)

    public init() {}

    /// The outcome every send of a stopped app gets; nil while the app runs.
    public var outcome: DeliveryOutcome? {
        isSet.load(ordering: .acquiring) ? state.withLock { $0?.outcome } : nil
    }

    /// Why the app stopped, if it did.
    public var message: String? { state.withLock { $0?.message } }

    /// Stops the app. True for the first call only (the one that should log).
    public func stop(_ outcome: DeliveryOutcome, message: String) -> Bool {
        let first = state.withLock { s -> Bool in
            if s != nil { return false }
            s = (outcome, message)
            return true
        }
        if first { isSet.store(true, ordering: .releasing) }
        return first
    }
}
