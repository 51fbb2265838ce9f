import Foundation
import VolleyCore

/// Salesforce's "Notification" output: every field is written, absent ones as null.
public struct ConnectNotification: Sendable, Hashable, Encodable {
    /// Lengths when `trimMessages` is true (the default).
    public static let trimmedTitle = 120
    public static let trimmedBody = 320

    public var id: String
    public var type: String?
    public var messageTitle: String
    public var messageBody: String
    public var target: String?
    public var targetPageRef: String?
    public var read: Bool
    public var seen: Bool
    public var organizationId: String
    public var recipientId: String
    public var lastModified: Date
    public var mostRecentActivityDate: Date
    public var count = 1
    public var image: String?
    public var url: String?
    public var additionalData: String?
    public var communityId: String?
    public var communityName: String?

    /// `trim`: title at most 120 characters and body at most 320 (Salesforce's `trimMessages`).
    public init(_ n: InboxNotification, org: OrgID, user: UserID, trim: Bool) {
        id = n.id
        type = n.type
        messageTitle = trim ? InboxNotification.clip(n.title, Self.trimmedTitle) : n.title
        messageBody = trim ? InboxNotification.clip(n.body, Self.trimmedBody) : n.body
        target = n.target
        targetPageRef = n.targetPageRef
        read = n.read
        seen = n.seen
        organizationId = org.rawValue
        recipientId = user.rawValue
        // The inbox keeps the creation time only: marks do not move it.
        lastModified = n.createdAt
        mostRecentActivityDate = n.createdAt
    }

    enum Key: String, CodingKey {
        case id, type, messageTitle, messageBody, target, targetPageRef, read, seen, organizationId, recipientId
        case lastModified, mostRecentActivityDate, count, image, url, additionalData, communityId, communityName
    }

    public func encode(to encoder: any Encoder) throws {
        var c = encoder.container(keyedBy: Key.self)
        func opt(_ v: String?, _ k: Key) throws {
            if let v { try c.encode(v, forKey: k) } else { try c.encodeNil(forKey: k) }
        }
        try c.encode(id, forKey: .id)
        try opt(type, .type)
        try c.encode(messageTitle, forKey: .messageTitle)
        try c.encode(messageBody, forKey: .messageBody)
        try opt(target, .target)
        try opt(targetPageRef, .targetPageRef)
        try c.encode(read, forKey: .read)
        try c.encode(seen, forKey: .seen)
        try c.encode(organizationId, forKey: .organizationId)
        try c.encode(recipientId, forKey: .recipientId)
        try c.encode(RFC3339.format(lastModified, .milliseconds), forKey: .lastModified)
        try c.encode(RFC3339.format(mostRecentActivityDate, .milliseconds), forKey: .mostRecentActivityDate)
        try c.encode(count, forKey: .count)
        try opt(image, .image)
        try opt(url, .url)
        try opt(additionalData, .additionalData)
        try opt(communityId, .communityId)
        try opt(communityName, .communityName)
    }
}

/// Salesforce's "Notification Collection".
struct ConnectNotificationCollection: Sendable, Encodable {
    var notifications: [ConnectNotification]
}

/// Salesforce's "Notification Status": dates are now when there is nothing to date.
struct ConnectNotificationStatus: Sendable, Encodable {
    var lastActivity: String
    var oldestUnread: String
    var oldestUnseen: String
    var unreadCount: Int
    var unseenCount: Int

    init(_ s: InboxStatus, now: Date) {
        lastActivity = RFC3339.format(s.lastActivity ?? now, .milliseconds)
        oldestUnread = RFC3339.format(s.oldestUnread ?? now, .milliseconds)
        oldestUnseen = RFC3339.format(s.oldestUnseen ?? now, .milliseconds)
        unreadCount = s.unreadCount
        unseenCount = s.unseenCount
    }
}

/// Salesforce's "Notification App Setting" for one (type, app), with the defaults applied.
public struct ConnectAppSetting: Sendable, Hashable, Encodable {
    public var applicationDevName: String
    public var applicationId: String
    public var applicationName: String
    public var applicationNamespace: String?
    public var enabled: Bool
    public var notificationLabel: String
    public var notificationTypeName: String
    public var notificationTypeNamespace: String?
    public var notificationTypeOrId: String
    public var pushEnabled: Bool
    /// The app's full-content setting (Volley's own field: one value per app, the same on every type's setting).
    public var fullContentPushNotifications: Bool

