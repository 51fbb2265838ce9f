import Foundation
import Hummingbird
import NIOCore
import VolleyCore

/// The console under `/console` (`console.enabled`): server-rendered pages over the same stores and the same
/// functions as `/v1` (a campaign is accepted by `acceptJob`, steered by `steer`, a test push sent by
/// `sendTestPush`), so a page can do nothing the key's API calls could not, and says no more than they would.
extension APIServer {
    func addConsoleRoutes(_ router: Router<APIRequestContext>, auth: AuthMiddleware) {
        let pages = consolePages
        let console = router.group("/console").add(
            middleware: ConsoleMiddleware(
                sessions: consoleSessions, auth: auth, clock: clock, pages: pages, logger: logger,
                secure: configuration.tls != nil, maxFormBytes: min(configuration.maxBodyBytes, 256 << 10)))
        console.get("") { _, _ in Response.redirect(to: "/console/jobs", type: .normal) }
        console.get("/login") { request, context in self.loginPage(request, context, error: nil) }
        console.post("/login") { request, context in try await self.login(request, context, auth: auth) }
        console.post("/logout") { _, _ in self.logout() }
        console.get("/static/:file") { request, context in try self.staticFile(request, context) }
        console.get("/jobs") { request, context in try await self.jobsPage(request, context) }
        console.get("/jobs/new") { _, context in try await self.newJobPage(context, form: nil, problem: nil) }
        console.post("/jobs/new") { _, context in try await self.postNewJob(context) }
        console.get("/jobs/:id") { _, context in try await self.jobPage(context) }
        console.get("/jobs/:id/live") { _, context in try await self.jobLive(context) }
        console.get("/jobs/:id/chart.svg") { _, context in try await self.jobChart(context) }
        console.get("/jobs/:id/outcomes.csv") { request, context in try await self.exportOutcomes(request, context) }
        for action in [Steering.pause, .resume, .cancel] {
            console.post("/jobs/:id/\(action.rawValue)") { _, context in try await self.steerPage(context, action) }
        }
        console.get("/test-push") { request, context in try await self.testPushPage(request, context) }
        console.post("/test-push") { request, context in try await self.postTestPushPage(request, context) }
        console.get("/devices") { request, context in try await self.devicesPage(request, context) }
        console.get("/health") { _, context in try await self.healthPage(context) }
        console.get("/library") { request, context in try await self.libraryPage(request, context) }
        console.post("/library/templates") { request, context in try await self.saveLibrary(request, context, .template)
        }
        console.post("/library/segments") { request, context in try await self.saveLibrary(request, context, .segment) }
        console.post("/library/templates/:id/delete") { _, context in
            try await self.deleteLibrary(context, .template)
        }
        console.post("/library/segments/:id/delete") { _, context in try await self.deleteLibrary(context, .segment) }
        for paused in [true, false] {
            console.post("/library/schedules/:id/\(paused ? "pause" : "resume")") { _, context in
                let org = try context.key(APIRole.senders)
                _ = try await self.setSchedulePaused(org: org, id: try self.parameter(context, "id"), paused: paused)
                return Response.redirect(to: "/console/library", type: .normal)
            }
        }
    }

    // MARK: - sign-in

    func loginPage(_ request: Request, _ context: APIRequestContext, error: String?) -> Response {
        let nonce = consoleSessions.loginNonce()
        let next = request.uri.queryParameters.get("next") ?? context.console.form["next"]
        var response = consolePages.render(
            "login",
            [
                "title": "Sign in", "error": error as Any, "csrf": consoleSessions.loginToken(nonce: nonce),
                "next": ConsolePages.localPath(next ?? "") ?? "",
            ], context: context, status: error == nil ? .ok : .unauthorized)
        response.setCookie(cookie(ConsoleSessions.loginCookie, nonce, maxAge: 3600))
        return response
    }

