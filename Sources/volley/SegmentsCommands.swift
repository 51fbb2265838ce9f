import ArgumentParser
import Foundation
import VolleyCore
import VolleyService

struct Segments: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Segments per org: audiences by user attribute, which jobs name as {\"segment\": \"<id>\"}.",
        discussion: "The same definitions and counts as /v1/segments; reindex rebuilds an org's attribute index.",
        subcommands: [
            SegmentsPut.self, SegmentsGet.self, SegmentsList.self, SegmentsDelete.self, SegmentsCount.self,
            SegmentsReindex.self,
        ])

    static func id(_ text: String) throws -> SegmentID {
        let id = SegmentID(text)
        guard id.isValid else { throw ValidationError("--id: 1–128 characters of letters, digits and . _ : -") }
        return id
    }
}

/// The options naming one segment: `--config`, `--org`, `--id`.
struct SegmentTarget: ParsableArguments {
    @Option(help: "Volley configuration file (YAML).") var config: String
    @Option(help: "Org id.") var org: String
    @Option(help: "Segment id.") var id: String

    /// The checked id and the configuration's stores.
    func open() throws -> (SegmentID, RecipientServices) {
        let id = try Segments.id(id)
        return (id, try RecipientServices(configuration: try VolleyConfiguration.load(path: config)))
    }

    /// Says the org has no such segment and exits 1.
    func missing(_ id: SegmentID) -> ExitCode {
        print("no segment \(id) in org \(org)")
        return ExitCode(1)
    }
}

struct SegmentsPut: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "put", abstract: "Create or replace a segment.",
        discussion: """
            The definition is PUT /v1/segments/{id}'s body: {"match": "all"|"any", "filters": [{"attribute": \
            "plan", "op": "eq", "value": "gold"}]}, ops eq, ne, in, exists, notExists, gt, lt.
            """)
    @Option(help: "Volley configuration file (YAML).") var config: String
    @Option(help: "Org id.") var org: String
    @Option(help: "Segment id (jobs name it as {\"segment\": \"<id>\"}).") var id: String
    @Option(help: "The definition as JSON.") var definition: String

    func run() throws {
        let id = try Segments.id(id)
        let value: JSONValue
        do { value = try JSONValue(parsing: definition) } catch {
            throw ValidationError("the definition is not JSON: \(error)")
        }
        let segment: Segment
        do { segment = try Segment(id: id, json: value) } catch {
            throw ValidationError("\(error.field): \(error.message)")
        }
        let s = try RecipientServices(configuration: try VolleyConfiguration.load(path: config))
        switch try s.segments.put(org: OrgID(org), segment, maxCount: Segment.maxPerOrg) {
        case .created: print("segment \(id) created in org \(org)")
        case .replaced: print("segment \(id) replaced in org \(org)")
        case .limitReached:
            print("org \(org) has \(Segment.maxPerOrg) segments, the most it may keep; delete one first")
            throw ExitCode(1)
        }
    }
}

struct SegmentsGet: ParsableCommand {
    static let configuration = CommandConfiguration(commandName: "get", abstract: "Print one segment as JSON.")
    @OptionGroup var target: SegmentTarget

    func run() throws {
        let (id, s) = try target.open()
        guard let segment = try s.segments.segment(org: OrgID(target.org), id: id) else { throw target.missing(id) }
        print(segment.json.jsonText)
    }
}

struct SegmentsList: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "list", abstract: "Segments of an org, one JSON object per line.")
    @Option(help: "Volley configuration file (YAML).") var config: String
    @Option(help: "Org id.") var org: String

    func run() throws {
        let s = try RecipientServices(configuration: try VolleyConfiguration.load(path: config))
        let list = try s.segments.list(org: OrgID(org))
        if list.isEmpty { print("no segments in org \(org)") }
        for segment in list { print(segment.json.jsonText) }
    }
}

struct SegmentsDelete: ParsableCommand {
    static let configuration = CommandConfiguration(commandName: "delete", abstract: "Delete a segment.")
    @OptionGroup var target: SegmentTarget

    func run() throws {
        let (id, s) = try target.open()
        guard try s.segments.delete(org: OrgID(target.org), id: id) else { throw target.missing(id) }
        print("segment \(id) deleted from org \(target.org)")
    }
}

struct SegmentsCount: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "count", abstract: "How many active users a segment matches now.")
    @OptionGroup var target: SegmentTarget

    func run() throws {
        let (id, s) = try target.open()
        guard let users = try s.segments.count(org: OrgID(target.org), id: id) else { throw target.missing(id) }
        print(JSONValue.object(["id": .string(id.rawValue), "users": .number(JSONNumber(users))]).jsonText)
    }
}

struct SegmentsReindex: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "reindex", abstract: "Rebuild an org's attribute index from its stored attributes.",
        discussion: """
            Clears the org's index and indexes every user's stored attributes again, with the directory's users as \
            the org's known users. Needed once for attributes stored before the index existed, or after the \
            attributes hash was changed by hand. Segments resolve against a partial index while it runs.
            """)
    @Option(help: "Volley configuration file (YAML).") var config: String
    @Option(help: "Org id.") var org: String
    @Option(help: "Users per step.") var batch = 500

    func run() throws {
        let s = try RecipientServices(configuration: try VolleyConfiguration.load(path: config))
        var bar = ProgressBar(unit: "users", total: nil)
        let counts = try s.directory.reindexAttributes(org: OrgID(org), pageSize: max(1, batch)) { c in
            bar.update(done: c.users, detail: "\(c.values) values")
        }
        bar.finish(done: counts.users, detail: "\(counts.values) values")
        print(
            "reindexed org \(org): \(counts.users) users with attributes, \(counts.values) values, "
                + "\(counts.knownUsers) known users")
    }
}
