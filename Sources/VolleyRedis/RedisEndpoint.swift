import Foundation
import Synchronization
import VolleyHTTP2

/// Where Redis lives and how to log in: parsed from `redis://[user:pass@]host:port/db`, `redis://:pass@host`,
/// `rediss://…` (the same over TLS: `tls` is set, trusting the system store until the configuration says otherwise)
/// or `unix:///path/to/sock[?db=N]` (also `unix://[user:pass@]/path`).
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
    /// TLS on every connection (`rediss://`; on a cluster, to every node); nil for plain TCP or a unix socket.
    public var tls: RedisTLS?

    public init(
        address: Address, user: String? = nil, password: String? = nil, database: Int = 0, tls: RedisTLS? = nil
    ) {
        self.address = address
        self.user = user
        self.password = password
        self.database = database
        self.tls = tls
    }

    /// A Redis Cluster reached through `seeds` (at least one), logging in as `user`/`password` on every node, over
    /// TLS when `tls` is set. A cluster has only database 0.
    public static func cluster(
        seeds: [RedisClusterNode], user: String? = nil, password: String? = nil, tls: RedisTLS? = nil
    ) -> RedisEndpoint {
        let first = seeds.first ?? RedisClusterNode(host: "127.0.0.1", port: 6379)
        var e = RedisEndpoint(
            address: .tcp(host: first.host, port: first.port), user: user, password: password, tls: tls)
        e.clusterSeeds = seeds
        return e
    }

    /// The same login and TLS on another node (a cluster's primary).
    public func node(_ node: RedisClusterNode) -> RedisEndpoint {
        RedisEndpoint(address: .tcp(host: node.host, port: node.port), user: user, password: password, tls: tls)
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
                "redis url '\(RedisEndpoint.redactURL(url))': \(why); expected redis://[user:pass@]host:port/db, "
                    + "rediss://… (TLS) or unix:///path/to/sock"
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
        case "redis", "rediss":
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
            self.init(
                address: .tcp(host: host, port: port), user: user, password: password, database: db,
                tls: scheme == "rediss" ? RedisTLS() : nil)
        default:
            throw bad("unknown scheme '\(scheme)'")
        }
    }

    /// The URL without the password.
    public var description: String {
        let auth = user.map { "\($0):***@" } ?? (password != nil ? ":***@" : "")
        let s = tls == nil ? "" : "s"
        if isCluster {
            return "redis\(s)-cluster://\(auth)" + clusterSeeds.map(\.description).joined(separator: ",")
        }
        switch address {
        case .tcp(let host, let port): return "redis\(s)://\(auth)\(host):\(port)/\(database)"
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

/// TLS to Redis (`rediss://`): what the client trusts and shows (`redis.tls.caFile`, `certFile`, `keyFile`) and the
/// name the server's certificate must carry (`redis.tls.serverName`; by default the host connected to). Verification
/// is always on. The files are read once per process for each set of files, then shared by every connection.
public struct RedisTLS: Sendable, Hashable {
    public var files: TLSClientTrust.Files
    public var serverName: String?

    public init(files: TLSClientTrust.Files = .init(), serverName: String? = nil) {
        self.files = files
        self.serverName = serverName
    }

    /// The name verified in the server's certificate (and sent as SNI) on a connection to `endpoint`.
    func serverName(for endpoint: RedisEndpoint) -> String {
        if let serverName { return serverName }
        switch endpoint.address {
        case .tcp(let host, _): return host
        case .unix: return "localhost"
        }
    }

    /// The loaded trust; a file that cannot serve is a configuration error naming its `redis.tls` key.
    public func trust() throws(RedisError) -> TLSClientTrust {
        do {
            return try loadedTrust()
        } catch {
            throw RedisError(.certificate, "redis.tls.\(error.file): \(error.description)")
        }
    }

    /// The trust the files make, read once per process for each set of files.
    public func loadedTrust() throws(TLSClientTrust.Failure) -> TLSClientTrust {
        try Self.loaded.withLock { cache throws(TLSClientTrust.Failure) in
            if let t = cache[files] { return t }
            let t = try TLSClientTrust(files)
            cache[files] = t
            return t
        }
    }

    /// The trusts loaded so far, by their files.
    private static let loaded = Mutex<[TLSClientTrust.Files: TLSClientTrust]>([:])
}