    /// enabled (the app's subscription to the type) defaults to false; pushEnabled to the type's mobile channel as
    /// the org left it.
    public init(
        type: NotificationType, app: AppName, setting: NotificationAppSetting?, org: NotificationOrgSetting?,
        appSettings: AppNotificationSettings
    ) {
        fullContentPushNotifications = appSettings.fullContent
        applicationDevName = app.rawValue
        applicationId = app.rawValue
        applicationName = app.rawValue
        enabled = setting?.subscribed ?? false
        notificationLabel = type.name
        notificationTypeName = type.id
        notificationTypeOrId = type.id
        let mobile = (org ?? NotificationOrgSetting()).effective(for: type).mobile
        pushEnabled = mobile && (setting?.pushEnabled ?? true)
    }

    enum Key: String, CodingKey {
        case applicationDevName, applicationId, applicationName, applicationNamespace, enabled, notificationLabel
        case notificationTypeName, notificationTypeNamespace, notificationTypeOrId, pushEnabled
        case fullContentPushNotifications
    }

    public func encode(to encoder: any Encoder) throws {
        var c = encoder.container(keyedBy: Key.self)
        try c.encode(applicationDevName, forKey: .applicationDevName)
        try c.encode(applicationId, forKey: .applicationId)
        try c.encode(applicationName, forKey: .applicationName)
        try c.encode(applicationNamespace, forKey: .applicationNamespace)
        try c.encode(enabled, forKey: .enabled)
        try c.encode(notificationLabel, forKey: .notificationLabel)
        try c.encode(notificationTypeName, forKey: .notificationTypeName)
        try c.encode(notificationTypeNamespace, forKey: .notificationTypeNamespace)
        try c.encode(notificationTypeOrId, forKey: .notificationTypeOrId)
        try c.encode(pushEnabled, forKey: .pushEnabled)
        try c.encode(fullContentPushNotifications, forKey: .fullContentPushNotifications)
    }
}

struct ConnectAppSettingCollection: Sendable, Encodable {
    var notificationAppSettings: [ConnectAppSetting]
}

/// Salesforce's "Notification Setting" for one type in the org, with the defaults applied.
public struct ConnectOrgSetting: Sendable, Hashable, Encodable {
    public var desktopEnabled: Bool
    public var emailEnabled: Bool
    public var mobileEnabled: Bool
    public var slackEnabled: Bool
    public var notificationLabel: String
    public var notificationTypeName: String
    public var notificationTypeNamespace: String?
    public var notificationTypeOrId: String

    public init(type: NotificationType, setting: NotificationOrgSetting?) {
        let e = (setting ?? NotificationOrgSetting()).effective(for: type)
        desktopEnabled = e.desktop
        emailEnabled = e.email
        mobileEnabled = e.mobile
        slackEnabled = e.slack
        notificationLabel = type.name
        notificationTypeName = type.id
        notificationTypeOrId = type.id
    }

    enum Key: String, CodingKey {
        case desktopEnabled, emailEnabled, mobileEnabled, slackEnabled, notificationLabel, notificationTypeName
        case notificationTypeNamespace, notificationTypeOrId
    }

    public func encode(to encoder: any Encoder) throws {
        var c = encoder.container(keyedBy: Key.self)
        try c.encode(desktopEnabled, forKey: .desktopEnabled)
        try c.encode(emailEnabled, forKey: .emailEnabled)
        try c.encode(mobileEnabled, forKey: .mobileEnabled)
        try c.encode(slackEnabled, forKey: .slackEnabled)
        try c.encode(notificationLabel, forKey: .notificationLabel)
        try c.encode(notificationTypeName, forKey: .notificationTypeName)
        try c.encode(notificationTypeNamespace, forKey: .notificationTypeNamespace)
        try c.encode(notificationTypeOrId, forKey: .notificationTypeOrId)
    }
}

struct ConnectOrgSettingCollection: Sendable, Encodable {
    var notificationSettings: [ConnectOrgSetting]
}
