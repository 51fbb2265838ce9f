import Crypto
import Foundation
import VolleyCore
import VolleyHTTP2

/// `apns-push-type` values and the topic suffix Apple requires for each.
public enum APNSPushType: String, Sendable, Hashable, CaseIterable {
    case alert, background, voip, complication, fileprovider, liveactivity, location, mdm, pushtotalk, widgets, controls

    /// Appended to the bundle id in `apns-topic` (Apple, "Sending notification requests to APNs").
    public var topicSuffix: String {
        switch self {
        case .alert, .background, .mdm: ""
        case .voip: ".voip"
        case .complication: ".complication"
        case .fileprovider: ".pushkit.fileprovider"
        case .liveactivity: ".push-type.liveactivity"
        case .location: ".location-query"
        case .pushtotalk: ".voip-ptt"
        case .widgets: ".push-type.widgets"
        case .controls: ".push-type.controls"
        }
    }

    /// The `apns-topic` for a bundle id (the suffix is not doubled when the topic already carries it).
    public func topic(bundleID: String) -> String {
        let s = topicSuffix
        if s.isEmpty || bundleID.hasSuffix(s) { return bundleID }
        return bundleID + s
    }
}

/// A notification encoded once per job for APNs: one payload per language variant and the header fields that
/// do not depend on the device, already encoded for the transport. Building a device's request from it costs
/// one SipHash (apns-id) and one small buffer; the body bytes and shared fields are shared, not copied.
/// A value type over one immutable object, so passing it around (and capturing it per send) is one retain.
///
/// A tracked alert push (`tracking`) carries the device's message id as the payload's first member,
/// `{"mid":"<id>",` followed by the encoded payload after its `{`: per device one more SipHash and one copy of the
/// payload into the request's body, never a second encoding.
public struct APNSPreparedNotification: PreparedNotification {
    final class Storage: Sendable {
        let payloadBytes: Int
        let pushType: APNSPushType
        let priority: Int
        let topic: String
        let defaultPayload: [UInt8]
        let variantPayloads: [String: [UInt8]]
        let sharedHeaders: [HTTP2Header]
        let sharedFields: HTTP2HeaderBlock
        let notification: VolleyCore.Notification
        /// The job's apns-id key: the first 16 bytes of SHA-256(job id), computed once per job.
        let apnsIDKey: SipHashKey
        /// The message ids each device's payload starts with; nil: the payloads go as they are.
        let tracking: MessageTracking?
        init(
            payloadBytes: Int, pushType: APNSPushType, priority: Int, topic: String, defaultPayload: [UInt8],
            variantPayloads: [String: [UInt8]], sharedHeaders: [HTTP2Header], sharedFields: HTTP2HeaderBlock? = nil,
            notification: VolleyCore.Notification, apnsIDKey: SipHashKey, tracking: MessageTracking?
        ) {
            self.payloadBytes = payloadBytes
            self.pushType = pushType
            self.priority = priority
            self.topic = topic
            self.defaultPayload = defaultPayload
            self.variantPayloads = variantPayloads
            self.sharedHeaders = sharedHeaders
            self.sharedFields = sharedFields ?? HTTP2HeaderBlock(sharedHeaders)
            self.notification = notification
            self.apnsIDKey = apnsIDKey
            self.tracking = tracking
        }
    }
    let storage: Storage

    public var platform: Platform { .ios }
    /// The largest variant's size.
    public var payloadBytes: Int { storage.payloadBytes }
    public var pushType: APNSPushType { storage.pushType }
    public var priority: Int { storage.priority }
    public var topic: String { storage.topic }
    /// Default payload and per-`localized`-key payloads.
    public var defaultPayload: [UInt8] { storage.defaultPayload }
    public var variantPayloads: [String: [UInt8]] { storage.variantPayloads }
    /// topic, push-type, priority, expiration, collapse-id: the same for every device of the job.
    public var sharedHeaders: [HTTP2Header] { storage.sharedHeaders }
    /// `sharedHeaders`, encoded once for the transport.
    public var sharedFields: HTTP2HeaderBlock { storage.sharedFields }
    var notification: VolleyCore.Notification { storage.notification }

