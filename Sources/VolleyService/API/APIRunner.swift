import Foundation
import Logging
import VolleyAPI
import VolleyConnect
import VolleyCore
import VolleyRedis
import VolleyStore

/// Wires `volley api`: the configuration's `api` section, the test-push path through the providers, and the
/// Salesforce-compatible routes.
public enum APIRunner {
    /// The server for `configuration`; test pushes go through the configured apps' providers.
    public static func server(configuration c: VolleyConfiguration, logger: Logger) throws -> APIServer {
        var apiConfiguration = try c.apiConfiguration()
        if let certFile = c.api.tlsCertFile, let keyFile = c.api.tlsKeyFile {
            do {
                apiConfiguration.tls = try APITLS(certFile: certFile, keyFile: keyFile)
            } catch let f as APITLS.Failure {
                throw ConfigurationError(problems: [f.description], source: c.sourcePath ?? "configuration")
            }
        }
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
            testPush: testPush, connect: try connectService(configuration: c, logger: logger))
    }

    /// The Salesforce-compatible resources on the same stores as the worker (types, inbox, job stream).
    static func connectService(configuration c: VolleyConfiguration, logger: Logger) throws -> ConnectService {
        let settings = try PipelineSettings(c)
        func client(_ name: String) -> RedisClient {
            RedisClient(endpoint: settings.endpoint, options: settings.redisOptions, name: name, logger: logger)
        }
        let producer = JobProducer(client: client("api-connect-jobs"), store: settings.store)
        let apps = c.apps
        return ConnectService(
            types: RedisNotificationTypeStore(client: client("api-connect-types")),
            inbox: RedisInboxStore(
                client: client("api-connect-inbox"),
                retention: InboxRetention(maxCount: c.inbox.maxCount, maxAgeSeconds: c.inbox.maxAgeSeconds)),
            jobs: LockedJobWriter { job in _ = try producer.enqueue(job) },
            options: ConnectService.Options(apps: { org in apps.filter { $0.orgs.allows(org) }.map(\.name) }),
            logger: logger)
    }

    /// Runs until SIGTERM/SIGINT (drains first: `/readyz` answers 503 for `api.drainSeconds`).
    public static func run(
        configuration c: VolleyConfiguration, logger: Logger,
        onListening: @escaping @Sendable (Int) async -> Void = { _ in }
    ) async throws {
        for warning in c.warnings { logger.warning("\(warning)") }
        let server = try server(configuration: c, logger: logger)
        logger.info("volley api listening on \(c.api.host):\(c.api.port)")
        try await server.run(
            onListening: onListening, services: operations(configuration: c, server: server, logger: logger))
    }
}
