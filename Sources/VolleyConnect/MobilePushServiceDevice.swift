import Crypto
import Foundation
import VolleyCore

/// The registration the Salesforce Mobile SDKs send themselves: `POST /sobjects/MobilePushServiceDevice` after login
/// and `DELETE /sobjects/MobilePushServiceDevice/{id}` at logout, with the user's token.
///
/// Read in the SDKs' source: forcedotcom/SalesforceMobileSDK-iOS `PushNotificationManager.swift`
/// (`registerSalesforceNotifications`) sends `ConnectionToken` (the APNs token in hex), `ServiceType: "Apple"`,
/// `ApplicationBundle` (the bundle id), `NetworkId` (an Experience Cloud site, when the user logged in to one),
/// `RsaPublicKey` and always `CipherName: "RSA_OAEP_SHA256"`, plus whatever the app put in
/// `customPushRegistrationBody`; it keeps `id` from a 2xx answer and deletes `…/{id}` at logout.
/// forcedotcom/SalesforceMobileSDK-Android `PushService.kt` sends `ConnectionToken` (the FCM token),
/// `ServiceType: "androidGcm"`, `ApplicationBundle` (the package name), `NetworkId` and `RsaPublicKey`; it reads `id`
/// from a 201, takes a 404 as "push is not enabled for this connected app" (and stops retrying), and deletes
/// `…/{id}` at logout.
///
/// What Volley does with it: the device belongs to the token's user, in the token's org and app (a user token is
/// minted for one app, so `ApplicationBundle` is required but does not choose the app; tenancy comes from the
/// credential). `NetworkId` is accepted and not kept. The answer is Salesforce's sObject create answer,
/// `201 {"id", "success": true, "errors": []}`; the id is derived from (org, app, platform, token), so registering the
/// same token again is an update with the same id, and a `DELETE` finds the device among the caller's own.
/// Errors are Salesforce's sObject error array, `[{"message", "errorCode", "fields"}]`.
public struct MobilePushServiceDevices: Sendable {
    /// The fields a registration may carry (Salesforce answers `INVALID_FIELD` for any other).
    public static let fields: Set<String> = [
        "ConnectionToken", "ServiceType", "ApplicationBundle", "NetworkId", "RsaPublicKey", "CipherName",
    ]

    let devices: any DeviceStore
    let clock: any WallClock

    public init(devices: any DeviceStore, clock: any WallClock = SystemClock()) {
        self.devices = devices
        self.clock = clock
    }

    /// `POST …/sobjects/MobilePushServiceDevice`: registers (or updates) the caller's device.
    public func register(caller: ConnectCaller, body: Data) async throws -> ConnectResponse {
        let owner: (UserID, AppName)
        let device: Registration
        do {
            owner = try Self.owner(caller)
            device = try Self.decode(body)
        } catch {
            return error.response
        }
        let (user, app) = owner
        try await devices.register(
            DeviceImportRecord(
                org: caller.org, app: app, user: user, platform: device.platform, token: device.token,
                rsaPublicKey: device.key?.rsaPublicKey, cipherName: device.key?.cipherName),
            now: clock.now())
        struct Created: Encodable {
            var id: String
            var success = true
            var errors: [String] = []
        }
        let id = Self.id(org: caller.org, app: app, platform: device.platform, token: device.token)
        return .json(201, Created(id: id))
    }

    /// `DELETE …/sobjects/MobilePushServiceDevice/{id}`: removes the caller's device with that id; 404 for an id that
    /// is not one of the caller's devices (another user's, another org's, or none).
    public func unregister(caller: ConnectCaller, id: String) async throws -> ConnectResponse {
        let user: UserID
        let app: AppName
        do {
            (user, app) = try Self.owner(caller)
        } catch {
            return error.response
        }
        let mine = try await devices.devices(org: caller.org, app: app, user: user)
        guard
            let device = mine.first(where: {
                Self.id(org: caller.org, app: app, platform: $0.platform, token: $0.token) == id
            }),
            try await devices.unregister(
                org: caller.org, app: app, user: user, platform: device.platform, token: device.token)
        else {
            return SObjectError.notFound.response
        }
        return .noContent
    }

    /// The device a registration body names, checked field by field.
    struct Registration: Sendable, Hashable {
        var platform: Platform
        var token: DeviceToken
        var key: DeviceKeyMaterial?
    }

