import Foundation

/// A device as stored in the registry hash (JSON).
public struct DeviceRecord: Sendable, Hashable, Codable {
    public var platform: Platform
    public var token: DeviceToken
    public var environment: APNSEnvironment?
    public var locale: String?
    public var user: UserID
    public var registeredAt: Date
    public var lastSeenAt: Date
    /// The app's RSA public key for encrypted pushes (`DeviceKeyMaterial`), when it registered one.
    public var rsaPublicKey: String?
    public var cipherName: String?
    /// The device's IANA zone, for `deliverAtLocalTime`.
    public var timeZone: String?

    public init(
        platform: Platform, token: DeviceToken, environment: APNSEnvironment? = nil, locale: String? = nil,
        user: UserID, registeredAt: Date, lastSeenAt: Date, rsaPublicKey: String? = nil, cipherName: String? = nil,
        timeZone: String? = nil
    ) {
        self.timeZone = timeZone
        self.rsaPublicKey = rsaPublicKey
        self.cipherName = cipherName
        self.platform = platform
        self.token = token
        self.environment = environment
        self.locale = locale
        self.user = user
        self.registeredAt = registeredAt
        self.lastSeenAt = lastSeenAt
    }

    public var device: Device {
        Device(
            platform: platform, token: token, environment: environment, locale: locale, user: user,
            encryptionKey: rsaPublicKey.map { DeviceKeyMaterial(rsaPublicKey: $0, cipherName: cipherName) },
            timeZone: timeZone)
    }

}

/// One line of `volley devices import` (JSONL) or one CSV row: `org, app, user, platform, token[, environment,
/// locale]`.
public struct DeviceImportRecord: Sendable, Hashable, Codable {
    public var org: OrgID
    public var app: AppName
    public var user: UserID
    public var platform: Platform
    public var token: DeviceToken
    public var environment: APNSEnvironment?
    public var locale: String?
    public var rsaPublicKey: String?
    public var cipherName: String?
    /// An IANA zone (`America/New_York`), for `deliverAtLocalTime`.
    public var timeZone: String?
    /// The keys a JSONL record may carry; any other refuses the line, naming the key.
    public static let keys: Set<String> = [
        "org", "app", "user", "platform", "token", "environment", "locale", "rsaPublicKey", "cipherName", "timeZone",
    ]
    public init(
        org: OrgID, app: AppName, user: UserID, platform: Platform, token: DeviceToken,
        environment: APNSEnvironment? = nil, locale: String? = nil, rsaPublicKey: String? = nil,
        cipherName: String? = nil, timeZone: String? = nil
    ) {
        self.timeZone = timeZone
        self.rsaPublicKey = rsaPublicKey
        self.cipherName = cipherName
        self.org = org
        self.app = app
        self.user = user
        self.platform = platform
        self.token = token
        self.environment = environment
        self.locale = locale
    }
}
