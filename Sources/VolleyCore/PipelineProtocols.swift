import Foundation

/// The seams between the engine (VolleyEngine) and its storage (VolleyStore, on Redis). All calls block and are
/// made from the engine's own threads — never from Swift's cooperative pool. Each engine thread gets its own
/// `PipelineSession` (one Redis connection each), so implementations need no locking.

/// The job stream and its consumer group.
public protocol JobStream: AnyObject {
    /// Creates the consumer group at the start of the stream (`0`, MKSTREAM); an existing group is fine.
    func ensureGroup() throws
    /// New entries for this consumer (`XREADGROUP … COUNT count BLOCK blockMillis STREAMS s >`).
    func readNew(count: Int, blockMillis: Int) throws -> [JobEntry]
    /// Entries pending on any consumer for longer than `minIdleMillis`, now owned by this consumer (`XAUTOCLAIM`),
    /// with their delivery counts. Entries deleted from the stream meanwhile are acknowledged and skipped.
    func claimIdle(minIdleMillis: Int, count: Int) throws -> [JobEntry]
    /// Resets the idle time of entries this consumer is still working on, so others do not reclaim them.
    func keepAlive(_ entries: [StreamEntryID]) throws
    func ack(_ entry: StreamEntryID) throws
    /// Copies the entry to the dead-letter stream with `reason`, `detail` and the worker id, then acknowledges it.
    func deadLetter(_ entry: JobEntry, reason: JobRejection.Reason, detail: String) throws
}

/// The registry of devices per (org, app, user).
public protocol DeviceRegistry: AnyObject {
    /// Devices of `users`, in the same order (empty array = user has no device).
    func devices(org: OrgID, app: AppName, users: [UserID]) throws -> [[Device]]
    /// Removes tokens the provider said are dead. A token registered again after the moment the provider says it
    /// became invalid (APNs 410's `timestamp`) stays: the app registered it anew. Returns how many were removed.
    @discardableResult
    func remove(org: OrgID, app: AppName, tokens: [DeadToken]) throws -> Int
}

extension DeviceRegistry {
    /// Removes tokens unconditionally (unregistered, or moved to another user).
    @discardableResult
    public func remove(org: OrgID, app: AppName, devices: [Device]) throws -> Int {
        try remove(org: org, app: app, tokens: devices.map { DeadToken($0, invalidSince: nil) })
    }
}

/// A token a provider rejected as dead, with the moment it became invalid when the provider says (APNs 410).
public struct DeadToken: Sendable, Hashable {
    public var device: Device
    public var invalidSince: Date?
    public init(_ device: Device, invalidSince: Date?) {
        self.device = device
        self.invalidSince = invalidSince
    }
}

/// A device's recorded terminal outcome, as stored in the ledger. Accepted devices are kept in the job's accepted
/// list; the other outcomes are hash fields in this compact form.
public struct RecordedOutcome: Sendable, Hashable {
    public var outcome: DeliveryOutcome
    public init(_ outcome: DeliveryOutcome) { self.outcome = outcome }

    /// The ledger hash's form of a non-accepted outcome: `r|status|action|reason`, `f|safe|reason`, `q`, `x`
    /// (expired); nil for `.accepted`, which the hash never holds.
    public var encoded: String? {
        switch outcome {
        case .accepted: return nil
        case .rejected(let status, let reason, let action): return "r|\(status)|\(action.rawValue)|\(reason.rawValue)"
        case .failed(let reason, let safe): return "f|\(safe ? 1 : 0)|\(reason.rawValue)"
        case .quotaExceeded: return "q"
        case .expired: return "x"
        }
    }

    public init?(encoded s: String) {
        if s == "q" {
            outcome = .quotaExceeded
            return
        }
        if s == "x" {
            outcome = .expired
            return
        }
        let parts = s.split(separator: "|", maxSplits: 3, omittingEmptySubsequences: false).map(String.init)
        switch parts.first {
        case "r" where parts.count == 4:
            guard let status = Int(parts[1]) else { return nil }
            outcome = .rejected(
                status: status, reason: OutcomeReason(parts[3]),
                action: RejectionAction(rawValue: parts[2]) ?? .unknown)
        case "f" where parts.count >= 3:
            outcome = .failed(
                reason: OutcomeReason(parts.dropFirst(2).joined(separator: "|")), resendWasSafe: parts[1] == "1")
        default: return nil
        }
    }
}

