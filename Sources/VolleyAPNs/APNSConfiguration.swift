import VolleyCore
import VolleyHTTP2

/// One app's APNs settings (YAML `apps[].apns`; the lead's loader maps the keys to this).
public struct APNSAppConfiguration: Sendable, Hashable {
    public enum Credentials: Sendable, Hashable {
        /// Token auth: `keyFile` (.p8), `keyId`, `teamId`.
        case token(keyFile: String, keyID: String, teamID: String)
        /// Certificate auth: `certFile` as PKCS#12 (`.p12`/`.pfx`, with `certPassword`) or PEM (with `keyFile`,
        /// or a PEM holding both certificate and key).
        case certificate(certFile: String, password: String?, keyFile: String?)
    }

    /// The app's name as jobs give it (`apps[].name`).
    public var name: String
    public var credentials: Credentials
    /// Bundle id (`topic`); push-type suffixes are added per notification.
    public var topic: String
    public var environment: APNSEnvironment
    public var host: String?
    public var port: Int?
    public var caFile: String?
    /// Connections per environment endpoint.
    public var connections: Int
    /// Our own cap on streams per connection (APNs advertises ~1000).
    public var maxConcurrentStreams: Int
    public var requestTimeoutSeconds: Double

    public init(
        name: String, credentials: Credentials, topic: String, environment: APNSEnvironment = .production,
        host: String? = nil, port: Int? = nil, caFile: String? = nil, connections: Int = 2,
        maxConcurrentStreams: Int = 1000, requestTimeoutSeconds: Double = 30
    ) {
        self.name = name
        self.credentials = credentials
        self.topic = topic
        self.environment = environment
        self.host = host
        self.port = port
        self.caFile = caFile
        self.connections = connections
        self.maxConcurrentStreams = maxConcurrentStreams
        self.requestTimeoutSeconds = requestTimeoutSeconds
    }

    /// Apple's hosts: production api.push.apple.com, sandbox api.sandbox.push.apple.com (port 443 or 2197).
    public static func defaultHost(_ environment: APNSEnvironment) -> String {
        switch environment {
        case .production: "api.push.apple.com"
        case .sandbox: "api.sandbox.push.apple.com"
        }
    }

    /// The TLS client certificate for certificate auth, nil for token auth.
    public var clientCertificate: TLSClientCertificate? {
        guard case .certificate(let certFile, let password, let keyFile) = credentials else { return nil }
        let lower = certFile.lowercased()
        if lower.hasSuffix(".p12") || lower.hasSuffix(".pfx") {
            return .pkcs12(file: certFile, password: password ?? "")
        }
        return .pem(certificateFile: certFile, privateKeyFile: keyFile ?? certFile, passphrase: password)
    }

    /// How the pool reaches the endpoint for `environment` (a configured host overrides both environments).
    public func clientConfiguration(for environment: APNSEnvironment) -> HTTP2ClientConfiguration {
        HTTP2ClientConfiguration(
            host: host ?? Self.defaultHost(environment), port: port ?? 443, caFile: caFile,
            clientCertificate: clientCertificate, connections: max(1, connections),
            maxConcurrentStreamsCap: maxConcurrentStreams,
            requestTimeoutSeconds: requestTimeoutSeconds)
    }
}

/// `:authority` for a host and port (port omitted when 443).
func authority(host: String, port: Int) -> String {
    let h = host.contains(":") ? "[\(host)]" : host
    return port == 443 ? h : "\(h):\(port)"
}
