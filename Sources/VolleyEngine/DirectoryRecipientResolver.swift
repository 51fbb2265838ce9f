import Foundation
import VolleyCore

/// The recipient step: a job's `recipients` may mix user, group, queue, account-team and opportunity-team
/// ids, segments and `{"all": true}`, less its `exclude`; the directory resolves them to distinct active users,
/// streamed in chunks (never the whole set in memory).
/// For each chunk of users: store the notification in their in-app inboxes (every user, with or without a device,
/// pushed or not), then look the chunk's devices up in the registry.
///
/// The job's notification type and app decide first (`DeliveryPolicy`): disabled → no chunk at all and
/// `notEnabledReason` set; push disabled → inboxes only, no devices. Explicit `devices` in a job are sent as
/// `UserRecipientResolver` sends them (no inbox: they name no user).
///
/// With `frequencyCaps`, a visible notification to a user at one of the org's caps goes to the user's inbox and to
/// none of the user's devices: after the chunk's devices are read, one atomic store call per chunk checks and records
/// the users that have a device of the job's platforms (a user with none is not counted). A job no cap applies to
/// makes no such call.
///
/// A local-time job's delivery (`RecipientNeeds.localTime`) stores and caps only the users due by its instant, each
/// at their own wave, and reads the chunk's devices and zones first to know which those are.
public struct DirectoryRecipientResolver: RecipientResolver {
    public let directory: any DirectoryResolver
    public let inbox: (any InboxStore)?
    public let types: (any NotificationTypeStore)?
    /// The users' attributes, for templated jobs (`RecipientNeeds.attributes`).
    public let attributes: (any UserAttributeReader)?
    public let clock: any WallClock
    /// Users per registry round trip.
    public var usersPerRead: Int
    /// Fan-out across the fleet: jobs resolving to more than `shardSize` users are split into shard jobs.
    public let shards: (any ShardCoordinator)?
    public var shardSize: Int
    /// The org's frequency caps (nil: none are configured anywhere, and no job pays for them).
    public var frequencyCaps: FrequencyCaps?

    public init(
        directory: any DirectoryResolver, inbox: (any InboxStore)?, types: (any NotificationTypeStore)?,
        attributes: (any UserAttributeReader)? = nil, shards: (any ShardCoordinator)? = nil, shardSize: Int = 50_000,
        clock: any WallClock = SystemClock(), usersPerRead: Int = 500
    ) {
        self.directory = directory
        self.inbox = inbox
        self.types = types
        self.attributes = attributes
        self.clock = clock
        self.usersPerRead = max(1, usersPerRead)
        self.shards = shards
        self.shardSize = max(1, shardSize)
    }

    public func cursor(for job: PushJob, session: any PipelineSession, needs: RecipientNeeds) throws
        -> any DeviceCursor
    {
        let jobID = job.id ?? JobID("job")
        let policy = try types?.policy(org: job.org, app: job.app, typeID: job.notification.type) ?? .pushAndInbox
        // Explicit devices: the user resolver's cursor, with the recipients left to the directory.
        var explicitJob = job
        explicitJob.recipients = nil
        let explicit =
            (job.devices?.isEmpty == false)
            ? try UserRecipientResolver().cursor(for: explicitJob, session: session) : nil
        // The inbox stores what the push shows; a silent hint, a raw-payload (Apex-style) job and `inbox: false`
        // store nothing.
        let n = job.effectiveNotification
        let text = n.isSilent ? nil : n.inAppText
        let content: InboxContent? =
            (inbox == nil || !policy.storesInbox || !job.storesInbox || needs.countOnly)
            ? nil
            : text.map {
                InboxContent(
                    id: job.inboxEntryID(jobID: jobID), type: n.type, title: $0.title, body: $0.body,
                    target: n.targetId,
                    targetPageRef: n.targetPageRef, createdAt: clock.now())
            }
        let c = Cursor(
            job: job, jobID: jobID, policy: policy, explicit: explicit, directory: directory, inbox: inbox,
            content: content, registry: session, usersPerRead: usersPerRead)
        c.shards = shards
        c.shardSize = shardSize
        c.clock = clock
        c.needs = needs
        c.attributes = attributes
        if let caps = frequencyCaps, !needs.countOnly, job.recipients?.isEmpty == false, policy.sendsPush,
            let plan = try caps.plan(for: job, notification: job.inboxEntryID(jobID: jobID))
        {
            c.capping = (caps.store, plan)
        }
        return c
    }

    final class Cursor: DeviceCursor {
        let job: PushJob
        let jobID: JobID
        let policy: DeliveryPolicy
        let explicit: (any DeviceCursor)?
        let directory: any DirectoryResolver
        let inbox: (any InboxStore)?
        let content: InboxContent?
        let registry: any DeviceRegistry
        let usersPerRead: Int
        var batches: (any UserBatches)?
        var explicitDone = false
        var reportedUnknown = false
        var shards: (any ShardCoordinator)?
        var shardSize = 50_000
        var clock: any WallClock = SystemClock()
        var needs = RecipientNeeds.none
        var attributes: (any UserAttributeReader)?
        /// The caps' store and what this job's notification must pass; nil when no cap applies.
        var capping: (store: any FrequencyCapStore, plan: FrequencyCapPlan)?
        private(set) var capped = 0
        private(set) var shardedInto = 0
        private(set) var inAppStored = 0
        private(set) var unknownRecipientIDs: [RecipientID] = []
        var facts: RecipientFacts {
            var f = RecipientFacts(
                notEnabledReason: notEnabledReason, inAppStored: inAppStored,
                unknownRecipientIDs: unknownRecipientIDs, shardedInto: shardedInto)
            f.frequencyCapped = capping == nil ? nil : capped
            return f
        }