/// Per-(job, device) terminal outcomes, recorded before the job's entry is acknowledged, so a redelivered job
/// skips what is done. Also guards the report so it is published once per job.
public protocol OutcomeLedger: AnyObject {
    /// For each device, the outcome an earlier delivery recorded, or nil.
    func recordedOutcomes(org: OrgID, job: JobID, devices: [Device]) throws -> [RecordedOutcome?]
    /// Records outcomes (pipelined; one batch per call). `releasing`: the quota charges these outcomes settle,
    /// released from the job's unsettled charges in the same transaction as the outcomes.
    func record(org: OrgID, job: JobID, outcomes: [(Device, DeliveryOutcome)], releasing: QuotaSettlement?) throws
    /// What earlier deliveries left for the job: nothing, some outcomes, or the published report (a redelivery
    /// after the report but before the ack).
    func ledgerState(org: OrgID, job: JobID) throws -> LedgerState
    /// Publishes the report once per job; false when it had been published already.
    @discardableResult
    func publish(_ report: JobReport) throws -> Bool
    /// Appends debug events of a job sent with `"debug": true`; the job keeps the first `DebugEvent.maxPerJob`,
    /// for as long as its ledger.
    func recordDebugEvents(org: OrgID, job: JobID, _ events: [DebugEvent]) throws
    /// Adds to a job's progress counters (devices resolved, devices with a recorded outcome) for `volley send
    /// --wait`. May be buffered until the next `record`, so it costs no round trip of its own.
    func noteProgress(org: OrgID, job: JobID, resolved: Int, done: Int)
    /// Adds to a job's live counts (`GET /v1/jobs/{id}`'s `counts`: field → amount), written in the same
    /// transaction as the next `record`'s outcomes, so the counts and the ledger never disagree, even after a crash.
    func noteCounts(org: OrgID, job: JobID, _ counts: [String: Int64])
    /// Asks the next `record` to tell its outcomes, recorded at `at`, on the event stream and in their users'
    /// delivery histories (`DeliveryTrail`), in the same transaction as the outcomes.
    func noteTrail(_ trail: DeliveryTrail, at: Date)
    /// Tells that `users` got no push of the trail's job, and why: a line in each user's delivery history, an entry
    /// on the event stream and the job's `capped` or `noDevice` count, each once per (job, user) however often a
    /// redelivery resolves the user again.
    func recordSkipped(_ trail: DeliveryTrail, users: [UserID], reason: SkippedRecipient, at: Date) throws
    /// Asks each following `record` to look, in its own round trip, whether one of `jobs` (the job, and the campaign
    /// it is a shard of) was paused or cancelled; `steeringSeen` tells what the last look found.
    func watchSteering(org: OrgID, jobs: [JobID])
    /// What the last `record` or `checkSteering` after `watchSteering` found (`POST /v1/jobs/{id}/pause`,
    /// `DELETE /v1/jobs/{id}`).
    var steeringSeen: JobSteering { get }
    /// Looks at the watched jobs' marks now, in one round trip (before a throttle slice, before a delivery's first
    /// send), and answers what `steeringSeen` then says.
    @discardableResult
    func checkSteering() throws -> JobSteering
    /// Gives back the charges of pushes that were charged but will not be sent (a pause or cancel stopped them):
    /// releases them from the job's unsettled charges. `QuotaAccount.settle` then updates the hour's counters.
    func releaseCharges(org: OrgID, job: JobID, _ settlement: QuotaSettlement) throws
}

/// What a job's owner asked of it while it has not finished. A cancel outranks a pause.
public enum JobSteering: Sendable, Equatable {
    case run
    /// `POST /v1/jobs/{id}/pause`: nothing more is sent until `POST /v1/jobs/{id}/resume`.
    case paused
    /// `DELETE /v1/jobs/{id}`: nothing more is sent; the report says `cancelled`.
    case cancelled
}

