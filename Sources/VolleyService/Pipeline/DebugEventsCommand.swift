import Foundation
import Logging
import VolleyCore
import VolleyStore

/// `volley events --job ID`: the debug events of a job sent with `"debug": true` (or `volley send --debug`).
public enum DebugEventsCommand {
    /// A job's events, per org that holds events for the job id (normally one).
    public struct Found: Sendable {
        public var org: OrgID
        public var events: [DebugEvent]
        public init(org: OrgID, events: [DebugEvent]) {
            self.org = org
            self.events = events
        }
    }

    /// Reads the events of `job`; with `org` nil, looks for the orgs that hold events for that job id.
    public static func read(settings: PipelineSettings, job: JobID, org: OrgID?, logger: Logger) throws -> [Found] {
        let store = RedisDebugEvents(client: settings.client(name: "events", logger: logger), store: settings.store)
        let orgs = try org.map { [$0] } ?? store.orgs(job: job)
        return try orgs.map { Found(org: $0, events: try store.events(org: $0, job: job)) }
    }

    /// One JSON object per line, as stored (ISO 8601 times, sorted keys), with the org added.
    public static func json(_ found: [Found]) -> [String] {
        found.flatMap { f in
            f.events.map { e -> String in
                guard let data = try? ReportCoding.encoder.encode(e),
                    var object = (try? JSONSerialization.jsonObject(with: data)) as? [String: Any]
                else { return "{}" }
                object["org"] = f.org.rawValue
                let out = (try? JSONSerialization.data(withJSONObject: object, options: [.sortedKeys])) ?? Data()
                return String(decoding: out, as: UTF8.self)
            }
        }
    }

    /// A table: time, event, user, platform, token, status, answer; then a count per event name.
    public static func text(_ found: [Found], job: JobID) -> [String] {
        let all = found.flatMap { f in f.events.map { (f.org, $0) } }
        if all.isEmpty {
            return [
                "no debug events for job \(job) (not sent with \"debug\": true or volley send --debug, "
                    + "not started yet, or expired with its ledger)"
            ]
        }
        let header = ["time", "org", "event", "user", "platform", "token", "status", "answer"]
        let rows = all.map { org, e in
            [
                RFC3339.format(e.at, .milliseconds), org.rawValue, e.event.rawValue, e.user?.rawValue ?? "-",
                e.platform?.rawValue ?? "-", e.token ?? "-", e.status.map(String.init) ?? "-", e.answer,
            ]
        }
        var lines = TextTable.render(header: header, rows: rows)
        var counts: [String: Int] = [:]
        for (_, e) in all { counts[e.event.rawValue, default: 0] += 1 }
        lines.append("")
        lines.append(
            "\(all.count) event\(all.count == 1 ? "" : "s")"
                + (all.count >= DebugEvent.maxPerJob ? " (the first \(DebugEvent.maxPerJob) are kept)" : "") + ": "
                + counts.sorted { $0.key < $1.key }.map { "\($0.key) \($0.value)" }.joined(separator: ", "))
        return lines
    }
}

/// Plain-text tables for CLI output: columns padded to their widest cell, the last column left ragged.
public enum TextTable {
    public static func render(header: [String], rows: [[String]]) -> [String] {
        var widths = header.map(\.count)
        for r in rows {
            for (i, c) in r.enumerated() where i < widths.count { widths[i] = max(widths[i], c.count) }
        }
        func line(_ cells: [String]) -> String {
            cells.enumerated().map { i, c in
                i == cells.count - 1 ? c : c.padding(toLength: widths[i], withPad: " ", startingAt: 0)
            }.joined(separator: "  ")
        }
        return [line(header)] + rows.map(line)
    }
}

/// `volley deliveries --user U`: a user's delivery history, as `GET /v1/users/{user}/deliveries` answers it.
public enum DeliveriesCommand {
    public static func read(
        settings: PipelineSettings, org: OrgID, user: UserID, since: Date?, limit: Int, now: Date, logger: Logger
    ) throws -> [DeliveryRecord] {
        try RedisDeliveryHistory.read(
            settings.client(name: "deliveries", logger: logger), store: settings.store, org: org, user: user,
            since: since, limit: limit, now: now)
    }

    /// A table, newest first: time, job, outcome, platform, device, reason.
    public static func text(_ lines: [DeliveryRecord]) -> [String] {
        lines.map { r in
            [r.at, r.job, r.outcome, r.platform ?? "-", r.device ?? "-", r.reason ?? ""].joined(separator: "  ")
        }
    }
}
