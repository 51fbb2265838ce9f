import ArgumentParser
import Foundation
import Logging
import VolleyCore
import VolleyService

struct Status: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "The fleet at a glance: workers, backlog, throughput, dead letters, quotas.",
        discussion:
            "Workers are the consumer group's consumers (pending entries, idle time); the stream's length, lag, "
            + "pending count and oldest pending age; jobs and devices per second over the last minute (from the "
            + "report stream); dead letters of the last hour by reason; the orgs nearest their hourly quota.")

    @Option(help: "YAML configuration file.") var config: String
    @Flag(help: "Redraw every --interval seconds until interrupted.") var watch = false
    @Option(help: "With --watch: seconds between redraws.") var interval: Double = 2
    @Flag(help: "Print one JSON object (with --watch: one per line).") var json = false

    func validate() throws {
        if interval <= 0 { throw ValidationError("--interval must be > 0") }
    }

    func run() async throws {
        let c = try loadConfiguration(config)
        let settings = try PipelineSettings(c)
        let logger = Logger(label: "volley.status")
        let services = try RecipientServices(configuration: c, name: "status")
        let (watch, json, interval) = (self.watch, self.json, self.interval)
        // Redraw in place only on a terminal; a pipe gets one snapshot after another.
        let redraw = watch && !json && isatty(STDOUT_FILENO) == 1
        if redraw { FileHandle.standardOutput.write(Data("\u{1B}[2J".utf8)) }
        repeat {
            let status = try await runBlocking {
                try FleetStatusCommand.read(settings: settings, services: services, logger: logger)
            }
            // On a terminal: home the cursor, clear each line's rest, and clear below the frame.
            let lines = json ? [FleetStatusCommand.json(status)] : FleetStatusCommand.text(status)
            // Written at once and unbuffered, so a frame never shows half drawn.
            let frame =
                redraw
                ? "\u{1B}[H" + lines.joined(separator: "\u{1B}[K\n") + "\u{1B}[K\n\u{1B}[J"
                : lines.joined(separator: "\n") + "\n"
            FileHandle.standardOutput.write(Data(frame.utf8))
            if watch { try await Task.sleep(nanoseconds: UInt64(interval * 1_000_000_000)) }
        } while watch
    }
}

struct Events: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Debug events of a job sent with \"debug\": true (volley send --debug).",
        discussion:
            "PUSH_NOTIFICATION_SENT (with the provider's answer), _NO_DEVICES, _INVALID_APP, _INVALID_CERTIFICATE, "
            + "_INVALID_NOTIFICATION, _NOT_ENABLED, per user and device; the first 1,000 of a job, kept as long as "
            + "the job's outcome ledger.")

    @Option(help: "YAML configuration file.") var config: String
    @Option(help: "Job id.") var job: String
    @Option(help: "Org id (default: every org holding events for the job id).") var org: String?
    @Flag(help: "One JSON object per event.") var json = false

    func run() async throws {
        let c = try loadConfiguration(config)
        let settings = try PipelineSettings(c)
        let logger = Logger(label: "volley.events")
        let (job, org, json) = (JobID(self.job), self.org.map(OrgID.init), self.json)
        let found = try await runBlocking {
            try DebugEventsCommand.read(settings: settings, job: job, org: org, logger: logger)
        }
        let lines = json ? DebugEventsCommand.json(found) : DebugEventsCommand.text(found, job: job)
        for l in lines { print(l) }
        if found.allSatisfy({ $0.events.isEmpty }) { throw ExitCode(1) }
    }
}

struct Deliveries: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "A user's recent notifications: each device's outcome and reason, and the jobs that skipped them.",
        discussion:
            "Newest first, as GET /v1/users/{user}/deliveries answers: accepted, rejected, failed, quotaExceeded, "
            + "expired per device (the token redacted to its last 8 characters), capped and noDevice per job. Kept "
            + "deliveries.days days (default 7). Exits 1 when there is nothing.")

    @Option(help: "YAML configuration file.") var config: String
    @Option(help: "Org id.") var org: String
    @Option(help: "User id.") var user: String
    @Option(help: "Only what happened at or after this RFC 3339 time.") var since: String?
    @Option(help: "At most this many lines (1–500).") var limit: Int = 100
    @Flag(help: "One JSON object per line.") var json = false

    func run() async throws {
        guard (1...500).contains(limit) else { throw ValidationError("--limit must be from 1 to 500") }
        var from: Date?
        if let since {
            do throws(RFC3339.ParseError) { from = try RFC3339.parse(since) } catch {
                throw ValidationError("--since must be RFC 3339, e.g. 2026-06-25T18:24:31Z: \(error.reason)")
            }
        }
        let settings = try PipelineSettings(try loadConfiguration(config))
        let logger = Logger(label: "volley.deliveries")
        let (org, user, limit, since) = (OrgID(self.org), UserID(self.user), self.limit, from)
        let lines = try await runBlocking {
            try DeliveriesCommand.read(
                settings: settings, org: org, user: user, since: since, limit: limit, now: SystemClock().now(),
                logger: logger)
        }
        if json {
            for l in lines { print(String(decoding: try ReportCoding.encoder.encode(l), as: UTF8.self)) }
        } else {
            for l in DeliveriesCommand.text(lines) { print(l) }
        }
        if lines.isEmpty { throw ExitCode(1) }
    }
}
