import Foundation
import Testing
import VolleyCore
import VolleyService
import VolleyTestDoubles
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

    /// A `/v1` job naming a type keeps what the Notification Builder payload has room for: each device's
    /// `localized` texts, `data` and `url` (keys for the app), and on APNs `threadId`, `category` and
    /// `interruptionLevel`; Android gets `threadId` as a key, as Volley's FCM data carries it. (They used to be
    /// dropped silently.)
    @Test func aCustomNotificationKeepsWhatThePayloadHasRoomFor() throws {
        let n = VolleyCore.Notification(
            title: "Deal", body: "Acme", localized: ["fr": .init(title: "Affaire", body: "Acme a signé")],
            data: ["order": .string("A-17"), "count": .number(3)], category: "DEAL", threadId: "deals",
            interruptionLevel: "time-sensitive", url: "app://deal/17", type: "0MLdeal")
        let plan = try NotificationContentPlanner(clock: clock, fullContent: { _, _ in true }).plan(
            for: job(n), jobID: "j1")
        let content = try #require(plan.content)
        let french = Device(platform: .ios, token: DeviceToken("t1"), locale: "fr-FR", user: "005u")
        guard case .apns(let bytes) = try content.payload(for: french, recipient: RecipientContext(unseenCount: 1))
        else {
            Issue.record("an iOS device got no APNs payload")
            return
        }
        let o = try #require(try JSONValue(parsing: bytes).objectValue)
        #expect(o["alertTitle"] == .string("Affaire") && o["alertBody"] == .string("Acme a signé"))
        #expect(o["order"] == .string("A-17") && o["count"] == .number(3) && o["url"] == .string("app://deal/17"))
        let aps = try #require(o["aps"]?.objectValue)
        #expect(aps["thread-id"] == .string("deals") && aps["category"] == .string("DEAL"))
        #expect(aps["interruption-level"] == .string("time-sensitive"))
        let android = Device(platform: .android, token: DeviceToken("t2"), locale: "en-US", user: "005u")
        guard case .fcmData(let data) = try content.payload(for: android, recipient: RecipientContext(unseenCount: 1))
        else {
            Issue.record("an Android device got no data message")
            return
        }
        #expect(data["alertTitle"] == "Deal" && data["order"] == "A-17" && data["count"] == "3")
        #expect(data["url"] == "app://deal/17" && data["threadId"] == "deals")
    }

    /// What the payload cannot carry is refused, naming the field: an image (at the door by `NotificationCheck`,
    /// and a job that did not come through the API is dead-lettered), and a `data` key the payload uses itself. A
    /// plain push (`salesforcePayload: false`) keeps them.
    @Test func whatThePayloadCannotCarryIsRefusedNamingTheField() throws {
        let image = job(.init(title: "Deal", imageUrl: "https://x/i.png", type: "0MLdeal"))
        #expect(image.salesforcePayloadRefusal(image.notification)?.field == "imageUrl")
        #expect(NotificationCheck.none.refusal(of: image)?.error.field == "imageUrl")
        #expect {
            _ = try NotificationContentPlanner(clock: clock).plan(for: image, jobID: "j1")
        } throws: { e in
            (e as? JobRejection)?.field == "notification.imageUrl"
        }
        let clash = job(.init(title: "Deal", data: ["nid": .string("x")], type: "0MLdeal"))
        #expect(NotificationCheck.none.refusal(of: clash)?.error.field == "data.nid")
        var plain = image
        plain.salesforcePayload = false
        #expect(NotificationCheck.none.refusal(of: plain) == nil)
        #expect(NotificationCheck.none.refusal(of: job(.init(title: "Deal", imageUrl: "https://x/i.png"))) == nil)
    }

    /// A device's key is parsed once per worker, not once per job: the planner's cache is shared by every job (and
    /// every lane, which share the planner).
    @Test func aDevicesKeyIsParsedOncePerWorkerNotPerJob() throws {
        let planner = NotificationContentPlanner(clock: clock)
        let device = Device(
            platform: .ios, token: DeviceToken("t1"), user: "005u",
            encryptionKey: DeviceKeyMaterial(rsaPublicKey: "bm90IGEga2V5", cipherName: "RSA_OAEP_SHA256"))
        for id in ["j1", "j2", "j3"] {
            let content = try #require(
                try planner.plan(for: job(.init(title: "Deal", type: "0MLdeal")), jobID: JobID(id)).content)
            #expect(throws: PersonalPayloadError.self) {
                _ = try content.payload(for: device, recipient: RecipientContext(unseenCount: 1))
            }
        }
        #expect(planner.deviceKeys.parses == 1)
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

    /// A stored key whose `cipherName` is empty (written by hand, or before registration refused it) is not taken as
    /// PKCS #1 v1.5: the device gets nothing, and the reason names the field.
    @Test func aStoredEmptyCipherNameIsNotAFallBackToPKCS1() throws {
        let plan = try NotificationContentPlanner(clock: clock).plan(
            for: job(.init(title: "Deal", type: "0MLdeal")), jobID: "j1")
        let content = try #require(plan.content)
        let device = Device(
            platform: .android, token: DeviceToken("t1"), user: "005u",
            encryptionKey: DeviceKeyMaterial(rsaPublicKey: TestDeviceKeys.rsa2048, cipherName: ""))
        do throws(PersonalPayloadError) {
            _ = try content.payload(for: device, recipient: RecipientContext(unseenCount: 1))
            Issue.record("a device with an empty cipherName was sent a payload")
        } catch {
            #expect(error.reason == "InvalidDeviceKey")
            #expect(error.message.contains("cipherName"), "\(error.message)")
        }
    }
}
