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
    /// Validate and encode once per job. Throws `NotificationError` when the notification is invalid.
    func prepare(_ notification: Notification, jobID: JobID) throws -> any PreparedNotification
    /// Send to one device. `completion` is called exactly once, on any queue, with a terminal outcome.
    func send(_ prepared: any PreparedNotification, to device: Device, jobID: JobID,
              completion: @escaping @Sendable (DeliveryOutcome) -> Void)
}
