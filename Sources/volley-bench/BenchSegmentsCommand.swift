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
            + "(users/s), Redis bytes per indexed value.")

    @Option(help: "Directory users to import (each with plan and city).") var users = 1_000_000
    @Option(help: "Records per import batch (volley directory import --batch).") var batch = 2000
    @Option(name: .customLong("drain-batch"), help: "Users per drain step (the worker's users per read).")
    var drainBatch = 500
    @Flag(help: "Print one JSON object.") var json = false

    func run() throws {
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
