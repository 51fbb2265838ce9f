import Foundation

/// Writes a Volley YAML configuration for a local setup: one app whose APNs and FCM both point at a mock server
/// (`volley-mock` endpoints), Redis at `redisURL`. Used by `volley demo` and the pipeline tests.
public struct LocalConfiguration: Sendable {
    public var appName = "demo"
    public var mockHost: String
    public var mockPort: Int
    public var caFile: String
    public var apnsKeyFile: String
    public var apnsKeyID: String
    public var apnsTeamID: String
    public var apnsTopic: String
    public var serviceAccountFile: String
    public var redisURL: String
    /// `redis.tls:` keys (name → file or name) for a `rediss://` URL.
    public var redisTLS: [String: String] = [:]
    /// Extra `worker:` keys (name → YAML scalar).
    public var worker: [String: String] = [:]
    /// `events:` and `deliveries:` keys (none: their defaults).
    public var events: [String: String] = [:]
    public var deliveries: [String: String] = [:]
    /// `metrics:` keys. Local setups run several workers on one host: each takes a free port on loopback.
    public var metrics: [String: String] = ["host": "127.0.0.1", "port": "0", "apiPort": "0"]
    public var logLevel = "warning"
    /// Hourly push limits. Local setups default far above any demo or test campaign so quotas do not
    /// interfere; lower them to watch quotas at work.
    public var quotaIOS = 100_000_000
    public var quotaAndroid = 100_000_000
    /// `apps[].fcm.maxPerMinute`: the mock has no FCM quota, so local setups default far above any campaign too.
    public var fcmMaxPerMinute = 1_000_000_000

    public init(
        mockHost: String, mockPort: Int, caFile: String, apnsKeyFile: String, apnsKeyID: String, apnsTeamID: String,
        apnsTopic: String, serviceAccountFile: String, redisURL: String
    ) {
        self.mockHost = mockHost
        self.mockPort = mockPort
        self.caFile = caFile
        self.apnsKeyFile = apnsKeyFile
        self.apnsKeyID = apnsKeyID
        self.apnsTeamID = apnsTeamID
        self.apnsTopic = apnsTopic
        self.serviceAccountFile = serviceAccountFile
        self.redisURL = redisURL
    }

    /// Reads a `volley-mock --state-dir DIR` endpoints file (DIR/endpoints.json).
    public init(endpointsFile: String, redisURL: String) throws {
        let data = try Data(contentsOf: URL(fileURLWithPath: endpointsFile))
        guard let o = try JSONSerialization.jsonObject(with: data) as? [String: Any],
            let host = o["host"] as? String, let port = o["port"] as? Int, let ca = o["ca_file"] as? String,
            let apns = o["apns"] as? [String: Any], let fcm = o["fcm"] as? [String: Any],
            let p8 = apns["p8_file"] as? String, let keyID = apns["key_id"] as? String,
            let team = apns["team_id"] as? String, let topic = apns["topic"] as? String,
            let sa = fcm["service_account_file"] as? String
        else {
            throw JobSubmission.InputError("\(endpointsFile) is not a volley-mock endpoints file")
        }
        self.init(
            mockHost: host, mockPort: port, caFile: ca, apnsKeyFile: p8, apnsKeyID: keyID, apnsTeamID: team,
            apnsTopic: topic, serviceAccountFile: sa, redisURL: redisURL)
    }

    public var yaml: String {
        func q(_ s: String) -> String {
            "\"" + s.replacingOccurrences(of: "\\", with: "\\\\").replacingOccurrences(of: "\"", with: "\\\"") + "\""
        }
        var y = """
            apps:
              - name: \(appName)
                apns:
                  keyFile: \(q(apnsKeyFile))
                  keyId: \(q(apnsKeyID))
                  teamId: \(q(apnsTeamID))
                  topic: \(q(apnsTopic))
                  environment: production
                  host: \(q(mockHost))
                  port: \(mockPort)
                  caFile: \(q(caFile))
                fcm:
                  serviceAccountFile: \(q(serviceAccountFile))
                  endpoint: \(q("https://\(mockHost):\(mockPort)"))
                  caFile: \(q(caFile))
                  maxPerMinute: \(fcmMaxPerMinute)
            redis:
              url: \(q(redisURL))

            """
        if !redisTLS.isEmpty {
            y += "  tls:\n" + redisTLS.sorted { $0.key < $1.key }.map { "    \($0.key): \(q($0.value))\n" }.joined()
        }
        y += """
            log:
              level: \(logLevel)
            quotas:
              ios: \(quotaIOS)
              android: \(quotaAndroid)

            """
        if !worker.isEmpty {
            y += "worker:\n" + worker.sorted { $0.key < $1.key }.map { "  \($0.key): \($0.value)\n" }.joined()
        }
        for (name, section) in [("events", events), ("deliveries", deliveries)] where !section.isEmpty {
            y += "\(name):\n" + section.sorted { $0.key < $1.key }.map { "  \($0.key): \($0.value)\n" }.joined()
        }
        if !metrics.isEmpty {
            y += "metrics:\n" + metrics.sorted { $0.key < $1.key }.map { "  \($0.key): \($0.value)\n" }.joined()
        }
        return y
    }

    /// Writes the YAML to `path`.
    public func write(to path: String) throws {
        try yaml.write(toFile: path, atomically: true, encoding: .utf8)
    }
}