    func login(_ request: Request, _ context: APIRequestContext, auth: AuthMiddleware) async throws -> Response {
        let form = context.console.form
        guard
            consoleSessions.checkLogin(token: form["csrf"], nonce: request.cookies[ConsoleSessions.loginCookie]?.value)
        else {
            throw APIProblem(
                .forbidden, "this sign-in form is out of date or came from another site: open the sign-in page again",
                field: "csrf")
        }
        let key = form.text("key") ?? ""
        guard let id = APIKeyFormat.id(of: key) else {
            return loginPage(request, context, error: "That is not a Volley API key (vk_…).")
        }
        let record: APIKeyRecordCache.Entry
        do { record = try await auth.keyRecord(id: id) } catch let p as APIProblem where p.status == .unauthorized {
            return loginPage(request, context, error: "That key is not valid.")
        }
        guard record.matches(key) else { return loginPage(request, context, error: "That key is not valid.") }
        let target = ConsolePages.localPath(form["next"] ?? "") ?? "/console/jobs"
        var response = Response.redirect(to: target, type: .normal)
        response.setCookie(
            cookie(
                ConsoleSessions.sessionCookie, consoleSessions.issue(keyID: id, now: clock.now()),
                maxAge: Int(consoleSessions.lifetime)))
        response.setCookie(cookie(ConsoleSessions.loginCookie, "", maxAge: 0))
        logger.info("console: signed in", metadata: ["key": "\(id)", "org": "\(record.record.org)"])
        return response
    }

    func logout() -> Response {
        var response = Response.redirect(to: "/console/login", type: .normal)
        response.setCookie(cookie(ConsoleSessions.sessionCookie, "", maxAge: 0))
        return response
    }

    private func cookie(_ name: String, _ value: String, maxAge: Int) -> Cookie {
        Cookie(
            name: name, value: value, maxAge: maxAge, path: "/console", secure: configuration.tls != nil,
            httpOnly: true, sameSite: .strict)
    }

    // MARK: - static files

    func staticFile(_ request: Request, _ context: APIRequestContext) throws -> Response {
        guard let name = context.parameters.get("file"), let file = ConsolePages.staticFiles[name] else {
            throw APIProblem.notFound("no such file")
        }
        var headers: HTTPFields = [.eTag: file.etag, .cacheControl: "no-cache"]
        if request.headers[.ifNoneMatch]?.split(separator: ",").contains(where: {
            $0.trimmingCharacters(in: .whitespaces) == file.etag
        }) == true {
            return Response(status: .notModified, headers: headers)
        }
        headers[.contentType] = file.contentType
        return Response(status: .ok, headers: headers, body: .init(byteBuffer: ByteBuffer(string: file.text)))
    }

    // MARK: - campaigns

    func jobsPage(_ request: Request, _ context: APIRequestContext) async throws -> Response {
        let org = try context.key([.send, .read, .admin])
        let parameters = request.uri.queryParameters
        var query = try Self.jobListQuery { parameters.get($0).flatMap { $0.isEmpty ? nil : $0 } }
        if parameters.get("limit") == nil { query.limit = 50 }
        let app = parameters.get("app").flatMap { $0.isEmpty ? nil : $0 }
        let page = try await jobHistory().jobs(org: org, query: query)
        let jobs = page.jobs.filter { app == nil || $0.app == app }.map(ConsolePages.jobRow)
        var more: String?
        if let next = page.next {
            var items = [("cursor", next.description)]
            if let s = query.state { items.append(("state", s)) }
            if let app { items.append(("app", app)) }
            more = "/console/jobs?" + items.map { "\($0.0)=\(ConsolePages.queryEscape($0.1))" }.joined(separator: "&")
        }
        let states = JobListQuery.states.map { ["name": $0, "selected": $0 == query.state] as [String: Any] }
        let apps = configuration.apps(for: org).map {
            ["name": $0.rawValue, "selected": $0.rawValue == app] as [String: Any]
        }
        return consolePages.render(
            "jobs",
            [
                "title": "Campaigns", "jobs": jobs, "empty": jobs.isEmpty, "more": more as Any, "states": states,
                "apps": apps,
            ], context: context)
    }

    private func consoleJob(_ context: APIRequestContext) async throws -> (OrgID, JobStatus) {
        let org = try context.key([.send, .read, .admin])
        return (org, try await jobStatus(org: org, id: try parameter(context, "id")))
    }

