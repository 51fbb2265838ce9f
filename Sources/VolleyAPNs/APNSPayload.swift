import Foundation
import VolleyCore

/// APNs payload construction: Salesforce's Apex helpers, OneSignal-style fields, silent pushes, raw `aps`
/// pass-through. Pure functions; `APNSPreparedNotification` calls them once per (job, locale).
public enum APNSPayload {
    /// APNs payload limits (Apple, "Sending notification requests to APNs").
    public static let maxBytes = 4096
    public static let maxVoIPBytes = 5120

    // MARK: Salesforce Apex helpers (Messaging.PushNotificationPayload.apple)

    /// `apple(alert, sound, badgeCount, userData)`: `{"aps": {"alert", "sound", "badge"}, …userData}`.
    /// At least one of alert, sound, badgeCount is required (Salesforce: "You must enter a value for at least
    /// one of the following fields: Alert, Badge, Sound"). Empty strings count as absent.
    public static func apple(
        alert: String?, sound: String?, badgeCount: Int?,
        userData: [String: JSONValue]?
    ) throws -> JSONValue {
        var aps: [String: JSONValue] = [:]
        if let alert, !alert.isEmpty { aps["alert"] = .string(alert) }
        if let sound, !sound.isEmpty { aps["sound"] = .string(sound) }
        if let badgeCount { aps["badge"] = .number(JSONNumber(badgeCount)) }
        return try finishApple(aps: aps, userData: userData)
    }

    /// `apple(alertBody, actionLocKey, locKey, locArgs, launchImage, sound, badgeCount, userData)`:
    /// the alert becomes a dictionary (`body`, `action-loc-key`, `loc-key`, `loc-args`, `launch-image`).
    public static func apple(
        alertBody: String?, actionLocKey: String?, locKey: String?, locArgs: [String]?,
        launchImage: String?, sound: String?, badgeCount: Int?,
        userData: [String: JSONValue]?
    ) throws -> JSONValue {
        var alert: [String: JSONValue] = [:]
        if let alertBody, !alertBody.isEmpty { alert["body"] = .string(alertBody) }
        if let actionLocKey, !actionLocKey.isEmpty { alert["action-loc-key"] = .string(actionLocKey) }
        if let locKey, !locKey.isEmpty { alert["loc-key"] = .string(locKey) }
        if let locArgs, !locArgs.isEmpty { alert["loc-args"] = .array(locArgs.map { .string($0) }) }
        if let launchImage, !launchImage.isEmpty { alert["launch-image"] = .string(launchImage) }
        var aps: [String: JSONValue] = [:]
        // An alert needs something to show: body or a localization key.
        if alert["body"] != nil || alert["loc-key"] != nil { aps["alert"] = .object(alert) }
        if let sound, !sound.isEmpty { aps["sound"] = .string(sound) }
        if let badgeCount { aps["badge"] = .number(JSONNumber(badgeCount)) }
        return try finishApple(aps: aps, userData: userData)
    }

    private static func finishApple(aps: [String: JSONValue], userData: [String: JSONValue]?) throws -> JSONValue {
        guard !aps.isEmpty else {
            throw NotificationError(
                "PayloadEmpty",
                "You must enter a value for at least one of the following fields: Alert, Badge, Sound")
        }
        var root: [String: JSONValue] = userData ?? [:]
        if root["aps"] != nil {
            throw NotificationError("BadPayload", "userData must not contain the key \"aps\" (reserved by Apple)")
        }
        root["aps"] = .object(aps)
        return .object(root)
    }

    // MARK: Volley notifications

    static let interruptionLevels: Set<String> = ["passive", "active", "time-sensitive", "critical"]

