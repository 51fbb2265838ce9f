import Foundation
import Logging
import VolleyCore
import VolleyEngine

/// Builds the worker's `AppDirectory` from `apps:` (APNs / FCM senders per app).
public enum PipelineApps {
    public static func directory(configuration: VolleyConfiguration, logger: Logger) throws -> any AppDirectory {
        // TEMPORARY until the providers branch is merged: no senders can be built yet.
        throw ConfigurationError(problems: ["apps: provider senders are not available in this build"],
                                 source: configuration.sourcePath ?? "configuration")
    }
}
