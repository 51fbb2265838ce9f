import Foundation
import Testing
import VolleyCore
import VolleyTestTags

@testable import VolleyConnect

private func json(_ s: String) -> Data { Data(s.utf8) }

private func parse(_ s: String) throws -> JSONValue {
    try JSONDecoder().decode(JSONValue.self, from: json(s))
}

private func object(_ data: Data) throws -> Any { try JSONSerialization.jsonObject(with: data) }

/// The error an input decodes to (empty when it is valid).
private func inputErrors(_ s: String) throws -> [CustomNotificationAction.InputError] {
    switch CustomNotificationAction.decode(try parse(s)) {
    case .valid: []
    case .invalid(let e): e
    }
}

/// The Salesforce error `body` throws (nil when it throws nothing or something else).
private func thrown(_ body: () throws -> Void) -> ConnectError? {
    do {
        try body()
        return nil
    } catch {
        return error as? ConnectError
    }
}

// MARK: customNotificationAction

@Test(.tags(.unit)) func actionInputOfTheGuideDecodes() throws {
    let raw = try parse(
        """
        {"customNotifTypeId": "0MLR0000000008eOAA", "recipientIds": ["005R0000000LSqtIAG"],
         "title": "Custom Notification", "body": "This is a custom notification.", "targetId": "001R0000003fSUDIA2"}
        """)
    guard case .valid(let input) = CustomNotificationAction.decode(raw) else {
        Issue.record("the guide's input is refused")
        return
    }
    let job = CustomNotificationAction.job(input, id: "j1", org: "o1", app: "sales")
    #expect(job.id == "j1" && job.org == "o1" && job.app == "sales")
    #expect(job.recipients == ["005R0000000LSqtIAG"])
    #expect(job.notification.type == "0MLR0000000008eOAA")
    #expect(job.notification.title == "Custom Notification")
    #expect(job.notification.body == "This is a custom notification.")
    #expect(job.notification.targetId == "001R0000003fSUDIA2")
    #expect(job.notification.targetPageRef == nil)
    try job.validate()
}

@Test(.tags(.unit)) func actionRecipientsMayMixKindsAndRepeat() throws {
    // A user, a group, a queue, an account (team) and an opportunity (team), one id twice.
    let raw = try parse(
        """
        {"customNotifTypeId": "T", "recipientIds": ["005U", "00GG", "00GQ", "001A", "006O", "005U"],
         "title": "t", "body": "b", "targetPageRef": {"type": "standard__recordPage", "attributes": {"recordId": "x"}}}
        """)
    guard case .valid(let input) = CustomNotificationAction.decode(raw) else {
        Issue.record("mixed recipients are refused")
        return
    }
    #expect(input.recipientIds == ["005U", "00GG", "00GQ", "001A", "006O"])
    let ref = try #require(input.targetPageRef)
    #expect(try parse(ref)["attributes"]?["recordId"] == .string("x"))
}

