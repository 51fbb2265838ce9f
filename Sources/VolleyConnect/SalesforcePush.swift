import CryptoExtras
import VolleyCore

/// What one recipient's Notification Builder push says: the custom notification, that user's inbox entry and
/// unseen count, and the app's full-content setting.
public struct SalesforcePushContent: Sendable, Hashable {
    /// `oid`: the org the notification comes from.
    public var orgID: String
    /// `uid`: the recipient.
    public var userID: String
    /// `nid`: the id of this user's inbox entry.
    public var notificationID: String
    /// `sid`: the record the notification is about (`targetId`).
    public var targetID: String
    /// `cid`: the Experience Cloud site, when the notification names one.
    public var siteID: String?
    /// `notifType`: the custom notification type's id.
    public var typeID: String
    public var title: String
    public var body: String
    /// The connected app's `fullContentPushNotifications` setting.
    public var fullContent: Bool
    /// The user's unseen count right after this notification is stored.
    public var badge: Int
    /// The job's sound; nil plays `default`.
    public var sound: String?
    /// Seconds since 1970-01-01 UTC (Android's `timestamp`).
    public var timestamp: Int64
    /// The notification's `data`: keys for the app, beside the custom keys (none of them one of the payload's own,
    /// `SalesforcePayloadKeys.reserved`). In clear at the APNs payload's root (JSON values) and in FCM `data`
    /// (strings: a string as it is, null as "", anything else as its JSON); inside the encrypted `content` when
    /// the device has a key.
    public var data: [String: JSONValue]?
    /// The notification's `url`, as the key `url` beside `data` (over a `url` in `data`).
    public var url: String?
    /// APNs `aps.thread-id`; on Android the key `threadId` for the app (as Volley's FCM data carries it), inside
    /// the encrypted content when the device has a key.
    public var threadID: String?
    /// APNs `aps.category` (the actions the app registered); not sent to Android.
    public var category: String?
    /// APNs `aps.interruption-level`; not sent to Android.
    public var interruptionLevel: String?

    public init(
        orgID: String, userID: String, notificationID: String, targetID: String, siteID: String? = nil,
        typeID: String, title: String, body: String, fullContent: Bool = false, badge: Int, sound: String? = nil,
        timestamp: Int64
    ) {
        self.orgID = orgID
        self.userID = userID
        self.notificationID = notificationID
        self.targetID = targetID
        self.siteID = siteID
        self.typeID = typeID
        self.title = title
        self.body = body
        self.fullContent = fullContent
        self.badge = badge
        self.sound = sound
        self.timestamp = timestamp
    }

    /// `alertTitle`: the title with full content, else empty (the guide's Encrypted Content Keys tables).
    var alertTitle: String { fullContent ? title : "" }
    /// `alertBody`: the body with full content, else the title.
    var alertBody: String { fullContent ? body : title }
}

/// One recipient's push, ready for the provider.
public struct SalesforcePush: Sendable, Hashable {
    public enum Payload: Sendable, Hashable {
        /// The whole APNs payload (compact JSON, keys sorted).
        case apns([UInt8])
        /// FCM's `data`: every value a string.
        case fcmData([String: String])
    }

    public var payload: Payload
    /// True when `secret` and `content` carry the custom keys.
    public var encrypted: Bool
    /// How many of `alertBody` and `alertTitle` were shortened to fit the provider's limit (0, 1 or 2).
    public var trimmedFields: Int
    /// UTF-8 bytes cut from them (a title cut once counts once, wherever it travels).
    public var trimmedBytes: Int
    /// The payload's size as the limit counts it: APNs the whole payload, FCM the keys and values of `data`.
    public var bytes: Int
}

/// A push that cannot be built. Its message names no content and no key material.
public struct SalesforcePushError: Error, Sendable, Hashable, CustomStringConvertible {
    public var message: String
    public init(message: String) { self.message = message }
    public var description: String { message }
}

