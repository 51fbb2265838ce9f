import Foundation
import Synchronization
import VolleyConnect
import VolleyCore

/// Decides, per job, what each recipient's push says (`PersonalContentPlanner`):
/// - the notification: the job's own, or the stored template `templateId` names;
/// - texts holding `{{ name }}` are rendered per recipient from the directory's user attributes, with the job's
///   `customData` bound once (`TemplateContent`); what the inbox stores and the shared payload carry is the render
///   without attributes (fallbacks, else empty);
/// - a custom notification (a notification naming a `type`, without a raw `apns`/`fcm` payload, not silent, and
///   without `"salesforcePayload": false`) gets the Salesforce Notification Builder payload: `oid`, `uid`, `nid`
///   (the inbox entry), `notifType`, `sid`, the badge = the user's unseen count, encrypted with the device's key
///   when it registered one (`SalesforcePushBuilder`);
/// - every other job keeps its shared payload: no per-person content, the campaign path unchanged.
public struct NotificationContentPlanner: PersonalContentPlanner {
    /// The app's `fullContentPushNotifications` setting: whether the push shows the body, not only the title.
    public typealias FullContentSetting = @Sendable (OrgID, AppName) throws -> Bool

    public let clock: any WallClock
    let templates: (any TemplateReader)?
    let fullContent: FullContentSetting
    /// The worker's parsed device keys, shared by every job and lane (`worker.deviceKeyCacheSize`).
    public let deviceKeys: DeviceKeyCache

    public init(
        clock: any WallClock = SystemClock(), templates: (any TemplateReader)? = nil,
        fullContent: @escaping FullContentSetting = { _, _ in false },
        deviceKeys: DeviceKeyCache = DeviceKeyCache()
    ) {
        self.clock = clock
        self.templates = templates
        self.fullContent = fullContent
        self.deviceKeys = deviceKeys
    }

    /// True when `job`, whose notification is `n`, is sent with the Salesforce Notification Builder payload
    /// (`PushJob.sendsSalesforcePayload`).
    public static func sendsSalesforcePayload(_ job: PushJob, notification n: VolleyCore.Notification) -> Bool {
        job.sendsSalesforcePayload(n)
    }

    /// `sendsSalesforcePayload` for a job's own notification.
    public static func sendsSalesforcePayload(_ job: PushJob) -> Bool {
        sendsSalesforcePayload(job, notification: job.effectiveNotification)
    }

    public func plan(for job: PushJob, jobID: JobID) throws -> PersonalPlan {
        let texts = try TemplateContent.plan(for: job, reader: templates)
        let shared = texts.notification
        guard Self.sendsSalesforcePayload(job, notification: shared) else { return texts }
        // A field the payload has no room for is refused, never dropped (a job that did not come through the API).
        if let e = job.salesforcePayloadRefusal(shared) {
            throw JobRejection(.invalidNotification, e.message, field: e.field.map { "notification.\($0)" })
        }
        let content = SalesforcePersonalContent(
            job: job, notification: shared, notificationID: job.inboxEntryID(jobID: jobID),
            fullContent: try fullContent(job.org, job.app), timestamp: Int64(clock.now().timeIntervalSince1970),
            texts: texts.content as? TemplateContent, keys: deviceKeys)
        return PersonalPlan(notification: shared, content: content)
    }
}

/// One job's Salesforce Notification Builder pushes: the same notification for every recipient, with each user's
/// id and unseen count, encrypted per device when the device registered a key. A key is parsed once per worker
/// (`DeviceKeyCache`, shared by every job and lane), not once per job.
final class SalesforcePersonalContent: PersonalContent {
    let base: SalesforcePushContent
    /// The recipient's own title and body, for a templated notification.
    let texts: TemplateContent?
    /// The job's notification when it has `localized` variants: each device gets the texts of its language.
    let localized: VolleyCore.Notification?
    /// The job's pushes carry a message id (`mid`), which the provider adds after the payload is fitted.
    let tracked: Bool
    private let keys: DeviceKeyCache
    private let counts = Mutex(PersonalContentTally())

    init(
        job: PushJob, notification n: VolleyCore.Notification, notificationID: String, fullContent: Bool,
        timestamp: Int64, texts: TemplateContent? = nil, keys: DeviceKeyCache = DeviceKeyCache()
    ) {
        self.keys = keys
        self.texts = texts
        localized = n.localized?.isEmpty == false ? n : nil
        tracked = job.tracking != false
        var base = SalesforcePushContent(
            orgID: job.org.rawValue, userID: "", notificationID: notificationID, targetID: n.targetId ?? "",
            typeID: n.type ?? "", title: n.title ?? "", body: n.body ?? "", fullContent: fullContent, badge: 0,
            sound: n.sound, timestamp: timestamp)
        // What else of the notification the payload carries (`PushJob.salesforcePayloadRefusal` refused the rest).
        base.data = n.data
        base.url = n.url
        base.threadID = n.threadId
        base.category = n.category
        base.interruptionLevel = n.interruptionLevel
        self.base = base
    }

    var needs: RecipientNeeds { RecipientNeeds(unseenCount: true, attributes: texts?.needs.attributes ?? false) }

    var tally: PersonalContentTally {
        var t = counts.withLock { $0 }
        t.templateNamesMissing = texts?.tally.templateNamesMissing ?? 0
        return t
    }

    func payload(for device: Device, recipient: RecipientContext) throws(PersonalPayloadError) -> PersonalPayload {
        var content = base
        content.userID = device.user?.rawValue ?? ""
        content.badge = recipient.unseenCount ?? 0
        // The recipient's own texts (a template's render), in the device's language when the notification has
        // `localized` variants.
        if let mine = texts?.render(recipient) ?? localized {
            let text = mine.text(variant: mine.variantKey(for: device.locale))
            content.title = text.title ?? ""
            content.body = text.body ?? ""
        }
        var key: DeviceEncryptionKey?
        if let material = device.encryptionKey {
            switch keys.key(material, platform: device.platform) {
            case .key(let k): key = k
            case .invalid(let why):
                // The device asked for encrypted pushes: nothing of the content goes to it in clear.
                throw PersonalPayloadError("InvalidDeviceKey", why)
            }
        }
        let push: SalesforcePush
        do {
            let reserve =
                !tracked ? 0 : device.platform == .ios ? MessageTracking.apnsPayloadBytes : MessageTracking.fcmDataBytes
            push = try SalesforcePushBuilder.build(content, platform: device.platform, key: key, reserve: reserve)
        } catch {
            throw PersonalPayloadError("PayloadTooLarge", error.message)
        }
        if push.encrypted || push.trimmedFields > 0 {
            counts.withLock {
                if push.encrypted { $0.encrypted += 1 }
                if push.trimmedFields > 0 { $0.trimmed += 1 }
            }
        }
        switch push.payload {
        case .apns(let bytes): return .apns(bytes)
        case .fcmData(let data): return .fcmData(data)
        }
    }

}
