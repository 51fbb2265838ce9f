import Foundation
import Logging
import Metrics
import VolleyCore
import VolleyEngine
import VolleyObservability
import VolleyRedis
import VolleyStore

/// A worker's health, and the stream gauges, from one probe thread on its own Redis connection: every second it
/// runs a small script and reads the consumer group (`XINFO GROUPS`: lag, pending); every few seconds it reads the
/// oldest pending entry (`XPENDING`). The operations endpoint reads the latest results and never waits on Redis.
/// With job stream shards it reads each shard (on a Redis Cluster each may live on another node); the gauges are the
/// totals over the shards (the oldest pending age: the oldest of all).
public final class WorkerProbe: HealthSource, @unchecked Sendable {
    let worker: PipelineWorker
    let apps: ReloadableApps
    /// The job stream shards (one name without `worker.streamShards`).
    let streams: [String]
    let group: String
    let client: RedisClient
    let logger: Logger
    let interval: Double
    let streamInterval: Double
    /// What the worker's Redis user was refused (NOPERM), by any of its clients.
    let permissionDenials: RedisPermissionDenials?

    private let lock = NSLock()
    private var checks: [HealthCheck] = [HealthCheck("redis", ok: false, detail: "not probed yet")]
    private var probedAt = Date.distantPast
    private var lastLoop = Date()
    private var stopped = false
    private let done = DispatchSemaphore(value: 0)

    private let lag = Gauge(label: "volley_stream_lag")
    private let pending = Gauge(label: "volley_stream_pending")
    private let oldestPendingAge = Gauge(label: "volley_stream_oldest_pending_age_seconds")
    private let redisErrors = Counter(label: "volley_redis_errors_total")

    /// A script, not a plain PING: a replica, a disabled scripting engine or an ACL that forbids EVAL fails here
    /// as it would fail the worker's own scripts.
    static let roundTrip = RedisScript("return redis.call('EXISTS', KEYS[1])")

    public init(
        worker: PipelineWorker, apps: ReloadableApps, settings: PipelineSettings, logger: Logger,
        interval: Double = 1, streamInterval: Double = 5
    ) {
        self.worker = worker
        self.apps = apps
        streams = settings.store.jobStreams
        group = settings.store.group
        // Short timeouts, no waiting for a reconnect: a probe that hangs says nothing.
        let options = RedisClient.Options(
            connectTimeout: min(1, settings.redisOptions.connectTimeout),
            commandTimeout: min(1, settings.redisOptions.commandTimeout), initialBackoff: 0.05, maxBackoff: 0.2,
            giveUpAfter: 0.3, permissionDenials: settings.redisOptions.permissionDenials)
        permissionDenials = settings.redisOptions.permissionDenials
        client = RedisClient(endpoint: settings.endpoint, options: options, name: "probe", logger: logger)
        self.logger = logger
        self.interval = interval
        self.streamInterval = streamInterval
        lag.record(0)
        pending.record(0)
        oldestPendingAge.record(0)
    }

    /// Starts the probe thread.
    public func start() {
        let t = Thread { [self] in loop() }
        t.name = "volley-probe"
        t.start()
    }

    /// Stops the probe thread (returns when it has).
    public func stop() {
        lock.withLock { stopped = true }
        done.wait()
    }

    private func loop() {
        defer { done.signal() }
        var lastStream = Date.distantPast
        while !lock.withLock({ stopped }) {
            let started = Date()
            let withStream = started.timeIntervalSince(lastStream) >= streamInterval
            if withStream { lastStream = started }
            let result = probe(readPending: withStream)
            lock.withLock {
                checks = result
                probedAt = Date()
                lastLoop = Date()
            }
            let rest = interval - Date().timeIntervalSince(started)
            if rest > 0 { Thread.sleep(forTimeInterval: rest) }
        }
    }