    /// Validates and encodes. `now` fixes `apns-expiration` for the job (ttl counts from preparation). With
    /// `tracking`, an alert push carries each device's message id (`mid`); other push types (background, VoIP, live
    /// activities …) are not something a person opens, and carry none.
    public init(
        _ n: VolleyCore.Notification, jobID: JobID, bundleID: String, now: Date, tracking: MessageTracking? = nil
    ) throws {
        // Push type: explicit, else background for a silent push, else alert.
        let pushType: APNSPushType
        if let raw = n.pushType {
            guard let t = APNSPushType(rawValue: raw) else {
                throw NotificationError(
                    "InvalidPushType",
                    "pushType \"\(raw)\" is not one of "
                        + APNSPushType.allCases.map(\.rawValue).joined(separator: ", "),
                    field: "pushType")
            }
            pushType = t
        } else if n.isSilent || Self.rawIsSilent(n.apns) {
            pushType = .background
        } else {
            pushType = .alert
        }
        if pushType == .background && n.apns == nil && !n.isSilent {
            throw NotificationError(
                "BadPayload",
                "a background push carries contentAvailable only: remove title, body, sound and badge, or use "
                    + "pushType alert", field: "pushType")
        }
        // Priority: 10 alert, 5 background. Apple: a background push with priority 10 is an error.
        let priority: Int
        switch n.priority {
        case .high?:
            if pushType == .background {
                throw NotificationError(
                    "BadPriority",
                    "a background (silent) push must be sent with priority normal (apns-priority 5), not high (10)",
                    field: "priority")
            }
            priority = 10
        case .normal?: priority = 5
        case nil: priority = pushType == .background ? 5 : 10
        }
        var headers: [HTTP2Header] = []
        let topic = pushType.topic(bundleID: bundleID)
        headers.append(HTTP2Header("apns-topic", topic))
        headers.append(HTTP2Header("apns-push-type", pushType.rawValue))
        headers.append(HTTP2Header("apns-priority", String(priority)))
        // Always sent: without it APNs keeps the notification as long as it likes; a job without `ttl` gets
        // OneSignal's 3 days. 0 = deliver once, now or never (APNs does not store it).
        let ttl = try n.effectiveTTL(reason: "BadExpirationDate")
        headers.append(HTTP2Header("apns-expiration", ttl == 0 ? "0" : String(Int(now.timeIntervalSince1970) + ttl)))
        // The job's collapse id, else the worker's own (a resend after an unanswered write then replaces the
        // first copy on the device): the same for every device of the job, so it rides in the shared fields.
        if let c = n.displayCollapseId {
            let bytes = c.utf8.count
            guard bytes <= 64 else {
                throw NotificationError(
                    "BadCollapseId",
                    "collapseId is \(bytes) bytes, \(bytes - 64) bytes over APNs's 64-byte limit", field: "collapseId")
            }
            headers.append(HTTP2Header("apns-collapse-id", c))
        }
        let tracking = pushType == .alert ? tracking : nil
        let midBytes = tracking == nil ? 0 : MessageTracking.apnsPayloadBytes
        let defaultPayload = try APNSPayload.encode(APNSPayload.payload(for: n, text: n.text(variant: nil)))
        try APNSPayload.checkSize(defaultPayload.count + midBytes, pushType: pushType)
        var variants: [String: [UInt8]] = [:]
        var largest = defaultPayload.count
        if n.apns == nil, let localized = n.localized {
            for key in localized.keys {
                let p = try APNSPayload.encode(APNSPayload.payload(for: n, text: n.text(variant: key)))
                do {
                    try APNSPayload.checkSize(p.count + midBytes, pushType: pushType)
                } catch let e as NotificationError {
                    throw NotificationError(e.reason, "localized[\(key)]: \(e.message)", field: "localized.\(key)")
                }
                variants[key] = p
                largest = max(largest, p.count)
            }
        }
        storage = Storage(
            payloadBytes: largest + midBytes, pushType: pushType, priority: priority, topic: topic,
            defaultPayload: defaultPayload, variantPayloads: variants, sharedHeaders: headers,
            notification: n, apnsIDKey: Self.apnsIDKey(jobID: jobID), tracking: tracking)
    }

