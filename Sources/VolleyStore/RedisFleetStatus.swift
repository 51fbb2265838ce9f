import Foundation
import VolleyCore
import VolleyRedis

/// The fleet at a glance, read from Redis: the consumer group's workers, the job stream's backlog, recent
/// throughput from the report stream, recent dead letters, and the orgs nearest their hourly quota.
/// Read by `volley status`; every figure comes from what workers already write, so it costs them nothing.
/// With job stream shards (`worker.streamShards`) every stream figure is read per shard and added up.
public struct FleetStatus: Sendable, Codable, Equatable {
    public struct Consumer: Sendable, Codable, Equatable {
        public var name: String
        /// Entries delivered to this consumer and not acknowledged yet.
        public var pending: Int
        /// Seconds since the consumer last read or claimed (XINFO CONSUMERS `idle`).
        public var idleSeconds: Double
        public init(name: String, pending: Int, idleSeconds: Double) {
            self.name = name
            self.pending = pending
            self.idleSeconds = idleSeconds
        }
    }
    public struct Stream: Sendable, Codable, Equatable {
        public var name: String
        public var group: String
        public var length: Int
        /// Entries added and not yet delivered to the group (Redis 7: XINFO GROUPS `lag`; nil when unknown).
        public var lag: Int?
        public var pending: Int
        /// Age of the oldest unacknowledged entry, from its id's time (nil when nothing is pending).
        public var oldestPendingAgeSeconds: Double?
        public var oldestPendingConsumer: String?
        /// Jobs parked in the schedule beside the stream (`sendAt` later), and when the earliest is due.
        public var scheduled = 0
        public var nextDueAt: Date?
        /// Parts of paused jobs parked until their resume (`POST /v1/jobs/{id}/pause`): not counted in `scheduled`.
        public var paused = 0
        public init(
            name: String, group: String, length: Int, lag: Int?, pending: Int, oldestPendingAgeSeconds: Double? = nil,
            oldestPendingConsumer: String? = nil
        ) {
            self.name = name
            self.group = group
            self.length = length
            self.lag = lag
            self.pending = pending
            self.oldestPendingAgeSeconds = oldestPendingAgeSeconds
            self.oldestPendingConsumer = oldestPendingConsumer
        }
    }
    public struct Throughput: Sendable, Codable, Equatable {
        public var windowSeconds: Double
        public var jobs: Int
        public var devices: Int
        public var accepted: Int
        public init(windowSeconds: Double, jobs: Int, devices: Int, accepted: Int) {
            self.windowSeconds = windowSeconds
            self.jobs = jobs
            self.devices = devices
            self.accepted = accepted
        }
        public var jobsPerSecond: Double { windowSeconds > 0 ? Double(jobs) / windowSeconds : 0 }
        public var devicesPerSecond: Double { windowSeconds > 0 ? Double(devices) / windowSeconds : 0 }
    }
    public struct QuotaUse: Sendable, Codable, Equatable {
        public var org: String
        public var platform: Platform
        public var used: Int
        public var limit: Int
        public init(org: String, platform: Platform, used: Int, limit: Int) {
            self.org = org
            self.platform = platform
            self.used = used
            self.limit = limit
        }
        /// used / limit (1 and above: the org is at its quota; a limit of 0 counts as full).
        public var fraction: Double { limit > 0 ? Double(used) / Double(limit) : 1 }
    }

    public var at: Date
    /// The job stream; with job stream shards, their totals (the oldest pending entry: the oldest of all).
    public var stream: Stream
    /// Each job stream shard on its own, in shard order; empty with one job stream.
    public var shards: [Stream] = []
    /// The group's consumers (with shards: their pending entries summed over the shards, their least idle time).
    public var consumers: [Consumer]
    /// Reports published in the last minute.
    public var lastMinute: Throughput
    /// Dead letters of the last hour, per reason.
    public var deadLettersLastHour: [String: Int]
    /// The orgs nearest their hourly quota this UTC hour, nearest first.
    public var quotas: [QuotaUse]
    /// The UTC hour the quotas are for (`yyyyMMddHH`).
    public var quotaHour: String

    public init(
        at: Date, stream: Stream, consumers: [Consumer], lastMinute: Throughput, deadLettersLastHour: [String: Int],
        quotas: [QuotaUse], quotaHour: String
    ) {
        self.at = at
        self.stream = stream
        self.consumers = consumers
        self.lastMinute = lastMinute
        self.deadLettersLastHour = deadLettersLastHour
        self.quotas = quotas
        self.quotaHour = quotaHour
    }
}

