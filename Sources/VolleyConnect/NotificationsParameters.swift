import Foundation
import VolleyCore

/// `GET /connect/notifications` parameters: `after` or `before` (ISO 8601), `size` (1–50, default 10; above 50
/// gives 50, as Salesforce does) and `trimMessages` (default true).
public struct NotificationListParameters: Sendable, Hashable {
    public static let defaultSize = 10
    public static let maxSize = 50

    public var after: Date?
    public var before: Date?
    public var size: Int
    public var trimMessages: Bool

    public init(after: Date? = nil, before: Date? = nil, size: Int = defaultSize, trimMessages: Bool = true) {
        self.after = after
        self.before = before
        self.size = size
        self.trimMessages = trimMessages
    }

    public init(query: [ConnectQueryItem]) throws(ConnectError) {
        self.init()
        for item in query {
            switch item.name {
            case "after": after = try Self.date(item.value, field: "after")
            case "before": before = try Self.date(item.value, field: "before")
            case "size":
                guard let n = Int(item.value.trimmingCharacters(in: .whitespaces)) else {
                    throw .invalidInput("size: expected an integer from 1 through 50, got \"\(item.value)\"")
                }
                if n < 1 { throw .invalidInput("size: must be from 1 through 50 (got \(n))") }
                size = min(n, Self.maxSize)
            case "trimMessages": trimMessages = try Self.flag(item.value, field: "trimMessages")
            default: break // Salesforce ignores unknown parameters on GET
            }
        }
        if after != nil && before != nil {
            throw .invalidInput("before: can't be used with after; give one of them")
        }
    }

    /// An RFC 3339 date, or one with the offset the Mobile SDKs write (`…T13:12:03.956-0800`); the blanks around it
    /// that query strings pick up are ignored.
    static func date(_ s: String, field: String) throws(ConnectError) -> Date {
        do throws(RFC3339.ParseError) {
            return try RFC3339.parse(s.trimmingCharacters(in: .whitespaces), offsets: .rfc3339OrBasic)
        } catch {
            throw .invalidInput(
                "\(field): expected an RFC 3339 date such as 2019-06-25T18:24:31.000Z, got \"\(s)\" (\(error.reason))")
        }
    }

    static func flag(_ s: String, field: String) throws(ConnectError) -> Bool {
        guard let b = ConnectJSON.boolText(s) else { throw .invalidInput("\(field): expected true or false") }
        return b
    }
}

/// A mark request (`PATCH /connect/notifications` and `PATCH /connect/notifications/{id}`), from the JSON body or,
/// as the guide also allows, from query parameters (the body wins).
public struct NotificationMarkParameters: Sendable, Hashable {
    public static let maxIDs = 50

    public var before: Date?
    public var notificationIds: [String]?
    public var read: Bool?
    public var seen: Bool?

    static let collectionKeys: Set<String> = ["before", "notificationIds", "read", "seen"]
    static let singleKeys: Set<String> = ["read", "seen"]

    /// `single`: the one-notification form, which takes only read and seen.
    public init(body: Data, query: [ConnectQueryItem], single: Bool) throws(ConnectError) {
        let o = try ConnectJSON.object(body, allowed: single ? Self.singleKeys : Self.collectionKeys)
        for item in query {
            switch item.name {
            case "read": read = try NotificationListParameters.flag(item.value, field: "read")
            case "seen": seen = try NotificationListParameters.flag(item.value, field: "seen")
            case "before" where !single: before = try NotificationListParameters.date(item.value, field: "before")
            case "notificationIds" where !single:
                notificationIds = item.value.split(separator: ",").map {
                    $0.trimmingCharacters(in: .whitespaces)
                }
            default: break
            }
        }
        if let v = try ConnectJSON.bool(o["read"], field: "read") { read = v }
        if let v = try ConnectJSON.bool(o["seen"], field: "seen") { seen = v }
        if let s = try ConnectJSON.string(o["before"], field: "before") {
            before = try NotificationListParameters.date(s, field: "before")
        }
        if let ids = try ConnectJSON.stringList(o["notificationIds"], field: "notificationIds") {
            notificationIds = ids
        }
        if read == nil && seen == nil { throw .invalidInput("read: give read, seen or both") }
        if read == true && seen == false {
            throw .invalidInput("seen: can't be false when read is true (a notification that is read is also seen)")
        }
        if before != nil && notificationIds != nil {
            throw .invalidInput("notificationIds: can't be used with before; give one of them")
        }
        if let ids = notificationIds {
            if ids.isEmpty { throw .invalidInput("notificationIds: give at least one id") }
            if ids.count > Self.maxIDs {
                throw .invalidInput("notificationIds: at most \(Self.maxIDs) ids (got \(ids.count)); use before")
            }
            if let i = ids.firstIndex(where: \.isEmpty) { throw .invalidInput("notificationIds[\(i)]: empty id") }
        }
    }

    /// The store's mark; nil ids and no before mean "before now" (now included: one millisecond later).
    func mark(now: Date) throws(ConnectError) -> InboxMark {
        let selection: InboxMark.Selection =
            notificationIds.map { .ids($0) } ?? .before(before ?? now.addingTimeInterval(0.001))
        do {
            return try InboxMark(selection, read: read, seen: seen)
        } catch {
            throw .invalidInput("\(error)")
        }
    }
}
