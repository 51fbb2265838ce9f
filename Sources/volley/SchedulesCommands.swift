import ArgumentParser
import Foundation
import VolleyCore
import VolleyService

struct Schedules: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Recurring jobs per org: once, daily or weekly in a time zone, as a Flow schedule runs.",
        discussion: """
            Each run is a job of its own, id <schedule>-<run epoch seconds>, promoted to the job stream when due by \
            whichever worker holds the promotion lease. The same as /v1/schedules.
            """,
        subcommands: [
            SchedulesCreate.self, SchedulesList.self, SchedulesGet.self, SchedulesPause.self, SchedulesResume.self,
            SchedulesDelete.self,
        ])

    static func store(_ config: String) throws -> RecipientServices.ScheduleAdmin {
        try RecipientServices(configuration: try VolleyConfiguration.load(path: config)).schedules
    }
}

struct ScheduleOptions: ParsableArguments {
    @Option(help: "Volley configuration file (YAML).") var config: String
    @Option(help: "Org id.") var org: String

    /// Prints the schedule a command read or changed as JSON; exits 1 naming `id` when the org has none by it.
    func show(_ schedule: ScheduleState?, id: String) throws {
        guard let schedule else {
            print("no schedule \(id) in org \(org)")
            throw ExitCode(1)
        }
        print(schedule.json.jsonText)
    }
}

struct SchedulesCreate: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "create", abstract: "Create a schedule.",
        discussion: """
            --job is what POST /v1/jobs takes, without id. Example: --id weekly-digest --start \
            2027-03-01T09:00:00+01:00 --frequency weekly --days mon,thu --time-zone Europe/Berlin \
            --job '{"app":"app1","recipients":["all"],"notification":{"title":"Digest"}}'
            """)
    @OptionGroup var options: ScheduleOptions
    @Option(help: "Schedule id (1–128 of letters, digits and . _ : -).") var id: String
    @Option(help: "The job each run sends, as JSON (no id).") var job: String
    @Option(help: "First run, RFC 3339 with an offset.") var start: String
    @Option(help: "once, daily or weekly.") var frequency: String
    @Option(help: "Weekly: days, comma-separated (sun,mon,tue,wed,thu,fri,sat).") var days: String?
    @Option(name: .customLong("time-zone"), help: "IANA time zone whose wall clock keeps the start's time.")
    var timeZone: String
    @Option(help: "No run after this RFC 3339 time.") var end: String?

    func run() throws {
        let jobValue: JSONValue
        do { jobValue = try JSONValue(parsing: job) } catch { throw ValidationError("--job is not JSON: \(error)") }
        var body: [String: JSONValue] = [
            "id": .string(id), "job": jobValue, "start": .string(start), "frequency": .string(frequency),
            "timeZone": .string(timeZone),
        ]
        if let days {
            body["days"] = .array(days.split(separator: ",").map { .string($0.trimmingCharacters(in: .whitespaces)) })
        }
        if let end { body["end"] = .string(end) }
        let schedule: Schedule
        do { schedule = try Schedule(body: .object(body), org: OrgID(options.org), now: Date()) } catch {
            throw ValidationError("\(error.field): \(error.message)")
        }
        switch try Schedules.store(options.config).create(schedule, now: Date()) {
        case .created(let state): print(state.json.jsonText)
        case .exists:
            print("org \(options.org) has a schedule \(id) already")
            throw ExitCode(1)
        case .limitReached:
            print("org \(options.org) has \(Schedule.maxPerOrg) schedules, the most it may keep; delete one first")
            throw ExitCode(1)
        }
    }
}

struct SchedulesList: ParsableCommand {
    static let configuration = CommandConfiguration(commandName: "list", abstract: "Print the org's schedules.")
    @OptionGroup var options: ScheduleOptions

    func run() throws {
        let list = try Schedules.store(options.config).list(org: OrgID(options.org))
        print(JSONValue.object(["schedules": .array(list.map(\.json))]).jsonText)
    }
}

struct SchedulesGet: ParsableCommand {
    static let configuration = CommandConfiguration(commandName: "get", abstract: "Print one schedule as JSON.")
    @OptionGroup var options: ScheduleOptions
    @Option(help: "Schedule id.") var id: String

    func run() throws {
        try options.show(Schedules.store(options.config).schedule(org: OrgID(options.org), id: id), id: id)
    }
}

struct SchedulesPause: ParsableCommand {
    static let configuration = CommandConfiguration(commandName: "pause", abstract: "Stop promoting its runs.")
    @OptionGroup var options: ScheduleOptions
    @Option(help: "Schedule id.") var id: String

    func run() throws {
        try options.show(
            Schedules.store(options.config).setPaused(org: OrgID(options.org), id: id, paused: true, now: Date()),
            id: id)
    }
}

struct SchedulesResume: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "resume", abstract: "Promote its runs again, from the next one on (missed runs are not sent).")
    @OptionGroup var options: ScheduleOptions
    @Option(help: "Schedule id.") var id: String

    func run() throws {
        try options.show(
            Schedules.store(options.config).setPaused(org: OrgID(options.org), id: id, paused: false, now: Date()),
            id: id)
    }
}

struct SchedulesDelete: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "delete", abstract: "Delete a schedule (runs already promoted stay).")
    @OptionGroup var options: ScheduleOptions
    @Option(help: "Schedule id.") var id: String

    func run() throws {
        guard try Schedules.store(options.config).delete(org: OrgID(options.org), id: id) else {
            print("no schedule \(id) in org \(options.org)")
            throw ExitCode(1)
        }
        print("schedule \(id) deleted from org \(options.org)")
    }
}
