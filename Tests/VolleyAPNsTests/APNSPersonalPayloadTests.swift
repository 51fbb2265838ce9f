import Foundation
import Testing
import VolleyAPNs
import VolleyCore
import VolleyHTTP2
import VolleyTestTags

/// One device's own payload on the job's prepared notification: the job's headers and apns-id, that device's body,
/// refused when over the limit or meant for the other platform.
@Suite(.tags(.unit)) struct APNSPersonalPayloadTests {
    let now = Date(timeIntervalSince1970: 1_800_000_000)
    let device = Device(platform: .ios, token: DeviceToken(String(repeating: "cd", count: 32)), locale: "es-MX")

    func prepare(_ n: VolleyCore.Notification) throws -> APNSPreparedNotification {
        try APNSPreparedNotification(n, jobID: "job-p", bundleID: "com.example.app", now: now)
    }

    @Test func aWholePayloadKeepsTheJobsHeaders() throws {
        let job = try prepare(VolleyCore.Notification(title: "T", collapseId: "c1", ttl: 60, type: "0MLx"))
        let mine = try job.personalized(for: device, with: .apns(Array(#"{"aps":{"badge":4},"nid":"n1"}"#.utf8)))
        let shared = job.request(for: device, authority: "a", authorization: nil)
        let r = mine.request(for: device, authority: "a", authorization: nil)
        #expect(r.body == Array(#"{"aps":{"badge":4},"nid":"n1"}"#.utf8))
        for name in ["apns-topic", "apns-push-type", "apns-priority", "apns-expiration", "apns-collapse-id", "apns-id"]
        {
            #expect(headerValue(r, name) == headerValue(shared, name), "\(name)")
        }
    }

    @Test func aRecipientsNotificationIsEncodedInTheDevicesLanguage() throws {
        let job = try prepare(VolleyCore.Notification(title: "Hi"))
        let rendered = VolleyCore.Notification(
            title: "Hi Ada", localized: ["es": .init(title: "Hola Ada")])
        let r = try job.personalized(for: device, with: .notification(rendered))
            .request(for: device, authority: "a", authorization: nil)
        let alert = (jsonObject(r.body)["aps"] as? [String: Any])?["alert"] as? [String: Any]
        #expect(alert?["title"] as? String == "Hola Ada")
    }

    @Test func anOversizedOrForeignPayloadIsRefused() throws {
        let job = try prepare(VolleyCore.Notification(title: "T"))
        let big = Array(#"{"aps":{},"x":""#.utf8) + [UInt8](repeating: 0x61, count: 4100) + Array(#""}"#.utf8)
        #expect(throws: PersonalPayloadError.self) { try job.personalized(for: device, with: .apns(big)) }
        do throws(PersonalPayloadError) {
            _ = try job.personalized(for: device, with: .apns(big))
        } catch {
            #expect(error.reason == "PayloadTooLarge")
        }
        #expect(throws: PersonalPayloadError.self) { try job.personalized(for: device, with: .fcmData(["a": "b"])) }
    }
}
