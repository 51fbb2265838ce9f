import ArgumentParser
import Foundation
import VolleyCore
import VolleyService

struct Templates: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Notification templates per org: texts with each user's names (Hi {{ first_name | 'Friend' }}).",
        discussion: "A job names one with templateId (and customData for {{ message.custom_data.* }}).",
        subcommands: [TemplatesPut.self, TemplatesGet.self, TemplatesDelete.self, TemplatesList.self])

    /// A template as `GET /v1/templates/{id}` answers it.
    static func json(_ t: StoredTemplate) -> String {
        let object: JSONValue = .object([
            "id": .string(t.id), "notification": t.notification, "createdAt": .string(RFC3339.format(t.createdAt)),
            "updatedAt": .string(RFC3339.format(t.updatedAt)),
        ])
        return object.jsonText
    }

    static func checkID(_ id: String) throws {
        guard StoredTemplate.isValidID(id) else {
            throw ValidationError("--id: 1–128 characters of letters, digits and . _ : -")
        }
    }
}

struct TemplatesPut: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "put", abstract: "Create or replace a template.",
        discussion: """
            The notification is a job's (title, subtitle, body, localized, url, imageUrl … as JSON), checked as \
            PUT /v1/templates/{id} checks it: a bad name, or what the providers would refuse for an app the org may \
            use (a ttl over 28 days, an fcm that is no object), is refused, naming the field.
            """)
    @Option(help: "Volley configuration file (YAML).") var config: String
    @Option(help: "Org id.") var org: String
    @Option(help: "Template id (jobs name it in templateId).") var id: String
    @Option(help: "The notification as JSON.") var notification: String?
    @Option(name: .customLong("notification-file"), help: "A file holding the notification as JSON.")
    var notificationFile: String?

    func run() throws {
        try Templates.checkID(id)
        let text: String
        switch (notification, notificationFile) {
        case (let n?, nil): text = n
        case (nil, let path?): text = try String(contentsOfFile: path, encoding: .utf8)
        default: throw ValidationError("give --notification or --notification-file")
        }
        let value: JSONValue
        do { value = try JSONValue(parsing: text) } catch {
            throw ValidationError("the notification is not JSON: \(error)")
        }
        let template: NotificationTemplate
        do { template = try StoredTemplate.check(notification: value) } catch {
            throw ValidationError("\(error.field): \(error.message)")
        }
        let configuration = try VolleyConfiguration.load(path: config)
        // The providers' preparation, for each app the org may use, as PUT /v1/templates/{id} runs it.
        let apps = configuration.apps.filter { $0.orgs.allows(OrgID(org)) }.map(\.name)
        if let refusal = NotificationCheck.providers(configuration.apps).refusal(ofTemplate: template, apps: apps) {
            let field = refusal.error.field.map { "notification.\($0)" } ?? "notification"
            let app = refusal.app.map { "app \($0), " } ?? ""
            throw ValidationError("\(field): \(app)\(refusal.platform): \(refusal.error.message)")
        }
        let s = try RecipientServices(configuration: configuration)
        let put = try s.templates.put(
            org: OrgID(org), id: id, notification: value, now: Date(), maxCount: StoredTemplate.maxPerOrg)
        switch put {
        case .created: print("template \(id) created in org \(org)")
        case .replaced: print("template \(id) replaced in org \(org)")
        case .limitReached:
            print("org \(org) has \(StoredTemplate.maxPerOrg) templates, the most it may keep; delete one first")
            throw ExitCode(1)
        }
    }
}

struct TemplatesGet: ParsableCommand {
    static let configuration = CommandConfiguration(commandName: "get", abstract: "Print one template as JSON.")
    @Option(help: "Volley configuration file (YAML).") var config: String
    @Option(help: "Org id.") var org: String
    @Option(help: "Template id.") var id: String

    func run() throws {
        try Templates.checkID(id)
        let s = try RecipientServices(configuration: try VolleyConfiguration.load(path: config))
        guard let t = try s.templates.template(org: OrgID(org), id: id) else {
            print("no template \(id) in org \(org)")
            throw ExitCode(1)
        }
        print(Templates.json(t))
    }
}

struct TemplatesDelete: ParsableCommand {
    static let configuration = CommandConfiguration(commandName: "delete", abstract: "Delete a template.")
    @Option(help: "Volley configuration file (YAML).") var config: String
    @Option(help: "Org id.") var org: String
    @Option(help: "Template id.") var id: String

    func run() throws {
        try Templates.checkID(id)
        let s = try RecipientServices(configuration: try VolleyConfiguration.load(path: config))
        guard try s.templates.delete(org: OrgID(org), id: id) else {
            print("no template \(id) in org \(org)")
            throw ExitCode(1)
        }
        print("template \(id) deleted from org \(org)")
    }
}

struct TemplatesList: ParsableCommand {
    static let configuration = CommandConfiguration(commandName: "list", abstract: "Templates of an org.")
    @Option(help: "Volley configuration file (YAML).") var config: String
    @Option(help: "Org id.") var org: String
    @Flag(help: "Print one JSON object per line.") var json = false

    func run() throws {
        let s = try RecipientServices(configuration: try VolleyConfiguration.load(path: config))
        let list = try s.templates.list(org: OrgID(org))
        if json {
            for t in list { print(Templates.json(t)) }
            return
        }
        if list.isEmpty {
            print("no templates in org \(org)")
            return
        }
        for t in list {
            let personal = (try? t.readNotification()).flatMap { try? NotificationTemplate($0) }
            let names = personal.map {
                $0.usesAttributes ? "user attributes" : $0.usesCustomData ? "custom data" : "none"
            }
            print(
                "\(t.id)  title \"\(t.notification["title"]?.stringValue ?? "")\"  names: \(names ?? "unreadable")"
                    + "  updated \(RFC3339.format(t.updatedAt))")
        }
    }
}
