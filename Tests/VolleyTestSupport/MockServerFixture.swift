import Foundation
import Logging
import VolleyMock

/// Starts the mock APNs + FCM server in-process on an ephemeral port with a fresh temporary state directory.
///
/// ```swift
/// let mock = try MockServerFixture()
/// defer { mock.stop() }          // explicit: ARC may end the fixture's life right after its last use
/// try mock.configure(#"{"apns": {"unregisteredPrefixes": ["dead"]}}"#)
/// … connect to mock.host:mock.port trusting mock.caFile …
/// #expect(mock.stats().acceptedAPNs == 10)
/// ```
public final class MockServerFixture: @unchecked Sendable {
    public let server: MockServer
    public let endpoints: MockEndpoints
    private let ownsStateDirectory: Bool
    private var stopped = false

    /// - Parameters:
    ///   - configuration: JSON configuration applied before the server starts (schema: `MockConfiguration`).
    ///   - stateDirectory: reuse a directory (kept afterwards); nil creates a temporary one (removed by `stop()`).
    public init(
        configuration: String? = nil, requireClientCertificate: Bool = false, stateDirectory: String? = nil,
        duplicateTracking: Bool = true, logger: Logger = Logger(label: "volley.mock.test")
    ) throws {
        var config = MockConfiguration()
        if let json = configuration { try config.merge(json: json) }
        let dir: String
        if let stateDirectory {
            dir = stateDirectory
            ownsStateDirectory = false
        } else {
            dir = NSTemporaryDirectory() + "volley-mock-" + UUID().uuidString.prefix(8).lowercased()
            ownsStateDirectory = true
        }
        let options = MockServerOptions(
            stateDirectory: dir, configuration: config,
            requireClientCertificate: requireClientCertificate,
            duplicateTracking: duplicateTracking)
        server = try MockServer(options: options, logger: logger)
        try server.start()
        endpoints = server.endpoints
    }

    public var host: String { endpoints.host }
    public var port: Int { endpoints.port }
    public var caFile: String { endpoints.caFile }
    public var stateDirectory: String { endpoints.stateDirectory }
    public var apnsKeyFile: String { endpoints.apnsKeyFile }
    public var apnsKeyID: String { endpoints.apnsKeyID }
    public var apnsTeamID: String { endpoints.apnsTeamID }
    public var apnsTopic: String { endpoints.apnsTopic }
    public var serviceAccountFile: String { endpoints.serviceAccountFile }
    public var fcmProjectID: String { endpoints.fcmProjectID }
    public var tokenURI: String { endpoints.tokenURI }
    public var clientCertificateFile: String { endpoints.clientCertificateFile }
    public var clientKeyFile: String { endpoints.clientKeyFile }
    public var clientP12File: String? { endpoints.clientP12File }
    public var clientP12Password: String { endpoints.clientP12Password }

    /// Merges a runtime configuration document (same JSON as `POST /_mock/config`).
    public func configure(_ json: String) throws { try server.configure(json: json) }
    public func stats() -> MockStatsSnapshot { server.stats() }
    public func resetStats() { server.resetStats() }
    public func capturedPushes() -> [MockCapturedPush] { server.capturedPushes() }

    public func stop() {
        guard !stopped else { return }
        stopped = true
        server.stop()
        if ownsStateDirectory { try? FileManager.default.removeItem(atPath: endpoints.stateDirectory) }
    }

    deinit { stop() }
}
