import Crypto
import Foundation
import Hummingbird
import Metrics
import VolleyConnect
import VolleyCore

/// Volley's own resources under `/v1` (openapi/volley.yaml). Thin handlers: parse and validate, call a store or the
/// job stream, answer; errors are `APIProblem`s rendered in one place (`ObservingMiddleware`).
extension APIServer {
    func addV1Routes(_ v1: RouterGroup<APIRequestContext>) {
        v1.post("/jobs") { request, context in try await self.createJob(request, context) }
        v1.get("/jobs") { request, context in try await self.listJobs(request, context) }
        v1.get("/jobs/:id") { request, context in try await self.getJob(request, context) }
        v1.get("/jobs/:id/outcomes") { request, context in try await self.exportOutcomes(request, context) }
        v1.delete("/jobs/:id") { _, context in try await self.cancelJob(context) }
        v1.post("/jobs/:id/pause") { _, context in try await self.steerJob(context, pause: true) }
        v1.post("/jobs/:id/resume") { _, context in try await self.steerJob(context, pause: false) }
        v1.get("/jobs/:id/events") { _, context in try await self.getJobEvents(context) }
        v1.post("/user-tokens") { request, context in try await self.createUserToken(request, context) }
        v1.put("/devices") { request, context in try await self.putDevice(request, context) }
        v1.delete("/devices/:platform/:token") { _, context in try await self.deleteDevice(context) }
        v1.get("/users/:user/devices") { request, context in try await self.userDevices(request, context) }
        v1.get("/types") { _, context in try await self.listTypes(context) }
        v1.get("/types/:id") { _, context in try await self.getType(context) }
        v1.put("/types/:id") { request, context in try await self.putType(request, context) }
        v1.delete("/types/:id") { _, context in try await self.deleteType(context) }
        v1.get("/quota") { _, context in try await self.getQuota(context) }
        v1.post("/test-push") { request, context in try await self.postTestPush(request, context) }
        v1.get("/frequency-caps") { _, context in try await self.getFrequencyCaps(context) }
        v1.put("/frequency-caps") { request, context in try await self.putFrequencyCaps(request, context) }
        v1.delete("/frequency-caps") { _, context in try await self.deleteFrequencyCaps(context) }
        v1.get("/time-zone") { _, context in try await self.getTimeZone(context) }
        v1.put("/time-zone") { request, context in try await self.putTimeZone(request, context) }
        v1.delete("/time-zone") { _, context in try await self.deleteTimeZone(context) }
        addTemplateRoutes(v1)
        addScheduleRoutes(v1)
        addSyncHintRoutes(v1)
        addInteractionRoutes(v1)
        addDeliveryRoutes(v1)
        addSegmentRoutes(v1)
    }

    /// The body, at most `api.maxBodyBytes` (413 beyond).
    func body(_ request: Request) async throws -> Data {
        let limit = configuration.maxBodyBytes
        if let length = request.headers[.contentLength].flatMap(Int.init), length > limit {
            throw APIProblem(
                .contentTooLarge, "the body is \(length) bytes; at most \(limit) (api.maxBodyBytes)",
                field: "body")
        }
        do {
            let buffer = try await request.body.collect(upTo: limit)
            return buffer.withUnsafeReadableBytes { Data($0) }
        } catch {
            throw APIProblem(
                .contentTooLarge, "the body is larger than \(limit) bytes (api.maxBodyBytes)", field: "body")
        }
    }

    func parameter(_ context: APIRequestContext, _ name: String) throws -> String {
        guard let v = context.parameters.get(name), !v.isEmpty else {
            throw APIProblem.badRequest(name, "missing path parameter")
        }
        return v
    }

    // MARK: - jobs

    /// A segment the job names in `recipients` or `exclude` must exist in the org when the job is posted: 422 naming
    /// the entry (`recipients[2].segment`). One deleted later reaches nobody when the job resolves.
    func checkSegments(of job: PushJob, org: OrgID) async throws {
        guard let store = stores.segments else { return }
        for (field, entries) in [("recipients", job.recipients ?? []), ("exclude", job.exclude ?? [])] {
            for (i, entry) in entries.enumerated() {
                guard case .segment(let id) = entry else { continue }
                if try await store.segment(org: org, id: id) == nil {
                    throw APIProblem(
                        .unprocessableContent, "no segment '\(id)' in this org (PUT /v1/segments/\(id) first)",
                        field: "\(field)[\(i)].segment")
                }
            }
        }
    }

