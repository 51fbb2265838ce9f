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

private func printJSON<T: Encodable>(_ value: T) throws {
    let e = JSONEncoder()
    e.outputFormatting = [.sortedKeys]
    e.dateEncodingStrategy = RFC3339.encodingStrategy(.milliseconds)
    print(String(decoding: try e.encode(value), as: UTF8.self))
}

struct InboxList: ParsableCommand {
    static let configuration = CommandConfiguration(commandName: "list", abstract: "Newest notifications first.")
    @OptionGroup var options: InboxOptions
    @Option(help: "How many (1–50).") var size: Int = 10
    @Option(help: "Only notifications created before this RFC 3339 time.") var before: String?

    func run() throws {
        let services = try RecipientServices(configuration: try VolleyConfiguration.load(path: options.config))
        var b: Date?
        if let before {
            do throws(RFC3339.ParseError) { b = try RFC3339.parse(before) } catch {
                throw ValidationError("--before must be RFC 3339, e.g. 2026-06-25T18:24:31Z: \(error.reason)")
            }
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
                "\(RFC3339.format(n.createdAt, .milliseconds))  "
                    + "\(flags.padding(toLength: 4, withPad: " ", startingAt: 0))  "
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
                "oldestUnread": AnyEncodable(RFC3339.format(s.oldestUnread ?? now, .milliseconds)),
                "oldestUnseen": AnyEncodable(RFC3339.format(s.oldestUnseen ?? now, .milliseconds)),
                "lastActivity": AnyEncodable(RFC3339.format(s.lastActivity ?? now, .milliseconds)),
            ])
            return
        }
        print("unread \(s.unreadCount)  unseen \(s.unseenCount)")
        print(
            "oldest unread \(s.oldestUnread.map { RFC3339.format($0, .milliseconds) } ?? "-")  oldest unseen "
                + "\(s.oldestUnseen.map { RFC3339.format($0, .milliseconds) } ?? "-")"
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
    @Option(help: "Every notification created before this RFC 3339 time.") var before: String?
    @Flag(help: "Every notification (before now).") var all = false
    @Option(help: "true or false.") var read: Bool?
    @Option(help: "true or false.") var seen: Bool?

    func run() throws {
        let selection: InboxMark.Selection
        switch (ids, before, all) {
        case (let i?, nil, false):
            selection = .ids(i.split(separator: ",").map { String($0).trimmingCharacters(in: .whitespaces) })
        case (nil, let b?, false):
            let d: Date
            do throws(RFC3339.ParseError) { d = try RFC3339.parse(b) } catch {
                throw ValidationError("--before must be RFC 3339, e.g. 2026-06-25T18:24:31Z: \(error.reason)")
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
