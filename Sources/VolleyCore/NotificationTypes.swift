import Foundation

/// A custom notification type (Salesforce CustomNotificationType: DeveloperName, MasterLabel, Desktop, Mobile).
public struct NotificationType: Sendable, Hashable, Codable {
    public var id: String
    public var name: String
    /// Mobile delivery channel (push + mobile in-app tray).
    public var mobile: Bool
    /// Desktop delivery channel.
    public var desktop: Bool
    public init(id: String, name: String, mobile: Bool = true, desktop: Bool = false) {
        self.id = id
        self.name = name
        self.mobile = mobile
        self.desktop = desktop
    }
}

/// Salesforce "Notification App Setting" for one (type, app): `enabled` (the app is subscribed to the type: its
/// notifications are pushed through the app and shown in its tray) and `pushEnabled`. A custom type reaches only the
/// apps subscribed to it (the guide: "Notification Builder push notifications require you to subscribe your
/// connected app to the custom notification types you plan to send"), so `enabled` defaults to false: an app with
/// no setting for a type, or one that never said `enabled: true`, is not subscribed. `pushEnabled` defaults to the
/// type's mobile channel.
public struct NotificationAppSetting: Sendable, Hashable, Codable {
    public var enabled: Bool?
    public var pushEnabled: Bool?
    public init(enabled: Bool? = nil, pushEnabled: Bool? = nil) {
        self.enabled = enabled
        self.pushEnabled = pushEnabled
    }

    /// True when the app is subscribed to the type: its setting says `enabled: true`.
    public var subscribed: Bool { enabled == true }
}

/// The settings of one app in an org that hold for all its types: Salesforce's connected-app option "Enable full
/// content push notifications" (`fullContentPushNotifications`, default off). With it off a custom notification's
/// push shows its title only (`alertTitle` "", `alertBody` = the title); on, the title and the body.
public struct AppNotificationSettings: Sendable, Hashable, Codable {
    public var fullContentPushNotifications: Bool?
    public init(fullContentPushNotifications: Bool? = nil) {
        self.fullContentPushNotifications = fullContentPushNotifications
    }

    /// The full-content setting with its default applied (off).
    public var fullContent: Bool { fullContentPushNotifications == true }

    /// `self` with the values `change` gives (nil fields keep theirs).
    public func merging(_ change: AppNotificationSettings) -> AppNotificationSettings {
        var out = self
        if let v = change.fullContentPushNotifications { out.fullContentPushNotifications = v }
        return out
    }
}

/// Salesforce "Notification Setting" for one type in an org: which delivery channels the org allows. Absent values
/// take the defaults from the type (desktop and mobile from its channels; email and Slack off). An org can turn off
/// a channel the type has, not turn on one it lacks.
public struct NotificationOrgSetting: Sendable, Hashable, Codable {
    public var desktopEnabled: Bool?
    public var emailEnabled: Bool?
    public var mobileEnabled: Bool?
    public var slackEnabled: Bool?
    public init(
        desktopEnabled: Bool? = nil, emailEnabled: Bool? = nil, mobileEnabled: Bool? = nil, slackEnabled: Bool? = nil
    ) {
        self.desktopEnabled = desktopEnabled
        self.emailEnabled = emailEnabled
        self.mobileEnabled = mobileEnabled
        self.slackEnabled = slackEnabled
    }

    /// Effective channels for `type`: the type's channel and-ed with the org's choice.
    public func effective(for type: NotificationType) -> (desktop: Bool, email: Bool, mobile: Bool, slack: Bool) {
        (
            desktop: type.desktop && desktopEnabled != false, email: emailEnabled == true,
            mobile: type.mobile && mobileEnabled != false, slack: slackEnabled == true
        )
    }
}

/// What a job may do, decided once per job from its type and app.
public enum DeliveryPolicy: Sendable, Hashable {
    /// Store in-app and push.
    case pushAndInbox
    /// Store in-app only (push disabled for this type and app, or the type has no mobile channel).
    case inboxOnly(reason: String)
    /// Send nothing: the type is unknown, or the app is not subscribed to it. Reported `not_enabled`, the reason
    /// in the report's `statusDetail`.
    case notEnabled(reason: String)

    /// Pure decision. A job without a type is a plain push: push and store. A typed job goes through its app only
    /// when the app is subscribed to the type (`NotificationAppSetting.subscribed`); otherwise nothing is pushed
    /// or stored for it.
    public static func decide(typeID: String?, type: NotificationType?, setting: NotificationAppSetting?, app: AppName)
        -> DeliveryPolicy
    {
        guard let typeID else { return .pushAndInbox }
        guard let type else {
            return .notEnabled(reason: "notification type '\(typeID)' is not defined for this org (volley types set)")
        }
        if setting?.enabled == false {
            return .notEnabled(reason: "notification type '\(typeID)' is disabled for app \(app)")
        }
        if setting?.subscribed != true {
            return .notEnabled(
                reason: "app \(app) is not subscribed to notification type '\(typeID)' (subscribe it: "
                    + "volley types app-setting --enabled true, or the app setting's enabled: true)")
        }
        if !type.mobile { return .inboxOnly(reason: "notification type '\(typeID)' has no mobile channel") }
        if setting?.pushEnabled == false {
            return .inboxOnly(reason: "push is disabled for type '\(typeID)' in app \(app)")
        }
        return .pushAndInbox
    }

    public var sendsPush: Bool { if case .pushAndInbox = self { true } else { false } }
    public var storesInbox: Bool { if case .notEnabled = self { false } else { true } }
}

/// Org notification types and per-app settings.
public protocol NotificationTypeStore: Sendable {
    func policy(org: OrgID, app: AppName, typeID: String?) throws -> DeliveryPolicy
    /// The app's full-content setting (`AppNotificationSettings.fullContent`): whether a custom notification's push
    /// carries its body as well as its title.
    func fullContent(org: OrgID, app: AppName) throws -> Bool
}

extension DeliveryPolicy {
    /// True when a type is delivered through `app` at all: the apps an org may use that a custom notification of
    /// the type goes to. An app is subscribed when its (type, app) setting says `enabled: true` (the guide's
    /// "subscribe your connected app to the custom notification type"; `volley types app-setting --enabled true`).
    public static func subscribes(_ setting: NotificationAppSetting?) -> Bool { setting?.subscribed == true }
}
