import Foundation
import VolleyAPI
import VolleyCore
import VolleyRedis
import VolleyStore

/// The `api` section: the HTTP API process (`volley api`). Keys and defaults are documented in docs/api.md.
public struct APISettings: Sendable, Hashable {
    public var host: String = "127.0.0.1"
    public var port: Int = 8080
    public var maxBodyBytes: Int = 1 << 20
    public var drainSeconds: Double = 5
    /// `api.redisConnections`: blocking Redis connections, each on its own serial queue, for the calls off the hot
    /// path (devices, job status and events). Credentials and job submissions use each event loop's own connection.
    public var redisConnections: Int = 16
    /// `api.keyCacheSeconds`: how long a process uses an API key's record before reading it again (0: every request).
    public var keyCacheSeconds: Double = 5
    /// `api.headerTimeoutSeconds`, `api.idleTimeoutSeconds`: see `APIConfiguration`.
    public var headerTimeoutSeconds: Double = 10
    public var idleTimeoutSeconds: Double = 60
    /// `api.maxConnections`: nil takes the default from the file limit (`ConnectionLimits`).
    public var maxConnections: Int?
    /// `api.readinessTimeoutSeconds`: how long `/readyz` waits for Redis before answering 503.
    public var readinessTimeoutSeconds: Double = 2
    /// `api.tls.certFile` / `api.tls.keyFile`: both or neither.
    public var tlsCertFile: String?
    public var tlsKeyFile: String?
    /// `api.rateLimit.requestsPerSecond` / `api.rateLimit.burst`, per API key and per user-token subject.
    public var requestsPerSecond: Double = 100
    public var burst: Int = 200
    /// `api.userTokens.keys`: `[{id, secret | secretFile}]`, secrets base64 of at least 32 bytes; the first signs.
    public var userTokenKeys: [UserTokenKey] = []
    /// `api.userTokens.maxTTLSeconds` (at most 86400).
    public var userTokenMaxTTLSeconds: Int = 86_400
    /// `api.tasksOnEventLoops`: Swift Concurrency's jobs run on NIO's event loops (`APIServer.runTasksOnEventLoops`).
    public var tasksOnEventLoops = true
    public init() {}

    static let keys: Set<String> = [
        "host", "port", "maxBodyBytes", "drainSeconds", "redisConnections", "keyCacheSeconds",
        "headerTimeoutSeconds", "idleTimeoutSeconds", "maxConnections", "readinessTimeoutSeconds",
        "tasksOnEventLoops",
    ]
    /// Keys that were removed, with what to do instead: named at startup rather than reported as unknown.
    static let removed: [String: String] = [
        "redisPipelines":
            "removed: the API sends credential checks and job submissions on each event loop's own Redis "
            + "connection, always; delete this key"
    ]
    static let sections: Set<String> = ["tls", "rateLimit", "userTokens"]
    /// The scalar keys of the subsections, which take environment overrides as the section's own keys do
    /// (`api.rateLimit.burst` ← `VOLLEY_API_RATE_LIMIT_BURST`). `userTokens.keys` is a list: the file's only.
    static let subsectionKeys: Set<String> = [
        "tls.certFile", "tls.keyFile", "rateLimit.requestsPerSecond", "rateLimit.burst", "userTokens.maxTTLSeconds",
    ]

