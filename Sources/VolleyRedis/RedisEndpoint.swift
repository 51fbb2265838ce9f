import Foundation

/// Where Redis lives and how to log in: parsed from `redis://[user:pass@]host:port/db`, `redis://:pass@host`,
/// or `unix:///path/to/sock[?db=N]` (also `unix://[user:pass@]/path`). hiredis 0.14 has no TLS, so `rediss://` is
/// refused.
public struct RedisEndpoint: Sendable, Hashable, CustomStringConvertible {
    public enum Address: Sendable, Hashable {
        case tcp(host: String, port: Int)
        case unix(path: String)
    }
    public var address: Address
    /// ACL user (Redis 6+); nil with a password means the legacy `AUTH password`.
    public var user: String?
    public var password: String?
    public var database: Int
    /// Seed primaries of a Redis Cluster (`redis.cluster`); empty for a single Redis. With seeds, a `RedisClient`
    /// routes every command by slot and `address` is the first seed.
    public var clusterSeeds: [RedisClusterNode] = []

    public init(address: Address, user: String? = nil, password: String? = nil, database: Int = 0) {
        self.address = address
        self.user = user
        self.password = password
        self.database = database
    }

    /// A Redis Cluster reached through `seeds` (at least one), logging in as `user`/`password` on every node.
    /// A cluster has only database 0.
    public static func cluster(seeds: [RedisClusterNode], user: String? = nil, password: String? = nil)
        -> RedisEndpoint
    {
        let first = seeds.first ?? RedisClusterNode(host: "127.0.0.1", port: 6379)
        var e = RedisEndpoint(address: .tcp(host: first.host, port: first.port), user: user, password: password)
        e.clusterSeeds = seeds
        return e
    }

    /// True for a Redis Cluster endpoint.
    public var isCluster: Bool { !clusterSeeds.isEmpty }

    public static func unix(_ path: String, database: Int = 0) -> RedisEndpoint {
        RedisEndpoint(address: .unix(path: path), database: database)
    }

    /// Parses a Redis URL. Throws `RedisError` with a message naming what is wrong.
    public init(url: String) throws {
        func bad(_ why: String) -> RedisError {
            RedisError(
                .invalidEndpoint,
                "redis url '\(RedisEndpoint.redactURL(url))': \(why); expected redis://[user:pass@]host:port/db or "
                    + "unix:///path/to/sock"
            )
        }
        guard let schemeEnd = url.range(of: "://") else { throw bad("no scheme") }
        let scheme = url[..<schemeEnd.lowerBound].lowercased()
        var rest = String(url[schemeEnd.upperBound...])
        var query: [String: String] = [:]
        if let q = rest.firstIndex(of: "?") {
            for pair in rest[rest.index(after: q)...].split(separator: "&") {
                let kv = pair.split(separator: "=", maxSplits: 1).map(String.init)
                query[kv[0]] = kv.count > 1 ? kv[1] : ""
            }
            rest = String(rest[..<q])
        }
        var user: String?
        var password: String?
        // userinfo: everything before the last '@' (passwords may contain '@' only percent-encoded; we accept the last
        // '@').
        if let at = rest.lastIndex(of: "@") {
            let info = String(rest[..<at])
            rest = String(rest[rest.index(after: at)...])
            if let colon = info.firstIndex(of: ":") {
                let u = String(info[..<colon])
                user = u.isEmpty ? nil : (u.removingPercentEncoding ?? u)
                let p = String(info[info.index(after: colon)...])
                password = p.removingPercentEncoding ?? p
            } else if !info.isEmpty {
                password = info.removingPercentEncoding ?? info // redis://secret@host (legacy form)
            }
        }
        var db = 0
        if let d = query["db"] {
            guard let n = Int(d), n >= 0 else { throw bad("db must be a non-negative integer") }
            db = n
        }
        switch scheme {
        case "unix":
            guard rest.hasPrefix("/"), rest.count > 1 else { throw bad("unix socket path must be absolute") }
            guard rest.utf8.count <= 107 else { throw bad("unix socket path longer than 107 bytes") }
            self.init(address: .unix(path: rest), user: user, password: password, database: db)
        case "redis":
            var hostPort = rest
            if let slash = rest.firstIndex(of: "/") {
                hostPort = String(rest[..<slash])
                let dbPart = rest[rest.index(after: slash)...]
                if !dbPart.isEmpty {
                    guard let n = Int(dbPart), n >= 0 else {
                        throw bad("database '\(dbPart)' is not a non-negative integer")
                    }
                    db = n
                }
            }
            var host = hostPort
            var port = 6379
            if hostPort.hasPrefix("["), let close = hostPort.firstIndex(of: "]") { // [::1]:6379
                host = String(hostPort[hostPort.index(after: hostPort.startIndex)..<close])
                let after = hostPort[hostPort.index(after: close)...]
                if after.hasPrefix(":") {
                    guard let p = Int(after.dropFirst()), (1...65535).contains(p) else {
                        throw bad("port must be 1–65535")
                    }
                    port = p
                }
            } else if let colon = hostPort.lastIndex(of: ":") {
                host = String(hostPort[..<colon])
                guard let p = Int(hostPort[hostPort.index(after: colon)...]), (1...65535).contains(p) else {
                    throw bad("port must be 1–65535")
                }
                port = p
            }
            if host.isEmpty { host = "127.0.0.1" }
            self.init(address: .tcp(host: host, port: port), user: user, password: password, database: db)
        case "rediss":
            throw bad("TLS (rediss://) is not supported by hiredis 0.14; use stunnel or a local socket")
        default:
            throw bad("unknown scheme '\(scheme)'")
        }
    }

    /// The URL without the password.
    public var description: String {
        let auth = user.map { "\($0):***@" } ?? (password != nil ? ":***@" : "")
        if isCluster { return "redis-cluster://\(auth)" + clusterSeeds.map(\.description).joined(separator: ",") }
        switch address {
        case .tcp(let host, let port): return "redis://\(auth)\(host):\(port)/\(database)"
        case .unix(let path): return "unix://\(auth)\(path)" + (database != 0 ? "?db=\(database)" : "")
        }
    }

    /// `url` with its user and password replaced by `***`, for messages and logs.
    public static func redactURL(_ url: String) -> String {
        guard let schemeEnd = url.range(of: "://"), let at = url.lastIndex(of: "@"), at > schemeEnd.upperBound else {
            return url
        }
        return String(url[..<schemeEnd.upperBound]) + "***" + String(url[at...])
    }
}
