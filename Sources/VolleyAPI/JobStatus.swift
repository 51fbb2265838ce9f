import Foundation
import VolleyCore
import VolleyRedis
import VolleyStore

/// `GET /v1/jobs/{id}`: where a job is, from what Redis already holds.
///
/// - `done`: the outcome ledger holds the published report (`_report`), which comes along.
/// - `running`: the job's stream entry is pending in the worker group (read, not yet acknowledged).
/// - `queued`: the entry is past the group's last delivered id (not read yet), or no group exists yet.
/// - `dead-lettered`: read and acknowledged without a report; the dead-letter stream's entry gives the reason.
struct JobStatus: Encodable {
    var id: String = ""
    var state: String
    var entry: String?
    var app: String?
    var createdAt: String?
    var report: JobReport?
    var reason: String?
    var detail: String?

    /// `shard`: the job stream shard of the job's id, where its entry, group and dead letter are.
    static func read(
        client: RedisClient, store: StoreConfiguration, shard: Int, recordKey: String, ledgerKey: String
    ) throws -> JobStatus? {
        let r = try client.pipeline([["HGETALL", recordKey], ["HGET", ledgerKey, "_report"]])
        for x in r { try x.throwIfError("job status") }
        var record: [String: String] = [:]
        for (k, v) in r[0].fieldPairs { record[k] = v }
        if let report = r[1].string {
            return JobStatus(
                state: "done", entry: record["entry"], app: record["app"], createdAt: record["createdAt"],
                report: try? ReportCoding.decoder.decode(JobReport.self, from: Data(report.utf8)))
        }
        guard let entry = record["entry"] else { return nil }
        var status = JobStatus(state: "queued", entry: entry, app: record["app"], createdAt: record["createdAt"])
        let checks = try client.pipeline([
            ["XPENDING", store.jobStream(shard: shard), store.group, entry, entry, "1"],
            ["XINFO", "GROUPS", store.jobStream(shard: shard)],
        ])
        if let pending = checks[0].array, !pending.isEmpty {
            status.state = "running"
            return status
        }
        var lastDelivered: String?
        for g in checks[1].array ?? [] {
            var fields: [String: String] = [:]
            let items = g.array ?? []
            var i = 0
            while i + 1 < items.count {
                if let k = items[i].string { fields[k] = items[i + 1].string ?? items[i + 1].integer.map(String.init) }
                i += 2
            }
            if fields["name"] == store.group { lastDelivered = fields["last-delivered-id"] }
        }
        guard let lastDelivered, !isAfter(entry, lastDelivered) else { return status }
        // Read and acknowledged without a report: look for its dead letter among the newest ones.
        let dead = try client.checked(["XREVRANGE", store.deadStream(shard: shard), "+", "-", "COUNT", "1000"])
        for e in dead.array ?? [] {
            guard let parts = e.array, parts.count == 2 else { continue }
            var fields: [String: String] = [:]
            for (k, v) in parts[1].fieldPairs { fields[k] = v }
            if fields["sourceEntry"] == entry {
                status.state = "dead-lettered"
                status.reason = fields["reason"]
                status.detail = fields["detail"]
                return status
            }
        }
        // Acknowledged, its report not visible yet (being published): still running as far as a client can tell.
        status.state = "running"
        return status
    }

    /// Stream ids `ms-seq` compared numerically.
    static func isAfter(_ a: String, _ b: String) -> Bool {
        func parts(_ s: String) -> (UInt64, UInt64) {
            let p = s.split(separator: "-")
            return (UInt64(p.first ?? "0") ?? 0, p.count > 1 ? UInt64(p[1]) ?? 0 : 0)
        }
        return parts(a) > parts(b)
    }
}
