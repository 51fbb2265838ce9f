import Foundation
import VolleyCore
import VolleyRedis

/// `GET /v1/jobs` and the CSV export of a job's outcomes, on the API's blocking lanes: the org's job index beside each
/// job stream shard (`APIKeys.jobIndex`, written by the submit script), each job's state read as
/// `GET /v1/jobs/{id}` reads it, and the outcome ledgers read a page at a time (HSCAN, LRANGE).
public final class RedisJobHistory: JobHistoryReader {
    private let lanes: SerialLanes<RedisClient>
    private let store: StoreConfiguration
    private let keys: APIKeys
    private let status: RedisJobStatusReader

    /// With a `state` filter, how many jobs one page looks at before it answers with what it found and a cursor:
    /// a page costs a bounded number of reads whatever the org's history holds.
    public static let filteredJobsPerPage = 500
    /// Hash fields asked of one HSCAN step, and accepted-list elements (each a recorded batch of devices) read per
    /// page of the export.
    static let scanCount = 500
    static let acceptedBatchesPerPage = 4

    public init(lanes: SerialLanes<RedisClient>, store: StoreConfiguration) {
        self.lanes = lanes
        self.store = store
        keys = APIKeys(prefix: store.prefix)
        status = RedisJobStatusReader(lanes: lanes, store: store)
    }

    // MARK: - the job list

    public func jobs(org: OrgID, query: JobListQuery) async throws -> JobListPage {
        try await lanes.run { client in try self.jobs(client, org: org, query: query) }
    }

    /// The same on a blocking client the caller owns (`volley jobs list`).
    public func jobs(_ client: RedisClient, org: OrgID, query: JobListQuery) throws -> JobListPage {
        let indexes = store.streamShardIndexes.map { keys.jobIndex(org, stream: store.jobStream(shard: $0)) }
        let floor = query.since.map { String(Self.millis($0)) } ?? "-inf"
        let limit = max(1, min(query.limit, JobListQuery.maxLimit))
        let budget = query.state == nil ? limit : max(limit, Self.filteredJobsPerPage)
        var cursor = query.cursor
        var listed: [JobStatus] = []
        var examined = 0
        while listed.count < limit, examined < budget {
            let want = query.state == nil ? limit - listed.count : min(budget - examined, 100)
            // One more than is used: whether anything older is left, without a last empty page.
            let batch = try candidates(client, indexes, after: cursor, floor: floor, count: want + 1)
            var processed = 0
            for c in batch.prefix(want) {
                processed += 1
                examined += 1
                cursor = JobListCursor(createdAtMillis: c.millis, job: c.job)
                // A job whose record expired a moment ago is no longer described anywhere: left out.
                guard var s = try status.read(client, org: org, job: c.job) else { continue }
                if let state = query.state, s.state != state { continue }
                s.id = c.job.rawValue
                listed.append(s)
                if listed.count == limit { break }
            }
            // Every candidate looked at (the extra one was not there): nothing older is left.
            if processed == batch.count { return JobListPage(jobs: listed, next: nil) }
        }
        return JobListPage(jobs: listed, next: cursor)
    }

    /// Up to `count` jobs of the org's indexes after `cursor` and at or after `floor`, newest first (same
    /// millisecond: id descending), merged across the stream shards.
    private func candidates(
        _ client: RedisClient, _ indexes: [String], after cursor: JobListCursor?, floor: String, count: Int
    ) throws -> [(millis: Int64, job: JobID)] {
        var all: [(millis: Int64, job: JobID)] = []
        let ceiling = cursor.map { String($0.createdAtMillis) } ?? "+inf"
        for index in indexes {
            var offset = 0
            var taken = 0
            while taken < count {
                let reply = try client.checked([
                    "ZREVRANGEBYSCORE", index, ceiling, floor, "WITHSCORES", "LIMIT", String(offset), String(count),
                ])
                let items = reply.fieldPairs
                for (member, score) in items {
                    guard let ms = Double(score).map({ Int64($0) }) else { continue }
                    let job = JobID(member)
                    // Jobs of the cursor's own millisecond come first in this order: those not after it are skipped.
                    if let cursor, !cursor.precedes(millis: ms, job: job) { continue }
                    all.append((ms, job))
                    taken += 1
                }
                if items.count < count { break }
                offset += items.count
            }
        }
        all.sort {
            $0.millis != $1.millis
                ? $0.millis > $1.millis : $1.job.rawValue.utf8.lexicographicallyPrecedes($0.job.rawValue.utf8)
        }
        return Array(all.prefix(count))
    }

