import Foundation
import VolleyCore

/// An in-test `PushSender`: a real class with configurable outcomes and latency that completes on its own queue,
/// and counts what it was asked to send (per token), so tests can check "exactly once" and duplicates.
public final class FakePushSender: PushSender, @unchecked Sendable {
    public struct Prepared: PreparedNotification {
        public let platform: Platform
        public let payloadBytes: Int
    }

    /// The job's prepared notification with one device's own payload (`personalized`).
    public struct Personal: PreparedNotification {
        public let platform: Platform
        public let payload: PersonalPayload
        public var payloadBytes: Int { 0 }
    }

    public let platform: Platform
    private let queue: DispatchQueue
    private let lock = NSLock()
    private var sent: [String: Int] = [:]
    private var personal: [String: PersonalPayload] = [:]
    private var _total = 0
    /// Outcome per device (default: accepted).
    public var outcome: @Sendable (Device) -> DeliveryOutcome
    /// Delay before completing (seconds).
    public var latency: Double
    /// When set, sends never complete (a hung provider).
    public var hang = false

    public init(
        platform: Platform, latency: Double = 0,
        outcome: @escaping @Sendable (Device) -> DeliveryOutcome = { _ in .accepted }
    ) {
        self.platform = platform
        self.latency = latency
        self.outcome = outcome
        queue = DispatchQueue(label: "fake-\(platform)", attributes: .concurrent)
    }

    /// The message ids of each preparation so far, in order (nil: an untracked one).
    public var preparedTracking: [MessageTracking?] { lock.withLock { tracked } }
    private var tracked: [MessageTracking?] = []

    public func prepare(_ notification: VolleyCore.Notification, jobID: JobID, tracking: MessageTracking?) throws
        -> any PreparedNotification
    {
        lock.withLock { tracked.append(tracking) }
        if notification.contentAvailable == true && (notification.title != nil || notification.body != nil) {
            throw NotificationError("SilentWithAlert", "silent push must not carry an alert")
        }
        if (notification.body?.utf8.count ?? 0) > 4000 {
            throw NotificationError("PayloadTooLarge", "payload over 4096 bytes")
        }
        return Prepared(platform: platform, payloadBytes: notification.body?.utf8.count ?? 0)
    }

    public func personalized(
        _ prepared: any PreparedNotification, for device: Device, with payload: PersonalPayload
    ) throws(PersonalPayloadError) -> any PreparedNotification {
        Personal(platform: platform, payload: payload)
    }

    public func send(
        _ prepared: any PreparedNotification, to device: Device, jobID: JobID, receiver: any DeliveryReceiver
    ) {
        lock.withLock {
            sent[device.token.rawValue, default: 0] += 1
            _total += 1
            if let p = prepared as? Personal { personal[device.token.rawValue] = p.payload }
        }
        if hang { return }
        let o = outcome(device)
        if latency > 0 {
            queue.asyncAfter(deadline: .now() + latency) { receiver.delivered(device, o) }
        } else {
            queue.async { receiver.delivered(device, o) }
        }
    }

    public var total: Int { lock.withLock { _total } }
    public var perToken: [String: Int] { lock.withLock { sent } }
    /// The last per-person payload each token was sent.
    public var personalPayloads: [String: PersonalPayload] { lock.withLock { personal } }
    public func reset() {
        lock.withLock {
            sent = [:]
            personal = [:]
            _total = 0
        }
    }
}
