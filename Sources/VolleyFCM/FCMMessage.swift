import Foundation
import VolleyCore
import VolleyHTTP2

/// FCM HTTP v1 message encoding (https://firebase.google.com/docs/reference/fcm/rest/v1/projects.messages).
public enum FCMMessage {
    /// Data payload limit (keys + values, bytes), checked before sending.
    public static let maxDataBytes = 4096

    /// The `message` object without `token`, for one language variant.
    public static func message(for n: VolleyCore.Notification, text: VolleyCore.Notification.LocalizedText) throws
        -> [String: JSONValue]
    {
        var message: [String: JSONValue] = [:]
        if !n.isSilent {
            var notification: [String: JSONValue] = [:]
            if let t = text.title { notification["title"] = .string(t) }
            if let b = text.body { notification["body"] = .string(b) }
            if let i = n.imageUrl { notification["image"] = .string(i) }
            if !notification.isEmpty { message["notification"] = .object(notification) }
        }
        // data: every value a string (FCM rejects anything else).
        var data: [String: JSONValue] = [:]
        for (k, v) in n.data ?? [:] { data[k] = .string(try stringValue(v, key: k)) }
        if let url = n.url, data["url"] == nil { data["url"] = .string(url) }
        if let subtitle = text.subtitle, data["subtitle"] == nil, !n.isSilent { data["subtitle"] = .string(subtitle) }
        // FCM HTTP v1 has no grouping field (`android.notification.tag` replaces an earlier notification instead):
        // the thread travels as data, for the app's NotificationCompat.Builder.setGroup.
        if let thread = n.threadId, data["threadId"] == nil, !n.isSilent { data["threadId"] = .string(thread) }
        if !data.isEmpty {
            let bytes = data.reduce(0) { $0 + $1.key.utf8.count + ($1.value.stringValue?.utf8.count ?? 0) }
            if bytes > maxDataBytes {
                throw NotificationError(
                    "PayloadTooLarge",
                    "FCM data is \(bytes) bytes, \(bytes - maxDataBytes) bytes over the \(maxDataBytes)-byte "
                        + "limit; shorten it", field: "data")
            }
            message["data"] = .object(data)
        }
        var android: [String: JSONValue] = [:]
        // Silent (data-only) messages default to NORMAL, like APNs priority 5.
        let priority = n.priority ?? (n.isSilent ? .normal : .high)
        android["priority"] = .string(priority == .high ? "HIGH" : "NORMAL")
        // Always sent: FCM's own default is 4 weeks; a job without `ttl` gets OneSignal's 3 days.
        android["ttl"] = .string("\(try n.effectiveTTL(reason: "INVALID_ARGUMENT"))s")
        if let c = n.collapseId { android["collapse_key"] = .string(c) }
        if !n.isSilent {
            var an: [String: JSONValue] = [:]
            if let ch = n.channelId { an["channel_id"] = .string(ch) }
            if let s = n.sound { an["sound"] = .string(s) }
            if let c = n.category { an["click_action"] = .string(c) }
            // Same meaning as APNs' apns-collapse-id: a newer notification replaces the displayed one.
            if let c = n.collapseId { an["tag"] = .string(c) }
            if let i = n.imageUrl { an["image"] = .string(i) }
            if let badge = n.badge { an["notification_count"] = .number(JSONNumber(badge)) }
            if !an.isEmpty { android["notification"] = .object(an) }
        }
        message["android"] = .object(android)
        if let apns = n.apns {
            // Apex/Connect REST style: the APNs payload itself; FCM wants {"payload": …} (headers optional).
            if case .object(let o) = apns, o["payload"] != nil || o["headers"] != nil {
                message["apns"] = apns
            } else {
                message["apns"] = .object(["payload": apns])
            }
        }
        if let fcm = n.fcm {
            // Raw FCM: merged over what Volley built (raw wins); a {"message": …} wrapper is accepted.
            guard case .object(var raw) = fcm else {
                throw NotificationError("INVALID_ARGUMENT", "fcm must be a JSON object (an FCM message)", field: "fcm")
            }
            if case .object(let inner)? = raw["message"] { raw = inner }
            raw["token"] = nil
            message = merge(message, raw)
            if case .object(let d)? = message["data"] {
                for (k, v) in d where v.stringValue == nil {
                    throw NotificationError(
                        "INVALID_ARGUMENT", "fcm.data.\(k) must be a string (FCM data values are strings)")
                }
            }
        }
        return message
    }

