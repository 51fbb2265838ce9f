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

/// A notification encoded once per job for APNs: one payload per language variant and the headers that do
/// not depend on the device. Building a device's request from it costs one SHA-256 (apns-id) and a few
/// small strings; the body bytes are shared, not copied.
public struct APNSPreparedNotification: PreparedNotification {
    public var platform: Platform { .ios }
    /// The largest variant's size.
    public let payloadBytes: Int
    public let pushType: APNSPushType
    public let priority: Int
    public let topic: String
    /// Default payload and per-`localized`-key payloads.
    public let defaultPayload: [UInt8]
    public let variantPayloads: [String: [UInt8]]
    /// topic, push-type, priority, expiration, collapse-id: the same for every device of the job.
    public let sharedHeaders: [HTTP2Header]
    let notification: VolleyCore.Notification
    let jobIDBytes: [UInt8]

    /// Validates and encodes. `now` fixes `apns-expiration` for the job (ttl counts from preparation).
    public init(_ n: VolleyCore.Notification, jobID: JobID, bundleID: String, now: Date) throws {
        // Push type: explicit, else background for a silent push, else alert.
        let pushType: APNSPushType
        if let raw = n.pushType {
            guard let t = APNSPushType(rawValue: raw) else {
                throw NotificationError("InvalidPushType",
                    "pushType \"\(raw)\" is not one of \(APNSPushType.allCases.map(\.rawValue).joined(separator: ", "))")
            }
            pushType = t
        } else if n.isSilent || Self.rawIsSilent(n.apns) {
            pushType = .background
        } else {
            pushType = .alert
        }
        if pushType == .background && n.apns == nil && !n.isSilent {
            throw NotificationError("BadPayload",
                "a background push carries contentAvailable only: remove title, body, sound and badge, or use pushType alert")
        }
        // Priority: 10 alert, 5 background. Apple: a background push with priority 10 is an error.
        let priority: Int
        switch n.priority {
        case .high?:
            if pushType == .background {
                throw NotificationError("BadPriority",
                    "a background (silent) push must be sent with priority normal (apns-priority 5), not high (10)")
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
        if let ttl = n.ttl {
            guard ttl >= 0 else { throw NotificationError("BadExpirationDate", "ttl \(ttl) must be 0 or more seconds") }
            // 0 = deliver once, now or never (APNs does not store it).
            let value = ttl == 0 ? "0" : String(Int(now.timeIntervalSince1970) + ttl)
            headers.append(HTTP2Header("apns-expiration", value))
        }
        if let c = n.collapseId {
            let bytes = c.utf8.count
            guard bytes <= 64 else {
                throw NotificationError("BadCollapseId",
                    "collapseId is \(bytes) bytes, \(bytes - 64) bytes over APNs's 64-byte limit")
            }
            headers.append(HTTP2Header("apns-collapse-id", c))
        }
        let defaultPayload = try APNSPayload.encode(APNSPayload.payload(for: n, text: n.text(variant: nil)))
        try APNSPayload.checkSize(defaultPayload.count, pushType: pushType)
        var variants: [String: [UInt8]] = [:]
        var largest = defaultPayload.count
        if n.apns == nil, let localized = n.localized {
            for key in localized.keys {
                let p = try APNSPayload.encode(APNSPayload.payload(for: n, text: n.text(variant: key)))
                do { try APNSPayload.checkSize(p.count, pushType: pushType) } catch let e as NotificationError {
                    throw NotificationError(e.reason, "localized[\(key)]: \(e.message)")
                }
                variants[key] = p
                largest = max(largest, p.count)
            }
        }
        self.pushType = pushType; self.priority = priority; self.topic = topic
        self.defaultPayload = defaultPayload; self.variantPayloads = variants; self.payloadBytes = largest
        self.sharedHeaders = headers; self.notification = n; self.jobIDBytes = Array(jobID.rawValue.utf8)
    }

    private static func rawIsSilent(_ raw: JSONValue?) -> Bool {
        guard let aps = raw?["aps"]?.objectValue else { return false }
        return aps.count == 1 && aps["content-available"] != nil
    }

    /// The payload for a device's locale (exact, then language, then default).
    public func payload(forLocale locale: String?) -> [UInt8] {
        if variantPayloads.isEmpty || locale == nil { return defaultPayload }
        if let key = notification.variantKey(for: locale), let p = variantPayloads[key] { return p }
        return defaultPayload
    }

    /// The request for one device. `authorization` is "bearer <jwt>" for token auth, nil for certificates.
    public func request(for device: Device, authority: String, authorization: String?) -> HTTP2Request {
        var headers: [HTTP2Header] = []
        headers.reserveCapacity(sharedHeaders.count + 2)
        // Apple: never index authorization (and :path, which the transport sends without indexing).
        if let authorization { headers.append(HTTP2Header("authorization", authorization, sensitive: true)) }
        headers.append(contentsOf: sharedHeaders)
        headers.append(HTTP2Header("apns-id", Self.apnsID(jobID: jobIDBytes, token: device.token.rawValue)))
        return HTTP2Request(method: "POST", authority: authority, path: "/3/device/" + device.token.rawValue,
                            headers: headers, body: payload(forLocale: device.locale))
    }

    @inline(__always) static func hexDigit(_ v: UInt8) -> UInt8 { v < 10 ? 48 + v : 87 + v }

    /// `apns-id`: a UUID derived from (job id, device token) — SHA-256, laid out as UUIDv8 (RFC 9562 §5.8),
    /// lower-case canonical text. The same delivery always carries the same id, so a resend is recognisable.
    public static func apnsID(jobID: JobID, token: DeviceToken) -> String {
        apnsID(jobID: Array(jobID.rawValue.utf8), token: token.rawValue)
    }

    static func apnsID(jobID: [UInt8], token: String) -> String {
        var hasher = SHA256()
        hasher.update(data: jobID)
        hasher.update(data: [0])
        hasher.update(data: Array(token.utf8))
        let digest = hasher.finalize()
        return withUnsafeTemporaryAllocation(of: UInt8.self, capacity: 36) { out in
            var i = 0
            var o = 0
            for byte in digest {
                if i == 16 { break }
                var b = byte
                if i == 6 { b = 0x80 | (b & 0x0F) }        // version 8
                if i == 8 { b = 0x80 | (b & 0x3F) }        // variant 10
                if i == 4 || i == 6 || i == 8 || i == 10 { out[o] = UInt8(ascii: "-"); o += 1 }
                out[o] = hexDigit(b >> 4); out[o + 1] = hexDigit(b & 0x0F); o += 2
                i += 1
            }
            return String(decoding: UnsafeBufferPointer(rebasing: out[0..<36]), as: UTF8.self)
        }
    }
}
