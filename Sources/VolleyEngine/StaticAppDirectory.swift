import VolleyCore

/// Apps known at start (from configuration): app name → senders per platform, for every org.
public struct StaticAppDirectory: AppDirectory {
    public let apps: [AppName: [Platform: any PushSender]]
    public init(_ apps: [AppName: [Platform: any PushSender]]) { self.apps = apps }
    public func senders(org: OrgID, app: AppName) -> [Platform: any PushSender]? { apps[app] }
}
