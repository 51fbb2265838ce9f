import Foundation
import Testing
import VolleyCore
import VolleyService
import VolleyStore
import VolleyTestDoubles
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
            let (platform, token) = i % 2 == 0 ? ("ios", String(format: "%064x", i)) : ("android", "t\(i)")
            jsonl +=
                #"{"org":"o","app":"a","user":"u\#(i % 1000)","platform":"\#(platform)","token":"\#(token)","#
                + #""locale":"en"}"#
                + "\n"
        }
        jsonl += #"{"org":"o","app":"a","user":"x","platform":"windows","token":"t"}"# + "\n" + "not json\n"
        // A misspelt key refuses the line, naming the key, instead of importing a device without its token.
        jsonl += #"{"org":"o","app":"a","user":"y","platform":"ios","tokn":"t"}"# + "\n"
        // A token of the wrong form for its platform, and a key that does not parse, are refused naming the field.
        jsonl += #"{"org":"o","app":"a","user":"y","platform":"ios","token":"ab12"}"# + "\n"
        jsonl += #"{"org":"o","app":"a","user":"y","platform":"android","token":"t1","rsaPublicKey":"AAAA"}"# + "\n"
        // A key in the SDKs' form (line breaks included) is kept in the registry's form.
        let keyLines = TestDeviceKeys.rsa2048Lines.replacingOccurrences(of: "\n", with: "\\n")
        jsonl +=
            #"{"org":"o","app":"a","user":"k","platform":"android","token":"tk","rsaPublicKey":"\#(keyLines)","#
            + #""cipherName":"RSA_OAEP_SHA256"}"# + "\n"
        let jsonlPath = dir.appendingPathComponent("d.jsonl").path
        try jsonl.write(toFile: jsonlPath, atomically: true, encoding: .utf8)
        var progressCalls = 0
        let r = try DeviceImport.run(path: jsonlPath, session: h.admin, batchSize: 1000) { _ in progressCalls += 1 }
        #expect(r.imported == 2_501)
        #expect(r.invalid == 5)
        #expect(r.problems.count == 5 && r.problems[0].hasPrefix("line 2501"))
        #expect(r.problems[2] == "line 2503: unknown key 'tokn' (did you mean 'token'?)")
        #expect(r.problems[3].hasPrefix("line 2504: token: invalid device token length"), "\(r.problems[3])")
        #expect(r.problems[4].hasPrefix("line 2505: rsaPublicKey: "), "\(r.problems[4])")
        #expect(progressCalls == 3)
        let counts = try h.admin.counts(org: "o", app: "a")
        #expect(counts.users == 1001)
        #expect(counts.devices == 2_501)
        let keyed = try h.admin.records(org: "o", app: "a", user: "k")
        #expect(keyed.first?.rsaPublicKey == TestDeviceKeys.rsa2048 && keyed.first?.cipherName == "RSA_OAEP_SHA256")

        let csvTok = String(repeating: "c1", count: 32)
        let csv =
            "org,app,user,platform,token,environment,rsaPublicKey\no,a,u1,ios,\(csvTok),sandbox,\n"
            + "o,a,u2,android,csvtok2,,\(TestDeviceKeys.rsa2048)\no,a,u3,ios,,,\no,a,u4,ios,csvtok4,,\n"
        let csvPath = dir.appendingPathComponent("d.csv").path
        try csv.write(toFile: csvPath, atomically: true, encoding: .utf8)
        let c = try DeviceImport.run(path: csvPath, session: h.admin)
        #expect(c.imported == 2)
        #expect(c.invalid == 2)
        let u1 = try h.admin.records(org: "o", app: "a", user: "u1")
        #expect(u1.contains { $0.token.rawValue == csvTok && $0.environment == .sandbox })
        let u2 = try h.admin.records(org: "o", app: "a", user: "u2")
        #expect(u2.first?.rsaPublicKey == TestDeviceKeys.rsa2048 && u2.first?.cipherName == nil)
        // Re-registering a token to another user moves it.
        try h.admin.register([
            DeviceImportRecord(org: "o", app: "a", user: "u9", platform: .ios, token: DeviceToken(csvTok))
        ])
        #expect(try !h.admin.records(org: "o", app: "a", user: "u1").contains { $0.token.rawValue == csvTok })
        #expect(try h.admin.unregister(org: "o", app: "a", platform: .ios, token: DeviceToken(csvTok)))
        #expect(try !h.admin.unregister(org: "o", app: "a", platform: .ios, token: DeviceToken(csvTok)))
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
        // Time and pacing: the job's own keys, each flag's fault named.
        var timed = JobSubmission.Options(org: "o", app: "a")
        timed.users = ["u"]
        timed.title = "Morning"
        timed.sendAt = "2026-12-01T09:00:00+01:00"
        timed.deliverAtLocalTime = "09:30"
        timed.throttlePerMinute = 1_019
        timed.bypassFrequencyCaps = true
        let t = try JobSubmission.buildJob(timed)
        #expect(
            t.sendAt?.text == "2026-12-01T09:00:00+01:00"
                && t.sendAt?.date == ScheduledTime("2026-12-01T08:00:00Z")?.date)
        #expect(t.deliverAtLocalTime?.description == "09:30")
        #expect(t.throttlePerMinute == 1_019 && t.enableFrequencyCap == false)
        typealias Change = (inout VolleyService.JobSubmission.Options) -> Void
        let faults: [(Change, String)] = [
            ({ $0.sendAt = "tomorrow" }, "--send-at"),
            ({ $0.deliverAtLocalTime = "9:30" }, "--deliver-at-local-time"),
            ({ $0.throttlePerMinute = 0 }, "--throttle-per-minute"),
        ]
        for (change, flag) in faults {
            var o = timed
            change(&o)
            #expect { try JobSubmission.buildJob(o) } throws: { "\($0)".hasPrefix(flag) }
        }
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