    func jobPage(_ context: APIRequestContext) async throws -> Response {
        let (org, status) = try await consoleJob(context)
        let events = (try? await stores.jobStatus.events(org: org, job: JobID(status.id))) ?? nil
        var values = ConsolePages.jobDetail(status, events: events ?? [])
        values["title"] = "Campaign \(status.id)"
        return consolePages.render("job", values, context: context)
    }

    /// The job's status as `GET /v1/jobs/{id}` answers it, for the page's live refresh.
    func jobLive(_ context: APIRequestContext) async throws -> Response {
        let (_, status) = try await consoleJob(context)
        return JSONResponse.raw(try ReportCoding.encoder.encode(status))
    }

    func jobChart(_ context: APIRequestContext) async throws -> Response {
        let (_, status) = try await consoleJob(context)
        let svg = ConsoleChart.svg(status.counts?.perMinute ?? [])
        return Response(
            status: .ok, headers: [.contentType: "image/svg+xml"],
            body: .init(byteBuffer: ByteBuffer(string: svg)))
    }

    func steerPage(_ context: APIRequestContext, _ action: Steering) async throws -> Response {
        let org = try context.key(APIRole.senders)
        let id = try parameter(context, "id")
        _ = try await steer(org: org, id: id, action)
        return Response.redirect(to: "/console/jobs/\(ConsolePages.pathEscape(id))", type: .normal)
    }

    // MARK: - new campaign

    func newJobPage(
        _ context: APIRequestContext, form: ConsoleForm?, problem: APIProblem?,
        preview: (user: String, shown: VolleyCore.Notification)? = nil
    ) async throws -> Response {
        let org = try context.key(APIRole.senders)
        let form = form ?? ConsoleForm()
        let segments = (try? await stores.segments?.list(org: org)) ?? nil
        let templates = (try? await stores.templates.list(org: org)) ?? []
        var values = ConsolePages.newJobForm(
            form, apps: configuration.apps(for: org).map(\.rawValue),
            segments: (segments ?? []).map(\.id.rawValue).sorted(), templates: templates.map(\.id).sorted())
        values["title"] = "New campaign"
        if let preview {
            // Names of their own: a missing value in a section would be looked up in the page's (its `title`).
            values["preview"] = true
            values["previewFor"] = preview.user
            values["previewTitle"] = preview.shown.title
            values["previewSubtitle"] = preview.shown.subtitle
            values["previewBody"] = preview.shown.body
        }
        if let problem {
            values["error"] = problem.detail
            values["err_" + ConsoleJobForm.input(for: problem.field ?? "body")] = problem.detail
        }
        return consolePages.render("new", values, context: context, status: problem?.status ?? .ok)
    }

    func postNewJob(_ context: APIRequestContext) async throws -> Response {
        let org = try context.key(APIRole.senders)
        let form = context.console.form
        if form["action"] == "preview" { return try await previewNewJob(context, org: org, form: form) }
        do {
            let body = try ConsoleJobForm.job(from: form)
            let accepted = try await acceptJob(Data(body.utf8), org: org, headerKey: nil)
            return Response.redirect(
                to: "/console/jobs/\(ConsolePages.pathEscape(accepted.id.rawValue))", type: .normal)
        } catch let p as APIProblem {
            return try await newJobPage(context, form: form, problem: p)
        }
    }

    /// The New campaign form again, with what the chosen user would be shown (nothing is sent).
    func previewNewJob(_ context: APIRequestContext, org: OrgID, form: ConsoleForm) async throws -> Response {
        do {
            guard let user = form.text("previewUser"), Input.isSafeID(user) else {
                throw APIProblem.badRequest("previewUser", "the user id to preview for")
            }
            let text = try ConsoleJobForm.job(from: form, previewFor: user)
            let body = try JobBody(Data(text.utf8), org: org)
            let shown = try await preview(of: body.job, org: org, body: body, user: UserID(user))
            return try await newJobPage(context, form: form, problem: nil, preview: (user, shown))
        } catch let p as APIProblem {
            return try await newJobPage(context, form: form, problem: p)
        }
    }

    // MARK: - test push

    func testPushPage(_ request: Request, _ context: APIRequestContext) async throws -> Response {
        let org = try context.key(APIRole.senders)
        var values = try await testPushValues(request, org: org, form: ConsoleForm())
        values["title"] = "Send test notification"
        return consolePages.render("test-push", values, context: context)
    }

