import Foundation
import Logging
import ServiceLifecycle
import VolleyCore
import VolleyEngine

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
        try await onThread { try w.start() }
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
        let group = ServiceGroup(
            configuration: .init(
                services: [.init(service: WorkerService(worker: worker, logger: logger))],
                gracefulShutdownSignals: [.sigterm, .sigint],
                logger: logger))
        try await group.run()
    }
}
