// swift-format-ignore-file: AlwaysUseLowerCamelCase

// The result types' properties are the `--json` keys (snake_case, a contract with users' scripts), named as written.
import Foundation
import Logging
import VolleyRedis

/// The Redis a benchmark run talks to: one server, or a Redis Cluster reached through its seeds.
public enum RedisTarget: Sendable, Hashable {
    case single(url: String)
    /// `host:port` seeds, as `redis.cluster` lists them.
    case cluster(seeds: [String])

    /// `redis.url`: the server itself, or (for a cluster, whose url carries only credentials) the first seed.
    public var url: String {
        switch self {
        case .single(let url): return url
        case .cluster(let seeds): return "redis://\(seeds.first ?? "127.0.0.1:6379")/0"
        }
    }

    /// The servers whose `INFO` describes the load: the single Redis, or every primary of the cluster's slot map in
    /// slot order (the "shards").
    public func nodes() throws -> [RedisEndpoint] {
        switch self {
        case .single(let url):
            return [try RedisEndpoint(url: url)]
        case .cluster(let seeds):
            var lastError: Error = BenchError("no Redis Cluster seed")
            for seed in seeds {
                guard let node = RedisClusterNode(address: seed) else { continue }
                do {
                    let c = try RedisConnection(
                        endpoint: RedisEndpoint(address: .tcp(host: node.host, port: node.port)), connectTimeout: 2)
                    let topology = try RedisClusterTopology(
                        clusterSlots: try c.command(["CLUSTER", "SLOTS"]), queried: node)
                    var primaries: [RedisClusterNode] = []
                    for r in topology.ranges.sorted(by: { $0.slots.lowerBound < $1.slots.lowerBound })
                    where !primaries.contains(r.primary) {
                        primaries.append(r.primary)
                    }
                    return primaries.map { RedisEndpoint(address: .tcp(host: $0.host, port: $0.port)) }
                } catch {
                    lastError = error
                }
            }
            throw BenchError("cannot read the cluster's slot map: \(lastError)")
        }
    }
}

/// Loopback TCP ports for benchmark servers: each free, and with `bus` also port + 10000 (a cluster node's bus).
func benchFreePorts(_ count: Int, bus: Bool) throws -> [Int] {
    func isFree(_ port: Int) -> Bool {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard fd >= 0 else { return false }
        defer { close(fd) }
        var addr = sockaddr_in()
        addr.sin_family = sa_family_t(AF_INET)
        addr.sin_port = in_port_t(UInt16(port).bigEndian)
        addr.sin_addr.s_addr = inet_addr("127.0.0.1")
        return withUnsafePointer(to: &addr) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                bind(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) == 0
            }
        }
    }
    var out: [Int] = []
    // Below Linux's ephemeral range (32768 and up), bus ports included: a port found free there can be taken by any
    // outgoing connection before the node binds it.
    var candidate = 10_000 + Int.random(in: 0..<12_000)
    var tries = 0
    while out.count < count {
        tries += 1
        if tries > 2_000 { throw BenchError("no free loopback port for a Redis server") }
        candidate = candidate >= 22_000 ? 10_000 : candidate + 1
        if isFree(candidate), !bus || isFree(candidate + 10_000) { out.append(candidate) }
    }
    return out
}

/// A Redis Cluster of `primaries` primaries and `replicas` replicas each, started for a benchmark run:
/// cluster-enabled redis-servers on free loopback ports (no persistence) in `directory`, joined with
/// `redis-cli --cluster create … --cluster-replicas N --cluster-yes`, ready once every node says `cluster_state:ok`.
/// `nodeTimeoutMs` is `cluster-node-timeout` (how long a primary may be unreachable before its replica is promoted).
public final class BenchRedisCluster: @unchecked Sendable {
    public private(set) var nodes: [BenchChild] = []
    public let ports: [Int]
    /// `host:port` of every node, for `redis.cluster`.
    public var seeds: [String] { ports.map { "127.0.0.1:\($0)" } }
    private let server: String
    private let directory: String
    private let nodeTimeoutMs: Int?

    public init(directory: String, primaries: Int, replicas: Int = 0, nodeTimeoutMs: Int? = nil) throws {
        guard let server = which("redis-server"), let cli = which("redis-cli") else {
            throw BenchError("redis-server and redis-cli are needed: apt-get install -y redis-server redis-tools")
        }
        self.server = server
        self.directory = directory
        self.nodeTimeoutMs = nodeTimeoutMs
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        ports = try benchFreePorts(primaries * (1 + replicas), bus: true)
        do {
            for port in ports { nodes.append(try startNode(port, log: "redis.log")) }
            for (port, child) in zip(ports, nodes) { try Self.waitForPing(port, child) }
            let create = try BenchChild(
                name: "redis-cli", executable: cli,
                arguments: ["--cluster", "create"] + seeds + ["--cluster-replicas", String(replicas), "--cluster-yes"],
                logFile: directory + "/create.log")
            guard create.wait(timeout: 60) == 0 else {
                throw BenchError("redis-cli --cluster create failed:\n\(create.logTail())")
            }
            try waitUntilReady(timeout: 30)
        } catch {
            stop()
            throw error
        }
    }

