import Foundation
import VolleyAPNs
import VolleyCore
import VolleyFCM

extension NotificationCheck {
    /// The workers' preparation of a notification for the configured apps: `APNSPreparedNotification` with the app's
    /// topic for iOS, `FCMPreparedNotification.check` for Android (the messages `FCMProvider.prepare` builds, not
    /// encoded: nothing in the encoding refuses). The FCM project id only shapes the request path, so the service
    /// account file is not opened here.
    public static func providers(_ apps: [AppSettings]) -> NotificationCheck {
        let byName = Dictionary(apps.map { ($0.name, $0) }, uniquingKeysWith: { a, _ in a })
        // Any job's message ids have the same size: the door's own stand in for the job's.
        let tracking = MessageTracking(org: "door-check", job: "door-check")
        return NotificationCheck { app, platform, notification, tracked in
            guard let settings = byName[app] else { return }
            switch platform {
            case .ios:
                guard let apns = settings.apns else { return }
                _ = try APNSPreparedNotification(
                    notification, jobID: JobID("door-check"), bundleID: apns.topic, now: Date(),
                    tracking: tracked ? tracking : nil)
            case .android:
                guard settings.fcm != nil else { return }
                try FCMPreparedNotification.check(notification, tracked: tracked)
            }
        }
    }
}
