import Foundation
import Testing
import VolleyCore
import VolleyService
import VolleyStore
import VolleyTestTags

/// The operator-facing renderings: progress bars, `volley status` text and JSON.
@Suite(.tags(.unit))
struct OperationsFormattingTests {
    @Test func progressBarShowsFractionCountsRateAndDetail() {
        #expect(
            ProgressBar.line(done: 250, total: 1000, unit: "devices", rate: 99.6, detail: "2 invalid", width: 8)
                == "[##------]  25% 250/1000 devices  100/s  (2 invalid)")
        #expect(
            ProgressBar.line(done: 1000, total: 1000, unit: "lines", rate: 5, width: 4)
                == "[####] 100% 1000/1000 lines  5/s")
        // More done than the total known so far (it grows): the bar stays full, never overflows.
        #expect(ProgressBar.line(done: 12, total: 10, unit: "x", rate: 0, width: 2) == "[##] 100% 12/10 x  0/s")
        #expect(ProgressBar.line(done: 7, total: nil, unit: "records", rate: 3) == "7 records  3/s")
    }

    @Test func linesAreCountedWithOrWithoutAFinalNewline() throws {
        let dir = FileManager.default.temporaryDirectory
        let a = dir.appendingPathComponent("lines-\(UUID().uuidString).txt")
        defer { try? FileManager.default.removeItem(at: a) }
        try Data("a\nb\nc\n".utf8).write(to: a)
        #expect(ProgressBar.countLines(path: a.path) == 3)
        try Data("a\nb\nc".utf8).write(to: a)
        #expect(ProgressBar.countLines(path: a.path) == 3)
        try Data().write(to: a)
        #expect(ProgressBar.countLines(path: a.path) == 0)
        #expect(ProgressBar.countLines(path: a.path + ".missing") == nil)
    }

    static func status() -> FleetStatus {
        FleetStatus(
            at: Date(timeIntervalSince1970: 1_800_000_000),
            stream: .init(
                name: "volley:jobs", group: "volley", length: 12, lag: 3, pending: 2, oldestPendingAgeSeconds: 125,
                oldestPendingConsumer: "w-2"),
            consumers: [
                .init(name: "w-1", pending: 0, idleSeconds: 0.25), .init(name: "w-2", pending: 2, idleSeconds: 4000),
            ],
            lastMinute: .init(windowSeconds: 60, jobs: 30, devices: 12_000, accepted: 11_900),
            deadLettersLastHour: ["invalid-json": 1, "unknown-app": 4],
            quotas: [.init(org: "00D1", platform: .ios, used: 900, limit: 1000)], quotaHour: "2027011508")
    }

    @Test func statusTextNamesEveryFigure() {
        let lines = FleetStatusCommand.text(Self.status())
        #expect(lines.contains("stream      length 12  lag 3  pending 2  oldest pending 2 min 5 s on w-2"))
        #expect(lines.contains("last minute 0.50 jobs/s  200 devices/s  (30 jobs, 12000 devices, 11900 accepted)"))
        #expect(lines.contains("dead letters, last hour: unknown-app 4, invalid-json 1"))
        #expect(lines.contains("  w-2   2        1 h 6 min"))
        #expect(lines.contains("  00D1  ios       900   1000   90"))
    }

    @Test func statusJSONCarriesTheRates() throws {
        let json = FleetStatusCommand.json(Self.status())
        let object = try #require(try JSONSerialization.jsonObject(with: Data(json.utf8)) as? [String: Any])
        let minute = try #require(object["lastMinute"] as? [String: Any])
        #expect(minute["devicesPerSecond"] as? Double == 200)
        let quotas = try #require(object["quotas"] as? [[String: Any]])
        #expect(quotas.first?["fraction"] as? Double == 0.9)
        #expect((object["stream"] as? [String: Any])?["lag"] as? Int == 3)
    }

    @Test func statusOfJobStreamShardsListsEachShardAndOneStreamListsNone() throws {
        #expect(FleetStatusCommand.json(Self.status()).contains("\"shards\"") == false)
        var s = Self.status()
        s.shards = [
            .init(name: "volley:jobs:{jobs0}", group: "volley", length: 5, lag: 1, pending: 2),
            .init(name: "volley:jobs:{jobs1}", group: "volley", length: 7, lag: nil, pending: 0),
        ]
        let lines = FleetStatusCommand.text(s)
        #expect(lines.contains("  volley:jobs:{jobs0}  length 5  lag 1  pending 2"))
        #expect(lines.contains("  volley:jobs:{jobs1}  length 7  lag ?  pending 0"))
        let object = try #require(
            try JSONSerialization.jsonObject(with: Data(FleetStatusCommand.json(s).utf8)) as? [String: Any])
        #expect((object["shards"] as? [[String: Any]])?.compactMap { $0["length"] as? Int } == [5, 7])
    }
}

@Suite(.tags(.unit))
struct JSONLogLineTests {
    @Test func jobMetadataAndCountsPerReasonAreFieldsOfTheLine() throws {
        let data = try #require(
            JSONLogHandler.line(
                date: Date(timeIntervalSince1970: 0), level: .info, label: "volley.worker", message: "job done",
                metadata: [
                    "job": "j1", "entry": "1-0", "org": "00D1", "app": "A",
                    "rejectedByReason": .dictionary(["Unregistered": "3", "BadDeviceToken": "1"]),
                ]))
        let object = try #require(try JSONSerialization.jsonObject(with: data) as? [String: Any])
        #expect(object["job"] as? String == "j1")
        #expect(object["org"] as? String == "00D1")
        #expect(object["msg"] as? String == "job done")
        #expect((object["rejectedByReason"] as? [String: String]) == ["Unregistered": "3", "BadDeviceToken": "1"])
    }
}
