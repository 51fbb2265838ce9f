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

    static let jobEncoder: JSONEncoder = {
        let e = JSONEncoder()
        e.outputFormatting = [.sortedKeys]
        return e
    }()

    /// XADDs the job (field `job`); returns the entry id.
    @discardableResult
    public func enqueue(_ job: PushJob) throws -> StreamEntryID {
        let json = String(decoding: try Self.jobEncoder.encode(job), as: UTF8.self)
        return try enqueueRaw(fields: ["job": json])
    }

    /// XADDs arbitrary fields (tests use it for malformed jobs).
    @discardableResult
    public func enqueueRaw(fields: [String: String]) throws -> StreamEntryID {
        var args = ["XADD", store.jobStream, "*"]
        for (k, v) in fields.sorted(by: { $0.key < $1.key }) { args += [k, v] }
        let r = try client.checked(args)
        guard let id = r.string else { throw RedisError(.unexpectedReply, "XADD returned \(r)") }
        return StreamEntryID(id)
    }

    /// The id of the newest report (or "0-0"), to follow reports published after it.
    /// A job's progress counters: devices resolved and devices with a recorded outcome so far (shards included).
    public func progress(org: OrgID, job: JobID) throws -> (resolved: Int, done: Int) {
        let r = try client.checked(["HMGET", store.progressKey(org, job), "resolved", "done"])
        let v = r.array ?? []
        return (Int(v.first?.integer ?? 0), Int(v.count > 1 ? v[1].integer ?? 0 : 0))
    }

    public func lastReportID() throws -> String {
        let r = try client.checked(["XREVRANGE", store.reportStream, "+", "-", "COUNT", "1"])
        return r.array?.first?.array?.first?.string ?? "0-0"
    }

    /// Reports published after `after`, blocking up to `blockMillis`; returns them and the new position.
    public func reports(after: String, blockMillis: Int, count: Int = 100) throws -> (
        reports: [JobReport], last: String
    ) {
        let r = try client.command(
            [
                "XREAD", "COUNT", String(count), "BLOCK", String(blockMillis),
                "STREAMS", store.reportStream, after,
            ],
            timeout: Double(blockMillis) / 1000 + client.options.commandTimeout)
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

    /// All reports currently on the stream (tests, demo).
    public func allReports() throws -> [JobReport] {
        let r = try client.checked(["XRANGE", store.reportStream, "-", "+"])
        return (r.array ?? []).compactMap { e in
            guard let entry = e.array, entry.count == 2,
                let json = entry[1].fieldPairs.first(where: { $0.0 == "report" })?.1
            else { return nil }
            return try? ReportCoding.decoder.decode(JobReport.self, from: Data(json.utf8))
        }
    }

    /// Dead letters currently on the stream: their fields.
    public func deadLetters() throws -> [[String: String]] {
        let r = try client.checked(["XRANGE", store.deadStream, "-", "+"])
        return (r.array ?? []).compactMap { e in
            guard let entry = e.array, entry.count == 2 else { return nil }
            var d: [String: String] = [:]
            for (k, v) in entry[1].fieldPairs { d[k] = v }
            return d
        }
    }

    /// Pending entry count of the group (XPENDING summary).
    public func pendingCount() throws -> Int {
        let r = try client.command(["XPENDING", store.jobStream, store.group])
        if r.errorMessage != nil { return 0 }
        return Int(r.array?.first?.integer ?? 0)
    }
}