    /// A data message for one device: `data` as given, the job's delivery options (`android.priority`, `ttl`,
    /// `collapse_key`) and no `notification` block, so the app builds what it shows (as the Salesforce Mobile SDK
    /// does with a Notification Builder push, decrypting it first).
    public static func dataMessage(_ data: [String: String], options n: VolleyCore.Notification)
        throws(PersonalPayloadError) -> [String: JSONValue]
    {
        let bytes = data.reduce(0) { $0 + $1.key.utf8.count + $1.value.utf8.count }
        if bytes > maxDataBytes {
            throw PersonalPayloadError(
                "PayloadTooLarge",
                "FCM data is \(bytes) bytes, \(bytes - maxDataBytes) bytes over the "
                    + "\(maxDataBytes)-byte limit")
        }
        var android: [String: JSONValue] = [:]
        let priority = n.priority ?? (n.isSilent ? .normal : .high)
        android["priority"] = .string(priority == .high ? "HIGH" : "NORMAL")
        if let ttl = n.ttl, ttl >= 0 { android["ttl"] = .string("\(ttl)s") }
        if let c = n.collapseId { android["collapse_key"] = .string(c) }
        return ["data": .object(data.mapValues(JSONValue.string)), "android": .object(android)]
    }

    static func merge(_ a: [String: JSONValue], _ b: [String: JSONValue]) -> [String: JSONValue] {
        var out = a
        for (k, v) in b {
            if case .object(let bo) = v, case .object(let ao)? = out[k] {
                out[k] = .object(merge(ao, bo))
            } else {
                out[k] = v
            }
        }
        return out
    }

    static func stringValue(_ v: JSONValue, key: String) throws -> String {
        switch v {
        case .string(let s): return s
        case .null: return ""
        default: return String(decoding: v.encoded(), as: UTF8.self)
        }
    }
}

/// A notification encoded once per job for FCM. The per-device request splices the token into a
/// pre-encoded body: `{"message":{"token":"<token>",` + rest-of-message + `}`.
///
/// Its fields live in one shared object, so the per-send cast out of `any PreparedNotification` copies a reference,
/// not every field of the notification (a retain and a release each).
public struct FCMPreparedNotification: PreparedNotification {
    final class Storage: Sendable {
        let payloadBytes: Int
        let validateOnly: Bool
        let defaultTail: [UInt8]
        let variantTails: [String: [UInt8]]
        let notification: VolleyCore.Notification
        let path: String
        let sharedFields: HTTP2HeaderBlock
        init(
            payloadBytes: Int, validateOnly: Bool, defaultTail: [UInt8], variantTails: [String: [UInt8]],
            notification: VolleyCore.Notification, path: String, sharedFields: HTTP2HeaderBlock
        ) {
            self.payloadBytes = payloadBytes
            self.validateOnly = validateOnly
            self.defaultTail = defaultTail
            self.variantTails = variantTails
            self.notification = notification
            self.path = path
            self.sharedFields = sharedFields
        }
    }
    let storage: Storage

    public var platform: Platform { .android }
    public var payloadBytes: Int { storage.payloadBytes }
    public var validateOnly: Bool { storage.validateOnly }
    /// Message bytes after the opening brace (`"android":{…},…}`), or empty when the message has no fields.
    var defaultTail: [UInt8] { storage.defaultTail }
    var variantTails: [String: [UInt8]] { storage.variantTails }
    var notification: VolleyCore.Notification { storage.notification }
    var path: String { storage.path }
    /// `:method`, `:path` (never indexed) and `content-type`, encoded once per job.
    var sharedFields: HTTP2HeaderBlock { storage.sharedFields }

    public init(_ n: VolleyCore.Notification, projectID: String, validateOnly: Bool = false) throws {
        func tail(_ text: VolleyCore.Notification.LocalizedText) throws -> [UInt8] {
            let m = try FCMMessage.message(for: n, text: text)
            let bytes = JSONValue.object(m).encoded()
            return bytes.count <= 2 ? [] : Array(bytes.dropFirst()) // drop "{", keep the closing "}"
        }
        let defaultTail = try tail(n.text(variant: nil))
        var variants: [String: [UInt8]] = [:]
        for key in (n.localized ?? [:]).keys { variants[key] = try tail(n.text(variant: key)) }
        let path = "/v1/projects/\(projectID)/messages:send"
        var shared = HTTP2HeaderBlock()
        shared.append(":method", "POST")
        shared.append(":path", path, sensitive: true)
        shared.append("content-type", "application/json")
        storage = Storage(
            payloadBytes: ([defaultTail.count] + variants.values.map(\.count)).max() ?? 0,
            validateOnly: validateOnly, defaultTail: defaultTail, variantTails: variants, notification: n,
            path: path, sharedFields: shared)
    }