    private func startNode(_ port: Int, log: String) throws -> BenchChild {
        let dir = directory + "/\(port)"
        try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
        var arguments = [
            "--port", String(port), "--bind", "127.0.0.1", "--cluster-enabled", "yes",
            "--cluster-config-file", dir + "/nodes.conf", "--save", "", "--appendonly", "no",
            "--dir", dir, "--maxclients", "1000",
        ]
        if let nodeTimeoutMs { arguments += ["--cluster-node-timeout", String(nodeTimeoutMs)] }
        return try BenchChild(
            name: "redis-cluster-\(port)", executable: server, arguments: arguments, logFile: dir + "/" + log)
    }

    /// The node serving `key`'s slot as primary now (from any live node's `CLUSTER SLOTS`).
    public func primary(for key: String) throws -> Int {
        let slot = RedisClusterSlot(key: key).rawValue
        for port in ports {
            guard let reply = try? Self.command(port, ["CLUSTER", "SLOTS"]),
                let topology = try? RedisClusterTopology(
                    clusterSlots: reply, queried: RedisClusterNode(host: "127.0.0.1", port: port)),
                let range = topology.ranges.first(where: { $0.slots.contains(slot) })
            else { continue }
            return range.primary.port
        }
        throw BenchError("no node of the cluster says which primary serves \(key)")
    }

    /// SIGKILL to the node on `port` (no shutdown: what a crashed host looks like to the cluster).
    public func kill9(port: Int) {
        guard let i = ports.firstIndex(of: port), nodes[i].isRunning else { return }
        kill(nodes[i].pid, SIGKILL)
        nodes[i].process.waitUntilExit()
    }

    /// Starts the node on `port` again with its `nodes.conf`: it rejoins the cluster (as a replica once another
    /// node has taken its slots over).
    public func restart(port: Int) throws {
        guard let i = ports.firstIndex(of: port), !nodes[i].isRunning else { return }
        nodes[i] = try startNode(port, log: "redis.restarted.log")
        try Self.waitForPing(port, nodes[i])
    }

    /// Every node up says `cluster_state:ok` with all slots mapped.
    public func waitUntilHealthy(timeout: Double) throws { try waitUntilReady(timeout: timeout) }

    private static func command(_ port: Int, _ args: [String]) throws -> RedisReply {
        try RedisConnection(endpoint: RedisEndpoint(address: .tcp(host: "127.0.0.1", port: port)), connectTimeout: 1)
            .command(args)
    }

    private static func waitForPing(_ port: Int, _ child: BenchChild) throws {
        let until = benchNow() + 10
        while (try? command(port, ["PING"])) == nil {
            if !child.isRunning || benchNow() > until {
                throw BenchError("cluster node on port \(port) did not start:\n\(child.logTail())")
            }
            usleep(20_000)
        }
    }

    /// Every node says `cluster_state:ok` and serves a map covering all 16,384 slots, and every replica has finished
    /// its first sync (`master_link_status:up`): a replica that never synced refuses to take over from a failed
    /// primary ("Disconnected from master for longer than allowed"), and the first sync waits for
    /// `repl-diskless-sync-delay` (5 s), longer than a fast run takes to reach its fault.
    private func waitUntilReady(timeout: Double) throws {
        let until = benchNow() + timeout
        var why = "no answer"
        while benchNow() < until {
            why = ""
            for port in ports {
                let info = (try? Self.command(port, ["CLUSTER", "INFO"]).string) ?? ""
                if !info.contains("cluster_state:ok") {
                    why = "node \(port) not ok"
                    break
                }
                let slots = (try? Self.command(port, ["CLUSTER", "SLOTS"]).array) ?? []
                let covered = slots.reduce(0) { n, e in
                    guard let p = e.array, p.count >= 2, let s = p[0].integer, let t = p[1].integer else { return n }
                    return n + Int(t - s + 1)
                }
                if covered != RedisClusterSlot.count {
                    why = "node \(port) maps \(covered) slots"
                    break
                }
                let replication = (try? Self.command(port, ["INFO", "replication"]).string) ?? ""
                if replication.contains("role:slave"), !replication.contains("master_link_status:up") {
                    why = "replica \(port) has not finished its first sync"
                    break
                }
            }
            if why.isEmpty { return }
            usleep(50_000)
        }
        throw BenchError("Redis Cluster not ready after \(Int(timeout)) s: \(why)")
    }

    public func stop() {
        for n in nodes { n.stop(grace: 3) }
    }
}

/// `volley-bench e2e --redis-cluster N`: the same campaign (devices, workers, connections, mock) against one
/// redis-server and against an N-primary Redis Cluster, in one run, both over loopback TCP. Reports each rate, the
/// ratio cluster / single, and Redis CPU per device: of the single Redis, of each primary and their sum.
public struct E2EClusterBench {
    public struct Options: Sendable {
        public var e2e = E2EBench.Options()
        public var primaries = 3
        public init() {}
    }

