import VolleyRedis

extension RedisSettings {
    /// The endpoint every Redis client of the process uses: `redis.url`, or a Redis Cluster seeded by
    /// `redis.cluster` with `redis.url`'s user and password.
    public func endpoint() throws -> RedisEndpoint {
        var single = try RedisEndpoint(url: url)
        single.tls = tls?.redisTLS
        if cluster.isEmpty { return single }
        let seeds = try cluster.enumerated().map { i, seed in
            guard let node = RedisClusterNode(address: seed) else {
                throw RedisError(.invalidEndpoint, "redis.cluster[\(i)]: '\(seed)' is not host:port")
            }
            return node
        }
        return .cluster(seeds: seeds, user: single.user, password: single.password, tls: single.tls)
    }

    /// `redis.tls`: the files are checked to be readable and loaded once here, so a file that is not a CA, a
    /// certificate or its key stops startup naming the key. Only meaningful with a `rediss://` URL: without one the
    /// keys would do nothing, so they are refused.
    static func readTLS(_ t: [String: Any], into redis: inout RedisSettings, _ r: inout ConfigReader) {
        let p = "redis.tls"
        r.rejectUnknownKeys(t, known: ["caFile", "serverName", "certFile", "keyFile"], at: p)
        redis.tlsCAFile = r.file(t, "caFile", at: p)
        redis.tlsCertFile = r.file(t, "certFile", at: p)
        redis.tlsKeyFile = r.file(t, "keyFile", at: p)
        if let name = r.string(t, "serverName", at: p) {
            if name.isEmpty || name.contains(where: { $0.isWhitespace || $0 == "/" }) {
                r.problem("\(p).serverName", "must be a host name or IP address, got '\(name)'")
            } else {
                redis.tlsServerName = name
            }
        }
        guard !t.isEmpty else { return }
        guard let settings = redis.tls else {
            r.problem(p, "is set but redis.url is not rediss://: use rediss:// for TLS, or leave redis.tls out")
            return
        }
        do {
            _ = try settings.redisTLS.loadedTrust()
        } catch {
            r.problem("\(p).\(error.file)", error.description)
        }
    }

    /// `redis.cluster`: a list of `host:port` strings, each checked; problems name the entry.
    static func readSeeds(_ value: Any, _ r: inout ConfigReader) -> [String] {
        guard let list = value as? [Any] else {
            r.problem("redis.cluster", "must be a list of host:port seeds")
            return []
        }
        var out: [String] = []
        for (i, item) in list.enumerated() {
            let text = (item as? String) ?? (item as? Int).map(String.init) ?? ""
            if RedisClusterNode(address: text) == nil {
                r.problem("redis.cluster[\(i)]", "must be host:port, got '\(item)'")
            } else {
                out.append(text)
            }
        }
        if list.isEmpty { r.problem("redis.cluster", "must name at least one seed, or be left out") }
        return out
    }
}

extension RedisTLSSettings {
    /// What every connection of a `rediss://` URL verifies and shows.
    var redisTLS: RedisTLS {
        RedisTLS(files: .init(caFile: caFile, certFile: certFile, keyFile: keyFile), serverName: serverName)
    }
}