    private init(storage: Storage) { self.storage = storage }

    /// The job's notification with one device's own payload: the same headers, apns-id key and message ids,
    /// `payload` as the body of every language (a personal payload is already in the device's language).
    func personalized(payload: [UInt8]) throws(PersonalPayloadError) -> APNSPreparedNotification {
        let s = storage
        let midBytes = s.tracking == nil ? 0 : MessageTracking.apnsPayloadBytes
        do {
            try APNSPayload.checkSize(payload.count + midBytes, pushType: s.pushType)
        } catch let e as NotificationError {
            throw PersonalPayloadError(e.reason.rawValue, e.message)
        } catch {
            throw PersonalPayloadError("PayloadTooLarge", "\(error)")
        }
        return APNSPreparedNotification(
            storage: Storage(
                payloadBytes: payload.count + midBytes, pushType: s.pushType, priority: s.priority, topic: s.topic,
                defaultPayload: payload, variantPayloads: [:], sharedHeaders: s.sharedHeaders,
                sharedFields: s.sharedFields, notification: s.notification, apnsIDKey: s.apnsIDKey,
                tracking: s.tracking))
    }

    /// One device's payload: a whole APNs payload, or the job's notification with that recipient's texts, encoded
    /// in the device's language.
    public func personalized(for device: Device, with payload: PersonalPayload) throws(PersonalPayloadError)
        -> APNSPreparedNotification
    {
        switch payload {
        case .apns(let bytes): return try personalized(payload: bytes)
        case .notification(let n):
            let bytes: [UInt8]
            do {
                bytes = try APNSPayload.encode(
                    APNSPayload.payload(for: n, text: n.text(variant: n.variantKey(for: device.locale))))
            } catch let e as NotificationError {
                throw PersonalPayloadError(e.reason.rawValue, e.message)
            } catch {
                throw PersonalPayloadError("BadPayload", "\(error)")
            }
            return try personalized(payload: bytes)
        case .fcmData:
            throw PersonalPayloadError("BadPayload", "an FCM data payload cannot be sent to an iOS device")
        }
    }

    private static func rawIsSilent(_ raw: JSONValue?) -> Bool { VolleyCore.Notification.apnsPayloadIsSilent(raw) }

    /// The body for one device: the payload of its locale, with its message id in front when the push is tracked.
    public func body(for device: Device) -> [UInt8] {
        let payload = payload(forLocale: device.locale)
        guard let tracking = storage.tracking else { return payload }
        return Self.payload(payload, withMessageID: tracking, token: device.token)
    }

