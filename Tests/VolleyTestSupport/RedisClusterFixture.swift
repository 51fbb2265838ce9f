import Foundation
import VolleyRedis

/// A real local Redis Cluster: `primaries` primaries and as many replicas (`redis-server --cluster-enabled yes` on
/// free loopback ports in a fresh temp dir, joined with `redis-cli --cluster create … --cluster-replicas 1`), ready
/// once every node reports `cluster_state:ok` and the same slot map. Stop it with `stop()` from a `defer` (SIGKILL,
/// as for `RedisServerFixture`). With `tls: true` every node serves TLS only (clients, the cluster bus and
/// replication), with certificates of a test CA (`tls`).
public final class RedisClusterFixture: @unchecked Sendable {
    public let directory: URL
    public let ports: [Int]
    private var processes: [Int: Process] = [:]
    private let lock = NSLock()

    /// All nodes, primaries first as created (replicas are assigned by `redis-cli`).
    public var nodes: [RedisClusterNode] { ports.map { RedisClusterNode(host: "127.0.0.1", port: $0) } }
    /// A cluster endpoint seeded with every node (over TLS, trusting the test CA, when started with `tls: true`).
    public var endpoint: RedisEndpoint { .cluster(seeds: nodes, tls: redisTLS) }
    /// The test CA and certificates when started with `tls: true`.
    public let tls: RedisTestTLS?
    /// The clients' TLS settings: the test CA, the server name its certificates carry.
    public var redisTLS: RedisTLS? {
        tls.map { RedisTLS(files: .init(caFile: $0.caFile), serverName: "localhost") }
    }
    /// The `redis.cluster` seed list.
    public var seedList: [String] { nodes.map(\.description) }

    public init(primaries: Int = 3, nodeTimeoutMillis: Int = 1_000, tls: Bool = false) throws {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent(
            "volley-cluster-\(UUID().uuidString.prefix(8))")
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        directory = dir
        self.tls = tls ? try RedisTestTLS(directory: dir.appendingPathComponent("tls").path) : nil
        ports = try Self.freePorts(primaries * 2)
        do {
            for port in ports { try startNode(port, nodeTimeoutMillis: nodeTimeoutMillis) }
            try create(replicas: 1)
            try waitUntilHealthy(timeout: 30)
        } catch {
            stop()
            throw error
        }
    }

    deinit {
        stop()
        try? FileManager.default.removeItem(at: directory)
    }

    /// Ports p with p and the cluster bus port p + 10000 both free on 127.0.0.1, both below Linux's ephemeral range
    /// (32768 and up): the tests' own outgoing connections take ports from that range at any moment, so a pair
    /// found free there could be taken before the node binds it.
    static func freePorts(_ count: Int) throws -> [Int] {
        var out: [Int] = []
        var candidate = 10_000 + Int.random(in: 0..<12_000)
        var tries = 0
        while out.count < count {
            tries += 1
            if tries > 2_000 { throw RedisError(.connection, "no free port pair for a cluster node") }
            candidate += 1
            if candidate >= 22_000 { candidate = 10_000 }
            if isFree(candidate), isFree(candidate + 10_000) { out.append(candidate) }
        }
        return out
    }

