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

    public init(
        clock: any WallClock = SystemClock(), templates: (any TemplateReader)? = nil,
        fullContent: @escaping FullContentSetting = { _, _ in false }
    ) {
        self.clock = clock
        self.templates = templates
        self.fullContent = fullContent
    }

    /// True when `job`, whose notification is `n`, is sent with the Salesforce Notification Builder payload.
    public static func sendsSalesforcePayload(_ job: PushJob, notification n: VolleyCore.Notification) -> Bool {
        job.salesforcePayload != false && n.type != nil && n.apns == nil && n.fcm == nil && !n.isSilent
    }

    /// `sendsSalesforcePayload` for a job's own notification.
    public static func sendsSalesforcePayload(_ job: PushJob) -> Bool {
        sendsSalesforcePayload(job, notification: job.effectiveNotification)
    }

    public func plan(for job: PushJob, jobID: JobID) throws -> PersonalPlan {
        let texts = try TemplateContent.plan(for: job, reader: templates)
        let shared = texts.notification
        guard Self.sendsSalesforcePayload(job, notification: shared) else { return texts }
        let content = SalesforcePersonalContent(
            job: job, notification: shared, notificationID: job.inboxEntryID(jobID: jobID),
            fullContent: try fullContent(job.org, job.app), timestamp: Int64(clock.now().timeIntervalSince1970),
            texts: texts.content as? TemplateContent)
        return PersonalPlan(notification: shared, content: content)
    }
}

/// One job's Salesforce Notification Builder pushes: the same notification for every recipient, with each user's
/// id and unseen count, encrypted per device when the device registered a key. A key is parsed once per delivery
/// and shared by the lane's sends.
final class SalesforcePersonalContent: PersonalContent {
    let base: SalesforcePushContent
    /// The recipient's own title and body, for a templated notification.
    let texts: TemplateContent?
    /// The job's pushes carry a message id (`mid`), which the provider adds after the payload is fitted.
    let tracked: Bool
    private let keys = Mutex<[KeyID: ParsedKey]>([:])
    private let counts = Mutex(PersonalContentTally())

    struct KeyID: Hashable {
        var material: DeviceKeyMaterial
        var platform: Platform
    }

    enum ParsedKey {
        case key(DeviceEncryptionKey)
        case invalid(String)
    }

    init(
        job: PushJob, notification n: VolleyCore.Notification, notificationID: String, fullContent: Bool,
        timestamp: Int64, texts: TemplateContent? = nil
    ) {
        self.texts = texts
        tracked = job.tracking != false
        base = SalesforcePushContent(
            orgID: job.org.rawValue, userID: "", notificationID: notificationID, targetID: n.targetId ?? "",
            typeID: n.type ?? "", title: n.title ?? "", body: n.body ?? "", fullContent: fullContent, badge: 0,
            sound: n.sound, timestamp: timestamp)
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
        if let texts {
            let mine = texts.render(recipient)
            content.title = mine.title ?? ""
            content.body = mine.body ?? ""
        }
        var key: DeviceEncryptionKey?
        if let material = device.encryptionKey {
            switch parsed(material, platform: device.platform) {
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

    private func parsed(_ material: DeviceKeyMaterial, platform: Platform) -> ParsedKey {
        let id = KeyID(material: material, platform: platform)
        if let k = keys.withLock({ $0[id] }) { return k }
        let k: ParsedKey
        do {
            k = .key(
                try DeviceEncryptionKey(
                    rsaPublicKey: material.rsaPublicKey, cipherName: material.cipherName, platform: platform))
        } catch {
            k = .invalid("the device's registered key does not parse: \(error)")
        }
        keys.withLock { $0[id] = k }
        return k
    }
}
