import Foundation
import VolleyCore
import VolleyRedis

/// Enqueues jobs and follows reports (`volley send`, the demo, tests). Owned by one thread, like its client.
public final class JobProducer: @unchecked Sendable {
    public let client: RedisClient
    public let store: StoreConfiguration

    public init(client: RedisClient, store: StoreConfiguration = StoreConfiguration()) {
        self.client = client
        self.store = store
    }

    /// Where jobs without an id go, round robin (a job with an id goes to the shard of its id).
    private var nextShard = 0

    /// XADDs the job (field `job`) on the job stream shard of its id; returns the entry id.
    @discardableResult
    public func enqueue(_ job: PushJob) throws -> StreamEntryID {
        try enqueueRaw(fields: ["job": job.jsonText], shard: job.id.map { store.streamShard(of: $0) })
    }

    /// Submits the job as the API does (`APIScripts.submit`): on the job stream shard of its id, with the job record
    /// `GET /v1/jobs/{id}` reads and a line in the org's job list (`GET /v1/jobs`). The same job submitted again
    /// (a retry after a lost answer) answers the first entry; another job holding the id is an error. A job
    /// without an id gets one.
    public func submit(_ job: PushJob, now: Date) throws -> (entry: StreamEntryID, job: JobID) {
        var job = job
        let id = job.id ?? JobID.generated()
        job.id = id
        let entry = job.jsonText
        let shard = store.streamShard(of: id)
        let submission = APIKeys(prefix: store.prefix).submission(
            org: job.org, job: id, stream: store.jobStream(shard: shard), digest: APIKeys.digest(entry), entry: entry,
            createdAt: RFC3339.format(now, .milliseconds), app: job.app.rawValue, ttlSeconds: store.ledgerTTLSeconds)
        switch try APIScripts.submission(
            from: client.eval(APIScripts.submit, keys: submission.keys, args: submission.args))
        {
        case .accepted(let e) where !e.isEmpty, .replayed(let e) where !e.isEmpty:
            return (StreamEntryID(e, shard: shard), id)
        case .conflict:
            throw RedisError(.server, "job id \(id) is taken by another job of org \(job.org); give the job another id")
        case .accepted, .replayed:
            throw RedisError(.unexpectedReply, "submit job \(id) answered no entry")
        }
    }

    /// XADDs arbitrary fields (tests use it for malformed jobs) on job stream shard `shard` (nil: round robin).
    @discardableResult
    public func enqueueRaw(fields: [String: String], shard: Int? = nil) throws -> StreamEntryID {
        let shards = store.streamShardIndexes.count
        let target = shard ?? nextShard % shards
        if shard == nil { nextShard = (nextShard + 1) % shards }
        var args = ["XADD", store.jobStream(shard: target), "*"]
        for (k, v) in fields.sorted(by: { $0.key < $1.key }) { args += [k, v] }
        let r = try client.checked(args)
        guard let id = r.string else { throw RedisError(.unexpectedReply, "XADD returned \(r)") }
        return StreamEntryID(id, shard: target)
    }

    /// A job's progress counters: devices resolved and devices with a recorded outcome so far (shards included).
    public func progress(org: OrgID, job: JobID) throws -> (resolved: Int, done: Int) {
        let r = try client.checked(["HMGET", store.progressKey(org, job), "resolved", "done"])
        let v = r.array ?? []
        return (Int(v.first?.integer ?? 0), Int(v.count > 1 ? v[1].integer ?? 0 : 0))
    }

    /// The position of the newest report, to follow reports published after it: its id (or "0-0"), or with more
    /// than one stream shard the ids of every report stream shard's newest, comma-separated.
    public func lastReportID() throws -> String {
        let replies = try client.pipeline(store.reportStreams.map { ["XREVRANGE", $0, "+", "-", "COUNT", "1"] })
        for r in replies { try r.throwIfError("XREVRANGE reports") }
        return replies.map { $0.array?.first?.array?.first?.string ?? "0-0" }.joined(separator: ",")
    }

