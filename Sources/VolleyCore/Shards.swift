import Foundation

/// Names a shard of a campaign: shard `index` (0-based) of `count`, of parent job `parent`.
public struct ShardRef: Sendable, Hashable, Codable, JSONReadable, JSONWritable {
    public var parent: JobID
    public var index: Int
    public var count: Int
    public init(parent: JobID, index: Int, count: Int) {
        self.parent = parent
        self.index = index
        self.count = count
    }

    public init(json: JSONValue, at path: [JSONPathComponent]) throws(JSONFieldError) {
        let o = try JSONObjectReader(json, at: path)
        parent = JobID(try o.required(o.string("parent"), "parent"))
        index = try o.required(o.int("index"), "index")
        count = try o.required(o.int("count"), "count")
    }

    public init(from decoder: any Decoder) throws { self = try Self.decoded(from: decoder) }

    public var json: JSONValue {
        var o = JSONObjectWriter()
        o.add("parent", parent.rawValue)
        o.add("index", index)
        o.add("count", count)
        return o.value
    }

    public func encode(to encoder: any Encoder) throws { try json.encode(to: encoder) }

    /// The shard job's id (its own ledger, report and inbox scope are keyed by it).
    public var jobID: JobID { JobID("\(parent.rawValue).s\(index)") }
}

/// Fan-out across the fleet: a job resolving to more users than `shardSize` is split into shard jobs put back on
/// the job stream, so every worker of the group shares one campaign; the parent's report is the sum of its shards'
/// and is published when the last shard completes.
public protocol ShardCoordinator: Sendable {
    /// Moves the resolution's users into shard lists of `shardSize` users and enqueues one shard job per list.
    /// Idempotent per parent (a redelivered parent that already split returns the earlier count, enqueues nothing).
    func split(job: PushJob, jobID: JobID, users: any UserBatches, shardSize: Int, startedAt: Date) throws -> Int
    /// The users of one shard, in batches (non-destructive: a redelivered shard reads them again).
    func users(of shard: ShardRef, org: OrgID) throws -> any UserBatches
    /// Adds a finished shard's counts to its parent once; returns the parent's report when this was the last shard.
    func shardFinished(_ report: JobReport, shard: ShardRef) throws -> JobReport?
}
