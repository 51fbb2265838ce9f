import ArgumentParser
import Foundation
import Logging
import VolleyCore
import VolleyService

struct Jobs: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract:
            "Jobs on their way: list an org's jobs; export a job's outcomes; pause, resume or cancel a scheduled or "
            + "running job.",
        subcommands: [JobsList.self, JobsOutcomes.self, JobsCancel.self, JobsPause.self, JobsResume.self])
}

/// The job a `volley jobs` subcommand steers, and the one way they all run.
struct JobTarget: ParsableArguments {
    @Option(help: "YAML configuration file.") var config: String
    @Option(help: "Org id.") var org: String
    @Argument(help: "Job id.") var id: String

    /// Runs `change` on the configuration's Redis, prints its message, and exits 1 when it changed nothing.
    func steer(
        _ change: @escaping @Sendable (PipelineSettings, OrgID, JobID, Logger) throws -> (done: Bool, message: String)
    ) async throws {
        let settings = try PipelineSettings(try loadConfiguration(config))
        let logger = Logger(label: "volley.jobs")
        let (org, job) = (OrgID(self.org), JobID(id))
        let result = try await runBlocking { try change(settings, org, job, logger) }
        print(result.message)
        if !result.done { throw ExitCode(1) }
    }
}

struct JobsList: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "list",
        abstract: "An org's jobs, newest first, as GET /v1/jobs lists them: state, app, created, the report's totals.",
        discussion: "Exits 1 when the page is empty. --cursor takes the value a page printed after 'more:'.")

    @Option(help: "YAML configuration file.") var config: String
    @Option(help: "Org id.") var org: String
    @Option(help: "Only jobs in this state: \(JobListQuery.states.joined(separator: ", ")).") var state: String?
    @Option(help: "Only jobs created at or after this RFC 3339 time.") var since: String?
    @Option(help: "At most this many jobs (1–\(JobListQuery.maxLimit)).") var limit = JobListQuery.defaultLimit
    @Option(help: "The page after the one that printed this cursor.") var cursor: String?
    @Flag(help: "One JSON object per job, as GET /v1/jobs/{id} answers.") var json = false

    func run() async throws {
        var query = JobListQuery(limit: limit)
        guard (1...JobListQuery.maxLimit).contains(limit) else {
            throw ValidationError("--limit must be from 1 to \(JobListQuery.maxLimit)")
        }
        if let state {
            guard JobListQuery.states.contains(state) else {
                throw ValidationError("--state must be one of \(JobListQuery.states.joined(separator: ", "))")
            }
            query.state = state
        }
        if let since {
            do throws(RFC3339.ParseError) { query.since = try RFC3339.parse(since) } catch {
                throw ValidationError("--since must be RFC 3339, e.g. 2026-06-25T18:24:31Z: \(error.reason)")
            }
        }
        if let cursor {
            guard let c = JobListCursor(cursor) else { throw ValidationError("--cursor: not a cursor a page printed") }
            query.cursor = c
        }
        let settings = try PipelineSettings(try loadConfiguration(config))
        let logger = Logger(label: "volley.jobs")
        let (org, q) = (OrgID(self.org), query)
        let page = try await runBlocking {
            try JobListCommand.list(settings: settings, org: org, query: q, logger: logger)
        }
        if json {
            for j in page.jobs { print(String(decoding: try ReportCoding.encoder.encode(j), as: UTF8.self)) }
        } else {
            for l in JobListCommand.text(page) { print(l) }
        }
        if page.jobs.isEmpty { throw ExitCode(1) }
    }
}

struct JobsOutcomes: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "outcomes",
        abstract: "A job's per-device outcomes as CSV (platform,token,user,outcome,reason), as "
            + "GET /v1/jobs/{id}/outcomes streams them: shards included, tokens shown by their last 8 characters.",
        discussion: "Written to standard output, or --output FILE. Exits 1 when the org has no such job.")

    @Option(help: "YAML configuration file.") var config: String
    @Option(help: "Org id.") var org: String
    @Argument(help: "Job id.") var id: String
    @Option(help: "Write the CSV to this file instead of standard output.") var output: String?

    func run() async throws {
        let settings = try PipelineSettings(try loadConfiguration(config))
        let logger = Logger(label: "volley.jobs")
        let out: FileHandle
        if let output {
            guard FileManager.default.createFile(atPath: output, contents: nil) else {
                throw ValidationError("--output: cannot create \(output)")
            }
            out = try FileHandle(forWritingTo: URL(fileURLWithPath: output))
        } else {
            out = FileHandle.standardOutput
        }
        defer { if output != nil { try? out.close() } }
        let found = try await JobOutcomesCommand.export(
            settings: settings, org: OrgID(org), job: JobID(id), logger: logger
        ) { bytes in try out.write(contentsOf: bytes) }
        if !found {
            FileHandle.standardError.write(Data("no job '\(id)' in org \(org)\n".utf8))
            if let output { try? FileManager.default.removeItem(atPath: output) }
            throw ExitCode(1)
        }
    }
}

struct JobsCancel: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "cancel",
        abstract:
            "Cancel a job: a scheduled one sends nothing, a running one stops before its next send (what it "
            + "started still ends).",
        discussion:
            "The job's report (volley send --wait, GET /v1/jobs/{id}) then says status cancelled with what went. "
            + "Exits 1 when the job had finished already.")

    @OptionGroup var target: JobTarget

    func run() async throws {
        try await target.steer { settings, org, job, logger in
            let r = try JobCancelCommand.cancel(settings: settings, org: org, job: job, logger: logger)
            return (r.cancelled, r.message)
        }
    }
}

struct JobsPause: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "pause",
        abstract: "Pause a job: nothing more is sent until it is resumed; what went stays recorded.",
        discussion: "GET /v1/jobs/{id} then reads paused. Exits 1 when the job had finished or was cancelled.")

    @OptionGroup var target: JobTarget

    func run() async throws {
        try await target.steer { settings, org, job, logger in
            let r = try JobPauseCommand.pause(settings: settings, org: org, job: job, logger: logger)
            return (r.paused, r.message)
        }
    }
}

struct JobsResume: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "resume",
        abstract: "Resume a paused job: each device not yet sent goes once, at the job's throttle.")

    @OptionGroup var target: JobTarget

    func run() async throws {
        try await target.steer { settings, org, job, logger in
            (true, try JobPauseCommand.resume(settings: settings, org: org, job: job, logger: logger))
        }
    }
}
