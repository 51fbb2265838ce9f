import ArgumentParser
import Foundation
import Logging
import VolleyCore
import VolleyService

struct Jobs: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Jobs on their way: cancel a scheduled or running job.",
        subcommands: [JobsCancel.self])
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