        init(
            job: PushJob, jobID: JobID, policy: DeliveryPolicy, explicit: (any DeviceCursor)?,
            directory: any DirectoryResolver,
            inbox: (any InboxStore)?, content: InboxContent?, registry: any DeviceRegistry, usersPerRead: Int
        ) {
            self.job = job
            self.jobID = jobID
            self.policy = policy
            self.explicit = explicit
            self.directory = directory
            self.inbox = inbox
            self.content = content
            self.registry = registry
            self.usersPerRead = usersPerRead
        }

        private var sizer = ChunkSizer()

        func usersForNextRead(devicesWanted: Int) -> Int {
            sizer.usersForNextRead(devicesWanted: devicesWanted, cap: usersPerRead)
        }

        var notEnabledReason: String? { if case .notEnabled(let r) = policy { r } else { nil } }

        func next(max: Int) throws -> DeviceChunk? {
            if notEnabledReason != nil { return nil }
            if !explicitDone, let explicit {
                if let c = try explicit.next(max: max) { return policy.sendsPush ? c : DeviceChunk(devices: []) }
                explicitDone = true
            }
            let recipients = job.recipients ?? []
            if recipients.isEmpty { return nil }
            if batches == nil {
                if let ref = job.shard, let shards {
                    batches = try shards.users(of: ref, org: job.org)
                    reportedUnknown = true // the parent's report carries the unknown ids
                } else {
                    let b = try directory.open(org: job.org, audience: Audience(job: job), scope: jobID.rawValue)
                    if let shards, job.shard == nil, b.summary.users > shardSize {
                        unknownRecipientIDs = b.summary.unknown
                        shardedInto = try shards.split(
                            job: job, jobID: jobID, users: b, shardSize: shardSize,
                            startedAt: clock.now())
                        return nil
                    }
                    batches = b
                }
            }
            guard let b = batches else { return nil }
            var chunk = DeviceChunk(devices: [])
            if !reportedUnknown {
                reportedUnknown = true
                unknownRecipientIDs = b.summary.unknown
                chunk.unknownRecipients = b.summary.unknown.count
            }
            guard let users = try b.next(max: usersForNextRead(devicesWanted: max)) else {
                return chunk.unknownRecipients > 0 ? chunk : nil
            }
            chunk.users = users.count
            defer { sizer.read(users: users.count, devices: chunk.devices.count) }
            // A local-time delivery reads the users' devices and zones first: each user is stored and capped at
            // their own wave (`LocalTimeGate`), so no tray shows the notification hours before its push.
            var read: [[Device]]?
            var known: [[String: String]?]?
            var due: [Bool]?
            if let gate = needs.localTime, !needs.countOnly {
                if policy.sendsPush { read = try registry.devices(org: job.org, app: job.app, users: users) }
                known = try attributes?.attributes(org: job.org, users: users)
                due = dueUsers(gate, users: users, lists: read, attributes: known, chunk: &chunk)
            }
            var unseen: [Int]?
            if let inbox, let content {
                let stored = due.map { d in users.indices.compactMap { d[$0] ? users[$0] : nil } } ?? users
                if !stored.isEmpty {
                    let counts = try inbox.deliver(org: job.org, content: content, to: stored)
                    if needs.unseenCount { unseen = due.map { Self.spread(counts, over: $0) } ?? counts }
                    inAppStored += stored.count
                }
            }
            guard policy.sendsPush else { return chunk }
            var lists = try read ?? registry.devices(org: job.org, app: job.app, users: users)
            let held =
                try capping.map { try applyCaps($0, users: users, due: due, lists: &lists, chunk: &chunk) } ?? []
            for (i, (user, list)) in zip(users, lists).enumerated() {
                if list.isEmpty, held.isEmpty || !held.contains(i) {
                    chunk.usersWithoutDevices += 1
                    chunk.usersWithoutDevicesIDs.append(user)
                }
                chunk.devices.append(contentsOf: list)
            }
            if !needs.isEmpty {
                try addRecipientFacts(users: users, lists: lists, unseen: unseen, known: known, to: &chunk)
            }
            return chunk
        }

        /// The waves of this delivery (each zone's instant computed once per delivery).
        private var waves: LocalTimeWaves?

