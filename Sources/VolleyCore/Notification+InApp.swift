/// What the in-app inbox shows for a notification: the title and body the user saw, or nothing for a silent hint.
extension Notification {
    /// The in-app text, or nil when the notification shows nothing (a silent "record changed" hint, a data-only
    /// FCM message): those are not stored in the inbox. A raw platform payload (Apex / Connect REST style) is read
    /// for what it displays: APNs `aps.alert` (a string, or an object with `title` and `body`), else FCM's
    /// `notification` (at the message's top level or inside `message`).
    public var inAppText: (title: String, body: String)? {
        if title != nil || body != nil { return (title ?? "", body ?? "") }
        if let text = Self.apnsAlert(apns) ?? Self.fcmNotification(fcm) { return text }
        return nil
    }

    private static func apnsAlert(_ payload: JSONValue?) -> (title: String, body: String)? {
        guard let payload else { return nil }
        // `{"aps": …}`, or the FCM-style wrapper `{"payload": {"aps": …}, "headers": …}`.
        let aps = payload["aps"] ?? payload["payload"]?["aps"]
        switch aps?["alert"] {
        case .string(let body)?: return body.isEmpty ? nil : ("", body)
        case .object(let alert)?:
            let title = alert["title"]?.stringValue
            let body = alert["body"]?.stringValue
            if title == nil && body == nil { return nil }
            return (title ?? "", body ?? "")
        default: return nil
        }
    }

    private static func fcmNotification(_ payload: JSONValue?) -> (title: String, body: String)? {
        guard let payload else { return nil }
        let message = payload["message"] ?? payload
        guard let n = message["notification"] ?? message["android"]?["notification"] else { return nil }
        let title = n["title"]?.stringValue
        let body = n["body"]?.stringValue
        if title == nil && body == nil { return nil }
        return (title ?? "", body ?? "")
    }
}
