import Foundation
import VolleyCore
import VolleyRedis

/// Custom notification types per org and (type, app) settings in Redis (layout in `RecipientKeys`).
public final class RedisNotificationTypeStore: NotificationTypeStore, @unchecked Sendable {
    private let redis: SerializedRedis
    public init(client: RedisClient) { redis = SerializedRedis(client) }

    public func setType(org: OrgID, _ type: NotificationType) throws {
        let json = String(decoding: try JSONEncoder().encode(type), as: UTF8.self)
        _ = try redis.with { try $0.checked(["HSET", RecipientKeys(org: org).types, type.id, json]) }
    }

    public func removeType(org: OrgID, id: String) throws {
        _ = try redis.with { try $0.checked(["HDEL", RecipientKeys(org: org).types, id]) }
    }

    public func types(org: OrgID) throws -> [NotificationType] {
        let r = try redis.with { try $0.checked(["HGETALL", RecipientKeys(org: org).types]) }
        return r.fieldPairs.compactMap { try? JSONDecoder().decode(NotificationType.self, from: Data($0.1.utf8)) }
            .sorted { $0.id < $1.id }
    }

    /// Sets (merges) the (type, app) setting; nil fields keep their current value.
    public func setSetting(org: OrgID, app: AppName, typeID: String, enabled: Bool?, pushEnabled: Bool?) throws {
        var current = try settings(org: org, app: app)[typeID] ?? NotificationAppSetting()
        if let enabled { current.enabled = enabled }
        if let pushEnabled { current.pushEnabled = pushEnabled }
        let json = String(decoding: try JSONEncoder().encode(current), as: UTF8.self)
        _ = try redis.with { try $0.checked(["HSET", RecipientKeys(org: org).typeSettings(app), typeID, json]) }
    }

    /// Back to the defaults (Salesforce DELETE on a notification app setting).
    public func resetSetting(org: OrgID, app: AppName, typeID: String) throws {
        _ = try redis.with { try $0.checked(["HDEL", RecipientKeys(org: org).typeSettings(app), typeID]) }
    }

    public func settings(org: OrgID, app: AppName) throws -> [String: NotificationAppSetting] {
        let r = try redis.with { try $0.checked(["HGETALL", RecipientKeys(org: org).typeSettings(app)]) }
        var out: [String: NotificationAppSetting] = [:]
        for (id, json) in r.fieldPairs {
            if let s = try? JSONDecoder().decode(NotificationAppSetting.self, from: Data(json.utf8)) { out[id] = s }
        }
        return out
    }

    /// The type `typeID` and each app's setting for it, in one pipelined round trip; nil when the org does not
    /// define the type.
    public func subscriptions(org: OrgID, typeID: String, apps: [AppName]) throws
        -> [AppName: NotificationAppSetting?]?
    {
        let k = RecipientKeys(org: org)
        let r = try redis.with {
            try $0.pipeline([["HGET", k.types, typeID]] + apps.map { ["HGET", k.typeSettings($0), typeID] })
        }
        for x in r { try x.throwIfError("notification type") }
        guard r[0].string.flatMap({ try? JSONDecoder().decode(NotificationType.self, from: Data($0.utf8)) }) != nil
        else { return nil }
        var out: [AppName: NotificationAppSetting?] = [:]
        for (app, reply) in zip(apps, r.dropFirst()) {
            out[app] = .some(
                reply.string.flatMap { try? JSONDecoder().decode(NotificationAppSetting.self, from: Data($0.utf8)) })
        }
        return out
    }

    /// One type, or nil when the org does not define it.
    public func type(org: OrgID, id: String) throws -> NotificationType? {
        let r = try redis.with { try $0.checked(["HGET", RecipientKeys(org: org).types, id]) }
        return r.string.flatMap { try? JSONDecoder().decode(NotificationType.self, from: Data($0.utf8)) }
    }

