import Foundation
import Testing
import VolleyCore
import VolleyTestTags

private let start = Date(timeIntervalSince1970: 1_800_000_000)
private func token(_ name: String, at seconds: Double) -> FleetToken {
    FleetToken(value: "bearer " + name, issuedAt: start.addingTimeInterval(seconds))
}
private func at(_ seconds: Double) -> Date { start.addingTimeInterval(seconds) }

@Suite(.tags(.unit)) struct FleetTokenStateMachineTests {
    @Test func firstSendMintsUnderTheLeaseAndAdoptsWhatWasPublished() {
        var m = FleetTokenStateMachine()
        #expect(m.access(now: at(0)) == .syncFirst)
        #expect(m.read(shared: nil, now: at(0)) == .acquireLease)
        #expect(m.leaseAnswered(won: true, now: at(0)) == .mintAndPublish(replacing: nil))
        let mine = token("a", at: 0)
        #expect(m.published(mine, now: at(0)) == .use(mine))
        #expect(m.access(now: at(60)) == .use(mine))
        #expect(m.mode == .fleet)
    }

    @Test func aFreshSharedTokenIsAdoptedWithoutMinting() {
        var m = FleetTokenStateMachine()
        _ = m.access(now: at(600))
        let shared = token("fleet", at: 0)
        #expect(m.read(shared: shared, now: at(600)) == .use(shared))
        #expect(m.access(now: at(601)) == .use(shared))
    }

    @Test func theLoserOfTheLeaseWaitsForTheWinnersToken() {
        var m = FleetTokenStateMachine()
        _ = m.access(now: at(0))
        #expect(m.read(shared: nil, now: at(0)) == .acquireLease)
        // No token to send with yet: read again shortly instead of minting a second token.
        #expect(m.leaseAnswered(won: false, now: at(0)) == .readAgain(afterSeconds: m.policy.leaseWaitSeconds))
        let winner = token("winner", at: 0)
        #expect(m.read(shared: winner, now: at(0.05)) == .use(winner))
    }

    @Test func refreshAtFiftyMinutesKeepsTheOldTokenWhileAnotherWorkerMints() {
        var m = FleetTokenStateMachine()
        let old = token("old", at: 0)
        _ = m.access(now: at(0))
        _ = m.read(shared: old, now: at(0))
        #expect(m.access(now: at(49 * 60)) == .use(old))
        // Due at 50 minutes: one background sync, sends keep the old token meanwhile.
        #expect(m.access(now: at(50 * 60)) == .useAndSync(old))
        #expect(m.access(now: at(50 * 60 + 1)) == .use(old))
        #expect(m.read(shared: old, now: at(50 * 60 + 1)) == .acquireLease)
        #expect(m.leaseAnswered(won: false, now: at(50 * 60 + 1)) == .use(old))
        // The next sync comes after the lease wait, and adopts the winner's token.
        #expect(m.access(now: at(50 * 60 + 1.01)) == .use(old))
        #expect(m.access(now: at(50 * 60 + 2)) == .useAndSync(old))
        let new = token("new", at: 50 * 60 + 1)
        #expect(m.read(shared: new, now: at(50 * 60 + 2)) == .use(new))
    }

    @Test func theWinnerReplacesTheTokenItRead() {
        var m = FleetTokenStateMachine()
        let old = token("old", at: 0)
        _ = m.access(now: at(0))
        _ = m.read(shared: old, now: at(0))
        _ = m.access(now: at(3000))
        #expect(m.read(shared: old, now: at(3000)) == .acquireLease)
        #expect(m.leaseAnswered(won: true, now: at(3000)) == .mintAndPublish(replacing: old))
        // Another worker won the compare-and-set: its token is used, ours is never sent.
        let theirs = token("theirs", at: 3000)
        #expect(m.published(theirs, now: at(3000)) == .use(theirs))
    }

    @Test(arguments: [
        // (seconds since the rejected token's iat, the store's token is the rejected one, expected)
        (600.0, true, "keep"), (1200.0, true, "mint"), (600.0, false, "use"),
    ])
    func expiredProviderTokenComparesAndSets(age: Double, stillCurrent: Bool, expected: String) {
        var m = FleetTokenStateMachine()
        let rejected = token("rejected", at: 0)
        let newer = token("newer", at: age - 1)
        _ = m.access(now: at(0))
        _ = m.read(shared: rejected, now: at(0))
        let action = m.rejected(rejected.value, current: stillCurrent ? rejected : newer, now: at(age))
        switch expected {
        case "keep": #expect(action == nil)
        case "mint": #expect(action == .mintAndPublish(replacing: rejected))
        default: #expect(action == .use(newer))
        }
    }

    @Test func anUnreachableStoreFallsBackToAnOwnTokenAndTriesAgainLater() {
        var m = FleetTokenStateMachine()
        _ = m.access(now: at(0))
        #expect(m.storeFailed(now: at(0)) == .mintOwn)
        let own = token("own", at: 0)
        m.mintedOwn(own)
        #expect(m.mode == .fallback(retryAt: at(m.policy.storeRetrySeconds)))
        #expect(m.access(now: at(10)) == .use(own))
        #expect(m.access(now: at(m.policy.storeRetrySeconds)) == .useAndSync(own))
        // Still down: the own token is fresh, keep it (no second token).
        #expect(m.storeFailed(now: at(m.policy.storeRetrySeconds)) == .use(own))
        // Back: the fleet's token is adopted.
        _ = m.access(now: at(2 * m.policy.storeRetrySeconds))
        let fleet = token("fleet", at: 5)
        #expect(m.read(shared: fleet, now: at(2 * m.policy.storeRetrySeconds)) == .use(fleet))
        #expect(m.mode == .fleet)
    }

    @Test func aFleetTokenStillFreshIsKeptWhenTheStoreFails() {
        var m = FleetTokenStateMachine()
        let shared = token("fleet", at: 0)
        _ = m.access(now: at(0))
        _ = m.read(shared: shared, now: at(0))
        _ = m.access(now: at(3000))
        // The refresh at 50 min cannot reach the store: the token is 50 min old, so a token of our own is minted.
        #expect(m.storeFailed(now: at(3000)) == .mintOwn)
        var n = FleetTokenStateMachine()
        _ = n.access(now: at(0))
        _ = n.read(shared: shared, now: at(0))
        #expect(n.storeFailed(now: at(60)) == .use(shared))
    }
}

