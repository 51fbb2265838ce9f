import Foundation

/// A recurring schedule (`/v1/schedules`, `volley schedules`): a job template sent at the times its recurrence
/// says, as a Salesforce Flow schedule runs a flow (once, daily, weekly), in an IANA time zone, until an optional
/// end. Each run is a job of its own whose id is derived from the schedule and the run's time
/// (`runJobID(schedule:run:)`), so a run promoted twice is accepted once.
public struct Schedule: Sendable, Hashable {
    public var id: String
    public var org: OrgID
    /// The job each run sends: a job body without `id` (each run's is derived) and without `org` (the schedule's).
    public var job: JSONValue
    public var recurrence: ScheduleRecurrence
    public var createdAt: Date

    public init(id: String, org: OrgID, job: JSONValue, recurrence: ScheduleRecurrence, createdAt: Date) {
        self.id = id
        self.org = org
        self.job = job
        self.recurrence = recurrence
        self.createdAt = createdAt
    }

    /// Schedules one org may keep.
    public static let maxPerOrg = 1000

    /// A run's job id: `<schedule>-<run, seconds since 1970>`.
    public static func runJobID(schedule: String, run: Date) -> JobID {
        JobID("\(schedule)-\(Int64(run.timeIntervalSince1970.rounded(.down)))")
    }

    /// The stream entry of the run at `run`: the template with the run's id and the schedule's org.
    public func runJob(at run: Date) -> JSONValue {
        var members = job.objectValue ?? [:]
        members["id"] = .string(Self.runJobID(schedule: id, run: run).rawValue)
        members["org"] = .string(org.rawValue)
        return .object(members)
    }

    /// Reads a schedule as `POST /v1/schedules` and `volley schedules create` take it: `id`, `job`, `start`,
    /// `frequency`, `days` (weekly), `timeZone` (an IANA name, `IANAZone`), `end`. The error names the field
    /// (`job.notification.title`, `start`, `days[1]`). The job is checked as `PushJob.validate` checks a job, and
    /// may not fix `sendAt` (each run is sent at its own time); the API adds the checks of `POST /v1/jobs` that need
    /// its stores and the apps' configuration.
    public init(body: JSONValue, org: OrgID, now: Date) throws(ScheduleError) {
        try self.init(body: body, org: org, now: now, stored: false)
    }

    /// `stored`: a definition read back, checked when it was created. It is read by the rules it was created under,
    /// so a schedule made before a rule was added stays listed and can be deleted.
    private init(body: JSONValue, org: OrgID, now: Date, stored: Bool) throws(ScheduleError) {
        guard let o = body.objectValue else { throw ScheduleError("body", "expected a JSON object") }
        let known: Set<String> = ["id", "job", "start", "frequency", "days", "timeZone", "end"]
        if let unknown = o.keys.sorted().first(where: { !known.contains($0) }) {
            throw ScheduleError(unknown, "unknown key")
        }
        guard let id = o["id"]?.stringValue else { throw ScheduleError("id", "required: a string") }
        guard StoredTemplate.isValidID(id) else { throw ScheduleError("id", "1–128 letters, digits and . _ : -") }
        guard let zoneName = o["timeZone"]?.stringValue else {
            throw ScheduleError("timeZone", "required: an IANA time zone such as Europe/Berlin")
        }
        guard let zone = stored ? TimeZone(identifier: zoneName) : IANAZone.named(zoneName) else {
            throw ScheduleError("timeZone", IANAZone.problem(zoneName) ?? "'\(zoneName)' is not a time zone")
        }
        guard let startText = o["start"]?.stringValue else {
            throw ScheduleError("start", "required: an RFC 3339 time with an offset (2027-03-01T09:00:00+01:00)")
        }
        let start: Date
        do throws(RFC3339.ParseError) { start = try RFC3339.parse(startText) } catch {
            throw ScheduleError("start", "'\(startText)' is not an RFC 3339 time with an offset: \(error.reason)")
        }
        let frequencyText = o["frequency"]?.stringValue ?? ""
        guard let frequency = ScheduleRecurrence.Frequency(rawValue: frequencyText) else {
            throw ScheduleError("frequency", "expected one of once, daily, weekly")
        }
        var days = Set<ScheduleRecurrence.Day>()
        if let list = o["days"] {
            guard frequency == .weekly else { throw ScheduleError("days", "only a weekly schedule names days") }
            guard let items = list.arrayValue else { throw ScheduleError("days", "expected an array of days") }
            for (i, item) in items.enumerated() {
                guard let d = item.stringValue.flatMap({ ScheduleRecurrence.Day(rawValue: $0.lowercased()) }) else {
                    throw ScheduleError("days[\(i)]", "expected one of sun, mon, tue, wed, thu, fri, sat")
                }
                days.insert(d)
            }
        }
        var end: Date?
        if let endValue = o["end"] {
            guard let text = endValue.stringValue else {
                throw ScheduleError("end", "expected an RFC 3339 time with an offset")
            }
            let e: Date
            do throws(RFC3339.ParseError) { e = try RFC3339.parse(text) } catch {
                throw ScheduleError("end", "'\(text)' is not an RFC 3339 time with an offset: \(error.reason)")
            }
            guard e >= start else { throw ScheduleError("end", "is before start") }
            end = e
        }
        guard let job = o["job"] else { throw ScheduleError("job", "required: the job each run sends") }
        try Self.check(job: job, org: org, stored: stored)
        let recurrence = ScheduleRecurrence(
            start: start, frequency: frequency, days: days, timeZone: zone, end: end)
        guard recurrence.run(onOrAfter: now.addingTimeInterval(-60)) != nil else {
            throw ScheduleError(end == nil ? "start" : "end", "no run is left: every run is more than 60 s past")
        }
        self.init(id: id, org: org, job: job, recurrence: recurrence, createdAt: now)
    }