        /// Which of the chunk's users are due by the delivery's instant: a user at the first instant of their
        /// devices of the job's platforms, or, with none, at their own zone's (`LocalTimeWaves.due(devices:)`).
        /// A user with nothing to send whose instant is later is counted into `chunk.usersDueLater`, so the
        /// delivery parks a wave that stores them.
        private func dueUsers(
            _ gate: LocalTimeGate, users: [UserID], lists: [[Device]]?, attributes: [[String: String]?]?,
            chunk: inout DeviceChunk
        ) -> [Bool] {
            var w = waves ?? LocalTimeWaves(gate)
            defer { waves = w }
            var due: [Bool] = []
            due.reserveCapacity(users.count)
            for i in users.indices {
                var devices = lists.map { i < $0.count ? $0[i] : [] } ?? []
                if job.platforms?.isEmpty == false { devices = devices.filter { job.targets($0.platform) } }
                let zone = attributes.flatMap { i < $0.count ? $0[i] : nil }?[LocalTimeWaves.userZoneAttribute]
                let at = w.due(devices: devices, userZone: zone)
                due.append(at <= gate.asOf)
                if at > gate.asOf, devices.isEmpty { chunk.usersDueLater[at, default: 0] += 1 }
            }
            return due
        }

        /// The unseen counts of the users stored (`due`), back in the order of all the chunk's users (0 for the
        /// others, whose devices this delivery does not send).
        static func spread(_ counts: [Int], over due: [Bool]) -> [Int] {
            var out = [Int](repeating: 0, count: due.count)
            var k = 0
            for (i, d) in due.enumerated() where d && k < counts.count {
                out[i] = counts[k]
                k += 1
            }
            return out
        }

        /// Asks the caps about the chunk's users that have a device of the job's platforms and are due now (one
        /// store call), and empties the device lists of those a cap holds back; returns their indexes. A local-time
        /// job's users due later are asked at their wave.
        private func applyCaps(
            _ capping: (store: any FrequencyCapStore, plan: FrequencyCapPlan), users: [UserID], due: [Bool]?,
            lists: inout [[Device]], chunk: inout DeviceChunk
        ) throws -> Set<Int> {
            var asked: [Int] = []
            for (i, list) in lists.enumerated()
            where due?[i] != false && list.contains(where: { job.targets($0.platform) }) {
                asked.append(i)
            }
            if asked.isEmpty { return [] }
            let admitted = try capping.store.admit(
                org: job.org, plan: capping.plan, users: asked.map { users[$0] }, now: clock.now())
            guard admitted.count == asked.count else {
                throw DirectoryError("frequency caps answered \(admitted.count) users for \(asked.count) asked")
            }
            var held = Set<Int>()
            for (i, ok) in zip(asked, admitted) where !ok {
                lists[i] = []
                held.insert(i)
                chunk.cappedUserIDs.append(users[i])
            }
            capped += held.count
            return held
        }

        /// The facts the job's per-person content reads, for the chunk's users that have devices: the unseen count
        /// the inbox answered when it stored the notification (or the current one, for a job that stores none), and
        /// the users' attributes (one round trip per chunk).
        private func addRecipientFacts(
            users: [UserID], lists: [[Device]], unseen: [Int]?, known: [[String: String]?]?,
            to chunk: inout DeviceChunk
        ) throws {
            var withDevices: [UserID] = []
            var counts: [Int] = []
            var knownAttributes: [[String: String]?] = []
            for (i, (user, list)) in zip(users, lists).enumerated() where !list.isEmpty {
                withDevices.append(user)
                if let unseen { counts.append(unseen[i]) }
                if let known { knownAttributes.append(i < known.count ? known[i] : nil) }
            }
            if withDevices.isEmpty { return }
            if needs.unseenCount, unseen == nil, let inbox {
                counts = try inbox.unseenCounts(org: job.org, users: withDevices)
            }
            // The attributes a local-time delivery already read for the whole chunk, else one read for these users.
            let attributes =
                !needs.attributes
                ? nil
                : known != nil ? knownAttributes : try self.attributes?.attributes(org: job.org, users: withDevices)
            chunk.recipients.reserveCapacity(withDevices.count)
            for (i, user) in withDevices.enumerated() {
                chunk.recipients[user] = RecipientContext(
                    unseenCount: needs.unseenCount && i < counts.count ? counts[i] : nil,
                    attributes: attributes.flatMap { i < $0.count ? $0[i] : nil })
            }
        }
    }
}

/// `worker.chunkSize` counts devices, and users own from one to hundreds of devices: the first read takes a few
/// users, later reads as many as the devices per user seen so far say fit in a chunk (at most `cap`). Without it a
/// campaign to 500 users with 200 devices each was one chunk of 100,000 devices, and nothing was sent until all
/// of them had been read and checked against the outcome ledger.
struct ChunkSizer {
    private(set) var usersRead = 0
    private(set) var devicesRead = 0

    mutating func read(users: Int, devices: Int) {
        usersRead += users
        devicesRead += devices
    }

    func usersForNextRead(devicesWanted: Int, cap: Int) -> Int {
        let wanted = max(1, devicesWanted)
        let cap = max(1, cap)
        guard usersRead > 0 else { return min(cap, wanted, 16) }
        let perUser = max(1.0, Double(devicesRead) / Double(usersRead))
        return min(cap, max(1, Int(Double(wanted) / perUser)))
    }
}