    private static func isFree(_ port: Int) -> Bool {
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

    private func startNode(_ port: Int, nodeTimeoutMillis: Int) throws {
        let dir = directory.appendingPathComponent("\(port)")
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        let p = Process()
        p.executableURL = URL(fileURLWithPath: RedisServerFixture.redisServerPath())
        let listen =
            tls.map {
                ["--port", "0", "--tls-cluster", "yes", "--tls-replication", "yes"] + $0.serverArguments(port: port)
            } ?? ["--port", String(port)]
        p.arguments =
            listen + [
                "--bind", "127.0.0.1", "--cluster-enabled", "yes",
                "--cluster-config-file", dir.appendingPathComponent("nodes.conf").path,
                "--cluster-node-timeout", String(nodeTimeoutMillis), "--save", "", "--appendonly", "no",
                // Replicas sync at once (the default waits 5 s for more replicas), and one may take over however long
                // its link was down: a test kills a primary soon after the cluster formed.
                "--repl-diskless-sync-delay", "0", "--cluster-replica-validity-factor", "0",
                "--dir", dir.path, "--logfile", dir.appendingPathComponent("redis.log").path,
            ]
        p.standardOutput = FileHandle.nullDevice
        p.standardError = FileHandle.nullDevice
        try p.run()
        lock.withLock { processes[port] = p }
        let deadline = Date().addingTimeInterval(10)
        while Date() < deadline {
            if (try? command(port, ["PING"])) != nil { return }
            usleep(20_000)
        }
        throw RedisError(.connection, "cluster node on port \(port) did not start; see \(dir.path)/redis.log")
    }

    private func create(replicas: Int) throws {
        let p = Process()
        p.executableURL = URL(fileURLWithPath: Self.redisCLIPath())
        p.arguments =
            (tls.map { ["--tls", "--cacert", $0.caFile, "--sni", "localhost"] } ?? [])
            + ["--cluster", "create"] + nodes.map(\.description)
            + ["--cluster-replicas", String(replicas), "--cluster-yes"]
        let log = directory.appendingPathComponent("create.log")
        FileManager.default.createFile(atPath: log.path, contents: nil)
        let handle = try FileHandle(forWritingTo: log)
        defer { try? handle.close() }
        p.standardOutput = handle
        p.standardError = handle
        let exited = DispatchSemaphore(value: 0)
        p.terminationHandler = { _ in exited.signal() }
        try p.run()
        // redis-cli exits by itself once the nodes joined; nodes that cannot reach each other would keep it waiting.
        // SIGKILL, since children inherit the test process's blocked signals (see `RedisServerFixture`).
        if exited.wait(timeout: .now() + 60) == .timedOut {
            Glibc.kill(p.processIdentifier, SIGKILL)
            p.waitUntilExit()
            throw RedisError(.server, "the nodes did not join within 60 s; see \(log.path) and the nodes' logs")
        }
        guard p.terminationStatus == 0 else {
            throw RedisError(.server, "redis-cli --cluster create failed; see \(log.path)")
        }
    }

    public static func redisCLIPath() -> String {
        for p in ["/usr/bin/redis-cli", "/usr/local/bin/redis-cli", "/opt/homebrew/bin/redis-cli"]
        where FileManager.default.isExecutableFile(atPath: p) { return p }
        return "redis-cli"
    }

    /// One command on one node (a fresh connection).
    public func command(_ port: Int, _ args: [String]) throws -> RedisReply {
        try RedisConnection(
            endpoint: RedisEndpoint(address: .tcp(host: "127.0.0.1", port: port), tls: redisTLS), connectTimeout: 1
        )
        .command(args)
    }

    /// Waits until every running node says `cluster_state:ok`, every replica's link to its primary is up, and all
    /// of them agree on every slot's primary.
    public func waitUntilHealthy(timeout: Double) throws {
        let deadline = Date().addingTimeInterval(timeout)
        var last = "no answer"
        while Date() < deadline {
            if let why = unhealthyReason() { last = why } else { return }
            usleep(50_000)
        }
        throw RedisError(.server, "cluster not healthy after \(Int(timeout)) s: \(last); logs in \(directory.path)")
    }

    private func unhealthyReason() -> String? {
        var maps = Set<[String]>()
        for port in runningPorts {
            guard let info = try? command(port, ["CLUSTER", "INFO"]).string else { return "node \(port) silent" }
            if !info.contains("cluster_state:ok") { return "node \(port) not ok" }
            guard let replication = try? command(port, ["INFO", "replication"]).string else {
                return "node \(port) silent"
            }
            if replication.contains("role:slave"), !replication.contains("master_link_status:up") {
                return "replica \(port) not in sync"
            }
            guard let slots = try? command(port, ["CLUSTER", "SLOTS"]).array else { return "no slots on \(port)" }
            maps.insert(
                slots.compactMap { e -> String? in
                    guard let p = e.array, p.count >= 3 else { return nil }
                    return "\(p[0]) \(p[1]) \(p[2].array?[1].integer ?? 0)"
                }.sorted())
        }
        return maps.count == 1 ? nil : "nodes disagree on the slot map"
    }

    public var runningPorts: [Int] { lock.withLock { ports.filter { processes[$0] != nil } } }

    /// The port of the primary serving `slot`, from a running node's CLUSTER SLOTS.
    public func primaryPort(of slot: RedisClusterSlot) throws -> Int {
        for port in runningPorts {
            guard let entries = try? command(port, ["CLUSTER", "SLOTS"]).array else { continue }
            for e in entries {
                if let p = e.array, p.count >= 3, let s = p[0].integer, let t = p[1].integer,
                    (Int(s)...Int(t)).contains(slot.rawValue), let port = p[2].array?[1].integer
                {
                    return Int(port)
                }
            }
        }
        throw RedisError(.server, "no node serves slot \(slot)")
    }

    /// The ports of the current primaries.
    public func primaryPorts() throws -> [Int] {
        var out = Set<Int>()
        for port in runningPorts {
            guard let entries = try? command(port, ["CLUSTER", "SLOTS"]).array else { continue }
            for e in entries { if let port = e.array?[2].array?[1].integer { out.insert(Int(port)) } }
            if !out.isEmpty { break }
        }
        return out.sorted()
    }

    public func nodeID(_ port: Int) throws -> String {
        guard let id = try command(port, ["CLUSTER", "MYID"]).string else {
            throw RedisError(.unexpectedReply, "CLUSTER MYID on \(port)")
        }
        return id
    }

    /// First half of moving `slot` from its primary to the primary on `port`: IMPORTING on the target, MIGRATING on
    /// the source. Keys still on the source are served there; others are answered with ASK.
    public func beginMigration(_ slot: RedisClusterSlot, to port: Int) throws -> Int {
        let source = try primaryPort(of: slot)
        _ = try command(port, ["CLUSTER", "SETSLOT", String(slot.rawValue), "IMPORTING", try nodeID(source)])
            .throwIfError("IMPORTING")
        _ = try command(source, ["CLUSTER", "SETSLOT", String(slot.rawValue), "MIGRATING", try nodeID(port)])
            .throwIfError("MIGRATING")
        return source
    }

    /// Second half: the slot's keys move (MIGRATE), then every primary learns the new owner.
    public func finishMigration(_ slot: RedisClusterSlot, from source: Int, to port: Int) throws {
        while true {
            let keys = try command(source, ["CLUSTER", "GETKEYSINSLOT", String(slot.rawValue), "100"]).array ?? []
            if keys.isEmpty { break }
            _ = try command(
                source, ["MIGRATE", "127.0.0.1", String(port), "", "0", "5000", "KEYS"] + keys.compactMap(\.string)
            ).throwIfError("MIGRATE")
        }
        let target = try nodeID(port)
        for p in try primaryPorts() + [port, source] {
            _ = try command(p, ["CLUSTER", "SETSLOT", String(slot.rawValue), "NODE", target])
        }
    }

    /// SIGKILL one node (a crash).
    public func kill(port: Int) {
        let p = lock.withLock { processes.removeValue(forKey: port) }
        guard let p else { return }
        Glibc.kill(p.processIdentifier, SIGKILL)
        p.waitUntilExit()
    }

    public func stop() {
        for port in ports { kill(port: port) }
    }

    /// A fresh client for test assertions.
    public func client(name: String = "test") -> RedisClient {
        RedisClient(endpoint: endpoint, options: .init(giveUpAfter: 20), name: name)
    }
}
