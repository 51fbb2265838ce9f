import ArgumentParser
import Foundation
import VolleyCore
import VolleyService

struct Directory: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "The per-org directory: users, groups, queues, account and opportunity teams.",
        subcommands: [DirectoryImportCommand.self, DirectoryShow.self])
}

struct DirectoryImportCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "import",
        abstract:
            "Load directory records from JSONL: "
            + "{\"org\",\"kind\":\"user|group|queue|accountTeam|opportunityTeam\",\"id\",\"active\",\"members\","
            + "\"attributes\"}.",
        discussion:
            "Members are added to what a container already has, so a big group may span many lines. A user's "
            + "attributes (an object of strings, for templates) replace the stored ones; {} removes them.")
    @Option(help: "Volley configuration file (YAML).") var config: String
    @Option(help: "Records per pipelined batch.") var batch: Int = 2000
    @Argument(help: "JSONL file, one record per line.") var file: String

    func run() throws {
        let c = try VolleyConfiguration.load(path: config)
        let services = try RecipientServices(configuration: c)
        let started = Date()
        // Lines approximate records (blank and invalid lines are not records): the bar ends at the last batch.
        var bar = ProgressBar(unit: "records", total: ProgressBar.countLines(path: file))
        let result = try DirectoryImport.run(path: file, into: services.directory, batchSize: max(1, batch)) { t in
            bar.update(done: t.records, detail: "\(t.users) users, \(t.containers) containers")
        }
        let t = result.counts
        bar.finish(done: t.records, detail: "\(t.users) users, \(t.containers) containers")
        let secs = Date().timeIntervalSince(started)
        print(
            "imported \(t.records) records in \(String(format: "%.1f", secs)) s: \(t.users) users "
                + "(\(t.inactiveUsers) inactive, \(t.usersWithAttributes) with attributes), "
                + "\(t.containers) containers, \(t.memberships) memberships"
        )
        for k in DirectoryKind.allCases { if let n = t.byKind[k.rawValue] { print("  \(k.rawValue): \(n)") } }
        if !result.skipped.isEmpty {
            print("skipped lines:")
            for s in result.skipped { print("  \(s)") }
            throw ExitCode(2)
        }
    }
}

struct DirectoryShow: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "show", abstract: "Print what an id is and what it resolves to.")
    @Option(help: "Volley configuration file (YAML).") var config: String
    @Option(help: "Org id.") var org: String
    @Flag(help: "Print JSON.") var json = false
    @Argument(help: "A user, group, queue, account or opportunity id.") var id: String

    func run() throws {
        let c = try VolleyConfiguration.load(path: config)
        let services = try RecipientServices(configuration: c)
        let e = try services.directory.show(org: OrgID(org), id: RecipientID(id))
        if json {
            let obj: [String: Any] = [
                "id": id, "kind": e.kind?.rawValue ?? "unknown", "active": e.active, "directMembers": e.directMembers,
                "sampleMembers": e.sampleMembers.map(\.rawValue), "resolvedUsers": e.resolvedUsers,
                "sampleUsers": e.sampleUsers.map(\.rawValue), "nestedContainers": e.nestedContainers,
            ]
            let data = try JSONSerialization.data(withJSONObject: obj, options: [.sortedKeys])
            print(String(decoding: data, as: UTF8.self))
            return
        }
        guard let kind = e.kind else {
            print("\(id): unknown in org \(org) (a job naming it reports it as unknown)")
            throw ExitCode(1)
        }
        print("\(id): \(kind.rawValue)\(kind == .user ? (e.active ? ", active" : ", inactive") : "")")
        if kind.isContainer {
            let members = e.sampleMembers.map(\.rawValue).joined(separator: ", ")
            print("  direct members: \(e.directMembers)\(members.isEmpty ? "" : " (e.g. \(members))")")
            print("  nested containers: \(e.nestedContainers)")
        }
        let users = e.sampleUsers.map(\.rawValue).joined(separator: ", ")
        let more = e.resolvedUsers > e.sampleUsers.count ? ", …" : ""
        print(
            "  resolves to \(e.resolvedUsers) active user\(e.resolvedUsers == 1 ? "" : "s")"
                + (users.isEmpty ? "" : ": \(users)\(more)"))
    }
}
