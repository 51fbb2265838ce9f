import Foundation
import Hummingbird
import VolleyCore

/// `/v1/templates`: an org's stored notifications with per-person names (`Hi {{ first_name | 'Friend' }}`), which a
/// job names with `templateId`. The body is `{"notification": {...}}`, read with the job's own reader and compiled
/// here, so a template that is stored always renders.
extension APIServer {
    func addTemplateRoutes(_ v1: RouterGroup<APIRequestContext>) {
        v1.get("/templates") { _, context in try await self.listTemplates(context) }
        v1.get("/templates/:id") { _, context in try await self.getTemplate(context) }
        v1.put("/templates/:id") { request, context in try await self.putTemplate(request, context) }
        v1.delete("/templates/:id") { _, context in try await self.deleteTemplate(context) }
        v1.get("/users/:user/attributes") { _, context in try await self.getAttributes(context) }
        v1.put("/users/:user/attributes") { request, context in try await self.putAttributes(request, context) }
    }

    /// `GET /v1/users/{user}/attributes`: `{"attributes": {...}}` (empty when the user has none).
    func getAttributes(_ context: APIRequestContext) async throws -> Response {
        let org = try context.key([.read, .send, .admin])
        let user = UserID(try parameter(context, "user"))
        let attributes = try await stores.attributes.attributes(org: org, user: user) ?? [:]
        return JSONResponse.raw(
            JSONValue.object(["attributes": .object(attributes.mapValues(JSONValue.string))]).encoded())
    }

    /// `PUT /v1/users/{user}/attributes` with `{"attributes": {"first_name": "Ada"}}`: replaces the user's
    /// attributes, as a directory import's user record does (`{}` removes them); the limits of
    /// `UserAttributes.problems`, each a 400 naming the key.
    func putAttributes(_ request: Request, _ context: APIRequestContext) async throws -> Response {
        let org = try context.key([.admin])
        let user = UserID(try parameter(context, "user"))
        let o = try Input.object(try await body(request))
        try Input.rejectUnknownKeys(o.members.keys, known: ["attributes"], at: "")
        guard let object = try Input.fields({ () throws(JSONFieldError) in try o.object("attributes") }) else {
            throw APIProblem.badRequest("attributes", "required: an object of strings, {} to remove them")
        }
        var attributes: [String: String] = [:]
        for (key, value) in object {
            guard case .string(let text) = value else {
                throw APIProblem.badRequest("attributes.\(key)", "must be a string")
            }
            attributes[key] = text
        }
        if let problem = UserAttributes.problems(attributes).first {
            let field = problem.split(separator: ":", maxSplits: 1).first.map(String.init) ?? "attributes"
            throw APIProblem.badRequest(field, String(problem.dropFirst(field.count + 1).drop(while: { $0 == " " })))
        }
        try await stores.attributes.setAttributes(org: org, user: user, attributes)
        return JSONResponse.raw(
            JSONValue.object(["attributes": .object(attributes.mapValues(JSONValue.string))]).encoded())
    }

    /// A template's answer: its notification as it was put, digit for digit.
    static func templateJSON(_ t: StoredTemplate) -> JSONValue {
        .object([
            "createdAt": .string(RFC3339.format(t.createdAt)), "id": .string(t.id), "notification": t.notification,
            "updatedAt": .string(RFC3339.format(t.updatedAt)),
        ])
    }

    func templateID(_ context: APIRequestContext) throws -> String {
        let id = try parameter(context, "id")
        guard StoredTemplate.isValidID(id) else {
            throw APIProblem.badRequest("id", "1–128 characters of letters, digits and . _ : -")
        }
        return id
    }

    func listTemplates(_ context: APIRequestContext) async throws -> Response {
        let org = try context.key([.send, .read, .admin])
        let list = try await stores.templates.list(org: org)
        return JSONResponse.raw(JSONValue.object(["templates": .array(list.map(Self.templateJSON))]).encoded())
    }

    func getTemplate(_ context: APIRequestContext) async throws -> Response {
        let org = try context.key([.send, .read, .admin])
        let id = try parameter(context, "id")
        guard StoredTemplate.isValidID(id), let t = try await stores.templates.template(org: org, id: id) else {
            throw APIProblem.notFound("no template '\(id)' in this org", field: "id")
        }
        return JSONResponse.raw(Self.templateJSON(t).encoded())
    }

    func putTemplate(_ request: Request, _ context: APIRequestContext) async throws -> Response {
        let org = try context.key([.admin])
        let id = try templateID(context)
        let (template, created) = try await saveTemplate(org: org, id: id, body: try await body(request))
        return JSONResponse.raw(
            Self.templateJSON(template).encoded(), status: created ? .created : .ok,
            headers: created ? [.location: "/v1/templates/\(id)"] : [:])
    }

