import VolleyRedis

extension RedisSettings {
    /// The endpoint every Redis client of the process uses: `redis.url`, or a Redis Cluster seeded by
    /// `redis.cluster` with `redis.url`'s user and password.
    public func endpoint() throws -> RedisEndpoint {
        let single = try RedisEndpoint(url: url)
        if cluster.isEmpty { return single }
        let seeds = try cluster.enumerated().map { i, seed in
            guard let node = RedisClusterNode(address: seed) else {
                throw RedisError(.invalidEndpoint, "redis.cluster[\(i)]: '\(seed)' is not host:port")
            }
            return node
        }
        return .cluster(seeds: seeds, user: single.user, password: single.password)
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
