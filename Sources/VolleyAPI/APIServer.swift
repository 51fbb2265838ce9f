import Foundation
import Hummingbird
import HummingbirdCore
import Logging
import NIOCore
import NIOPosix
import ServiceLifecycle
import VolleyConnect
import VolleyCore

/// `volley api`: Volley's HTTP API in one process. It writes jobs and reads and writes the stores it is given; it
/// never talks to APNs or FCM itself, except through `testPush`.
public final class APIServer: Sendable {
    public let configuration: APIConfiguration
    let logger: Logger
    let stores: Stores
    let signer: UserTokenSigner
    let testPush: TestPushHandler?
    /// The Salesforce-compatible resources under `/services/data/v{NN.N}/`, when wired.
    let connect: ConnectService?
    let draining = NSLockedBox(false)
    /// What Redis refused for lack of permission (NOPERM): `/readyz` fails naming it until the process restarts
    /// with a fixed ACL.
    let refusals = StoreRefusals()
    /// The OpenAPI document served at `GET /openapi.yaml`.
    let openAPIDocument: String
    /// The workers' preparation of a notification, run before a job is accepted.
    let notificationCheck: NotificationCheck
    /// The API's clock (what `now` is for the handlers that take one).
    let clock: any WallClock
    /// The console's sessions and pages (`console.enabled`).
    let consoleSessions: ConsoleSessions
    let consolePages: ConsolePages

    /// Sends one notification to one device and says what the provider answered (`volley test-push`).
    public typealias TestPushHandler = @Sendable (TestPushInput) async -> TestPushAnswer

    public struct TestPushInput: Sendable {
        public var org: OrgID
        public var app: AppName
        public var platform: Platform
        public var token: DeviceToken
        public var notification: VolleyCore.Notification
        public var environment: APNSEnvironment?
        public var dryRun: Bool
    }

    public struct TestPushAnswer: Sendable {
        /// The answer as `volley test-push --json` prints it.
        public var json: Data
        /// True when the provider accepted it (or a dry run passed): the quota charge stands.
        public var delivered: Bool
        /// True when the provider said the token is dead (`remove-token`): it leaves the registry, as a job's
        /// would.
        public var tokenDead: Bool
        public init(json: Data, delivered: Bool, tokenDead: Bool = false) {
            self.json = json
            self.delivered = delivered
            self.tokenDead = tokenDead
        }
    }

    /// What the handlers read and write, each behind its VolleyCore protocol (Redis in `volley api`, in memory in
    /// tests); the composition root picks.
    public struct Stores: Sendable {
        public var credentials: any CredentialStore
        public var jobs: any JobSubmitter
        public var jobStatus: any JobStatusReader
        public var devices: any DeviceStore
        public var types: any NotificationTypeRepository
        public var quota: any QuotaLedger
        public var templates: any TemplateStore
        /// The directory users' attributes templates name (`/v1/users/{user}/attributes`).
        public var attributes: any UserAttributeStore
        /// Recurring schedules (`/v1/schedules`); nil: the routes answer 503.
        public var schedules: (any ScheduleStore)?
        /// The orgs' frequency-cap rules set through `/v1/frequency-caps` (nil: those routes answer 501).
        public var frequencyCaps: (any FrequencyCapRepository)?
        /// Sync hints (`/v1/sync-hints`); nil: those routes answer 503.
        public var syncHints: (any SyncHintStore)?
        /// The orgs' default zones set through `/v1/time-zone` (nil: those routes answer 501).
        public var timeZones: (any OrgTimeZoneRepository)?
        /// Engagement reported by apps (`/v1/interactions`; nil: the route answers 501).
        public var interactions: (any InteractionRecorder)?
        /// The orgs' segments (`/v1/segments`; nil: those routes answer 501).
        public var segments: (any SegmentStore)?
        /// An org's job list and a job's per-device outcomes as CSV (`GET /v1/jobs`, `GET /v1/jobs/{id}/outcomes`;
        /// nil: those routes answer 501).
        public var jobHistory: (any JobHistoryReader)?
        /// The users' delivery histories (`GET /v1/users/{user}/deliveries`; nil: the route answers 501).
        public var deliveries: (any DeliveryHistoryReader)?

        public init(
            credentials: any CredentialStore, jobs: any JobSubmitter, jobStatus: any JobStatusReader,
            devices: any DeviceStore, types: any NotificationTypeRepository, quota: any QuotaLedger,
            templates: any TemplateStore, attributes: any UserAttributeStore, schedules: (any ScheduleStore)? = nil,
            frequencyCaps: (any FrequencyCapRepository)? = nil
        ) {
            self.schedules = schedules
            self.frequencyCaps = frequencyCaps
            self.attributes = attributes
            self.credentials = credentials
            self.jobs = jobs
            self.jobStatus = jobStatus
            self.devices = devices
            self.types = types
            self.quota = quota
            self.templates = templates
        }
    }

