/// The message ids of one tracked delivery job: every visible push it sends carries one under the key `mid` (at the
/// APNs payload's root, in FCM's `data`), and the app reports what the user did with the push by that id
/// (`POST /v1/interactions`), so Volley counts each interaction once per device.
///
/// A message id is `<campaign>.<device>`, 23 characters: base64url (RFC 4648 §5, unpadded) of 8 bytes, a dot, and
/// base64url of 8 more.
/// - `campaign` names the delivery job in its org: the first 8 bytes of SipHash-2-4-128 of `<org>␟<job>` (U+001F
///   between) under Volley's fixed key. The worker maps it back to the job whose counts it feeds
///   (`volley:mid:{<org>}:<campaign>`), once per delivery.
/// - `device` names the device in that job: the first 8 bytes of SipHash-2-4-128 of the device token, keyed by the
///   whole 16-byte digest of the campaign, so the same device has unrelated ids in different jobs.
///
/// Per device the id costs one SipHash over the token and 11 characters of base64, no allocation of its own. It is an
/// identifier, not a secret: it tells nothing the app does not know, and anyone who knows the org, the job id and
/// the token can compute it.
public struct MessageTracking: Sendable, Hashable {
    /// Characters of each half.
    public static let halfLength = 11
    /// Characters of a message id.
    public static let messageIDLength = 2 * halfLength + 1
    /// What a message id adds to an APNs payload: the member `"mid":"<id>",` in front of the others.
    public static let apnsPayloadBytes = #""mid":"","#.utf8.count + messageIDLength
    /// What it adds to FCM's `data` as FCM counts the 4 KB (keys and values): `mid` and the id.
    public static let fcmDataBytes = 3 + messageIDLength

    /// The campaign half, as its 11 ASCII bytes.
    let campaignBytes: [UInt8]
    /// The key of the device half: the campaign's whole digest.
    let deviceKey: SipHashKey

    /// The campaign half: what `volley:mid:{<org>}:<campaign>` is keyed by.
    public var campaign: String { String(decoding: campaignBytes, as: UTF8.self) }

    /// The message ids of `job`'s pushes in `org`.
    public init(org: OrgID, job: JobID) {
        var message = Array(org.rawValue.utf8)
        message.append(0x1F)
        message.append(contentsOf: job.rawValue.utf8)
        var digest = [UInt8](repeating: 0, count: 16)
        message.withUnsafeBytes { m in digest.withUnsafeMutableBytes { SipHash128.hash(m, key: Self.key, into: $0) } }
        var campaign: [UInt8] = []
        campaign.reserveCapacity(Self.halfLength)
        Base64.append(digest[0..<8], alphabet: .url, padded: false, to: &campaign)
        campaignBytes = campaign
        deviceKey = digest.withUnsafeBytes { SipHashKey($0) }
    }

    /// Volley's fixed key for the campaign half (the ASCII bytes of `volley.mid.v1.k`, NUL-terminated): a constant,
    /// so every worker and every version names a job the same way.
    static let key = Array("volley.mid.v1.k\0".utf8).withUnsafeBytes { SipHashKey($0) }

    /// Appends the message id of the device with `token` to `out` (23 ASCII bytes).
    public func appendMessageID(for token: DeviceToken, to out: inout [UInt8]) {
        out.append(contentsOf: campaignBytes)
        out.append(UInt8(ascii: "."))
        var digest: (UInt64, UInt64) = (0, 0)
        var text = token.rawValue
        text.withUTF8 { t in
            withUnsafeMutableBytes(of: &digest) { SipHash128.hash(UnsafeRawBufferPointer(t), key: deviceKey, into: $0) }
        }
        withUnsafeBytes(of: &digest) { Base64.append($0[0..<8], alphabet: .url, padded: false, to: &out) }
    }

    /// The collapse identity of a job that set none (`Notification.resendCollapseId`): `volley-` and the campaign
    /// half, 18 ASCII bytes (APNs allows 64). It names the job in its org, so a resent request replaces its own first
    /// copy on the device and nothing else: the device is implicit (the identity acts on one device's tray), and
    /// jobs differ by their half (a collision needs two of an org's jobs to share 64 bits of SipHash). A shard
    /// takes its campaign's (`org`, parent job): the campaign shows under one identity, however it was split.
    public static func resendCollapseID(org: OrgID, job: JobID) -> String {
        "volley-" + MessageTracking(org: org, job: job).campaign
    }

    /// The message id of the device with `token`.
    public func messageID(for token: DeviceToken) -> String {
        var out: [UInt8] = []
        out.reserveCapacity(Self.messageIDLength)
        appendMessageID(for: token, to: &out)
        return String(decoding: out, as: UTF8.self)
    }
}

/// A message id as an app reports it: its campaign and device halves, checked for their form (not for being known:
/// the store says whether a campaign is).
public struct MessageID: Sendable, Hashable, CustomStringConvertible {
    public let campaign: String
    public let device: String

    /// nil unless `text` is 11 base64url characters, a dot and 11 more.
    public init?(_ text: String) {
        let bytes = Array(text.utf8)
        let half = MessageTracking.halfLength
        guard bytes.count == MessageTracking.messageIDLength, bytes[half] == UInt8(ascii: ".") else { return nil }
        for (i, c) in bytes.enumerated() where i != half {
            switch c {
            case UInt8(ascii: "A")...UInt8(ascii: "Z"), UInt8(ascii: "a")...UInt8(ascii: "z"),
                UInt8(ascii: "0")...UInt8(ascii: "9"), UInt8(ascii: "-"), UInt8(ascii: "_"):
                continue
            default: return nil
            }
        }
        campaign = String(decoding: bytes[0..<half], as: UTF8.self)
        device = String(decoding: bytes[(half + 1)...], as: UTF8.self)
    }

    public var description: String { "\(campaign).\(device)" }
}