    /// Checks a template body (`{"notification": …}`) as `PUT /v1/templates/{id}` takes it and stores it: the one
    /// path for the route and the console. Answers the stored template and whether it is new.
    func saveTemplate(org: OrgID, id: String, body data: Data) async throws -> (StoredTemplate, created: Bool) {
        guard StoredTemplate.isValidID(id) else {
            throw APIProblem.badRequest("id", "1–128 characters of letters, digits and . _ : -")
        }
        let o = try Input.object(data)
        try Input.rejectUnknownKeys(o.members.keys, known: ["id", "notification"], at: "")
        if let given = try Input.fields({ () throws(JSONFieldError) in try o.string("id") }), given != id {
            throw APIProblem.badRequest("id", "must match the path's id or be left out")
        }
        let notification = try templateNotification(o, org: org)
        let put = try await stores.templates.put(
            org: org, id: id, notification: notification, now: clock.now(), maxCount: StoredTemplate.maxPerOrg)
        switch put {
        case .created(let t): return (t, true)
        case .replaced(let t): return (t, false)
        case .limitReached:
            throw APIProblem(
                .unprocessableContent,
                "this org has \(StoredTemplate.maxPerOrg) templates, the most it may keep; delete one first",
                field: "id")
        }
    }

    /// The body's `notification`, checked as `StoredTemplate.check` does, then by the providers' own preparation as
    /// a job naming it is at the door (`NotificationCheck.refusal(ofTemplate:apps:)`, for each app the org may use):
    /// a notification every job naming it would be refused for (`"ttl": 2419201`, `"fcm": [null]`) is not stored.
    /// A fault is a 400 naming its field (`notification.ttl`).
    func templateNotification(_ o: JSONObjectReader, org: OrgID) throws -> JSONValue {
        guard let value = o.value("notification") else {
            throw APIProblem.badRequest("notification", "required: the notification object jobs send")
        }
        let template: NotificationTemplate
        do { template = try StoredTemplate.check(notification: value) } catch {
            throw APIProblem.badRequest(error.field, error.message)
        }
        if let refusal = notificationCheck.refusal(ofTemplate: template, apps: configuration.apps(for: org)) {
            let field = refusal.error.field.map { "notification.\($0)" } ?? "notification"
            let app = refusal.app.map { "app \($0), " } ?? ""
            throw APIProblem.badRequest(field, "\(app)\(refusal.platform): \(refusal.error.message)")
        }
        return value
    }

    func deleteTemplate(_ context: APIRequestContext) async throws -> Response {
        let org = try context.key([.admin])
        try await removeTemplate(org: org, id: try parameter(context, "id"))
        return JSONResponse.noContent()
    }

    /// Deletes template `id` of `org` (404 when the org has none): the route's and the console's one path.
    func removeTemplate(org: OrgID, id: String) async throws {
        guard StoredTemplate.isValidID(id), try await stores.templates.delete(org: org, id: id) else {
            throw APIProblem.notFound("no template '\(id)' in this org", field: "id")
        }
    }

    /// A templated job at the door: the template must exist in the key's org, and the notification it renders
    /// (with the job's custom data, without any user's attributes) must be one every provider would prepare.
    /// Answers the job with that notification in place, for the provider check; the stream entry keeps
    /// `templateId`, and the worker reads the template again when it runs.
    func templatedJob(_ job: PushJob, org: OrgID, body: JobBody) async throws -> PushJob {
        guard job.templateId != nil, let template = try await storedTemplate(of: job, org: org, body: body) else {
            return job
        }
        var checked = job
        checked.notification = template.render(attributes: nil).notification
        return checked
    }

    /// The stored template a job names in `templateId`, compiled with the job's `customData` bound; nil for a job
    /// without one. A template the org does not have, or that no longer reads, is a problem naming `templateId`.
    func storedTemplate(of job: PushJob, org: OrgID, body: JobBody) async throws -> NotificationTemplate? {
        guard let id = job.templateId else { return nil }
        if body.keys.contains("notification") {
            throw APIProblem.badRequest("notification", "give either templateId or a notification, not both")
        }
        guard StoredTemplate.isValidID(id), let stored = try await stores.templates.template(org: org, id: id) else {
            throw APIProblem.notFound("no template '\(id)' in this org (PUT /v1/templates/\(id))", field: "templateId")
        }
        let template: NotificationTemplate
        do {
            template = try NotificationTemplate(try stored.readNotification())
        } catch let e as JSONFieldError {
            throw APIProblem.badRequest("templateId", "the stored template no longer reads: \(e)")
        } catch {
            throw APIProblem.badRequest("templateId", "the stored template no longer compiles: \(error)")
        }
        return template.binding(customData: job.customData)
    }

    /// What `user` would be shown by a job: its template (stored, or its own texts when they hold names) rendered
    /// with the user's attributes, as a worker renders it; the job's notification when nothing in it is personal.
    func preview(of job: PushJob, org: OrgID, body: JobBody, user: UserID) async throws -> VolleyCore.Notification {
        var template = try await storedTemplate(of: job, org: org, body: body)
        if template == nil {
            do { template = try TemplateContent.compile(job.notification, customData: job.customData) } catch {
                throw APIProblem.badRequest("notification", "\(error)")
            }
        }
        guard let template else { return job.notification }
        let attributes = try await stores.attributes.attributes(org: org, user: user)
        return template.render(attributes: attributes).notification
    }
}
