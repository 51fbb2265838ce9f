import Crypto
import Dispatch
import Foundation
import Logging
import VolleyHTTP2
import VolleyHTTP2Server

/// How to start the mock.
public struct MockServerOptions: Sendable {
    public var stateDirectory: String
    public var host: String
    /// 0 = ephemeral.
    public var port: Int
    public var configuration: MockConfiguration
    /// APNs certificate auth: the server demands a client certificate signed by the state dir's client CA.
    /// A start-time option because the TLS context is built once.
    public var requireClientCertificate: Bool
    /// false (`--no-duplicate-tracking`) switches the duplicate-delivery set off for benchmarks.
    public var duplicateTracking: Bool
    /// Shared serial queues connection queues target (nil: active cores).
    public var queues: Int?
    /// A file every accepted send is appended to as it is accepted (`MockAcceptJournal`); nil: none.
    public var acceptJournal: String?

    public init(
        stateDirectory: String, host: String = "127.0.0.1", port: Int = 0,
        configuration: MockConfiguration = MockConfiguration(), requireClientCertificate: Bool = false,
        duplicateTracking: Bool = true, queues: Int? = nil, acceptJournal: String? = nil
    ) {
        self.acceptJournal = acceptJournal
        self.stateDirectory = stateDirectory
        self.host = host
        self.port = port
        self.configuration = configuration
        self.requireClientCertificate = requireClientCertificate
        self.duplicateTracking = duplicateTracking
        self.queues = queues
    }
}

/// What a client needs to reach the mock (the content of `endpoints.json`, typed).
public struct MockEndpoints: Sendable {
    public var host: String
    public var port: Int
    public var stateDirectory: String
    public var caFile: String
    public var apnsKeyFile: String
    public var apnsKeyID: String
    public var apnsTeamID: String
    public var apnsTopic: String
    public var serviceAccountFile: String
    public var fcmProjectID: String
    public var fcmClientEmail: String
    public var tokenURI: String
    public var clientCertificateFile: String
    public var clientKeyFile: String
    public var clientP12File: String?
    public var clientP12Password: String
    public var clientCAFile: String
    public var statsURL: String
    public var endpointsFile: String
}

/// The mock APNs + FCM HTTP/2 server on one TLS port. See `MockConfiguration` for fault injection and
/// `MockEngine` for the request rules.
public final class MockServer: HTTP2ServerHandler, @unchecked Sendable {
    public let options: MockServerOptions
    public let engine: MockEngine
    public var credentials: MockCredentials { engine.credentials }
    private let logger: Logger
    private var server: HTTP2Server?
    private var boundPort = 0
    private let serverMaxStreams: UInt32

    /// Creates (or reuses) the state directory's credentials. Does not listen yet.
    public init(options: MockServerOptions, logger: Logger = Logger(label: "volley.mock")) throws {
        self.options = options
        self.logger = logger
        let credentials = try MockCredentials.loadOrCreate(stateDirectory: options.stateDirectory)
        self.engine = MockEngine(
            credentials: credentials, host: options.host, configuration: options.configuration,
            duplicateTracking: options.duplicateTracking,
            acceptJournal: try options.acceptJournal.map { try MockAcceptJournal(path: $0) })
        self.serverMaxStreams =
            options.configuration.oneStreamUntilAuthenticated ? 1 : options.configuration.maxConcurrentStreams
    }

    /// Listens, writes `service-account.json` and `endpoints.json`, and returns the bound port.
    @discardableResult
    public func start() throws -> Int {
        var config = HTTP2ServerConfiguration(
            certificateChainFile: credentials.serverCertificateFile, privateKeyFile: credentials.serverKeyFile,
            host: options.host, port: options.port,
            clientCAFile: options.requireClientCertificate ? credentials.clientCAFile : nil,
            maxConcurrentStreams: serverMaxStreams)
        if let q = options.queues { config.queues = max(1, q) }
        config.maxRequestBodyBytes = 1 << 20
        let server = HTTP2Server(configuration: config, handler: self, logger: logger)
        let port: Int
        do { port = try server.start() } catch {
            throw MockSetupError("volley-mock cannot listen on \(options.host):\(options.port): \(error)")
        }
        self.server = server
        self.boundPort = port
        engine.port.withLock { $0 = port }
        try credentials.writeServiceAccount(host: options.host, port: port)
        try credentials.writeEndpoints(
            host: options.host, port: port, requireClientCertificate: options.requireClientCertificate)
        logger.info("volley-mock listening", metadata: ["host": "\(options.host)", "port": "\(port)"])
        return port
    }