    static func millis(_ date: Date) -> Int64 { Int64((date.timeIntervalSince1970 * 1000).rounded(.down)) }

    // MARK: - the outcome export

    public func outcomeLedgers(org: OrgID, job: JobID) async throws -> [JobID] {
        let aggregate = RecipientKeys(org: org).shardAggregate(job)
        let planned = try await lanes.run { client in try client.checked(["HGET", aggregate, "planned"]) }
        let shards = planned.string.flatMap(Int.init) ?? planned.integer.map(Int.init) ?? 0
        return [job] + (0..<max(0, shards)).map { ShardRef(parent: job, index: $0, count: shards).jobID }
    }

    public func outcomes(org: OrgID, ledger job: JobID, app: AppName?, from position: OutcomeExportPosition)
        async throws -> OutcomeExportPage
    {
        try await lanes.run { client in
            var page = try self.page(client, org: org, job: job, from: position)
            if let app, !page.rows.isEmpty { try self.addUsers(client, org: org, app: app, to: &page.rows) }
            return page
        }
    }

    private func page(_ client: RedisClient, org: OrgID, job: JobID, from position: OutcomeExportPosition) throws
        -> OutcomeExportPage
    {
        switch position {
        case .start, .nonAccepted:
            var cursor = "0"
            if case .nonAccepted(let c) = position { cursor = c }
            let reply = try client.checked([
                "HSCAN", store.ledgerKey(org, job), cursor, "COUNT", String(Self.scanCount),
            ])
            guard let parts = reply.array, parts.count == 2, let next = parts[0].string else {
                throw RedisError(.unexpectedReply, "HSCAN answered \(reply)")
            }
            var rows: [OutcomeExportRow] = []
            for (field, value) in parts[1].fieldPairs {
                // `_report`, `_published`, `_cancelled`, …: the ledger's own marks, not devices.
                guard !field.hasPrefix("_"), let device = Self.device(field),
                    let recorded = RecordedOutcome(encoded: value)
                else { continue }
                rows.append(
                    OutcomeExportRow(platform: device.0, token: device.1, user: nil, outcome: recorded.outcome))
            }
            return OutcomeExportPage(
                rows: rows, next: next == "0" ? .accepted(index: 0) : .nonAccepted(scanCursor: next))
        case .accepted(let index):
            let n = Self.acceptedBatchesPerPage
            let reply = try client.checked([
                "LRANGE", store.acceptedKey(org, job), String(index), String(index + n - 1),
            ])
            let elements = reply.array ?? []
            var rows: [OutcomeExportRow] = []
            for element in elements {
                guard let text = element.string, let fields = StoreConfiguration.acceptedFields(text) else {
                    throw RedisError(
                        .unexpectedReply,
                        "\(store.acceptedKey(org, job)) holds an element that is not a batch of accepted devices")
                }
                for field in fields {
                    guard let device = Self.device(field) else { continue }
                    rows.append(OutcomeExportRow(platform: device.0, token: device.1, user: nil, outcome: .accepted))
                }
            }
            return OutcomeExportPage(rows: rows, next: elements.count < n ? nil : .accepted(index: index + n))
        }
    }

    /// The user of each row's token in `app`'s reverse index (`devtok`), one HMGET per page.
    private func addUsers(_ client: RedisClient, org: OrgID, app: AppName, to rows: inout [OutcomeExportRow]) throws {
        let fields = rows.map { StoreConfiguration.deviceField($0.platform, $0.token) }
        let reply = try client.checked(["HMGET", store.tokenIndexKey(org, app)] + fields)
        let users = reply.array ?? []
        for i in rows.indices where i < users.count {
            rows[i].user = users[i].string.map(UserID.init)
        }
    }

    /// `platform:token` of a ledger field; nil for a field of another form.
    static func device(_ field: String) -> (Platform, DeviceToken)? {
        guard let colon = field.firstIndex(of: ":"),
            let platform = Platform(rawValue: String(field[..<colon]))
        else { return nil }
        let token = field[field.index(after: colon)...]
        return token.isEmpty ? nil : (platform, DeviceToken(String(token)))
    }
}
