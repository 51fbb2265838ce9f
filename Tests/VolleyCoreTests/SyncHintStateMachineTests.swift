import Foundation
import Testing
import VolleyCore
import VolleyTestTags

/// When waiting sync hints become a push, on a manual clock: the first at once, later ones merged until the interval
/// has passed, at most `maxPerHour` in any rolling hour, `fullSync` past the cap or the payload, a dead worker's
/// batch pushed again after its lease, and an ack that leaves nothing waiting forgets the key.
@Suite(.tags(.unit)) struct SyncHintStateMachineTests {
    let clock = ManualClock(Date(timeIntervalSince1970: 1_800_000_000))
    let config = SyncHintConfiguration(minIntervalSeconds: 180, maxPerHour: 3, maxRecordIds: 100, leaseSeconds: 30)

    /// The store's side, as the scripts keep it: ids by the hint id that last named them, the full-sync mark, the
    /// push times. Pushes happen when the machine says so.
    struct Model {
        var ids: [String: Int64] = [:]
        var full: Int64?
        var lastHint: Int64 = 0
        var lastPush: Date?
        var pushes: [Date] = []
        var sent: [[String]?] = []
        let cap: Int

        mutating func add(_ records: [String], now: Date) -> Int64 {
            lastHint = max(SyncHintID.milliseconds(now), lastHint + 1)
            if full != nil {
                full = lastHint
            } else {
                for r in records { ids[r] = lastHint }
                if ids.count > cap {
                    ids = [:]
                    full = lastHint
                }
            }
            return lastHint
        }

        mutating func ack(upTo: Int64) {
            ids = ids.filter { $0.value > upTo }
            if let f = full, f <= upTo { full = nil }
        }

        var window: SyncHintWindow {
            SyncHintWindow(waiting: ids.count, fullSync: full != nil, lastPush: lastPush, recentPushes: pushes)
        }

        /// Runs the machine once at `now`; answers what it decided.
        mutating func tick(_ m: SyncHintStateMachine, now: Date) -> SyncHintStateMachine.Action {
            let action = m.decide(window, now: now)
            if case .push(let fullSync) = action {
                sent.append(fullSync ? nil : ids.keys.sorted())
                ids = [:]
                full = nil
                lastPush = now
                pushes = pushes.filter { $0 > now - 3_600 } + [now]
            }
            return action
        }
    }

    @Test func theFirstHintAfterAQuietPeriodGoesAtOnce() {
        let m = SyncHintStateMachine(configuration: config)
        var s = Model(cap: 100)
        #expect(s.tick(m, now: clock.now()) == .forget)
        _ = s.add(["a"], now: clock.now())
        #expect(s.tick(m, now: clock.now()) == .push(fullSync: false))
        #expect(s.sent == [["a"]])
        // Quiet for longer than the interval: the next one goes at once too.
        clock.advance(by: 600)
        _ = s.add(["b"], now: clock.now())
        #expect(s.tick(m, now: clock.now()) == .push(fullSync: false))
        #expect(s.sent == [["a"], ["b"]])
    }

    @Test func laterHintsMergeUntilTheIntervalHasPassedThenOnePushCarriesTheUnion() {
        let m = SyncHintStateMachine(configuration: config)
        var s = Model(cap: 100)
        let start = clock.now()
        _ = s.add(["a"], now: start)
        #expect(s.tick(m, now: start) == .push(fullSync: false))
        for (i, id) in ["b", "c", "b", "d"].enumerated() {
            clock.advance(by: 30)
            _ = s.add([id], now: clock.now())
            #expect(s.tick(m, now: clock.now()) == .wait(until: start + 180), "hint \(i)")
        }
        clock.set(start + 179.999)
        #expect(s.tick(m, now: clock.now()) == .wait(until: start + 180))
        clock.set(start + 180)
        #expect(s.tick(m, now: clock.now()) == .push(fullSync: false))
        #expect(s.sent == [["a"], ["b", "c", "d"]])
        #expect(s.tick(m, now: clock.now()) == .forget)
    }

    @Test func atMostMaxPerHourInAnyRollingHourAndNothingBeyondIsDropped() {
        var roomy = config
        roomy.maxRecordIds = 10_000
        let m = SyncHintStateMachine(configuration: roomy)
        var s = Model(cap: 10_000)
        let start = clock.now()
        var pushTimes: [Date] = []
        // A change every 10 seconds for 2 hours; the machine is asked after each.
        var changed: Set<String> = []
        for i in 0..<720 {
            clock.set(start + Double(i) * 10)
            let id = "r\(i)"
            changed.insert(id)
            _ = s.add([id], now: clock.now())
            if case .push = s.tick(m, now: clock.now()) { pushTimes.append(clock.now()) }
        }
        // Then quiet: whatever waits goes when the rules allow.
        clock.advance(by: 3_600)
        if case .push = s.tick(m, now: clock.now()) { pushTimes.append(clock.now()) }
        for (i, t) in pushTimes.enumerated() {
            let inHour = pushTimes.filter { $0 > t - 3_600 && $0 <= t }.count
            #expect(inHour <= 3, "push \(i) at \(t.timeIntervalSince(start))s is the \(inHour)th within an hour")
            if i > 0 { #expect(t.timeIntervalSince(pushTimes[i - 1]) >= 180) }
        }
        // Pushes at 0, 180, 360, then at 3600, 3780, 3960 (each an hour after the one it replaces), then the rest.
        #expect(pushTimes.prefix(6).map { $0.timeIntervalSince(start) } == [0, 180, 360, 3_600, 3_780, 3_960])
        let pushed = Set(s.sent.compactMap { $0 }.joined())
        #expect(pushed == changed)
        #expect(s.sent.allSatisfy { $0 != nil })
    }

    @Test func pastMaxRecordIdsThePushSaysFullSync() {
        let m = SyncHintStateMachine(configuration: config)
        var s = Model(cap: 5)
        let start = clock.now()
        _ = s.add(["a"], now: start)
        _ = s.tick(m, now: start)
        clock.advance(by: 10)
        _ = s.add((0..<6).map { "x\($0)" }, now: clock.now())
        #expect(s.window.fullSync)
        clock.set(start + 180)
        #expect(s.tick(m, now: clock.now()) == .push(fullSync: true))
        #expect(s.sent == [["a"], nil])
        // A window the store did not cap but that holds more than the cap also pushes a full sync.
        let big = SyncHintWindow(waiting: 101, lastPush: nil)
        #expect(SyncHintStateMachine(configuration: config).decide(big, now: clock.now()) == .push(fullSync: true))
    }

    @Test func idsThatDoNotFitThePayloadBecomeFullSync() {
        let fits = (0..<100).map { "001x000000\(String(format: "%08d", $0))" }
        #expect(SyncHintPush.listed(fits) == fits)
        let long = (0..<100).map { String(repeating: "z", count: 100) + "\($0)" }
        #expect(SyncHintPush.listed(long) == nil)
        let job = SyncHintPush.job(
            org: OrgID("o"), batch: SyncHintBatch(key: .init(app: "a", user: "u", type: "T"), batch: 2, recordIds: long)
        )
        #expect(job.notification.data?["fullSync"] == .bool(true))
        #expect(job.notification.data?["recordIds"] == nil)
    }

    @Test func theSilentJobHasTheArticlesShape() throws {
        let key = SyncHintKey(app: AppName("app"), user: UserID("005x1"), type: "ACCOUNT_UPDATE")
        let batch = SyncHintBatch(key: key, batch: 7, recordIds: ["001a", "001b"])
        let job = SyncHintPush.job(org: OrgID("org1"), batch: batch)
        let n = job.notification
        #expect(n.isSilent)
        #expect(n.pushType == "background")
        #expect(n.priority == .normal)
        #expect(n.collapseId == "sync-ACCOUNT_UPDATE")
        #expect(n.ttl == SyncHintPush.ttlSeconds)
        #expect(
            n.data == ["type": .string("ACCOUNT_UPDATE"), "recordIds": .array([.string("001a"), .string("001b")])])
        #expect(job.recipientIDs == [RecipientID("005x1")])
        #expect(job.inbox == false)
        #expect(job.salesforcePayload == false)
        #expect(!job.storesInbox)
        try job.validate()
        // The same batch is the same job id; the next batch another.
        #expect(SyncHintPush.jobID(org: OrgID("org1"), batch: batch) == job.id)
        var next = batch
        next.batch = 8
        #expect(SyncHintPush.jobID(org: OrgID("org1"), batch: next) != job.id)
    }

    @Test func anAckCoversIdsNamedUpToItAndAnEmptyWindowIsForgotten() {
        let m = SyncHintStateMachine(configuration: config)
        var s = Model(cap: 100)
        let start = clock.now()
        _ = s.add(["a"], now: start)
        _ = s.tick(m, now: start)
        clock.advance(by: 10)
        let first = s.add(["b", "c"], now: clock.now())
        clock.advance(by: 10)
        _ = s.add(["c", "d"], now: clock.now())
        // The app synced up to the first of those hints: b goes; c was named again later, so it stays.
        s.ack(upTo: first)
        #expect(s.ids.keys.sorted() == ["c", "d"])
        // An ack by time covers the rest.
        s.ack(upTo: SyncHintID(upTo: clock.now().ISO8601Format())?.milliseconds ?? 0)
        #expect(s.ids.isEmpty)
        clock.set(start + 180)
        #expect(s.tick(m, now: clock.now()) == .forget)
        #expect(s.sent == [["a"]])
    }

    @Test func aBatchTakenByADeadWorkerIsPushedAgainAfterItsLease() {
        let m = SyncHintStateMachine(configuration: config)
        let taken = clock.now()
        let w = SyncHintWindow(waiting: 3, lastPush: taken, recentPushes: [taken], taken: (batch: 4, at: taken))
        #expect(m.decide(w, now: taken + 10) == .wait(until: taken + 30))
        #expect(m.decide(w, now: taken + 30) == .pushAgain(batch: 4))
    }

    @Test func upToReadsAHintIdOrAnRFC3339Time() {
        #expect(SyncHintID(upTo: "1800000000123") == SyncHintID(milliseconds: 1_800_000_000_123))
        #expect(SyncHintID(upTo: "2027-01-15T08:00:00Z") == SyncHintID(milliseconds: 1_800_000_000_000))
        #expect(SyncHintID(upTo: "2027-01-15T08:00:00.250Z")?.milliseconds == 1_800_000_000_250)
        #expect(SyncHintID(upTo: "yesterday") == nil)
        #expect(SyncHintID(upTo: "") == nil)
    }

    @Test(arguments: [
        (#"{"app":"a","users":[],"type":"T","recordIds":["1"]}"#, "users"),
        (#"{"app":"a","users":["u 1"],"type":"T","recordIds":["1"]}"#, "users[0]"),
        (#"{"app":"a","users":["u"],"type":"has space","recordIds":["1"]}"#, "type"),
        (#"{"app":"a","users":["u"],"type":"T","recordIds":[]}"#, "recordIds"),
        (#"{"app":"a","users":["u"],"type":"T","recordIds":["1",""]}"#, "recordIds[1]"),
    ])
    func aBadHintNamesItsField(json: String, field: String) throws {
        let hint = try SyncHintRequest(json: try JSONValue(parsing: json), at: [])
        #expect(hint.problem?.field == field)
    }
}
