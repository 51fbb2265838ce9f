import Foundation
import Logging
import VolleyCore
import VolleyRedis
import VolleyService
import VolleyStore

/// `volley-bench hints`: sync hints on their own redis-server, the store and the worker's flusher in this process,
/// on a manual clock (time compressed: the decisions read the clock, never the wall).
///
/// 1. **Burst**: `changes` record changes for one user, spread evenly over `windowSeconds`, the flusher run after
///    each call. Counts the pushes taken while the changes arrive (`pushes_per_device_max`: every push goes to each
///    of the user's devices once, as one job), then lets the rest go, and checks that every change is listed by a
///    push taken after it or covered by a `fullSync` push taken after it (`ids_uncovered`).
/// 2. **Many users**: `users` users, `rounds` changes each (500 users per call, as a backend naming a record's
///    followers), then every push the rules allow. CPU of this process (intake + flusher) and of redis-server per
///    change, and Redis memory per waiting user before the first flush.
///
/// The pushes are counted as jobs on the job stream, not delivered: their delivery is an ordinary job's, measured by
/// `volley-bench e2e`.
public struct HintsBenchOptions: Sendable {
    public var changes = 10_000
    public var windowSeconds = 60.0
    public var idsPerCall = 100
    public var users = 100_000
    public var rounds = 3
    public var configuration = SyncHintConfiguration()
    public init() {}
}

public struct HintsBenchResult: Sendable, Codable, Hashable {
    public var changes: Int
    public var minIntervalSeconds: Double
    public var maxPerHour: Int
    public var maxRecordIds: Int
    /// Pushes to the user's devices while the changes arrived (each device gets each push once).
    public var pushesPerDeviceMax: Int
    /// `1 + windowSeconds / minIntervalSeconds`.
    public var pushesAllowed: Double
    /// Pushes in all, the last of them taken after the window.
    public var pushesTotal: Int
    public var fullSyncPushes: Int
    public var idsUncovered: Int
    public var users: Int
    public var userChanges: Int
    public var manyUserPushes: Int
    public var cpuUsPerChange: Double
    public var clientCPUUsPerChange: Double
    public var redisCPUUsPerChange: Double
    public var redisBytesPerWaitingUser: Double
    public var seconds: Double

    enum CodingKeys: String, CodingKey {
        case changes
        case minIntervalSeconds = "min_interval_seconds"
        case maxPerHour = "max_per_hour"
        case maxRecordIds = "max_record_ids"
        case pushesPerDeviceMax = "pushes_per_device_max"
        case pushesAllowed = "pushes_allowed"
        case pushesTotal = "pushes_total"
        case fullSyncPushes = "full_sync_pushes"
        case idsUncovered = "ids_uncovered"
        case users
        case userChanges = "user_changes"
        case manyUserPushes = "many_user_pushes"
        case cpuUsPerChange = "cpu_us_per_change"
        case clientCPUUsPerChange = "client_cpu_us_per_change"
        case redisCPUUsPerChange = "redis_cpu_us_per_change"
        case redisBytesPerWaitingUser = "redis_bytes_per_waiting_user"
        case seconds
    }
}

