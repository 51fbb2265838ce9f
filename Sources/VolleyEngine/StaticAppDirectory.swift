import VolleyCore

/// Apps known at start (from configuration): app name → senders per platform, and the orgs allowed to use each
/// (every org unless `orgs` names the app).
public struct StaticAppDirectory: AppDirectory {
    public let apps: [AppName: [Platform: any PushSender]]
    public let orgs: [AppName: AppOrgs]
    public init(_ apps: [AppName: [Platform: any PushSender]], orgs: [AppName: AppOrgs] = [:]) {
        self.apps = apps
        self.orgs = orgs
    }
    public func lookup(org: OrgID, app: AppName) -> AppLookup {
        guard let senders = apps[app] else { return .unknownApp }
        guard orgs[app, default: .any].allows(org) else { return .orgNotAllowed }
        return .senders(senders)
    }
}
