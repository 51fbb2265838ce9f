import Foundation
import Logging
import VolleyCore
import VolleyRedis
import VolleyStore

/// `volley-bench segments`: audiences by attribute on their own redis-server, through the real code paths.
///
/// 1. **Import**: `users` directory user records with `plan` (gold 10 %, silver 30 %, bronze 60 %) and `city` (one
///    of 20, Berlin 5 %), through `RedisDirectory.importRecords` (the import's pipeline and the attribute index's
///    script), `batch` records at a time. Redis memory before and after (`INFO memory`), less the attributes hash
///    and the kind hash themselves (`MEMORY USAGE`): the index's bytes per (user, attribute value).
/// 2. **Resolve**: a small segment (plan = gold ∧ city = Berlin, about 0.5 %) and a big one (plan ≠ gold, about
///    90 %), each resolved as a job's audience (`RedisDirectory.open`: the segment's set operations, then the
///    subtraction of containers and inactive users) and drained `drainBatch` users per step with the worker's
///    drain script. `users_per_second` is the big segment's users over its resolution and drain.
/// 3. **Count**: the big segment counted as `GET /v1/segments/{id}/count` counts it (`RedisSegmentStore.count`).
public struct SegmentsBenchOptions: Sendable {
    public var users = 1_000_000
    public var batch = 2000
    public var drainBatch = 500
    public init() {}
}

public struct SegmentsBenchResult: Sendable, Codable, Hashable {
    public var users: Int
    public var importSeconds: Double
    public var importUsersPerSecond: Double
    /// Index bytes per (user, attribute value): 2 values per user here.
    public var redisBytesPerValue: Double
    /// Redis memory the import added, the attributes and kind hashes included, per user.
    public var redisBytesPerUser: Double
    public var smallSegmentUsers: Int
    public var smallSeconds: Double
    public var bigSegmentUsers: Int
    public var bigResolveSeconds: Double
    public var bigDrainSeconds: Double
    /// The big segment's users over its resolution and drain.
    public var usersPerSecond: Double
    public var bigCountSeconds: Double
    public var seconds: Double

    enum CodingKeys: String, CodingKey {
        case users
        case importSeconds = "import_seconds"
        case importUsersPerSecond = "import_users_per_second"
        case redisBytesPerValue = "redis_bytes_per_value"
        case redisBytesPerUser = "redis_bytes_per_user"
        case smallSegmentUsers = "small_segment_users"
        case smallSeconds = "small_seconds"
        case bigSegmentUsers = "big_segment_users"
        case bigResolveSeconds = "big_resolve_seconds"
        case bigDrainSeconds = "big_drain_seconds"
        case usersPerSecond = "users_per_second"
        case bigCountSeconds = "big_count_seconds"
        case seconds
    }
}

public enum SegmentsBench {
    static let org: OrgID = "bench-org"
    static let cities = [
        "Berlin", "Lisbon", "Paris", "Madrid", "Rome", "Vienna", "Prague", "Warsaw", "Dublin", "Oslo", "Athens",
        "Sofia", "Riga", "Tallinn", "Vilnius", "Zagreb", "Helsinki", "Bern", "Brussels", "Amsterdam",
    ]

    /// User i's attributes: a fixed mix, so runs compare.
    static func attributes(_ i: Int) -> [String: String] {
        let p = i % 10
        return ["plan": p == 0 ? "gold" : p < 4 ? "silver" : "bronze", "city": cities[(i / 10) % cities.count]]
    }