/// The Salesforce Notification Builder push for one recipient and one device, as the Mobile Notifications
/// Implementation Guide lays it out ("iOS Custom Push Payload Content", "Android Custom Push Payload Content") and
/// the Mobile SDKs decrypt it.
///
/// In clear (a device without a key):
/// - iOS: `aps` {`alert` {`title`: `alertTitle`, `body`: `alertBody`}, `badge`, `sound`} and the custom keys at the
///   top level: `oid`, `uid`, `nid`, `type` (-1), `sid`, `cid` (with a site), `notifType`, `alertTitle`,
///   `alertBody`.
/// - Android: the same custom keys in FCM `data`, plus `badge`, `timestamp` and `alert` (always the title); every
///   value a string.
///
/// Encrypted (a device with a `DeviceEncryptionKey`): 32 fresh bytes from the system CSPRNG (`getrandom`), the
/// first 16 an AES-128 key and the last 16 the IV, exactly as both SDKs split the decrypted secret
/// (`subdataWithRange:NSMakeRange(0, 16)` / `(16, 16)` in `SFSDKPushNotificationDecryption.m`;
/// `System.arraycopy(symmetricKey, 0, key, 0, 16)` / `(…, 16, iv, 0, 16)` in `PushNotificationDecryptor.java`).
/// `secret` is base64 (standard alphabet, padded: `initWithBase64EncodedString:options:0` and Android's
/// `Base64.decode` both take it) of those 32 bytes RSA-encrypted with the device's padding; `content` is base64 of
/// AES-128-CBC with PKCS #7 padding (iOS `kCCOptionPKCS7Padding`, Android `AES/CBC/PKCS5Padding`) over the compact
/// JSON object of the custom keys (Android's also holds `badge`, `timestamp` and `alert`). Then:
/// - iOS: `aps` {`alert` {`title`: "", `body`: the title}, `badge`, `mutable-content`: 1, `sound`}, `encrypted`:
///   true, `secret`, `content`. The SDK's extension refuses a payload whose `aps.alert` lacks a string `title` and
///   `body`, merges the decrypted keys into `userInfo` and shows `alertTitle` and `alertBody`; when decryption
///   fails the extension shows what `aps.alert` holds, so that is the title alone, as the guide's table says.
/// - Android: `data` {`encrypted`: "true", `secret`, `content`}; the SDK replaces `content` with the decrypted JSON
///   text and hands the map to the app, or hands it on unchanged when decryption fails.
///
/// Nothing else of the notification travels in clear. Numbers (`type`, `badge`, `timestamp`) are JSON numbers in
/// the APNs payload and in `content`, strings in clear FCM `data`.
///
/// Fit: APNs takes 4,096 bytes of payload, FCM 4,096 bytes of `data` (keys and values). A push over the limit has
/// `alertBody` shortened first, then the title (`alertTitle` and the title's copies in `aps.alert` and `alert`),
/// on grapheme boundaries, to the longest text that fits; the sizes are computed before anything is encrypted, so
/// each push costs one RSA operation and one AES pass. A push that does not fit with both texts empty is an error.
///
/// A tracked push also carries its message id (`mid`), outside the encrypted part: at the APNs payload's root and in
/// FCM's `data`, beside `encrypted`, `secret` and `content`, where the app reads it whether or not it decrypts (an id
/// says nothing of the notification). The provider adds it per device; `reserve` keeps room for it in the fit.
public enum SalesforcePushBuilder {
    public static let apnsMaxBytes = 4096
    public static let fcmMaxDataBytes = 4096

