import Foundation
import Testing
import VolleyCore
import VolleyFCM
import VolleyHTTP2
import VolleyTestTags

/// The message id (`mid`) in FCM bodies: the first member of a tracked push's `data` (a `data` of its own right
/// after the token when the message has none), the rest of the body byte for byte as without it, none on a silent
/// push, and `mid` refused as a job's own data key.
@Suite(.tags(.unit)) struct FCMMessageIDTests {
    let tracking = MessageTracking(org: "org1", job: "job-1")
    let device = Device(platform: .android, token: DeviceToken("fcm-token:APA91b_xyz"), locale: "es-MX")

    func prepare(_ n: VolleyCore.Notification, tracked: Bool = true) throws -> FCMPreparedNotification {
        try FCMPreparedNotification(n, projectID: "proj-1", tracking: tracked ? tracking : nil)
    }

    func text(_ p: FCMPreparedNotification, _ d: Device? = nil) -> String {
        let d = d ?? device
        return String(decoding: p.body(token: d.token, locale: d.locale), as: UTF8.self)
    }

    func id(_ d: Device? = nil) -> String { tracking.messageID(for: (d ?? device).token) }

    func object(_ s: String) -> [String: Any] {
        ((try? JSONSerialization.jsonObject(with: Data(s.utf8))) as? [String: Any]) ?? [:]
    }

    @Test func theIDIsTheFirstMemberOfDataAndTheRestIsUnchanged() throws {
        let n = VolleyCore.Notification(
            title: "Sale", body: "Today", localized: ["es": .init(title: "Oferta")],
            data: ["recordId": .string("001"), "n": .number(JSONNumber(text: "12.50")!)], collapseId: "c",
            url: "https://u")
        let tracked = try prepare(n)
        let plain = try prepare(n, tracked: false)
        let other = Device(platform: .android, token: DeviceToken("fcm-other"))
        for d in [device, other] {
            let expected = text(plain, d).replacingOccurrences(
                of: #""data":{"#, with: #""data":{"mid":""# + id(d) + #"","#)
            #expect(text(tracked, d) == expected, "\(d.token)")
            let data = (object(text(tracked, d))["message"] as? [String: Any])?["data"] as? [String: Any]
            #expect(data?["mid"] as? String == id(d))
            #expect(data?["recordId"] as? String == "001")
        }
        let m = object(text(tracked))["message"] as? [String: Any]
        #expect((m?["notification"] as? [String: Any])?["title"] as? String == "Oferta")
    }

    @Test func aMessageWithoutDataGetsOneAfterTheToken() throws {
        let n = VolleyCore.Notification(title: "Hi")
        let plain = text(try prepare(n, tracked: false))
        let prefix = #"{"message":{"token":"fcm-token:APA91b_xyz","#
        #expect(plain.hasPrefix(prefix))
        #expect(text(try prepare(n)) == prefix + #""data":{"mid":""# + id() + #""},"# + plain.dropFirst(prefix.count))
        // validate_only stays where it was.
        let dry = try FCMPreparedNotification(n, projectID: "p", validateOnly: true, tracking: tracking)
        #expect(text(dry).hasSuffix(#","validate_only":true}"#))
        #expect(object(text(dry))["validate_only"] as? Bool == true)
    }

    @Test func aStringThatSpellsDataIsNotTaken() throws {
        // A top-level member before `data` whose value spells `","data":{"` with escapes: the id goes into the real
        // `data`, and the rest is unchanged.
        let raw = try JSONValue(parsing: #"{"message":{"aa":"\",\"data\":{\"z\":\"","data":{"k":"v"}}}"#)
        let n = VolleyCore.Notification(title: "Hi", fcm: raw)
        let tracked = text(try prepare(n))
        let plain = text(try prepare(n, tracked: false))
        let real = #""data":{"k""#
        #expect(tracked == plain.replacingOccurrences(of: real, with: #""data":{"mid":""# + id() + #"","k""#))
        let m = object(tracked)["message"] as? [String: Any]
        #expect((m?["data"] as? [String: Any])?["mid"] as? String == id())
        #expect(m?["aa"] as? String == #"","data":{"z":""#)
    }

    @Test func aSilentPushCarriesNone() throws {
        let n = VolleyCore.Notification(data: ["k": .string("v")], contentAvailable: true)
        #expect(text(try prepare(n)) == text(try prepare(n, tracked: false)))
        #expect(!text(try prepare(n)).contains("\"mid\""))
    }

    @Test func aJobMayNotUseTheKeyItself() throws {
        let own = VolleyCore.Notification(title: "t", data: ["mid": .string("mine")])
        let raw = VolleyCore.Notification(
            title: "t", fcm: try JSONValue(parsing: #"{"message":{"data":{"mid":"x"}}}"#))
        for (n, field) in [(own, "data.mid"), (raw, "fcm.data.mid")] {
            for tracked in [true, false] {
                do {
                    _ = try prepare(n, tracked: tracked)
                    Issue.record("\(field) was taken")
                } catch let e as NotificationError {
                    #expect(e.field == field)
                }
                #expect(throws: NotificationError.self) { try FCMPreparedNotification.check(n, tracked: tracked) }
            }
        }
    }

    @Test func theIDCountsAgainstTheDataLimit() throws {
        // FCM counts data's keys and values: `k` and its value fill it but for the id's room. (No title: the
        // notification's text counts against the same 4,096 bytes.)
        let room = FCMMessage.maxDataBytes - MessageTracking.fcmDataBytes - 1
        let fits = VolleyCore.Notification(data: ["k": .string(String(repeating: "v", count: room))])
        _ = try prepare(fits)
        try FCMPreparedNotification.check(fits, tracked: true)
        var over = fits
        over.data = ["k": .string(String(repeating: "v", count: room + 1))]
        #expect(throws: NotificationError.self) { try prepare(over) }
        #expect(throws: NotificationError.self) { try FCMPreparedNotification.check(over, tracked: true) }
        _ = try prepare(over, tracked: false)
        try FCMPreparedNotification.check(over, tracked: false)
    }

    @Test func personalPayloadsCarryTheIDOfTheirDevice() throws {
        let job = try prepare(.init(title: "T", collapseId: "c", type: "0MLx"))
        let data = ["encrypted": "true", "secret": "s3cr3t", "content": "c0nt3nt"]
        let mine = try job.personalized(for: device, with: .fcmData(data))
        let body = object(text(mine))["message"] as? [String: Any]
        let sent = body?["data"] as? [String: String]
        #expect(sent == data.merging(["mid": id()]) { a, _ in a })
        #expect(body?["notification"] == nil)
        let plain = try prepare(.init(title: "T", collapseId: "c", type: "0MLx"), tracked: false)
        let untracked = text(try plain.personalized(for: device, with: .fcmData(data)))
        #expect(
            text(mine) == untracked.replacingOccurrences(of: #""data":{"#, with: #""data":{"mid":""# + id() + #"","#))
        // `mid` in a personal data map is refused; the limit counts the id.
        #expect(throws: PersonalPayloadError.self) {
            try job.personalized(for: device, with: .fcmData(["mid": "x"]))
        }
        let full = ["k": String(repeating: "v", count: FCMMessage.maxDataBytes - 1 - MessageTracking.fcmDataBytes + 1)]
        #expect(throws: PersonalPayloadError.self) { try job.personalized(for: device, with: .fcmData(full)) }
        _ = try plain.personalized(for: device, with: .fcmData(full))
    }
}