extension OutcomeLedger {
    /// A ledger that keeps no debug events drops them.
    public func recordDebugEvents(org: OrgID, job: JobID, _ events: [DebugEvent]) throws {}
    /// A ledger that keeps no progress counters ignores them.
    public func noteProgress(org: OrgID, job: JobID, resolved: Int, done: Int) {}
    /// A ledger that keeps no live counts ignores them.
    public func noteCounts(org: OrgID, job: JobID, _ counts: [String: Int64]) {}
    /// A ledger that keeps no event stream or history tells nothing.
    public func noteTrail(_ trail: DeliveryTrail, at: Date) {}
    public func recordSkipped(_ trail: DeliveryTrail, users: [UserID], reason: SkippedRecipient, at: Date) throws {}
    /// A ledger that cannot be told of a pause or cancel never sees one.
    public func watchSteering(org: OrgID, jobs: [JobID]) {}
    public var steeringSeen: JobSteering { .run }
    public func checkSteering() throws -> JobSteering { .run }
    public func releaseCharges(org: OrgID, job: JobID, _ settlement: QuotaSettlement) throws {}

    /// Records outcomes that settle no quota charge.
    public func record(org: OrgID, job: JobID, outcomes: [(Device, DeliveryOutcome)]) throws {
        try record(org: org, job: job, outcomes: outcomes, releasing: nil)
    }
}

/// `OutcomeLedger.publish` refused a report that does not say `cancelled` for a job cancelled since the delivery last
/// looked: the delivery publishes it again, saying so.
public struct CancelledBeforeReport: Error, Sendable {
    public init() {}
}

/// A job's ledger as a delivery finds it when it starts.
public enum LedgerState: Sendable, Equatable {
    /// Nothing recorded for the job: no delivery has recorded an outcome yet.
    case empty
    /// Outcomes recorded, no report yet.
    case partial
    /// The report was published.
    case reported
    /// The job was cancelled (`DELETE /v1/jobs/{id}`) before its report: nothing more is sent.
    case cancelled
    /// The job is paused (`POST /v1/jobs/{id}/pause`): it waits, parked, for its resume.
    case paused
}

/// Jobs parked until their time (`sendAt`): a sorted set by due time beside each job stream shard, in its slot.
public protocol JobScheduleStore: AnyObject {
    /// Parks the entry's job `job` of `org` until `due` and acknowledges the entry, in one step: a crash leaves the
    /// job on the stream or parked, never both, never neither. A job parked already under the same (org, job) keeps
    /// its first parking (a producer's replay parks nothing new).
    func park(_ entry: JobEntry, org: OrgID, job: JobID, due: Date) throws
    /// Parks a local-time job's later waves: one member per instant of `waves` (instant → devices due then), each
    /// bringing the entry's job back to the stream then, with `reference` (the instant its due times count from).
    /// Notes in the job's ledger when the next wave is due and how many devices wait, for status reads. A wave
    /// parked already stays as it is.
    func parkWaves(_ entry: JobEntry, org: OrgID, job: JobID, reference: Date, waves: [Date: Int]) throws
    /// Parks a paused job (`job`, paused itself or through the campaign it is a shard of: `pausedBy` names both)
    /// until its resume and acknowledges the entry, in one step. The parking is noted under each of `pausedBy`, so
    /// a resume (or cancel) brings every parked part back; a pause lifted while it was being parked brings the job
    /// back at once (due `now`).
    func parkPaused(_ entry: JobEntry, org: OrgID, job: JobID, pausedBy: [JobID], now: Date) throws
    /// The org's default zone set through `PUT /v1/time-zone` (an IANA name), nil when none is: a local-time job's
    /// devices and users without a zone of their own take it, before the configuration's `orgs[].timeZone`.
    func orgTimeZone(org: OrgID) throws -> String?
}

