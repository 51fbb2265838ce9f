import Foundation
import Testing
import VolleyCore
import VolleyTestTags

/// Message ids (`mid`): their form, what each half names, and the job key that turns them off.
@Suite(.tags(.unit)) struct MessageTrackingTests {
    static let apnsToken = DeviceToken("beef" + String(repeating: "0", count: 60))

    /// The derivation, frozen: the values were computed independently (a Python SipHash-2-4-128 checked against the
    /// reference vectors, and Python's base64url), so a change of derivation shows.
    @Test func theDerivationIsFrozen() {
        let t = MessageTracking(org: "org1", job: "job-1")
        #expect(t.campaign == "j__CzUfKz1o")
        #expect(t.messageID(for: Self.apnsToken) == "j__CzUfKz1o.ZVWJn41-v-0")
        #expect(t.messageID(for: DeviceToken("fcm-token-1")) == "j__CzUfKz1o.0aVsh4FYDNI")
        let otherOrg = MessageTracking(org: "org2", job: "job-1")
        #expect(otherOrg.messageID(for: DeviceToken("fcm-token-1")) == "XJbYd8lJnpA.9RC-mc2pb44")
    }

    @Test func anIDIsTheCampaignADotAndTheDevice() throws {
        let t = MessageTracking(org: "org1", job: "campaign-7")
        let ids = (0..<200).map { t.messageID(for: DeviceToken("token-\($0)")) }
        for id in ids {
            #expect(id.utf8.count == MessageTracking.messageIDLength)
            let parsed = try #require(MessageID(id))
            #expect(parsed.campaign == t.campaign)
            #expect(parsed.description == id)
        }
        // One job, one campaign half; every device its own id.
        #expect(Set(ids).count == ids.count)
        // The same job in another org, or another job, is another campaign.
        #expect(MessageTracking(org: "org2", job: "campaign-7").campaign != t.campaign)
        #expect(MessageTracking(org: "org1", job: "campaign-8").campaign != t.campaign)
        // The separator keeps (org, job) pairs apart that concatenate alike.
        #expect(MessageTracking(org: "org1c", job: "x").campaign != MessageTracking(org: "org1", job: "cx").campaign)
        // The same device in another job has an unrelated device half.
        let other = MessageTracking(org: "org1", job: "campaign-8").messageID(for: DeviceToken("token-0"))
        #expect(MessageID(other)?.device != MessageID(ids[0])?.device)
    }

    @Test(arguments: [
        "", "j__CzUfKz1o", "j__CzUfKz1o.", "j__CzUfKz1o.ZVWJn41-v-", "j__CzUfKz1o.ZVWJn41-v-00",
        "j__CzUfKz1oxZVWJn41-v-0", "j__CzUfKz1o.ZVWJn41+v-0", "j__CzUfKz1o.ZVWJn41/v-0", "j__CzUfKz1o.ZVWJn41=v-0",
        "j__CzUfKz1.o.ZVWJn41-v-", " j__CzUfKz1o.ZVWJn41-v-", "j__CzUfKz1o.ZVWJn41-v-é",
    ])
    func malformedIDsAreRefused(_ text: String) {
        #expect(MessageID(text) == nil)
    }

    @Test func trackingIsAJobKeyThatRoundTrips() throws {
        let text = #"{"id":"j","org":"o","app":"a","recipients":["u"],"notification":{"title":"t"},"tracking":false}"#
        let job = try PushJob(json: JSONValue(parsing: text), defaultOrg: nil)
        #expect(job.tracking == false)
        guard case .object(let o) = try JSONValue(parsing: text) else { return }
        #expect(JobKeys.unknownKeys(in: o).isEmpty)
        let again = try PushJob(json: JSONValue(parsing: job.jsonText), defaultOrg: nil)
        #expect(again.tracking == false)
        #expect(again == job)
        // Absent: tracked, and not written.
        let plain = PushJob(org: "o", app: "a", recipients: ["u"], notification: .init(title: "t"))
        #expect(plain.tracking == nil)
        #expect(!plain.jsonText.contains("tracking"))
        // Not a boolean: the field is named.
        #expect(throws: JSONFieldError.self) {
            try PushJob(json: JSONValue(parsing: text.replacingOccurrences(of: "false", with: "0")), defaultOrg: nil)
        }
    }

    @Test func theDoorCheckIsToldWhetherTheJobIsTracked() {
        let asked = NSLock()
        nonisolated(unsafe) var tracked: [Bool] = []
        let check = NotificationCheck { _, _, _, t in asked.withLock { tracked.append(t) } }
        var job = PushJob(org: "o", app: "a", recipients: ["u"], notification: .init(title: "t"), platforms: [.ios])
        _ = check.refusal(of: job)
        job.tracking = false
        _ = check.refusal(of: job)
        job.tracking = true
        _ = check.refusal(of: job)
        #expect(asked.withLock { tracked } == [true, false, true])
    }

    @Test func anInteractionsDedupeMemberAndMinute() throws {
        let id = try #require(MessageID("j__CzUfKz1o.ZVWJn41-v-0"))
        let at = Date(timeIntervalSince1970: 1_800_000_059.999)
        let open = Interaction(messageID: id, event: .opened, at: at)
        #expect(open.dedupeMember == "ZVWJn41-v-0:opened")
        #expect(open.minute == 30_000_000)
        let tap = Interaction(messageID: id, event: .action, actionID: "reply", at: at)
        #expect(tap.dedupeMember == "ZVWJn41-v-0:action:reply")
        #expect(
            InteractionTally([.accepted, .duplicate, .accepted, .unknown])
                == InteractionTally(
                    accepted: 2, duplicates: 1, unknown: 1))
    }
}
