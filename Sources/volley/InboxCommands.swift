import ArgumentParser
import Foundation
import VolleyCore
import VolleyService

struct Inbox: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "In-app notifications per user (Salesforce Notifications resources).",
        subcommands: [InboxList.self, InboxStatusCommand.self, InboxMarkCommand.self])
}

struct InboxOptions: ParsableArguments {
    @Option(help: "Volley configuration file (YAML).") var config: String
    @Option(help: "Org id.") var org: String
    @Option(help: "User id.") var user: String
    @Flag(help: "Print JSON.") var json = false
}

private var iso: ISO8601DateFormatter {
    let f = ISO8601DateFormatter()
    f.formatOptions = [.withInternetDateTime, .withFractionalSeconds]
    return f
}

private func printJSON<T: Encodable>(_ value: T) throws {
    let e = JSONEncoder()
    e.outputFormatting = [.sortedKeys]
    e.dateEncodingStrategy = .custom { d, enc in
        var c = enc.singleValueContainer()
        try c.encode(iso.string(from: d))
    }
    print(String(decoding: try e.encode(value), as: UTF8.self))
}

struct InboxList: ParsableCommand {
    static let configuration = CommandConfiguration(commandName: "list", abstract: "Newest notifications first.")
    @OptionGroup var options: InboxOptions
    @Option(help: "How many (1–50).") var size: Int = 10
    @Option(help: "Only notifications created before this ISO 8601 time.") var before: String?

    func run() throws {
        let services = try RecipientServices(configuration: try VolleyConfiguration.load(path: options.config))
        var b: Date?
        if let before {
            guard let d = iso.date(from: before) ?? ISO8601DateFormatter().date(from: before) else {
                throw ValidationError("--before must be ISO 8601, e.g. 2026-06-25T18:24:31Z")
            }
            b = d
        }
        let list = try services.inbox.list(
            org: OrgID(options.org), user: UserID(options.user), size: min(50, max(1, size)), before: b)
        if options.json {
            try printJSON(["notifications": list])
            return
        }
        if list.isEmpty {
            print("no notifications")
            return
        }
        for n in list {
            let flags = n.read ? "read" : (n.seen ? "seen" : "new")
            print(
                "\(iso.string(from: n.createdAt))  \(flags.padding(toLength: 4, withPad: " ", startingAt: 0))  "
                    + "\(n.id)  [\(n.type ?? "-")] \(n.title)"
            )
        }
    }
}

struct InboxStatusCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "status", abstract: "Unread/unseen counts and oldest unread/unseen.")
    @OptionGroup var options: InboxOptions

    func run() throws {
        let services = try RecipientServices(configuration: try VolleyConfiguration.load(path: options.config))
        let s = try services.inbox.status(org: OrgID(options.org), user: UserID(options.user))
        // Salesforce prints the current time when there is no oldest unread/unseen.
        let now = Date()
        if options.json {
            try printJSON([
                "unreadCount": AnyEncodable(s.unreadCount), "unseenCount": AnyEncodable(s.unseenCount),
                "oldestUnread": AnyEncodable(iso.string(from: s.oldestUnread ?? now)),
                "oldestUnseen": AnyEncodable(iso.string(from: s.oldestUnseen ?? now)),
                "lastActivity": AnyEncodable(iso.string(from: s.lastActivity ?? now)),
            ])
            return
        }
        print("unread \(s.unreadCount)  unseen \(s.unseenCount)")
        print(
            "oldest unread \(s.oldestUnread.map(iso.string(from:)) ?? "-")  oldest unseen "
                + "\(s.oldestUnseen.map(iso.string(from:)) ?? "-")"
        )
    }
}

struct AnyEncodable: Encodable {
    let encodeBody: (Encoder) throws -> Void
    init<T: Encodable>(_ v: T) { encodeBody = { try v.encode(to: $0) } }
    func encode(to encoder: Encoder) throws { try encodeBody(encoder) }
}

struct InboxMarkCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "mark", abstract: "Mark notifications read/unread, seen/unseen (read also marks seen).")
    @OptionGroup var options: InboxOptions
    @Option(help: "Comma-separated notification ids (at most 50).") var ids: String?
    @Option(help: "Every notification created before this ISO 8601 time.") var before: String?
    @Flag(help: "Every notification (before now).") var all = false
    @Option(help: "true or false.") var read: Bool?
    @Option(help: "true or false.") var seen: Bool?

    func run() throws {
        let selection: InboxMark.Selection
        switch (ids, before, all) {
        case (let i?, nil, false):
            selection = .ids(i.split(separator: ",").map { String($0).trimmingCharacters(in: .whitespaces) })
        case (nil, let b?, false):
            guard let d = iso.date(from: b) ?? ISO8601DateFormatter().date(from: b) else {
                throw ValidationError("--before must be ISO 8601, e.g. 2026-06-25T18:24:31Z")
            }
            selection = .before(d)
        case (nil, nil, true): selection = .before(Date().addingTimeInterval(1))
        default: throw ValidationError("give exactly one of --ids, --before, --all")
        }
        let mark: InboxMark
        do { mark = try InboxMark(selection, read: read, seen: seen) } catch let e as InboxError {
            throw ValidationError(e.message)
        }
        let services = try RecipientServices(configuration: try VolleyConfiguration.load(path: options.config))
        let n = try services.inbox.mark(org: OrgID(options.org), user: UserID(options.user), mark)
        print("marked \(n) notification\(n == 1 ? "" : "s")")
    }
}