    /// The payload for one variant of a notification. `raw` `apns` objects are returned unchanged.
    public static func payload(for n: VolleyCore.Notification, text: VolleyCore.Notification.LocalizedText) throws
        -> JSONValue
    {
        if let raw = n.apns {
            guard case .object(let root) = raw else {
                throw NotificationError(
                    "BadPayload", "apns must be a JSON object (the whole APNs payload)", field: "apns")
            }
            if root["mid"] != nil { throw reservedMessageIDKey(field: "apns.mid") }
            return raw
        }
        var aps: [String: JSONValue] = [:]
        if n.isSilent {
            // Apple: a background update's aps carries content-available only.
            aps["content-available"] = .number(1)
        } else {
            var alert: [String: JSONValue] = [:]
            if let t = text.title { alert["title"] = .string(t) }
            if let s = text.subtitle { alert["subtitle"] = .string(s) }
            if let b = text.body { alert["body"] = .string(b) }
            if !alert.isEmpty { aps["alert"] = .object(alert) }
            if let badge = n.badge {
                // APNs: the number to show on the app icon; 0 removes it.
                guard badge >= 0, badge <= Int(Int32.max) else {
                    throw NotificationError(
                        "BadPayload", "badge \(badge) must be from 0 to \(Int32.max)", field: "badge")
                }
                aps["badge"] = .number(JSONNumber(badge))
            }
            if let sound = n.sound { aps["sound"] = .string(sound) }
            if n.contentAvailable == true { aps["content-available"] = .number(1) }
            if n.mutableContent == true || n.imageUrl != nil { aps["mutable-content"] = .number(1) }
            if let c = n.category { aps["category"] = .string(c) }
            if let t = n.threadId { aps["thread-id"] = .string(t) }
            if let level = n.interruptionLevel {
                guard interruptionLevels.contains(level) else {
                    throw NotificationError(
                        "BadPayload",
                        "interruptionLevel \"\(level)\" is not one of passive, active, time-sensitive, critical",
                        field: "interruptionLevel")
                }
                aps["interruption-level"] = .string(level)
            }
            if let score = n.relevanceScore {
                guard score >= 0, score <= 1 else {
                    throw NotificationError(
                        "BadPayload", "relevanceScore \(score) must be between 0 and 1", field: "relevanceScore")
                }
                aps["relevance-score"] = .number(JSONNumber(score))
            }
            if let t = n.targetContentId { aps["target-content-id"] = .string(t) }
            if aps.isEmpty {
                throw NotificationError(
                    "PayloadEmpty",
                    "the notification has nothing to deliver: give a title or body, sound, badge, "
                        + "contentAvailable, or an apns payload"
                )
            }
        }
        var root: [String: JSONValue] = [:]
        if let data = n.data {
            if data["aps"] != nil {
                throw NotificationError(
                    "BadPayload", "data must not contain the key \"aps\" (reserved by Apple)", field: "data.aps")
            }
            if data["mid"] != nil { throw reservedMessageIDKey(field: "data.mid") }
            root = data
        }
        if let url = n.url { root["url"] = .string(url) }
        // Volley's choice: the image for a Notification Service Extension, and a badge increase the app
        // applies itself (APNs only sets absolute badges; Volley keeps no per-device badge state).
        if let image = n.imageUrl { root["image-url"] = .string(image) }
        if let inc = n.badgeIncrement, n.badge == nil { root["badge-increment"] = .number(JSONNumber(inc)) }
        root["aps"] = .object(aps)
        return .object(root)
    }

    /// `mid` is Volley's message id (`MessageTracking`) at the payload's root: a job may not use the key itself.
    static func reservedMessageIDKey(field: String) -> NotificationError {
        NotificationError(
            "BadPayload", "\(field) is reserved: Volley puts the push's message id (mid) there; rename the key",
            field: field)
    }

    /// Compact JSON bytes, keys sorted (stable output for tests and caches).
    public static func encode(_ value: JSONValue) throws -> [UInt8] { value.encoded() }

    /// Refuses a payload over the limit before sending, saying by how many bytes.
    public static func checkSize(_ bytes: Int, pushType: APNSPushType) throws {
        let limit = pushType == .voip ? maxVoIPBytes : maxBytes
        if bytes > limit {
            throw NotificationError(
                "PayloadTooLarge",
                "APNs payload is \(bytes) bytes, \(bytes - limit) bytes over the \(limit)-byte "
                    + "limit\(pushType == .voip ? " for VoIP" : ""); shorten it"
            )
        }
    }
}