    /// A template job is what `POST /v1/jobs` takes, without `id` (derived per run), without another org, and
    /// without `sendAt` (a fixed instant that every run after the first would be refused for, as past).
    static func check(job: JSONValue, org: OrgID, stored: Bool = false) throws(ScheduleError) {
        guard let members = job.objectValue else { throw ScheduleError("job", "expected a JSON object") }
        for key in ["id", "shard"] where members[key] != nil {
            throw ScheduleError("job.\(key)", "not in a template: each run's id is <schedule>-<run epoch>")
        }
        if !stored && members["sendAt"] != nil {
            throw ScheduleError(
                "job.sendAt",
                "not in a schedule's job: each run is sent at its own time (start, frequency, days); a fixed sendAt "
                    + "would be in the past for every run after it")
        }
        if let other = members["org"]?.stringValue, other != org.rawValue {
            throw ScheduleError("job.org", "must be the schedule's org (\(org)) or left out")
        }
        var schema = JobKeys.Schema.stream
        schema.job.remove("shard")
        if let unknown = JobKeys.unknownKeys(in: members, schema: schema).first {
            throw ScheduleError(
                "job.\(unknown.path)",
                "unknown key" + (unknown.suggestion.map { "; did you mean '\($0)'?" } ?? ""))
        }
        let parsed: PushJob
        do { parsed = try PushJob(json: job, defaultOrg: org) } catch {
            throw ScheduleError("job.\(error.field)", error.message)
        }
        do { try parsed.validate() } catch let r as JobRejection {
            throw ScheduleError(r.field.map { "job.\($0)" } ?? "job", r.message)
        } catch {
            throw ScheduleError("job", "\(error)")
        }
    }

    /// The definition as stored and listed: what `init(body:org:now:)` read, in its own keys, and `createdAt`.
    public var definition: JSONValue {
        var o: [String: JSONValue] = [
            "id": .string(id), "job": job, "start": .string(RFC3339.format(recurrence.start)),
            "frequency": .string(recurrence.frequency.rawValue), "timeZone": .string(recurrence.timeZone.identifier),
            "createdAt": .string(RFC3339.format(createdAt)),
        ]
        if recurrence.frequency == .weekly && !recurrence.days.isEmpty {
            o["days"] = .array(recurrence.days.sorted().map { .string($0.rawValue) })
        }
        if let end = recurrence.end { o["end"] = .string(RFC3339.format(end)) }
        return .object(o)
    }

    /// A stored definition read back (`definition`'s form).
    public init(definition: JSONValue, org: OrgID) throws(ScheduleError) {
        guard var o = definition.objectValue, let created = o.removeValue(forKey: "createdAt")?.stringValue,
            let createdAt = RFC3339.date(created)
        else { throw ScheduleError("definition", "a stored schedule of org \(org) is not readable") }
        // Stored definitions are read as they were checked; `now` far in the past keeps a finished one readable.
        var s = try Schedule(body: .object(o), org: org, now: .distantPast, stored: true)
        s.createdAt = createdAt
        self = s
    }
}

/// A schedule input at fault: `field` as the body names it, `message` what it takes.
public struct ScheduleError: Error, Sendable, Hashable, CustomStringConvertible {
    public var field: String
    public var message: String
    public init(_ field: String, _ message: String) {
        self.field = field
        self.message = message
    }
    public var description: String { "\(field): \(message)" }
}

/// A schedule and where it stands: its next run (nil: none left), the job of its last run, whether it is paused.
public struct ScheduleState: Sendable, Hashable {
    public var schedule: Schedule
    public var paused: Bool
    public var nextRunAt: Date?
    public var lastRunJob: JobID?

    public init(schedule: Schedule, paused: Bool, nextRunAt: Date?, lastRunJob: JobID?) {
        self.schedule = schedule
        self.paused = paused
        self.nextRunAt = nextRunAt
        self.lastRunJob = lastRunJob
    }

    /// The API's and the CLI's form: the definition with `paused`, `nextRunAt` and `lastRunJob`.
    public var json: JSONValue {
        var o = schedule.definition.objectValue ?? [:]
        o["paused"] = .bool(paused)
        o["nextRunAt"] = nextRunAt.map { .string(RFC3339.format($0)) } ?? .null
        o["lastRunJob"] = lastRunJob.map { .string($0.rawValue) } ?? .null
        return .object(o)
    }
}

/// What `ScheduleStore.create` did.
public enum ScheduleCreation: Sendable, Hashable {
    case created(ScheduleState)
    /// The org has a schedule of this id already: nothing was written.
    case exists
    /// The org has `Schedule.maxPerOrg` schedules: nothing was written.
    case limitReached
}

/// An org's schedules as the API changes them (the CLI uses the store's blocking twin).
public protocol ScheduleStore: Sendable {
    func create(_ schedule: Schedule, now: Date) async throws -> ScheduleCreation
    /// Every schedule of the org, by id.
    func list(org: OrgID) async throws -> [ScheduleState]
    func schedule(org: OrgID, id: String) async throws -> ScheduleState?
    /// Pauses (no run is promoted) or resumes (the next run from `now` on) a schedule; nil when there is none.
    func setPaused(org: OrgID, id: String, paused: Bool, now: Date) async throws -> ScheduleState?
    /// True when the schedule existed. Runs already promoted are jobs of their own and stay.
    func delete(org: OrgID, id: String) async throws -> Bool
}
