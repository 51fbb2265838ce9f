import Foundation

/// A notification stored for in-app display (Salesforce Connect REST "Notification": id, type, messageTitle,
/// messageBody, target, targetPageRef, read, seen). One per (user, notification); every notification to a user is
/// stored, pushed or not (over quota, no device, push disabled).
public struct InboxNotification: Sendable, Hashable, Codable {
    public static let maxTitle = 250
    public static let maxBody = 750

    public var id: String
    public var type: String?
    public var title: String
    public var body: String
    /// Id of the record the notification is about.
    public var target: String?
    /// Page reference for the target (JSON text, kept verbatim).
    public var targetPageRef: String?
    public var createdAt: Date
    public var read: Bool
    public var seen: Bool

    public init(
        id: String, type: String?, title: String, body: String, target: String?, targetPageRef: String?,
        createdAt: Date, read: Bool = false, seen: Bool = false
    ) {
        self.id = id
        self.type = type
        self.target = target
        self.targetPageRef = targetPageRef
        self.title = InboxNotification.clip(title, InboxNotification.maxTitle)
        self.body = InboxNotification.clip(body, InboxNotification.maxBody)
        self.createdAt = createdAt
        self.read = read
        self.seen = seen
    }

    /// Cut to `n` characters (grapheme clusters, as Salesforce counts them); never splits a character.
    public static func clip(_ s: String, _ n: Int) -> String { s.count <= n ? s : String(s.prefix(n)) }
}

/// Salesforce "Notification Status": counts and oldest unread/unseen (nil when none; the API prints now).
public struct InboxStatus: Sendable, Hashable, Codable {
    public var unreadCount: Int
    public var unseenCount: Int
    public var oldestUnread: Date?
    public var oldestUnseen: Date?
    public var lastActivity: Date?
    public init(unreadCount: Int, unseenCount: Int, oldestUnread: Date?, oldestUnseen: Date?, lastActivity: Date?) {
        self.unreadCount = unreadCount
        self.unseenCount = unseenCount
        self.oldestUnread = oldestUnread
        self.oldestUnseen = oldestUnseen
        self.lastActivity = lastActivity
    }
}

/// A mark request (Salesforce PATCH /connect/notifications): which notifications, and the new flags.
public struct InboxMark: Sendable, Hashable {
    public enum Selection: Sendable, Hashable {
        /// Up to 50 ids (Salesforce's limit).
        case ids([String])
        /// Every notification created before this time.
        case before(Date)
    }
    public var selection: Selection
    public var read: Bool?
    public var seen: Bool?

    /// Validates like Salesforce: at least one flag; read=true with seen=false is an error; read=true marks seen.
    public init(_ selection: Selection, read: Bool?, seen: Bool?) throws {
        if read == nil && seen == nil {
            throw InboxError("give read, seen or both (--read true|false, --seen true|false)")
        }
        if read == true && seen == false {
            throw InboxError("read=true with seen=false is not allowed: a notification that is read is also seen")
        }
        if case .ids(let ids) = selection {
            if ids.isEmpty { throw InboxError("give at least one notification id, or --before") }
            if ids.count > 50 {
                throw InboxError("at most 50 notification ids per mark (got \(ids.count)); use --before for more")
            }
        }
        self.selection = selection
        self.read = read
        self.seen = read == true ? true : seen
    }
}

/// Retention of each user's inbox: the newest `maxCount`, none older than `maxAge`.
public struct InboxRetention: Sendable, Hashable, Codable {
    public var maxCount: Int
    public var maxAgeSeconds: Int
    public init(maxCount: Int = 200, maxAgeSeconds: Int = 90 * 86_400) {
        self.maxCount = maxCount
        self.maxAgeSeconds = maxAgeSeconds
    }
}

public struct InboxError: Error, Sendable, Hashable, CustomStringConvertible {
    public let message: String
    public init(_ message: String) { self.message = message }
    public var description: String { message }
}

/// Content shared by every recipient of one notification (stored once, not per user).
public struct InboxContent: Sendable, Hashable, Codable {
    public var id: String
    public var type: String?
    public var title: String
    public var body: String
    public var target: String?
    public var targetPageRef: String?
    public var createdAt: Date
    public init(
        id: String, type: String?, title: String, body: String, target: String?, targetPageRef: String? = nil,
        createdAt: Date
    ) {
        self.id = id
        self.type = type
        self.title = InboxNotification.clip(title, InboxNotification.maxTitle)
        self.body = InboxNotification.clip(body, InboxNotification.maxBody)
        self.target = target
        self.targetPageRef = targetPageRef
        self.createdAt = createdAt
    }
}

/// Per-user in-app notifications. Writes are batched (a campaign stores one entry per user); reads are per user.
/// The later HTTP API implements Salesforce's Notifications resources on top of this.
public protocol InboxStore: Sendable {
    /// Stores `content` once and adds it to each user's inbox (unread, unseen), applying retention. Returns each
    /// user's unseen count afterwards, in the order of `users` (the same counts again for a repeated delivery).
    @discardableResult
    func deliver(org: OrgID, content: InboxContent, to users: [UserID]) throws -> [Int]
    /// Each user's unseen count, in the order of `users`.
    func unseenCounts(org: OrgID, users: [UserID]) throws -> [Int]
    /// Newest first; `before` pages back; at most `size` (1…50 in the API).
    func list(org: OrgID, user: UserID, size: Int, before: Date?) throws -> [InboxNotification]
    func status(org: OrgID, user: UserID) throws -> InboxStatus
    /// Returns how many notifications the mark touched.
    @discardableResult
    func mark(org: OrgID, user: UserID, _ mark: InboxMark) throws -> Int
}