    func createJob(_ request: Request, _ context: APIRequestContext) async throws -> Response {
        let org = try context.key(APIRole.senders)
        let data = try await body(request)
        let accepted = try await acceptJob(data, org: org, headerKey: request.headers[.idempotencyKey])
        var headers: HTTPFields = [.location: "/v1/jobs/\(accepted.id)"]
        if accepted.replayed { headers[.idempotentReplayed] = "true" }
        var members: [(String, JSONResponse.Member)] = [
            ("entry", .text(accepted.entry)), ("id", .text(accepted.id.rawValue)), ("state", .text("queued")),
        ]
        if let due = accepted.dueAt {
            // A worker parks it until then. Members in key order.
            members = [("dueAt", .text(ScheduledTime.utcText(due)))] + members
            members[3].1 = .text("scheduled")
        }
        return JSONResponse.raw(JSONResponse.object(members), status: .accepted, headers: headers)
    }

    /// A job accepted onto the job stream (or the same body replayed under its id).
    struct AcceptedJob {
        var id: JobID
        var entry: String
        var replayed: Bool
        /// When it is sent, for a job with a `sendAt` later than now.
        var dueAt: Date?
    }

    /// Checks a job body as `POST /v1/jobs` does and puts it on the job stream: the one path for the API's route and
    /// the console's New campaign page. Throws the problem naming the field at fault.
    func acceptJob(_ data: Data, org: OrgID, headerKey: String?) async throws -> AcceptedJob {
        guard !data.isEmpty else { throw APIProblem.badRequest("body", "the request needs a JSON object body") }
        let body = try JobBody(data, org: org)
        var job = body.job
        guard job.org == org else { throw APIProblem.badRequest("org", "must be the key's org (\(org)) or left out") }
        if let headerKey, !Input.isSafeID(headerKey) {
            throw APIProblem.badRequest("Idempotency-Key", "1–128 characters of letters, digits and . _ : -")
        }
        if let id = job.id, !Input.isSafeID(id.rawValue) {
            throw APIProblem.badRequest("id", "1–128 characters of letters, digits and . _ : -")
        }
        if let headerKey, let id = job.id, id.rawValue != headerKey {
            throw APIProblem.badRequest("id", "differs from the Idempotency-Key header; send one or make them equal")
        }
        // What every worker would refuse is refused here, before the Idempotency-Key is recorded: a corrected retry
        // under the same key is then a new job, not a conflict.
        let timing = try await checkAtTheDoor(body, org: org)
        let id = job.id ?? headerKey.map(JobID.init) ?? KernelRandom.jobID()
        // The stream entry is the body as sent, with the key's org and the job id added in front when it leaves them
        // out: the worker decodes exactly the bytes decoded and checked here. A body that cannot take them that way
        // (an "id": null, a byte-order mark) is written from the decoded job instead.
        var added: [(key: String, value: String)] = []
        if !body.keys.contains("id") { added.append(("id", id.rawValue)) }
        if !body.keys.contains("org") { added.append(("org", org.rawValue)) }
        let entry: String
        if job.id != nil || !body.keys.contains("id"), let spliced = Input.addingMembers(added, to: data) {
            entry = spliced
        } else {
            job.id = id
            entry = job.jsonText
        }
        // A replay is the same request again: the body's bytes name it (its SHA-256), as they arrived.
        let digest = SHA256.hash(data: data).withUnsafeBytes { $0.lowercaseHex }
        let submission = try await stores.jobs.submit(
            org: org, job: id, app: job.app, digest: digest, entry: entry,
            createdAt: RFC3339.format(clock.now(), .milliseconds))
        var dueAt: Date?
        if case .later(let due) = timing { dueAt = due }
        switch submission {
        case .accepted(let entry): return AcceptedJob(id: id, entry: entry, replayed: false, dueAt: dueAt)
        case .replayed(let entry): return AcceptedJob(id: id, entry: entry, replayed: true, dueAt: dueAt)
        case .conflict:
            throw APIProblem(
                .unprocessableContent, "a different job was already accepted with this id", field: "Idempotency-Key")
        }
    }

