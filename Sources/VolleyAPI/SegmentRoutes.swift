import Foundation
import Hummingbird
import VolleyCore

/// `/v1/segments`: an org's audiences by attribute (`{"match": "all", "filters": [{"attribute": "plan", "op": "eq",
/// "value": "gold"}]}`), which a job names in `recipients` or `exclude` as `{"segment": "<id>"}`. Read with a read,
/// send or admin key, changed with an admin key; `count` says how many active users match now.
extension APIServer {
    func addSegmentRoutes(_ v1: RouterGroup<APIRequestContext>) {
        v1.get("/segments") { _, context in try await self.listSegments(context) }
        v1.get("/segments/:id") { _, context in try await self.getSegment(context) }
        v1.put("/segments/:id") { request, context in try await self.putSegment(request, context) }
        v1.delete("/segments/:id") { _, context in try await self.deleteSegment(context) }
        v1.get("/segments/:id/count") { _, context in try await self.countSegment(context) }
    }

    func segmentStore() throws -> any SegmentStore {
        guard let store = stores.segments else { throw APIProblem.startedWithout("a segment store") }
        return store
    }

    /// The path's id, when it is one a segment can have (else no segment has it: 404).
    private func segmentID(_ context: APIRequestContext) throws -> SegmentID {
        let id = SegmentID(try parameter(context, "id"))
        guard id.isValid else { throw APIProblem.notFound("no segment '\(id)' in this org", field: "id") }
        return id
    }

    func listSegments(_ context: APIRequestContext) async throws -> Response {
        let org = try context.key([.read, .send, .admin])
        let list = try await segmentStore().list(org: org)
        return JSONResponse.raw(JSONValue.object(["segments": .array(list.map(\.json))]).encoded())
    }

    func getSegment(_ context: APIRequestContext) async throws -> Response {
        let org = try context.key([.read, .send, .admin])
        let id = try segmentID(context)
        guard let segment = try await segmentStore().segment(org: org, id: id) else {
            throw APIProblem.notFound("no segment '\(id)' in this org", field: "id")
        }
        return JSONResponse.raw(segment.json.encoded())
    }

    /// Creates (201) or replaces (200) a segment. A fault in the body is a 400 naming the field (`filters[1].op`);
    /// an org keeps at most `Segment.maxPerOrg` segments (422 naming `id` beyond).
    func putSegment(_ request: Request, _ context: APIRequestContext) async throws -> Response {
        let org = try context.key([.admin])
        let raw = try parameter(context, "id")
        let (segment, created) = try await saveSegment(org: org, id: raw, body: try await body(request))
        return JSONResponse.raw(
            segment.json.encoded(), status: created ? .created : .ok,
            headers: created ? [.location: "/v1/segments/\(raw)"] : [:])
    }

    /// Checks a segment body as `PUT /v1/segments/{id}` takes it and stores it: the one path for the route and the
    /// console. Answers the stored segment and whether it is new.
    func saveSegment(org: OrgID, id raw: String, body data: Data) async throws -> (Segment, created: Bool) {
        let id = SegmentID(raw)
        guard id.isValid else { throw APIProblem.badRequest("id", "1–128 characters of letters, digits and . _ : -") }
        let o = try Input.object(data)
        try Input.rejectUnknownKeys(o.members.keys, known: Segment.bodyKeys, at: "")
        if let given = try Input.fields({ () throws(JSONFieldError) in try o.string("id") }), given != raw {
            throw APIProblem.badRequest("id", "must match the path's id or be left out")
        }
        let segment = try Input.fields { () throws(JSONFieldError) in try Segment(id: id, json: .object(o.members)) }
        switch try await segmentStore().put(org: org, segment, maxCount: Segment.maxPerOrg) {
        case .created(let s): return (s, true)
        case .replaced(let s): return (s, false)
        case .limitReached:
            throw APIProblem(
                .unprocessableContent,
                "this org has \(Segment.maxPerOrg) segments, the most it may keep; delete one first", field: "id")
        }
    }

    /// Deletes a segment. Jobs already queued that name it report it as an unknown recipient (`segment:<id>`).
    func deleteSegment(_ context: APIRequestContext) async throws -> Response {
        let org = try context.key([.admin])
        try await removeSegment(org: org, id: try segmentID(context))
        return JSONResponse.noContent()
    }

    /// Deletes segment `id` of `org` (404 when the org has none): the route's and the console's one path.
    func removeSegment(org: OrgID, id: SegmentID) async throws {
        guard id.isValid, try await segmentStore().delete(org: org, id: id) else {
            throw APIProblem.notFound("no segment '\(id)' in this org", field: "id")
        }
    }

    /// `{"id", "users"}`: the active users the segment matches now, as a job naming it alone would reach them.
    func countSegment(_ context: APIRequestContext) async throws -> Response {
        let org = try context.key([.read, .send, .admin])
        let id = try segmentID(context)
        guard let users = try await segmentStore().count(org: org, id: id) else {
            throw APIProblem.notFound("no segment '\(id)' in this org", field: "id")
        }
        return JSONResponse.raw(
            JSONValue.object(["id": .string(id.rawValue), "users": .number(JSONNumber(users))]).encoded())
    }
}