    public func stop() {
        server?.stop()
        server = nil
    }

    public var port: Int { boundPort }

    public var endpoints: MockEndpoints {
        let c = credentials
        let h = options.host.contains(":") ? "[\(options.host)]" : options.host
        return MockEndpoints(
            host: options.host, port: boundPort, stateDirectory: c.stateDirectory, caFile: c.caFile,
            apnsKeyFile: c.apnsKeyFile, apnsKeyID: c.apnsKeyID, apnsTeamID: c.apnsTeamID, apnsTopic: c.apnsTopic,
            serviceAccountFile: c.serviceAccountFile, fcmProjectID: c.fcmProjectID, fcmClientEmail: c.fcmClientEmail,
            tokenURI: c.tokenURI(host: options.host, port: boundPort),
            clientCertificateFile: c.clientCertificateFile, clientKeyFile: c.clientKeyFile,
            clientP12File: c.clientP12File, clientP12Password: c.clientP12Password, clientCAFile: c.clientCAFile,
            statsURL: "https://\(h):\(boundPort)/_mock/stats", endpointsFile: c.endpointsFile)
    }

    // MARK: runtime control (in-process API)

    public func stats() -> MockStatsSnapshot { engine.stats() }
    public func resetStats() { engine.resetStats() }
    /// The accepted pushes the mock kept (`capturePushes` in its configuration), oldest first.
    public func capturedPushes() -> [MockCapturedPush] { engine.capturedPushes() }
    /// See `MockEngine.trustAPNsKey(keyID:publicKey:)`.
    public func trustAPNsKey(keyID: String, publicKey: P256.Signing.PublicKey) {
        engine.trustAPNsKey(keyID: keyID, publicKey: publicKey)
    }
    /// See `MockEngine.revokeAccessTokens()`.
    public func revokeAccessTokens() { engine.revokeAccessTokens() }
    public var configuration: MockConfiguration { engine.configuration }
    /// Merges a configuration document (same JSON as `--config` / `POST /_mock/config`).
    public func configure(json: String) throws { try engine.applyConfiguration(json: json) }
    public func setConfiguration(_ configuration: MockConfiguration) { engine.setConfiguration(configuration) }

    // MARK: HTTP2ServerHandler

    public func connectionOpened(_ connection: HTTP2ServerConnection) {
        let (state, set) = engine.connectionOpened(
            id: connection.id,
            clientCertificate: connection.clientCertificateSubject != nil,
            serverMaxStreams: serverMaxStreams)
        connection.userState = state
        if let n = set { connection.setMaxConcurrentStreams(n) }
    }

    public func handle(_ request: HTTP2ServerRequest, on connection: HTTP2ServerConnection, respond: HTTP2Responder) {
        guard let stateObject = connection.userState, let state = stateObject as? MockConnectionState else {
            respond(HTTP2Response(status: 500, body: Array("{\"reason\":\"InternalServerError\"}".utf8)))
            return
        }
        let decision = engine.process(request, state: state)
        // Sample the transport's stream statistics now and then (it takes the connection's stats lock).
        if state.streams & 63 == 1 || state.streams < 64 {
            let s = connection.statistics
            state.counters.withLock { c in
                if s.peakConcurrentStreams > c.peakConcurrentStreams {
                    c.peakConcurrentStreams = s.peakConcurrentStreams
                }
                c.refusedStreams = s.refusedStreams
            }
        }
        if let n = decision.setMaxConcurrentStreams { connection.setMaxConcurrentStreams(n) }
        if decision.resetTCP {
            connection.resetTCP()
            return
        }
        if let response = decision.response {
            // Injected latency: the connection's batched delay queue (one timer per connection, one flush per batch).
            respond(response, after: decision.delaySeconds)
        }
        if let g = decision.goAway {
            connection.sendGoAway(lastStreamID: g.lastStreamID, errorCode: 0, debugData: g.debugData)
        }
    }

    public func connectionClosed(_ connection: HTTP2ServerConnection) {
        guard let state = connection.userState as? MockConnectionState else { return }
        let s = connection.statistics
        engine.connectionClosed(state, peakStreams: s.peakConcurrentStreams, refusedStreams: s.refusedStreams)
        connection.userState = nil
    }
}