    /// The checks a job passes at the door, before anything is written: `POST /v1/jobs` runs them on its body and
    /// `POST /v1/schedules` on its `job` (naming `job.<field>`), so a job every worker would dead-letter is refused
    /// at either. Counts of recipients and devices, the app the org may use, `PushJob.validate`, the segments it
    /// names, its `sendAt` (more than a minute past, or beyond `schedule.maxAheadDays`), its template, and the
    /// providers' own preparation of its notification (a templated job's with its template's). Returns when the job
    /// is sent.
    func checkAtTheDoor(_ body: JobBody, org: OrgID) async throws -> JobTiming {
        let job = body.job
        if let recipients = job.recipients, recipients.count > PushJob.maxRecipients {
            throw APIProblem.badRequest(
                "recipients", "\(recipients.count) ids; at most \(PushJob.maxRecipients) per job")
        }
        if let devices = job.devices, devices.count > PushJob.maxRecipients {
            throw APIProblem.badRequest("devices", "\(devices.count) devices; at most \(PushJob.maxRecipients) per job")
        }
        guard configuration.org(org, mayUse: job.app) else {
            throw APIProblem.notFound("no app named '\(job.app)' is available to this org", field: "app")
        }
        do { try job.validate() } catch let r as JobRejection {
            if r.field == "throttlePerMinute" {
                throw APIProblem(.unprocessableContent, r.message, field: "throttlePerMinute")
            }
            throw APIProblem.badRequest(r.field ?? "body", r.message)
        }
        try await checkSegments(of: job, org: org)
        // A time the worker would refuse (more than a minute past, beyond `schedule.maxAheadDays`) is refused here.
        let timing = JobTiming.of(
            sendAt: job.sendAt, now: clock.now(), maxAheadDays: configuration.scheduleMaxAheadDays, promoted: false)
        if case .refused(let r) = timing { throw APIProblem(.unprocessableContent, r.message, field: "sendAt") }
        let checked = try await templatedJob(job, org: org, body: body)
        if let refusal = notificationCheck.refusal(of: checked) {
            if let template = job.templateId {
                throw APIProblem.badRequest(
                    "templateId",
                    "template '\(template)', \(Self.field(of: refusal.error, in: body)): \(refusal.platform): "
                        + refusal.error.message)
            }
            throw APIProblem.badRequest(
                Self.field(of: refusal.error, in: body), "\(refusal.platform): \(refusal.error.message)")
        }
        return timing
    }

    /// Where a refused notification's field sits in the job body: under `notification`, except the raw `apns` and
    /// `fcm` payloads a job may give at its top level.
    static func field(of e: NotificationError, in body: JobBody) -> String {
        guard let field = e.field else { return "notification" }
        let top = field.split(separator: ".").first.map(String.init) ?? field
        if (top == "apns" || top == "fcm") && body.keys.contains(top) { return field }
        return "notification.\(field)"
    }

    /// The job's status as JSON, or (`Accept` preferring `text/csv`) its per-device outcomes as CSV, as
    /// `GET /v1/jobs/{id}/outcomes` answers.
    func getJob(_ request: Request, _ context: APIRequestContext) async throws -> Response {
        if OutcomeCSV.prefersCSV(accept: request.headers[.accept]) { return try await exportOutcomes(request, context) }
        let org = try context.key([.send, .read, .admin])
        let status = try await jobStatus(org: org, id: try parameter(context, "id"))
        return JSONResponse.raw(try ReportCoding.encoder.encode(status))
    }

    /// Job `id` of `org` as `GET /v1/jobs/{id}` answers it (the console's pages read it here too); 404 for a job the
    /// org does not have.
    func jobStatus(org: OrgID, id: String) async throws -> JobStatus {
        guard Input.isJobID(id), var status = try await stores.jobStatus.status(org: org, job: JobID(id)) else {
            throw APIProblem.notFound("no job '\(id)' in this org", field: "id")
        }
        status.id = id
        return status
    }

    /// Cancels a job of the send key's org: 200 with the job's status (`cancelled`; `dueAt` when it was scheduled),
    /// 404 for a job the org does not have, 409 (problem+json) for one that has finished or was dead-lettered.
    func cancelJob(_ context: APIRequestContext) async throws -> Response {
        let org = try context.key(APIRole.senders)
        let status = try await steer(org: org, id: try parameter(context, "id"), .cancel)
        return JSONResponse.raw(try ReportCoding.encoder.encode(status))
    }

