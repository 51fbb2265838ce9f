import Foundation
import VolleyCore

/// How one worker process consumes the job stream. The lead maps the YAML `worker:` section onto this.
public struct WorkerConfiguration: Sendable, Hashable {
    /// This worker's consumer name in the group (default `hostname-pid`); also written into dead letters.
    public var consumer: String
    /// Jobs processed at once (one thread and one Redis connection each).
    public var concurrentJobs: Int
    /// In-flight sends per worker (credits), split evenly across the concurrent jobs. When a job's share is used,
    /// it waits for outcomes before sending more; when no job slot is free, the worker stops reading the stream.
    public var inFlight: Int
    /// XREADGROUP COUNT cap (never more than the free job slots).
    public var readBatch: Int
    /// XREADGROUP BLOCK time.
    public var blockMillis: Int
    /// Entries pending on a consumer longer than this are reclaimed (XAUTOCLAIM) by another worker.
    public var reclaimIdleMillis: Int
    /// How often to look for idle entries to reclaim.
    public var reclaimIntervalMillis: Int
    /// How often to refresh the idle time of entries this worker is still working on (< reclaimIdleMillis).
    public var keepAliveIntervalMillis: Int
    /// A job delivered more often than this is dead-lettered (`too-many-deliveries`).
    public var maxDeliveries: Int
    /// On SIGTERM: time to finish in-flight jobs before abandoning them (left pending for other workers).
    public var drainDeadlineSeconds: Double
    /// Outcomes recorded per Redis round trip (also bounds the duplicate window after a crash, with `inFlight`).
    public var recordBatch: Int
    /// Devices resolved per registry read.
    public var chunkSize: Int
    /// `schedule.maxAheadDays`: a job whose `sendAt` is further ahead is dead-lettered.
    public var scheduleMaxAheadDays: Int = 30
    /// `worker.unansweredSends`: what becomes of a request written to a provider whose connection died before the
    /// answer. With `.resend` every push carries a collapse identity (`Notification.displayCollapseId`) and the
    /// transport resends such a request within its outage budget.
    public var unansweredSends = UnansweredSends.resend
    /// `orgs[].timeZone`: an org's zone for the devices of a `deliverAtLocalTime` job that registered none (else
    /// UTC).
    public var orgTimeZones: [OrgID: TimeZone] = [:]

    public init(
        consumer: String = WorkerConfiguration.defaultConsumerName(), concurrentJobs: Int = 2,
        inFlight: Int = 1000, readBatch: Int = 16, blockMillis: Int = 1000, reclaimIdleMillis: Int = 60_000,
        reclaimIntervalMillis: Int = 5_000, keepAliveIntervalMillis: Int? = nil, maxDeliveries: Int = 5,
        drainDeadlineSeconds: Double = 25, recordBatch: Int = 500, chunkSize: Int = 500
    ) {
        self.consumer = consumer
        self.concurrentJobs = max(1, concurrentJobs)
        self.inFlight = max(1, inFlight)
        self.readBatch = max(1, readBatch)
        self.blockMillis = max(1, blockMillis)
        self.reclaimIdleMillis = max(100, reclaimIdleMillis)
        self.reclaimIntervalMillis = max(50, reclaimIntervalMillis)
        self.keepAliveIntervalMillis = keepAliveIntervalMillis ?? max(50, reclaimIdleMillis / 3)
        self.maxDeliveries = max(1, maxDeliveries)
        self.drainDeadlineSeconds = max(0, drainDeadlineSeconds)
        self.recordBatch = max(1, recordBatch)
        self.chunkSize = max(1, chunkSize)
    }

    public static func defaultConsumerName() -> String {
        "\(ProcessInfo.processInfo.hostName)-\(ProcessInfo.processInfo.processIdentifier)"
    }

    /// Problems with the values, each naming its key (for the configuration's one-error-lists-all validation).
    public func problems(prefix: String = "worker") -> [String] {
        var p: [String] = []
        if consumer.isEmpty { p.append("\(prefix).consumer must not be empty") }
        if keepAliveIntervalMillis >= reclaimIdleMillis {
            p.append(
                "\(prefix).keepAliveIntervalMs (\(keepAliveIntervalMillis)) must be below \(prefix).reclaimIdleMs "
                    + "(\(reclaimIdleMillis)), or long jobs get reclaimed while still running"
            )
        }
        if inFlight < concurrentJobs {
            p.append("\(prefix).inFlight (\(inFlight)) must be at least \(prefix).concurrentJobs (\(concurrentJobs))")
        }
        return p
    }
}