    public static func run(_ o: SegmentsBenchOptions, logger: Logger) throws -> SegmentsBenchResult {
        let started = benchNow()
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent(
            "volley-bench-segments-\(UUID().uuidString.prefix(8))"
        ).path
        try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let redis = try BenchRedis(directory: dir)
        defer { redis.stop() }
        let endpoint = RedisEndpoint.unix(redis.socket)
        func client(_ name: String) -> RedisClient {
            RedisClient(endpoint: endpoint, options: .init(giveUpAfter: 10), name: name, logger: logger)
        }
        let reader = client("reader")
        func usedMemory() throws -> Double {
            let info = try reader.checked(["INFO", "memory"]).string ?? ""
            let line = info.split(separator: "\r\n").first { $0.hasPrefix("used_memory:") }
            return Double(line?.split(separator: ":").last ?? "0") ?? 0
        }
        let directory = RedisDirectory(client: client("directory"))

        // 1. Import.
        let memoryBefore = try usedMemory()
        let importStart = benchNow()
        var records: [DirectoryRecord] = []
        records.reserveCapacity(o.batch)
        for i in 0..<o.users {
            records.append(
                DirectoryRecord(org: org, kind: .user, id: RecipientID("u\(i)"), attributes: attributes(i)))
            if records.count >= o.batch || i == o.users - 1 {
                try directory.importRecords(records)
                records.removeAll(keepingCapacity: true)
            }
        }
        let importSeconds = benchNow() - importStart
        let memoryAfter = try usedMemory()
        let k = RecipientKeys(org: org)
        var hashes = 0.0
        for key in [k.attributes, k.kind] {
            hashes += Double(try reader.checked(["MEMORY", "USAGE", key, "SAMPLES", "0"]).integer ?? 0)
        }
        let indexBytes = memoryAfter - memoryBefore - hashes

        // 2. Resolve and drain.
        let segments = RedisSegmentStore(client: client("segments"))
        let small = try Segment(
            id: "gold-berlin",
            json: try JSONValue(
                parsing: #"{"filters":[{"attribute":"plan","op":"eq","value":"gold"},"#
                    + #"{"attribute":"city","op":"eq","value":"Berlin"}]}"#))
        let big = try Segment(
            id: "not-gold",
            json: try JSONValue(parsing: #"{"filters":[{"attribute":"plan","op":"ne","value":"gold"}]}"#))
        for s in [small, big] { _ = try segments.put(org: org, s, maxCount: Segment.maxPerOrg) }
        func resolve(_ s: Segment) throws -> (users: Int, resolve: Double, drain: Double) {
            let t0 = benchNow()
            let batches = try directory.open(
                org: org, audience: Audience(include: [.segment(s.id)], app: "bench_app"), scope: "bench-\(s.id)")
            let t1 = benchNow()
            var drained = 0
            while let users = try batches.next(max: o.drainBatch) { drained += users.count }
            guard drained == batches.summary.users else {
                throw BenchError("segment \(s.id): drained \(drained) of \(batches.summary.users) users")
            }
            return (drained, t1 - t0, benchNow() - t1)
        }
        let smallRun = try resolve(small)
        let bigRun = try resolve(big)
        // Exactly who: gold ∧ Berlin drained as a job reads it is the generator's set; with the first 100 of them
        // excluded, exactly the rest; the big segment is every user but gold, and a count says as many.
        let expected = Set(
            (0..<o.users).filter { attributes($0) == ["plan": "gold", "city": "Berlin"] }.map { "u\($0)" })
        let excluded = Array(expected.sorted().prefix(100))
        for (exclude, want) in [
            ([RecipientEntry](), expected), (excluded.map { .id(RecipientID($0)) }, expected.subtracting(excluded)),
        ] {
            let batches = try directory.open(
                org: org, audience: Audience(include: [.segment(small.id)], exclude: exclude, app: "bench_app"),
                scope: "bench-exact-\(exclude.count)")
            var got: Set<String> = []
            while let users = try batches.next(max: o.drainBatch) { got.formUnion(users.map(\.rawValue)) }
            guard got == want else {
                throw BenchError(
                    "gold ∧ Berlin less \(exclude.count) excluded: \(got.count) users, \(want.count) expected; "
                        + "\(got.subtracting(want).count) not matching, \(want.subtracting(got).count) missing")
            }
        }
        guard try segments.count(org: org, small) == expected.count, bigRun.users == o.users - (o.users + 9) / 10 else {
            throw BenchError("segment counts differ from the users generated")
        }

        // 3. Count.
        let countStart = benchNow()
        let counted = try segments.count(org: org, big)
        let countSeconds = benchNow() - countStart
        guard counted == bigRun.users else {
            throw BenchError("segment \(big.id): counted \(counted), resolved \(bigRun.users)")
        }
        return SegmentsBenchResult(
            users: o.users, importSeconds: importSeconds,
            importUsersPerSecond: Double(o.users) / max(importSeconds, 1e-9),
            redisBytesPerValue: indexBytes / Double(max(1, o.users * 2)),
            redisBytesPerUser: (memoryAfter - memoryBefore) / Double(max(1, o.users)),
            smallSegmentUsers: smallRun.users, smallSeconds: smallRun.resolve + smallRun.drain,
            bigSegmentUsers: bigRun.users, bigResolveSeconds: bigRun.resolve, bigDrainSeconds: bigRun.drain,
            usersPerSecond: Double(bigRun.users) / max(bigRun.resolve + bigRun.drain, 1e-9),
            bigCountSeconds: countSeconds, seconds: benchNow() - started)
    }

    public static func table(_ r: SegmentsBenchResult) -> String {
        func f(_ x: Double, _ digits: Int = 2) -> String { String(format: "%.\(digits)f", x) }
        return """
            segments (\(r.users) users with plan and city)
              import: \(f(r.importSeconds, 1)) s, \(f(r.importUsersPerSecond, 0)) users/s; Redis \
            \(f(r.redisBytesPerUser, 0)) bytes per user, index \(f(r.redisBytesPerValue, 1)) bytes per value
              gold ∧ Berlin: \(r.smallSegmentUsers) users in \(f(r.smallSeconds, 3)) s
              plan ≠ gold: \(r.bigSegmentUsers) users, resolved in \(f(r.bigResolveSeconds, 3)) s, drained in \
            \(f(r.bigDrainSeconds, 3)) s: \(f(r.usersPerSecond, 0)) users/s; counted in \(f(r.bigCountSeconds, 3)) s
              \(f(r.seconds, 1)) s
            """
    }
}