    public init(
        configuration: APIConfiguration, stores: Stores, openAPIDocument: String, logger: Logger,
        testPush: TestPushHandler? = nil, connect: ConnectService? = nil, notificationCheck: NotificationCheck = .none,
        clock: any WallClock = SystemClock()
    ) {
        self.clock = clock
        self.connect = connect
        self.notificationCheck = notificationCheck
        self.configuration = configuration
        self.stores = stores
        self.logger = logger
        self.openAPIDocument = openAPIDocument
        self.testPush = testPush
        signer = UserTokenSigner(keys: configuration.userTokenKeys)
        consoleSessions = ConsoleSessions(
            userTokenKeys: configuration.userTokenKeys, lifetime: configuration.console.sessionSeconds)
        consolePages = ConsolePages()
        if configuration.console.enabled {
            for problem in consolePages.problems { logger.error("console: template \(problem)") }
            if !consoleSessions.shared {
                let why =
                    "sessions are signed with a key of this process's own and end when it restarts; set "
                    + "api.userTokens.keys to share them between API processes"
                logger.notice("console: \(why)")
            }
        }
    }

    /// Makes NIO's event loops Swift Concurrency's global executor for this process, so a request's handler runs on
    /// the event loop that read it and answers without a hop between thread pools. Call once, before serving; the
    /// stores keep any blocking work on serial queues of their own, never on this pool.
    ///
    /// `volley api` calls it unless `api.tasksOnEventLoops` is false. It changes how the whole process schedules
    /// tasks through a runtime hook (`swift_task_enqueueGlobal_hook`), for about a fifth of a job POST's CPU
    /// (docs/benchmarks.md). Remove it, and the setting, when a job POST under `api.tasksOnEventLoops: false` costs
    /// no more than 1.1× the hook's (`tools/api-ab` in turns): when Hummingbird and NIO run a request's async calls
    /// on its event loop without going back through the loop's queue (task executors throughout, SE-0417).
    @discardableResult
    public static func runTasksOnEventLoops() -> Bool {
        EventLoopGlobalExecutor.install()
    }

    /// The router with every route.
    public func router() -> Router<APIRequestContext> {
        let router = Router(context: APIRequestContext.self)
        let metrics = RouteMetrics()
        router.add(middleware: ObservingMiddleware(logger: logger, metrics: metrics, refusals: refusals))
        router.add(middleware: JSONContentTypeMiddleware())
        router.get("/livez") { _, _ in try JSONResponse.make(["status": "ok"]) }
        router.get("/readyz") { _, _ in try await self.readyz() }
        router.get("/openapi.yaml") { _, _ in
            Response(
                status: .ok, headers: [.contentType: "application/yaml"],
                body: .init(byteBuffer: ByteBuffer(string: self.openAPIDocument)))
        }
        let auth = AuthMiddleware(
            configuration: configuration, signer: signer, credentials: stores.credentials,
            records: APIKeyRecordCache(lifetimeSeconds: configuration.keyCacheSeconds), clock: clock)
        let v1 = router.group("/v1").add(middleware: auth)
        addV1Routes(v1)
        if let connect { addConnectRoutes(router, auth: auth, connect) }
        if configuration.console.enabled { addConsoleRoutes(router, auth: auth) }
        // Hummingbird names a request's route by the same path description, and a request no route takes "NotFound".
        metrics.prime(endpoints: Set(router.routes.map(\.path.description) + ["NotFound"]))
        return router
    }

    /// The application: HTTP/1.1 with keep-alive on `api.host`:`api.port`, over TLS when `api.tls` is set.
    ///
    /// A connection must send a whole request head within `api.headerTimeoutSeconds` and is closed after
    /// `api.idleTimeoutSeconds` without a request; beyond `api.maxConnections` open connections a new one takes the
    /// place of the longest-silent connection, or is answered 503 and closed when every connection is in use.
    /// Without a configured cap, the default is taken from the process's file limit.
    public func application(onListening: @escaping @Sendable (Int) async -> Void = { _ in }) -> some ApplicationProtocol
    {
        let cap =
            configuration.maxConnections
            ?? ((try? ConnectionLimits.cap(configured: nil, fileLimit: ConnectionLimits.fileLimit()))
                ?? ConnectionLimits.defaultMaximum)
        let connections = ConnectionCount(cap: cap)
        let headerTimeout = TimeAmount.fromSeconds(configuration.headerTimeoutSeconds)
        let http = HTTP1Channel.Configuration(
            additionalChannelHandlers: [
                RequestHeadTimeoutHandler(timeout: headerTimeout, connections: connections), LoopPassFlushHandler(),
            ],
            idleTimeout: .fromSeconds(configuration.idleTimeoutSeconds))
        let builder =
            configuration.tls?.serverBuilder(http: http, connections: connections)
            ?? HTTPServerBuilder { responder in
                CappedChildChannel(base: HTTP1Channel(responder: responder, configuration: http), count: connections)
            }
        return Application(
            router: router(),
            server: builder,
            configuration: .init(
                address: .hostname(configuration.host, port: configuration.port), serverName: nil,
                backlog: Self.backlog),
            onServerRunning: { channel in await onListening(channel.localAddress?.port ?? 0) },
            logger: logger)
    }

