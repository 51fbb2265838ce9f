import Foundation
import VolleyCore
import VolleyRedis

/// Debug events of jobs sent with `"debug": true`, in one list per job (`volley:events:{org}:{job}`).
/// Written by workers (`RedisPipelineSession.recordDebugEvents`), read by `volley events` and the HTTP API.
/// Blocking; use from one thread at a time (the client is not shared).
public struct RedisDebugEvents {
    public let client: RedisClient
    public let store: StoreConfiguration

    public init(client: RedisClient, store: StoreConfiguration = StoreConfiguration()) {
        self.client = client
        self.store = store
    }

    /// Stored as JSON with ISO 8601 times in milliseconds, like reports (`ReportCoding`).
    static var encoder: JSONEncoder { ReportCoding.encoder }
    static var decoder: JSONDecoder { ReportCoding.decoder }

    /// The commands that append `events` to a job's list: `RPUSH` only while the list holds fewer than the cap (the
    /// caller counts what it wrote; a redelivery may push past it), `LTRIM` to the first `maxPerJob`, `EXPIRE` with
    /// the ledger's time to live.
    static func appendCommands(_ events: [DebugEvent], key: String, ttlSeconds: Int) throws -> [[String]] {
        if events.isEmpty { return [] }
        var push = ["RPUSH", key]
        push.reserveCapacity(events.count + 2)
        for e in events { push.append(String(decoding: try encoder.encode(e), as: UTF8.self)) }
        return [push, ["LTRIM", key, "0", String(DebugEvent.maxPerJob - 1)], ["EXPIRE", key, String(ttlSeconds)]]
    }

    /// The job's events in the order they were recorded; empty when there are none (not a debug job, expired).
    /// Elements that do not decode are skipped.
    public func events(org: OrgID, job: JobID) throws -> [DebugEvent] {
        let r = try client.command(["LRANGE", store.debugEventsKey(org, job), "0", "-1"]).throwIfError("LRANGE events")
        return (r.array ?? []).compactMap { reply in
            reply.string.flatMap { try? Self.decoder.decode(DebugEvent.self, from: Data($0.utf8)) }
        }
    }

    /// The orgs holding debug events for a job id (an operator who knows only the job id): SCAN with the id's glob
    /// characters escaped.
    public func orgs(job: JobID) throws -> [OrgID] {
        let escaped = job.rawValue.reduce(into: "") { out, c in
            if "*?[]\\".contains(c) { out.append("\\") }
            out.append(c)
        }
        let pattern = "\(store.prefix):events:*:\(escaped)"
        let head = "\(store.prefix):events:"
        let tail = ":\(job.rawValue)"
        var cursor = "0"
        var found = Set<OrgID>()
        repeat {
            let r = try client.command(["SCAN", cursor, "MATCH", pattern, "COUNT", "1000"]).throwIfError("SCAN")
            guard let parts = r.array, parts.count == 2 else {
                throw RedisError(.unexpectedReply, "SCAN returned \(r)")
            }
            cursor = parts[0].string ?? "0"
            for key in (parts[1].array ?? []).compactMap(\.string)
            where key.hasPrefix(head) && key.hasSuffix(tail) && key.count > head.count + tail.count + 2 {
                // The org sits in its hash tag: `{<org>}`.
                let tagged = key.dropFirst(head.count).dropLast(tail.count)
                guard tagged.first == "{", tagged.last == "}" else { continue }
                found.insert(OrgID(String(tagged.dropFirst().dropLast())))
            }
        } while cursor != "0"
        return found.sorted { $0.rawValue < $1.rawValue }
    }
}
