import Foundation
import Logging
import NIOPosix
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
            return APIServer.TestPushAnswer(
                json: json, delivered: result.accepted,
                tokenDead: result.outcome == OutcomeDecision.removeToken.rawValue)
        }
        let stores = try RedisAPIStores(configuration: c, logger: logger)
        return APIServer(
            configuration: apiConfiguration, stores: stores.api, openAPIDocument: OpenAPIDocument.yaml,
            logger: logger, testPush: testPush, connect: stores.connect(configuration: c, logger: logger),
            notificationCheck: .providers(c.apps))
    }
}

/// The API's stores on the configured Redis: the hot path (credentials, job submissions) on each event loop's own
/// connection, or on serial lanes of cluster clients for Redis Cluster (the event loops' connections do not route by
/// slot); devices and job status on `api.redisConnections` serial lanes; types, inbox, quota and templates each on one.
struct RedisAPIStores {
    var api: APIServer.Stores
    let types: RedisNotificationTypeRepository
    let jobs: RedisJobSubmitter
    let inbox: RedisInboxRepository

    init(configuration c: VolleyConfiguration, logger: Logger) throws {
        let settings = try PipelineSettings(c)
        let endpoint = settings.endpoint
        let options = settings.redisOptions
        try Self.refuseWhatWillNotHeal(endpoint, options)
        func client(_ name: String) -> RedisClient {
            RedisClient(endpoint: endpoint, options: options, name: name, logger: logger)
        }
        let route: RedisScriptRoute =
            endpoint.isCluster
            ? .lanes(SerialLanes(count: 4, label: "volley.api.scripts") { n in client("api-scripts-\(n)") })
            : .eventLoops(
                RedisEventLoopPipeline(
                    group: .singleton, connections: 1, endpoint: endpoint, options: options, logger: logger))
        let lanes = SerialLanes(count: c.api.redisConnections, label: "volley.api.redis") { n in client("api-\(n)") }
        types = RedisNotificationTypeRepository(client: client("api-types"))
        jobs = RedisJobSubmitter(redis: route, store: settings.store)
        inbox = RedisInboxRepository(
            store: RedisInboxStore(
                client: client("api-inbox"),
                retention: InboxRetention(maxCount: c.inbox.maxCount, maxAgeSeconds: c.inbox.maxAgeSeconds)))
        api = APIServer.Stores(
            credentials: RedisCredentialStore(redis: route, prefix: settings.store.prefix), jobs: jobs,
            jobStatus: RedisJobStatusReader(lanes: lanes, store: settings.store),
            devices: RedisDeviceStore(lanes: lanes, store: settings.store, logger: logger), types: types,
            quota: RedisQuotaLedger(
                store: RedisQuotaStore(
                    client: client("api-quota"), defaults: QuotaLimits(ios: c.quotas.ios, android: c.quotas.android),
                    configured: c.quotas.orgs.mapValues { ($0.ios, $0.android) })),
            templates: RedisTemplateRepository(client: client("api-templates")),
            attributes: RedisUserAttributeRepository(client: client("api-attributes")),
            schedules: RedisScheduleRepository(client: client("api-schedules"), store: settings.store),
            frequencyCaps: RedisFrequencyCapRepository(client: client("api-frequency-caps")))
        api.syncHints = RedisSyncHintRepository(
            client: client("api-sync-hints"), maxRecordIds: c.syncHints.maxRecordIds)
        api.timeZones = RedisOrgTimeZoneRepository(client: client("api-time-zones"))
        // Interactions count on the hot path's connection (one script per batch); opens mark the inbox through it.
        api.interactions = RedisInteractionRecorder(redis: route, store: settings.store, inbox: inbox)
        api.segments = RedisSegmentRepository(client: client("api-segments"))
        api.jobHistory = RedisJobHistory(lanes: lanes, store: settings.store)
        // No history is kept with `deliveries.days` 0 (the default): the route then answers 501 naming the key.
        if c.deliveries.days > 0 {
            api.deliveries = RedisDeliveryHistory(lanes: lanes, store: settings.store, clock: SystemClock())
        }
    }

    /// One connection at startup. A Redis that cannot be reached yet may come (the API starts, `/readyz` answers
    /// 503 meanwhile), but a server certificate that does not verify (`redis.tls`) or a login Redis refuses
    /// (`redis.url`) will not get better with retries: they stop startup, naming what to fix.
    static func refuseWhatWillNotHeal(_ endpoint: RedisEndpoint, _ options: RedisClient.Options) throws {
        do {
            _ = try RedisConnection(
                endpoint: endpoint, connectTimeout: options.connectTimeout, commandTimeout: options.commandTimeout)
        } catch let e as RedisError where e.kind == .certificate || e.kind == .authentication {
            throw e
        } catch {
            return
        }
    }

    /// The Salesforce-compatible resources on the same stores as the worker (types, inbox, job stream).
    func connect(configuration c: VolleyConfiguration, logger: Logger) -> ConnectService {
        let apps = c.apps
        return ConnectService(
            types: types, inbox: inbox, jobs: jobs, devices: api.devices,
            options: ConnectService.Options(
                apps: { org in apps.filter { $0.orgs.allows(org) }.map(\.name) }, check: .providers(apps)),
            logger: logger)
    }
}

extension APIRunner {
    /// Runs until SIGTERM/SIGINT (drains first: `/readyz` answers 503 for `api.drainSeconds`).
    public static func run(
        configuration c: VolleyConfiguration, logger: Logger,
        onListening: @escaping @Sendable (Int) async -> Void = { _ in }
    ) async throws {
        for warning in c.warnings { logger.warning("\(warning)") }
        let server = try APIRunner.server(configuration: c, logger: logger)
        logger.info("volley api listening on \(c.api.host):\(c.api.port)")
        try await server.run(
            onListening: onListening, services: operations(configuration: c, server: server, logger: logger))
    }
}

extension APIKeyStore {
    /// Key administration on the API-key records in Redis (`volley keys`), under the store prefix.
    public convenience init(client: RedisClient, prefix: String = "volley") {
        self.init(registry: RedisAPIKeyRegistry(client: client, prefix: prefix))
    }
}
