import Foundation
import Testing
import VolleyCore
import VolleyTestTags

/// How jobs may spell what OneSignal spells differently, and the time to live every job gets.
@Suite(.tags(.unit)) struct OneSignalSpellingsTests {
    func notification(_ json: String) throws -> VolleyCore.Notification {
        try VolleyCore.Notification(json: JSONValue(parsing: json), at: [.key("notification")])
    }

    @Test(
        arguments: [
            ("time_sensitive", "time-sensitive"), ("time-sensitive", "time-sensitive"), ("passive", "passive"),
            ("active", "active"), ("critical", "critical"), ("loud", "loud"),
        ])
    func interruptionLevelsTakeOneSignalsSpelling(_ given: String, _ apns: String) throws {
        #expect(try notification(#"{"interruptionLevel":"\#(given)"}"#).interruptionLevel == apns)
    }

    @Test func priorityIsANameOrOneSignalsNumber() throws {
        #expect(try notification(#"{"priority":10}"#).priority == .high)
        #expect(try notification(#"{"priority":5}"#).priority == .normal)
        #expect(try notification(#"{"priority":"high"}"#).priority == .high)
        #expect(try notification(#"{"priority":"normal"}"#).priority == .normal)
        #expect(try notification(#"{}"#).priority == nil)
        for bad in ["10.5", "1e100", #""urgent""#, #""10""#, "true"] {
            do {
                _ = try notification(#"{"priority":\#(bad)}"#)
                Issue.record("priority \(bad) was taken")
            } catch let e as JSONFieldError {
                #expect(e.path == [.key("notification"), .key("priority")], "\(bad)")
            }
        }
    }

    /// OneSignal: "The value of 10 assigns high priority …; values other than 10 set the notification to normal
    /// priority." Every whole number is taken by that rule.
    @Test(arguments: ["0", "1", "7", "9", "11", "-1", "100", "5.0"])
    func everyWholeNumberOtherThan10IsNormal(_ number: String) throws {
        #expect(try notification(#"{"priority":\#(number)}"#).priority == .normal, "\(number)")
    }

    @Test func tenIsHighHoweverItIsWritten() throws {
        for ten in ["10", "10.0", "1e1"] {
            #expect(try notification(#"{"priority":\#(ten)}"#).priority == .high, "\(ten)")
        }
    }

    @Test func ttlDefaultsToThreeDaysAndIsCappedAt28() throws {
        #expect(try VolleyCore.Notification(title: "t").effectiveTTL(reason: "X") == 259_200)
        #expect(try VolleyCore.Notification(title: "t", ttl: 0).effectiveTTL(reason: "X") == 0)
        #expect(try VolleyCore.Notification(title: "t", ttl: 2_419_200).effectiveTTL(reason: "X") == 2_419_200)
        for bad in [-1, 2_419_201] {
            do {
                _ = try VolleyCore.Notification(title: "t", ttl: bad).effectiveTTL(reason: "BadExpirationDate")
                Issue.record("ttl \(bad) was taken")
            } catch {
                #expect(error.field == "ttl" && error.reason == "BadExpirationDate")
            }
        }
    }
}

/// Which jobs the recipients' in-app inboxes keep: Volley's own shape, not a raw (Apex-style) payload.
@Suite(.tags(.unit)) struct PushJobInboxTests {
    func job(
        _ n: VolleyCore.Notification, apns: JSONValue? = nil, fcm: JSONValue? = nil, inbox: Bool? = nil
    ) -> PushJob {
        var j = PushJob(id: "j", org: "o", app: "a", recipients: ["u"], notification: n, apns: apns, fcm: fcm)
        j.inbox = inbox
        return j
    }

    static let aps: JSONValue = .object(["aps": .object(["alert": .string("hi")])])
    static let data: JSONValue = .object(["data": .object(["k": .string("v")])])

    @Test func volleysOwnShapeIsStored() {
        #expect(job(.init(title: "t", body: "b")).storesInbox)
        #expect(job(.init(body: "b", type: "0ML1")).storesInbox)
        #expect(job(.init(localized: ["es": .init(title: "Hola")])).storesInbox)
        // A raw override beside text of its own is still Volley's shape.
        #expect(job(.init(title: "t"), apns: Self.aps).storesInbox)
        #expect(job(.init(title: "t", fcm: Self.data)).storesInbox)
    }

    @Test func aRawPayloadIsPushOnly() {
        #expect(!job(.init(), apns: Self.aps).storesInbox)
        #expect(!job(.init(), fcm: Self.data).storesInbox)
        #expect(!job(.init(apns: Self.aps)).storesInbox)
        #expect(!job(.init(data: ["k": .string("v")], fcm: Self.data)).storesInbox)
    }

    @Test func inboxDecidesWhenGiven() {
        #expect(!job(.init(title: "t", body: "b"), inbox: false).storesInbox)
        #expect(job(.init(), apns: Self.aps, inbox: true).storesInbox)
    }

    @Test func theInboxEntryIsTheSharedNotificationIdElseTheJobs() {
        var j = job(.init(title: "t"))
        #expect(j.inboxEntryID(jobID: "job-7") == "job-7")
        j.notificationId = "n-1"
        #expect(j.inboxEntryID(jobID: "job-7") == "n-1")
    }

    @Test func subscriptionFollowsTheAppSettingsEnabled() {
        #expect(!DeliveryPolicy.subscribes(nil))
        #expect(!DeliveryPolicy.subscribes(NotificationAppSetting(pushEnabled: false)))
        #expect(!DeliveryPolicy.subscribes(NotificationAppSetting(enabled: false)))
        #expect(DeliveryPolicy.subscribes(NotificationAppSetting(enabled: true)))
        #expect(DeliveryPolicy.subscribes(NotificationAppSetting(enabled: true, pushEnabled: false)))
    }
}
