import Foundation
import Hummingbird
import VolleyCore

/// `/v1/schedules`: recurring jobs, as a Salesforce Flow schedule runs a flow (once, daily, weekly on some days, in
/// an IANA zone, until an optional end). The body is `{"id", "job", "start", "frequency", "days", "timeZone",
/// "end"}`; `job` is what `POST /v1/jobs` takes, without `id` (each run's is `<schedule>-<run epoch>`) or `sendAt`,
/// and is checked as `POST /v1/jobs` checks a job (`checkAtTheDoor`).
extension APIServer {
    func addScheduleRoutes(_ v1: RouterGroup<APIRequestContext>) {
        v1.post("/schedules") { request, context in try await self.createSchedule(request, context) }
        v1.get("/schedules") { _, context in try await self.listSchedules(context) }
        v1.get("/schedules/:id") { _, context in try await self.getSchedule(context) }
        v1.post("/schedules/:id/pause") { _, context in try await self.pauseSchedule(context, paused: true) }
        v1.post("/schedules/:id/resume") { _, context in try await self.pauseSchedule(context, paused: false) }
        v1.delete("/schedules/:id") { _, context in try await self.deleteSchedule(context) }
    }

    func scheduleStore() throws -> any ScheduleStore {
        guard let s = stores.schedules else {
            throw APIProblem.startedWithout("a schedule store")
        }
        return s
    }

    func createSchedule(_ request: Request, _ context: APIRequestContext) async throws -> Response {
        let org = try context.key(APIRole.senders)
        let store = try scheduleStore()
        let data = try await body(request)
        guard !data.isEmpty else { throw APIProblem.badRequest("body", "the request needs a JSON object body") }
        let parsed: JSONValue
        do { parsed = try JSONValue(parsing: data) } catch {
            throw APIProblem.badRequest("body", "malformed JSON: \(error)")
        }
        let schedule: Schedule
        do { schedule = try Schedule(body: parsed, org: org, now: clock.now()) } catch {
            // As `POST /v1/jobs` answers a rate outside the throttle's range (`checkAtTheDoor`).
            if error.field == "job.throttlePerMinute" {
                throw APIProblem(.unprocessableContent, error.message, field: error.field)
            }
            throw APIProblem.badRequest(error.field, error.message)
        }
        try await checkScheduledJob(schedule, org: org)
        switch try await store.create(schedule, now: clock.now()) {
        case .created(let state):
            return JSONResponse.raw(
                state.json.encoded(), status: .created, headers: [.location: "/v1/schedules/\(schedule.id)"])
        case .exists:
            throw APIProblem(.conflict, "this org has a schedule '\(schedule.id)' already", field: "id")
        case .limitReached:
            throw APIProblem(
                .unprocessableContent,
                "this org has \(Schedule.maxPerOrg) schedules, the most it may keep; delete one first", field: "id")
        }
    }

    /// A schedule's job passes the checks of `POST /v1/jobs` (`checkAtTheDoor`), each refusal naming `job.<field>`:
    /// a job every run of which a worker would dead-letter is refused before the schedule is written.
    func checkScheduledJob(_ schedule: Schedule, org: OrgID) async throws {
        let body: JobBody
        do {
            body = JobBody(
                job: try PushJob(json: schedule.job, defaultOrg: org), keys: schedule.job.objectValue?.keys ?? [:].keys)
        } catch {
            throw APIProblem.badRequest("job.\(error.field)", error.message)
        }
        do { _ = try await checkAtTheDoor(body, org: org) } catch var problem as APIProblem {
            problem.field = "job" + (problem.field.map { ".\($0)" } ?? "")
            throw problem
        }
    }

    func listSchedules(_ context: APIRequestContext) async throws -> Response {
        let org = try context.key([.send, .read, .admin])
        let list = try await scheduleStore().list(org: org)
        return JSONResponse.raw(JSONValue.object(["schedules": .array(list.map(\.json))]).encoded())
    }

    func getSchedule(_ context: APIRequestContext) async throws -> Response {
        let org = try context.key([.send, .read, .admin])
        let id = try parameter(context, "id")
        guard StoredTemplate.isValidID(id), let s = try await scheduleStore().schedule(org: org, id: id) else {
            throw APIProblem.notFound("no schedule '\(id)' in this org", field: "id")
        }
        return JSONResponse.raw(s.json.encoded())
    }

    func pauseSchedule(_ context: APIRequestContext, paused: Bool) async throws -> Response {
        let org = try context.key(APIRole.senders)
        let s = try await setSchedulePaused(org: org, id: try parameter(context, "id"), paused: paused)
        return JSONResponse.raw(s.json.encoded())
    }

    /// Pauses or resumes schedule `id` of `org` (404 for one the org does not have): the one path for the route and
    /// the console's library.
    func setSchedulePaused(org: OrgID, id: String, paused: Bool) async throws -> ScheduleState {
        guard StoredTemplate.isValidID(id),
            let s = try await scheduleStore().setPaused(org: org, id: id, paused: paused, now: clock.now())
        else {
            throw APIProblem.notFound("no schedule '\(id)' in this org", field: "id")
        }
        return s
    }

    func deleteSchedule(_ context: APIRequestContext) async throws -> Response {
        let org = try context.key(APIRole.senders)
        let id = try parameter(context, "id")
        guard StoredTemplate.isValidID(id), try await scheduleStore().delete(org: org, id: id) else {
            throw APIProblem.notFound("no schedule '\(id)' in this org", field: "id")
        }
        return JSONResponse.noContent()
    }
}