    /// What a sender may do to a job that is queued, scheduled or running.
    enum Steering: String, Sendable {
        case pause, resume, cancel
    }

    /// Pauses, resumes or cancels job `id` of `org`: the job's status after it, or the problem (404 for a job the org
    /// does not have, 409 for one the action cannot change). The one path for the API's routes and the console.
    func steer(org: OrgID, id: String, _ action: Steering) async throws -> JobStatus {
        guard Input.isJobID(id) else { throw APIProblem.notFound("no job '\(id)' in this org", field: "id") }
        let job = JobID(id)
        let now = clock.now()
        var status: JobStatus
        if action == .cancel {
            switch try await stores.jobStatus.cancel(org: org, job: job, now: now) {
            case .unknown: throw APIProblem.notFound("no job '\(id)' in this org", field: "id")
            case .finished(let s):
                throw APIProblem(
                    .conflict, "job '\(id)' has finished (\(s.state)): nothing left to cancel", field: "id")
            case .cancelled(let s): status = s
            }
        } else {
            let pause = action == .pause
            let answer =
                pause
                ? try await stores.jobStatus.pause(org: org, job: job, now: now)
                : try await stores.jobStatus.resume(org: org, job: job, now: now)
            switch answer {
            case .unknown: throw APIProblem.notFound("no job '\(id)' in this org", field: "id")
            case .refused(let s):
                let why = pause ? "nothing left to pause" : "it is not paused"
                throw APIProblem(.conflict, "job '\(id)' is \(s.state): \(why)", field: "id")
            case .changed(let s): status = s
            }
        }
        Self.jobsSteered[action.rawValue]?.increment()
        status.id = id
        return status
    }

    /// `volley_jobs_steered_total{action}`: jobs paused, resumed and cancelled through the API (a total: no job or
    /// org label).
    static let jobsSteered = Dictionary(
        uniqueKeysWithValues: ["pause", "resume", "cancel"].map {
            ($0, Counter(label: "volley_jobs_steered_total", dimensions: [("action", $0)]))
        })

    /// Pauses or resumes a job of the send key's org: 200 with the job's status (`paused`; after a resume where it
    /// is now), 404 for a job the org does not have, 409 for one that has finished or was cancelled (a resume: one
    /// that is not paused).
    func steerJob(_ context: APIRequestContext, pause: Bool) async throws -> Response {
        let org = try context.key(APIRole.senders)
        let status = try await steer(org: org, id: try parameter(context, "id"), pause ? .pause : .resume)
        return JSONResponse.raw(try ReportCoding.encoder.encode(status))
    }

    /// The debug events of a job of the caller's org (`volley events` over HTTP). A job the org does not know
    /// answers 404; a known job without events (not a debug job, or expired) an empty list.
    func getJobEvents(_ context: APIRequestContext) async throws -> Response {
        let org = try context.key([.send, .read, .admin])
        let id = try parameter(context, "id")
        guard Input.isJobID(id) else { throw APIProblem.notFound("no job '\(id)' in this org", field: "id") }
        guard let events = try await stores.jobStatus.events(org: org, job: JobID(id)) else {
            throw APIProblem.notFound("no job '\(id)' in this org", field: "id")
        }
        struct Body: Encodable {
            var job: String
            var events: [DebugEvent]
        }
        return JSONResponse.raw(try ReportCoding.encoder.encode(Body(job: id, events: events)))
    }

    // MARK: - user tokens

    func createUserToken(_ request: Request, _ context: APIRequestContext) async throws -> Response {
        let org = try context.key(APIRole.senders)
        let data = try await body(request)
        let o = try Input.object(data)
        try Input.rejectUnknownKeys(o.members.keys, known: ["userId", "appName", "ttlSeconds"], at: "")
        let (userId, appName, ttlSeconds) = try Input.fields { () throws(JSONFieldError) in
            (try o.string("userId"), try o.string("appName"), try o.int("ttlSeconds"))
        }
        guard let user = userId, Input.isSafeID(user) else {
            throw APIProblem.badRequest("userId", "required: the user's id (letters, digits and . _ : -)")
        }
        guard let app = appName, !app.isEmpty else {
            throw APIProblem.badRequest("appName", "required: the connected app's name")
        }
        guard configuration.org(org, mayUse: AppName(app)) else {
            throw APIProblem.notFound("no app named '\(app)' is available to this org", field: "appName")
        }
        let maxTTL = configuration.userTokenMaxTTLSeconds
        let ttl = ttlSeconds ?? min(3600, maxTTL)
        guard (60...maxTTL).contains(ttl) else {
            throw APIProblem.badRequest("ttlSeconds", "an integer from 60 to \(maxTTL)")
        }
        let exp = Int64(clock.now().timeIntervalSince1970) + Int64(ttl)
        let token: String
        do {
            token = try signer.sign(UserTokenClaims(org: org, user: UserID(user), app: AppName(app), exp: exp))
        } catch {
            throw APIProblem(.serviceUnavailable, "\(error)")
        }
        let expiresAt = RFC3339.format(Date(timeIntervalSince1970: TimeInterval(exp)))
        return try JSONResponse.make(["token": token, "expiresAt": expiresAt], status: .created)
    }

