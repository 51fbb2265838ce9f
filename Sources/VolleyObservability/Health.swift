import Foundation

/// One named check of `/livez` or `/readyz`.
public struct HealthCheck: Sendable, Hashable, Codable {
    public var name: String
    public var ok: Bool
    /// What was found, for the operator reading the body (`"3 of 3 lanes running"`, the Redis error).
    public var detail: String
    public init(_ name: String, ok: Bool, detail: String) {
        self.name = name
        self.ok = ok
        self.detail = detail
    }
}

/// A probe's answer: every check, and whether all passed. Body:
/// `{"status":"ok"|"fail","checks":[{"name":…,"ok":…,"detail":…}]}`.
public struct HealthReport: Sendable, Hashable {
    public var checks: [HealthCheck]
    public init(_ checks: [HealthCheck]) { self.checks = checks }
    public var ok: Bool { checks.allSatisfy(\.ok) }

    public func json() -> String {
        struct Body: Encodable {
            let status: String
            let checks: [HealthCheck]
        }
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys]
        let data = (try? encoder.encode(Body(status: ok ? "ok" : "fail", checks: checks))) ?? Data()
        return String(decoding: data, as: UTF8.self)
    }
}

/// Where the operations endpoint gets its answers. Both calls must return at once (no I/O): a process computes
/// readiness in the background and hands over its latest result.
public protocol HealthSource: Sendable {
    /// Are the process's loops alive? Failing this restarts the container, so it never depends on Redis.
    func liveness() -> HealthReport
    /// Should traffic (jobs, API calls) come here? Depends on Redis, the consumer group, credentials, draining.
    func readiness() -> HealthReport
}
