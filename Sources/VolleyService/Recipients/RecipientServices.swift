import Foundation
import VolleyConnect
import VolleyCore
import VolleyEngine
import VolleyRedis
import VolleyStore

/// Wires the recipients layer (directory, quotas, inbox, notification types, templates) from the configuration.
/// Each store gets its own Redis connection; stores serialize their calls, so one instance may be shared.
public struct RecipientServices: Sendable {
    public let directory: RedisDirectory
    public let quota: RedisQuotaStore
    /// The fleet's gate for jobs with `throttlePerMinute`.
    public let throttle: RedisThrottle
    public let inbox: RedisInboxStore
    public let types: RedisNotificationTypeStore
    /// Notification templates (`volley templates`; the worker reads a templated job's template here).
    public let templates: RedisTemplateStore
    /// Segments (`volley segments`; the worker reads a job's segments through the directory).
    public let segments: RedisSegmentStore
    public let shards: RedisShardCoordinator
    /// Recurring schedules (`volley schedules`).
    public let schedules: ScheduleAdmin
    public typealias ScheduleAdmin = RedisSchedules
    public let shardSize: Int
    /// Frequency caps: the configuration's rules, the API's stored ones, and the per-user counts.
    public let frequencyCaps: FrequencyCaps

    public init(configuration c: VolleyConfiguration, clock: any WallClock = SystemClock(), name: String = "cli") throws
    {
        let endpoint = try c.redis.endpoint()
        func client(_ role: String) throws -> RedisClient {
            let r = RedisClient(
                endpoint: endpoint,
                options: .init(
                    connectTimeout: c.redis.connectTimeoutSeconds,
                    commandTimeout: c.redis.commandTimeoutSeconds),
                name: "\(name)-\(role)")
            return r
        }
        directory = RedisDirectory(client: try client("directory"))
        quota = RedisQuotaStore(
            client: try client("quota"), defaults: QuotaLimits(ios: c.quotas.ios, android: c.quotas.android),
            configured: c.quotas.orgs.mapValues { ($0.ios, $0.android) }, clock: clock)
        throttle = RedisThrottle(client: try client("throttle"))
        inbox = RedisInboxStore(
            client: try client("inbox"),
            retention: InboxRetention(maxCount: c.inbox.maxCount, maxAgeSeconds: c.inbox.maxAgeSeconds),
            clock: clock)
        types = RedisNotificationTypeStore(client: try client("types"))
        templates = RedisTemplateStore(client: try client("templates"))
        segments = RedisSegmentStore(client: try client("segments"))
        let store = StoreConfiguration(c)
        shards = RedisShardCoordinator(client: try client("shards"), store: store)
        schedules = RedisSchedules(client: try client("schedules"), store: store)
        shardSize = c.worker.shardSize
        let caps = RedisFrequencyCapStore(client: try client("frequency-caps"))
        frequencyCaps = FrequencyCaps(
            rulebook: FrequencyCapRulebook(configured: c.frequencyCaps, stored: caps, clock: clock), store: caps)
        self.clock = clock
    }

    public let clock: any WallClock

    /// The engine's recipient step over this directory, inbox and types.
    public func resolver(usersPerRead: Int = 500) -> DirectoryRecipientResolver {
        var r = DirectoryRecipientResolver(
            directory: directory, inbox: inbox, types: types, attributes: directory, shards: shards,
            shardSize: shardSize,
            clock: clock, usersPerRead: usersPerRead)
        r.frequencyCaps = frequencyCaps
        return r
    }

    /// What each recipient's push says: a template rendered per user, the Salesforce Notification Builder payload
    /// for custom notifications, with the worker's one cache of parsed device keys (`deviceKeyCacheSize` of them at
    /// most, `worker.deviceKeyCacheSize`).
    public func personalContent(deviceKeyCacheSize: Int = DeviceKeyCache.defaultCapacity) -> NotificationContentPlanner
    {
        let types = self.types
        return NotificationContentPlanner(
            clock: clock, templates: templates, fullContent: { try types.fullContent(org: $0, app: $1) },
            deviceKeys: DeviceKeyCache(capacity: deviceKeyCacheSize))
    }
}

