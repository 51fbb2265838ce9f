import Foundation
import Logging
import VolleyAPNs
import VolleyCore
import VolleyEngine
import VolleyFCM

/// Builds the worker's `AppDirectory` from `apps:`: one `APNSProvider` and/or `FCMProvider` per app, sharing one
/// APNs token registry (one JWT per team+key) and the HTTP/2 pools of `ProviderTransport`.
public final class PipelineApps: AppDirectory, @unchecked Sendable {
    public let senders: [AppName: [Platform: any PushSender]]
    private let shutdowns: [@Sendable () -> Void]

    init(senders: [AppName: [Platform: any PushSender]], shutdowns: [@Sendable () -> Void]) {
        self.senders = senders; self.shutdowns = shutdowns
    }

    public func senders(org: OrgID, app: AppName) -> [Platform: any PushSender]? { senders[app] }

    /// Closes the providers' connections.
    public func shutdown() { for s in shutdowns { s() } }

    /// Reads the `apps` section of the config file (providers' reader) and makes the senders.
    public static func directory(configFile: String, clock: any WallClock = SystemClock(), logger: Logger) throws -> PipelineApps {
        let apps = try ProviderApps.load(configFile: configFile)
        return try make(apps, clock: clock, logger: logger)
    }

    public static func make(_ apps: [ProviderApp], clock: any WallClock = SystemClock(), logger: Logger) throws -> PipelineApps {
        let transport = ProviderTransport.pools(logger: logger)
        let tokens = APNSTokenRegistry(clock: clock)
        var out: [AppName: [Platform: any PushSender]] = [:]
        var shutdowns: [@Sendable () -> Void] = []
        for app in apps {
            var s: [Platform: any PushSender] = [:]
            if let apns = app.apns {
                let p = try APNSProvider(app: apns, tokens: tokens, clock: clock, logger: logger, makeTransport: transport)
                s[.ios] = p
                shutdowns.append { p.shutdown() }
            }
            if let fcm = app.fcm {
                let p = try FCMProvider(app: fcm, clock: clock, logger: logger, makeTransport: transport)
                s[.android] = p
                shutdowns.append { p.shutdown() }
            }
            out[AppName(app.name)] = s
        }
        return PipelineApps(senders: out, shutdowns: shutdowns)
    }
}
