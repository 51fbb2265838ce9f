// swift-format-ignore-file: AlwaysUseLowerCamelCase

// The result type's properties are the `--json` keys (snake_case, a contract with users' scripts), named as written.
import Foundation
import Logging
import VolleyCore
import VolleyRedis
import VolleyService
import VolleyStore

/// `volley-bench segments --send`: segment jobs sent to the mock, and what reached it, device by device.
///
/// `users` users (`u<i>`, one device each, the `e2e` population) carry the segments bench's `plan` and `city` and a
/// number `n` = i. Two jobs go through `workers` `volley worker` processes to a mock writing an accept journal:
/// 1. `{"segment": "gold-berlin"}` (plan = gold ∧ city = Berlin): the devices the mock accepted for it are compared
///    with the devices of the users the attributes say match, and its audience with `GET /v1/segments/{id}/count`;
/// 2. the same less `exclude: [{"segment": "early"}]` (n < `users` / 5): compared with the matching users outside it.
public struct SegmentsSendResult: Sendable, Codable, Hashable {
    public var users: Int
    public var register_seconds: Double
    public var segment_count: Int
    /// The first job's audience (its report's users).
    public var job_audience: Int
    /// Devices the mock accepted for the first job, and whether they are exactly the matching users' devices.
    public var job_accepted: Int
    public var job_exact: Bool
    public var exclude_expected: Int
    public var exclude_accepted: Int
    public var exclude_exact: Bool
    /// Devices the mock accepted more than once over both jobs.
    public var duplicate_devices: Int
    public var send_seconds: Double
}

extension SegmentsBench {
    /// Runs the two jobs on a fresh stage; `workers` worker processes.
    public static func send(users: Int, workers: Int, logger: Logger) throws -> SegmentsSendResult {
        let rig = FaultRig(
            devices: users, iosShare: 0.6, devicesPerUser: 1, workers: workers, shards: 2 * workers, connections: 2,
            inFlight: 4000, recordBatchSize: 512, reclaimIdleMs: nil, unansweredSends: nil, stormStreams: 0,
            clusterNodeTimeoutMs: 1000, executableDirectory: volleyExecutableDirectory(), workDirectory: nil,
            keep: false, progress: true, logger: logger)
        let bench = E2EBench(options: rig.e2eOptions, logger: logger)
        let stage = try rig.makeStage(bench, name: "volley-bench-segments-send", cluster: false, appendOnly: false)
        defer { stage.stop() }
        let (settings, client, producer) = try stage.clients(logger: logger)
        let org = E2EBench.org

        stderrLine("registering \(users) users with one device each, and their attributes…\n")
        let registerStart = benchNow()
        _ = try bench.load(stage: stage, settings: settings)
        let directory = RedisDirectory(client: settings.client(name: "bench-directory", logger: logger))
        var records: [DirectoryRecord] = []
        for i in 0..<users {
            var a = attributes(i)
            a["n"] = String(i)
            records.append(DirectoryRecord(org: org, kind: .user, id: RecipientID("u\(i)"), attributes: a))
            if records.count == 2000 || i == users - 1 {
                try directory.importRecords(records)
                records.removeAll(keepingCapacity: true)
            }
        }
        let registerSeconds = benchNow() - registerStart
        let segments = RedisSegmentStore(client: settings.client(name: "bench-segments", logger: logger))
        let goldBerlin = try Segment(
            id: "gold-berlin",
            json: try JSONValue(
                parsing: #"{"filters":[{"attribute":"plan","op":"eq","value":"gold"},"#
                    + #"{"attribute":"city","op":"eq","value":"Berlin"}]}"#))
        let cut = users / 5
        let early = try Segment(
            id: "early", json: try JSONValue(parsing: #"{"filters":[{"attribute":"n","op":"lt","value":\#(cut)}]}"#))
        for s in [goldBerlin, early] { _ = try segments.put(org: org, s, maxCount: Segment.maxPerOrg) }
        let count = try segments.count(org: org, id: goldBerlin.id) ?? -1

        // What the attributes say, and the tokens of those users' devices.
        let matching = (0..<users).filter { attributes($0) == ["plan": "gold", "city": "Berlin"] }
        let tokens = rig.campaignTokens()

        try bench.startWorkers(stage: stage, count: workers)
        try bench.warmUp(stage: stage, producer: producer, client: client)
        let journal = FaultRig.journal(stage.directory)
        let sendStart = benchNow()
        var duplicates = 0
        func sendAndRead(_ id: String, exclude: [RecipientEntry]?) throws -> (JobReport, Set<String>) {
            let from = FaultRig.fileSize(journal)
            var job = PushJob(
                id: JobID(id), org: org, app: E2EBench.app, recipients: [],
                notification: VolleyCore.Notification(title: "Volley", body: "Segment"))
            job.recipients = [.segment(goldBerlin.id)]
            job.exclude = exclude
            _ = try producer.submit(job, now: Date())
            let deadline = benchNow() + 600
            while true {
                if let (r, _) = try FaultRig.findReport(client, settings.store, job: id) {
                    // The mock may still be writing the journal lines of the last answers it sent.
                    usleep(500_000)
                    let seen = try FaultRig.identities(journal: journal, from: from, to: nil, of: tokens)
                    duplicates += seen.values.filter { $0.count > 1 }.count
                    return (r, Set(seen.keys))
                }
                if benchNow() > deadline { throw BenchError("\(id): no report within 600 s") }
                for w in stage.workers where !w.isRunning { throw BenchError("\(w.name) exited:\n\(w.logTail())") }
                usleep(200_000)
            }
        }
        stderrLine("job gold-berlin: \(matching.count) matching users…\n")
        let (report, reached) = try sendAndRead("segment-gold-berlin", exclude: nil)
        let expected = Set(matching.map(rig.campaignToken))
        let kept = matching.filter { $0 >= cut }
        stderrLine("job gold-berlin less early: \(kept.count) users…\n")
        let (_, reachedLess) = try sendAndRead("segment-gold-berlin-less-early", exclude: [.segment(early.id)])
        let expectedLess = Set(kept.map(rig.campaignToken))
        return SegmentsSendResult(
            users: users, register_seconds: registerSeconds, segment_count: count, job_audience: report.users,
            job_accepted: reached.count, job_exact: reached == expected, exclude_expected: expectedLess.count,
            exclude_accepted: reachedLess.count, exclude_exact: reachedLess == expectedLess,
            duplicate_devices: duplicates, send_seconds: benchNow() - sendStart)
    }
}
