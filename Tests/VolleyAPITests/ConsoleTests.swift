import Foundation
import HTTPTypes
import Hummingbird
import NIOCore
import Testing
import VolleyCore
import VolleyTestDoubles
import VolleyTestTags

@testable import VolleyAPI

/// The console's pure parts: signed sessions and CSRF tokens on a given clock, form decoding, the New campaign and
/// Send test notification forms as API bodies, the templates' escaping, and where a sign-in may send the browser.
@Suite(.tags(.unit)) struct ConsoleSessionTests {
    let sessions = ConsoleSessions(
        userTokenKeys: [UserTokenKey(id: "k1", secret: Array(repeating: 7, count: 32))], lifetime: 3600)
    let now = Date(timeIntervalSince1970: 1_800_000_000)

    @Test func aSessionVerifiesUntilItExpiresAndNamesItsKey() throws {
        let cookie = sessions.issue(keyID: "0123456789abcdef", now: now)
        let session = try #require(sessions.verify(cookie, now: now.addingTimeInterval(3599)))
        #expect(session.keyID == "0123456789abcdef")
        #expect(sessions.verify(cookie, now: now.addingTimeInterval(3600)) == nil)
        // No key material in the cookie: the id and the MAC only.
        #expect(!cookie.contains("vk_"))
    }

    @Test func aChangedCookieDoesNotVerify() {
        let cookie = sessions.issue(keyID: "0123456789abcdef", now: now)
        var parts = cookie.split(separator: ".").map(String.init)
        parts[1] = "fedcba9876543210"
        #expect(sessions.verify(parts.joined(separator: "."), now: now) == nil)
        parts = cookie.split(separator: ".").map(String.init)
        parts[2] = String(Int64(parts[2])! + 86_400)
        #expect(sessions.verify(parts.joined(separator: "."), now: now) == nil)
        #expect(sessions.verify("s1.a.b.c", now: now) == nil)
        #expect(sessions.verify("", now: now) == nil)
    }

    @Test func anotherProcessWithTheSameUserTokenKeyAcceptsTheSessionAndOneWithoutDoesNot() throws {
        let cookie = sessions.issue(keyID: "0123456789abcdef", now: now)
        let replica = ConsoleSessions(
            userTokenKeys: [UserTokenKey(id: "k1", secret: Array(repeating: 7, count: 32))], lifetime: 3600)
        #expect(replica.verify(cookie, now: now) != nil)
        let own = ConsoleSessions(userTokenKeys: [], lifetime: 3600)
        #expect(!own.shared)
        #expect(own.verify(cookie, now: now) == nil)
    }

    @Test func theCSRFTokenBelongsToItsSession() throws {
        let a = try #require(sessions.verify(sessions.issue(keyID: "0123456789abcdef", now: now), now: now))
        let b = try #require(sessions.verify(sessions.issue(keyID: "0123456789abcdef", now: now), now: now))
        #expect(sessions.checkCSRF(sessions.csrf(for: a), session: a))
        #expect(!sessions.checkCSRF(sessions.csrf(for: b), session: a))
        #expect(!sessions.checkCSRF(nil, session: a))
        #expect(!sessions.checkCSRF("", session: a))
    }

    @Test func theSignInTokenMatchesOnlyItsCookie() {
        let nonce = sessions.loginNonce()
        #expect(sessions.checkLogin(token: sessions.loginToken(nonce: nonce), nonce: nonce))
        #expect(!sessions.checkLogin(token: sessions.loginToken(nonce: nonce), nonce: sessions.loginNonce()))
        #expect(!sessions.checkLogin(token: sessions.loginToken(nonce: nonce), nonce: nil))
        #expect(!sessions.checkLogin(token: nil, nonce: nonce))
    }

    @Test func aFormDecodesPlusesPercentsAndRepeatedFields() {
        let f = ConsoleForm(encoded: "a=1&title=%3Cimg+src%3Dx%3E&b=x&b=y&empty=&flag")
        #expect(f["a"] == "1")
        #expect(f["title"] == "<img src=x>")
        #expect(f.values["b"] == ["x", "y"])
        #expect(f["empty"] == "")
        #expect(f.text("empty") == nil)
        #expect(f.checked("flag"))
        #expect(!f.checked("absent"))
    }

    @Test(
        arguments: [
            ("/console/jobs", "/console/jobs"), ("/console/jobs/x?state=done", "/console/jobs/x?state=done"),
            ("//evil.example/console", nil), ("https://evil.example/console", nil), ("/elsewhere", nil),
            ("/console\\@evil", nil), ("/console/\r\nSet-Cookie:x", nil), ("", nil),
        ] as [(String, String?)])
    func aSignInReturnsOnlyToAConsolePath(_ raw: String, _ expected: String?) {
        #expect(ConsolePages.localPath(raw) == expected)
    }
}

