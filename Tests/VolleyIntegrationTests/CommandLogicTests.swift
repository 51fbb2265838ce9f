import Foundation
import Testing
import VolleyCore
import VolleyService
import VolleyStore
import VolleyTestSupport
import VolleyTestTags

@Suite(.tags(.integration)) struct CommandLogicTests {
    @Test func devicesImportReadsJSONLAndCSVAndReportsBadLines() throws {
        let h = try EngineHarness()
        defer { h.redis.stop() }
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent(
            "volley-import-\(UUID().uuidString.prefix(6))")
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: dir) }
        var jsonl = ""
        for i in 0..<2_500 {
            jsonl +=
                #"{"org":"o","app":"a","user":"u\#(i % 1000)","platform":"\#(i % 2 == 0 ? "ios" : "android")","toke"#
                + #"n":"t\#(i)","locale":"en"}"#
                + "\n"
        }
        jsonl += #"{"org":"o","app":"a","user":"x","platform":"windows","token":"t"}"# + "\n" + "not json\n"
        // A misspelt key refuses the line, naming the key, instead of importing a device without its token.
        jsonl += #"{"org":"o","app":"a","user":"y","platform":"ios","tokn":"t"}"# + "\n"
        let jsonlPath = dir.appendingPathComponent("d.jsonl").path
        try jsonl.write(toFile: jsonlPath, atomically: true, encoding: .utf8)
        var progressCalls = 0
        let r = try DeviceImport.run(path: jsonlPath, session: h.admin, batchSize: 1000) { _ in progressCalls += 1 }
        #expect(r.imported == 2_500)
        #expect(r.invalid == 3)
        #expect(r.problems.count == 3 && r.problems[0].hasPrefix("line 2501"))
        #expect(r.problems[2] == "line 2503: unknown key 'tokn' (did you mean 'token'?)")
        #expect(progressCalls == 3)
        let counts = try h.admin.counts(org: "o", app: "a")
        #expect(counts.users == 1000)
        #expect(counts.devices == 2_500)

        let csv =
            "org,app,user,platform,token,environment\no,a,u1,ios,csvtok1,sandbox\no,a,u2,android,csvtok2,\no,a,u3,i"
            + "os,,\n"
        let csvPath = dir.appendingPathComponent("d.csv").path
        try csv.write(toFile: csvPath, atomically: true, encoding: .utf8)
        let c = try DeviceImport.run(path: csvPath, session: h.admin)
        #expect(c.imported == 2)
        #expect(c.invalid == 1)
        let u1 = try h.admin.records(org: "o", app: "a", user: "u1")
        #expect(u1.contains { $0.token.rawValue == "csvtok1" && $0.environment == .sandbox })
        // Re-registering a token to another user moves it.
        try h.admin.register([
            DeviceImportRecord(org: "o", app: "a", user: "u9", platform: .ios, token: DeviceToken("csvtok1"))
        ])
        #expect(try !h.admin.records(org: "o", app: "a", user: "u1").contains { $0.token.rawValue == "csvtok1" })
        #expect(try h.admin.unregister(org: "o", app: "a", platform: .ios, token: DeviceToken("csvtok1")))
        #expect(try !h.admin.unregister(org: "o", app: "a", platform: .ios, token: DeviceToken("csvtok1")))
    }

    @Test func sendFlagsBuildJobs() throws {
        var o = JobSubmission.Options(org: "o", app: "a")
        o.users = ["u1", "u2"]
        o.title = "Hi"
        o.data = ["k=v"]
        o.platforms = ["ios"]
        let job = try JobSubmission.buildJob(o)
        #expect(job.recipients == ["u1", "u2"])
        #expect(job.notification.title == "Hi")
        #expect(job.notification.data?["k"] == .string("v"))
        #expect(job.platforms == [.ios])

        var silent = JobSubmission.Options(org: "o", app: "a")
        silent.tokens = ["android:tok"]
        silent.silent = true
        let s = try JobSubmission.buildJob(silent)
        #expect(s.devices == [JobDevice(platform: .android, token: DeviceToken("tok"))])
        #expect(s.notification.contentAvailable == true)

        var bad = JobSubmission.Options(org: "o", app: "a")
        bad.tokens = ["blackberry:tok"]
        bad.title = "x"
        #expect(throws: JobSubmission.InputError.self) { try JobSubmission.buildJob(bad) }
        var loudSilent = JobSubmission.Options(org: "o", app: "a")
        loudSilent.users = ["u"]
        loudSilent.silent = true
        loudSilent.title = "x"
        #expect(throws: JobSubmission.InputError.self) { try JobSubmission.buildJob(loudSilent) }
        var nothing = JobSubmission.Options(org: "o", app: "a")
        nothing.users = ["u"]
        #expect(throws: JobSubmission.InputError.self) { try JobSubmission.buildJob(nothing) }
        // --notification refuses a key the API and the workers would refuse, naming it.
        var typo = JobSubmission.Options(org: "o", app: "a")
        typo.users = ["u"]
        typo.notificationJSON = #"{"titel":"Hi","localized":{"es":{"bdy":"Hola"}}}"#
        #expect {
            try JobSubmission.buildJob(typo)
        } throws: { error in
            "\(error)".contains("'notification.titel' (did you mean 'title'?)")
                && "\(error)".contains("'notification.localized.es.bdy' (did you mean 'body'?)")
        }
    }

    /// A directory line with a key the record does not know is skipped, naming the key: `"activ": false` must not
    /// import an active user.
    @Test func directoryImportRefusesUnknownKeys() throws {
        let h = try EngineHarness()
        defer { h.redis.stop() }
        let path = FileManager.default.temporaryDirectory.appendingPathComponent(
            "volley-dir-\(UUID().uuidString.prefix(6)).jsonl"
        ).path
        defer { try? FileManager.default.removeItem(atPath: path) }
        try
            (#"{"org":"o","kind":"user","id":"u1"}"# + "\n" + #"{"org":"o","kind":"user","id":"u2","activ":false}"#
            + "\n").write(toFile: path, atomically: true, encoding: .utf8)
        let r = try DirectoryImport.run(path: path, into: RedisDirectory(client: h.redis.client(name: "dir"))) { _ in }
        #expect(r.counts.users == 1)
        #expect(r.skipped == ["line 2: unknown key 'activ' (did you mean 'active'?)"])
    }

    @Test func recordedOutcomesRoundTrip() {
        let cases: [DeliveryOutcome] = [
            .quotaExceeded,
            .rejected(status: 410, reason: "Unregistered", action: .removeToken),
            .failed(reason: "Timeout|odd", resendWasSafe: true),
        ]
        for c in cases {
            #expect(RecordedOutcome(c).encoded.flatMap(RecordedOutcome.init(encoded:))?.outcome == c)
        }
        // Accepted devices live in the accepted list, never in the hash.
        #expect(RecordedOutcome(.accepted).encoded == nil)
        #expect(RecordedOutcome(encoded: "a") == nil)
        #expect(RecordedOutcome(encoded: "zzz") == nil)
    }
}
