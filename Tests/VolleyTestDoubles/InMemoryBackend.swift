import Foundation
import VolleyCore

/// The engine's storage seams in memory: a job stream with a consumer group (pending entries, delivery counts,
/// idle reclaim, dead letters), a device registry and an outcome ledger, shared by every session. It keeps the
/// semantics the engine relies on (an entry stays pending until acknowledged; a report is published once), so the
/// engine's steps run in unit tests without Redis. Blocking reads wait on a condition, as XREADGROUP BLOCK does.
public final class InMemoryBackend: PipelineBackend, @unchecked Sendable {
    struct Pending {
        var entry: JobEntry
        var lastDelivery: Date
    }

    private let cond = NSCondition()
    private var nextID = 0
    private var fresh: [JobEntry] = []
    private var pending: [StreamEntryID: Pending] = [:]
    private var acked: [StreamEntryID] = []
    private var deadLetters: [(entry: JobEntry, reason: JobRejection.Reason, detail: String)] = []
    private var devices: [String: [Device]] = [:]
    private var ledger: [String: [String: DeliveryOutcome]] = [:]
    private var reports: [JobReport] = []
    private var reported: Set<String> = []
    /// Every `recordedOutcomes` call, to tell a first delivery (no look-up) from a redelivery.
    private var ledgerLookups = 0
    /// Device reads so far, and after how many the next ones fail (`failDeviceReads`).
    private var deviceReads = 0
    private var deviceReadFailure: (after: Int, message: String)?
    /// The schedule: `org|job` (a wave: `org|job@<wave field>`) → (due, the parked entry's fields, the job id, the
    /// wave field), and the jobs cancelled (`cancel`).
    private var parked: [String: (due: Date, fields: [String: String], job: String, wave: String?)] = [:]
    /// The orgs' zones set as `PUT /v1/time-zone` sets them.
    private var orgZones: [OrgID: String] = [:]
    private var cancelled: Set<String> = []
    /// Jobs paused (`pause`), and the parts parked under each until its resume.
    private var paused: Set<String> = []
    private var pausedParts: [String: Set<String>] = [:]
    /// Charges given back for pushes a pause or cancel kept from being sent, per job.
    public private(set) var releasedCharges: [String: Int] = [:]

    /// A store error the in-memory backend answers when told to (`failDeviceReads`).
    public struct StoreFailure: Error, CustomStringConvertible {
        public let description: String
    }

    public init() {}

    public func makeSession(name: String, isCancelled: @escaping @Sendable () -> Bool) throws -> any PipelineSession {
        Session(backend: self, isCancelled: isCancelled)
    }

    private func locked<T>(_ body: () throws -> T) rethrows -> T {
        cond.lock()
        defer { cond.unlock() }
        return try body()
    }

    // MARK: - test set-up and inspection

    @discardableResult
    public func enqueue(_ job: PushJob) throws -> StreamEntryID {
        let json = String(decoding: try JSONEncoder().encode(job), as: UTF8.self)
        return enqueue(fields: ["job": json])
    }

    @discardableResult
    public func enqueue(fields: [String: String]) -> StreamEntryID {
        locked {
            nextID += 1
            // As Redis makes them: the time the entry was added (ms), then a sequence number.
            let id = StreamEntryID("\(Int64((Date().timeIntervalSince1970 * 1000).rounded(.down)))-\(nextID)")
            fresh.append(JobEntry(entryID: id, fields: fields, deliveryCount: 0))
            cond.broadcast()
            return id
        }
    }

    public func register(org: OrgID, app: AppName, user: UserID, _ list: [Device]) {
        locked { devices["\(org)|\(app)|\(user)", default: []] += list }
    }

    public func registered(org: OrgID, app: AppName, user: UserID) -> [Device] {
        locked { devices["\(org)|\(app)|\(user)"] ?? [] }
    }

    /// Device reads after the first `reads` throw `StoreFailure(message)`: a store that fails in the middle of a job.
    public func failDeviceReads(after reads: Int, _ message: String) {
        locked { deviceReadFailure = (reads, message) }
    }

    public func seedLedger(org: OrgID, job: JobID, _ outcomes: [(Device, DeliveryOutcome)]) {
        locked { for (d, o) in outcomes { ledger["\(org)|\(job)", default: [:]][Self.field(d)] = o } }
    }

    public func seedReport(_ report: JobReport) {
        locked { reported.insert("\(report.org)|\(report.job)") }
    }

    public func outcomes(org: OrgID, job: JobID) -> [String: DeliveryOutcome] {
        locked { ledger["\(org)|\(job)"] ?? [:] }
    }
    /// Parked jobs by `org|job`, with their due times.
    public var parkedJobs: [String: Date] { locked { parked.mapValues(\.due) } }
    public func setOrgTimeZone(_ zone: String?, org: OrgID) { locked { orgZones[org] = zone } }