/// Reads a `FleetStatus`. Blocking, on the caller's thread; the client is not shared.
public struct RedisFleetStatus {
    public let client: RedisClient
    public let store: StoreConfiguration
    /// Limits for orgs without overrides; nil leaves quotas out.
    public let quota: RedisQuotaStore?
    /// Most reports and dead letters read per figure (a bound on the work of one status call).
    public var scanLimit = 20_000
    /// Orgs listed by `quotas`.
    public var quotaOrgs = 5

    public init(client: RedisClient, store: StoreConfiguration, quota: RedisQuotaStore?) {
        self.client = client
        self.store = store
        self.quota = quota
    }

    public func read(now: Date = Date()) throws -> FleetStatus {
        let nowMillis = Int64((now.timeIntervalSince1970 * 1000).rounded(.down))
        var shards: [FleetStatus.Stream] = []
        var consumers: [String: FleetStatus.Consumer] = [:]
        var throughput = FleetStatus.Throughput(windowSeconds: 60, jobs: 0, devices: 0, accepted: 0)
        var dead: [String: Int] = [:]
        for shard in store.streamShardIndexes {
            let s = try read(shard: shard, nowMillis: nowMillis, throughput: &throughput, dead: &dead)
            shards.append(s.stream)
            for c in s.consumers {
                if var seen = consumers[c.name] {
                    seen.pending += c.pending
                    seen.idleSeconds = min(seen.idleSeconds, c.idleSeconds)
                    consumers[c.name] = seen
                } else {
                    consumers[c.name] = c
                }
            }
        }
        var stream = shards.count == 1 ? shards[0] : Self.total(shards, name: store.jobStream, group: store.group)
        if shards.count == 1 { shards = [] }
        stream.name = store.jobStream
        let hour = QuotaHour(containing: now)
        var status = FleetStatus(
            at: now, stream: stream, consumers: consumers.values.sorted { $0.name < $1.name },
            lastMinute: throughput, deadLettersLastHour: dead, quotas: try nearestQuotas(hour: hour),
            quotaHour: hour.label)
        status.shards = shards
        return status
    }

    /// The shards' figures added up; the lag is unknown when any shard's is.
    static func total(_ shards: [FleetStatus.Stream], name: String, group: String) -> FleetStatus.Stream {
        var t = FleetStatus.Stream(name: name, group: group, length: 0, lag: 0, pending: 0)
        for s in shards {
            t.length += s.length
            t.pending += s.pending
            t.lag = t.lag.flatMap { total in s.lag.map { total + $0 } }
            t.scheduled += s.scheduled
            t.paused += s.paused
            if let d = s.nextDueAt { t.nextDueAt = min(t.nextDueAt ?? d, d) }
            if let age = s.oldestPendingAgeSeconds, age > (t.oldestPendingAgeSeconds ?? -1) {
                t.oldestPendingAgeSeconds = age
                t.oldestPendingConsumer = s.oldestPendingConsumer
            }
        }
        return t
    }