    /// Throws what `init` throws for `n`, without encoding: every language variant's message is built, which is
    /// where a notification is refused, and neither the bytes nor the header fields are made. The API's check of a
    /// job at the door runs this, so it refuses exactly what a worker would.
    public static func check(_ n: VolleyCore.Notification) throws {
        _ = try FCMMessage.message(for: n, text: n.text(variant: nil))
        for key in (n.localized ?? [:]).keys { _ = try FCMMessage.message(for: n, text: n.text(variant: key)) }
    }

    private init(storage: Storage) { self.storage = storage }

    /// The message `tail` for one device, with the job's path and shared fields.
    private func personalized(tail: [UInt8]) -> FCMPreparedNotification {
        let s = storage
        return FCMPreparedNotification(
            storage: Storage(
                payloadBytes: tail.count, validateOnly: s.validateOnly, defaultTail: tail, variantTails: [:],
                notification: s.notification, path: s.path, sharedFields: s.sharedFields))
    }

    /// One device's message: a data message with the job's delivery options, or the job's notification with that
    /// recipient's texts in the device's language.
    public func personalized(for device: Device, with payload: PersonalPayload) throws(PersonalPayloadError)
        -> FCMPreparedNotification
    {
        let message: [String: JSONValue]
        switch payload {
        case .fcmData(let data): message = try FCMMessage.dataMessage(data, options: storage.notification)
        case .notification(let n):
            do {
                message = try FCMMessage.message(for: n, text: n.text(variant: n.variantKey(for: device.locale)))
            } catch let e as NotificationError {
                throw PersonalPayloadError(e.reason.rawValue, e.message)
            } catch {
                throw PersonalPayloadError("INVALID_ARGUMENT", "\(error)")
            }
        case .apns:
            throw PersonalPayloadError("INVALID_ARGUMENT", "an APNs payload cannot be sent to an Android device")
        }
        let bytes = JSONValue.object(message).encoded()
        return personalized(tail: bytes.count <= 2 ? [] : Array(bytes.dropFirst()))
    }

    /// The JSON body for one device.
    public func body(token: DeviceToken, locale: String?) -> [UInt8] {
        let s = storage
        var tail = s.defaultTail
        if !s.variantTails.isEmpty, let key = s.notification.variantKey(for: locale), let v = s.variantTails[key] {
            tail = v
        }
        var out: [UInt8] = []
        out.reserveCapacity(tail.count + token.rawValue.utf8.count + 48)
        out.append(contentsOf: #"{"message":{"token":""#.utf8)
        appendJSONStringContent(token.rawValue, to: &out)
        out.append(UInt8(ascii: "\""))
        if tail.isEmpty {
            out.append(UInt8(ascii: "}"))
        } else {
            out.append(UInt8(ascii: ","))
            out.append(contentsOf: tail)
        }
        if s.validateOnly { out.append(contentsOf: #","validate_only":true"#.utf8) }
        out.append(UInt8(ascii: "}"))
        return out
    }

    /// `:authority` and `authorization` (never indexed: a secret), the fields that follow the access token rather
    /// than the device. The provider encodes them once per token (`request(for:authorizationFields:)`).
    public static func authorizationFields(authority: String, authorization: String) -> HTTP2HeaderBlock {
        var fields = HTTP2HeaderBlock(
            reservingBytes: 10 + authority.utf8.count + 13 + authorization.utf8.count, fields: 2)
        fields.append(":authority", authority)
        fields.append("authorization", authorization, sensitive: true)
        return fields
    }

    /// Per device only the body: the job's fields and the token's `authorizationFields` are shared blocks.
    public func request(for device: Device, authorizationFields: HTTP2HeaderBlock) -> HTTP2Request {
        HTTP2Request(
            sharedFields: sharedFields, fields: authorizationFields,
            body: body(token: device.token, locale: device.locale))
    }

    /// The same, encoding `authorizationFields` for this request alone (test-push, retries).
    public func request(for device: Device, authority: String, authorization: String) -> HTTP2Request {
        request(
            for: device,
            authorizationFields: Self.authorizationFields(authority: authority, authorization: authorization))
    }
}
