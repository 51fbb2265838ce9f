import ArgumentParser
import Dispatch
import Foundation
import Logging
import VolleyMock

/// `volley-mock`: the mock APNs + FCM server on one TLS port (see VolleyMock's `MockConfiguration` for the schema).
struct VolleyMockCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "volley-mock",
        abstract: "Mock APNs + FCM HTTP/2 server for tests and benchmarks.",
        discussion: """
            Creates (or reuses) a CA, server/client certificates, an APNs .p8 key and an FCM service account in \
            --state-dir, listens, then writes STATE_DIR/endpoints.json and prints one line \
            "volley-mock listening on HOST:PORT". Runtime control: GET /_mock/stats, POST /_mock/config, \
            POST /_mock/reset-stats, GET /_mock/config.
            """)

    @Option(help: "Port to listen on (0 = ephemeral).") var port: Int = 0
    @Option(help: "Address to bind.") var host: String = "127.0.0.1"
    @Option(name: .customLong("state-dir"), help: "Directory for keys, certificates and endpoints.json.") var stateDir:
        String
    @Option(help: "Fault-injection JSON file (schema: MockConfiguration).") var config: String?
    @Flag(name: .customLong("require-client-cert"), help: "Require TLS client certificates (APNs certificate auth).")
    var requireClientCert = false
    @Flag(name: .customLong("no-duplicate-tracking"), help: "Do not track duplicate deliveries (benchmarks).")
    var noDuplicateTracking = false
    @Option(help: "Shared serial queues for connections (default: active cores).") var queues: Int?
    @Option(
        name: .customLong("accept-journal"),
        help: ArgumentHelp(
            "Append one line per accepted send (provider, token, apns-id) to FILE as it is accepted; kept across "
                + "restarts and kill -9 (fault runs count pushes per device from it)."))
    var acceptJournal: String?
    @Flag(
        name: .customLong("print-apns-jwt"),
        help: "Print a fresh APNs provider token for the state dir's key and exit (for h2load).")
    var printAPNsJWT = false
    @Option(name: .customLong("log-level"), help: "trace|debug|info|notice|warning|error|critical") var logLevel:
        String = "warning"

    func run() throws {
        let level = Logger.Level(rawValue: logLevel) ?? .warning
        LoggingSystem.bootstrap { label in
            var h = StreamLogHandler.standardError(label: label)
            h.logLevel = level
            return h
        }
        if printAPNsJWT {
            let credentials = try MockCredentials.loadOrCreate(stateDirectory: stateDir)
            print(try MockTokenMinter.apnsProviderToken(credentials: credentials))
            return
        }
        var configuration = MockConfiguration()
        if let path = config {
            guard let data = FileManager.default.contents(atPath: path) else {
                throw ValidationError("cannot read --config \(path)")
            }
            do { try configuration.merge(json: String(decoding: data, as: UTF8.self)) } catch {
                throw ValidationError("--config \(path): \(error)")
            }
        }
        let options = MockServerOptions(
            stateDirectory: stateDir, host: host, port: port, configuration: configuration,
            requireClientCertificate: requireClientCert,
            duplicateTracking: !noDuplicateTracking, queues: queues, acceptJournal: acceptJournal)
        let server = try MockServer(options: options, logger: Logger(label: "volley.mock"))
        let bound = try server.start()
        let shownHost = host.contains(":") ? "[\(host)]" : host
        FileHandle.standardOutput.write(Data("volley-mock listening on \(shownHost):\(bound)\n".utf8))
        waitForTermination()
        server.stop()
    }
}

/// Blocks until SIGTERM or SIGINT.
func waitForTermination() {
    signal(SIGTERM, SIG_IGN)
    signal(SIGINT, SIG_IGN)
    let done = DispatchSemaphore(value: 0)
    let queue = DispatchQueue(label: "volley.mock.signals")
    var sources: [DispatchSourceSignal] = []
    for sig in [SIGTERM, SIGINT] {
        let s = DispatchSource.makeSignalSource(signal: sig, queue: queue)
        s.setEventHandler { @Sendable in done.signal() }
        s.resume()
        sources.append(s)
    }
    done.wait()
    withExtendedLifetime(sources) {}
}

VolleyMockCommand.main()