    /// `payload` (a JSON object's bytes) with `"mid":"<id>"` as its first member; the rest byte for byte.
    static func payload(_ payload: [UInt8], withMessageID tracking: MessageTracking, token: DeviceToken) -> [UInt8] {
        guard payload.first == UInt8(ascii: "{") else { return payload }
        var out: [UInt8] = []
        out.reserveCapacity(payload.count + MessageTracking.apnsPayloadBytes)
        out.append(contentsOf: #"{"mid":""#.utf8)
        tracking.appendMessageID(for: token, to: &out)
        out.append(UInt8(ascii: "\""))
        // An object with members (every payload Volley makes has `aps`) goes on after a comma.
        if payload.count > 2 { out.append(UInt8(ascii: ",")) }
        out.append(contentsOf: payload.dropFirst())
        return out
    }

    /// The payload for a device's locale (exact, then language, then default).
    public func payload(forLocale locale: String?) -> [UInt8] {
        let s = storage
        if s.variantPayloads.isEmpty || locale == nil { return s.defaultPayload }
        if let key = s.notification.variantKey(for: locale), let p = s.variantPayloads[key] { return p }
        return s.defaultPayload
    }

    /// The request for one device. `authorization` is "bearer <jwt>" for token auth, nil for certificates.
    /// (The provider keeps the prefix per endpoint and token and calls `request(for:prefix:)`.)
    public func request(for device: Device, authority: String, authorization: String?) -> HTTP2Request {
        request(for: device, prefix: Self.requestPrefix(authority: authority, authorization: authorization))
    }

    /// `requestPrefix` for an `authorization` value given as a String ("bearer <jwt>"; nil for certificate auth).
    public static func requestPrefix(authority: String, authorization: String?) -> HTTP2HeaderBlock {
        guard var authorization else { return requestPrefix(authority: authority, authorizationBytes: nil) }
        return authorization.withUTF8 { requestPrefix(authority: authority, authorizationBytes: $0) }
    }

    /// The fields every request to one endpoint under one provider token starts with: `:method`, `:authority`,
    /// `authorization` (never indexed: a secret). The provider encodes them once per (endpoint, token).
    public static func requestPrefix(authority: String, authorizationBytes: UnsafeBufferPointer<UInt8>?)
        -> HTTP2HeaderBlock
    {
        var fields = HTTP2HeaderBlock(
            reservingBytes: 7 + 4 + 10 + authority.utf8.count + 13 + (authorizationBytes?.count ?? 0),
            fields: 3)
        fields.append(":method", "POST")
        fields.append(":authority", authority)
        if let authorizationBytes { fields.append("authorization", bytes: authorizationBytes, sensitive: true) }
        return fields
    }

    /// Per device: one buffer with `prefix` (see `requestPrefix`), `:path` and `apns-id`; the job's fields and
    /// payload are shared. `:path` and `apns-id` change per request: sent never-indexed (indexing per-request
    /// values only churns the HPACK table).
    public func request(for device: Device, prefix: HTTP2HeaderBlock) -> HTTP2Request {
        let token = device.token.rawValue
        var fields = HTTP2HeaderBlock(
            reservingBytes: prefix.encodedByteCount + 5 + 10 + token.utf8.count + 7 + 36,
            fields: prefix.count + 2)
        fields.append(contentsOf: prefix)
        fields.append(":path", "/3/device/", token, sensitive: true)
        Self.withAPNSID(key: storage.apnsIDKey, token: token) { fields.append("apns-id", bytes: $0, sensitive: true) }
        return HTTP2Request(sharedFields: storage.sharedFields, fields: fields, body: body(for: device))
    }

    /// `apns-id`: a UUID derived from (job id, device token), so the same delivery always carries the same id and
    /// a resend is recognisable. Per job, a key = the first 16 bytes of SHA-256(job id); per device, SipHash-2-4
    /// (128-bit output) of the token under that key — a keyed PRF, about a tenth of a SHA-256 per device. The 16
    /// bytes are laid out as UUIDv8 (RFC 9562 §5.8), lower-case canonical text.
    public static func apnsID(jobID: JobID, token: DeviceToken) -> String {
        withAPNSID(key: apnsIDKey(jobID: jobID), token: token.rawValue) {
            String(decoding: $0, as: UTF8.self)
        }
    }

    static func apnsIDKey(jobID: JobID) -> SipHashKey {
        SHA256.hash(data: Array(jobID.rawValue.utf8)).withUnsafeBytes { SipHashKey($0) }
    }

    /// Formats the apns-id for (job key, token) into a 36-byte stack buffer, valid during `body`.
    static func withAPNSID<R>(key: SipHashKey, token: String, _ body: (UnsafeBufferPointer<UInt8>) -> R) -> R {
        var digest: (UInt64, UInt64) = (0, 0)
        var token = token
        token.withUTF8 { t in
            withUnsafeMutableBytes(of: &digest) { SipHash128.hash(UnsafeRawBufferPointer(t), key: key, into: $0) }
        }
        return withUnsafeTemporaryAllocation(of: UInt8.self, capacity: 36) { out in
            withUnsafeBytes(of: &digest) { writeUUIDText($0, version: 8, into: out) }
            return body(UnsafeBufferPointer(rebasing: out[0..<36]))
        }
    }
}
