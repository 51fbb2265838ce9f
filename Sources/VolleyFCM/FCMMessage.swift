import Foundation
import VolleyCore
import VolleyHTTP2

/// FCM HTTP v1 message encoding (https://firebase.google.com/docs/reference/fcm/rest/v1/projects.messages).
public enum FCMMessage {
    /// Data payload limit (keys + values, bytes), checked before sending.
    public static let maxDataBytes = 4096
    /// What one message may carry to the device, in bytes (FCM: "the maximum payload for both message types is
    /// 4096 bytes"): its notification blocks and its data, counted by `payloadBytes`.
    public static let maxPayloadBytes = 4096

    /// The `message` object without `token`, for one language variant. `tracked`: each device's `data` will also
    /// carry its message id (`mid`), which counts against the 4 KB.
    public static func message(
        for n: VolleyCore.Notification, text: VolleyCore.Notification.LocalizedText, tracked: Bool = false
    ) throws -> [String: JSONValue] {
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
        if n.data?["mid"] != nil { throw reservedMessageIDKey(field: "data.mid") }
        for (k, v) in n.data ?? [:] { data[k] = .string(try stringValue(v, key: k)) }
        if let url = n.url, data["url"] == nil { data["url"] = .string(url) }
        if let subtitle = text.subtitle, data["subtitle"] == nil, !n.isSilent { data["subtitle"] = .string(subtitle) }
        // FCM HTTP v1 has no grouping field (`android.notification.tag` replaces an earlier notification instead):
        // the thread travels as data, for the app's NotificationCompat.Builder.setGroup.
        if let thread = n.threadId, data["threadId"] == nil, !n.isSilent { data["threadId"] = .string(thread) }
        if !data.isEmpty {
            let bytes =
                data.reduce(0) { $0 + $1.key.utf8.count + ($1.value.stringValue?.utf8.count ?? 0) }
                + (tracked && !n.isSilent ? MessageTracking.fcmDataBytes : 0)
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
            // Same meaning as APNs' apns-collapse-id: a newer notification replaces the displayed one (the job's
            // collapse id, else the worker's, so a resend after an unanswered write shows once).
            if let c = n.displayCollapseId { an["tag"] = .string(c) }
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
                if d["mid"] != nil { throw reservedMessageIDKey(field: "fcm.data.mid") }
            }
        }
        try checkPayloadSize(message, tracked: tracked && !n.isSilent, raw: n.fcm != nil)
        return message
    }

    /// The bytes a message carries to the device: the keys and values of its `notification` and
    /// `android.notification` blocks and of its `data` (a value that is not a string by its JSON), as FCM's
    /// 4,096-byte limit counts them; `tracked` adds the message id `mid` each device's `data` will carry. Cheap: no
    /// encoding, no allocation for string values.
    static func payloadBytes(_ message: [String: JSONValue], tracked: Bool) -> (notification: Int, data: Int) {
        func bytes(_ v: JSONValue?) -> Int {
            guard case .object(let o)? = v else { return 0 }
            return o.reduce(0) {
                $0 + $1.key.utf8.count + ($1.value.stringValue?.utf8.count ?? $1.value.encoded().count)
            }
        }
        let notification = bytes(message["notification"]) + bytes(message["android"]?["notification"])
        return (notification, bytes(message["data"]) + (tracked ? MessageTracking.fcmDataBytes : 0))
    }

    /// Refuses a message whose notification and data together are over `maxPayloadBytes`, as APNs' payload limit
    /// is refused (`PayloadTooLarge`), naming the field that holds most of it: `title` or `body` (the
    /// notification's text), `data`, or `fcm` (a raw FCM payload's notification block). Run where the job is
    /// prepared, and per device for a notification made for one recipient (a rendered template), where the
    /// device's outcome is `rejected` with the reason.
    static func checkPayloadSize(_ message: [String: JSONValue], tracked: Bool, raw: Bool) throws(NotificationError) {
        let (notification, data) = payloadBytes(message, tracked: tracked)
        let total = notification + data
        guard total > maxPayloadBytes else { return }
        let title = message["notification"]?["title"]?.stringValue?.utf8.count ?? 0
        let body = message["notification"]?["body"]?.stringValue?.utf8.count ?? 0
        let field =
            data >= notification
            ? "data" : raw && title + body < notification / 2 ? "fcm" : body >= title ? "body" : "title"
        throw NotificationError(
            "PayloadTooLarge",
            "\(field): FCM message is \(total) bytes (notification \(notification), data \(data)), "
                + "\(total - maxPayloadBytes) bytes over the \(maxPayloadBytes)-byte limit; shorten it", field: field)
    }

    /// A data message for one device: `data` as given, the job's delivery options (`android.priority`, `ttl`,
    /// `collapse_key`) and no `notification` block, so the app builds what it shows (as the Salesforce Mobile SDK
    /// does with a Notification Builder push, decrypting it first). `tracked`: `data` will also carry the device's
    /// message id (`mid`).
    public static func dataMessage(
        _ data: [String: String], options n: VolleyCore.Notification, tracked: Bool = false
    ) throws(PersonalPayloadError) -> [String: JSONValue] {
        if data["mid"] != nil {
            throw PersonalPayloadError("INVALID_ARGUMENT", reservedMessageIDKey(field: "data.mid").message)
        }
        let idBytes = tracked ? MessageTracking.fcmDataBytes : 0
        let bytes = data.reduce(idBytes) { $0 + $1.key.utf8.count + $1.value.utf8.count }
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

    /// `mid` is Volley's message id (`MessageTracking`) in `data`: a job may not use the key itself.
    static func reservedMessageIDKey(field: String) -> NotificationError {
        NotificationError(
            "INVALID_ARGUMENT",
            "\(field) is reserved: Volley puts the push's message id (mid) there; rename the key", field: field)
    }

    /// The offset just past the `{` that opens the object of the top-level member `"data"` in `bytes`, a compact
    /// JSON object as `JSONValue.encoded()` writes it; nil when it has no such member. Strings are skipped whole
    /// (an escaped quote included), so a key or value that spells `"data":{` inside a string is never taken.
    static func dataObjectStart(in bytes: [UInt8]) -> Int? {
        let quote = UInt8(ascii: "\"")
        let backslash = UInt8(ascii: "\\")
        let key = Array(#""data":{"#.utf8)
        var depth = 0
        var i = 0
        var previous: UInt8 = 0
        while i < bytes.count {
            let c = bytes[i]
            if c == quote {
                // At the top level, a string right after `{` or `,` is a key.
                if depth == 1, previous == UInt8(ascii: "{") || previous == UInt8(ascii: ","),
                    bytes.count - i >= key.count, bytes[i..<(i + key.count)].elementsEqual(key)
                {
                    return i + key.count
                }
                i += 1
                while i < bytes.count, bytes[i] != quote { i += bytes[i] == backslash ? 2 : 1 }
            } else if c == UInt8(ascii: "{") || c == UInt8(ascii: "[") {
                depth += 1
            } else if c == UInt8(ascii: "}") || c == UInt8(ascii: "]") {
                depth -= 1
            }
            previous = bytes[min(i, bytes.count - 1)]
            i += 1
        }
        return nil
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
/// A tracked push (`tracking`, not silent) also carries the device's message id in `data`: the encoded message is
/// kept with the offset of its `data` object's first member, and the device's `"mid":"<id>",` goes there (or a
/// `"data":{"mid":"<id>"}` member right after the token when the message has no `data`), the rest byte for byte.
///
/// Its fields live in one shared object, so the per-send cast out of `any PreparedNotification` copies a reference,
/// not every field of the notification (a retain and a release each).
public struct FCMPreparedNotification: PreparedNotification {
    final class Storage: Sendable {
        let payloadBytes: Int
        let validateOnly: Bool
        let defaultTail: Tail
        let variantTails: [String: Tail]
        let notification: VolleyCore.Notification
        let path: String
        let sharedFields: HTTP2HeaderBlock
        /// The message ids each device's `data` carries; nil: none.
        let tracking: MessageTracking?
        init(
            payloadBytes: Int, validateOnly: Bool, defaultTail: Tail, variantTails: [String: Tail],
            notification: VolleyCore.Notification, path: String, sharedFields: HTTP2HeaderBlock,
            tracking: MessageTracking?
        ) {
            self.payloadBytes = payloadBytes
            self.validateOnly = validateOnly
            self.defaultTail = defaultTail
            self.variantTails = variantTails
            self.notification = notification
            self.path = path
            self.sharedFields = sharedFields
            self.tracking = tracking
        }
    }

    /// A message's bytes after its opening brace (`"android":{…},…}`), or empty when the message has no fields, and
    /// where its `data` object's members start in them (set only for a tracked notification).
    struct Tail {
        let bytes: [UInt8]
        let dataAt: Int?

        /// The tail of `message`; `locateData`: find its `data` object for the message ids.
        init(_ message: [String: JSONValue], locateData: Bool) {
            let encoded = JSONValue.object(message).encoded()
            bytes = encoded.count <= 2 ? [] : Array(encoded.dropFirst()) // drop "{", keep the closing "}"
            dataAt = locateData && !bytes.isEmpty ? FCMMessage.dataObjectStart(in: encoded).map { $0 - 1 } : nil
        }
    }
    let storage: Storage

    public var platform: Platform { .android }
    public var payloadBytes: Int { storage.payloadBytes }
    public var validateOnly: Bool { storage.validateOnly }
    /// Message bytes after the opening brace (`"android":{…},…}`), or empty when the message has no fields.
    var defaultTail: [UInt8] { storage.defaultTail.bytes }
    var notification: VolleyCore.Notification { storage.notification }
    var path: String { storage.path }
    /// `:method`, `:path` (never indexed) and `content-type`, encoded once per job.
    var sharedFields: HTTP2HeaderBlock { storage.sharedFields }

    /// Validates and encodes. With `tracking`, a push that is not silent carries each device's message id in
    /// `data` (`mid`).
    public init(
        _ n: VolleyCore.Notification, projectID: String, validateOnly: Bool = false, tracking: MessageTracking? = nil
    ) throws {
        let tracking = n.isSilent ? nil : tracking
        func tail(_ text: VolleyCore.Notification.LocalizedText) throws -> Tail {
            Tail(try FCMMessage.message(for: n, text: text, tracked: tracking != nil), locateData: tracking != nil)
        }
        let defaultTail = try tail(n.text(variant: nil))
        var variants: [String: Tail] = [:]
        for key in (n.localized ?? [:]).keys { variants[key] = try tail(n.text(variant: key)) }
        let path = "/v1/projects/\(projectID)/messages:send"
        var shared = HTTP2HeaderBlock()
        shared.append(":method", "POST")
        shared.append(":path", path, sensitive: true)
        shared.append("content-type", "application/json")
        storage = Storage(
            payloadBytes: ([defaultTail.bytes.count] + variants.values.map(\.bytes.count)).max() ?? 0,
            validateOnly: validateOnly, defaultTail: defaultTail, variantTails: variants, notification: n,
            path: path, sharedFields: shared, tracking: tracking)
    }

    /// Throws what `init` throws for `n`, without encoding: every language variant's message is built, which is
    /// where a notification is refused, and neither the bytes nor the header fields are made. The API's check of a
    /// job at the door runs this, so it refuses exactly what a worker would. `tracked`: as `init` with `tracking`.
    public static func check(_ n: VolleyCore.Notification, tracked: Bool = false) throws {
        _ = try FCMMessage.message(for: n, text: n.text(variant: nil), tracked: tracked)
        for key in (n.localized ?? [:]).keys {
            _ = try FCMMessage.message(for: n, text: n.text(variant: key), tracked: tracked)
        }
    }

    private init(storage: Storage) { self.storage = storage }

    /// The message `tail` for one device, with the job's path, shared fields and message ids.
    private func personalized(tail: Tail) -> FCMPreparedNotification {
        let s = storage
        return FCMPreparedNotification(
            storage: Storage(
                payloadBytes: tail.bytes.count, validateOnly: s.validateOnly, defaultTail: tail, variantTails: [:],
                notification: s.notification, path: s.path, sharedFields: s.sharedFields, tracking: s.tracking))
    }

    /// One device's message: a data message with the job's delivery options, or the job's notification with that
    /// recipient's texts in the device's language.
    public func personalized(for device: Device, with payload: PersonalPayload) throws(PersonalPayloadError)
        -> FCMPreparedNotification
    {
        let message: [String: JSONValue]
        let tracked = storage.tracking != nil
        switch payload {
        case .fcmData(let data):
            message = try FCMMessage.dataMessage(data, options: storage.notification, tracked: tracked)
        case .notification(var n):
            // A recipient's own notification shows under the job's identity, as the shared one does.
            if n.resendCollapseId == nil { n.resendCollapseId = storage.notification.resendCollapseId }
            do {
                message = try FCMMessage.message(
                    for: n, text: n.text(variant: n.variantKey(for: device.locale)), tracked: tracked)
            } catch let e as NotificationError {
                throw PersonalPayloadError(e.reason.rawValue, e.message)
            } catch {
                throw PersonalPayloadError("INVALID_ARGUMENT", "\(error)")
            }
        case .apns:
            throw PersonalPayloadError("INVALID_ARGUMENT", "an APNs payload cannot be sent to an Android device")
        }
        return personalized(tail: Tail(message, locateData: tracked))
    }

    /// The JSON body for one device.
    public func body(token: DeviceToken, locale: String?) -> [UInt8] {
        let s = storage
        var whole = s.defaultTail
        if !s.variantTails.isEmpty, let key = s.notification.variantKey(for: locale), let v = s.variantTails[key] {
            whole = v
        }
        let tail = whole.bytes
        var out: [UInt8] = []
        out.reserveCapacity(tail.count + token.rawValue.utf8.count + 48 + (s.tracking == nil ? 0 : 40))
        out.append(contentsOf: #"{"message":{"token":""#.utf8)
        appendJSONStringContent(token.rawValue, to: &out)
        out.append(UInt8(ascii: "\""))
        if let tracking = s.tracking {
            if let at = whole.dataAt {
                // The id first among `data`'s members, the message otherwise as encoded.
                out.append(UInt8(ascii: ","))
                out.append(contentsOf: tail[..<at])
                out.append(contentsOf: #""mid":""#.utf8)
                tracking.appendMessageID(for: token, to: &out)
                out.append(UInt8(ascii: "\""))
                if tail[at] != UInt8(ascii: "}") { out.append(UInt8(ascii: ",")) }
                out.append(contentsOf: tail[at...])
            } else {
                out.append(contentsOf: #","data":{"mid":""#.utf8)
                tracking.appendMessageID(for: token, to: &out)
                out.append(contentsOf: #""}"#.utf8)
                if tail.isEmpty {
                    out.append(UInt8(ascii: "}"))
                } else {
                    out.append(UInt8(ascii: ","))
                    out.append(contentsOf: tail)
                }
            }
        } else if tail.isEmpty {
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