    /// One round: the Redis and consumer-group checks, the stream gauges on the way.
    func probe(readPending: Bool) -> [HealthCheck] {
        var out: [HealthCheck] = []
        do {
            let started = DispatchTime.now().uptimeNanoseconds
            for stream in streams {
                _ = try client.eval(Self.roundTrip, keys: [stream], args: []).throwIfError("EVALSHA")
            }
            let ms = Double(DispatchTime.now().uptimeNanoseconds - started) / 1e6
            out.append(HealthCheck("redis", ok: true, detail: String(format: "script round trip %.1f ms", ms)))
        } catch {
            redisErrors.increment()
            client.disconnect()
            out.append(HealthCheck("redis", ok: false, detail: "\(error)"))
            out.append(HealthCheck("consumer_group", ok: false, detail: "not checked: Redis did not answer"))
            return out
        }
        do {
            var consumers = 0
            var pendingTotal: Double = 0
            var lagTotal: Double = 0
            var oldestMillis: Int64?
            var missing: String?
            // A stream that does not exist (a restart without persistence) has nothing waiting: the gauges read 0
            // for it. Only a group missing on a stream that has entries leaves them unknown.
            var gaugesKnown = true
            for stream in streams {
                let groups = try client.command(["XINFO", "GROUPS", stream])
                let mine = (groups.array ?? []).map { Dictionary($0.fieldPairs, uniquingKeysWith: { a, _ in a }) }
                    .first { $0["name"] == group }
                guard let mine else {
                    let why = groups.errorMessage ?? "no group '\(group)'"
                    missing = missing ?? "\(why) on stream \(stream)"
                    if groups.errorMessage?.hasPrefix("ERR no such key") != true { gaugesKnown = false }
                    continue
                }
                consumers = max(consumers, mine["consumers"].flatMap(Int.init) ?? 0)
                pendingTotal += mine["pending"].flatMap(Double.init) ?? 0
                // Redis's own lag is nil after a restart or deletions, and may be stale: read 0 when nothing waits.
                let waiting = try StreamLag.waiting(
                    client: client, stream: stream, reportedLag: mine["lag"].flatMap { Int($0) },
                    lastDelivered: mine["last-delivered-id"])
                lagTotal += Double(waiting)
                if readPending {
                    let summary = try client.command(["XPENDING", stream, group]).throwIfError("XPENDING").array ?? []
                    if summary.count >= 2, let oldest = summary[1].string, let ms = Self.entryMilliseconds(oldest) {
                        oldestMillis = min(oldestMillis ?? ms, ms)
                    }
                }
            }
            if gaugesKnown {
                pending.record(pendingTotal)
                lag.record(lagTotal)
            }
            if let missing {
                out.append(HealthCheck("consumer_group", ok: false, detail: missing))
            } else {
                let on = streams.count == 1 ? streams[0] : "\(streams.count) stream shards"
                out.append(
                    HealthCheck(
                        "consumer_group", ok: true,
                        detail: "\(group) on \(on): \(consumers) consumers, \(Int(pendingTotal)) pending"))
                if readPending {
                    oldestPendingAge.record(
                        oldestMillis.map { max(0, Date().timeIntervalSince1970 - Double($0) / 1000) } ?? 0)
                }
            }
        } catch {
            redisErrors.increment()
            client.disconnect()
            out.append(HealthCheck("consumer_group", ok: false, detail: "\(error)"))
        }
        return out
    }

    static func entryMilliseconds(_ id: String) -> Int64? {
        Int64(id.split(separator: "-", maxSplits: 1).first ?? "")
    }

    // MARK: HealthSource

    public func liveness() -> HealthReport {
        let l = worker.liveness()
        let probeAge = lock.withLock { Date().timeIntervalSince(lastLoop) }
        return HealthReport([
            HealthCheck(
                "reader", ok: l.readerAlive,
                detail: String(format: "job stream reader last went round %.1f s ago", l.readerLoopAgeSeconds)),
            HealthCheck(
                "lanes", ok: l.lanesAlive, detail: "\(l.lanesRunning) of \(l.lanesConfigured) job lanes running"),
            HealthCheck(
                "probe", ok: probeAge < 30,
                detail: String(format: "health probe last went round %.1f s ago", probeAge)),
        ])
    }

    public func readiness() -> HealthReport {
        let (probed, at) = lock.withLock { (checks, probedAt) }
        var out = probed
        let age = Date().timeIntervalSince(at)
        if age > max(5, 3 * interval) {
            out = [HealthCheck("redis", ok: false, detail: String(format: "no probe answer for %.0f s", age))]
        }
        let missing = apps.unavailableApps
        let names = apps.appNames
        out.append(
            HealthCheck(
                "credentials", ok: missing.isEmpty && !names.isEmpty,
                detail: names.isEmpty
                    ? "no app configured"
                    : missing.isEmpty
                        ? "\(names.count) app\(names.count == 1 ? "" : "s") loaded"
                        : "could not load: \(missing.joined(separator: ", "))"))
        if let refused = permissionDenials?.first {
            out.append(
                HealthCheck(
                    "redis_permissions", ok: false,
                    detail: "Redis refused \(refused); the worker's Redis user lacks this permission"))
        }
        let draining = worker.isDraining
        out.append(HealthCheck("draining", ok: !draining, detail: draining ? "draining after SIGTERM" : "not draining"))
        return HealthReport(out)
    }
}
