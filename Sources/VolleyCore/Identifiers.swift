/// Identifiers that say what they are. Each wraps a string; none behaves like one.

/// A push platform.
public enum Platform: String, Sendable, Hashable, Codable, CaseIterable, CustomStringConvertible {
    case ios
    case android
    public var description: String { rawValue }
    /// 0-based position in `allCases`, for per-platform arrays on hot paths (no hashing).
    public var index: Int {
        switch self {
        case .ios: 0
        case .android: 1
        }
    }
}

/// The APNs environment a device token belongs to.
public enum APNSEnvironment: String, Sendable, Hashable, Codable, CaseIterable {
    case sandbox
    case production
}

/// A device's provider token (APNs hex token or FCM registration token).
/// Prints redacted: never log a token in full.
public struct DeviceToken: Sendable, Hashable, Codable, CustomStringConvertible {
    public let rawValue: String
    public init(_ rawValue: String) { self.rawValue = rawValue }
    public init(from decoder: any Decoder) throws { rawValue = try decoder.singleValueContainer().decode(String.self) }
    public func encode(to encoder: any Encoder) throws {
        var c = encoder.singleValueContainer()
        try c.encode(rawValue)
    }
    /// First 6 and last 4 characters, so operators can correlate without leaking the token.
    public var redacted: String {
        rawValue.count <= 12 ? "…" : "\(rawValue.prefix(6))…\(rawValue.suffix(4))"
    }
    public var description: String { redacted }
}

/// Declares a string-backed identifier type with Codable as a bare string.
public protocol StringIdentifier: Sendable, Hashable, Codable, CustomStringConvertible, ExpressibleByStringLiteral {
    var rawValue: String { get }
    init(_ rawValue: String)
}

extension StringIdentifier {
    public init(stringLiteral value: String) { self.init(value) }
    public init(from decoder: any Decoder) throws { self.init(try decoder.singleValueContainer().decode(String.self)) }
    public func encode(to encoder: any Encoder) throws {
        var c = encoder.singleValueContainer()
        try c.encode(rawValue)
    }
    public var description: String { rawValue }
}

/// An organisation (tenant).
public struct OrgID: StringIdentifier {
    public let rawValue: String
    public init(_ rawValue: String) { self.rawValue = rawValue }
}
/// A configured app (the connected app's API name, as jobs name it).
public struct AppName: StringIdentifier {
    public let rawValue: String
    public init(_ rawValue: String) { self.rawValue = rawValue }
}
/// A user in an org's directory.
public struct UserID: StringIdentifier {
    public let rawValue: String
    public init(_ rawValue: String) { self.rawValue = rawValue }
}
/// A job's idempotency key.
public struct JobID: StringIdentifier {
    public let rawValue: String
    public init(_ rawValue: String) { self.rawValue = rawValue }

    /// A new random id for a job its producer did not name: `prefix` and a version-4 UUID in lowercase
    /// (`job-1b4e28ba-2fa1-41d2-883f-0016d3cca427`). The bits come from the system's generator (getrandom), without
    /// opening `/dev/urandom` per id as Foundation's `UUID()` does on Linux.
    public static func generated(prefix: String = "job-") -> JobID {
        var rng = SystemRandomNumberGenerator()
        return generated(prefix: prefix, using: &rng)
    }

    /// `generated(prefix:)` with 128 bits from `rng`, which must be a cryptographically secure generator (the API
    /// passes one that reads the kernel's generator in bulk).
    public static func generated<R: RandomNumberGenerator>(prefix: String = "job-", using rng: inout R) -> JobID {
        let bits = (rng.next() as UInt64, rng.next() as UInt64)
        var prefix = prefix
        // Written in place: the id's String is its only allocation.
        let text = prefix.withUTF8 { head in
            String(unsafeUninitializedCapacity: head.count + 36) { out in
                let at = out.initialize(fromContentsOf: head)
                withUnsafeBytes(of: bits) { random in
                    writeUUIDText(random, version: 4, into: UnsafeMutableBufferPointer(rebasing: out[at...]))
                }
                return at + 36
            }
        }
        return JobID(text)
    }
}
/// A recipient id as a job names it: a user, group, queue, account team or opportunity team.
public struct RecipientID: StringIdentifier {
    public let rawValue: String
    public init(_ rawValue: String) { self.rawValue = rawValue }
}
/// A Redis stream entry id ("1700000000000-0"), and which job stream shard it is on: ids are unique within one
/// stream only, so two shards may hold the same id. The shard is not part of the text form (`rawValue`, Codable).
public struct StreamEntryID: StringIdentifier {
    public let rawValue: String
    /// The job stream shard the entry was read from (0 with one shard).
    public let shard: Int
    public init(_ rawValue: String) {
        self.rawValue = rawValue
        shard = 0
    }
    public init(_ rawValue: String, shard: Int) {
        self.rawValue = rawValue
        self.shard = shard
    }
}

/// One registered device.
public struct Device: Sendable, Hashable, Codable {
    public var platform: Platform
    public var token: DeviceToken
    /// iOS only: which APNs environment issued the token (default production).
    public var environment: APNSEnvironment?
    public var locale: String?
    public var user: UserID?
    /// The RSA public key the app registered for encrypted Notification Builder pushes (nil: none).
    public var encryptionKey: DeviceKeyMaterial?
    /// The IANA zone the app registered (`Europe/Berlin`), for `deliverAtLocalTime` (nil: none).
    public var timeZone: String?

    public init(
        platform: Platform, token: DeviceToken, environment: APNSEnvironment? = nil,
        locale: String? = nil, user: UserID? = nil, encryptionKey: DeviceKeyMaterial? = nil, timeZone: String? = nil
    ) {
        self.timeZone = timeZone
        self.platform = platform
        self.token = token
        self.environment = environment
        self.locale = locale
        self.user = user
        self.encryptionKey = encryptionKey
    }
}

/// A device's registered public key, as the app sent it: `rsaPublicKey` (base64 of the X.509
/// SubjectPublicKeyInfo DER) and `cipherName` (`RSA_OAEP_SHA256`, or nil for an SDK that only knows PKCS #1 v1.5).
/// Kept as text; it is parsed (and checked) where pushes are encrypted.
public struct DeviceKeyMaterial: Sendable, Hashable, Codable {
    public var rsaPublicKey: String
    public var cipherName: String?
    public init(rsaPublicKey: String, cipherName: String? = nil) {
        self.rsaPublicKey = rsaPublicKey
        self.cipherName = cipherName
    }
}