    /// Reports published after `after` (a position from `lastReportID` or a previous call), blocking up to
    /// `blockMillis`; returns them and the new position. With more than one shard, each shard is read without
    /// blocking, and while none has anything new, one shard at a time is waited on briefly.
    public func reports(after: String, blockMillis: Int, count: Int = 100) throws -> (
        reports: [JobReport], last: String
    ) {
        let streams = store.reportStreams
        if streams.count == 1 {
            return try reports(stream: streams[0], after: after, blockMillis: blockMillis, count: count)
        }
        var positions = after.split(separator: ",", omittingEmptySubsequences: false).map(String.init)
        if positions.count != streams.count { positions = Array(repeating: "0-0", count: streams.count) }
        let until = Date().addingTimeInterval(Double(blockMillis) / 1000)
        var waitOn = 0
        while true {
            var out: [JobReport] = []
            for i in streams.indices {
                let (r, last) = try reports(stream: streams[i], after: positions[i], blockMillis: nil, count: count)
                out += r
                positions[i] = last
            }
            let left = Int(until.timeIntervalSinceNow * 1000)
            if !out.isEmpty || left <= 0 { return (out, positions.joined(separator: ",")) }
            let (r, last) = try reports(
                stream: streams[waitOn], after: positions[waitOn], blockMillis: min(left, 50), count: count)
            positions[waitOn] = last
            if !r.isEmpty { return (r, positions.joined(separator: ",")) }
            waitOn = (waitOn + 1) % streams.count
        }
    }

    private func reports(stream: String, after: String, blockMillis: Int?, count: Int) throws -> (
        reports: [JobReport], last: String
    ) {
        var args = ["XREAD", "COUNT", String(count)]
        if let blockMillis { args += ["BLOCK", String(blockMillis)] }
        let r = try client.command(
            args + ["STREAMS", stream, after],
            timeout: Double(blockMillis ?? 0) / 1000 + client.options.commandTimeout)
        try r.throwIfError("XREAD reports")
        var last = after
        var out: [JobReport] = []
        for s in r.array ?? [] {
            guard let pair = s.array, pair.count == 2 else { continue }
            for e in pair[1].array ?? [] {
                guard let entry = e.array, entry.count == 2, let id = entry[0].string else { continue }
                last = id
                if let json = entry[1].fieldPairs.first(where: { $0.0 == "report" })?.1,
                    let rep = try? ReportCoding.decoder.decode(JobReport.self, from: Data(json.utf8))
                {
                    out.append(rep)
                }
            }
        }
        return (out, last)
    }

    /// All reports currently on the report stream (every shard; tests, demo).
    public func allReports() throws -> [JobReport] {
        try store.reportStreams.flatMap { stream in
            let r = try client.checked(["XRANGE", stream, "-", "+"])
            return (r.array ?? []).compactMap { e -> JobReport? in
                guard let entry = e.array, entry.count == 2,
                    let json = entry[1].fieldPairs.first(where: { $0.0 == "report" })?.1
                else { return nil }
                return try? ReportCoding.decoder.decode(JobReport.self, from: Data(json.utf8))
            }
        }
    }

    /// Dead letters currently on the dead-letter stream of `shard` (nil: every shard): their fields.
    public func deadLetters(shard: Int? = nil) throws -> [[String: String]] {
        let streams = shard.map { [store.deadStream(shard: $0)] } ?? store.deadStreams
        return try streams.flatMap { stream in
            let r = try client.checked(["XRANGE", stream, "-", "+"])
            return (r.array ?? []).compactMap { e -> [String: String]? in
                guard let entry = e.array, entry.count == 2 else { return nil }
                var d: [String: String] = [:]
                for (k, v) in entry[1].fieldPairs { d[k] = v }
                return d
            }
        }
    }

    /// Pending entry count of the group (XPENDING summary), summed over the job stream shards.
    public func pendingCount() throws -> Int {
        var total = 0
        for stream in store.jobStreams {
            let r = try client.command(["XPENDING", stream, store.group])
            if r.errorMessage != nil { continue }
            total += Int(r.array?.first?.integer ?? 0)
        }
        return total
    }

    /// Entries on each job stream shard (XLEN), in shard order.
    public func jobStreamLengths() throws -> [Int] {
        try store.jobStreams.map { Int(try client.checked(["XLEN", $0]).integer ?? 0) }
    }
}