    // MARK: - devices

    struct DeviceBody: Encodable {
        var app: String
        var user: String
        var platform: String
        var token: String
        var environment: String?
        var locale: String?
        var registeredAt: Date
        var lastSeenAt: Date
        var rsaPublicKey: String?
        var cipherName: String?
        var timeZone: String?
    }

    func putDevice(_ request: Request, _ context: APIRequestContext) async throws -> Response {
        let claims = try context.user()
        let data = try await body(request)
        let o = try Input.object(data)
        try Input.rejectUnknownKeys(
            o.members.keys,
            known: ["platform", "token", "environment", "locale", "rsaPublicKey", "cipherName", "timeZone"], at: "")
        let b = try Input.fields { () throws(JSONFieldError) in
            (
                platform: try o.string("platform"), token: try o.string("token"),
                environment: try o.string("environment"), locale: try o.string("locale"),
                rsaPublicKey: try o.string("rsaPublicKey"), cipherName: try o.string("cipherName"),
                timeZone: try o.string("timeZone")
            )
        }
        guard let p = b.platform, let platform = Platform(rawValue: p) else {
            throw APIProblem.badRequest("platform", "required: ios or android")
        }
        guard let token = b.token else {
            throw APIProblem.badRequest("token", "required: the provider's device token")
        }
        if let problem = DeviceToken(token).formProblem(for: platform) {
            throw APIProblem.badRequest("token", problem)
        }
        let key: DeviceKeyMaterial?
        do {
            key = try DeviceEncryptionKey.registration(rsaPublicKey: b.rsaPublicKey, cipherName: b.cipherName)
        } catch {
            throw APIProblem.badRequest(error.field ?? "rsaPublicKey", error.fieldMessage)
        }
        var environment: APNSEnvironment?
        if let e = b.environment {
            guard platform == .ios else {
                throw APIProblem.badRequest("environment", "only iOS devices have an APNs environment")
            }
            guard let env = APNSEnvironment(rawValue: e) else {
                throw APIProblem.badRequest("environment", "production or sandbox")
            }
            environment = env
        }
        let locale = b.locale
        if let l = locale, l.isEmpty || l.count > 35 {
            throw APIProblem.badRequest("locale", "a language tag such as en-US")
        }
        // An IANA zone the system knows (`deliverAtLocalTime` sends at the device's own wall-clock time).
        if let z = b.timeZone, let problem = IANAZone.problem(z) { throw APIProblem.badRequest("timeZone", problem) }
        let record = DeviceImportRecord(
            org: claims.org, app: claims.app, user: claims.user, platform: platform, token: DeviceToken(token),
            environment: environment, locale: locale, rsaPublicKey: key?.rsaPublicKey, cipherName: key?.cipherName,
            timeZone: b.timeZone)
        let now = clock.now()
        try await stores.devices.register(record, now: now)
        return try JSONResponse.make(
            DeviceBody(
                app: claims.app.rawValue, user: claims.user.rawValue, platform: platform.rawValue, token: token,
                environment: platform == .ios ? (environment ?? .production).rawValue : nil, locale: locale,
                registeredAt: now, lastSeenAt: now, rsaPublicKey: key?.rsaPublicKey, cipherName: key?.cipherName,
                timeZone: b.timeZone))
    }