/// Everything one engine thread needs, on one connection.
public protocol PipelineSession: JobStream, DeviceRegistry, OutcomeLedger, JobScheduleStore {}

/// Makes sessions; one per engine thread.
public protocol PipelineBackend: Sendable {
    func makeSession(name: String, isCancelled: @escaping @Sendable () -> Bool) throws -> any PipelineSession
}

/// A chunk of devices resolved from a job's targets.
public struct DeviceChunk: Sendable {
    public var devices: [Device]
    /// Users resolved in this chunk, and how many of them had no device.
    public var users: Int
    public var usersWithoutDevices: Int
    /// Those users, named (for debug events; rare, so the list stays short).
    public var usersWithoutDevicesIDs: [UserID] = []
    /// What the job's per-person content needs to know of the chunk's users (`RecipientNeeds`), by user; empty for
    /// a job whose payload is shared.
    public var recipients: [UserID: RecipientContext] = [:]
    public var unknownRecipients: Int
    /// Users of this chunk the org's frequency caps held back (their devices are not in `devices`), named.
    public var cappedUserIDs: [UserID] = []
    /// A local-time delivery's users of this chunk with nothing to send whose wave is later, by its instant: the
    /// delivery parks a wave for them (`LocalTimeWaves.waitFor`), which stores their inbox entries.
    public var usersDueLater: [Date: Int] = [:]
    public init(devices: [Device], users: Int = 0, usersWithoutDevices: Int = 0, unknownRecipients: Int = 0) {
        self.devices = devices
        self.users = users
        self.usersWithoutDevices = usersWithoutDevices
        self.unknownRecipients = unknownRecipients
    }
}

/// Streams a job's devices in bounded chunks (a large job is never materialised whole).
public protocol DeviceCursor: AnyObject {
    /// The next chunk of at most about `max` devices, or nil when done.
    func next(max: Int) throws -> DeviceChunk?
    /// What resolution found besides devices (complete after the last chunk).
    var facts: RecipientFacts { get }
}

/// Turns a job's `recipients` / `devices` into devices: user ids through the registry, or groups, queues and teams
/// through the directory first.
public protocol RecipientResolver: Sendable {
    /// `needs`: the recipient facts each chunk carries in `DeviceChunk.recipients` (none for a shared payload).
    func cursor(for job: PushJob, session: any PipelineSession, needs: RecipientNeeds) throws -> any DeviceCursor
    /// Where shard jobs report back to their parent (nil: this resolver never splits a job).
    var shards: (any ShardCoordinator)? { get }
}

extension RecipientResolver {
    /// A cursor whose chunks carry no recipient facts.
    public func cursor(for job: PushJob, session: any PipelineSession) throws -> any DeviceCursor {
        try cursor(for: job, session: session, needs: .none)
    }
}

/// The configured apps: which senders a job's `app` has, for the job's org.
public protocol AppDirectory: Sendable {
    func lookup(org: OrgID, app: AppName) -> AppLookup
}

/// What the app directory answers for one (org, app). Anything but `.senders` dead-letters the job `unknown-app`.
public enum AppLookup: Sendable {
    case senders([Platform: any PushSender])
    /// No app of that name is configured.
    case unknownApp
    /// The app exists, but its `orgs` do not include the job's org.
    case orgNotAllowed
}

/// The orgs allowed to send through one app (`apps[].orgs`): a list of org ids, or `*` for every org.
public struct AppOrgs: Sendable, Hashable, CustomStringConvertible {
    /// nil: every org.
    public let allowed: Set<OrgID>?
    public static let any = AppOrgs(allowed: nil)

    public init(allowed: Set<OrgID>?) { self.allowed = allowed }
    /// `["*"]` (or any list holding `*`) allows every org.
    public init(_ ids: [String]) {
        allowed = ids.contains("*") ? nil : Set(ids.map(OrgID.init))
    }

    public func allows(_ org: OrgID) -> Bool { allowed?.contains(org) ?? true }
    public var description: String { allowed.map { $0.map(\.rawValue).sorted().joined(separator: ",") } ?? "*" }
}