    /// What the promoter does: every parked job due at or before `now` goes back on the stream with `jobId` and
    /// `due`. Returns how many.
    @discardableResult
    public func promote(now: Date) -> Int {
        locked {
            let due = parked.filter { $0.value.due <= now }.sorted { $0.value.due < $1.value.due }
            for (key, p) in due {
                parked.removeValue(forKey: key)
                var fields = p.fields
                fields["jobId"] = p.job
                fields["due"] = String(Int64(p.due.timeIntervalSince1970 * 1000))
                fields["wave"] = p.wave
                nextID += 1
                fresh.append(JobEntry(entryID: StreamEntryID("\(nextID)-0"), fields: fields, deliveryCount: 0))
            }
            if !due.isEmpty { cond.broadcast() }
            return due.count
        }
    }

    /// `DELETE /v1/jobs/{id}`: the job is marked cancelled and leaves the schedule. True when it was parked.
    @discardableResult
    public func cancel(org: OrgID, job: JobID) -> Bool {
        locked {
            cancelled.insert("\(org)|\(job)")
            return parked.removeValue(forKey: "\(org)|\(job)") != nil
        }
    }

    /// `POST /v1/jobs/{id}/pause`: the job is marked paused.
    public func pause(org: OrgID, job: JobID) { _ = locked { paused.insert("\(org)|\(job)") } }

    /// `POST /v1/jobs/{id}/resume`: the mark goes and every parked part is due at `now`. Answers how many parts.
    @discardableResult
    public func resume(org: OrgID, job: JobID, now: Date) -> Int {
        locked {
            let key = "\(org)|\(job)"
            paused.remove(key)
            let parts = pausedParts.removeValue(forKey: key) ?? []
            for part in parts { parked[part]?.due = now }
            return parts.count
        }
    }

    public var pendingCount: Int { locked { pending.count } }
    public var allReports: [JobReport] { locked { reports } }
    public var ackedEntries: [StreamEntryID] { locked { acked } }
    public var deadLettered: [(entry: JobEntry, reason: JobRejection.Reason, detail: String)] { locked { deadLetters } }
    public var lookups: Int { locked { ledgerLookups } }

    public static func field(_ d: Device) -> String { "\(d.platform.rawValue):\(d.token.rawValue)" }

    // MARK: - one session

    final class Session: PipelineSession {
        let backend: InMemoryBackend
        let isCancelled: @Sendable () -> Bool
        private var watched: [String] = []
        private(set) var steeringSeen = JobSteering.run
        init(backend: InMemoryBackend, isCancelled: @escaping @Sendable () -> Bool) {
            self.backend = backend
            self.isCancelled = isCancelled
        }

        func ensureGroup() throws {}

        func readNew(count: Int, blockMillis: Int) throws -> [JobEntry] {
            let b = backend
            b.cond.lock()
            defer { b.cond.unlock() }
            let until = Date().addingTimeInterval(Double(blockMillis) / 1000)
            while b.fresh.isEmpty, !isCancelled(), b.cond.wait(until: until) {}
            let taken = Array(b.fresh.prefix(count))
            b.fresh.removeFirst(taken.count)
            return taken.map { e in
                var e = e
                e.deliveryCount = 1
                b.pending[e.entryID] = Pending(entry: e, lastDelivery: Date())
                return e
            }
        }

        func claimIdle(minIdleMillis: Int, count: Int) throws -> [JobEntry] {
            backend.locked {
                let cutoff = Date().addingTimeInterval(-Double(minIdleMillis) / 1000)
                let idle = backend.pending.values.filter { $0.lastDelivery < cutoff }
                    .sorted { $0.entry.entryID.rawValue < $1.entry.entryID.rawValue }.prefix(count)
                return idle.map { p in
                    var e = p.entry
                    e.deliveryCount += 1
                    backend.pending[e.entryID] = Pending(entry: e, lastDelivery: Date())
                    return e
                }
            }
        }

        func keepAlive(_ entries: [StreamEntryID]) throws {
            backend.locked { for id in entries { backend.pending[id]?.lastDelivery = Date() } }
        }

        func ack(_ entry: StreamEntryID) throws {
            backend.locked {
                if backend.pending.removeValue(forKey: entry) != nil { backend.acked.append(entry) }
            }
        }

        func deadLetter(_ entry: JobEntry, reason: JobRejection.Reason, detail: String) throws {
            backend.locked { backend.deadLetters.append((entry, reason, detail)) }
            try ack(entry.entryID)
        }