    func deleteDevice(_ context: APIRequestContext) async throws -> Response {
        let claims = try context.user()
        guard let platform = Platform(rawValue: try parameter(context, "platform")) else {
            throw APIProblem.notFound("platform must be ios or android", field: "platform")
        }
        let token = DeviceToken(try parameter(context, "token"))
        // Only the user's own token: another user's (or an unknown) token answers 404.
        let removed = try await stores.devices.unregister(
            org: claims.org, app: claims.app, user: claims.user, platform: platform, token: token)
        guard removed else { throw APIProblem.notFound("no such device registered to this user", field: "token") }
        return JSONResponse.noContent()
    }

    /// The org's apps, or the one `?app=` names (a 404 naming `app` when the org may not use it).
    func appsAsked(in request: Request, org: OrgID) throws -> [AppName] {
        let allowed = configuration.apps(for: org)
        guard let app = request.uri.queryParameters.get("app") else { return allowed }
        guard allowed.contains(AppName(app)) else {
            throw APIProblem.notFound("no app named '\(app)' is available to this org", field: "app")
        }
        return [AppName(app)]
    }

    func userDevices(_ request: Request, _ context: APIRequestContext) async throws -> Response {
        let org = try context.key([.admin])
        let user = try parameter(context, "user")
        let chosen = try appsAsked(in: request, org: org)
        var records: [(app: AppName, record: DeviceRecord)] = []
        for app in chosen {
            for r in try await stores.devices.devices(org: org, app: app, user: UserID(user)) {
                records.append((app, r))
            }
        }
        // The most recently registered first, across apps (equal times: by app, then platform and token).
        records.sort {
            $0.record.registeredAt != $1.record.registeredAt || $0.app == $1.app
                ? DeviceRecord.newestFirst($0.record, $1.record) : $0.app.rawValue < $1.app.rawValue
        }
        let devices = records.map { app, r in
            DeviceBody(
                app: app.rawValue, user: user, platform: r.platform.rawValue, token: r.token.rawValue,
                environment: r.environment?.rawValue, locale: r.locale, registeredAt: r.registeredAt,
                lastSeenAt: r.lastSeenAt, rsaPublicKey: r.rsaPublicKey, cipherName: r.cipherName,
                timeZone: r.timeZone)
        }
        // A user unknown to this org (or another org's user) looks the same: nothing here.
        guard !devices.isEmpty else {
            throw APIProblem.notFound("no devices for user '\(user)' in this org", field: "user")
        }
        struct Answer: Encodable {
            var user: String
            var devices: [DeviceBody]
        }
        return try JSONResponse.make(Answer(user: user, devices: devices))
    }

    // MARK: - notification types

    func listTypes(_ context: APIRequestContext) async throws -> Response {
        let org = try context.key([.send, .read, .admin])
        let list = try await stores.types.types(org: org)
        return try JSONResponse.make(["types": list])
    }

    func getType(_ context: APIRequestContext) async throws -> Response {
        let org = try context.key([.send, .read, .admin])
        let id = try parameter(context, "id")
        guard let t = try await stores.types.types(org: org).first(where: { $0.id == id }) else {
            throw APIProblem.notFound("no notification type '\(id)' in this org", field: "id")
        }
        return try JSONResponse.make(t)
    }

    func putType(_ request: Request, _ context: APIRequestContext) async throws -> Response {
        let org = try context.key([.admin])
        let id = try parameter(context, "id")
        guard Input.isSafeID(id) else { throw APIProblem.badRequest("id", "letters, digits and . _ : -") }
        let data = try await body(request)
        let o = try Input.object(data)
        try Input.rejectUnknownKeys(o.members.keys, known: ["id", "name", "mobile", "desktop"], at: "")
        let b = try Input.fields { () throws(JSONFieldError) in
            (
                id: try o.string("id"), name: try o.string("name"), mobile: try o.bool("mobile"),
                desktop: try o.bool("desktop")
            )
        }
        if let given = b.id, given != id {
            throw APIProblem.badRequest("id", "must match the path's id or be left out")
        }
        guard let name = b.name, !name.isEmpty, name.count <= 255 else {
            throw APIProblem.badRequest("name", "required: the type's label (1–255 characters)")
        }
        let type = NotificationType(id: id, name: name, mobile: b.mobile ?? true, desktop: b.desktop ?? false)
        try await stores.types.setType(org: org, type)
        return try JSONResponse.make(type)
    }

