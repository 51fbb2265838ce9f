/// The form a registration's device token must have for its platform, checked wherever a device is registered
/// (`PUT /v1/devices`, the `MobilePushServiceDevice` sObject, `volley devices register` and `import`), so a token
/// that no provider would take never reaches the registry and never costs a send.
///
/// - APNs: hexadecimal digits (either case), an even number of them, 64 to 200. Apple's tokens are 32 bytes (64
///   digits) today, but Apple says not to assume their size ("don't make assumptions about device token size",
///   *Sending notification requests to APNs*), so longer even-length hex up to 100 bytes is taken as well. Salesforce
///   refuses the same mistakes as "Invalid device token length".
/// - FCM: a registration token is opaque: any non-empty text without whitespace or control characters, at most
///   4,096 bytes, and without `/` (the token is a path segment of `DELETE /v1/devices/{platform}/{token}`).
extension DeviceToken {
    /// Digits of an APNs token: 32 bytes today, up to 100 bytes allowed.
    public static let apnsHexDigits = 64...200
    /// Bytes of an FCM registration token.
    public static let fcmMaxBytes = 4096

    /// Why this token cannot be a device token of `platform`, without quoting it; nil when it can.
    public func formProblem(for platform: Platform) -> String? {
        let bytes = rawValue.utf8
        switch platform {
        case .ios:
            if let i = bytes.firstIndex(where: { hexDigitValue($0) == nil }) {
                let at = bytes.distance(from: bytes.startIndex, to: i)
                return "an APNs device token is hexadecimal digits only; character \(at + 1) is not one"
            }
            guard Self.apnsHexDigits.contains(bytes.count), bytes.count % 2 == 0 else {
                return "invalid device token length: an APNs device token is an even number of hexadecimal digits, "
                    + "\(Self.apnsHexDigits.lowerBound) to \(Self.apnsHexDigits.upperBound) (64 today); "
                    + "this one has \(bytes.count)"
            }
            return nil
        case .android:
            if bytes.isEmpty { return "an FCM registration token must not be empty" }
            if bytes.count > Self.fcmMaxBytes {
                return "an FCM registration token is at most \(Self.fcmMaxBytes) bytes; this one has \(bytes.count)"
            }
            if rawValue.unicodeScalars.contains(where: {
                $0.properties.isWhitespace || $0.value < 0x20 || $0 == "\u{7F}"
            }) {
                return "an FCM registration token has no spaces or control characters"
            }
            if bytes.contains(UInt8(ascii: "/")) { return "an FCM registration token has no '/'" }
            return nil
        }
    }
}

extension DeviceRecord {
    /// The order device lists are shown in: the most recently registered first, as Salesforce's test page lists "the
    /// five most recently registered"; equal times by platform, then token.
    public static func newestFirst(_ a: DeviceRecord, _ b: DeviceRecord) -> Bool {
        if a.registeredAt != b.registeredAt { return a.registeredAt > b.registeredAt }
        return (a.platform.rawValue, a.token.rawValue) < (b.platform.rawValue, b.token.rawValue)
    }
}