    /// One job stream shard's figures; its reports and dead letters are added to `throughput` and `dead`.
    private func read(
        shard: Int, nowMillis: Int64, throughput: inout FleetStatus.Throughput, dead: inout [String: Int]
    ) throws -> (stream: FleetStatus.Stream, consumers: [FleetStatus.Consumer]) {
        let jobStream = store.jobStream(shard: shard)
        let replies = try client.pipeline([
            ["XLEN", jobStream],
            ["XINFO", "GROUPS", jobStream],
            ["XINFO", "CONSUMERS", jobStream, store.group],
            ["XPENDING", jobStream, store.group],
            ["XRANGE", store.reportStream(shard: shard), "\(nowMillis - 60_000)", "+", "COUNT", String(scanLimit)],
            ["XRANGE", store.deadStream(shard: shard), "\(nowMillis - 3_600_000)", "+", "COUNT", String(scanLimit)],
            ["ZCARD", store.scheduleKey(shard: shard)],
            ["ZRANGE", store.scheduleKey(shard: shard), "0", "0", "WITHSCORES"],
            ["ZCOUNT", store.scheduleKey(shard: shard), String(pausedDueMillis), "+inf"],
        ])
        // A missing stream or group (nothing enqueued yet) reads as empty, not as an error.
        func ok(_ r: RedisReply, _ what: String) throws -> RedisReply? {
            if let e = r.errorMessage {
                if e.hasPrefix("ERR no such key") || e.hasPrefix("NOGROUP") { return nil }
                throw RedisError(.server, "\(what): \(e)")
            }
            return r
        }
        var stream = FleetStatus.Stream(
            name: jobStream, group: store.group, length: Int(try ok(replies[0], "XLEN")?.integer ?? 0),
            // A missing stream has nothing waiting; a missing group leaves the stream's entries uncounted.
            lag: replies[1].errorMessage?.hasPrefix("ERR no such key") == true ? 0 : nil, pending: 0)
        for g in try ok(replies[1], "XINFO GROUPS")?.array ?? [] {
            let f = Self.fields(g)
            guard f["name"]?.string == store.group else { continue }
            // Redis's own lag is nil after a restart or deletions, and may be stale (StreamLag).
            stream.lag = try StreamLag.waiting(
                client: client, stream: jobStream, reportedLag: f["lag"]?.integer.map(Int.init),
                lastDelivered: f["last-delivered-id"]?.string)
            stream.pending = Int(f["pending"]?.integer ?? 0)
        }
        stream.paused = Int(try ok(replies[8], "ZCOUNT paused")?.integer ?? 0)
        stream.scheduled = Int(try ok(replies[6], "ZCARD schedule")?.integer ?? 0) - stream.paused
        if let first = try ok(replies[7], "ZRANGE schedule")?.array, first.count == 2,
            let ms = first[1].string.flatMap(Double.init), ms < Double(pausedDueMillis)
        {
            stream.nextDueAt = Date(timeIntervalSince1970: ms / 1000)
        }
        let consumers = try (ok(replies[2], "XINFO CONSUMERS")?.array ?? []).map { c -> FleetStatus.Consumer in
            let f = Self.fields(c)
            return FleetStatus.Consumer(
                name: f["name"]?.string ?? "?", pending: Int(f["pending"]?.integer ?? 0),
                idleSeconds: Double(f["idle"]?.integer ?? 0) / 1000)
        }
        // XPENDING summary: [count, smallest id, greatest id, [[consumer, count], …]].
        if let p = try ok(replies[3], "XPENDING")?.array, p.count >= 2, let minID = p[1].string,
            let ms = minID.split(separator: "-").first.flatMap({ Int64($0) })
        {
            // An entry id starts with the milliseconds of its XADD.
            stream.oldestPendingAgeSeconds = max(0, Double(nowMillis - ms) / 1000)
            // Extended form: [[id, consumer, idle, deliveries]].
            let owner = try client.command(["XPENDING", jobStream, store.group, minID, minID, "1"])
            stream.oldestPendingConsumer = owner.array?.first?.array?.dropFirst().first?.string
        }
        for e in try ok(replies[4], "XRANGE reports")?.array ?? [] {
            guard let pair = e.array, pair.count == 2,
                let json = pair[1].fieldPairs.first(where: { $0.0 == "report" })?.1,
                let report = try? ReportCoding.decoder.decode(JobReport.self, from: Data(json.utf8))
            else { continue }
            throughput.jobs += 1
            throughput.devices += report.devices
            throughput.accepted += report.accepted
        }
        for e in try ok(replies[5], "XRANGE dead")?.array ?? [] {
            guard let pair = e.array, pair.count == 2 else { continue }
            let reason = pair[1].fieldPairs.first(where: { $0.0 == "reason" })?.1 ?? "unknown"
            dead[reason, default: 0] += 1
        }
        return (stream, consumers)
    }

    /// The orgs with a quota counter this hour, by how much of their limit they used, nearest first.
    func nearestQuotas(hour: QuotaHour) throws -> [FleetStatus.QuotaUse] {
        guard let quota else { return [] }
        var orgs = Set<String>()
        var cursor = "0"
        let suffix = ":\(hour.label)"
        repeat {
            let r = try client.checked(["SCAN", cursor, "MATCH", "volley:quota:{*}:*:\(hour.label)", "COUNT", "1000"])
            guard let parts = r.array, parts.count == 2 else { throw RedisError(.unexpectedReply, "SCAN: \(r)") }
            cursor = parts[0].string ?? "0"
            for key in (parts[1].array ?? []).compactMap(\.string) where key.hasSuffix(suffix) {
                // volley:quota:{ORG}:<platform>:<hour>: the org is inside the braces.
                guard let open = key.firstIndex(of: "{"), let close = key.lastIndex(of: "}"), open < close else {
                    continue
                }
                orgs.insert(String(key[key.index(after: open)..<close]))
            }
        } while cursor != "0" && orgs.count < 10_000
        var out: [FleetStatus.QuotaUse] = []
        for org in orgs {
            for u in try quota.usage(org: OrgID(org)) where u.used > 0 {
                out.append(.init(org: org, platform: u.platform, used: u.used, limit: u.limit))
            }
        }
        out.sort { ($0.fraction, $0.used, $1.org) > ($1.fraction, $1.used, $0.org) }
        return Array(out.prefix(quotaOrgs))
    }

    /// XINFO's flat [name, value, …] reply as a dictionary of replies (values may be integers or strings).
    static func fields(_ reply: RedisReply) -> [String: RedisReply] {
        guard let a = reply.array else { return [:] }
        var out: [String: RedisReply] = [:]
        var i = 0
        while i + 1 < a.count {
            if let k = a[i].string { out[k] = a[i + 1] }
            i += 2
        }
        return out
    }
}
