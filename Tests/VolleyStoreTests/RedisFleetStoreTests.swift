import Foundation
import Testing
import VolleyCore
import VolleyRedis
import VolleyTestDoubles
import VolleyTestSupport
import VolleyTestTags

@testable import VolleyStore

/// The fleet's scripts against a real redis-server.
@Suite(.tags(.integration)) struct RedisFleetStoreTests {
    let credential = FleetCredential(teamID: "TEAM", keyID: "KEY")

    @Test func onlyOneWorkerGetsTheLeaseAndTheCompareAndSetKeepsOneToken() throws {
        let redis = try RedisServerFixture()
        defer { redis.stop() }
        let clock = ManualClock(Date(timeIntervalSince1970: 1_800_000_000))
        let store = RedisFleetStore(client: redis.client(), clock: clock)
        #expect(try store.currentToken(for: credential) == nil)
        #expect(try store.acquireMintLease(for: credential, owner: "a", seconds: 10))
        #expect(try !store.acquireMintLease(for: credential, owner: "b", seconds: 10))
        let a = FleetToken(value: "bearer a", issuedAt: clock.now())
        #expect(try store.publish(a, replacing: nil, for: credential, owner: "a", minimumIntervalSeconds: 1200) == a)
        #expect(try store.currentToken(for: credential) == a)
        // The lease went with the publish.
        #expect(try store.acquireMintLease(for: credential, owner: "c", seconds: 10))
        // A second minter that read "none" loses: the current token stays.
        let b = FleetToken(value: "bearer b", issuedAt: clock.now())
        #expect(try store.publish(b, replacing: nil, for: credential, owner: "b", minimumIntervalSeconds: 1200) == a)
        // Replacing the current token within 20 minutes of its iat is refused, after that it is allowed once.
        let early = FleetToken(value: "bearer early", issuedAt: clock.now().addingTimeInterval(600))
        #expect(try store.publish(early, replacing: a, for: credential, owner: "c", minimumIntervalSeconds: 1200) == a)
        let later = FleetToken(value: "bearer later", issuedAt: clock.now().addingTimeInterval(1200))
        #expect(
            try store.publish(later, replacing: a, for: credential, owner: "c", minimumIntervalSeconds: 1200) == later)
        let late = FleetToken(value: "bearer late", issuedAt: clock.now().addingTimeInterval(1300))
        #expect(
            try store.publish(late, replacing: a, for: credential, owner: "d", minimumIntervalSeconds: 1200) == later)
        // The token expires an hour after its iat.
        let ttl = try redis.client().checked(["PTTL", FleetKeys.apnsToken(credential)]).integer ?? 0
        #expect(ttl > 4_700_000 && ttl <= 4_800_000)
    }

    @Test func aPauseOnlyMovesLaterAndTheBudgetGrantsNoMoreThanTheWindow() throws {
        let redis = try RedisServerFixture()
        defer { redis.stop() }
        let now = Date()
        let store = RedisFleetStore(client: redis.client(), clock: SystemClock())
        let key = FleetPauseKey(provider: .fcm, target: "project")
        let other = FleetPauseKey(provider: .apns, target: "topic")
        #expect(try store.pauses([key, other]).isEmpty)
        let t3 = now.addingTimeInterval(3)
        let t1 = now.addingTimeInterval(1)
        #expect(abs(try store.extendPause(key, until: t3).timeIntervalSince(t3)) < 0.002)
        #expect(abs(try store.extendPause(key, until: t1).timeIntervalSince(t3)) < 0.002)
        let read = try store.pauses([key, other])
        #expect(read.count == 1)
        #expect(abs((read[key] ?? .distantPast).timeIntervalSince(t3)) < 0.002)
        #expect(try store.takeBudget(key, window: 7, count: 6, limit: 10) == 6)
        #expect(try store.takeBudget(key, window: 7, count: 6, limit: 10) == 4)
        #expect(try store.takeBudget(key, window: 7, count: 6, limit: 10) == 0)
        #expect(try store.takeBudget(key, window: 8, count: 6, limit: 10) == 6)
    }

    @Test func aWaitingWorkerLearnsOfAnAnnouncedPauseAtOnce() async throws {
        let redis = try RedisServerFixture()
        defer { redis.stop() }
        let key = FleetPauseKey(provider: .fcm, target: "proj")
        let publisher = RedisFleetStore(client: redis.client())
        let watcher = RedisFleetStore(client: redis.client())
        // Nothing announced: the wait runs out with no event and the same position.
        let none = try watcher.pauseEvents(after: "0", blockMillis: 10)
        #expect(none.events.isEmpty && none.lastID == "0")
        // A watcher blocked from now on (`$`) wakes with the announcement, well before its 20 s block runs out.
        let until = Date(timeIntervalSince1970: 1_800_000_003.5)
        // On a thread of its own: a blocking read on the cooperative pool may not start while other suites hold it.
        let woke = StartedThread { try watcher.pauseEvents(after: "$", blockMillis: 20_000) }
        // The watcher's XREAD is blocked once Redis lists a client waiting on the stream; the announcement follows at
        // once, from a thread of its own (a poll from the cooperative pool may come after the block ran out).
        let poller = redis.client()
        try await actWhen("the watcher blocked on the stream", timeout: .seconds(10)) {
            (try poller.checked(["INFO", "clients"]).string ?? "").contains("blocked_clients:1")
        } then: {
            try publisher.announcePause(key, until: until)
        }
        let got = try await woke.value()
        #expect(got.events.count == 1)
        #expect(got.events.first?.key == FleetKeys.pause(key))
        #expect(got.events.first?.until == until)
        // Continuing after the last id seen finds nothing new.
        #expect(try watcher.pauseEvents(after: got.lastID, blockMillis: 10).events.isEmpty)
    }

    @Test func everyScriptsKeysShareOneSlot() {
        for (_, keys) in FleetKeys.scriptKeys(credential, FleetPauseKey(provider: .fcm, target: "p")) {
            let tags = Set(keys.map { $0.split(separator: "{").dropFirst().first?.split(separator: "}").first })
            #expect(tags.count == 1, "\(keys)")
        }
    }
}