    /// The push of `content` to a device on `platform`, encrypted when the device has a key (which must be for
    /// the same platform). `reserve`: bytes of the limit the provider adds to the push afterwards (its message id).
    public static func build(
        _ content: SalesforcePushContent, platform: Platform, key: DeviceEncryptionKey? = nil, reserve: Int = 0
    ) throws(SalesforcePushError) -> SalesforcePush {
        if let key, key.platform != platform {
            throw SalesforcePushError(message: "the device key is for \(key.platform), the device is \(platform)")
        }
        let limit = (platform == .ios ? apnsMaxBytes : fcmMaxDataBytes) - reserve
        let texts = Texts(content)
        let extras = extras(content, platform: platform)
        let secretBytes = key.map { base64Length($0.secretBytes) } ?? 0
        // The custom keys of the untrimmed push, written once: what nearly every push encrypts.
        let fullCut = Cut(alertBody: texts.alertBody.utf8.count, title: texts.title.utf8.count)
        let fullCustomKeys =
            key == nil ? [] : customKeys(content, texts.cut(fullCut), platform: platform, extras: extras)
        func customKeysLength(_ cut: Cut) -> Int {
            cut == fullCut
                ? fullCustomKeys.count
                : customKeys(content, texts.cut(cut), platform: platform, extras: extras).count
        }
        func size(_ cut: Cut) -> Int {
            let t = texts.cut(cut)
            switch (platform, key != nil) {
            case (.ios, false): return iosClear(content, t, extras: extras).count
            case (.android, false):
                return androidClearData(content, t, extras: extras).reduce(0) {
                    $0 + $1.key.utf8.count + $1.value.utf8.count
                }
            case (.ios, true):
                let contentBytes = base64Length(cbcLength(customKeysLength(cut)))
                return iosEncrypted(content, t, secret: [], content: []).count + secretBytes + contentBytes
            case (.android, true):
                let contentBytes = base64Length(cbcLength(customKeysLength(cut)))
                return "encrypted".utf8.count + "true".utf8.count + "secret".utf8.count + secretBytes
                    + "content".utf8.count + contentBytes
            }
        }
        let (cut, bytes) = try fit(texts, limit: limit, size: size)
        let t = texts.cut(cut)
        let payload: SalesforcePush.Payload
        if let key {
            let json = cut == fullCut ? fullCustomKeys : customKeys(content, t, platform: platform, extras: extras)
            let (secret, ciphertext) = try encrypt(json, key: key)
            switch platform {
            case .ios: payload = .apns(iosEncrypted(content, t, secret: secret, content: ciphertext))
            case .android:
                payload = .fcmData([
                    "encrypted": "true",
                    "secret": String(decoding: base64(secret), as: UTF8.self),
                    "content": String(decoding: base64(ciphertext), as: UTF8.self),
                ])
            }
        } else {
            switch platform {
            case .ios: payload = .apns(iosClear(content, t, extras: extras))
            case .android: payload = .fcmData(androidClearData(content, t, extras: extras))
            }
        }
        return SalesforcePush(
            payload: payload, encrypted: key != nil, trimmedFields: cut.fields(texts),
            trimmedBytes: cut.bytes(texts), bytes: bytes)
    }

    // MARK: - Fit

    /// How much of each text is kept, in UTF-8 bytes.
    struct Cut: Equatable {
        var alertBody: Int
        var title: Int

        func fields(_ t: Texts) -> Int {
            (alertBody < t.alertBody.utf8.count ? 1 : 0) + (title < t.title.utf8.count ? 1 : 0)
        }
        func bytes(_ t: Texts) -> Int { (t.alertBody.utf8.count - alertBody) + (t.title.utf8.count - title) }
    }

    /// The texts that may be shortened: `alertBody`'s value, and the title with its copies.
    struct Texts {
        var alertBody: String
        var title: String
        var fullContent: Bool

        init(_ c: SalesforcePushContent) {
            alertBody = c.alertBody
            title = c.title
            fullContent = c.fullContent
        }

        /// The texts as a cut leaves them.
        func cut(_ cut: Cut) -> Cutted {
            let body = prefix(alertBody, cut.alertBody)
            let title = prefix(title, cut.title)
            return Cutted(alertBody: body, alertTitle: fullContent ? title : "", title: title)
        }

        private func prefix(_ s: String, _ n: Int) -> String {
            n >= s.utf8.count ? s : String(Substring(s.utf8.prefix(n)))
        }
    }

