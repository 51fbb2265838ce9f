import ArgumentParser
import Foundation
import Logging
import VolleyCore
import VolleyService

struct Jobs: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Jobs on their way: pause, resume or cancel a scheduled or running job.",
        subcommands: [JobsCancel.self, JobsPause.self, JobsResume.self])
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

struct JobsCancel: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "cancel",
        abstract: "Cancel a job: a scheduled one sends nothing, a running one stops after its current chunk.",
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