    private func testPushValues(_ request: Request, org: OrgID, form: ConsoleForm) async throws -> [String: Any] {
        let apps = configuration.apps(for: org).map(\.rawValue)
        let parameters = request.uri.queryParameters
        let app = form.text("app") ?? parameters.get("app") ?? apps.first ?? ""
        let search = parameters.get("search").flatMap { $0.isEmpty ? nil : $0 }
        var found: [DeviceRecord] = []
        var searched = false
        if configuration.org(org, mayUse: AppName(app)) {
            searched = true
            if let search, Input.isSafeID(search) {
                found = try await stores.devices.devices(org: org, app: AppName(app), user: UserID(search))
            } else if search == nil {
                found = try await stores.devices.recent(org: org, app: AppName(app), limit: 5)
            }
        }
        var values = ConsolePages.testPushForm(form, apps: apps, app: app)
        values["search"] = search ?? ""
        values["searched"] = searched
        values["searchLabel"] =
            search.map { "Devices of user \($0)" } ?? "The five devices registered most recently in \(app)"
        values["found"] = found.map { ConsolePages.deviceRow($0, app: app, pickable: true) }
        values["foundEmpty"] = searched && found.isEmpty
        return values
    }

    func postTestPushPage(_ request: Request, _ context: APIRequestContext) async throws -> Response {
        let org = try context.key(APIRole.senders)
        var form = context.console.form
        var token = form.text("recipient")
        if token == nil, let pick = form.text("pick"), let picked = try await pickedDevice(pick, org: org, form: form) {
            token = picked.token.rawValue
            form.values["platform"] = [picked.platform.rawValue]
        }
        var values = try await testPushValues(request, org: org, form: form)
        values["title"] = "Send test notification"
        var status: HTTPResponse.Status = .ok
        do {
            let body = try ConsoleTestPushForm.body(from: form, token: token)
            let answer = try await sendTestPush(Data(body.utf8), org: org)
            values["result"] = ConsolePages.testPushResult(answer)
        } catch let p as APIProblem {
            let message = ConsoleTestPushForm.message(for: p)
            values["error"] = message
            values["err_" + ConsoleTestPushForm.input(for: p.field ?? "alert")] = message
            status = p.status
        }
        return consolePages.render("test-push", values, context: context, status: status)
    }

    /// The device picked from the search (`platform:user:last 8 characters`): the page names devices
    /// that way so that no whole token is written into it.
    private func pickedDevice(_ pick: String, org: OrgID, form: ConsoleForm) async throws -> DeviceRecord? {
        let parts = pick.split(separator: ":", omittingEmptySubsequences: false).map(String.init)
        guard parts.count >= 3, let platform = Platform(rawValue: parts[0]), let app = form.text("app"),
            configuration.org(org, mayUse: AppName(app))
        else { return nil }
        let user = parts[1..<(parts.count - 1)].joined(separator: ":")
        let suffix = parts[parts.count - 1]
        guard Input.isSafeID(user) else { return nil }
        return try await stores.devices.devices(org: org, app: AppName(app), user: UserID(user)).first {
            $0.platform == platform && $0.token.rawValue.hasSuffix(suffix)
        }
    }

    // MARK: - devices and health