    static func read(_ s: [String: Any], _ r: inout ConfigReader) -> APISettings {
        let p = "api"
        var a = APISettings()
        r.rejectUnknownKeys(s, known: keys.union(sections).union(removed.keys), at: p)
        for (key, why) in removed.sorted(by: { $0.key < $1.key }) where s[key] != nil { r.problem("\(p).\(key)", why) }
        if let v = r.string(s, "host", at: p) { a.host = v }
        if let v = r.int(s, "port", at: p, range: 0...65535) { a.port = v }
        if let v = r.bool(s, "tasksOnEventLoops", at: p) { a.tasksOnEventLoops = v }
        if let v = r.int(s, "maxBodyBytes", at: p, range: 1024...(64 << 20)) { a.maxBodyBytes = v }
        if let v = r.double(s, "drainSeconds", at: p, min: 0) { a.drainSeconds = v }
        if let v = r.int(s, "redisConnections", at: p, range: 1...1024) { a.redisConnections = v }
        if let v = r.double(s, "keyCacheSeconds", at: p, min: 0) {
            if v > 300 { r.problem("api.keyCacheSeconds", "at most 300 (a revoked key works this long)") }
            a.keyCacheSeconds = v
        }
        if let v = r.double(s, "headerTimeoutSeconds", at: p, min: 0.1) { a.headerTimeoutSeconds = v }
        if let v = r.double(s, "idleTimeoutSeconds", at: p, min: 0.1) { a.idleTimeoutSeconds = v }
        if let v = r.int(s, "maxConnections", at: p, range: 1...1_000_000) { a.maxConnections = v }
        if let v = r.double(s, "readinessTimeoutSeconds", at: p, min: 0.1) {
            if v > 30 { r.problem("api.readinessTimeoutSeconds", "at most 30 (a probe waits this long)") }
            a.readinessTimeoutSeconds = v
        }
        if let t = r.section(s, "tls", at: p) {
            r.rejectUnknownKeys(t, known: ["certFile", "keyFile"], at: "api.tls")
            a.tlsCertFile = r.file(t, "certFile", at: "api.tls")
            a.tlsKeyFile = r.file(t, "keyFile", at: "api.tls")
            if (a.tlsCertFile == nil) != (a.tlsKeyFile == nil) {
                r.problem("api.tls", "set both certFile and keyFile, or neither")
            }
        }
        if let l = r.section(s, "rateLimit", at: p) {
            r.rejectUnknownKeys(l, known: ["requestsPerSecond", "burst"], at: "api.rateLimit")
            if let v = r.double(l, "requestsPerSecond", at: "api.rateLimit", min: 0) { a.requestsPerSecond = v }
            if let v = r.int(l, "burst", at: "api.rateLimit", range: 1...1_000_000) { a.burst = v }
        }
        if let u = r.section(s, "userTokens", at: p) {
            let up = "api.userTokens"
            r.rejectUnknownKeys(u, known: ["keys", "maxTTLSeconds"], at: up)
            if let v = r.int(u, "maxTTLSeconds", at: up, range: 60...86_400) { a.userTokenMaxTTLSeconds = v }
            if let raw = u["keys"], !(raw is NSNull) {
                guard let list = raw as? [Any] else {
                    r.problem("\(up).keys", "must be a list of {id, secret} or {id, secretFile}")
                    return a
                }
                var seen = Set<String>()
                for (i, item) in list.enumerated() {
                    let kp = "\(up).keys[\(i)]"
                    guard let k = item as? [String: Any] else {
                        r.problem(kp, "must be a mapping with id and secret (or secretFile)")
                        continue
                    }
                    r.rejectUnknownKeys(k, known: ["id", "secret", "secretFile"], at: kp)
                    guard let id = r.string(k, "id", at: kp), !id.isEmpty, !id.contains(".") else {
                        r.problem("\(kp).id", "required: a short key id without dots (it travels in each token)")
                        continue
                    }
                    if !seen.insert(id).inserted { r.problem("\(kp).id", "duplicate key id '\(id)'") }
                    var text = r.string(k, "secret", at: kp)
                    if let file = r.file(k, "secretFile", at: kp) {
                        if text != nil { r.problem(kp, "set secret or secretFile, not both") }
                        text = (try? String(contentsOfFile: file, encoding: .utf8))?
                            .trimmingCharacters(in: .whitespacesAndNewlines)
                    }
                    guard let text, let bytes = Data(base64Encoded: text), bytes.count >= 32 else {
                        r.problem(
                            "\(kp).secret", "required: base64 of at least 32 random bytes (openssl rand -base64 32)")
                        continue
                    }
                    a.userTokenKeys.append(UserTokenKey(id: id, secret: Array(bytes)))
                }
            }
        }
        return a
    }
}

extension VolleyConfiguration {
    /// What `volley api` needs, from the `api` and `apps` sections (the stores are wired by `APIRunner`).
    public func apiConfiguration() throws -> APIConfiguration {
        var c = APIConfiguration()
        c.host = api.host
        c.port = api.port
        c.maxBodyBytes = api.maxBodyBytes
        c.drainSeconds = api.drainSeconds
        c.keyCacheSeconds = api.keyCacheSeconds
        c.headerTimeoutSeconds = api.headerTimeoutSeconds
        c.idleTimeoutSeconds = api.idleTimeoutSeconds
        c.readinessTimeoutSeconds = api.readinessTimeoutSeconds
        do {
            c.maxConnections = try ConnectionLimits.cap(
                configured: api.maxConnections, fileLimit: ConnectionLimits.fileLimit())
        } catch {
            throw ConfigurationError(problems: [error.description], source: sourcePath ?? "configuration")
        }
        c.rateLimit = .init(requestsPerSecond: api.requestsPerSecond, burst: api.burst)
        c.userTokenKeys = api.userTokenKeys
        c.userTokenMaxTTLSeconds = api.userTokenMaxTTLSeconds
        c.apps = Dictionary(apps.map { ($0.name, $0.orgs) }, uniquingKeysWith: { a, _ in a })
        c.frequencyCaps = frequencyCaps
        for org in orgs { if let zone = org.timeZone { c.orgTimeZones[org.id] = zone } }
        c.syncHints = syncHints
        c.scheduleMaxAheadDays = schedule.maxAheadDays
        c.console = .init(enabled: console.enabled, sessionSeconds: console.sessionHours * 3600)
        return c
    }
}
