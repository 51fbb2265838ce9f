import Foundation
import Testing
import VolleyAPNs
import VolleyCore
import VolleyHTTP2
import VolleyTestTags

/// The message id (`mid`) in APNs payloads: the first member of a tracked alert push's payload, the rest of the
/// payload byte for byte as without it, none on other push types, and `mid` refused as a job's own key.
@Suite(.tags(.unit)) struct APNSMessageIDTests {
    let now = Date(timeIntervalSince1970: 1_800_000_000)
    let tracking = MessageTracking(org: "org1", job: "job-1")
    let device = Device(platform: .ios, token: DeviceToken(String(repeating: "ab", count: 32)), locale: "es-MX")

    func prepare(_ n: VolleyCore.Notification, tracked: Bool = true) throws -> APNSPreparedNotification {
        try APNSPreparedNotification(
            n, jobID: "job-1", bundleID: "com.example.app", now: now, tracking: tracked ? tracking : nil)
    }

    func body(_ p: APNSPreparedNotification, _ d: Device? = nil) -> [UInt8] {
        p.request(for: d ?? device, authority: "a", authorization: nil).body
    }

    /// `untracked` with `"mid":"<id>",` after its opening brace.
    func withID(_ untracked: [UInt8], _ token: DeviceToken) -> [UInt8] {
        Array(#"{"mid":""#.utf8) + Array(tracking.messageID(for: token).utf8) + Array(#"","#.utf8)
            + untracked.dropFirst()
    }

    @Test func aTrackedAlertStartsWithTheDevicesIDAndTheRestIsUnchanged() throws {
        let n = VolleyCore.Notification(
            title: "Sale", body: "Today", localized: ["es": .init(title: "Oferta")], sound: "default", badge: 2,
            data: ["recordId": .string("001"), "n": .number(JSONNumber(text: "12.50")!)], category: "DEAL",
            url: "https://x/y")
        let tracked = try prepare(n)
        let plain = try prepare(n, tracked: false)
        let other = Device(platform: .ios, token: DeviceToken(String(repeating: "cd", count: 32)))
        for d in [device, other] {
            #expect(body(tracked, d) == withID(body(plain, d), d.token), "\(d.token)")
            let json = jsonObject(body(tracked, d))
            #expect(json["mid"] as? String == tracking.messageID(for: d.token))
        }
        // Each device its own id; the language variant is the device's.
        #expect(body(tracked, device) != body(tracked, other))
        let alert = (jsonObject(body(tracked))["aps"] as? [String: Any])?["alert"] as? [String: Any]
        #expect(alert?["title"] as? String == "Oferta")
        // The headers do not change.
        let a = tracked.request(for: device, authority: "a", authorization: nil)
        let b = plain.request(for: device, authority: "a", authorization: nil)
        #expect(a.headers == b.headers)
        #expect(tracked.payloadBytes == plain.payloadBytes + MessageTracking.apnsPayloadBytes)
    }

    @Test func aRawPayloadCarriesTheIDToo() throws {
        let raw = try JSONValue(parsing: #"{"aps":{"alert":"Hi"},"custom":{"mid":"nested is theirs"}}"#)
        let p = try prepare(.init(apns: raw))
        #expect(body(p) == withID(raw.encoded(), device.token))
    }

    @Test func silentAndOtherPushTypesCarryNone() throws {
        for n in [
            VolleyCore.Notification(contentAvailable: true),
            VolleyCore.Notification(title: "Call", pushType: "voip"),
            VolleyCore.Notification(apns: try JSONValue(parsing: #"{"aps":{"content-available":1}}"#)),
        ] {
            let p = try prepare(n)
            #expect(jsonObject(body(p))["mid"] == nil, "\(n)")
            #expect(body(p) == body(try prepare(n, tracked: false)))
        }
    }

    @Test func aJobMayNotUseTheKeyItself() {
        for (n, field) in [
            (VolleyCore.Notification(title: "t", data: ["mid": .string("mine")]), "data.mid"),
            (VolleyCore.Notification(apns: .object(["aps": .object([:]), "mid": .string("x")])), "apns.mid"),
        ] {
            for tracked in [true, false] {
                #expect(throws: NotificationError.self) { try prepare(n, tracked: tracked) }
                do {
                    _ = try prepare(n, tracked: tracked)
                } catch let e as NotificationError {
                    #expect(e.field == field)
                    #expect(e.message.contains("mid"))
                } catch {
                    Issue.record("\(error)")
                }
            }
        }
    }

    @Test func theIDCountsAgainstThePayloadLimit() throws {
        // A body that fits with exactly the id's room to spare fits untracked and tracked; one byte more does not.
        let base = try prepare(.init(title: ""), tracked: false).payloadBytes
        let fits = VolleyCore.Notification(
            title: String(repeating: "x", count: APNSPayload.maxBytes - MessageTracking.apnsPayloadBytes - base))
        #expect(try prepare(fits).payloadBytes == APNSPayload.maxBytes)
        var over = fits
        over.title! += "x"
        #expect(throws: NotificationError.self) { try prepare(over) }
        #expect(
            try prepare(over, tracked: false).payloadBytes == APNSPayload.maxBytes - MessageTracking.apnsPayloadBytes
                + 1)
    }

    @Test func personalPayloadsCarryTheIDOfTheirDevice() throws {
        let job = try prepare(.init(title: "T", type: "0MLx"))
        let own = Array(#"{"aps":{"badge":4},"content":"…","encrypted":true}"#.utf8)
        let mine = try job.personalized(for: device, with: .apns(own))
        #expect(body(mine) == withID(own, device.token))
        let rendered = try job.personalized(for: device, with: .notification(.init(title: "Hi Ada")))
        #expect(jsonObject(body(rendered))["mid"] as? String == tracking.messageID(for: device.token))
        // The limit counts the id.
        let big =
            Array(#"{"aps":{},"x":""#.utf8) + Array(repeating: UInt8(ascii: "y"), count: 4060) + Array(#""}"#.utf8)
        #expect(big.count <= APNSPayload.maxBytes)
        #expect(throws: PersonalPayloadError.self) { try job.personalized(for: device, with: .apns(big)) }
    }
}