    /// One target's figures.
    public struct Target: Sendable, Codable {
        public var target: String
        public var e2e_rate: Double
        public var duration_s: Double
        public var accepted: Int
        public var rejected: Int
        public var failed: Int
        public var redis_commands_per_s: Double
        public var redis_cpu_s: Double
        /// Redis CPU (all nodes) per device of the campaign, µs.
        public var redis_cpu_us_per_device: Double
        /// Per node (the single Redis, or each primary in slot order): CPU seconds and µs per device.
        public var redis_node_cpu_s: [Double]
        public var redis_node_cpu_us_per_device: [Double]
        public var worker_cpu_us: Double
        public var targeted_under_load_p99_ms: Double

        init(_ name: String, _ r: E2EBench.Result) {
            let devices = Double(max(1, r.accepted + r.rejected + r.failed))
            target = name
            e2e_rate = r.e2e_rate
            duration_s = r.duration_s
            accepted = r.accepted
            rejected = r.rejected
            failed = r.failed
            redis_commands_per_s = r.redis_commands_per_s
            redis_cpu_s = r.redis_cpu_s
            redis_cpu_us_per_device = r.redis_cpu_s / devices * 1e6
            redis_node_cpu_s = r.redis_node_cpu_s
            redis_node_cpu_us_per_device = r.redis_node_cpu_s.map { $0 / devices * 1e6 }
            worker_cpu_us = r.e2e_cpu_us
            targeted_under_load_p99_ms = r.targeted_under_load.p99_ms
        }
    }

    public struct Result: Sendable, Codable {
        public var devices: Int
        public var workers: Int
        public var connections: Int
        public var primaries: Int
        public var single: Target
        public var cluster: Target
        /// Cluster rate / single rate.
        public var cluster_vs_single: Double
        public var command: String
    }

    public let options: Options
    let logger: Logger

    public init(options: Options, logger: Logger = Logger(label: "volley.bench.e2e")) {
        self.options = options
        self.logger = logger
    }

    public func run(command: String) throws -> Result {
        var eo = options.e2e
        eo.redisURL = nil
        eo.redisTCP = true
        let bench = E2EBench(options: eo, logger: logger)
        let stage = try bench.makeStage()
        defer { stage.stop() }
        if eo.progress { stderrLine("single Redis (\(stage.redisURL)):\n") }
        let single = try bench.run(stage: stage, command: command)
        stage.stopWorkers()
        stage.stopRedis()

        let cluster = try BenchRedisCluster(directory: stage.directory + "/cluster", primaries: options.primaries)
        stage.cluster = cluster
        try bench.retarget(stage, to: .cluster(seeds: cluster.seeds))
        if eo.progress {
            stderrLine("Redis Cluster, \(options.primaries) primaries (\(cluster.seeds.joined(separator: " "))):\n")
        }
        let clustered = try bench.run(stage: stage, command: command)
        stage.stopWorkers()
        return Result(
            devices: eo.devices, workers: eo.workers, connections: eo.connections, primaries: options.primaries,
            single: Target("single", single), cluster: Target("cluster", clustered),
            cluster_vs_single: single.e2e_rate > 0 ? clustered.e2e_rate / single.e2e_rate : 0, command: command)
    }

    /// Human-readable table.
    public static func table(_ r: Result) -> String {
        func pad(_ s: String, _ width: Int) -> String { String(repeating: " ", count: max(0, width - s.count)) + s }
        func row(_ t: Target) -> String {
            let shards = t.redis_node_cpu_us_per_device.map { String(format: "%.2f", $0) }.joined(separator: " + ")
            return "  " + t.target.padding(toLength: 8, withPad: " ", startingAt: 0)
                + pad(grouped(t.e2e_rate) + "/s", 12) + pad(String(format: "%.2f s", t.duration_s), 12)
                + pad(grouped(t.redis_commands_per_s), 13) + pad(String(format: "%.2f", t.redis_cpu_us_per_device), 14)
                + pad(String(format: "%.2f", t.worker_cpu_us), 8) + "  " + (t.redis_node_cpu_s.count > 1 ? shards : "-")
        }
        var lines = [
            "\(grouped(Double(r.devices))) devices, \(r.workers) worker(s), \(r.connections) connection(s)/provider; "
                + "single Redis vs a \(r.primaries)-primary Redis Cluster (loopback TCP both)",
            "  target          rate   XADD→XACK  Redis cmd/s  Redis µs/dev  wkr µs  per shard µs/dev",
            row(r.single), row(r.cluster),
            String(format: "  cluster / single: %.2f×", r.cluster_vs_single),
        ]
        for t in [r.single, r.cluster] where t.failed > 0 || t.rejected > 0 {
            lines.append("  \(t.target): rejected \(t.rejected), failed \(t.failed)")
        }
        lines.append("command: \(r.command)")
        return lines.joined(separator: "\n")
    }
}
