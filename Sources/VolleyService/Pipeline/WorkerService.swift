import Foundation
import Logging
import Prometheus
import ServiceLifecycle
import VolleyCore
import VolleyEngine
import VolleyObservability
import VolleyStore

/// Runs a `PipelineWorker` under swift-service-lifecycle: starts it, waits for graceful shutdown (SIGTERM/SIGINT
/// through the `ServiceGroup`), then drains within the configured deadline. The worker's blocking calls run on
/// their own threads, never on the cooperative pool.
public struct WorkerService: Service {
    public let worker: PipelineWorker
    let logger: Logger

    public init(worker: PipelineWorker, logger: Logger) {
        self.worker = worker
        self.logger = logger
    }

    public func run() async throws {
        let w = worker
        // SIGTERM/SIGINT while the worker still waits for Redis (down, unreachable, loading): the wait gives up and
        // the worker stops without having read anything.
        let started = try await withGracefulShutdownHandler {
            try await onThread { try w.start() }
        } onGracefulShutdown: {
            w.stopStarting()
        }
        guard started else { return }
        // Suspends until the group signals graceful shutdown (or the task is cancelled).
        try? await gracefulShutdown()
        _ = await onThread { w.drain() }
    }
}

/// Runs blocking work on a fresh thread and resumes with its result.
func onThread<T: Sendable>(_ body: @escaping @Sendable () throws -> T) async throws -> T {
    try await withCheckedThrowingContinuation { (cont: CheckedContinuation<T, Error>) in
        let t = Thread {
            do { cont.resume(returning: try body()) } catch { cont.resume(throwing: error) }
        }
        t.start()
    }
}

func onThread<T: Sendable>(_ body: @escaping @Sendable () -> T) async -> T {
    await withCheckedContinuation { (cont: CheckedContinuation<T, Never>) in
        Thread { cont.resume(returning: body()) }.start()
    }
}

public enum WorkerRunner {
    /// `volley worker`: one worker until SIGTERM/SIGINT, then drain and return (exit 0).
    public static func run(
        settings: PipelineSettings, apps: any AppDirectory, logger: Logger,
        resolver: any RecipientResolver = UserRecipientResolver(),
        quota: (any HourlyQuota)? = nil
    ) async throws {
        let worker = PipelineWorker(
            configuration: settings.worker, backend: settings.backend(logger: logger),
            apps: apps, resolver: resolver, quota: quota, logger: logger)
        let promoter = SchedulePromoter(settings: settings, logger: logger)
        promoter.start()
        defer { promoter.stop() }
        let group = ServiceGroup(
            configuration: .init(
                services: [.init(service: WorkerService(worker: worker, logger: logger))],
                gracefulShutdownSignals: [.sigterm, .sigint],
                logger: logger))
        try await group.run()
    }
}

/// The metrics backend `main` bootstrapped (a Prometheus registry), handed to the worker's operations endpoint.
public struct MetricsBackend: Sendable {
    let registry: PrometheusCollectorRegistry

    /// Bootstraps swift-metrics when `metrics.enabled` (once per process, from `main`); nil when disabled.
    public static func bootstrap(_ configuration: VolleyConfiguration) -> MetricsBackend? {
        guard configuration.metrics.enabled else { return nil }
        return MetricsBackend(registry: MetricsBootstrap.bootstrap(version: VolleyVersion.current))
    }
}

extension WorkerRunner {
    /// `volley worker` with its operations: the `/metrics`, `/livez`, `/readyz` endpoint (when `metrics` is given),
    /// the health probe, and SIGHUP reloads of the configuration file's apps.
    public static func run(
        configuration c: VolleyConfiguration, settings: PipelineSettings, metrics: MetricsBackend?, logger: Logger,
        resolver: any RecipientResolver = UserRecipientResolver(), quota: (any HourlyQuota)? = nil,
        personalContent: (any PersonalContentPlanner)? = nil, fleet: FleetSync? = nil,
        throttle: (any JobThrottle)? = nil
    ) async throws {
        let providerMetrics = ProviderMetrics()
        let apps = ReloadableApps(configuration: c, metrics: providerMetrics, fleet: fleet, logger: logger)
        defer { apps.shutdown() }
        let engineMetrics = EngineMetrics(apps: c.apps.map(\.name))
        let worker = PipelineWorker(
            configuration: settings.worker, backend: settings.backend(logger: logger),
            apps: apps, resolver: resolver, quota: quota, personalContent: personalContent, throttle: throttle,
            logger: logger,
            metrics: engineMetrics)
        var services: [ServiceGroupConfiguration.ServiceConfiguration] = []
        var probe: WorkerProbe?
        if let metrics {
            let p = WorkerProbe(worker: worker, apps: apps, settings: settings, logger: logger)
            p.start()
            probe = p
            // First in the list, so it is shut down last: it answers (readyz 503) while the worker drains.
            services.append(
                .init(
                    service: OperationsServer(
                        settings: .init(host: c.metrics.host, port: c.metrics.port), registry: metrics.registry,
                        health: p, beforeScrape: { providerMetrics.refresh(senders: apps.currentProviders) },
                        logger: logger)))
        }
        services.append(.init(service: WorkerService(worker: worker, logger: logger)))
        if let path = c.sourcePath {
            let reloader = ConfigurationReloader(
                path: path, running: c, apps: apps, engineMetrics: engineMetrics, logger: logger)
            services.append(.init(service: ReloadService(reloader: reloader)))
        }
        // Devices not registered again within `devices.staleAfterDays`: one worker of the fleet at a time removes them.
        let sweeper = StaleDeviceSweeper(
            configuration: .init(staleAfterDays: c.devices.staleAfterDays), settings: settings, logger: logger)
        sweeper?.start()
        // Sync hints: entries of the job stream are stored by the lanes; every worker flushes what is due, and each
        // waiting key is taken by one of them.
        worker.syncHints = RedisSyncHintStore(
            client: settings.client(name: "sync-hint-intake", giveUpAfter: 10, logger: logger),
            maxRecordIds: c.syncHints.maxRecordIds)
        // Message ids: each tracked delivery maps its campaign to the job its interactions count for.
        worker.messageTracking = RedisMessageTracking(
            client: settings.client(name: "message-ids", logger: logger), store: settings.store)
        let hintFlusher = SyncHintFlusher(configuration: c.syncHints, settings: settings, logger: logger)
        hintFlusher.start()
        // Scheduled jobs and recurring schedules' runs due: one worker of the fleet at a time moves them onto the job
        // stream.
        let promoter = SchedulePromoter(settings: settings, logger: logger)
        promoter.start()
        defer { promoter.stop() }
        let group = ServiceGroup(
            configuration: .init(services: services, gracefulShutdownSignals: [.sigterm, .sigint], logger: logger))
        try await group.run()
        sweeper?.stop()
        hintFlusher.stop()
        probe?.stop()
    }
}
