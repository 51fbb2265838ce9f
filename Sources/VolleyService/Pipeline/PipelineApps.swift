import Foundation
import Logging
import VolleyCore
import VolleyEngine

/// Builds the worker's `AppDirectory` from `apps:` (APNs / FCM senders per app).
public enum PipelineApps {
    public static func directory(configuration: VolleyConfiguration, logger: Logger) throws -> any AppDirectory {
        let apps = ProviderApps.from(configuration)
        return StaticAppDirectory(ProviderApps.senders(for: apps, logger: logger,
                                                       makeTransport: ProviderTransport.pools(logger: logger)))
    }
}