    /// The texts a payload is written with.
    struct Cutted {
        var alertBody: String
        var alertTitle: String
        /// The title as `alert` (Android) and `aps.alert.body` (encrypted iOS) carry it.
        var title: String
    }

    /// The longest `alertBody`, then the longest title, that fit: binary searches over grapheme boundaries, since a
    /// payload only grows with a longer text.
    static func fit(_ texts: Texts, limit: Int, size: (Cut) -> Int) throws(SalesforcePushError) -> (Cut, Int) {
        let full = Cut(alertBody: texts.alertBody.utf8.count, title: texts.title.utf8.count)
        let fullSize = size(full)
        if fullSize <= limit { return (full, fullSize) }
        let bodyCuts = boundaries(texts.alertBody)
        if let (n, bytes) = longest(bodyCuts, fits: { size(Cut(alertBody: $0, title: full.title)) }, limit: limit) {
            return (Cut(alertBody: n, title: full.title), bytes)
        }
        let titleCuts = boundaries(texts.title)
        if let (n, bytes) = longest(titleCuts, fits: { size(Cut(alertBody: 0, title: $0)) }, limit: limit) {
            return (Cut(alertBody: 0, title: n), bytes)
        }
        throw SalesforcePushError(
            message: "the push is over the \(limit)-byte limit even with alertBody and alertTitle empty")
    }

    /// The UTF-8 offsets at which `s` may be cut without splitting a character, from 0 to its length.
    static func boundaries(_ s: String) -> [Int] {
        var out = [0]
        var offset = 0
        for c in s {
            offset += c.utf8.count
            out.append(offset)
        }
        return out
    }

    private static func longest(_ cuts: [Int], fits size: (Int) -> Int, limit: Int) -> (Int, Int)? {
        var lo = 0
        var hi = cuts.count - 1
        var best: (Int, Int)?
        while lo <= hi {
            let mid = (lo + hi) / 2
            let s = size(cuts[mid])
            if s <= limit {
                best = (cuts[mid], s)
                lo = mid + 1
            } else {
                hi = mid - 1
            }
        }
        return best
    }

    // MARK: - Payloads (keys written in sorted order, as JSONValue.encoded() writes them)

    /// The keys for the app a push carries beside the custom keys, sorted: the notification's `data`, `url`, and on
    /// Android `threadId` (iOS has `aps.thread-id`). None of the payload's own keys (refused at the door; skipped
    /// here, so a custom key is never written twice). Empty, without allocating, for a notification with none.
    static func extras(_ c: SalesforcePushContent, platform: Platform) -> [(key: String, value: JSONValue)] {
        let thread = platform == .android ? c.threadID : nil
        if c.data?.isEmpty != false && c.url == nil && thread == nil { return [] }
        var all = c.data ?? [:]
        if let url = c.url { all["url"] = .string(url) }
        if let thread, all["threadId"] == nil { all["threadId"] = .string(thread) }
        return all.filter { !SalesforcePayloadKeys.reserved.contains($0.key) }.sorted { $0.key < $1.key }
            .map { ($0.key, $0.value) }
    }

    /// A JSON value as FCM `data` carries it: a string as it is, null as "", anything else as its JSON.
    static func dataString(_ v: JSONValue) -> String {
        switch v {
        case .string(let s): return s
        case .null: return ""
        default: return v.jsonText
        }
    }

    /// `aps`'s own keys besides `alert`, `badge`, `mutable-content` and `sound`, in their sorted places.
    private static func apsKeys(_ c: SalesforcePushContent, _ w: inout JSONWriter, after: String) {
        switch after {
        case "badge":
            if let v = c.category { w.string("category", v) }
            if let v = c.interruptionLevel { w.string("interruption-level", v) }
        default:
            if let v = c.threadID { w.string("thread-id", v) }
        }
    }

