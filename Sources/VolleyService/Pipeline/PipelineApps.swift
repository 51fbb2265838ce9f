import Foundation
import Logging
import VolleyAPNs
import VolleyCore
import VolleyEngine
import VolleyFCM

/// Builds the worker's `AppDirectory` from `apps:`: one `APNSProvider` and/or `FCMProvider` per app, sharing one
/// APNs token registry (one JWT per team+key) and the HTTP/2 pools of `ProviderTransport`. An app that cannot
/// start gets a sender that answers `fix-app` with the startup error (see `ProviderApps.senders`).
public final class PipelineApps: AppDirectory, @unchecked Sendable {
    public let senders: [AppName: [Platform: any PushSender]]
    private let directory: StaticAppDirectory

    init(senders: [AppName: [Platform: any PushSender]], orgs: [AppName: AppOrgs]) {
        self.senders = senders
        directory = StaticAppDirectory(senders, orgs: orgs)
    }

    public func lookup(org: OrgID, app: AppName) -> AppLookup { directory.lookup(org: org, app: app) }

    /// Closes the providers' connections.
    public func shutdown() {
        for platforms in senders.values {
            for sender in platforms.values {
                (sender as? APNSProvider)?.shutdown()
                (sender as? FCMProvider)?.shutdown()
            }
        }
    }

    /// Reads the configuration file (validated) and makes the senders.
    public static func directory(configFile: String, clock: any WallClock = SystemClock(), logger: Logger) throws
        -> PipelineApps
    {
        try directory(configuration: VolleyConfiguration.load(path: configFile), clock: clock, logger: logger)
    }

    /// Each process keeps its own provider tokens here; `volley worker` shares them with the fleet through
    /// `ReloadableApps`.
    public static func directory(
        configuration: VolleyConfiguration, clock: any WallClock = SystemClock(), logger: Logger
    ) -> PipelineApps {
        PipelineApps(
            senders: ProviderApps.senders(
                for: ProviderApps.from(configuration), clock: clock, logger: logger,
                makeTransport: ProviderTransport.pools(
                    logger: logger, providerOutageSeconds: configuration.worker.providerOutageSeconds,
                    resendUnanswered: configuration.worker.unansweredSends == .resend)),
            orgs: Dictionary(uniqueKeysWithValues: configuration.apps.map { ($0.name, $0.orgs) }))
    }
}