@Test(.tags(.unit)) func actionInputProblemsNameTheirFields() throws {
    let long = String(repeating: "é", count: 251)
    let cases: [(String, String, [String])] = [
        (
            #"{"recipientIds": ["u"], "title": "t", "body": "b", "targetId": "x"}"#,
            "REQUIRED_FIELD_MISSING", ["customNotifTypeId"]
        ),
        (
            #"{"customNotifTypeId": "T", "recipientIds": ["u"], "body": "b", "targetId": "x"}"#,
            "REQUIRED_FIELD_MISSING", ["title"]
        ),
        (
            #"{"customNotifTypeId": "T", "recipientIds": ["u"], "title": "  ", "body": "b", "targetId": "x"}"#,
            "REQUIRED_FIELD_MISSING", ["title"]
        ),
        (
            #"{"customNotifTypeId": "T", "recipientIds": ["u"], "title": "t", "targetId": "x"}"#,
            "REQUIRED_FIELD_MISSING", ["body"]
        ),
        (
            #"{"customNotifTypeId": "T", "recipientIds": ["u"], "title": "\#(long)", "body": "b", "targetId": "x"}"#,
            "STRING_TOO_LONG", ["title"]
        ),
        (
            #"{"customNotifTypeId": "T", "recipientIds": ["u"], "title": "t", "body": "b"}"#,
            "REQUIRED_FIELD_MISSING", ["targetId", "targetPageRef"]
        ),
        (
            #"{"customNotifTypeId": "T", "recipientIds": ["u"], "title": "t", "body": "b", "targetId": ""}"#,
            "REQUIRED_FIELD_MISSING", ["targetId", "targetPageRef"]
        ),
        (
            #"{"customNotifTypeId": "T", "recipientIds": [], "title": "t", "body": "b", "targetId": "x"}"#,
            "REQUIRED_FIELD_MISSING", ["recipientIds"]
        ),
        (
            #"{"customNotifTypeId": "T", "recipientIds": [7], "title": "t", "body": "b", "targetId": "x"}"#,
            "INVALID_TYPE", ["recipientIds"]
        ),
        (
            #"{"customNotifTypeId": "T", "recipientIds": ["u"], "title": 5, "body": "b", "targetId": "x"}"#,
            "INVALID_TYPE", ["title"]
        ),
        (
            #"{"customNotifTypeId": "T", "recipientIds": ["u"], "titel": "t", "title": "t", "body": "b", "#
                + #""targetId": "x"}"#,
            "INVALID_INPUT", ["titel"]
        ),
    ]
    #expect(try inputErrors("[]").map(\.fields) == [["inputs"]])
    for (input, code, fields) in cases {
        let errors = try inputErrors(input)
        #expect(errors.map(\.statusCode) == [code], "\(input)")
        #expect(errors.first?.fields == fields, "\(input)")
    }
    // Exactly at the limits is fine; one over the body's is not.
    let title250 = String(repeating: "t", count: 250)
    let body750 = String(repeating: "b", count: 750)
    #expect(
        try inputErrors(
            #"{"customNotifTypeId":"T","recipientIds":["u"],"title":"\#(title250)","#
                + #""body":"\#(body750)","targetId":"x"}"#
        ).isEmpty)
    #expect(
        try inputErrors(
            #"{"customNotifTypeId":"T","recipientIds":["u"],"title":"t","body":"\#(body750)b","targetId":"x"}"#
        ).map(\.statusCode) == ["STRING_TOO_LONG"])
    // Several problems at once are all reported.
    #expect(try inputErrors(#"{"customNotifTypeId": "T"}"#).count == 4)
}