    /// The listener's accept queue: connections the kernel completes before the accept loop takes them (and sheds
    /// those over the cap).
    static let backlog = 1024

    /// Runs until SIGTERM/SIGINT. On the signal `/readyz` answers 503 for `api.drainSeconds` (load balancers stop
    /// sending), then the listener closes and requests in progress finish.
    /// `services` run beside the API (the operations endpoint and its health probe) and stop after it.
    public func run(
        onListening: @escaping @Sendable (Int) async -> Void = { _ in }, services: [any Service] = []
    ) async throws {
        let app = application(onListening: onListening)
        let drain = DrainService(server: self)
        let group = ServiceGroup(
            configuration: .init(
                services: services.map { .init(service: $0) } + [.init(service: app), .init(service: drain)],
                gracefulShutdownSignals: [.sigterm, .sigint], logger: logger))
        try await group.run()
    }

    /// Readiness as `/readyz` decides it: not draining, and a round trip to the credential store that runs a script.
    /// nil: ready; else what is wrong.
    public func readinessProblem() async -> String? {
        if isDraining { return "draining: this process is shutting down" }
        let seconds = configuration.readinessTimeoutSeconds
        let credentials = stores.credentials
        switch await Self.answer(within: seconds, { try await credentials.ping() }) {
        case nil:
            return "Redis has not answered within \(seconds) s (api.readinessTimeoutSeconds)"
        case .failure(let e as StorePermissionDenied)?:
            return "Redis refused \(e); the API's Redis user lacks this permission"
        case .failure(let error)?:
            return "Redis is not answering: \(error)"
        case .success?:
            break
        }
        if let refused = refusals.first {
            return "Redis refused \(refused); the API's Redis user lacks this permission"
        }
        return nil
    }

    /// `body`'s result, or nil when it has not finished within `seconds`. `body` keeps running after the deadline
    /// (a stalled Redis call ends when its connection gives up), but the caller no longer waits for it.
    static func answer<T: Sendable>(
        within seconds: Double, _ body: @escaping @Sendable () async throws -> T
    ) async -> Result<T, any Error>? {
        let waiter = FirstAnswer<Result<T, any Error>?>()
        return await withCheckedContinuation { continuation in
            waiter.wait(continuation)
            let work = Task {
                let result: Result<T, any Error>
                do { result = .success(try await body()) } catch { result = .failure(error) }
                waiter.resume(result)
            }
            Task {
                try? await Task.sleep(for: .milliseconds(Int((seconds * 1000).rounded())))
                if waiter.resume(nil) { work.cancel() }
            }
        }
    }

    /// True once SIGTERM/SIGINT began the drain.
    public var isDraining: Bool { draining.withLocked { $0 } }

    func readyz() async throws -> Response {
        if let problem = await readinessProblem() { return APIProblem(.serviceUnavailable, problem).response() }
        return try JSONResponse.make(["status": "ready"])
    }

    /// Marks the process as draining (`/readyz` → 503).
    public func beginDraining() { draining.withLocked { $0 = true } }
}

/// One continuation resumed by whichever answer comes first; later answers are dropped.
final class FirstAnswer<T: Sendable>: Sendable {
    private let state = NSLockedBox<(continuation: CheckedContinuation<T, Never>?, done: Bool)>((nil, false))

    func wait(_ continuation: CheckedContinuation<T, Never>) { state.withLocked { $0.continuation = continuation } }

    /// Resumes the waiter with `value` unless an answer came first; true when this one was taken.
    @discardableResult
    func resume(_ value: T) -> Bool {
        let continuation: CheckedContinuation<T, Never>? = state.withLocked { s in
            guard !s.done else { return nil }
            s.done = true
            defer { s.continuation = nil }
            return s.continuation
        }
        continuation?.resume(returning: value)
        return continuation != nil
    }
}

/// Shut down before the HTTP server (ServiceGroup stops services in reverse order): holds the listener open while
/// `/readyz` says 503, so a load balancer takes the process out before connections are refused.
struct DrainService: Service {
    let server: APIServer
    func run() async throws {
        try? await gracefulShutdown()
        server.beginDraining()
        let seconds = server.configuration.drainSeconds
        if seconds > 0 { try? await Task.sleep(for: .milliseconds(Int(seconds * 1000))) }
    }
}
