import Foundation
import VolleyAPNs
import VolleyCore
import VolleyFCM
import Yams

// PROVIDERS BRANCH, TEMPORARY: reads only the `apps` section of the YAML config so `volley test-push` works
// before the lead's `Configuration.swift` lands. Replace `ProviderApps.load(configFile:)` with a mapping from
// the full configuration; keep the key names (they are the contract).

/// One configured app's provider settings.
public struct ProviderApp: Sendable, Hashable {
    public var name: String
    public var apns: APNSAppConfiguration?
    public var fcm: FCMAppConfiguration?
    public init(name: String, apns: APNSAppConfiguration? = nil, fcm: FCMAppConfiguration? = nil) {
        self.name = name; self.apns = apns; self.fcm = fcm
    }
}

public struct ProviderConfigurationError: Error, Sendable, CustomStringConvertible {
    public let message: String
    public init(_ message: String) { self.message = message }
    public var description: String { message }
}

public enum ProviderApps {
    struct File: Decodable { var apps: [App]? }
    struct App: Decodable {
        var name: String
        var apns: APNS?
        var fcm: FCM?
    }
    struct APNS: Decodable {
        var keyFile: String?
        var keyId: String?
        var teamId: String?
        var topic: String
        var environment: String?
        var host: String?
        var port: Int?
        var caFile: String?
        var certFile: String?
        var certPassword: String?
        var connections: Int?
    }
    struct FCM: Decodable {
        var serviceAccountFile: String
        var endpoint: String?
        var caFile: String?
        var connections: Int?
    }

    /// Reads `apps[]` from a YAML file. Relative file paths are relative to the config file's directory.
    public static func load(configFile: String) throws -> [ProviderApp] {
        guard let text = try? String(contentsOfFile: configFile, encoding: .utf8) else {
            throw ProviderConfigurationError("cannot read config file \(configFile)")
        }
        let base = URL(fileURLWithPath: configFile).deletingLastPathComponent().path
        return try parse(yaml: text, baseDirectory: base)
    }

    public static func parse(yaml: String, baseDirectory: String) throws -> [ProviderApp] {
        let file: File
        do { file = try YAMLDecoder().decode(File.self, from: yaml) } catch {
            throw ProviderConfigurationError("config: the apps section is invalid: \(error)")
        }
        func path(_ p: String?) -> String? {
            guard let p, !p.isEmpty else { return nil }
            return p.hasPrefix("/") ? p : baseDirectory + "/" + p
        }
        return try (file.apps ?? []).map { a in
            var app = ProviderApp(name: a.name)
            if let x = a.apns {
                let env: APNSEnvironment
                switch x.environment ?? "production" {
                case "production": env = .production
                case "sandbox", "development": env = .sandbox
                case let other:
                    throw ProviderConfigurationError("app \(a.name): apns.environment \"\(other)\" is not production or sandbox")
                }
                let credentials: APNSAppConfiguration.Credentials
                if let cert = path(x.certFile) {
                    credentials = .certificate(certFile: cert, password: x.certPassword, keyFile: path(x.keyFile))
                } else if let key = path(x.keyFile), let keyID = x.keyId, let teamID = x.teamId {
                    credentials = .token(keyFile: key, keyID: keyID, teamID: teamID)
                } else {
                    throw ProviderConfigurationError(
                        "app \(a.name): apns needs keyFile + keyId + teamId (token auth) or certFile (+ certPassword) (certificate auth)")
                }
                if let port = x.port, !(1...65535).contains(port) {
                    throw ProviderConfigurationError("app \(a.name): apns.port \(port) is not a TCP port")
                }
                app.apns = APNSAppConfiguration(name: a.name, credentials: credentials, topic: x.topic, environment: env,
                                                host: x.host, port: x.port, caFile: path(x.caFile),
                                                connections: x.connections ?? 2)
            }
            if let f = a.fcm {
                app.fcm = FCMAppConfiguration(name: a.name, serviceAccountFile: path(f.serviceAccountFile) ?? f.serviceAccountFile,
                                              endpoint: f.endpoint, caFile: path(f.caFile), connections: f.connections ?? 4)
            }
            return app
        }
    }
}
