/// What a job naming a custom notification `type` is sent as, and what of its notification that payload carries.
///
/// A notification with a `type`, no raw `apns`/`fcm` payload, not silent, and without `"salesforcePayload": false`
/// is sent as Salesforce's Notification Builder payload (`SalesforcePushBuilder` in VolleyConnect, per recipient),
/// which has room for the notification's texts (each device's `localized` variant), `sound`, `data` and `url` (keys
/// for the app: in clear at the APNs payload's root and in FCM `data`, inside the encrypted `content` when the device
/// registered a key), and, on APNs, `threadId`, `category` and `interruptionLevel` (in `aps`; Android gets
/// `threadId` as a key for the app, as Volley's own FCM data does). It has no room for an image: a job naming
/// `imageUrl` is refused, naming the field, and so is a `data` key the payload uses itself. The API runs this at the
/// door (`NotificationCheck`), the worker again before sending, so nothing is dropped silently.
extension PushJob {
    /// True when this job, whose notification (the job's own, or its template's) is `n`, is sent as the Salesforce
    /// Notification Builder payload.
    public func sendsSalesforcePayload(_ n: Notification) -> Bool {
        salesforcePayload != false && n.type != nil && n.apns == nil && n.fcm == nil && !n.isSilent
    }

    /// The first field of `n` the Notification Builder payload cannot carry, as the error the job is refused with
    /// (its `field` relative to `notification`); nil when it carries all of it or the job is not sent that way.
    public func salesforcePayloadRefusal(_ n: Notification) -> NotificationError? {
        guard sendsSalesforcePayload(n) else { return nil }
        if n.imageUrl != nil {
            return NotificationError(
                "BadPayload",
                "imageUrl: a notification with a type is sent as Salesforce's Notification Builder payload, which "
                    + "has no image; remove imageUrl, or send it as a plain push with \"salesforcePayload\": false",
                field: "imageUrl")
        }
        if let data = n.data, let key = data.keys.sorted().first(where: SalesforcePayloadKeys.reserved.contains) {
            return NotificationError(
                "BadPayload",
                "data.\(key): the Notification Builder payload uses the key \(key) itself; rename the key",
                field: "data.\(key)")
        }
        return nil
    }
}

/// The keys of the Notification Builder payload and its encrypted content (the guide's custom push payload tables),
/// Apple's `aps`, and the message id `mid`: a notification's `data` may use none of them.
public enum SalesforcePayloadKeys {
    public static let reserved: Set<String> = [
        "alert", "alertBody", "alertTitle", "aps", "badge", "cid", "content", "encrypted", "mid", "nid", "notifType",
        "oid", "secret", "sid", "timestamp", "type", "uid",
    ]
}
