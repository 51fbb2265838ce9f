import Foundation
import Logging
import VolleyCore
import VolleyRedis
import VolleyStore

/// `volley jobs list`: the org's jobs newest first, a page at a time, as `GET /v1/jobs` answers (the same store read:
/// jobs the API accepted, `volley send`, schedules' runs, sync hints' pushes).
public enum JobListCommand {
    /// One page of the org's jobs.
    public static func list(settings: PipelineSettings, org: OrgID, query: JobListQuery, logger: Logger) throws
        -> JobListPage
    {
        let client = settings.client(name: "jobs", logger: logger)
        let history = RedisJobHistory(
            lanes: SerialLanes(count: 1, label: "volley.jobs") { _ in client }, store: settings.store)
        return try history.jobs(client, org: org, query: query)
    }

    /// A table: id, state, app, created, devices, accepted, failed; then the next page's cursor when there is one.
    public static func text(_ page: JobListPage) -> [String] {
        var rows = [["id", "state", "app", "created", "devices", "accepted", "failed"]]
        for j in page.jobs {
            rows.append([
                j.id, j.state, j.app ?? "-", j.createdAt ?? "-", j.report.map { String($0.devices) } ?? "-",
                j.report.map { String($0.accepted) } ?? "-", j.report.map { String($0.failed) } ?? "-",
            ])
        }
        let widths = (0..<rows[0].count).map { c in rows.map { $0[c].count }.max() ?? 0 }
        var lines = rows.map { r in
            zip(r, widths).map { $0.0.padding(toLength: $0.1, withPad: " ", startingAt: 0) }.joined(separator: "  ")
        }
        if let next = page.next { lines.append("more: --cursor \(next.description)") }
        return lines
    }
}

/// `volley jobs outcomes`: a job's per-device outcomes as CSV, the same rows `GET /v1/jobs/{id}/outcomes` streams
/// (one store read, one writer: `OutcomeCSV.export`), written a ledger page at a time.
public enum JobOutcomesCommand {
    /// Writes the export of `job` to `write`; false (nothing written) when `org` has no such job.
    public static func export(
        settings: PipelineSettings, org: OrgID, job: JobID, logger: Logger, write: ([UInt8]) async throws -> Void
    ) async throws -> Bool {
        let client = settings.client(name: "jobs-outcomes", logger: logger)
        let lanes = SerialLanes(count: 1, label: "volley.jobs.outcomes") { _ in client }
        guard
            let status = try await RedisJobStatusReader(lanes: lanes, store: settings.store).status(org: org, job: job)
        else { return false }
        let history = RedisJobHistory(lanes: lanes, store: settings.store)
        try await OutcomeCSV.export(org: org, job: job, app: status.app.map(AppName.init), from: history, write: write)
        return true
    }
}
