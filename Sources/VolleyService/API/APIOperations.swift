import Foundation
import Logging
import ServiceLifecycle
import Synchronization
import VolleyAPI
import VolleyObservability

/// The API process's health for its operations endpoint (`metrics.host`:`metrics.apiPort`, beside the worker's
/// `metrics.port`): a probe asks the server every second whether it is ready (not draining, and Redis answers a
/// script within `api.readinessTimeoutSeconds`) and keeps the answer, so `/readyz` there answers at once; `/livez`
/// fails only when the probe itself has stopped.
final class APIHealthProbe: HealthSource, Service {
    private let server: APIServer
    private let state = Mutex<(problem: String?, probedAt: Date?)>((nil, nil))

    init(server: APIServer) { self.server = server }

    /// Listed before the API in its service group, so it stops after the API has drained.
    func run() async throws {
        while !Task.isCancelled && !Task.isShuttingDownGracefully {
            let problem = await server.readinessProblem()
            state.withLock { $0 = (problem, Date()) }
            try? await Task.sleep(for: .seconds(1))
        }
    }

    func liveness() -> HealthReport {
        let probedAt = state.withLock { $0.probedAt }
        let age = probedAt.map { Date().timeIntervalSince($0) }
        let alive = age.map { $0 < 10 } ?? true // before the first probe: starting
        let detail = age.map { String(format: "last probe %.1f s ago", $0) } ?? "starting"
        return HealthReport([HealthCheck("probe", ok: alive, detail: detail)])
    }

    func readiness() -> HealthReport {
        let (problem, probedAt) = state.withLock { $0 }
        guard let probedAt else { return HealthReport([HealthCheck("api", ok: false, detail: "not probed yet")]) }
        // As the worker's: an answer older than a few probes is no answer (each probe gives up after
        // api.readinessTimeoutSeconds, so only a stopped probe leaves it this old).
        let age = Date().timeIntervalSince(probedAt)
        if age > max(5, 2 * server.configuration.readinessTimeoutSeconds + 1) {
            return HealthReport([
                HealthCheck("api", ok: false, detail: String(format: "no probe answer for %.0f s", age))
            ])
        }
        return HealthReport([HealthCheck("api", ok: problem == nil, detail: problem ?? "Redis runs scripts")])
    }
}

extension APIRunner {
    /// The operations endpoint of `volley api` when `metrics.enabled`: the same `/metrics`, `/livez`, `/readyz` as
    /// the worker's, on its own port, serving the `volley_api_*` series.
    static func operations(
        configuration c: VolleyConfiguration, server: APIServer, logger: Logger
    ) -> [any Service] {
        guard let backend = MetricsBackend.bootstrap(c) else { return [] }
        let probe = APIHealthProbe(server: server)
        let endpoint = OperationsServer(
            settings: .init(host: c.metrics.host, port: c.metrics.apiPort), registry: backend.registry, health: probe,
            logger: logger)
        return [probe, endpoint]
    }
}