    /// The custom keys as the compact JSON object `content` encrypts. Android's also holds `alert`, `badge` and
    /// `timestamp` (the guide's Table 6). The keys for the app (`extras`) go in too: nothing of the notification
    /// travels in clear.
    static func customKeys(
        _ c: SalesforcePushContent, _ t: Cutted, platform: Platform, extras: [(key: String, value: JSONValue)] = []
    ) -> [UInt8] {
        var w = JSONWriter(capacity: 256 + t.alertBody.utf8.count + t.title.utf8.count * 2, extras: extras)
        w.open()
        if platform == .android { w.string("alert", t.title) }
        w.string("alertBody", t.alertBody)
        w.string("alertTitle", t.alertTitle)
        if platform == .android { w.number("badge", Int64(c.badge)) }
        if let site = c.siteID { w.string("cid", site) }
        w.string("nid", c.notificationID)
        w.string("notifType", c.typeID)
        w.string("oid", c.orgID)
        w.string("sid", c.targetID)
        if platform == .android { w.number("timestamp", c.timestamp) }
        w.number("type", -1)
        w.string("uid", c.userID)
        w.close()
        return w.out
    }

    static func iosClear(
        _ c: SalesforcePushContent, _ t: Cutted, extras: [(key: String, value: JSONValue)] = []
    ) -> [UInt8] {
        var w = JSONWriter(capacity: 320 + t.alertBody.utf8.count * 2 + t.alertTitle.utf8.count * 2, extras: extras)
        w.open()
        w.string("alertBody", t.alertBody)
        w.string("alertTitle", t.alertTitle)
        w.key("aps")
        w.open()
        w.key("alert")
        w.open()
        w.string("body", t.alertBody)
        w.string("title", t.alertTitle)
        w.close()
        w.number("badge", Int64(c.badge))
        apsKeys(c, &w, after: "badge")
        w.string("sound", c.sound ?? "default")
        apsKeys(c, &w, after: "sound")
        w.close()
        if let site = c.siteID { w.string("cid", site) }
        w.string("nid", c.notificationID)
        w.string("notifType", c.typeID)
        w.string("oid", c.orgID)
        w.string("sid", c.targetID)
        w.number("type", -1)
        w.string("uid", c.userID)
        w.close()
        return w.out
    }

    static func iosEncrypted(_ c: SalesforcePushContent, _ t: Cutted, secret: [UInt8], content: [UInt8]) -> [UInt8] {
        var w = JSONWriter(capacity: 160 + t.title.utf8.count + base64Length(secret.count + content.count) + 4)
        w.open()
        w.key("aps")
        w.open()
        w.key("alert")
        w.open()
        w.string("body", t.title)
        w.string("title", "")
        w.close()
        w.number("badge", Int64(c.badge))
        apsKeys(c, &w, after: "badge")
        w.number("mutable-content", 1)
        w.string("sound", c.sound ?? "default")
        apsKeys(c, &w, after: "sound")
        w.close()
        w.base64("content", content)
        w.key("encrypted")
        w.out.append(contentsOf: "true".utf8)
        w.base64("secret", secret)
        w.close()
        return w.out
    }

    static func androidClearData(
        _ c: SalesforcePushContent, _ t: Cutted, extras: [(key: String, value: JSONValue)] = []
    ) -> [String: String] {
        var data: [String: String] = [
            "alert": t.title, "alertBody": t.alertBody, "alertTitle": t.alertTitle, "badge": String(c.badge),
            "nid": c.notificationID, "notifType": c.typeID, "oid": c.orgID, "sid": c.targetID,
            "timestamp": String(c.timestamp), "type": "-1", "uid": c.userID,
        ]
        if let site = c.siteID { data["cid"] = site }
        for (k, v) in extras { data[k] = dataString(v) }
        return data
    }

    // MARK: - Encryption

