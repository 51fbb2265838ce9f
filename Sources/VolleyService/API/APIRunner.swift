import Foundation
import Logging
import VolleyAPI
import VolleyCore
import VolleyRedis

/// Wires `volley api`: the configuration's `api` section, the test-push path through the providers, and the
/// Salesforce-compatible routes.
public enum APIRunner {
    /// The server for `configuration`; test pushes go through the configured apps' providers.
    public static func server(configuration c: VolleyConfiguration, logger: Logger) throws -> APIServer {
        if c.api.tlsCertFile != nil {
            throw ConfigurationError(
                problems: [
                    "api.tls: this build serves plain HTTP/1.1; terminate TLS at the load balancer or a sidecar "
                        + "and remove the section"
                ], source: c.sourcePath ?? "configuration")
        }
        let apiConfiguration = try c.apiConfiguration()
        let apps = ProviderApps.from(c)
        let testPush: APIServer.TestPushHandler = { input in
            var quiet = logger
            quiet.logLevel = .warning
            let result = await TestPush.run(
                .init(
                    app: input.app.rawValue, platform: input.platform, token: input.token.rawValue,
                    notification: input.notification, dryRun: input.dryRun, environment: input.environment),
                apps: apps, logger: quiet, makeTransport: ProviderTransport.pools(logger: quiet))
            let encoder = JSONEncoder()
            encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
            let json = (try? encoder.encode(result)) ?? Data("{}".utf8)
            return APIServer.TestPushAnswer(json: json, delivered: result.accepted)
        }
        return APIServer(
            configuration: apiConfiguration, openAPIDocument: OpenAPIDocument.yaml, logger: logger,
            testPush: testPush)
    }

    /// Runs until SIGTERM/SIGINT (drains first: `/readyz` answers 503 for `api.drainSeconds`).
    public static func run(
        configuration c: VolleyConfiguration, logger: Logger,
        onListening: @escaping @Sendable (Int) async -> Void = { _ in }
    ) async throws {
        for warning in c.warnings { logger.warning("\(warning)") }
        let server = try server(configuration: c, logger: logger)
        logger.info("volley api listening on \(c.api.host):\(c.api.port)")
        try await server.run(onListening: onListening)
    }
}