    func devicesPage(_ request: Request, _ context: APIRequestContext) async throws -> Response {
        let org = try context.key([.send, .read, .admin])
        let parameters = request.uri.queryParameters
        let apps = configuration.apps(for: org).map(\.rawValue)
        let app = parameters.get("app").flatMap { $0.isEmpty ? nil : $0 } ?? apps.first ?? ""
        let user = parameters.get("user").flatMap { $0.isEmpty ? nil : $0 }
        let suffix = parameters.get("suffix").flatMap { $0.isEmpty ? nil : $0 }
        var values: [String: Any] = [
            "title": "Devices", "user": user ?? "", "suffix": suffix ?? "",
            "apps": apps.map { ["name": $0, "selected": $0 == app] as [String: Any] },
        ]
        if let suffix {
            guard suffix.count >= DeviceLookup.minSuffix, suffix.count <= 64 else {
                throw APIProblem.badRequest(
                    "suffix", "the token's last \(DeviceLookup.minSuffix) to 64 characters")
            }
            guard configuration.org(org, mayUse: AppName(app)) else {
                throw APIProblem.notFound("no app named '\(app)' is available to this org", field: "app")
            }
            let found = try await stores.devices.withTokenSuffix(
                org: org, app: AppName(app), suffix: suffix, limit: 20)
            values["matches"] = found.map { ConsolePages.deviceRow($0, app: app, pickable: false) }
            values["matchesEmpty"] = found.isEmpty
            values["suffixSearched"] = true
        }
        if let user {
            guard Input.isSafeID(user) else {
                throw APIProblem.badRequest("user", "a user id: letters, digits and . _ : -")
            }
            guard configuration.org(org, mayUse: AppName(app)) else {
                throw APIProblem.notFound("no app named '\(app)' is available to this org", field: "app")
            }
            let devices = try await stores.devices.devices(org: org, app: AppName(app), user: UserID(user))
            values["devices"] = devices.map { ConsolePages.deviceRow($0, app: app, pickable: false) }
            values["devicesEmpty"] = devices.isEmpty
            values["searched"] = true
            if let history = stores.deliveries {
                let lines = try await history.deliveries(org: org, user: UserID(user), since: nil, limit: 50)
                values["deliveries"] = lines.map(ConsolePages.deliveryRow)
                values["deliveriesEmpty"] = lines.isEmpty
                values["historyKept"] = true
            }
        }
        return consolePages.render("devices", values, context: context)
    }

    /// What the library's forms edit: a template (`PUT /v1/templates/{id}`'s body) or a segment (`/v1/segments`').
    enum LibraryItem: String, Sendable {
        case template, segment
    }

    /// Saves a template or a segment from the library's form (`id`, `body` as the API's PUT takes it), through the
    /// same function as its `/v1` route; an admin key's. A problem comes back beside the form.
    func saveLibrary(_ request: Request, _ context: APIRequestContext, _ item: LibraryItem) async throws -> Response {
        let org = try context.key([.admin])
        let form = context.console.form
        let id = form.text("id") ?? ""
        let body = Data((form["body"] ?? "").utf8)
        do {
            switch item {
            case .template: _ = try await saveTemplate(org: org, id: id, body: body)
            case .segment: _ = try await saveSegment(org: org, id: id, body: body)
            }
        } catch let p as APIProblem {
            return try await libraryPage(request, context, editing: (item, id, form["body"] ?? "", p))
        }
        return Response.redirect(to: "/console/library", type: .normal)
    }

    func deleteLibrary(_ context: APIRequestContext, _ item: LibraryItem) async throws -> Response {
        let org = try context.key([.admin])
        let id = try parameter(context, "id")
        switch item {
        case .template: try await removeTemplate(org: org, id: id)
        case .segment: try await removeSegment(org: org, id: SegmentID(id))
        }
        return Response.redirect(to: "/console/library", type: .normal)
    }