@Suite(.tags(.unit)) struct ConsoleFormTests {
    func form(_ pairs: [(String, String)]) -> ConsoleForm {
        var values: [String: [String]] = [:]
        for (k, v) in pairs { values[k, default: []].append(v) }
        return ConsoleForm(values: values)
    }

    @Test func aNewCampaignBecomesTheJobBodyTheAPITakesWithItsNumbersAsTyped() throws {
        let text = try ConsoleJobForm.job(
            from: form([
                ("app", "app1"), ("users", "005A, 005B 005C"), ("segment", "gold"), ("excludeSegment", "early"),
                ("jobTitle", "Sale"), ("body", "20% off"),
                ("data", #"{"big": 9007199254740993, "wide": 18446744073709551617, "tenth": 0.1, "tiny": 1e-7}"#),
                ("throttle", "600"), ("bypassCap", "on"), ("sendAt", "2030-01-01T09:00:00Z"),
            ]))
        #expect(text.contains("9007199254740993"))
        #expect(text.contains("18446744073709551617"))
        #expect(text.contains("0.1"))
        #expect(text.contains("1e-7"))
        let job = try #require(try JSONSerialization.jsonObject(with: Data(text.utf8)) as? [String: Any])
        #expect(job["app"] as? String == "app1")
        let recipients = try #require(job["recipients"] as? [Any])
        #expect(recipients.count == 4)
        #expect((recipients[0] as? [String: String]) == ["segment": "gold"])
        #expect(recipients.dropFirst().compactMap { $0 as? String } == ["005A", "005B", "005C"])
        #expect((job["exclude"] as? [[String: String]]) == [["segment": "early"]])
        #expect(job["throttlePerMinute"] as? Int == 600)
        #expect(job["enableFrequencyCap"] as? Bool == false)
        #expect(job["sendAt"] as? String == "2030-01-01T09:00:00Z")
    }

    @Test func everyoneIsTheAllEntry() throws {
        let text = try ConsoleJobForm.job(from: form([("app", "app1"), ("everyone", "on"), ("jobTitle", "Hi")]))
        #expect(text.contains(#""all":true"#))
    }

    @Test(
        arguments: [
            ([("app", "app1"), ("jobTitle", "Hi")], "recipients"),
            ([("app", "app1"), ("users", "u1")], "notification.title"),
            ([("app", "app1"), ("users", "u1"), ("jobTitle", "x"), ("data", "[1]")], "notification.data"),
            ([("app", "app1"), ("users", "u1"), ("jobTitle", "x"), ("throttle", "fast")], "throttlePerMinute"),
            ([("users", "u1"), ("jobTitle", "x")], "app"),
        ] as [([(String, String)], String)])
    func aFormTheAPIWouldRefuseNamesTheField(_ pairs: [(String, String)], _ field: String) {
        #expect {
            try ConsoleJobForm.job(from: form(pairs))
        } throws: { ($0 as? APIProblem)?.field == field }
    }

    @Test(arguments: [
        ("notification.title", "jobTitle"), ("notification.data.x", "data"), ("notification.badge", "body"),
        ("recipients[2].segment", "audience"), ("exclude[0].segment", "excludeSegment"),
        ("deliverAtLocalTime", "localTime"), ("throttlePerMinute", "throttle"), ("sendAt", "sendAt"), ("id", "jobId"),
    ])
    func anAPIProblemSitsBesideItsInput(_ field: String, _ input: String) {
        #expect(ConsoleJobForm.input(for: field) == input)
    }

    @Test func anAPNsTestPushIsTheAPNsPayloadWithTheCustomPayloadBesideAps() throws {
        let text = try ConsoleTestPushForm.body(
            from: form([
                ("app", "app1"), ("platform", "ios"), ("alert", "Hello"), ("badge", "3"), ("sound", "default"),
                ("customPayload", #"{"recordId": "a1", "n": 12345678901234567890}"#),
            ]), token: "ab12")
        #expect(text.contains("12345678901234567890"))
        let body = try #require(try JSONSerialization.jsonObject(with: Data(text.utf8)) as? [String: Any])
        #expect(body["token"] as? String == "ab12")
        let apns = try #require((body["notification"] as? [String: Any])?["apns"] as? [String: Any])
        #expect(apns["recordId"] as? String == "a1")
        let aps = try #require(apns["aps"] as? [String: Any])
        #expect(aps["alert"] as? String == "Hello")
        #expect(aps["badge"] as? Int == 3)
        #expect(aps["sound"] as? String == "default")
    }

    @Test func anFCMDryRunCarriesItsPayloadAsData() throws {
        let text = try ConsoleTestPushForm.body(
            from: form([("app", "app1"), ("platform", "android"), ("payload", #"{"k": "v"}"#), ("dryRun", "on")]),
            token: "fcm-token")
        let body = try #require(try JSONSerialization.jsonObject(with: Data(text.utf8)) as? [String: Any])
        #expect(body["dryRun"] as? Bool == true)
        let fcm = try #require((body["notification"] as? [String: Any])?["fcm"] as? [String: Any])
        #expect((fcm["data"] as? [String: String]) == ["k": "v"])
    }

    @Test(
        arguments: [
            ([("app", "a"), ("alert", "x")], nil, "Recipient is required"),
            ([("app", "a"), ("badge", "three")], "t", "Badge must be a number"),
            ([("app", "a"), ("customPayload", "{nope")], "t", "Payload must be in a valid JSON format"),
            (
                [("app", "a"), ("platform", "android"), ("payload", "[1]")], "t",
                "Payload must be in a valid JSON format"
            ),
            (
                [("app", "a")], "t",
                ConsoleTestPushForm.nothingToSend
            ),
        ] as [([(String, String)], String?, String)])
    func theTestPushFormAnswersWithTheGuidesMessages(_ pairs: [(String, String)], _ token: String?, _ message: String) {
        #expect {
            try ConsoleTestPushForm.body(from: form(pairs), token: token)
        } throws: { ($0 as? APIProblem).map(ConsoleTestPushForm.message(for:)) == message }
    }

    @Test func theEmptyFormsMessageIsTheGuidesWordForWord() {
        #expect(
            ConsoleTestPushForm.nothingToSend
                == "You must enter a value for at least one of the following fields: "
                + "Alert, Badge, Sound, or Custom Payload")
    }

    @Test func theTemplatesCompileAndNoneWritesAValueUnescaped() {
        #expect(ConsolePages().problems.isEmpty)
        for (name, text) in ConsoleTemplates.all {
            #expect(!text.contains("{{{"), "\(name)")
            #expect(!text.contains("{{&"), "\(name)")
            #expect(!text.contains("style="), "\(name): the CSP refuses inline style")
            #expect(!text.contains("<script>"), "\(name): the CSP refuses inline script")
        }
    }

    @Test func theChartIsAnImageOfItsMinutesWithItsTextEscaped() {
        let svg = ConsoleChart.svg([
            JobCounts.Minute(minute: "2026-11-29T10:00:00Z", accepted: 100, opened: 10),
            JobCounts.Minute(minute: "<b>", accepted: 50, opened: 0),
        ])
        #expect(svg.hasPrefix("<svg"))
        #expect(svg.contains("2026-11-29T10:00:00Z accepted 100"))
        #expect(svg.contains("&lt;b&gt;"))
        #expect(!svg.contains("<b>"))
        #expect(ConsoleChart.svg([]).contains("Nothing accepted yet"))
    }
}