        func devices(org: OrgID, app: AppName, users: [UserID]) throws -> [[Device]] {
            try backend.locked {
                backend.deviceReads += 1
                if let f = backend.deviceReadFailure, backend.deviceReads > f.after {
                    throw StoreFailure(description: f.message)
                }
                return users.map { backend.devices["\(org)|\(app)|\($0)"] ?? [] }
            }
        }

        func remove(org: OrgID, app: AppName, tokens: [DeadToken]) throws -> Int {
            backend.locked {
                var removed = 0
                for t in tokens {
                    for (key, list) in backend.devices where key.hasPrefix("\(org)|\(app)|") {
                        let kept = list.filter { $0.platform != t.device.platform || $0.token != t.device.token }
                        removed += list.count - kept.count
                        backend.devices[key] = kept
                    }
                }
                return removed
            }
        }

        func recordedOutcomes(org: OrgID, job: JobID, devices: [Device]) throws -> [RecordedOutcome?] {
            backend.locked {
                backend.ledgerLookups += 1
                let recorded = backend.ledger["\(org)|\(job)"] ?? [:]
                return devices.map { recorded[InMemoryBackend.field($0)].map(RecordedOutcome.init) }
            }
        }

        func record(
            org: OrgID, job: JobID, outcomes: [(Device, DeliveryOutcome)], releasing: QuotaSettlement?
        ) throws {
            backend.locked {
                for (d, o) in outcomes { backend.ledger["\(org)|\(job)", default: [:]][InMemoryBackend.field(d)] = o }
            }
            try checkSteering()
        }

        func watchSteering(org: OrgID, jobs: [JobID]) {
            watched = jobs.map { "\(org)|\($0)" }
            steeringSeen = .run
        }

        @discardableResult
        func checkSteering() throws -> JobSteering {
            if watched.isEmpty { return steeringSeen }
            steeringSeen = backend.locked {
                if watched.contains(where: { backend.cancelled.contains($0) }) { return .cancelled }
                return watched.contains(where: { backend.paused.contains($0) }) ? .paused : .run
            }
            return steeringSeen
        }

        func releaseCharges(org: OrgID, job: JobID, _ settlement: QuotaSettlement) throws {
            let n = settlement.parts.reduce(0) { $0 + $1.delivered + $1.refunded }
            backend.locked { backend.releasedCharges["\(org)|\(job)", default: 0] += n }
        }

        func parkPaused(_ entry: JobEntry, org: OrgID, job: JobID, pausedBy: [JobID], now: Date) throws {
            backend.locked {
                let key = "\(org)|\(job)" + (entry.fields["wave"].map { "@\($0)" } ?? "")
                backend.parked[key] = (.distantFuture, entry.fields, job.rawValue, entry.fields["wave"])
                let stillPaused = pausedBy.contains { backend.paused.contains("\(org)|\($0)") }
                for p in pausedBy { backend.pausedParts["\(org)|\(p)", default: []].insert(key) }
                if !stillPaused { backend.parked[key]?.due = now }
            }
            try ack(entry.entryID)
        }

        func park(_ entry: JobEntry, org: OrgID, job: JobID, due: Date) throws {
            backend.locked {
                if backend.parked["\(org)|\(job)"] == nil {
                    backend.parked["\(org)|\(job)"] = (due, entry.fields, job.rawValue, nil)
                }
            }
            try ack(entry.entryID)
        }

        func parkWaves(_ entry: JobEntry, org: OrgID, job: JobID, reference: Date, waves: [Date: Int]) throws {
            backend.locked {
                for at in waves.keys {
                    let wave = LocalTimeWaves.waveField(reference: reference, at: at)
                    let key = "\(org)|\(job)@\(wave)"
                    if backend.parked[key] == nil { backend.parked[key] = (at, entry.fields, job.rawValue, wave) }
                }
            }
        }

        func orgTimeZone(org: OrgID) throws -> String? { backend.locked { backend.orgZones[org] } }

        func ledgerState(org: OrgID, job: JobID) throws -> LedgerState {
            backend.locked {
                if backend.reported.contains("\(org)|\(job)") { return .reported }
                if backend.cancelled.contains("\(org)|\(job)") { return .cancelled }
                if backend.paused.contains("\(org)|\(job)") { return .paused }
                return (backend.ledger["\(org)|\(job)"]?.isEmpty == false) ? .partial : .empty
            }
        }

        func publish(_ report: JobReport) throws -> Bool {
            backend.locked {
                guard backend.reported.insert("\(report.org)|\(report.job)").inserted else { return false }
                backend.reports.append(report)
                return true
            }
        }
    }
}