    /// The org's templates, segments (with a count on demand), recurring schedules and notification types, as
    /// their `/v1` reads answer them; the forms an admin key saves templates and segments with.
    func libraryPage(
        _ request: Request, _ context: APIRequestContext,
        editing: (item: LibraryItem, id: String, body: String, problem: APIProblem?)? = nil
    ) async throws -> Response {
        let org = try context.key([.send, .read, .admin])
        let templates = try await stores.templates.list(org: org).sorted { $0.id < $1.id }.map {
            [
                "id": $0.id, "updatedAt": RFC3339.format($0.updatedAt), "notification": $0.notification.jsonText,
                "editHref": "/console/library?template=" + ConsolePages.queryEscape($0.id),
                "deleteAction": "/console/library/templates/" + ConsolePages.pathEscape($0.id) + "/delete",
            ] as [String: Any]
        }
        let counted = request.uri.queryParameters.get("count")
        var segments: [[String: Any]] = []
        if let store = stores.segments {
            for segment in try await store.list(org: org).sorted(by: { $0.id.rawValue < $1.id.rawValue }) {
                var row: [String: Any] = [
                    "id": segment.id.rawValue, "definition": segment.json.jsonText,
                    "countHref": "/console/library?count=" + ConsolePages.queryEscape(segment.id.rawValue),
                    "editHref": "/console/library?segment=" + ConsolePages.queryEscape(segment.id.rawValue),
                    "deleteAction": "/console/library/segments/" + ConsolePages.pathEscape(segment.id.rawValue)
                        + "/delete",
                ]
                if segment.id.rawValue == counted { row["count"] = try await store.count(org: org, id: segment.id) }
                segments.append(row)
            }
        }
        let schedules = try await stores.schedules?.list(org: org).sorted { $0.schedule.id < $1.schedule.id }.map {
            s -> [String: Any] in
            [
                "id": s.schedule.id, "paused": s.paused, "nextRunAt": s.nextRunAt.map { RFC3339.format($0) } ?? "",
                "lastRunJob": s.lastRunJob?.rawValue ?? "",
                "lastRunHref": s.lastRunJob.map { "/console/jobs/" + ConsolePages.pathEscape($0.rawValue) } ?? "",
                "definition": s.json.jsonText,
                "steerAction": "/console/library/schedules/" + ConsolePages.pathEscape(s.schedule.id)
                    + (s.paused ? "/resume" : "/pause"),
            ]
        }
        let types = try await stores.types.types(org: org).sorted { $0.id < $1.id }.map {
            ["id": $0.id, "name": $0.name, "mobile": $0.mobile, "desktop": $0.desktop] as [String: Any]
        }
        var values: [String: Any] = [
            "title": "Templates, segments, schedules and types", "templates": templates, "segments": segments,
            "schedules": schedules ?? [], "types": types,
        ]
        if case .key(_, _, .admin) = context.caller { values["isAdmin"] = true }
        // The forms: what was posted (with its problem), or the item `?template=` / `?segment=` names, as stored.
        let parameters = request.uri.queryParameters
        if let editing {
            values[editing.item.rawValue + "Id"] = editing.id
            values[editing.item.rawValue + "Body"] = editing.body
            values[editing.item.rawValue + "Error"] = editing.problem.map { p in
                p.field.map { "\($0): \(p.detail)" } ?? p.detail
            }
        } else if let id = parameters.get("template"), StoredTemplate.isValidID(id),
            let t = try await stores.templates.template(org: org, id: id)
        {
            values["templateId"] = id
            values["templateBody"] = JSONValue.object(["notification": t.notification]).jsonText
        } else if let id = parameters.get("segment"), let store = stores.segments,
            let segment = try await store.segment(org: org, id: SegmentID(id))
        {
            values["segmentId"] = id
            values["segmentBody"] = segment.json.jsonText
        }
        return consolePages.render(
            "library", values, context: context, status: editing?.problem?.status ?? .ok)
    }

    func healthPage(_ context: APIRequestContext) async throws -> Response {
        let org = try context.key([.send, .read, .admin])
        var checks: [[String: Any]] = []
        do {
            try await stores.credentials.ping()
            checks.append(["name": "Redis", "ok": true, "detail": "answers and runs scripts"])
        } catch {
            checks.append(["name": "Redis", "ok": false, "detail": "\(error)"])
        }
        if let refusal = refusals.first {
            checks.append(["name": "Redis permissions", "ok": false, "detail": "refused: \(refusal)"])
        }
        let quota = (try? await stores.quota.usage(org: org)) ?? []
        let rows = quota.map { q -> [String: Any] in
            [
                "platform": q.platform.rawValue, "hour": q.hour, "limit": q.limit, "used": q.used,
                "pending": q.pending, "remaining": q.remaining,
            ]
        }
        var jobs: [[String: Any]] = []
        if let history = stores.jobHistory {
            for (name, state) in [
                ("Running", "running"), ("Scheduled", "scheduled"), ("Paused", "paused"),
                ("Dead-lettered", "dead-lettered"),
            ] {
                var q = JobListQuery()
                q.state = state
                q.limit = JobListQuery.maxLimit
                let n = try await history.jobs(org: org, query: q).jobs.count
                let count = n >= JobListQuery.maxLimit ? "\(n) or more" : String(n)
                jobs.append(["name": name, "count": count, "state": state])
            }
        }
        return consolePages.render(
            "health",
            ["title": "Health", "checks": checks, "quota": rows, "jobs": jobs], context: context)
    }
}
