import ArgumentParser
import Foundation
import VolleyCore
import VolleyService

struct Types: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Custom notification types per org and their per-app settings (enabled, push enabled).",
        subcommands: [TypesSet.self, TypesList.self, TypesAppSetting.self])
}

struct TypesSet: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "set", abstract: "Create or replace a notification type.")
    @Option(help: "Volley configuration file (YAML).") var config: String
    @Option(help: "Org id.") var org: String
    @Option(help: "Type id (jobs name it in notification.type).") var id: String
    @Option(help: "Display name.") var name: String?
    @Option(help: "Mobile channel: true or false.") var mobile: Bool = true
    @Option(help: "Desktop channel: true or false.") var desktop: Bool = false

    func run() throws {
        let s = try RecipientServices(configuration: try VolleyConfiguration.load(path: config))
        try s.types.setType(
            org: OrgID(org), NotificationType(id: id, name: name ?? id, mobile: mobile, desktop: desktop))
        print("type \(id): mobile \(mobile), desktop \(desktop)")
    }
}

struct TypesList: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "list", abstract: "Types of an org, with an app's settings.")
    @Option(help: "Volley configuration file (YAML).") var config: String
    @Option(help: "Org id.") var org: String
    @Option(help: "Show this app's settings too.") var app: String?

    func run() throws {
        let s = try RecipientServices(configuration: try VolleyConfiguration.load(path: config))
        let types = try s.types.types(org: OrgID(org))
        let settings = try app.map { try s.types.settings(org: OrgID(org), app: AppName($0)) } ?? [:]
        if let app {
            let full = try s.types.fullContent(org: OrgID(org), app: AppName(app))
            print("\(app): fullContentPushNotifications \(full)")
        }
        if types.isEmpty {
            print("no notification types in org \(org)")
            return
        }
        for t in types {
            var line = "\(t.id)  \"\(t.name)\"  mobile \(t.mobile)  desktop \(t.desktop)"
            if let app {
                let st = settings[t.id]
                line += "  [\(app): enabled \(st?.subscribed ?? false), push \(st?.pushEnabled ?? t.mobile)]"
            }
            print(line)
        }
    }
}

struct TypesAppSetting: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "app-setting",
        abstract: "Set or reset a (type, app) setting, or the app's full-content push setting.",
        discussion: """
            A custom notification goes to every app of the org subscribed to its type: --enabled true subscribes \
            the app to the type (no app is subscribed until then), --enabled false unsubscribes it. --full-content \
            holds for all the app's types (no --type needed): on, a custom notification's push shows its title and \
            body; off (the default), its title only.
            """)
    @Option(help: "Volley configuration file (YAML).") var config: String
    @Option(help: "Org id.") var org: String
    @Option(help: "App name.") var app: String
    @Option(help: "Type id (needed for --enabled, --push-enabled and --reset).") var type: String?
    @Option(help: "true or false: the app is subscribed to the type.") var enabled: Bool?
    @Option(name: .customLong("push-enabled"), help: "true or false.") var pushEnabled: Bool?
    @Option(
        name: .customLong("full-content"),
        help: "true or false: the app's fullContentPushNotifications (title and body in the push).")
    var fullContent: Bool?
    @Flag(help: "Back to the defaults.") var reset = false

    func validate() throws {
        if type == nil && (enabled != nil || pushEnabled != nil || reset) {
            throw ValidationError("--enabled, --push-enabled and --reset need --type")
        }
        if enabled == nil && pushEnabled == nil && fullContent == nil && !reset {
            throw ValidationError("give --enabled, --push-enabled, --full-content or --reset")
        }
    }

    func run() throws {
        let s = try RecipientServices(configuration: try VolleyConfiguration.load(path: config))
        let (org, app) = (OrgID(org), AppName(app))
        if let fullContent {
            try s.types.setAppNotificationSettings(
                org: org, app: app, AppNotificationSettings(fullContentPushNotifications: fullContent))
            print("\(app): fullContentPushNotifications \(fullContent)")
        }
        guard let type else { return }
        if reset { try s.types.resetSetting(org: org, app: app, typeID: type) }
        if enabled != nil || pushEnabled != nil {
            try s.types.setSetting(org: org, app: app, typeID: type, enabled: enabled, pushEnabled: pushEnabled)
        }
        let policy = try s.types.policy(org: org, app: app, typeID: type)
        print("\(type) in \(app): \(policy)")
    }
}
