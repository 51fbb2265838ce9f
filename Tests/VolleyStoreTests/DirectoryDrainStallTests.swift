import Foundation
import Logging
import Testing
import VolleyCore
import VolleyRedis
import VolleyTestDoubles
import VolleyTestSupport
import VolleyTestTags

@testable import VolleyStore

/// A drain on the test's thread while the test acts on Redis.
private final class DrainBox: @unchecked Sendable {
    let batches: any UserBatches
    init(_ batches: any UserBatches) { self.batches = batches }
}

/// The directory's drain under a Redis that stalls: a step the client sends again answers the same users, so a
/// stall neither loses nor repeats a recipient.
@Suite(.tags(.integration)) struct DirectoryDrainStallTests {
    func seed(_ dir: RedisDirectory, users n: Int) throws -> [UserID] {
        let users = (0..<n).map { UserID("u\($0)") }
        var records = users.map { DirectoryRecord(org: "o1", kind: .user, id: RecipientID($0.rawValue)) }
        var group = DirectoryRecord(org: "o1", kind: .group, id: "g")
        group.members = users.map { RecipientID($0.rawValue) }
        records.append(group)
        try dir.importRecords(records)
        return users
    }

    func evalshaCalls(_ fx: RedisServerFixture) throws -> Int {
        let info = try fx.client().checked(["INFO", "commandstats"]).string ?? ""
        guard let line = info.split(whereSeparator: \.isNewline).first(where: { $0.hasPrefix("cmdstat_evalsha:") }),
            let calls = line.split(separator: ",").first?.split(separator: "=").last, let n = Int(calls)
        else { return 0 }
        return n
    }

    @Test func aDrainStepSentTwiceAnswersTheSameUsers() throws {
        let fx = try RedisServerFixture()
        defer { fx.stop() }
        let dir = RedisDirectory(client: fx.client())
        let users = try seed(dir, users: 25)
        _ = try dir.prepare(org: "o1", recipients: ["g"], scope: "job-1")
        let keys = RedisKeyGroups.directoryDrain(org: "o1", scope: "job-1")
        let first = try dir.drainStep(keys: keys, step: "d:1", max: 10)
        #expect(first.count == 10)
        #expect(try dir.drainStep(keys: keys, step: "d:1", max: 10) == first)
        let second = try dir.drainStep(keys: keys, step: "d:2", max: 10)
        #expect(second.count == 10 && Set(second).isDisjoint(with: first))
        #expect(try dir.drainStep(keys: keys, step: "d:2", max: 10) == second)
        let third = try dir.drainStep(keys: keys, step: "d:3", max: 10)
        #expect(Set(first + second + third) == Set(users) && third.count == 5)
        #expect(try dir.drainStep(keys: keys, step: "d:4", max: 10).isEmpty)
        // The drain leaves nothing behind: the set went with its last user, the last batch with the empty step.
        #expect(try fx.client().checked(["EXISTS"] + keys).integer == 0)
    }

    @Test func aStallDuringTheDrainLosesAndRepeatsNoUser() async throws {
        let fx = try RedisServerFixture()
        defer { fx.stop() }
        let users = try seed(RedisDirectory(client: fx.client()), users: 100)
        let log = CapturedLog()
        // Short timeouts: the stall outlasts the command timeout, as a 10.5 s stall outlasts the default 10 s.
        let client = RedisClient(
            endpoint: fx.endpoint,
            options: .init(
                connectTimeout: 0.2, commandTimeout: 0.2, initialBackoff: 0.02, maxBackoff: 0.1, giveUpAfter: 30),
            name: "drain", logger: log.logger)
        let dir = RedisDirectory(client: client)
        let box = DrainBox(try dir.open(org: "o1", recipients: ["g"], scope: "job-stall"))
        var got = try #require(try box.batches.next(max: 10))
        let callsBefore = try evalshaCalls(fx)
        // The next step is written while Redis is stopped: Redis runs it when it resumes, after the client gave up
        // waiting and sent it again on a new connection. A bare SPOP would pop two batches and lose one.
        fx.pause()
        let stalled = StartedThread { try box.batches.next(max: 10) }
        try await actWhen("the drain step timed out", timeout: .seconds(60)) {
            log.contains("redis connection lost")
        } then: {
            fx.resume()
        }
        got += try #require(try await stalled.value())
        #expect(try evalshaCalls(fx) == callsBefore + 2, "the step ran twice on the server")
        while let more = try box.batches.next(max: 10) { got += more }
        #expect(got.count == users.count)
        #expect(Set(got) == Set(users))
    }
}