    func deleteType(_ context: APIRequestContext) async throws -> Response {
        let org = try context.key([.admin])
        let id = try parameter(context, "id")
        let existed = try await stores.types.types(org: org).contains(where: { $0.id == id })
        if existed { try await stores.types.removeType(org: org, id: id) }
        guard existed else { throw APIProblem.notFound("no notification type '\(id)' in this org", field: "id") }
        return JSONResponse.noContent()
    }

    // MARK: - quota

    func getQuota(_ context: APIRequestContext) async throws -> Response {
        let org = try context.key([.send, .read, .admin])
        let usage = try await stores.quota.usage(org: org)
        struct PlatformQuota: Encodable {
            var limit: Int
            var used: Int
            var remaining: Int
        }
        struct Answer: Encodable {
            var org: String
            var hour: String
            var platforms: [String: PlatformQuota]
        }
        var platforms: [String: PlatformQuota] = [:]
        for u in usage {
            platforms[u.platform.rawValue] = PlatformQuota(limit: u.limit, used: u.used, remaining: u.remaining)
        }
        return try JSONResponse.make(
            Answer(
                org: org.rawValue, hour: usage.first?.hour ?? QuotaHour(containing: clock.now()).label,
                platforms: platforms)
        )
    }

    // MARK: - test push

    func postTestPush(_ request: Request, _ context: APIRequestContext) async throws -> Response {
        let org = try context.key(APIRole.senders)
        return JSONResponse.raw(try await sendTestPush(try await body(request), org: org))
    }

    /// Checks a test push as `POST /v1/test-push` takes it, charges the hour's quota, sends it and answers what the
    /// provider said (`volley test-push --json`'s shape): the one path for the route and the console's page.
    func sendTestPush(_ data: Data, org: OrgID) async throws -> Data {
        let o = try Input.object(data)
        try Input.rejectUnknownKeys(
            o.members.keys, known: ["app", "platform", "token", "environment", "notification", "dryRun"], at: "")
        if let n = o.value("notification")?.objectValue {
            try Input.rejectUnknownKeys(n.keys, known: JobKeys.notification, at: "notification")
        }
        let b = try Input.fields { () throws(JSONFieldError) in
            (
                app: try o.required(try o.string("app"), "app"),
                platform: try o.required(try o.oneOf("platform", Platform.self), "platform"),
                token: try o.required(try o.string("token"), "token"),
                environment: try o.oneOf("environment", APNSEnvironment.self),
                notification: try o.value("notification").map { v throws(JSONFieldError) in
                    try VolleyCore.Notification(json: v, at: [.key("notification")])
                },
                dryRun: try o.bool("dryRun")
            )
        }
        guard configuration.org(org, mayUse: AppName(b.app)) else {
            throw APIProblem.notFound("no app named '\(b.app)' is available to this org", field: "app")
        }
        guard !b.token.isEmpty else { throw APIProblem.badRequest("token", "required") }
        guard let testPush else {
            throw APIProblem.startedWithout("provider credentials")
        }
        if let problem = DeviceToken(b.token).formProblem(for: b.platform) {
            throw APIProblem.badRequest("token", problem)
        }
        let dryRun = b.dryRun ?? false
        let quota = stores.quota
        let platform = b.platform
        // Test pushes count against the hourly quota, like any push (the Salesforce guide counts them too).
        if !dryRun {
            let grant = try await quota.charge(org: org, platform: platform, count: 1)
            if grant.granted == 0 {
                var p = APIProblem(
                    .tooManyRequests, "this hour's \(platform) push quota (\(grant.limit)) is used up",
                    field: "platform")
                p.headers[.retryAfter] = String(max(1, Int(grant.hour.end.timeIntervalSinceNow.rounded(.up))))
                throw p
            }
        }
        let answer = await testPush(
            TestPushInput(
                org: org, app: AppName(b.app), platform: platform, token: DeviceToken(b.token),
                notification: b.notification ?? VolleyCore.Notification(title: "Test", body: "Test push from Volley"),
                environment: b.environment, dryRun: dryRun))
        if !dryRun {
            let delivered = answer.delivered
            try await quota.settle(
                org: org, platform: platform, delivered: delivered ? 1 : 0, refunded: delivered ? 0 : 1)
        }
        if answer.tokenDead {
            _ = try await stores.devices.remove(
                org: org, app: AppName(b.app), platform: platform, token: DeviceToken(b.token))
        }
        return answer.json
    }
}
