import Foundation
import Logging
import Metrics
import ServiceLifecycle
import VolleyCore
import VolleyEngine

/// SIGHUP: re-reads the configuration file and applies what can change while the worker runs: `apps` (added,
/// removed, credentials rotated, orgs). Everything else (`redis`, `worker`, `quotas`, `metrics`, `log`) is read at
/// start only; a reload that changes it says so in the log. An invalid file (or an app whose new credentials
/// cannot be used) changes nothing: every problem is logged with its key.
public final class ConfigurationReloader: @unchecked Sendable {
    public let path: String
    let apps: ReloadableApps
    let engineMetrics: EngineMetrics
    let logger: Logger
    private let lock = NSLock()
    private var running: VolleyConfiguration
    private let results: [String: Counter]

    public static let resultLabels = ["success", "invalid"]

    public init(
        path: String, running: VolleyConfiguration, apps: ReloadableApps, engineMetrics: EngineMetrics,
        logger: Logger
    ) {
        self.path = path
        self.running = running
        self.apps = apps
        self.engineMetrics = engineMetrics
        self.logger = logger
        results = Dictionary(
            uniqueKeysWithValues: Self.resultLabels.map {
                ($0, Counter(label: "volley_config_reloads_total", dimensions: [("result", $0)]))
            })
    }

    /// One reload. Returns true when the new configuration was applied.
    @discardableResult
    public func reload() -> Bool {
        lock.withLock {
            logger.info("reloading the configuration", metadata: ["file": "\(path)"])
            let next: VolleyConfiguration
            do {
                next = try VolleyConfiguration.load(path: path)
            } catch let e as ConfigurationError {
                return rejected(e.problems)
            } catch {
                return rejected(["--config: \(error)"])
            }
            switch apps.apply(next, rejectingUnavailable: true) {
            case .failure(let r):
                return rejected(r.problems)
            case .success(let changes):
                engineMetrics.registerApps(next.apps.map(\.name))
                for key in Self.restartOnlyChanges(running, next) {
                    logger.warning(
                        "configuration reload: this key takes effect at the next restart", metadata: ["key": "\(key)"])
                }
                running = next
                results["success"]?.increment()
                logger.info(
                    "configuration reloaded",
                    metadata: [
                        "added": "\(changes.added)", "removed": "\(changes.removed)",
                        "replaced": "\(changes.replaced)",
                    ])
                return true
            }
        }
    }

    private func rejected(_ problems: [String]) -> Bool {
        results["invalid"]?.increment()
        for p in problems {
            let key = p.split(separator: ":", maxSplits: 1).first.map(String.init) ?? ""
            logger.error(
                "configuration reload rejected; the running configuration stays",
                metadata: ["key": "\(key)", "problem": "\(p)"])
        }
        return false
    }

    /// The sections that differ but apply only at start.
    static func restartOnlyChanges(_ a: VolleyConfiguration, _ b: VolleyConfiguration) -> [String] {
        var out: [String] = []
        if a.redis != b.redis { out.append("redis") }
        if a.worker != b.worker { out.append("worker") }
        if a.quotas != b.quotas { out.append("quotas") }
        if a.inbox != b.inbox { out.append("inbox") }
        if a.metrics != b.metrics { out.append("metrics") }
        if a.log != b.log { out.append("log") }
        return out
    }
}

/// Reloads on SIGHUP until graceful shutdown. The reload runs on its own serial queue: it reads files and may
/// build providers, and two signals in a row reload twice, one after the other.
struct ReloadService: Service {
    let reloader: ConfigurationReloader

    func run() async throws {
        signal(SIGHUP, SIG_IGN) // delivered to the dispatch source instead of terminating the process
        let source = DispatchSource.makeSignalSource(signal: SIGHUP, queue: DispatchQueue(label: "volley-reload"))
        let r = reloader
        source.setEventHandler { r.reload() }
        source.resume()
        try? await gracefulShutdown()
        source.cancel()
    }
}
