import Foundation
import Synchronization
import VolleyConnect
import VolleyCore

/// Decides, per job, what each recipient's push says (`PersonalContentPlanner`):
/// - a custom notification (a job whose notification names a `type`, without a raw `apns`/`fcm` payload and without
///   `"salesforcePayload": false`) gets the Salesforce Notification Builder payload: `oid`, `uid`, `nid` (the inbox
///   entry), `notifType`, `sid`, the badge = the user's unseen count, encrypted with the device's key when it
///   registered one (`SalesforcePushBuilder`);
/// - every other job keeps its shared payload: no per-person content, the campaign path unchanged.
public struct NotificationContentPlanner: PersonalContentPlanner {
    /// The app's `fullContentPushNotifications` setting: whether the push shows the body, not only the title.
    public typealias FullContentSetting = @Sendable (OrgID, AppName) throws -> Bool

    public let clock: any WallClock
    let fullContent: FullContentSetting

    public init(clock: any WallClock = SystemClock(), fullContent: @escaping FullContentSetting = { _, _ in false }) {
        self.clock = clock
        self.fullContent = fullContent
    }

    /// True when `job` is sent with the Salesforce Notification Builder payload.
    public static func sendsSalesforcePayload(_ job: PushJob) -> Bool {
        let n = job.effectiveNotification
        return job.salesforcePayload != false && n.type != nil && n.apns == nil && n.fcm == nil && !n.isSilent
    }

    public func plan(for job: PushJob, jobID: JobID) throws -> PersonalPlan {
        let notification = job.effectiveNotification
        guard Self.sendsSalesforcePayload(job) else { return PersonalPlan(notification: notification, content: nil) }
        let content = SalesforcePersonalContent(
            job: job, notification: notification, notificationID: job.inboxEntryID(jobID: jobID),
            fullContent: try fullContent(job.org, job.app),
            timestamp: Int64(clock.now().timeIntervalSince1970))
        return PersonalPlan(notification: notification, content: content)
    }
}

/// One job's Salesforce Notification Builder pushes: the same notification for every recipient, with each user's
/// id and unseen count, encrypted per device when the device registered a key. A key is parsed once per delivery
/// and shared by the lane's sends.
final class SalesforcePersonalContent: PersonalContent {
    let base: SalesforcePushContent
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
        timestamp: Int64
    ) {
        base = SalesforcePushContent(
            orgID: job.org.rawValue, userID: "", notificationID: notificationID, targetID: n.targetId ?? "",
            typeID: n.type ?? "", title: n.title ?? "", body: n.body ?? "", fullContent: fullContent, badge: 0,
            sound: n.sound, timestamp: timestamp)
    }

    var needs: RecipientNeeds { RecipientNeeds(unseenCount: true) }

    var tally: PersonalContentTally { counts.withLock { $0 } }

    func payload(for device: Device, recipient: RecipientContext) throws(PersonalPayloadError) -> PersonalPayload {
        var content = base
        content.userID = device.user?.rawValue ?? ""
        content.badge = recipient.unseenCount ?? 0
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
            push = try SalesforcePushBuilder.build(content, platform: device.platform, key: key)
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
