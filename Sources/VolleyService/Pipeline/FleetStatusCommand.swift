import Foundation
import Logging
import VolleyCore
import VolleyStore

/// `volley status`: the fleet at a glance (consumers, backlog, throughput, dead letters, quotas).
public enum FleetStatusCommand {
    /// Reads one snapshot. `services` supplies the quota limits (configuration defaults and per-org overrides).
    public static func read(
        settings: PipelineSettings, services: RecipientServices?, logger: Logger, now: Date = Date()
    ) throws -> FleetStatus {
        let reader = RedisFleetStatus(
            client: settings.client(name: "status", logger: logger), store: settings.store, quota: services?.quota)
        return try reader.read(now: now)
    }

    public static func json(_ s: FleetStatus) -> String {
        let e = ReportCoding.encoder
        guard let data = try? e.encode(s),
            var object = (try? JSONSerialization.jsonObject(with: data)) as? [String: Any]
        else { return "{}" }
        // One job stream: no per-shard list.
        if s.shards.isEmpty { object["shards"] = nil }
        // The computed rates, which Codable leaves out.
        object["lastMinute"] = [
            "windowSeconds": s.lastMinute.windowSeconds, "jobs": s.lastMinute.jobs,
            "devices": s.lastMinute.devices, "accepted": s.lastMinute.accepted,
            "jobsPerSecond": s.lastMinute.jobsPerSecond, "devicesPerSecond": s.lastMinute.devicesPerSecond,
        ]
        object["quotas"] = s.quotas.map {
            [
                "org": $0.org, "platform": $0.platform.rawValue, "used": $0.used, "limit": $0.limit,
                "fraction": $0.fraction,
            ] as [String: Any]
        }
        let out = (try? JSONSerialization.data(withJSONObject: object, options: [.sortedKeys])) ?? Data()
        return String(decoding: out, as: UTF8.self)
    }

    public static func text(_ s: FleetStatus) -> [String] {
        var lines = ["volley status at \(RFC3339.format(s.at)): stream \(s.stream.name), group \(s.stream.group)"]
        let oldest =
            s.stream.oldestPendingAgeSeconds.map {
                "  oldest pending \(duration($0))" + (s.stream.oldestPendingConsumer.map { " on \($0)" } ?? "")
            } ?? ""
        lines.append(
            "stream      length \(s.stream.length)  lag \(s.stream.lag.map(String.init) ?? "?")  "
                + "pending \(s.stream.pending)\(oldest)")
        if s.stream.scheduled > 0 {
            lines.append(
                "scheduled   \(s.stream.scheduled) jobs"
                    + (s.stream.nextDueAt.map { ", next due \(RFC3339.format($0))" } ?? ""))
        }
        if s.stream.paused > 0 {
            lines.append("paused      \(s.stream.paused) jobs (or campaign parts) until resumed")
        }
        for shard in s.shards {
            lines.append(
                "  \(shard.name)  length \(shard.length)  lag \(shard.lag.map(String.init) ?? "?")  "
                    + "pending \(shard.pending)")
        }
        let m = s.lastMinute
        lines.append(
            "last minute \(rate(m.jobsPerSecond)) jobs/s  \(rate(m.devicesPerSecond)) devices/s  "
                + "(\(m.jobs) jobs, \(m.devices) devices, \(m.accepted) accepted)")
        let dead = s.deadLettersLastHour.sorted { ($0.value, $1.key) > ($1.value, $0.key) }
        lines.append(
            "dead letters, last hour: "
                + (dead.isEmpty ? "none" : dead.map { "\($0.key) \($0.value)" }.joined(separator: ", ")))
        lines.append("")
        if s.consumers.isEmpty {
            lines.append("consumers: none (no worker has joined group \(s.stream.group))")
        } else {
            lines.append("consumers (\(s.consumers.count))")
            lines += TextTable.render(
                header: ["name", "pending", "idle"],
                rows: s.consumers.map { [$0.name, "\($0.pending)", duration($0.idleSeconds)] }
            ).map { "  " + $0 }
        }
        lines.append("")
        if s.quotas.isEmpty {
            lines.append("quota, hour \(s.quotaHour) UTC: no org has sent this hour")
        } else {
            lines.append("quota, hour \(s.quotaHour) UTC, nearest their limit first")
            lines += TextTable.render(
                header: ["org", "platform", "used", "limit", "used %"],
                rows: s.quotas.map { q in
                    let percent = String(format: "%.0f", q.fraction * 100)
                    return [q.org, q.platform.rawValue, "\(q.used)", "\(q.limit)", percent]
                }
            ).map { "  " + $0 }
        }
        return lines
    }

    static func rate(_ v: Double) -> String { String(format: v >= 100 ? "%.0f" : "%.2f", v) }

    /// `0.4 s`, `12 s`, `3 min 5 s`, `2 h 10 min`.
    static func duration(_ seconds: Double) -> String {
        if seconds < 10 { return String(format: "%.1f s", seconds) }
        let s = Int(seconds)
        if s < 60 { return "\(s) s" }
        if s < 3600 { return "\(s / 60) min \(s % 60) s" }
        return "\(s / 3600) h \((s % 3600) / 60) min"
    }
}