    /// One RSA operation and one AES-128-CBC pass: the secret (RSA ciphertext of key ‖ IV) and the ciphertext.
    static func encrypt(_ plaintext: [UInt8], key: DeviceEncryptionKey) throws(SalesforcePushError) -> (
        [UInt8], [UInt8]
    ) {
        // Swift's SystemRandomNumberGenerator is the OS CSPRNG (getrandom(2) on Linux).
        var rng = SystemRandomNumberGenerator()
        var keyAndIV = [UInt8](repeating: 0, count: 32)
        for word in 0..<4 {
            let r: UInt64 = rng.next()
            for b in 0..<8 { keyAndIV[word * 8 + b] = UInt8(truncatingIfNeeded: r >> (8 * b)) }
        }
        let secret = try key.encrypt(keyAndIV)
        do {
            let aesKey = SymmetricKey(data: keyAndIV[0..<16])
            let iv = try AES._CBC.IV(ivBytes: keyAndIV[16..<32])
            let ciphertext = try AES._CBC.encrypt(plaintext, using: aesKey, iv: iv)
            return (secret, Array(ciphertext))
        } catch {
            throw SalesforcePushError(message: "AES encryption of the push content failed")
        }
    }

    /// AES-CBC with PKCS #7 always adds 1 to 16 bytes of padding.
    static func cbcLength(_ n: Int) -> Int { (n / 16 + 1) * 16 }

    /// Standard base64 with padding (RFC 4648 §4), as the Mobile SDKs decode `content` and `secret`.
    static func base64Length(_ n: Int) -> Int { Base64.encodedLength(n, padded: true) }

    static func base64(_ bytes: [UInt8]) -> [UInt8] {
        var out: [UInt8] = []
        Base64.append(bytes, alphabet: .standard, padded: true, to: &out)
        return out
    }
}

/// Compact JSON written straight into bytes; the caller writes keys in sorted order. `extras` (sorted) are written
/// into the outermost object among the caller's keys, each before the first key that sorts after it, their values
/// by the one JSON writer (`JSONValue.append(to:)`).
struct JSONWriter {
    var out: [UInt8] = []
    private var first = true
    private var depth = 0
    private let extras: [(key: String, value: JSONValue)]
    private var nextExtra = 0

    init(capacity: Int, extras: [(key: String, value: JSONValue)] = []) {
        out.reserveCapacity(capacity)
        self.extras = extras
    }

    mutating func open() {
        out.append(UInt8(ascii: "{"))
        first = true
        depth += 1
    }
    mutating func close() {
        if depth == 1 { writeExtras(before: nil) }
        out.append(UInt8(ascii: "}"))
        first = false
        depth -= 1
    }
    mutating func key(_ k: String) {
        if depth == 1 { writeExtras(before: k) }
        comma()
        out.append(UInt8(ascii: "\""))
        out.append(contentsOf: k.utf8)
        out.append(contentsOf: "\":".utf8)
    }
    private mutating func comma() {
        if !first { out.append(UInt8(ascii: ",")) }
        first = false
    }
    /// The extras that sort before `k` (all that are left, for nil).
    private mutating func writeExtras(before k: String?) {
        while nextExtra < extras.count, k.map({ extras[nextExtra].key < $0 }) ?? true {
            let (name, value) = extras[nextExtra]
            nextExtra += 1
            comma()
            out.append(UInt8(ascii: "\""))
            appendJSONStringContent(name, to: &out)
            out.append(contentsOf: "\":".utf8)
            value.append(to: &out)
        }
    }
    mutating func string(_ k: String, _ v: String) {
        key(k)
        out.append(UInt8(ascii: "\""))
        appendJSONStringContent(v, to: &out)
        out.append(UInt8(ascii: "\""))
    }
    mutating func number(_ k: String, _ v: Int64) {
        key(k)
        out.append(contentsOf: String(v).utf8)
    }
    mutating func base64(_ k: String, _ bytes: [UInt8]) {
        key(k)
        out.append(UInt8(ascii: "\""))
        Base64.append(bytes, alphabet: .standard, padded: true, to: &out)
        out.append(UInt8(ascii: "\""))
    }
}
