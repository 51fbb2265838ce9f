import ArgumentParser
import Foundation
import Logging
import VolleyAPI
import VolleyCore
import VolleyService

struct API: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "api",
        abstract: "Run the HTTP API: jobs, devices, user tokens, types, quota (openapi/volley.yaml).",
        discussion: "SIGTERM/SIGINT: /readyz answers 503 for api.drainSeconds, then the listener closes and requests "
            + "in progress finish.")

    @Option(help: "YAML configuration file.") var config: String

    func run() async throws {
        let c = try loadConfiguration(config)
        SignalMask.unblockTerminationSignals()
        let logger = Logger(label: "volley.api")
        if !c.api.tasksOnEventLoops {
            logger.notice("tasks stay on Swift's own thread pool (api.tasksOnEventLoops is false)")
        } else if !APIServer.runTasksOnEventLoops() {
            logger.notice("tasks stay on Swift's own thread pool: NIO's event loops could not take it over")
        }
        do { try await APIRunner.run(configuration: c, logger: logger) } catch let e as ConfigurationError {
            throw ValidationError(e.description)
        }
    }
}

struct Keys: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "API keys: each belongs to one org and has a role (send, read or admin).",
        subcommands: [KeysCreate.self, KeysList.self, KeysRevoke.self])
}

private func keyStore(_ path: String) throws -> APIKeyStore {
    let c = try loadConfiguration(path)
    let settings = try PipelineSettings(c)
    return APIKeyStore(
        client: settings.client(name: "keys", logger: Logger(label: "volley.keys")), prefix: settings.store.prefix)
}

struct KeysCreate: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "create", abstract: "Make a key and print it once (only its SHA-256 is stored).")
    @Option(help: "YAML configuration file.") var config: String
    @Option(help: "Org id the key belongs to.") var org: String
    @Option(help: "send (push, jobs, user tokens), read (jobs, reports, quota) or admin (everything).")
    var role: String
    @Option(help: "A label to recognise the key by.") var name: String?
    @Flag(help: "Print {\"id\", \"key\", \"org\", \"role\", \"name\"} as one JSON object.") var json = false

    func run() throws {
        guard let role = APIRole(rawValue: role) else { throw ValidationError("--role must be send, read or admin") }
        guard !org.isEmpty else { throw ValidationError("--org must not be empty") }
        let made = try keyStore(config).create(org: OrgID(org), role: role, name: name)
        if json {
            let e = JSONEncoder()
            e.outputFormatting = [.sortedKeys]
            print(String(decoding: try e.encode(made), as: UTF8.self))
        } else {
            print("key \(made.id) for org \(made.org), role \(made.role)\(name.map { ", name \($0)" } ?? "")")
            print(made.key)
            print("Store it now: it is not shown again.")
        }
    }
}

struct KeysList: ParsableCommand {
    static let configuration = CommandConfiguration(commandName: "list", abstract: "List keys (never the secrets).")
    @Option(help: "YAML configuration file.") var config: String
    @Option(help: "Only this org's keys.") var org: String?

    func run() throws {
        let records = try keyStore(config).list(org: org.map(OrgID.init))
        if records.isEmpty { print("no API keys") }
        for r in records {
            print(
                "\(r.id)  org \(r.org)  role \(r.role.rawValue)  created \(RFC3339.format(r.createdAt))  "
                    + (r.name ?? "")
            )
        }
    }
}

struct KeysRevoke: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "revoke", abstract: "Delete a key; requests with it get 401 from then on.")
    @Option(help: "YAML configuration file.") var config: String
    @Option(help: "The key's id (from create or list).") var id: String

    func run() throws {
        guard try keyStore(config).revoke(id: id) else { throw ValidationError("no API key with id \(id)") }
        print("revoked \(id)")
    }
}
