import Foundation
import Testing
import VolleyCore
import VolleyEngine
import VolleyTestDoubles
import VolleyTestTags

/// Jobs naming segments, `{"all": true}` and `exclude`, run by the engine on the in-memory backend and directory:
/// each user's devices get the notification once, exactly the audience's, and the report counts its users.
@Suite(.tags(.unit)) struct SegmentRunTests {
    let backend = InMemoryBackend()
    let directory = InMemoryDirectory()
    let ios = FakePushSender(platform: .ios)

    init() throws {
        let plans = ["gold", "silver", "gold", "bronze", "gold", "gold"]
        let cities = ["Berlin", "Berlin", "Bonn", "Berlin", "Berlin", "Berlin"]
        var records = (0..<6).map { i in
            DirectoryRecord(
                org: "org1", kind: .user, id: RecipientID("u\(i)"), active: i == 5 ? false : nil,
                attributes: ["plan": plans[i], "city": cities[i], "age": String(20 + 5 * i)])
        }
        records.append(DirectoryRecord(org: "org1", kind: .group, id: "team", members: ["u1", "u2"]))
        directory.importRecords(records)
        for i in 0..<6 {
            let user = UserID("u\(i)")
            backend.register(
                org: "org1", app: "app1", user: user,
                [Device(platform: .ios, token: DeviceToken("tok-u\(i)"), user: user)])
            directory.addDeviceUser(org: "org1", app: "app1", user)
        }
        directory.putSegment(
            org: "org1",
            try Segment(
                id: "gold-berlin",
                json: try JSONValue(
                    parsing: #"{"filters":[{"attribute":"plan","op":"eq","value":"gold"},"#
                        + #"{"attribute":"city","op":"eq","value":"Berlin"}]}"#)))
        directory.putSegment(
            org: "org1",
            try Segment(
                id: "over30", json: try JSONValue(parsing: #"{"filters":[{"attribute":"age","op":"gt","value":30}]}"#)))
    }

    func worker() -> PipelineWorker {
        let resolver = DirectoryRecipientResolver(
            directory: directory, inbox: nil, types: nil, attributes: directory, usersPerRead: 2)
        let c = WorkerConfiguration(
            consumer: "w1", concurrentJobs: 1, inFlight: 100, blockMillis: 20, reclaimIdleMillis: 60_000,
            reclaimIntervalMillis: 60_000, recordBatch: 10, chunkSize: 100)
        return PipelineWorker(
            configuration: c, backend: backend, apps: StaticAppDirectory(["app1": [.ios: ios]]), resolver: resolver)
    }

    func send(_ id: JobID, _ recipients: [RecipientEntry], exclude: [RecipientEntry]? = nil) async throws -> JobReport {
        var job = PushJob(id: id, org: "org1", app: "app1", notification: Notification(title: "t"))
        job.recipients = recipients
        job.exclude = exclude
        let before = backend.allReports.count
        _ = try backend.enqueue(job)
        try await waitUntil("the report of \(id)") { backend.allReports.count > before }
        return try #require(backend.allReports.last)
    }

    @Test func aSegmentLessAnExclusionReachesExactlyItsUsers() async throws {
        let w = worker()
        try w.start()
        defer { w.drain(deadline: 1) }
        // gold ∧ Berlin: u0, u4 (u5 is inactive).
        let gold = try await send("j1", [.segment("gold-berlin")])
        #expect(gold.users == 2 && gold.accepted == 2)
        #expect(Set(ios.perToken.keys) == ["tok-u0", "tok-u4"])
        // Everyone with a device, less the team and the over-30s (u3: 35, u4: 40, u5: 45): u0.
        let rest = try await send("j2", [.all], exclude: ["team", .segment("over30")])
        #expect(rest.users == 1 && ios.perToken["tok-u0"] == 2)
        // Ids and segments mix; a user reached twice is sent once; an unknown segment is reported.
        let mixed = try await send("j3", ["u1", .segment("gold-berlin"), "u0", .segment("nope")])
        #expect(mixed.users == 3 && mixed.accepted == 3)
        #expect(mixed.unknownRecipientIDs == ["segment:nope"])
        #expect(ios.perToken["tok-u1"] == 1 && ios.perToken["tok-u0"] == 3 && ios.perToken["tok-u4"] == 2)
    }

    @Test func theInMemoryDirectoryFollowsTheSegmentRule() throws {
        let (users, summary) = directory.resolve(
            org: "org1", audience: Audience(include: [.segment("over30"), "team"], exclude: ["u2"], app: "app1"))
        // over30: u3, u4 (u5 inactive); team: u1, u2; less u2.
        #expect(users == ["u1", "u3", "u4"] && summary.users == 3 && summary.containers == 1)
        let s = try #require(directory.segments(org: "org1").first { $0.id == "over30" })
        #expect(directory.count(org: "org1", s) == 2)
    }
}