    /// The org's channel switches per type (Salesforce "Notification Setting"); absent types take the defaults.
    public func orgSettings(org: OrgID) throws -> [String: NotificationOrgSetting] {
        let r = try redis.with { try $0.checked(["HGETALL", RecipientKeys(org: org).typeOrgSettings]) }
        var out: [String: NotificationOrgSetting] = [:]
        for (id, json) in r.fieldPairs {
            if let s = try? JSONDecoder().decode(NotificationOrgSetting.self, from: Data(json.utf8)) { out[id] = s }
        }
        return out
    }

    /// Merges `change` into the type's org setting (nil fields keep their value); returns the stored setting.
    @discardableResult
    public func setOrgSetting(org: OrgID, typeID: String, _ change: NotificationOrgSetting) throws
        -> NotificationOrgSetting
    {
        var current = try orgSettings(org: org)[typeID] ?? NotificationOrgSetting()
        if let v = change.desktopEnabled { current.desktopEnabled = v }
        if let v = change.emailEnabled { current.emailEnabled = v }
        if let v = change.mobileEnabled { current.mobileEnabled = v }
        if let v = change.slackEnabled { current.slackEnabled = v }
        let json = String(decoding: try JSONEncoder().encode(current), as: UTF8.self)
        _ = try redis.with { try $0.checked(["HSET", RecipientKeys(org: org).typeOrgSettings, typeID, json]) }
        return current
    }

    /// Back to the type's defaults (Salesforce DELETE on a notification setting).
    public func resetOrgSetting(org: OrgID, typeID: String) throws {
        _ = try redis.with { try $0.checked(["HDEL", RecipientKeys(org: org).typeOrgSettings, typeID]) }
    }

    /// The settings of `app` that hold for all its types (defaults when none are stored).
    public func appNotificationSettings(org: OrgID, app: AppName) throws -> AppNotificationSettings {
        let r = try redis.with { try $0.checked(["HGET", RecipientKeys(org: org).appSettings, app.rawValue]) }
        return r.string.flatMap { try? JSONDecoder().decode(AppNotificationSettings.self, from: Data($0.utf8)) }
            ?? AppNotificationSettings()
    }

    /// Merges `change` into the app's settings (nil fields keep their value); returns what is stored.
    @discardableResult
    public func setAppNotificationSettings(org: OrgID, app: AppName, _ change: AppNotificationSettings) throws
        -> AppNotificationSettings
    {
        let stored = try appNotificationSettings(org: org, app: app).merging(change)
        let json = String(decoding: try JSONEncoder().encode(stored), as: UTF8.self)
        _ = try redis.with { try $0.checked(["HSET", RecipientKeys(org: org).appSettings, app.rawValue, json]) }
        return stored
    }

    public func fullContent(org: OrgID, app: AppName) throws -> Bool {
        try appNotificationSettings(org: org, app: app).fullContent
    }

    /// The type's definition, this app's setting and the org's channel switches decide. An org that turned the
    /// mobile channel off makes the type behave as one without a mobile channel (stored in-app, not pushed).
    public func policy(org: OrgID, app: AppName, typeID: String?) throws -> DeliveryPolicy {
        guard let typeID else { return .pushAndInbox }
        let k = RecipientKeys(org: org)
        let r = try redis.with {
            try $0.pipeline([
                ["HGET", k.types, typeID], ["HGET", k.typeSettings(app), typeID], ["HGET", k.typeOrgSettings, typeID],
            ])
        }
        for x in r { try x.throwIfError("notification type") }
        var type = r[0].string.flatMap { try? JSONDecoder().decode(NotificationType.self, from: Data($0.utf8)) }
        let setting = r[1].string.flatMap {
            try? JSONDecoder().decode(NotificationAppSetting.self, from: Data($0.utf8))
        }
        let orgSetting = r[2].string.flatMap {
            try? JSONDecoder().decode(NotificationOrgSetting.self, from: Data($0.utf8))
        }
        if let t = type, let orgSetting { type?.mobile = orgSetting.effective(for: t).mobile }
        return DeliveryPolicy.decide(typeID: typeID, type: type, setting: setting, app: app)
    }
}