@Suite(.tags(.unit)) struct FleetPauseStateMachineTests {
    @Test func retryAfterSetsThePause() {
        var m = FleetPauseStateMachine()
        #expect(m.holdSeconds(now: at(0)) == nil)
        #expect(m.throttled(retryAfterSeconds: 3, now: at(0), random: 0.5) == at(3))
        #expect(m.holdSeconds(now: at(1)) == 2)
        #expect(m.holdSeconds(now: at(3)) == nil)
    }

    @Test func thePauseOnlyMovesLater() {
        var m = FleetPauseStateMachine()
        _ = m.throttled(retryAfterSeconds: 10, now: at(0), random: 0)
        #expect(m.throttled(retryAfterSeconds: 3, now: at(1), random: 0) == nil)
        #expect(m.until == at(10))
        m.sharedRead(at(5))
        #expect(m.until == at(10))
        m.sharedRead(at(20))
        #expect(m.until == at(20))
        m.sharedRead(nil)
        #expect(m.until == at(20))
    }

    @Test func withoutRetryAfterTheBackOffDoublesWithJitterAndResetsWhenQuiet() {
        var m = FleetPauseStateMachine(baseSeconds: 1, maxSeconds: 60, resetAfterSeconds: 30)
        // random 1: the whole back-off; 0: half of it.
        #expect(m.throttled(retryAfterSeconds: nil, now: at(0), random: 1) == at(1))
        #expect(m.throttled(retryAfterSeconds: nil, now: at(1), random: 1) == at(3))
        #expect(m.throttled(retryAfterSeconds: nil, now: at(3), random: 0) == at(5))
        #expect(m.consecutive == 3)
        // Quiet for more than 30 s after the pause ended: back to 1 s.
        #expect(m.throttled(retryAfterSeconds: nil, now: at(100), random: 1) == at(101))
        #expect(m.consecutive == 1)
    }

    @Test func aLongRetryAfterIsCapped() {
        var m = FleetPauseStateMachine(maxSeconds: 60)
        #expect(m.throttled(retryAfterSeconds: 3600, now: at(0), random: 0) == at(60))
    }

    @Test func theGatePublishesOnlyPausesThatMovedLater() {
        let published = PublishedPauses()
        let pauses = FleetPauses { key, until in published.add(key, until) }
        let clock = ManualClock(start)
        let gate = pauses.gate(for: FleetPauseKey(provider: .fcm, target: "p"))
        #expect(pauses.gate(for: FleetPauseKey(provider: .fcm, target: "p")) === gate)
        #expect(gate.holdSeconds(clock: clock) == nil)
        gate.throttled(retryAfter: "3", clock: clock)
        gate.throttled(retryAfter: "1", clock: clock)
        #expect(published.all.map(\.1) == [at(3)])
        #expect(gate.holdSeconds(clock: clock) == 3)
        clock.advance(by: 3)
        #expect(gate.holdSeconds(clock: clock) == nil)
        gate.sharedRead(at(5))
        #expect(gate.holdSeconds(clock: clock) == 2)
    }
}

