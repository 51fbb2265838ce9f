import Foundation
import Hummingbird
import Metrics
import VolleyCore

/// Sync hints (`/v1/sync-hints`): "these records of this type changed" for some users, coalesced by the workers into
/// silent pushes; the app's ack of what it already synced; what waits for a user.
extension APIServer {
    func addSyncHintRoutes(_ v1: RouterGroup<APIRequestContext>) {
        v1.post("/sync-hints") { request, context in try await self.postSyncHints(request, context) }
        v1.post("/sync-hints/ack") { request, context in try await self.ackSyncHints(request, context) }
        v1.get("/sync-hints/:user") { request, context in try await self.syncHintStatus(request, context) }
    }

    static let syncHintsReceived = Counter(label: "volley_sync_hints_received_total")

    func syncHintStore() throws -> any SyncHintStore {
        guard let store = stores.syncHints else {
            throw APIProblem.startedWithout("a sync-hint store")
        }
        return store
    }

    /// `{app, users, type, recordIds}` with a send key (the org is the key's): each user's hint id, 202.
    func postSyncHints(_ request: Request, _ context: APIRequestContext) async throws -> Response {
        let org = try context.key(APIRole.senders)
        let data = try await body(request)
        let o = try Input.object(data)
        try Input.rejectUnknownKeys(o.members.keys, known: ["app", "users", "type", "recordIds"], at: "")
        let hint = try Input.read(SyncHintRequest.self, from: data)
        if let p = hint.problem { throw APIProblem.badRequest(p.field, p.message) }
        guard configuration.org(org, mayUse: hint.app) else {
            throw APIProblem.notFound("no app named '\(hint.app)' is available to this org", field: "app")
        }
        let store = try syncHintStore()
        let ids = try await store.add(
            org: org, app: hint.app, users: hint.users, type: hint.type, recordIds: hint.recordIds, now: clock.now())
        Self.syncHintsReceived.increment(by: hint.users.count)
        struct Accepted: Encodable {
            var user: String
            var id: String
        }
        struct Answer: Encodable {
            var app: String
            var type: String
            var hints: [Accepted]
        }
        return try JSONResponse.make(
            Answer(
                app: hint.app.rawValue, type: hint.type,
                hints: zip(hint.users, ids).map { Accepted(user: $0.rawValue, id: $1.description) }),
            status: .accepted)
    }

    /// `{type, upTo}` with the app user's token: the waiting ids of that type named by hints up to `upTo` (a hint id
    /// or an RFC 3339 time) are dropped, so an app that already synced is not woken for them.
    func ackSyncHints(_ request: Request, _ context: APIRequestContext) async throws -> Response {
        let claims = try context.user()
        let data = try await body(request)
        let o = try Input.object(data)
        try Input.rejectUnknownKeys(o.members.keys, known: ["type", "upTo"], at: "")
        let (type, upTo) = try Input.fields { () throws(JSONFieldError) in
            (try o.string("type"), try o.string("upTo"))
        }
        guard let type, SyncHintRequest.isSafeID(type, maxLength: SyncHintRequest.maxTypeLength) else {
            throw APIProblem.badRequest("type", "required: the hints' type (letters, digits and . _ : -)")
        }
        guard let upTo, let mark = SyncHintID(upTo: upTo) else {
            throw APIProblem.badRequest("upTo", "required: a hint id (digits) or an RFC 3339 time")
        }
        let store = try syncHintStore()
        let r = try await store.ack(
            org: claims.org, key: SyncHintKey(app: claims.app, user: claims.user, type: type), upTo: mark)
        struct Answer: Encodable {
            var type: String
            var upTo: String
            var dropped: Int
            var remaining: Int
            var fullSync: Bool
        }
        return try JSONResponse.make(
            Answer(type: type, upTo: mark.description, dropped: r.dropped, remaining: r.remaining, fullSync: r.fullSync)
        )
    }

    /// What waits for one user, per app and type (`?app=` for one app).
    func syncHintStatus(_ request: Request, _ context: APIRequestContext) async throws -> Response {
        let org = try context.key([.send, .read, .admin])
        let user = try parameter(context, "user")
        guard Input.isSafeID(user) else { throw APIProblem.badRequest("user", "letters, digits and . _ : -") }
        let chosen = try appsAsked(in: request, org: org)
        let store = try syncHintStore()
        let hints = try await store.status(
            org: org, apps: chosen, user: UserID(user), configuration: configuration.syncHints, now: clock.now())
        struct Answer: Encodable {
            var user: String
            var hints: [SyncHintStatus]
        }
        return try JSONResponse.make(Answer(user: user, hints: hints))
    }
}
