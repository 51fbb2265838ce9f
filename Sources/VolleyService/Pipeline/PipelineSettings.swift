import Foundation
import Logging
import VolleyCore
import VolleyEngine
import VolleyRedis
import VolleyStore

/// The pipeline's view of `VolleyConfiguration`: Redis endpoint and options, key names, worker tuning.
public struct PipelineSettings: Sendable {
    public var endpoint: RedisEndpoint
    public var redisOptions: RedisClient.Options
    public var store: StoreConfiguration
    public var worker: WorkerConfiguration

    public init(
        endpoint: RedisEndpoint, redisOptions: RedisClient.Options = .init(),
        store: StoreConfiguration = StoreConfiguration(), worker: WorkerConfiguration = WorkerConfiguration()
    ) {
        self.endpoint = endpoint
        self.redisOptions = redisOptions
        self.store = store
        self.worker = worker
    }

    /// Maps the YAML `redis:` and `worker:` sections. Throws `ConfigurationError` naming the key.
    public init(_ config: VolleyConfiguration, consumerOverride: String? = nil) throws {
        do {
            endpoint = try config.redis.endpoint()
        } catch let e as RedisError {
            throw ConfigurationError(
                problems: ["redis.url: \(e.message)"], source: config.sourcePath ?? "configuration")
        }
        // One record of NOPERM answers per process: every client made from these options reports to it.
        redisOptions = RedisClient.Options(
            connectTimeout: config.redis.connectTimeoutSeconds,
            commandTimeout: config.redis.commandTimeoutSeconds, permissionDenials: RedisPermissionDenials())
        let w = config.worker
        store = StoreConfiguration(config)
        worker = WorkerConfiguration(
            consumer: consumerOverride ?? w.consumer ?? WorkerConfiguration.defaultConsumerName(),
            concurrentJobs: w.concurrentJobs, inFlight: w.inFlight, readBatch: w.batchSize,
            blockMillis: w.blockMs, reclaimIdleMillis: w.reclaimIdleMs,
            reclaimIntervalMillis: w.reclaimIntervalMs,
            keepAliveIntervalMillis: w.keepAliveIntervalMs,
            maxDeliveries: w.maxDeliveries, drainDeadlineSeconds: w.drainSeconds,
            recordBatch: w.recordBatchSize, chunkSize: w.chunkSize)
        worker.scheduleMaxAheadDays = config.schedule.maxAheadDays
        worker.unansweredSends = w.unansweredSends
        for org in config.orgs {
            if let z = org.timeZone.flatMap(TimeZone.init(identifier:)) { worker.orgTimeZones[org.id] = z }
        }
        let problems = worker.problems()
        if !problems.isEmpty {
            throw ConfigurationError(problems: problems, source: config.sourcePath ?? "configuration")
        }
    }

    public func backend(logger: Logger) -> RedisPipelineBackend {
        RedisPipelineBackend(
            endpoint: endpoint, store: store, consumer: worker.consumer, options: redisOptions, logger: logger)
    }

    /// A client for one-off commands (CLI), giving up after `giveUpAfter` seconds if Redis is unreachable.
    public func client(name: String, giveUpAfter: Double = 10, logger: Logger) -> RedisClient {
        var o = redisOptions
        o.giveUpAfter = giveUpAfter
        return RedisClient(endpoint: endpoint, options: o, name: name, logger: logger)
    }
}

extension StoreConfiguration {
    /// The key names and limits the configuration sets: the `worker` streams, `redis.waitReplicas`, `events` and
    /// `deliveries`. On a Redis Cluster (`redis.cluster`) the event stream is one per org, in the org's slot.
    public init(_ config: VolleyConfiguration) {
        let w = config.worker
        self.init(jobStream: w.stream, deadStream: w.deadLetterStream, reportStream: w.reportStream, group: w.group)
        waitReplicas = config.redis.waitReplicas
        streamShards = w.streamShards
        eventStreamPerOrg = !config.redis.cluster.isEmpty
        eventsEnabled = config.events.enabled
        eventsOutcomes = config.events.outcomes
        eventsMaxLength = config.events.maxLength
        eventsMaxAgeSeconds = config.events.maxAgeSeconds
        deliveryHistoryDays = config.deliveries.days
    }
}