public enum HintsBench {
    public static func run(_ o: HintsBenchOptions, logger: Logger) throws -> HintsBenchResult {
        let started = benchNow()
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent(
            "volley-bench-hints-\(UUID().uuidString.prefix(8))"
        ).path
        try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let redis = try BenchRedis(directory: dir)
        defer { redis.stop() }
        let endpoint = RedisEndpoint.unix(redis.socket)
        let settings = PipelineSettings(endpoint: endpoint, store: StoreConfiguration())
        let client = RedisClient(endpoint: endpoint, options: .init(giveUpAfter: 10), name: "bench", logger: logger)
        let store = RedisSyncHintStore(client: client, maxRecordIds: o.configuration.maxRecordIds)
        let reader = RedisClient(endpoint: endpoint, options: .init(giveUpAfter: 10), name: "reader", logger: logger)
        let clock = ManualClock(Date())
        let flusher = SyncHintFlusher(
            configuration: o.configuration, settings: settings, logger: logger, clock: clock)

        // 1. One user, `changes` changes within the window.
        let org = OrgID("bench-org")
        let app = AppName("bench_app")
        let start = clock.now()
        var lastChange: [String: Date] = [:]
        var pushes: [(at: Date, ids: Set<String>?)] = []
        var streamCursor = "-"
        func collect() throws {
            let r = try reader.checked(["XRANGE", "volley:jobs", streamCursor == "-" ? "-" : "(" + streamCursor, "+"])
            for e in r.array ?? [] {
                guard let parts = e.array, parts.count == 2, let id = parts[0].string else { continue }
                streamCursor = id
                let fields = parts[1].fieldPairs
                guard let json = fields.first(where: { $0.0 == "job" })?.1,
                    let job = try? PushJob(json: JSONValue(parsing: json), defaultOrg: nil),
                    let data = job.notification.data
                else { continue }
                if case .array(let ids)? = data["recordIds"] {
                    pushes.append((clock.now(), Set(ids.compactMap(\.stringValue))))
                } else {
                    pushes.append((clock.now(), nil))
                }
            }
        }
        let calls = max(1, (o.changes + o.idsPerCall - 1) / o.idsPerCall)
        var made = 0
        for call in 0..<calls {
            clock.set(start + o.windowSeconds * Double(call) / Double(calls))
            let n = min(o.idsPerCall, o.changes - made)
            // Ids repeat across calls (a record changed twice), about one in ten.
            let ids = (0..<n).map { k in "001b\((made + k) % max(1, o.changes * 9 / 10))" }
            made += n
            _ = try store.add(
                org: org, app: app, users: ["bench-user"], type: "RECORD", recordIds: ids, now: clock.now())
            for id in ids { lastChange[id] = clock.now() }
            try flusher.flushOnce()
            try collect()
        }
        let inWindow = pushes.filter { $0.at < start + o.windowSeconds }.count
        // Then the rest goes when the rules allow.
        for _ in 0..<200 {
            clock.advance(by: max(1, o.configuration.minIntervalSeconds / 4))
            try flusher.flushOnce()
            try collect()
            if try store.backlog(org: org).waiting == 0,
                try store.due(org: org, now: clock.now() + 86_400, limit: 1).isEmpty
            {
                break
            }
        }
        var uncovered = 0
        for (id, at) in lastChange {
            let covered = pushes.contains { p in p.at >= at && (p.ids == nil || p.ids?.contains(id) == true) }
            if !covered { uncovered += 1 }
        }

        // 2. Many users, a few changes each.
        let manyOrg = OrgID("bench-many")
        let users = (0..<o.users).map { UserID("u\($0)") }
        func usedMemory() throws -> Double {
            let info = try reader.checked(["INFO", "memory"]).string ?? ""
            let line = info.split(separator: "\r\n").first { $0.hasPrefix("used_memory:") }
            return Double(line?.split(separator: ":").last ?? "0") ?? 0
        }
        _ = try reader.checked(["XTRIM", "volley:jobs", "MAXLEN", "0"])
        let memoryBefore = try usedMemory()
        let cpuBefore = (process: selfCPU(), redis: ProcessSample.read(pid: redis.child.pid)?.cpuSeconds ?? 0)
        var userChanges = 0
        for round in 0..<o.rounds {
            clock.advance(by: 60 / Double(max(1, o.rounds)))
            var i = 0
            while i < users.count {
                let part = Array(users[i..<min(users.count, i + 500)])
                i += part.count
                _ = try store.add(
                    org: manyOrg, app: app, users: part, type: "RECORD", recordIds: ["001c\(round)-\(i)"],
                    now: clock.now())
                userChanges += part.count
            }
        }
        // Memory per waiting user, before the first push takes anything.
        let memoryAfter = try usedMemory()
        var manyPushes = 0
        for _ in 0..<100 {
            manyPushes += try flusher.flushOnce()
            if try store.due(org: manyOrg, now: clock.now(), limit: 1).isEmpty {
                clock.advance(by: o.configuration.minIntervalSeconds)
                manyPushes += try flusher.flushOnce()
                if try store.backlog(org: manyOrg).waiting == 0 { break }
            }
        }
        let cpuAfter = (process: selfCPU(), redis: ProcessSample.read(pid: redis.child.pid)?.cpuSeconds ?? 0)
        let processUs = (cpuAfter.process - cpuBefore.process) * 1e6 / Double(max(1, userChanges))
        let server = (cpuAfter.redis - cpuBefore.redis) * 1e6 / Double(max(1, userChanges))
        return HintsBenchResult(
            changes: o.changes, minIntervalSeconds: o.configuration.minIntervalSeconds,
            maxPerHour: o.configuration.maxPerHour, maxRecordIds: o.configuration.maxRecordIds,
            pushesPerDeviceMax: inWindow, pushesAllowed: 1 + o.windowSeconds / o.configuration.minIntervalSeconds,
            pushesTotal: pushes.count, fullSyncPushes: pushes.filter { $0.ids == nil }.count,
            idsUncovered: uncovered, users: o.users, userChanges: userChanges, manyUserPushes: manyPushes,
            cpuUsPerChange: processUs + server, clientCPUUsPerChange: processUs, redisCPUUsPerChange: server,
            redisBytesPerWaitingUser: (memoryAfter - memoryBefore) / Double(max(1, o.users)),
            seconds: benchNow() - started)
    }

    /// This process's CPU seconds (user + system).
    static func selfCPU() -> Double {
        var u = rusage()
        getrusage(RUSAGE_SELF.rawValue, &u)
        return Double(u.ru_utime.tv_sec) + Double(u.ru_utime.tv_usec) / 1e6 + Double(u.ru_stime.tv_sec)
            + Double(u.ru_stime.tv_usec) / 1e6
    }

    public static func table(_ r: HintsBenchResult) -> String {
        """
        sync hints (minIntervalSeconds \(r.minIntervalSeconds), maxPerHour \(r.maxPerHour), maxRecordIds \
        \(r.maxRecordIds))
          burst: \(r.changes) changes in the window -> \(r.pushesPerDeviceMax) pushes per device during it \
        (allowed \(String(format: "%.2f", r.pushesAllowed))), \(r.pushesTotal) in all (\(r.fullSyncPushes) fullSync), \
        \(r.idsUncovered) ids uncovered
          many users: \(r.users) users, \(r.userChanges) changes, \(r.manyUserPushes) pushes; \
        CPU \(String(format: "%.2f", r.cpuUsPerChange)) us per change (this process \
        \(String(format: "%.2f", r.clientCPUUsPerChange)), redis-server \
        \(String(format: "%.2f", r.redisCPUUsPerChange))); \
        Redis \(String(format: "%.0f", r.redisBytesPerWaitingUser)) bytes per waiting user
          \(String(format: "%.1f", r.seconds)) s
        """
    }
}
