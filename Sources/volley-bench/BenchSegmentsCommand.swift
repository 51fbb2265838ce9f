import ArgumentParser
import Foundation
import Logging
import VolleyBench

/// `volley-bench segments`: the attribute index's import, a segment's resolution and drain, Redis memory per value.
struct BenchSegments: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "segments",
        abstract:
            "Segments: users with plan and city imported and indexed, a small and a big segment resolved and drained "
            + "(users/s), Redis bytes per indexed value; with --send, segment jobs sent to the mock and compared "
            + "device by device with the users the attributes say match.")

    @Option(help: "Directory users to import (each with plan and city).") var users = 1_000_000
    @Option(help: "Records per import batch (volley directory import --batch).") var batch = 2000
    @Option(name: .customLong("drain-batch"), help: "Users per drain step (the worker's users per read).")
    var drainBatch = 500
    @Flag(
        help: ArgumentHelp(
            "Instead: register --users users with one device each, send a segment job and the same less an "
                + "excluded segment through --workers workers to the mock, and compare what it accepted."))
    var send = false
    @Option(help: "Worker processes (--send).") var workers = 2
    @Flag(help: "Print one JSON object.") var json = false

    func run() throws {
        if send {
            var logger = Logger(label: "volley.bench")
            logger.logLevel = .warning
            let r = try SegmentsBench.send(users: max(10, users), workers: max(1, workers), logger: logger)
            try printResult(r, json: json) {
                "segment jobs to the mock over \(r.users) users: count \(r.segment_count), audience "
                    + "\(r.job_audience), accepted \(r.job_accepted) (exact: \(r.job_exact)); less the excluded "
                    + "segment \(r.exclude_accepted) of \(r.exclude_expected) (exact: \(r.exclude_exact)); "
                    + "devices pushed twice \(r.duplicate_devices)"
            }
            return
        }
        var o = SegmentsBenchOptions()
        o.users = max(1, users)
        o.batch = max(1, batch)
        o.drainBatch = max(1, drainBatch)
        var logger = Logger(label: "volley.bench")
        logger.logLevel = .warning
        let r = try SegmentsBench.run(o, logger: logger)
        try printResult(r, json: json) { SegmentsBench.table(r) }
    }
}
