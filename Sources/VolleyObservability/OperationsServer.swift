import Foundation
import Hummingbird
import Logging
import Prometheus
import ServiceLifecycle

/// The operations endpoint of a Volley process: `GET /metrics` (Prometheus text format 0.0.4), `GET /livez` and
/// `GET /readyz` (JSON naming each check; 200 when all pass, else 503). HTTP/1.1 on its own port, apart from any
/// API traffic, so probes and scrapes still answer when the API is saturated.
///
/// Handlers never block: health is computed by the process's own probes (`HealthSource`), and a scrape only
/// renders the registry after `beforeScrape` has refreshed the gauges that are read from elsewhere.
public struct OperationsServer: Service {
    public struct Settings: Sendable {
        public var host: String
        public var port: Int
        public init(host: String, port: Int) {
            self.host = host
            self.port = port
        }
    }

    let settings: Settings
    let registry: PrometheusCollectorRegistry
    let health: any HealthSource
    let beforeScrape: @Sendable () -> Void
    let onListening: @Sendable (Int) -> Void
    let logger: Logger

    /// `onListening` gets the bound port (useful with port 0).
    public init(
        settings: Settings, registry: PrometheusCollectorRegistry, health: any HealthSource,
        beforeScrape: @escaping @Sendable () -> Void = {}, onListening: @escaping @Sendable (Int) -> Void = { _ in },
        logger: Logger
    ) {
        self.settings = settings
        self.registry = registry
        self.health = health
        self.beforeScrape = beforeScrape
        self.onListening = onListening
        self.logger = logger
    }

    public func run() async throws {
        let router = Router()
        Self.mount(on: router, registry: registry, health: health, beforeScrape: beforeScrape)
        let logger = self.logger
        let onListening = self.onListening
        let host = settings.host
        let app = Application(
            router: router,
            configuration: .init(address: .hostname(host, port: settings.port), serverName: "volley"),
            onServerRunning: { channel in
                let port = channel.localAddress?.port ?? 0
                logger.info("operations endpoint listening", metadata: ["address": "\(host):\(port)"])
                onListening(port)
            },
            logger: logger)
        do {
            try await app.run()
        } catch {
            // The process keeps doing its work without the endpoint: a port in use must not stop deliveries.
            // Prometheus reports the target down, and a liveness probe on this port restarts the container.
            logger.error(
                "operations endpoint not served",
                metadata: ["address": "\(host):\(settings.port)", "error": "\(error)"])
            try? await gracefulShutdown()
        }
    }

    /// Adds `/metrics`, `/livez` and `/readyz` to a router, so another process (the API) can serve them beside
    /// its own routes.
    public static func mount<Context: RequestContext>(
        on router: Router<Context>, registry: PrometheusCollectorRegistry, health: any HealthSource,
        beforeScrape: @escaping @Sendable () -> Void = {}
    ) {
        router.get("metrics") { _, _ -> Response in
            beforeScrape()
            var buffer = [UInt8]()
            buffer.reserveCapacity(64 * 1024)
            registry.emit(into: &buffer)
            return Response(
                status: .ok,
                headers: [.contentType: "text/plain; version=0.0.4; charset=utf-8"],
                body: .init(byteBuffer: ByteBuffer(bytes: buffer)))
        }
        router.get("livez") { _, _ -> Response in health.liveness().response() }
        router.get("readyz") { _, _ -> Response in health.readiness().response() }
    }
}

extension HealthReport {
    func response() -> Response {
        Response(
            status: ok ? .ok : .serviceUnavailable,
            headers: [.contentType: "application/json"],
            body: .init(byteBuffer: ByteBuffer(string: json())))
    }
}
