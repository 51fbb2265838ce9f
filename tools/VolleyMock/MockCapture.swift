import Foundation
import VolleyCore

/// One accepted push as the mock received it.
public struct MockCapturedPush: Sendable {
    public var provider: MockProvider
    /// The APNs device token (hex, from the path) or the FCM registration token (`message.token`).
    public var token: String
    /// APNs: `apns-push-type`, `apns-priority`, `apns-expiration`, `apns-collapse-id`, `apns-topic` when sent.
    public var headers: [String: String]
    public var body: [UInt8]
    /// When the mock accepted it (the test's window counts: pushes per second of a throttled job).
    public var acceptedAt = Date()
    /// The body as a JSON tree (nil when it is not JSON, which an accepted push never is).
    public var json: JSONValue? { JSONValue.parse(body) }
}

/// The last `keep` accepted pushes.
struct MockCaptureLog {
    private(set) var pushes: [MockCapturedPush] = []
    mutating func append(_ push: MockCapturedPush, keep: Int) {
        pushes.append(push)
        if pushes.count > keep { pushes.removeFirst(pushes.count - keep) }
    }
}
