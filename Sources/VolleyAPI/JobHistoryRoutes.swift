import Foundation
import Hummingbird
import NIOCore
import VolleyCore

/// `GET /v1/jobs` (an org's jobs, newest first, a page at a time) and `GET /v1/jobs/{id}/outcomes` (a job's
/// per-device outcomes as CSV, streamed a ledger page at a time). Read with a send, read or admin key, as
/// `GET /v1/jobs/{id}` is; every read stays inside the key's org.
extension APIServer {
    func jobHistory() throws -> any JobHistoryReader {
        guard let history = stores.jobHistory else { throw APIProblem.startedWithout("a job history store") }
        return history
    }

    /// The query of `GET /v1/jobs`, each parameter checked: a bad one is a 400 naming it.
    static func jobListQuery(_ parameters: (String) -> String?) throws -> JobListQuery {
        var query = JobListQuery()
        if let state = parameters("state") {
            guard JobListQuery.states.contains(state) else {
                throw APIProblem.badRequest("state", "one of \(JobListQuery.states.joined(separator: ", "))")
            }
            query.state = state
        }
        query.since = try ListQuery.since(parameters("since"))
        query.limit = try ListQuery.limit(parameters("limit"), max: JobListQuery.maxLimit, default: query.limit)
        if let cursor = parameters("cursor") {
            guard let c = JobListCursor(cursor) else {
                throw APIProblem.badRequest("cursor", "not a cursor this list answered (its nextCursor)")
            }
            query.cursor = c
        }
        return query
    }

    /// One job of the list: what `GET /v1/jobs/{id}` says of it in brief, with the report's totals once it is done.
    struct JobSummary: Encodable {
        var id: String
        var state: String
        var app: String?
        var createdAt: String?
        var dueAt: String?
        /// `dead-lettered`: why.
        var reason: String?
        /// `done`: the report's totals and its status (`cancelled`, `not_enabled`; absent when it simply completed).
        var report: ReportSummary?

        struct ReportSummary: Encodable {
            var status: String?
            var devices: Int
            var accepted: Int
            var rejected: Int
            var failed: Int
        }

        init(_ s: JobStatus) {
            id = s.id
            state = s.state
            app = s.app
            createdAt = s.createdAt
            dueAt = s.dueAt
            reason = s.reason
            report = s.report.map {
                ReportSummary(
                    status: $0.status, devices: $0.devices, accepted: $0.accepted, rejected: $0.rejected,
                    failed: $0.failed)
            }
        }
    }

    func listJobs(_ request: Request, _ context: APIRequestContext) async throws -> Response {
        let org = try context.key([.send, .read, .admin])
        let parameters = request.uri.queryParameters
        let query = try Self.jobListQuery { parameters.get($0) }
        let page = try await jobHistory().jobs(org: org, query: query)
        struct Answer: Encodable {
            var jobs: [JobSummary]
            var nextCursor: String?
        }
        let answer = Answer(jobs: page.jobs.map(JobSummary.init), nextCursor: page.next?.description)
        return JSONResponse.raw(try ReportCoding.encoder.encode(answer))
    }

    /// Streams `platform,token,user,outcome,reason` rows: the ledger of the job and, for a campaign split into
    /// shards, those of its shards, each read a page at a time and written as it comes. A store failure part way
    /// ends the response without its last chunk, so a client sees the export is incomplete.
    func exportOutcomes(_ request: Request, _ context: APIRequestContext) async throws -> Response {
        let org = try context.key([.send, .read, .admin])
        let id = try parameter(context, "id")
        guard OutcomeCSV.acceptsCSV(accept: request.headers[.accept]) else {
            throw APIProblem(.notAcceptable, "the outcomes are text/csv; send Accept: text/csv", field: "Accept")
        }
        guard Input.isJobID(id) else { throw APIProblem.notFound("no job '\(id)' in this org", field: "id") }
        let history = try jobHistory()
        guard let status = try await stores.jobStatus.status(org: org, job: JobID(id)) else {
            throw APIProblem.notFound("no job '\(id)' in this org", field: "id")
        }
        let app = status.app.map(AppName.init)
        let body = ResponseBody { writer in
            try await OutcomeCSV.export(org: org, job: JobID(id), app: app, from: history) { bytes in
                try await writer.write(ByteBuffer(bytes: bytes))
            }
            try await writer.finish(nil)
        }
        let headers: HTTPFields = [
            .contentType: OutcomeCSV.contentType,
            .contentDisposition: "attachment; filename=\"\(id)-outcomes.csv\"",
            .cacheControl: "no-store",
        ]
        return Response(status: .ok, headers: headers, body: body)
    }
}
