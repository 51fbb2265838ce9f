import Foundation

/// A stored notification template (`/v1/templates/{id}`): a job names it with `templateId` instead of giving its own
/// `notification`.
public struct StoredTemplate: Sendable, Hashable {
    public var id: String
    /// The `notification` object as it was put (numbers keep their text); `readNotification()` reads it.
    public var notification: JSONValue
    public var createdAt: Date
    public var updatedAt: Date

    public init(id: String, notification: JSONValue, createdAt: Date, updatedAt: Date) {
        self.id = id
        self.notification = notification
        self.createdAt = createdAt
        self.updatedAt = updatedAt
    }

    /// The notification, read as a job's is.
    public func readNotification() throws(JSONFieldError) -> Notification {
        try Notification(json: notification, at: [.key("notification")])
    }

    /// Template ids: 1–128 letters, digits and `. _ : -` (the characters of a job id).
    public static func isValidID(_ id: String) -> Bool {
        !id.isEmpty && id.utf8.count <= 128
            && id.utf8.allSatisfy { b in
                (UInt8(ascii: "a")...UInt8(ascii: "z")).contains(b)
                    || (UInt8(ascii: "A")...UInt8(ascii: "Z")).contains(b)
                    || (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(b) || b == UInt8(ascii: ".")
                    || b == UInt8(ascii: "_") || b == UInt8(ascii: ":") || b == UInt8(ascii: "-")
            }
    }
    /// Checks a template's `notification` object as `PUT /v1/templates/{id}` and `volley templates put` do: an
    /// object of the notification's known keys, at most `maxNotificationBytes` as compact JSON, read as a job's
    /// notification is, and its names compiled. The error names the field (`notification.localized.es.title`).
    public static func check(notification value: JSONValue) throws(TemplateError) -> NotificationTemplate {
        guard let members = value.objectValue else {
            throw TemplateError(field: "notification", message: "expected an object")
        }
        if let unknown = JobKeys.unknownKeys(in: ["notification": value]).first {
            throw TemplateError(
                field: unknown.path,
                message: "unknown key" + (unknown.suggestion.map { "; did you mean '\($0)'?" } ?? ""))
        }
        if members.isEmpty {
            throw TemplateError(field: "notification", message: "an empty notification sends nothing")
        }
        let bytes = value.encoded().count
        guard bytes <= maxNotificationBytes else {
            throw TemplateError(
                field: "notification", message: "\(bytes) bytes as compact JSON; at most \(maxNotificationBytes)")
        }
        let notification: Notification
        do { notification = try Notification(json: value, at: [.key("notification")]) } catch {
            throw TemplateError(field: error.field, message: error.message)
        }
        return try NotificationTemplate(notification)
    }

    /// Templates one org may keep.
    public static let maxPerOrg = 1000
    /// Largest `notification` object, as compact JSON: four providers' payload limits with room for localized
    /// variants, which only one of is sent.
    public static let maxNotificationBytes = 16_384
}

/// What `TemplateStore.put` did.
public enum TemplatePut: Sendable, Hashable {
    /// A new template.
    case created(StoredTemplate)
    /// An existing template, its notification replaced (`createdAt` kept).
    case replaced(StoredTemplate)
    /// The org already has `StoredTemplate.maxPerOrg` templates and this id is not one of them: nothing was written.
    case limitReached
}

/// An org's templates as the API and the CLI change them. (The worker reads them through `TemplateReader`.)
public protocol TemplateStore: Sendable {
    /// Creates or replaces `id`; at most `maxCount` templates per org, checked in the same step as the write.
    func put(org: OrgID, id: String, notification: JSONValue, now: Date, maxCount: Int) async throws -> TemplatePut
    /// nil when the org has no template `id`.
    func template(org: OrgID, id: String) async throws -> StoredTemplate?
    /// True when the template existed.
    func delete(org: OrgID, id: String) async throws -> Bool
    /// Every template of the org, by id.
    func list(org: OrgID) async throws -> [StoredTemplate]
}

/// The worker's read of a template, once per job (blocking: the planner runs on a lane thread).
public protocol TemplateReader: Sendable {
    /// The template's `notification` object; nil when the org has no template `id`.
    func notification(org: OrgID, templateID: String) throws -> JSONValue?
}

/// A directory user's attributes (`{"first_name": "Ada"}`), the values templates name.
public enum UserAttributes {
    /// Attributes per user.
    public static let maxCount = 32
    /// Key length: 1–64 of letters, digits, `_` and `-` (so a template can name it).
    public static let maxKeyLength = 64
    /// Characters of one value: Unicode scalars (code points), what JSON Schema's `maxLength` counts, so the OpenAPI
    /// document states the rule exactly (`é` is one, a flag emoji two). At most 2,048 bytes of UTF-8; every value
    /// of the 512 bytes earlier releases allowed still passes. Segment filter values share it.
    public static let maxValueCharacters = 512

    /// A value's length as `maxValueCharacters` counts it.
    public static func characters(_ value: String) -> Int { value.unicodeScalars.count }

    /// Problems with `attributes`, each naming the key (`attributes.first_name`): too many, a key a template
    /// cannot name, a value too long, a `timeZone` (the user's zone for local-time jobs) that is no IANA zone.
    public static func problems(_ attributes: [String: String]) -> [String] {
        var out: [String] = []
        if attributes.count > maxCount { out.append("attributes: \(attributes.count) keys; at most \(maxCount)") }
        for (key, value) in attributes.sorted(by: { $0.key < $1.key }) {
            if !isValidKey(key) {
                out.append(
                    "attributes.\(key): a key is 1–\(maxKeyLength) letters, digits, '_' and '-'")
            } else if characters(value) > maxValueCharacters {
                out.append("attributes.\(key): \(characters(value)) characters; at most \(maxValueCharacters)")
            } else if key == LocalTimeWaves.userZoneAttribute, let problem = IANAZone.problem(value) {
                out.append("attributes.\(key): \(problem)")
            }
        }
        return out
    }

    public static func isValidKey(_ key: String) -> Bool {
        !key.isEmpty && key.utf8.count <= maxKeyLength
            && key.utf8.allSatisfy { b in
                (UInt8(ascii: "a")...UInt8(ascii: "z")).contains(b)
                    || (UInt8(ascii: "A")...UInt8(ascii: "Z")).contains(b)
                    || (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(b) || b == UInt8(ascii: "_")
                    || b == UInt8(ascii: "-")
            }
    }
}

/// A directory user's attributes as the API reads and replaces them (`/v1/users/{user}/attributes`).
public protocol UserAttributeStore: Sendable {
    /// nil when the user has none.
    func attributes(org: OrgID, user: UserID) async throws -> [String: String]?
    /// Replaces the user's attributes; an empty object removes them.
    func setAttributes(org: OrgID, user: UserID, _ attributes: [String: String]) async throws
}

/// The directory's user attributes as the engine reads them: once per chunk of users, in one round trip.
public protocol UserAttributeReader: Sendable {
    /// `users[i]`'s attributes at index i; nil for a user without any (or unknown to the directory).
    func attributes(org: OrgID, users: [UserID]) throws -> [[String: String]?]
}
