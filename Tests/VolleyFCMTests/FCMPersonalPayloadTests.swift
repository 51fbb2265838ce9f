import Foundation
import Testing
import VolleyCore
import VolleyFCM
import VolleyHTTP2
import VolleyTestTags

/// One device's own FCM message: a data message with the job's delivery options and no `notification` block, or
/// the job's notification with that recipient's texts.
@Suite(.tags(.unit)) struct FCMPersonalPayloadTests {
    let device = Device(platform: .android, token: DeviceToken("fcm-token:APA91b_p"))

    func message(_ p: FCMPreparedNotification) -> [String: Any] {
        let r = p.request(for: device, authority: "fcm.googleapis.com", authorization: "Bearer t")
        let o = (try? JSONSerialization.jsonObject(with: Data(r.body))) as? [String: Any]
        return o?["message"] as? [String: Any] ?? [:]
    }

    @Test func aDataMessageKeepsTheJobsOptionsAndShowsNothingItself() throws {
        let job = try FCMPreparedNotification(
            VolleyCore.Notification(title: "T", body: "B", collapseId: "deals", ttl: 90, type: "0MLx"), projectID: "p")
        let m = message(try job.personalized(for: device, with: .fcmData(["nid": "n1", "badge": "3"])))
        #expect(m["token"] as? String == device.token.rawValue)
        #expect(m["data"] as? [String: String] == ["nid": "n1", "badge": "3"])
        #expect(m["notification"] == nil)
        let android = m["android"] as? [String: Any]
        #expect(android?["priority"] as? String == "HIGH" && android?["ttl"] as? String == "90s")
        #expect(android?["collapse_key"] as? String == "deals" && android?["notification"] == nil)
    }

    @Test func aRecipientsNotificationIsEncodedLikeTheJobs() throws {
        let job = try FCMPreparedNotification(VolleyCore.Notification(title: "Hi"), projectID: "p")
        let m = message(try job.personalized(for: device, with: .notification(.init(title: "Hi Ada", body: "x"))))
        #expect((m["notification"] as? [String: Any])?["title"] as? String == "Hi Ada")
    }

    @Test func anOversizedOrForeignPayloadIsRefused() throws {
        let job = try FCMPreparedNotification(VolleyCore.Notification(title: "T"), projectID: "p")
        do throws(PersonalPayloadError) {
            _ = try job.personalized(for: device, with: .fcmData(["big": String(repeating: "x", count: 4100)]))
            Issue.record("an oversized data message was accepted")
        } catch {
            #expect(error.reason == "PayloadTooLarge")
        }
        #expect(throws: PersonalPayloadError.self) { try job.personalized(for: device, with: .apns([])) }
    }
}
