import Foundation
import HTTPTypes
import Hummingbird
import NIOCore
import Testing
import VolleyCore
import VolleyTestDoubles
import VolleyTestTags

@testable import VolleyAPI

/// The console's routes on the API's router and in-memory stores: sign-in, sessions, CSRF, roles, escaping and the
/// security headers. The browser lane (`tools/console-browser`) drives the same pages in Chromium against real
/// processes.
@Suite(.tags(.unit)) struct ConsoleRouteTests {
    /// A browser of one: keeps the console's cookies between requests.
    final class Browser: @unchecked Sendable {
        let client: RouterClient
        var cookies: [String: String] = [:]
        init(_ client: RouterClient) { self.client = client }

        @discardableResult
        func go(_ method: HTTPRequest.Method, _ uri: String, form: [(String, String)]? = nil) async throws
            -> (status: Int, text: String, headers: HTTPFields)
        {
            var headers: HTTPFields = [:]
            if !cookies.isEmpty {
                headers[.cookie] = cookies.map { "\($0.key)=\($0.value)" }.sorted().joined(separator: "; ")
            }
            var body: ByteBuffer?
            if let form {
                headers[.contentType] = "application/x-www-form-urlencoded"
                body = ByteBuffer(
                    string: form.map { "\(Self.escape($0.0))=\(Self.escape($0.1))" }.joined(separator: "&"))
            }
            let answer = try await client.execute(uri: uri, method: method, headers: headers, body: body)
            for line in answer.headers[values: .setCookie] {
                let pair = line.split(separator: ";")[0].split(separator: "=", maxSplits: 1)
                let name = String(pair[0])
                let value = pair.count > 1 ? String(pair[1]) : ""
                if value.isEmpty || line.contains("Max-Age=0") { cookies[name] = nil } else { cookies[name] = value }
            }
            return (Int(answer.status.code), String(buffer: answer.body), answer.headers)
        }

        static func escape(_ s: String) -> String {
            s.addingPercentEncoding(withAllowedCharacters: .alphanumerics) ?? ""
        }

        /// The CSRF token a page's forms carry.
        static func csrf(in page: String) -> String? {
            guard let r = page.range(of: #"name="csrf" value=""#) else { return nil }
            return String(page[r.upperBound...].prefix { $0 != "\"" })
        }

        /// Opens `page`, then posts `fields` to `action` with the page's CSRF token, as the page's form would.
        func post(_ action: String, from page: String, _ fields: [(String, String)]) async throws
            -> (status: Int, text: String, headers: HTTPFields)
        {
            let opened = try await go(.get, page)
            let token = try #require(Self.csrf(in: opened.text))
            return try await go(.post, action, form: [("csrf", token)] + fields)
        }

        func signIn(_ key: String) async throws {
            let page = try await go(.get, "/console/login")
            let token = try #require(Self.csrf(in: page.text))
            let answer = try await go(.post, "/console/login", form: [("csrf", token), ("key", key), ("next", "")])
            #expect(answer.status == 303)
        }
    }

    func submit(_ api: InMemoryAPI, key: String, title: String = "Hi") async throws -> String {
        let (status, text, _) = try await RouterClient(api.server.router()).call(
            .post, "/v1/jobs", token: key,
            json: #"{"app":"app1","recipients":["005A"],"notification":{"title":"\#(title)","body":"b"}}"#)
        #expect(status == 202)
        return try #require(try object(text)["id"] as? String)
    }

    @Test func theConsoleIsOffUnlessEnabled() async throws {
        try await InMemoryAPI().test { client in
            let answer = try await client.call(.get, "/console/login")
            #expect(answer.status == 404)
        }
    }

    @Test func aPageWithoutASessionSendsTheBrowserToSignInAndBack() async throws {
        try await InMemoryAPI(console: true).test { client in
            let browser = Browser(client)
            let answer = try await browser.go(.get, "/console/jobs?state=done")
            #expect(answer.status == 303)
            #expect(answer.headers[.location] == "/console/login?next=%2Fconsole%2Fjobs%3Fstate%3Ddone")
        }
    }

    @Test func signingInSetsAStrictHttpOnlySessionCookieAndNoKey() async throws {
        let api = InMemoryAPI(console: true)
        let key = try api.key(role: .send)
        try await api.test { client in
            let browser = Browser(client)
            let page = try await browser.go(.get, "/console/login")
            #expect(page.status == 200)
            #expect(page.text.contains(#"name="key""#))
            let token = try #require(Browser.csrf(in: page.text))
            let answer = try await browser.go(
                .post, "/console/login", form: [("csrf", token), ("key", key), ("next", "/console/health")])
            #expect(answer.status == 303)
            #expect(answer.headers[.location] == "/console/health")
            let set = answer.headers[values: .setCookie].first { $0.hasPrefix("volley_console=") } ?? ""
            #expect(set.contains("HttpOnly"))
            #expect(set.contains("SameSite=Strict"))
            #expect(set.contains("Path=/console"))
            #expect(!set.contains("Secure"), "the API here serves plain HTTP")
            #expect(!set.contains(key))
            let health = try await browser.go(.get, "/console/health")
            #expect(health.status == 200)
            #expect(health.text.contains("orgA · send key"))
        }
    }

    @Test func aWrongKeyOrAForeignSignInFormIsRefused() async throws {
        let api = InMemoryAPI(console: true)
        let key = try api.key(role: .send)
        try await api.test { client in
            let browser = Browser(client)
            let page = try await browser.go(.get, "/console/login")
            let token = try #require(Browser.csrf(in: page.text))
            let wrong = try await browser.go(
                .post, "/console/login", form: [("csrf", token), ("key", String(key.dropLast()) + "x")])
            #expect(wrong.status == 401)
            #expect(wrong.text.contains("That key is not valid."))
            #expect(browser.cookies["volley_console"] == nil)
            // A form posted from another site carries no sign-in cookie of this browser's.
            let stranger = Browser(client)
            let forged = try await stranger.go(.post, "/console/login", form: [("csrf", token), ("key", key)])
            #expect(forged.status == 403)
            #expect(stranger.cookies["volley_console"] == nil)
        }
    }

    @Test func everyPageCarriesTheSecurityHeaders() async throws {
        let api = InMemoryAPI(console: true)
        try await api.test { client in
            let answer = try await Browser(client).go(.get, "/console/login")
            let csp = answer.headers[.contentSecurityPolicy] ?? ""
            #expect(csp.hasPrefix("default-src 'self'"))
            #expect(csp.contains("frame-ancestors 'none'"))
            #expect(answer.headers[.xContentTypeOptions] == "nosniff")
            #expect(answer.headers[.cacheControl] == "no-store")
        }
    }

    @Test func aCampaignIsPausedResumedAndCancelledWithItsTokenAndNotWithout() async throws {
        let api = InMemoryAPI(console: true)
        let key = try api.key(role: .send)
        let id = try await submit(api, key: key)
        try await api.test { client in
            let browser = Browser(client)
            try await browser.signIn(key)
            let page = try await browser.go(.get, "/console/jobs/\(id)")
            #expect(page.status == 200)
            let token = try #require(Browser.csrf(in: page.text))
            let forged = try await browser.go(.post, "/console/jobs/\(id)/pause", form: [("csrf", "x")])
            #expect(forged.status == 403)
            let bare = try await browser.go(.post, "/console/jobs/\(id)/pause", form: [])
            #expect(bare.status == 403)
            #expect(try await api.jobs.status(org: "orgA", job: JobID(id))?.state == "queued")
            let paused = try await browser.go(.post, "/console/jobs/\(id)/pause", form: [("csrf", token)])
            #expect(paused.status == 303)
            #expect(try await api.jobs.status(org: "orgA", job: JobID(id))?.state == "paused")
            _ = try await browser.go(.post, "/console/jobs/\(id)/resume", form: [("csrf", token)])
            #expect(try await api.jobs.status(org: "orgA", job: JobID(id))?.state == "queued")
            _ = try await browser.go(.post, "/console/jobs/\(id)/cancel", form: [("csrf", token)])
            #expect(try await api.jobs.status(org: "orgA", job: JobID(id))?.state == "cancelled")
        }
    }

    @Test func aReadKeySeesButCannotSteer() async throws {
        let api = InMemoryAPI(console: true)
        let id = try await submit(api, key: try api.key(role: .send))
        let reader = try api.key(role: .read)
        try await api.test { client in
            let browser = Browser(client)
            try await browser.signIn(reader)
            let page = try await browser.go(.get, "/console/jobs/\(id)")
            #expect(page.status == 200)
            #expect(!page.text.contains(#"id="cancel""#))
            #expect(!page.text.contains("/console/jobs/new"))
            let token = try #require(Browser.csrf(in: page.text))
            let refused = try await browser.go(.post, "/console/jobs/\(id)/cancel", form: [("csrf", token)])
            #expect(refused.status == 403)
            #expect(try await api.jobs.status(org: "orgA", job: JobID(id))?.state == "queued")
        }
    }

    @Test func anotherOrgsCampaignIsNotFound() async throws {
        let api = InMemoryAPI(console: true)
        let id = try await submit(api, key: try api.key(role: .send))
        let other = try api.key(org: "orgB", role: .admin)
        try await api.test { client in
            let browser = Browser(client)
            try await browser.signIn(other)
            #expect(try await browser.go(.get, "/console/jobs/\(id)").status == 404)
            #expect(try await browser.go(.get, "/console/jobs/\(id)/live").status == 404)
            let list = try await browser.go(.get, "/console/jobs")
            #expect(!list.text.contains(id))
        }
    }

    @Test func theLiveAnswerIsTheAPIsAndThePageShowsItsCounts() async throws {
        let api = InMemoryAPI(console: true)
        let key = try api.key(role: .send)
        let id = try await submit(api, key: key)
        var counts = JobCounts()
        counts.accepted = 7
        counts.failed = 2
        counts.audience = 12
        counts.byReason = ["Unregistered": 2]
        counts.perMinute = [JobCounts.Minute(minute: "2026-11-29T10:00:00Z", accepted: 7, opened: 0)]
        api.jobs.setCounts(org: "orgA", job: JobID(id), jobState: "running", counts: counts)
        try await api.test { client in
            let browser = Browser(client)
            try await browser.signIn(key)
            let live = try await browser.go(.get, "/console/jobs/\(id)/live")
            let v1 = try await client.call(.get, "/v1/jobs/\(id)", token: key)
            #expect(live.text == v1.text)
            let page = try await browser.go(.get, "/console/jobs/\(id)")
            #expect(page.text.contains(#"data-count="counts.accepted">7<"#))
            #expect(page.text.contains(#"data-count="counts.failed">2<"#))
            #expect(page.text.contains("<code>Unregistered</code>"))
            #expect(page.text.contains(#"data-live="/console/jobs/\#(id)/live""#))
            // A job that has no reason or due time shows no such line (empty text is no value to a page).
            #expect(!page.text.contains("Dead-lettered"))
            #expect(!page.text.contains(" · due"))
            let chart = try await browser.go(.get, "/console/jobs/\(id)/chart.svg")
            #expect(chart.headers[.contentType] == "image/svg+xml")
            #expect(chart.text.contains("accepted 7"))
        }
    }

    @Test func whatAUserTypedComesBackAsText() async throws {
        let api = InMemoryAPI(console: true)
        let key = try api.key(role: .send)
        try await api.test { client in
            let browser = Browser(client)
            try await browser.signIn(key)
            let script = "<img src=x onerror=alert(1)>"
            // No audience: the page comes back with the error and the title as typed, escaped.
            let answer = try await browser.post(
                "/console/jobs/new", from: "/console/jobs/new", [("app", "app1"), ("jobTitle", script)])
            #expect(answer.status == 400)
            #expect(!answer.text.contains(script))
            #expect(answer.text.contains("&lt;img src=x onerror=alert(1)&gt;"))
            #expect(answer.text.contains("choose an audience"))
        }
    }

    @Test func aNewCampaignIsAcceptedAsTheAPIWouldAndShownNext() async throws {
        let api = InMemoryAPI(console: true)
        let key = try api.key(role: .send)
        try await api.test { client in
            let browser = Browser(client)
            try await browser.signIn(key)
            let answer = try await browser.post(
                "/console/jobs/new", from: "/console/jobs/new",
                [
                    ("app", "app1"), ("users", "005A"), ("jobTitle", "Sale"), ("body", "Now"), ("jobId", "console-1"),
                    ("data", #"{"n": 9007199254740993}"#),
                ])
            #expect(answer.status == 303)
            #expect(answer.headers[.location] == "/console/jobs/console-1")
            let entry = try #require(api.jobs.entries.last)
            #expect(entry.json.contains("9007199254740993"))
            #expect(try await api.jobs.status(org: "orgA", job: "console-1") != nil)
        }
    }

    @Test func theLibraryListsTemplatesAndSegmentsEscapedAndCountsASegmentOnDemand() async throws {
        let api = InMemoryAPI(console: true)
        let key = try api.key(role: .admin)
        try await api.test { client in
            #expect(
                try await client.call(
                    .put, "/v1/templates/welcome", token: key,
                    json: #"{"notification":{"title":"<b>Hi</b>","body":"n","data":{"n":18446744073709551617}}}"#
                ).status == 201)
            #expect(
                try await client.call(.put, "/v1/segments/gold", token: key, json: SegmentRoutesTests.goldBerlin)
                    .status == 201)
            let browser = Browser(client)
            try await browser.signIn(key)
            let page = try await browser.go(.get, "/console/library")
            #expect(page.status == 200)
            #expect(page.text.contains("&lt;b&gt;Hi&lt;/b&gt;"))
            #expect(page.text.contains("18446744073709551617"))
            #expect(page.text.contains(#"<a href="/console/library?count=gold">count</a>"#))
            let counted = try await browser.go(.get, "/console/library?count=gold")
            #expect(counted.text.contains(#"data-segment="gold">0"#))
        }
    }

    @Test func aPreviewShowsWhatTheChosenUserWouldSeeAndSendsNothing() async throws {
        let api = InMemoryAPI(console: true)
        let key = try api.key(role: .admin)
        try await api.test { client in
            let template = #"{"notification":{"title":"Hi {{ first_name | 'Friend' }}","body":"<b>{{ city }}</b>"}}"#
            #expect(try await client.call(.put, "/v1/templates/hello", token: key, json: template).status == 201)
            let attributes = #"{"attributes":{"first_name":"Ada","city":"Berlin"}}"#
            #expect(try await client.call(.put, "/v1/users/005A/attributes", token: key, json: attributes).status < 300)
            let browser = Browser(client)
            try await browser.signIn(key)
            let before = api.jobs.entries.count
            let page = try await browser.post(
                "/console/jobs/new", from: "/console/jobs/new",
                [("app", "app1"), ("templateId", "hello"), ("previewUser", "005A"), ("action", "preview")])
            #expect(page.status == 200)
            #expect(page.text.contains(#"<dd id="preview-title">Hi Ada</dd>"#))
            #expect(page.text.contains(#"<dd id="preview-body">&lt;b&gt;Berlin&lt;/b&gt;</dd>"#))
            let stranger = try await browser.post(
                "/console/jobs/new", from: "/console/jobs/new",
                [
                    ("app", "app1"), ("jobTitle", "Hi {{ first_name | 'Friend' }}"), ("previewUser", "nobody"),
                    ("action", "preview"),
                ])
            #expect(stranger.text.contains(#"<dd id="preview-title">Hi Friend</dd>"#))
            #expect(api.jobs.entries.count == before, "a preview sends nothing")
        }
    }

    @Test func devicesAreFoundByTheirTokensLastCharactersAndAShortSuffixIsRefused() async throws {
        let api = InMemoryAPI(console: true)
        let key = try api.key(role: .read)
        let token = String(repeating: "c", count: 56) + "1a2b3c4d"
        try await api.devices.register(
            DeviceImportRecord(org: "orgA", app: "app1", user: "005Z", platform: .ios, token: DeviceToken(token)),
            now: Date())
        try await api.test { client in
            let browser = Browser(client)
            try await browser.signIn(key)
            let found = try await browser.go(.get, "/console/devices?suffix=1a2b3c4d&app=app1")
            #expect(found.status == 200)
            #expect(found.text.contains(#"<a href="/console/devices?user=005Z&amp;app=app1">005Z</a>"#))
            #expect(!found.text.contains(token))
            let none = try await browser.go(.get, "/console/devices?suffix=99999999&app=app1")
            #expect(none.text.contains("No device's token ends so."))
            #expect(try await browser.go(.get, "/console/devices?suffix=3c4d&app=app1").status == 400)
        }
    }

    @Test func anAdminSavesAndDeletesTemplatesAndSegmentsThroughTheAPIsChecksAndAReadKeyCannot() async throws {
        let api = InMemoryAPI(console: true)
        let admin = try api.key(role: .admin)
        let reader = try api.key(role: .read)
        try await api.test { client in
            let browser = Browser(client)
            try await browser.signIn(admin)
            let saved = try await browser.post(
                "/console/library/templates", from: "/console/library",
                [("id", "welcome"), ("body", #"{"notification":{"title":"Hi {{ first_name }}","body":"b"}}"#)])
            #expect(saved.status == 303)
            #expect(try await api.templates.template(org: "orgA", id: "welcome") != nil)
            // A fault comes back beside the form, the body as typed, nothing stored.
            let refused = try await browser.post(
                "/console/library/segments", from: "/console/library",
                [
                    ("id", "gold"),
                    ("body", #"{"match":"all","filters":[{"attribute":"plan","op":"near","value":"x"}]}"#),
                ])
            #expect(refused.status == 400)
            #expect(refused.text.contains(#"id="segment-error""#))
            #expect(refused.text.contains("filters[0].op"))
            #expect(refused.text.contains("&quot;near&quot;"))
            let segment = try await browser.post(
                "/console/library/segments", from: "/console/library",
                [("id", "gold"), ("body", SegmentRoutesTests.goldBerlin)])
            #expect(segment.status == 303)
            let edit = try await browser.go(.get, "/console/library?segment=gold")
            #expect(edit.text.contains(#"<input id="segment-id" name="id" value="gold">"#))
            let deleted = try await browser.post(
                "/console/library/templates/welcome/delete", from: "/console/library", [])
            #expect(deleted.status == 303)
            #expect(try await api.templates.template(org: "orgA", id: "welcome") == nil)

            let other = Browser(client)
            try await other.signIn(reader)
            let page = try await other.go(.get, "/console/library")
            #expect(!page.text.contains(#"id="segment-form""#))
            let denied = try await other.post(
                "/console/library/segments/gold/delete", from: "/console/library", [])
            #expect(denied.status == 403)
        }
    }

    @Test func aScheduleIsPausedAndResumedFromTheLibrary() async throws {
        let api = InMemoryAPI(console: true)
        let key = try api.key(role: .send)
        try await api.test { client in
            let created = try await client.call(
                .post, "/v1/schedules", token: key,
                json: ScheduleRoutesTests.schedule(job: ScheduleRoutesTests.job(#"{"title":"Hi"}"#)))
            #expect(created.status == 201)
            let browser = Browser(client)
            try await browser.signIn(key)
            let paused = try await browser.post("/console/library/schedules/digest/pause", from: "/console/library", [])
            #expect(paused.status == 303)
            #expect(try await api.schedules.schedule(org: "orgA", id: "digest")?.paused == true)
            let page = try await browser.go(.get, "/console/library")
            #expect(page.text.contains(#"action="/console/library/schedules/digest/resume""#))
            _ = try await browser.post("/console/library/schedules/digest/resume", from: "/console/library", [])
            #expect(try await api.schedules.schedule(org: "orgA", id: "digest")?.paused == false)
            let unknown = try await browser.post("/console/library/schedules/none/pause", from: "/console/library", [])
            #expect(unknown.status == 404)
        }
    }

    @Test func theStaticFilesAnswerNotModifiedToTheirETag() async throws {
        try await InMemoryAPI(console: true).test { client in
            let first = try await client.execute(uri: "/console/static/console.css", method: .get)
            #expect(first.status == .ok)
            let etag = try #require(first.headers[.eTag])
            let again = try await client.execute(
                uri: "/console/static/console.css", method: .get, headers: [.ifNoneMatch: etag])
            #expect(again.status == .notModified)
            #expect(try await client.execute(uri: "/console/static/nope.js", method: .get).status == .notFound)
        }
    }

    @Test func aTestPushGoesThroughTheAPIsPathAndADeadTokenLeavesTheRegistry() async throws {
        let sent = NSLockedBox<[APIServer.TestPushInput]>([])
        let api = InMemoryAPI(console: true) { input in
            sent.withLocked { $0.append(input) }
            let dead = input.token.rawValue.hasPrefix("dead")
            let json =
                dead
                ? #"{"outcome":"remove-token","reason":"BadDeviceToken","status":400}"#
                : #"{"apnsId":"A-1","outcome":"accepted","reason":null,"status":200}"#
            return APIServer.TestPushAnswer(json: Data(json.utf8), delivered: !dead, tokenDead: dead)
        }
        let key = try api.key(role: .send)
        let dead = "dead" + String(repeating: "a", count: 60)
        try await api.devices.register(
            DeviceImportRecord(
                org: "orgA", app: "app1", user: "005A", platform: .ios, token: DeviceToken(dead),
                environment: .production), now: Date())
        try await api.test { client in
            let browser = Browser(client)
            try await browser.signIn(key)
            let page = try await browser.go(.get, "/console/test-push?app=app1")
            #expect(page.text.contains("…aaaaaaaa"))
            #expect(!page.text.contains(dead), "a whole token never appears in a page")
            let token = try #require(Browser.csrf(in: page.text))
            let good = try await browser.go(
                .post, "/console/test-push?app=app1",
                form: [
                    ("csrf", token), ("app", "app1"), ("platform", "ios"),
                    ("recipient", String(repeating: "b", count: 64)),
                    ("alert", "Hello"),
                ])
            #expect(good.status == 200)
            #expect(good.text.contains(#"<dd id="result-apns-id">A-1</dd>"#))
            let gone = try await browser.go(
                .post, "/console/test-push?app=app1",
                form: [("csrf", token), ("app", "app1"), ("pick", "ios:005A:aaaaaaaa"), ("alert", "Hello")])
            #expect(gone.text.contains("BadDeviceToken"))
            #expect(gone.text.contains("The token was removed from the registry."))
            #expect(try await api.devices.devices(org: "orgA", app: "app1", user: "005A").isEmpty)
            #expect(sent.withLocked { $0.map(\.token.rawValue) } == [String(repeating: "b", count: 64), dead])
            let missing = try await browser.go(
                .post, "/console/test-push?app=app1", form: [("csrf", token), ("app", "app1"), ("alert", "x")])
            #expect(missing.status == 400)
            #expect(missing.text.contains("Recipient is required"))
        }
    }
}