    static func decode(_ body: Data) throws(SObjectError) -> Registration {
        let value: JSONValue
        do {
            value = try JSONValue(parsing: body)
        } catch {
            throw SObjectError(400, "JSON_PARSER_ERROR", "The request body is not valid JSON", fields: [])
        }
        guard case .object(let o) = value else {
            throw SObjectError(400, "JSON_PARSER_ERROR", "The request body must be a JSON object", fields: [])
        }
        if let unknown = o.keys.sorted().first(where: { !fields.contains($0) }) {
            throw SObjectError(
                400, "INVALID_FIELD", "No such column '\(unknown)' on sobject of type MobilePushServiceDevice",
                fields: [unknown])
        }
        func text(_ name: String) throws(SObjectError) -> String? {
            switch o[name] {
            case nil, .null?: return nil
            case .string(let s)?: return s
            default:
                throw SObjectError(
                    400, "JSON_PARSER_ERROR", "\(name): expected a string", fields: [name])
            }
        }
        var missing: [String] = []
        for name in ["ConnectionToken", "ServiceType", "ApplicationBundle"] where try (text(name) ?? "").isEmpty {
            missing.append(name)
        }
        if !missing.isEmpty {
            throw SObjectError(
                400, "REQUIRED_FIELD_MISSING", "Required fields are missing: [\(missing.joined(separator: ", "))]",
                fields: missing)
        }
        let token = try text("ConnectionToken") ?? ""
        let serviceType = try text("ServiceType") ?? ""
        _ = try text("ApplicationBundle")
        _ = try text("NetworkId")
        let platform: Platform
        switch serviceType {
        case "Apple": platform = .ios
        case "androidGcm": platform = .android
        default:
            throw SObjectError(
                400, "INVALID_OR_NULL_FOR_RESTRICTED_PICKLIST",
                "ServiceType: bad value for restricted picklist field: \(serviceType) (Apple or androidGcm)",
                fields: ["ServiceType"])
        }
        if let problem = DeviceToken(token).formProblem(for: platform) {
            throw SObjectError(
                400, "FIELD_INTEGRITY_EXCEPTION", "ConnectionToken: \(problem)", fields: ["ConnectionToken"])
        }
        let (rsaPublicKey, cipherName) = (try text("RsaPublicKey"), try text("CipherName"))
        let key: DeviceKeyMaterial?
        do {
            key = try DeviceEncryptionKey.registration(rsaPublicKey: rsaPublicKey, cipherName: cipherName)
        } catch {
            let field = error.field == "cipherName" ? "CipherName" : "RsaPublicKey"
            throw SObjectError(400, "FIELD_INTEGRITY_EXCEPTION", "\(field): \(error.fieldMessage)", fields: [field])
        }
        return Registration(platform: platform, token: DeviceToken(token), key: key)
    }

    /// The user and app of a user token; an API key has no user to register a device for.
    static func owner(_ caller: ConnectCaller) throws(SObjectError) -> (UserID, AppName) {
        guard let user = caller.user, let app = caller.appName else {
            throw SObjectError(
                403, "INSUFFICIENT_ACCESS", "a device is registered by its user: call with the user's token",
                fields: [])
        }
        return (user, app)
    }

    /// The record's 18-character id: key prefix `0Vd`, twelve base-62 characters of SHA-256 over (org, app,
    /// platform, token), and Salesforce's three-character case-safe suffix, so clients that check an id's form take
    /// it. The same device always gets the same id.
    public static func id(org: OrgID, app: AppName, platform: Platform, token: DeviceToken) -> String {
        var hasher = SHA256()
        for part in [org.rawValue, app.rawValue, platform.rawValue, token.rawValue] {
            hasher.update(data: Array(part.utf8))
            hasher.update(data: [0])
        }
        let alphabet = Array("0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz".utf8)
        var id = Array("0Vd".utf8)
        for byte in hasher.finalize().prefix(12) { id.append(alphabet[Int(byte) % alphabet.count]) }
        return String(decoding: id + caseSafeSuffix(id), as: UTF8.self)
    }

    /// Salesforce's suffix of a 15-character id: for each five characters, a letter of `A…Z0…5` whose bits mark
    /// the upper-case letters among them.
    static func caseSafeSuffix(_ id15: [UInt8]) -> [UInt8] {
        let letters = Array("ABCDEFGHIJKLMNOPQRSTUVWXYZ012345".utf8)
        return (0..<3).map { chunk in
            var bits = 0
            for i in 0..<5 where (UInt8(ascii: "A")...UInt8(ascii: "Z")).contains(id15[chunk * 5 + i]) {
                bits |= 1 << i
            }
            return letters[bits]
        }
    }
}

/// An sObject error: Salesforce's array `[{"message", "errorCode", "fields"}]`.
public struct SObjectError: Error, Sendable, Hashable, CustomStringConvertible {
    public var status: Int
    public var errorCode: String
    public var message: String
    public var fields: [String]

    public init(_ status: Int, _ errorCode: String, _ message: String, fields: [String]) {
        self.status = status
        self.errorCode = errorCode
        self.message = message
        self.fields = fields
    }

    static let notFound = SObjectError(
        404, "NOT_FOUND", "The requested resource does not exist", fields: [])

    public var description: String { "\(status) \(errorCode): \(message)" }

    public var response: ConnectResponse {
        struct Wire: Encodable {
            var message: String
            var errorCode: String
            var fields: [String]
        }
        let body =
            (try? ConnectJSON.encoder.encode([Wire(message: message, errorCode: errorCode, fields: fields)]))
            ?? Data(#"[{"errorCode":"UNKNOWN_EXCEPTION","fields":[],"message":"error"}]"#.utf8)
        return ConnectResponse(status: status, body: body)
    }
}

extension ConnectError {
    /// The field a message names first (`"rsaPublicKey: not base64"` → `rsaPublicKey`), if it does.
    public var field: String? {
        guard let colon = message.firstIndex(of: ":") else { return nil }
        let name = message[..<colon]
        return name.isEmpty || name.contains(" ") ? nil : String(name)
    }

    /// The message after the field it names.
    public var fieldMessage: String {
        guard let field else { return message }
        return message.dropFirst(field.count + 1).trimmingCharacters(in: .whitespaces)
    }
}
