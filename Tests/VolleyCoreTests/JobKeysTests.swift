import Foundation
import Testing
import VolleyCore
import VolleyTestTags

@Suite(.tags(.unit)) struct JobKeysTests {
    /// Every key the job types encode is a known key: adding a field to a job type without listing it here fails.
    @Test func everyEncodedKeyIsKnown() throws {
        var n = Notification(
            title: "t", subtitle: "s", body: "b", sound: "ding", badge: 1, data: ["k": .string("v")],
            contentAvailable: true, mutableContent: true, category: "c", threadId: "th",
            collapseId: "co", ttl: 60, priority: .high, imageUrl: "https://i", url: "https://u",
            channelId: "ch", apns: .object([:]), fcm: .object([:]))
        n.localized = ["es": .init(title: "t", subtitle: "s", body: "b")]
        n.badgeIncrement = 1
        n.interruptionLevel = "active"
        n.relevanceScore = 0.5
        n.targetContentId = "x"
        n.pushType = "alert"
        n.type = "ty"
        n.targetId = "001"
        n.targetPageRef = #"{"type": "standard__recordPage"}"#
        var job = PushJob(
            id: "j", org: "o", app: "a", recipients: ["u"],
            devices: [JobDevice(platform: .ios, token: DeviceToken("t"), environment: .sandbox)], notification: n,
            apns: .object([:]), fcm: .object([:]), platforms: [.ios])
        job.shard = ShardRef(parent: "p", index: 0, count: 2)
        job.recipients = ["u", .segment("gold"), .all]
        job.exclude = [.segment("churned")]
        job.debug = true
        job.salesforcePayload = false
        job.inbox = true
        job.notificationId = "n-1"
        job.templateId = "tpl-1"
        job.customData = .object(["plan": .string("gold")])
        job.throttlePerMinute = 1019
        job.enableFrequencyCap = false
        job.sendAt = ScheduledTime("2026-12-01T09:00:00Z")
        job.deliverAtLocalTime = LocalDeliveryTime("09:00")
        job.tracking = false
        let object = try #require(try JSONValue(parsing: JSONEncoder().encode(job)).objectValue)
        #expect(Set(object.keys) == JobKeys.job)
        #expect(Set((object["notification"]?.objectValue ?? [:]).keys) == JobKeys.notification)
        #expect(JobKeys.unknownKeys(in: object).isEmpty)
    }

    @Test func unknownKeysAreNamedWithTheirPathAndNearestKey() throws {
        let json = #"""
            {"org": "o", "app": "a", "targetPageRef": "x", "Recipients": ["u"],
             "devices": [{"platform": "ios", "token": "t"}, {"platform": "ios", "tokn": "t"}],
             "notification": {"titel": "x", "data": {"anything": 1}, "localized": {"es": {"bdy": "b"}}},
             "apns": {"aps": {"whatever": 1}}, "shard": {"parent": "p", "index": 0, "count": 1, "of": 2}}
            """#
        let unknown = try #require(JobKeys.unknownKeys(inJSON: Data(json.utf8)))
        #expect(
            unknown.map(\.description) == [
                "'Recipients' (did you mean 'recipients'?)", "'targetPageRef'",
                "'notification.titel' (did you mean 'title'?)",
                "'notification.localized.es.bdy' (did you mean 'body'?)",
                "'devices[1].tokn' (did you mean 'token'?)", "'shard.of'",
            ])
        #expect(JobKeys.unknownKeys(inJSON: Data("[1]".utf8)) == nil)
    }

    @Test(
        arguments: [
            ("titel", "title"), ("enviroment", "environment"), ("Platforms", "platforms"),
            ("recipient", "recipients"), ("sendAt", nil), ("zzz", nil),
        ] as [(String, String?)])
    func suggestion(_ key: String, _ expected: String?) {
        let known: Set<String> = ["title", "environment", "platforms", "recipients", "app", "org"]
        #expect(KeySuggestion.closest(to: key, in: known) == expected)
    }

    @Test func editDistance() {
        #expect(KeySuggestion.editDistance("", "abc") == 3)
        #expect(KeySuggestion.editDistance("kitten", "sitting") == 3)
        #expect(KeySuggestion.editDistance("titel", "title") == 1)
        #expect(KeySuggestion.editDistance("same", "same") == 0)
    }
}

@Suite(.tags(.unit)) struct InAppTextTests {
    @Test func titleAndBodyWin() {
        let n = Notification(title: "T", body: "B", apns: .object(["aps": .object(["alert": .string("raw")])]))
        #expect(n.inAppText?.title == "T" && n.inAppText?.body == "B")
    }

    @Test(arguments: [
        (#"{"aps": {"alert": "Hello"}}"#, "", "Hello"),
        (#"{"aps": {"alert": {"title": "T", "body": "B"}}}"#, "T", "B"),
        (#"{"payload": {"aps": {"alert": {"title": "T"}}}, "headers": {}}"#, "T", ""),
    ])
    func rawAPNsAlert(_ json: String, _ title: String, _ body: String) throws {
        let raw = try JSONDecoder().decode(JSONValue.self, from: Data(json.utf8))
        let text = Notification(apns: raw).inAppText
        #expect(text?.title == title && text?.body == body)
    }

    @Test func rawFCMNotification() throws {
        let raw = try JSONDecoder().decode(
            JSONValue.self, from: Data(#"{"message": {"notification": {"title": "F"}}}"#.utf8))
        #expect(Notification(fcm: raw).inAppText?.title == "F")
    }

    @Test(arguments: [#"{"aps": {"content-available": 1}, "recordId": "001"}"#, #"{"aps": {"alert": ""}}"#])
    func silentRawPayloadsShowNothing(_ json: String) throws {
        let raw = try JSONDecoder().decode(JSONValue.self, from: Data(json.utf8))
        #expect(Notification(apns: raw).inAppText == nil)
        #expect(Notification(fcm: .object(["data": .object(["recordId": .string("001")])])).inAppText == nil)
    }
}

@Suite(.tags(.unit)) struct OutstandingChargesTests {
    @Test func settlesOldestHourFirstRefundsBeforeDeliveries() {
        var c = OutstandingCharges()
        c.add(3, hour: QuotaHour(index: 1))
        c.add(2, hour: QuotaHour(index: 1))
        c.add(4, hour: QuotaHour(index: 2))
        #expect(c.total == 9)
        let (parts, unmatched) = c.take(delivered: 4, refunded: 3)
        #expect(parts.map(\.hour.index) == [1, 2])
        #expect(parts.map(\.refunded) == [3, 0] && parts.map(\.delivered) == [2, 2])
        #expect(unmatched == (0, 0))
        #expect(c.total == 2)
        let over = c.take(delivered: 5, refunded: 0)
        #expect(over.unmatched.delivered == 3 && c.total == 0)
    }

    @Test func takeUpToSpansHours() {
        var c = OutstandingCharges()
        c.add(2, hour: QuotaHour(index: 7))
        c.add(5, hour: QuotaHour(index: 8))
        let taken = c.take(upTo: 4)
        #expect(taken.map(\.hour.index) == [7, 8] && taken.map(\.count) == [2, 2])
        #expect(c.total == 3)
    }
}
