import Foundation
import Hummingbird
import Metrics
import VolleyCore

/// Engagement feedback (`POST /v1/interactions`): what people did with their pushes, reported by the app as its user,
/// or relayed by a backend with a send key, by each push's message id (`mid`).
extension APIServer {
    func addInteractionRoutes(_ v1: RouterGroup<APIRequestContext>) {
        v1.post("/interactions") { request, context in try await self.postInteractions(request, context) }
    }

    /// `volley_interactions_total{event}`: interactions counted; `volley_interactions_ignored_total{reason}`: those
    /// not counted, as `duplicate` or `unknown`. Totals only: no job or org label.
    static let interactionsCounted = Dictionary(
        uniqueKeysWithValues: InteractionEvent.allCases.map {
            ($0, Counter(label: "volley_interactions_total", dimensions: [("event", $0.rawValue)]))
        })
    static let interactionsDuplicate = Counter(
        label: "volley_interactions_ignored_total", dimensions: [("reason", "duplicate")])
    static let interactionsUnknown = Counter(
        label: "volley_interactions_ignored_total", dimensions: [("reason", "unknown")])

    /// `{"events": [...]}`, 1 to 100, with the app user's token (its org, app and user) or a key of role send or
    /// admin (its org, any app; `userId` per event names the person). 202 with how many were counted, were
    /// duplicates, and named no campaign of the caller's org (never an error for the whole batch).
    func postInteractions(_ request: Request, _ context: APIRequestContext) async throws -> Response {
        guard let caller = context.caller else { throw APIProblem.unauthorized }
        let org: OrgID
        let app: AppName?
        let user: UserID?
        switch caller {
        case .user(let claims):
            (org, app, user) = (claims.org, claims.app, claims.user)
        case .key(_, let keyOrg, let role):
            guard APIRole.senders.contains(role) else {
                throw APIProblem.forbidden(
                    "this resource needs a user token or a key with role admin or send; this key's role is \(role)")
            }
            (org, app, user) = (keyOrg, nil, nil)
        }
        guard let store = stores.interactions else { throw APIProblem.startedWithout("an interaction store") }
        let events = try InteractionsBody.events(try await body(request), user: user, now: clock.now())
        let results = try await store.record(org: org, app: app, events)
        var counted: [InteractionEvent: Int] = [:]
        for (e, r) in zip(events, results) where r == .accepted { counted[e.event, default: 0] += 1 }
        for (event, n) in counted { Self.interactionsCounted[event]?.increment(by: n) }
        let tally = InteractionTally(results)
        if tally.duplicates > 0 { Self.interactionsDuplicate.increment(by: tally.duplicates) }
        if tally.unknown > 0 { Self.interactionsUnknown.increment(by: tally.unknown) }
        return try JSONResponse.make(tally, status: .accepted)
    }
}

/// The body of `POST /v1/interactions`, read with the one JSON reader and checked: a fault is a 400 naming its
/// field (`events[3].actionId`), unknown keys included.
enum InteractionsBody {
    static let maxEvents = 100
    static let eventKeys: Set<String> = ["messageId", "event", "actionId", "at", "userId"]

    /// The events of `data`. `user`: the caller's user (a user token), whom every event is about; nil for a key,
    /// whose events may name theirs with `userId`. An `at` later than `now` (a device's clock ahead) is taken as
    /// `now`; without `at`, `now`.
    static func events(_ data: Data, user: UserID?, now: Date) throws -> [Interaction] {
        let body = try Input.object(data)
        try Input.rejectUnknownKeys(body.members.keys, known: ["events"], at: "")
        guard case .array(let list)? = body.value("events") else {
            if body.value("events") == nil { throw APIProblem.badRequest("events", "required: 1 to 100 events") }
            throw APIProblem.badRequest("events", "expected an array of 1 to 100 events")
        }
        guard (1...maxEvents).contains(list.count) else {
            throw APIProblem.badRequest("events", "\(list.count) events; 1 to \(maxEvents) per request")
        }
        var out: [Interaction] = []
        out.reserveCapacity(list.count)
        for (i, value) in list.enumerated() {
            out.append(try event(value, at: "events[\(i)]", index: i, user: user, now: now))
        }
        return out
    }

    private static func event(_ value: JSONValue, at field: String, index i: Int, user: UserID?, now: Date) throws
        -> Interaction
    {
        let path: [JSONPathComponent] = [.key("events"), .index(i)]
        let o = try Input.fields { () throws(JSONFieldError) in try JSONObjectReader(value, at: path) }
        try Input.rejectUnknownKeys(o.members.keys, known: eventKeys, at: field)
        let read = try Input.fields { () throws(JSONFieldError) in
            (
                messageID: try o.required(o.string("messageId"), "messageId"),
                event: try o.required(o.oneOf("event", InteractionEvent.self), "event"),
                actionID: try o.string("actionId"), at: try o.string("at"), userID: try o.string("userId")
            )
        }
        guard let messageID = MessageID(read.messageID) else {
            throw APIProblem.badRequest(
                "\(field).messageId",
                "expected the push's mid: 11 characters of base64url, a dot and 11 more")
        }
        switch (read.event, read.actionID) {
        case (.action, nil): throw APIProblem.badRequest("\(field).actionId", "required with event action")
        case (.action, let id?) where !Input.isSafeID(id):
            throw APIProblem.badRequest("\(field).actionId", "1–128 characters of letters, digits and . _ : -")
        case (.opened, _?), (.dismissed, _?):
            throw APIProblem.badRequest("\(field).actionId", "only with event action")
        default: break
        }
        var at = now
        if let text = read.at {
            do throws(RFC3339.ParseError) {
                at = min(now, try RFC3339.parse(text))
            } catch {
                throw APIProblem.badRequest("\(field).at", "\(error)")
            }
        }
        var person = user
        if let id = read.userID {
            if let user {
                guard id == user.rawValue else {
                    throw APIProblem.badRequest(
                        "\(field).userId", "a user token reports its own user's interactions; leave userId out")
                }
            } else {
                guard Input.isSafeID(id) else {
                    throw APIProblem.badRequest("\(field).userId", "1–128 characters of letters, digits and . _ : -")
                }
                person = UserID(id)
            }
        }
        return Interaction(messageID: messageID, event: read.event, actionID: read.actionID, at: at, user: person)
    }
}