/// Reads a file line by line in 1 MiB chunks (a directory export of millions of lines never sits in memory whole).
public final class LineReader {
    private let handle: FileHandle
    private var buffer = Data()
    private var eof = false
    public private(set) var lineNumber = 0

    public init(path: String) throws {
        guard let h = FileHandle(forReadingAtPath: path) else {
            throw DirectoryError("cannot open \(path): check the path and permissions")
        }
        handle = h
    }
    deinit { try? handle.close() }

    /// The next line without its newline, or nil at the end.
    public func next() -> String? {
        while true {
            if let nl = buffer.firstIndex(of: 0x0A) {
                let line = buffer[buffer.startIndex..<nl]
                buffer.removeSubrange(buffer.startIndex...nl)
                lineNumber += 1
                return String(decoding: line, as: UTF8.self)
            }
            if eof {
                if buffer.isEmpty { return nil }
                let line = buffer
                buffer = Data()
                lineNumber += 1
                return String(decoding: line, as: UTF8.self)
            }
            let chunk = handle.readData(ofLength: 1 << 20)
            if chunk.isEmpty { eof = true } else { buffer.append(chunk) }
        }
    }
}

/// `volley directory import`: streams records into Redis in pipelined batches, reporting progress.
public enum DirectoryImport {
    public struct Result: Sendable {
        public var counts: RedisDirectory.ImportCounts
        public var skipped: [String]
    }

    /// Invalid lines are skipped and listed (at most 20 kept), not fatal: one typo must not stop a million-line import.
    public static func run(
        path: String, into directory: RedisDirectory, batchSize: Int = 2000,
        progress: (RedisDirectory.ImportCounts) -> Void
    ) throws -> Result {
        let reader = try LineReader(path: path)
        var total = RedisDirectory.ImportCounts()
        var skipped: [String] = []
        var skippedCount = 0
        var batch: [DirectoryRecord] = []
        let decoder = JSONDecoder()
        func flush() throws {
            if batch.isEmpty { return }
            let c = try directory.importRecords(batch)
            total.records += c.records
            total.users += c.users
            total.inactiveUsers += c.inactiveUsers
            total.containers += c.containers
            total.memberships += c.memberships
            total.usersWithAttributes += c.usersWithAttributes
            for (k, v) in c.byKind { total.byKind[k, default: 0] += v }
            batch.removeAll(keepingCapacity: true)
            progress(total)
        }
        while let line = reader.next() {
            let trimmed = line.trimmingCharacters(in: .whitespaces)
            if trimmed.isEmpty { continue }
            do {
                if let p = unknownKeysProblem(trimmed, known: DirectoryRecord.keys) { throw DirectoryError(p) }
                let r = try decoder.decode(DirectoryRecord.self, from: Data(trimmed.utf8))
                let p = r.problems()
                if !p.isEmpty { throw DirectoryError(p.joined(separator: "; ")) }
                batch.append(r)
            } catch {
                skippedCount += 1
                if skipped.count < 20 { skipped.append("line \(reader.lineNumber): \(describe(error))") }
                continue
            }
            if batch.count >= batchSize { try flush() }
        }
        try flush()
        if skippedCount > skipped.count { skipped.append("… and \(skippedCount - skipped.count) more") }
        return Result(counts: total, skipped: skipped)
    }

    static func describe(_ error: any Error) -> String {
        switch error {
        case DecodingError.dataCorrupted(let c): return "not JSON (\(c.debugDescription))"
        case DecodingError.keyNotFound(let k, _): return "missing \"\(k.stringValue)\""
        case DecodingError.typeMismatch(_, let c), DecodingError.valueNotFound(_, let c):
            return "bad value at \(c.codingPath.map(\.stringValue).joined(separator: ".")): \(c.debugDescription)"
        default: return "\(error)"
        }
    }
}