@Test(.tags(.unit), arguments: [500, 501])
func actionRecipientLimit(count: Int) throws {
    let ids = (0..<count).map { "\"u\($0)\"" }.joined(separator: ",")
    let errors = try inputErrors(
        #"{"customNotifTypeId":"T","recipientIds":[\#(ids)],"title":"t","body":"b","targetId":"x"}"#)
    #expect(errors.map(\.statusCode) == (count > 500 ? ["LIMIT_EXCEEDED"] : []))
}

@Test(.tags(.unit)) func actionBodyMustHoldInputs() {
    #expect(thrown { _ = try CustomNotificationAction.inputs(json("not json")) }?.errorCode == "JSON_PARSER_ERROR")
    #expect(thrown { _ = try CustomNotificationAction.inputs(json("{}")) }?.message.hasPrefix("inputs:") == true)
    #expect(thrown { _ = try CustomNotificationAction.inputs(json(#"{"inputs": {}}"#)) }?.status == 400)
    #expect(thrown { _ = try CustomNotificationAction.inputs(json(#"{"inputs": []}"#)) }?.status == 400)
    #expect(
        thrown { _ = try CustomNotificationAction.inputs(json(#"{"inputs": [], "extra": 1}"#)) }?.message
            .contains("extra") == true)
}

@Test(.tags(.unit)) func actionResultsHaveSalesforceShape() throws {
    let ok = try object(try ConnectJSON.encoder.encode([CustomNotificationAction.Result.success]))
    let expected = try object(
        json(
            """
            [{"actionName": "customNotificationAction", "errors": null, "isSuccess": true,
              "outputValues": {"SuccessMessage": "Your custom notification is processed successfully."}}]
            """))
    func canonical(_ v: Any) throws -> String {
        String(decoding: try JSONSerialization.data(withJSONObject: v, options: [.sortedKeys]), as: UTF8.self)
    }
    #expect(try canonical(ok) == (try canonical(expected)))
    let bad = CustomNotificationAction.Result(errors: [.missing("title")])
    let got = try #require(try object(try ConnectJSON.encoder.encode(bad)) as? [String: Any])
    #expect(got["isSuccess"] as? Bool == false)
    #expect(got["outputValues"] is NSNull)
    let e = try #require((got["errors"] as? [[String: Any]])?.first)
    #expect(e["statusCode"] as? String == "REQUIRED_FIELD_MISSING")
    #expect(e["fields"] as? [String] == ["title"])
    #expect((e["message"] as? String)?.contains("title") == true)
}

// MARK: Connect push

@Test(.tags(.unit)) func pushAcceptsTheGuidesSingleQuotedPayload() throws {
    let body = json(
        """
        {"appName": "TestApp", "namespace": "abc", "userIds": ["005x00000013dPK", "005x00000013dPL"],
         "payload": "{ 'aps':{ 'alert': 'test', 'badge': 0, 'sound': 'default' } }"}
        """)
    let push = try ConnectPush.decode(body)
    #expect(push.appName == "TestApp" && push.namespace == "abc")
    #expect(push.userIds == ["005x00000013dPK", "005x00000013dPL"])
    #expect(push.payload["aps"]?["alert"] == .string("test"))
    let job = ConnectPush.job(push, id: "j", org: "o")
    #expect(job.app == "TestApp" && job.recipients == ["005x00000013dPK", "005x00000013dPL"])
    #expect(job.platforms == nil)
    #expect(job.apns?["aps"]?["sound"] == .string("default"))
    // Android: the payload's keys as FCM data strings.
    let data = try #require(job.fcm?["data"]?.objectValue)
    #expect(try parse(try #require(data["aps"]?.stringValue))["badge"] == .number(0))
    #expect(job.effectiveNotification.inAppText?.body == "test")
}

@Test(.tags(.unit)) func pushWithoutAPSGoesToAndroidAsData() throws {
    let push = try ConnectPush.decode(
        json(#"{"appName": "A", "userIds": ["u"], "payload": "{\"number\": 1, \"name\": \"test\"}"}"#))
    let job = ConnectPush.job(push, id: "j", org: "o")
    #expect(job.platforms == [.android] && job.apns == nil)
    #expect(job.fcm?["data"] == .object(["number": .string("1"), "name": .string("test")]))
}

/// Numbers in a push's payload and in an action's page reference keep their text on the way to the job stream: a
/// number in the APNs payload, its text in FCM data (strings), and the page reference's text as written.
@Test(.tags(.unit)) func pushAndActionNumbersKeepTheirText() throws {
    let numbers = ["9007199254740993", "18446744073709551617", "0.1", "1e-7", String(repeating: "1234567", count: 6)]
    let members = numbers.enumerated().map { #""n\#($0.offset)":\#($0.element)"# }.joined(separator: ",")
    let push = try ConnectPush.decode(
        json(#"{"appName":"A","userIds":["u"],"payload":{"aps":{"alert":"x"},"o":{\#(members)},\#(members)}}"#))
    let job = ConnectPush.job(push, id: "j", org: "o")
    let written = try PushJob(json: JSONValue(parsing: job.jsonText), defaultOrg: nil)
    for (i, text) in numbers.enumerated() {
        #expect(written.apns?["n\(i)"] == .number(try #require(JSONNumber(text: text))))
        #expect(written.fcm?["data"]?["n\(i)"] == .string(text))
    }
    #expect(written.fcm?["data"]?["o"] == .string("{\(members)}"))

    let raw = try JSONValue(
        parsing: #"{"customNotifTypeId":"T","recipientIds":["005U"],"title":"t","body":"b","#
            + #""targetPageRef":{"attributes":{\#(members)},"type":"standard__recordPage"}}"#)
    guard case .valid(let input) = CustomNotificationAction.decode(raw) else {
        Issue.record("the input is refused")
        return
    }
    #expect(input.targetPageRef == #"{"attributes":{\#(members)},"type":"standard__recordPage"}"#)
    let action = CustomNotificationAction.job(input, id: "j", org: "o", app: "a")
    #expect(
        try PushJob(json: JSONValue(parsing: action.jsonText), defaultOrg: nil).notification.targetPageRef
            == input.targetPageRef)
}

@Test(.tags(.unit)) func pushProblemsNameTheirFields() {
    func field(_ s: String) -> String? {
        thrown { _ = try ConnectPush.decode(json(s)) }.map { String($0.message.prefix { $0 != ":" }) }
    }
    #expect(field(#"{"userIds": ["u"], "payload": "{}"}"#) == "appName")
    #expect(field(#"{"appName": "A", "payload": "{'a': 1}"}"#) == "userIds")
    #expect(field(#"{"appName": "A", "userIds": [""], "payload": "{'a': 1}"}"#) == "userIds[0]")
    #expect(field(#"{"appName": "A", "userIds": ["u"]}"#) == "payload")
    #expect(field(#"{"appName": "A", "userIds": ["u"], "payload": "{'a': "}"#) == "payload")
    #expect(field(#"{"appName": "A", "userIds": ["u"], "payload": "[1]"}"#) == "payload")
    #expect(field(#"{"appName": "A", "userIds": ["u"], "payload": "{}"}"#) == "payload")
    #expect(field(#"{"appName": "A", "userIds": ["u"], "payload": "{'aps': 1}"}"#) == "payload")
    let many = (0...500).map { "\"u\($0)\"" }.joined(separator: ",")
    #expect(field(#"{"appName": "A", "userIds": [\#(many)], "payload": "{'a': 1}"}"#) == "userIds")
    let big = String(repeating: "x", count: 4100)
    #expect(field(#"{"appName": "A", "userIds": ["u"], "payload": "{'a': '\#(big)'}"}"#) == "payload")
    #expect(
        thrown { _ = try ConnectPush.decode(json(#"{"appName": "A", "userId": ["u"], "payload": "{}"}"#)) }?
            .errorCode == "JSON_PARSER_ERROR")
}

@Test(.tags(.unit)) func singleQuotedTextBecomesJSON() {
    #expect(ConnectJSON.doubleQuoted(#"{'a': 'it\'s "x"'}"#) == #"{"a": "it's \"x\""}"#)
    #expect(ConnectJSON.doubleQuoted(#"{"a": "don't"}"#) == #"{"a": "don't"}"#)
    #expect(ConnectJSON.doubleQuoted(#"{'a': 'open}"#) == nil)
    #expect(ConnectJSON.payload(#"{'a': 'it\'s', 'b': [1, true, null]}"#)?["a"] == .string("it's"))
}

// MARK: Notifications parameters

@Test(.tags(.unit)) func listParametersFollowSalesforce() throws {
    let d = try NotificationListParameters(query: [])
    #expect(d.size == 10 && d.trimMessages && d.after == nil && d.before == nil)
    func q(_ pairs: (String, String)...) -> [ConnectQueryItem] { pairs.map { ConnectQueryItem(name: $0, value: $1) } }
    #expect(try NotificationListParameters(query: q(("size", "60"))).size == 50)
    #expect(try NotificationListParameters(query: q(("trimMessages", "false"))).trimMessages == false)
    let p = try NotificationListParameters(query: q(("before", "2019-06-25T18:24:31.000Z")))
    #expect(p.before == Date(timeIntervalSince1970: 1_561_487_071))
    let offset = try NotificationListParameters(query: q(("before", "2019-06-25T20:24:31+02:00")))
    #expect(offset.before == Date(timeIntervalSince1970: 1_561_487_071))
    #expect(try NotificationListParameters(query: q(("after", "2019-06-25T18:24:31Z"))).after != nil)
    // The Mobile SDKs' builders write dates as `yyyy-MM-dd'T'HH:mm:ss.SSSZ` (FormatUtils): an offset without the
    // colon.
    let sdk = try NotificationListParameters(query: q(("after", "2019-06-25T11:24:31.000-0700")))
    #expect(sdk.after == Date(timeIntervalSince1970: 1_561_487_071))
    #expect(try NotificationListParameters(query: q(("before", "2019-06-25T18:24:31.000+0000"))).before == p.before)
    for bad in [
        q(("size", "0")), q(("size", "x")), q(("trimMessages", "yes")), q(("before", "yesterday")),
        q(("after", "2019-06-25T18:24:31Z"), ("before", "2019-06-26T18:24:31Z")),
    ] {
        let e = thrown { _ = try NotificationListParameters(query: bad) }
        #expect(e?.status == 400 && e?.message.hasPrefix(bad.last?.name ?? "") == true, "\(bad)")
    }
}

@Test(.tags(.unit)) func markParametersFollowSalesforce() throws {
    func mark(_ s: String, single: Bool = false) throws(ConnectError) -> NotificationMarkParameters {
        try NotificationMarkParameters(body: json(s), query: [], single: single)
    }
    let m = try mark(#"{"before": "2019-06-25T18:24:31.000Z", "read": "true"}"#)
    let store = try m.mark(now: Date())
    #expect(store.read == true && store.seen == true)
    #expect(store.selection == .before(Date(timeIntervalSince1970: 1_561_487_071)))
    #expect(try mark(#"{"notificationIds": ["a", "b"], "seen": false}"#).notificationIds == ["a", "b"])
    let now = Date(timeIntervalSince1970: 1_800_000_000)
    #expect(try mark(#"{"seen": true}"#).mark(now: now).selection == .before(now.addingTimeInterval(0.001)))
    let ids51 = (0...50).map { "\"n\($0)\"" }.joined(separator: ",")
    let bad: [(String, String)] = [
        (#"{"read": "true", "seen": "false"}"#, "seen"),
        (#"{"read": true, "seen": false}"#, "seen"),
        (#"{}"#, "read"),
        (#"{"read": "maybe"}"#, "read"),
        (#"{"read": 1}"#, "read"),
        (#"{"notificationIds": [\#(ids51)], "read": true}"#, "notificationIds"),
        (#"{"notificationIds": ["a"], "before": "2019-06-25T18:24:31Z", "read": true}"#, "notificationIds"),
        (#"{"before": "June", "read": true}"#, "before"),
    ]
    for (body, field) in bad {
        let e = thrown { _ = try mark(body) }
        #expect(e?.status == 400 && e?.message.hasPrefix(field) == true, "\(body)")
    }
    #expect(thrown { _ = try mark(#"{"read": true, "reed": true}"#) }?.message.contains("reed") == true)
    // The one-notification form takes only read and seen.
    #expect(thrown { _ = try mark(#"{"read": true, "notificationIds": ["a"]}"#, single: true) }?.status == 400)
    // Query parameters work too; the body wins.
    let fromQuery = try NotificationMarkParameters(
        body: Data(), query: [ConnectQueryItem(name: "read", value: "false")], single: true)
    #expect(fromQuery.read == false && fromQuery.seen == nil)
}

@Test(.tags(.unit)) func notificationsAreTrimmedByDefault() throws {
    let n = InboxNotification(
        id: "n1", type: "T", title: String(repeating: "t", count: 200), body: String(repeating: "b", count: 700),
        target: nil, targetPageRef: nil, createdAt: Date(timeIntervalSince1970: 1_561_487_071.5))
    let trimmed = ConnectNotification(n, org: "o", user: "u", trim: true)
    #expect(trimmed.messageTitle.count == 120 && trimmed.messageBody.count == 320)
    let full = ConnectNotification(n, org: "o", user: "u", trim: false)
    #expect(full.messageTitle.count == 200 && full.messageBody.count == 700)
    let out = try #require(try object(try ConnectJSON.encoder.encode(trimmed)) as? [String: Any])
    let fields: Set<String> = [
        "id", "type", "messageTitle", "messageBody", "target", "targetPageRef", "read", "seen", "organizationId",
        "recipientId", "lastModified", "mostRecentActivityDate", "count", "image", "url", "additionalData",
        "communityId", "communityName",
    ]
    #expect(Set(out.keys) == fields)
    #expect(out["lastModified"] as? String == "2019-06-25T18:24:31.500Z")
    #expect(out["count"] as? Int == 1 && out["target"] is NSNull && out["organizationId"] as? String == "o")
}

@Test(.tags(.unit)) func errorsHaveSalesforceShape() throws {
    let r = ConnectError.invalidInput("size: must be from 1 through 50").response
    #expect(r.status == 400)
    let a = try #require(try object(r.body) as? [[String: String]])
    #expect(a == [["errorCode": "INVALID_API_INPUT", "message": "size: must be from 1 through 50"]])
}

@Test(.tags(.unit)) func orgSettingsOnlyTurnChannelsOff() {
    let type = NotificationType(id: "T", name: "Label", mobile: true, desktop: false)
    let on = NotificationOrgSetting(desktopEnabled: true, mobileEnabled: true).effective(for: type)
    #expect(on.mobile && !on.desktop && !on.email && !on.slack)
    #expect(!NotificationOrgSetting(mobileEnabled: false).effective(for: type).mobile)
}

/// A Connect push of a silent payload (`content-available` without an alert) is a silent push to frequency caps, as
/// a Volley-shaped silent job is: not counted, not capped. One with an alert is visible.
@Test(.tags(.unit)) func aSilentConnectPushIsNotVisibleToFrequencyCaps() throws {
    let silent = try ConnectPush.decode(
        json(#"{"appName": "A", "userIds": ["u"], "payload": "{'aps': {'content-available': 1}, 'k': 'v'}"}"#))
    #expect(!ConnectPush.job(silent, id: "j", org: "o").effectiveNotification.isVisible)
    let alert = try ConnectPush.decode(
        json(#"{"appName": "A", "userIds": ["u"], "payload": "{'aps': {'alert': 'x', 'content-available': 1}}"}"#))
    #expect(ConnectPush.job(alert, id: "j", org: "o").effectiveNotification.isVisible)
}

/// The jobs the resources write are jobs the worker takes: no key it does not know, and structurally valid.
@Test(.tags(.unit)) func writtenJobsPassTheWorkersChecks() throws {
    let input = try parse(
        #"{"customNotifTypeId": "T", "recipientIds": ["u", "00G"], "title": "t", "body": "b", "targetPageRef": "{}"}"#)
    guard case .valid(let decoded) = CustomNotificationAction.decode(input) else {
        Issue.record("valid input refused")
        return
    }
    let push = try ConnectPush.decode(
        json(#"{"appName": "A", "userIds": ["u"], "payload": "{'aps': {'alert': 'x'}}"}"#))
    for job in [
        CustomNotificationAction.job(decoded, id: "j1", org: "o", app: "a"), ConnectPush.job(push, id: "j2", org: "o"),
    ] {
        try job.validate()
        let unknown = try #require(JobKeys.unknownKeys(inJSON: try JSONEncoder().encode(job)))
        #expect(unknown.isEmpty, "\(unknown)")
    }
}

/// A replayed request is found by this text, which idempotency records written by earlier versions also hold: the
/// SHA-256 of the body in lower-case hex (FIPS 180-2's example "abc").
@Test(.tags(.unit)) func anIdempotentRequestIsNamedByItsBodysSHA256InLowerCaseHex() {
    #expect(
        ConnectService.digest(json("abc"))
            == "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad")
    #expect(ConnectService.digest(Data()) == "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855")
}