final class PublishedPauses: @unchecked Sendable {
    private let lock = NSLock()
    private var items: [(FleetPauseKey, Date)] = []
    func add(_ k: FleetPauseKey, _ d: Date) { lock.withLock { items.append((k, d)) } }
    var all: [(FleetPauseKey, Date)] { lock.withLock { items } }
}

/// The budget script's arithmetic, in memory.
final class MemoryBudgetStore: FleetBudgetStore, @unchecked Sendable {
    private let lock = NSLock()
    private var used: [Int64: Int] = [:]
    func takeBudget(_ key: FleetPauseKey, window: Int64, count: Int, limit: Int) throws -> Int {
        lock.withLock {
            let grant = min(count, limit - used[window, default: 0])
            if grant <= 0 { return 0 }
            used[window, default: 0] += grant
            return grant
        }
    }
}

@Suite(.tags(.unit)) struct FleetBudgetGateTests {
    @Test func twoWorkersTogetherSendNoMoreThanTheSecondsBudget() throws {
        let store = MemoryBudgetStore()
        let clock = ManualClock(start)
        // 960 a minute: 16 a second, taken in blocks of 2.
        let a = FleetBudgetGate(key: FleetPauseKey(provider: .fcm, target: "p"), perMinute: 960, wake: {})
        let b = FleetBudgetGate(key: FleetPauseKey(provider: .fcm, target: "p"), perMinute: 960, wake: {})
        #expect(a.perSecond == 16 && a.block == 2)
        // Nothing taken yet: a short wait while the refill is asked for.
        #expect(a.take(clock: clock) == 0.005)
        var sent = 0
        for i in 0..<200 {
            let gate = i % 2 == 0 ? a : b
            if gate.take(clock: clock) == nil { sent += 1 } else { try gate.refill(from: store, clock: clock) }
        }
        #expect(sent == 16)
        // The second is spent: both wait for the next one.
        #expect(a.take(clock: clock) == 1.0)
        #expect(b.take(clock: clock) == 1.0)
        clock.advance(by: 1)
        #expect(a.take(clock: clock) == 0.005)
        try a.refill(from: store, clock: clock)
        #expect(a.take(clock: clock) == nil)
    }
}
