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

struct JobsCancel: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "cancel",
        abstract: "Cancel a job: a scheduled one sends nothing, a running one stops after its current chunk.",
        discussion:
            "The job's report (volley send --wait, GET /v1/jobs/{id}) then says status cancelled with what went. "
            + "Exits 1 when the job had finished already.")

    @Option(help: "YAML configuration file.") var config: String
    @Option(help: "Org id.") var org: String
    @Argument(help: "Job id.") var id: String

    func run() async throws {
        let settings = try PipelineSettings(try loadConfiguration(config))
        let logger = Logger(label: "volley.jobs")
        let (org, job) = (OrgID(self.org), JobID(id))
        let result = try await runBlocking {
            try JobCancelCommand.cancel(settings: settings, org: org, job: job, logger: logger)
        }
        print(result.message)
        if !result.cancelled { throw ExitCode(1) }
    }
}

struct JobsPause: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "pause",
        abstract: "Pause a job: nothing more is sent until it is resumed; what went stays recorded.",
        discussion: "GET /v1/jobs/{id} then reads paused. Exits 1 when the job had finished or was cancelled.")

    @Option(help: "YAML configuration file.") var config: String
    @Option(help: "Org id.") var org: String
    @Argument(help: "Job id.") var id: String

    func run() async throws {
        let settings = try PipelineSettings(try loadConfiguration(config))
        let logger = Logger(label: "volley.jobs")
        let (org, job) = (OrgID(self.org), JobID(id))
        let result = try await runBlocking {
            try JobPauseCommand.pause(settings: settings, org: org, job: job, logger: logger)
        }
        print(result.message)
        if !result.paused { throw ExitCode(1) }
    }
}

struct JobsResume: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "resume",
        abstract: "Resume a paused job: each device not yet sent goes once, at the job's throttle.")

    @Option(help: "YAML configuration file.") var config: String
    @Option(help: "Org id.") var org: String
    @Argument(help: "Job id.") var id: String

    func run() async throws {
        let settings = try PipelineSettings(try loadConfiguration(config))
        let logger = Logger(label: "volley.jobs")
        let (org, job) = (OrgID(self.org), JobID(id))
        print(
            try await runBlocking { try JobPauseCommand.resume(settings: settings, org: org, job: job, logger: logger) }
        )
    }
}
