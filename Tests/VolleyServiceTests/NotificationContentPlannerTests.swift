import Foundation
import Testing
import VolleyCore
import VolleyService
import VolleyTestTags

/// Which jobs get the Salesforce Notification Builder payload, and what each recipient's says.
@Suite(.tags(.unit)) struct NotificationContentPlannerTests {
    let clock = ManualClock(Date(timeIntervalSince1970: 1_764_000_000))

    func job(_ n: VolleyCore.Notification, configure: (inout PushJob) -> Void = { _ in }) -> PushJob {
        var j = PushJob(id: "j1", org: "00Dorg", app: "app1", recipients: ["005u"], notification: n)
        configure(&j)
        return j
    }

    @Test func onlyCustomNotificationsGetTheSalesforcePayload() {
        let typed = VolleyCore.Notification(title: "Deal", type: "0MLdeal", targetId: "006X")
        #expect(NotificationContentPlanner.sendsSalesforcePayload(job(typed)))
        #expect(!NotificationContentPlanner.sendsSalesforcePayload(job(.init(title: "Deal"))))
        #expect(!NotificationContentPlanner.sendsSalesforcePayload(job(typed) { $0.salesforcePayload = false }))
        #expect(
            !NotificationContentPlanner.sendsSalesforcePayload(job(typed) { $0.apns = .object(["aps": .object([:])]) }))
        #expect(
            !NotificationContentPlanner.sendsSalesforcePayload(
                job(.init(contentAvailable: true, type: "0MLdeal"))))
    }

    @Test func eachRecipientGetsTheirIdsAndBadge() throws {
        let planner = NotificationContentPlanner(
            clock: clock, fullContent: { org, app in org == "00Dorg" && app == "app1" })
        let plan = try planner.plan(
            for: job(.init(title: "Deal", body: "Acme", type: "0MLdeal", targetId: "006X")) {
                $0.notificationId = "0Mlshared"
            }, jobID: "j1")
        let content = try #require(plan.content)
        #expect(content.needs == RecipientNeeds(unseenCount: true))
        let ios = Device(platform: .ios, token: DeviceToken("t1"), user: "005u")
        guard case .apns(let bytes) = try content.payload(for: ios, recipient: RecipientContext(unseenCount: 4)) else {
            Issue.record("an iOS device got no APNs payload")
            return
        }
        let o = try #require(try JSONValue(parsing: bytes).objectValue)
        #expect(o["uid"] == .string("005u") && o["oid"] == .string("00Dorg") && o["nid"] == .string("0Mlshared"))
        #expect(o["aps"]?["badge"] == .number(4) && o["sid"] == .string("006X"))
        // Full content: the title and the body.
        #expect(o["alertTitle"] == .string("Deal") && o["alertBody"] == .string("Acme"))
        let android = Device(platform: .android, token: DeviceToken("t2"), user: "005u")
        guard case .fcmData(let data) = try content.payload(for: android, recipient: RecipientContext(unseenCount: 2))
        else {
            Issue.record("an Android device got no data message")
            return
        }
        #expect(data["badge"] == "2" && data["timestamp"] == "1764000000" && data["alert"] == "Deal")
        #expect(content.tally.isEmpty)
    }

    @Test func aDeviceWhoseKeyDoesNotParseGetsNothing() throws {
        let plan = try NotificationContentPlanner(clock: clock).plan(
            for: job(.init(title: "Deal", type: "0MLdeal")), jobID: "j1")
        let content = try #require(plan.content)
        let device = Device(
            platform: .ios, token: DeviceToken("t1"), user: "005u",
            encryptionKey: DeviceKeyMaterial(rsaPublicKey: "bm90IGEga2V5", cipherName: "RSA_OAEP_SHA256"))
        do throws(PersonalPayloadError) {
            _ = try content.payload(for: device, recipient: RecipientContext(unseenCount: 1))
            Issue.record("a device with a broken key was sent a payload")
        } catch {
            #expect(error.reason == "InvalidDeviceKey")
            #expect(!error.message.contains("bm90IGEga2V5"))
        }
    }
}
