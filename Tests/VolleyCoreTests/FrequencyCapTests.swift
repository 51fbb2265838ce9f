import Foundation
import Testing
import VolleyCore
import VolleyTestDoubles
import VolleyTestTags

/// Frequency caps as pure logic: windows as written, rules per type, rolling windows and idempotency per
/// notification on a manual clock, the in-memory store behind the engine's protocol, and the rules in force.
@Suite(.tags(.unit)) struct FrequencyCapTests {
    let org = OrgID("org1")

    func rules(_ list: [(String, Int, String?)]) throws -> [FrequencyCapRule] {
        try list.enumerated().map { i, r in
            try FrequencyCapRule.make(window: r.0, max: r.1, type: r.2, at: "rules[\(i)]")
        }
    }

    func plan(_ rules: [FrequencyCapRule], type: String? = nil, nid: String) throws -> FrequencyCapPlan {
        try #require(FrequencyCapPlan(rules: rules, type: type, notification: nid))
    }

    @Test(arguments: [("30m", 1800), ("1h", 3600), ("24h", 86_400), ("7d", 604_800), ("1m", 60), ("30d", 2_592_000)])
    func windowsParse(text: String, seconds: Int) throws {
        let w = try FrequencyWindow(parsing: text)
        #expect(w.seconds == seconds && w.text == text)
    }

    @Test(arguments: [
        "", "h", "1", "0h", "-1h", "1.5h", "1w", "31d", "59s", "1H", " 1h", "٣h", "99999999999999999999d",
    ])
    func badWindowsAreRefused(text: String) {
        #expect(throws: FrequencyCapError.self) { try FrequencyWindow(parsing: text) }
    }

    func json(_ text: String) throws -> JSONValue { try JSONValue(parsing: Array(text.utf8)) }

    @Test(arguments: [
        (#"[{"max": 3}]"#, "rules[0].window"),
        (#"[{"window": "2w", "max": 3}]"#, "rules[0].window"),
        (#"[{"window": 1, "max": 3}]"#, "rules[0].window"),
        (#"[{"window": "1h"}]"#, "rules[0].max"),
        (#"[{"window": "1h", "max": 0}]"#, "rules[0].max"),
        (#"[{"window": "1h", "max": 10001}]"#, "rules[0].max"),
        (#"[{"window": "1h", "max": 1.5}]"#, "rules[0].max"),
        (#"[{"window": "1h", "max": "3"}]"#, "rules[0].max"),
        (#"[{"window": "1h", "max": 3}, {"window": "1h", "max": 3, "type": ""}]"#, "rules[1].type"),
        (#"[{"window": "1h", "max": 3, "kind": "x"}]"#, "rules[0].kind"),
        (#"["1h"]"#, "rules[0]"),
        (#"{"window": "1h"}"#, "rules"),
        (#"[{"window": "1h", "max": 3}, {"window": "60m", "max": 2}]"#, "rules[1]"),
    ])
    func ruleErrorsNameTheField(body: String, field: String) throws {
        let value = try json(body)
        #expect(throws: FrequencyCapError.self) { try FrequencyCapRule.list(json: value, at: "rules") }
        do { _ = try FrequencyCapRule.list(json: value, at: "rules") } catch { #expect(error.field == field) }
    }

    @Test func atMostTwentyRules() throws {
        let list = (1...21).map { #"{"window": "\#($0)h", "max": 1}"# }.joined(separator: ",")
        #expect(throws: FrequencyCapError("rules", "at most 20 rules per org, got 21")) {
            try FrequencyCapRule.list(json: try json("[\(list)]"), at: "rules")
        }
    }

    @Test func rulesRoundTripThroughJSON() throws {
        let list = try rules([("1h", 3, nil), ("7d", 10, "ORDER_SHIPPED")])
        let data = try JSONEncoder().encode(list)
        #expect(try JSONDecoder().decode([FrequencyCapRule].self, from: data) == list)
        #expect(try FrequencyCapRule.list(json: .array(list.map(\.json)), at: "rules") == list)
    }

    @Test func typedRulesApplyOnlyToTheirType() throws {
        let list = try rules([("1h", 3, nil), ("24h", 10, nil), ("1h", 1, "ORDER_SHIPPED")])
        let shipped = try plan(list, type: "ORDER_SHIPPED", nid: "n")
        #expect(shipped.scopes.map(\.type) == [nil, "ORDER_SHIPPED"])
        #expect(shipped.scopes[0].limits.count == 2 && shipped.scopes[0].longestSeconds == 86_400)
        let other = try plan(list, type: "PROMO", nid: "n")
        #expect(other.scopes.map(\.type) == [nil])
        #expect(
            FrequencyCapPlan(rules: try rules([("1h", 1, "ORDER_SHIPPED")]), type: "PROMO", notification: "n") == nil)
        #expect(FrequencyCapPlan(rules: try rules([("1h", 1, "ORDER_SHIPPED")]), type: nil, notification: "n") == nil)
    }

    @Test func aRollingWindowFreesRoomAsSendsAge() throws {
        let clock = ManualClock()
        let list = try rules([("1h", 2, nil)])
        var h = FrequencyCapHistory()
        #expect(h.admit(try plan(list, nid: "a"), now: clock.now()))
        clock.advance(by: 1200)
        #expect(h.admit(try plan(list, nid: "b"), now: clock.now()))
        clock.advance(by: 1200)
        #expect(!h.admit(try plan(list, nid: "c"), now: clock.now()))
        // Not a clock hour: "a" leaves the window exactly one hour after it was sent, not at the top of the hour.
        clock.advance(by: 1199)
        #expect(!h.admit(try plan(list, nid: "d"), now: clock.now()))
        clock.advance(by: 1)
        #expect(h.admit(try plan(list, nid: "e"), now: clock.now()))
        #expect(Set(h.sends[nil]?.keys.map { $0 } ?? []) == ["b", "e"])
    }

    @Test func everyRuleMustHaveRoom() throws {
        let clock = ManualClock()
        let list = try rules([("1h", 3, nil), ("24h", 4, nil)])
        var h = FrequencyCapHistory()
        var admitted = 0
        for i in 0..<12 {
            if h.admit(try plan(list, nid: "n\(i)"), now: clock.now()) { admitted += 1 }
            clock.advance(by: 1800)
        }
        // Three within any hour, four within the day: the fourth comes in the second hour, then nothing until the
        // first send is a day old.
        #expect(admitted == 4)
        clock.set(Date(timeIntervalSince1970: 1_800_000_000 + 86_400))
        #expect(h.admit(try plan(list, nid: "next-day"), now: clock.now()))
    }

    @Test func aTypedCapCountsOnlyItsTypeAndTheGeneralCapCountsEveryType() throws {
        let clock = ManualClock()
        let list = try rules([("1h", 3, nil), ("1h", 1, "ORDER_SHIPPED")])
        var h = FrequencyCapHistory()
        #expect(h.admit(try plan(list, type: "ORDER_SHIPPED", nid: "s1"), now: clock.now()))
        #expect(!h.admit(try plan(list, type: "ORDER_SHIPPED", nid: "s2"), now: clock.now()))
        #expect(h.admit(try plan(list, type: "PROMO", nid: "p1"), now: clock.now()))
        #expect(h.admit(try plan(list, nid: "plain"), now: clock.now()))
        // Three of every type within the hour: the general cap holds even a type without a cap of its own.
        #expect(!h.admit(try plan(list, type: "PROMO", nid: "p2"), now: clock.now()))
    }

    @Test func theSameNotificationIsCountedOnce() throws {
        let clock = ManualClock()
        let list = try rules([("1h", 2, nil)])
        var h = FrequencyCapHistory()
        #expect(h.admit(try plan(list, nid: "a"), now: clock.now()))
        clock.advance(by: 60)
        // A redelivery (or a second app sending the same nid) is admitted again without counting twice.
        #expect(h.admit(try plan(list, nid: "a"), now: clock.now()))
        #expect(h.admit(try plan(list, nid: "b"), now: clock.now()))
        #expect(h.admit(try plan(list, nid: "a"), now: clock.now()))
        #expect(h.admit(try plan(list, nid: "b"), now: clock.now()))
        #expect(!h.admit(try plan(list, nid: "c"), now: clock.now()))
        #expect(h.sends[nil]?.count == 2)
    }

    @Test func theStoreDecidesEachUserOfAChunk() throws {
        let store = InMemoryFrequencyCaps()
        let clock = ManualClock()
        let list = try rules([("1h", 1, nil)])
        let first = try store.admit(org: org, plan: try plan(list, nid: "a"), users: ["u1", "u2"], now: clock.now())
        #expect(first == [true, true])
        let second = try store.admit(org: org, plan: try plan(list, nid: "b"), users: ["u2", "u3"], now: clock.now())
        #expect(second == [false, true])
        // Another org's users are counted apart.
        #expect(try store.admit(org: "org2", plan: try plan(list, nid: "b"), users: ["u2"], now: clock.now()) == [true])
        #expect(store.admitCalls == 3)
    }

    @Test func aBypassingJobAndASilentPushGetNoPlan() throws {
        let store = InMemoryFrequencyCaps()
        let caps = FrequencyCaps(
            rulebook: FrequencyCapRulebook(
                configured: [org: try rules([("1h", 1, nil)])], stored: nil, clock: ManualClock()),
            store: store)
        var job = PushJob(org: org, app: "app1", recipients: ["u1"], notification: .init(title: "t", body: "b"))
        #expect(try caps.plan(for: job, notification: "j") != nil)
        job.enableFrequencyCap = false
        #expect(try caps.plan(for: job, notification: "j") == nil)
        job.enableFrequencyCap = true
        #expect(try caps.plan(for: job, notification: "j") != nil)
        job.notification = .init(contentAvailable: true)
        #expect(try caps.plan(for: job, notification: "j") == nil)
        job.notification = .init(title: "t", pushType: "background")
        #expect(try caps.plan(for: job, notification: "j") == nil)
        job.org = "other"
        job.notification = .init(title: "t")
        #expect(try caps.plan(for: job, notification: "j") == nil)
    }

    /// A raw silent push (an `apns` payload whose `aps` holds only `content-available`, as the Connect push
    /// resource and Apex-style jobs send) is not visible: neither counted nor capped, as a Volley-shaped silent job
    /// is not. A raw payload that shows something is counted.
    @Test func aRawSilentPushGetsNoPlan() throws {
        let caps = FrequencyCaps(
            rulebook: FrequencyCapRulebook(
                configured: [org: try rules([("1h", 1, nil)])], stored: nil, clock: ManualClock()),
            store: InMemoryFrequencyCaps())
        let silentAPS: JSONValue = .object(["aps": .object(["content-available": .number(1)]), "sfdc": .string("x")])
        // The job-level raw payload, and the Connect push's shape (the payload, and its keys as FCM data).
        var job = PushJob(org: org, app: "app1", recipients: ["u1"], notification: .init(), apns: silentAPS)
        #expect(job.effectiveNotification.isRawSilent)
        #expect(try caps.plan(for: job, notification: "j") == nil)
        job.fcm = .object(["data": .object(["aps": .string(#"{"content-available":1}"#)])])
        #expect(try caps.plan(for: job, notification: "j") == nil)
        // Raw payloads inside the notification count the same.
        job = PushJob(org: org, app: "app1", recipients: ["u1"], notification: .init(apns: silentAPS))
        #expect(try caps.plan(for: job, notification: "j") == nil)
        // Visible: an alert, a badge or a sound in `aps`, an FCM notification block, or text of the job's own.
        for aps: [String: JSONValue] in [
            ["content-available": .number(1), "alert": .string("Hi")],
            ["content-available": .number(1), "badge": .number(3)],
            ["alert": .object(["title": .string("Hi")])], ["sound": .string("default")],
        ] {
            job = PushJob(
                org: org, app: "app1", recipients: ["u1"], notification: .init(), apns: .object(["aps": .object(aps)]))
            #expect(try caps.plan(for: job, notification: "j") != nil, "\(aps)")
        }
        job = PushJob(
            org: org, app: "app1", recipients: ["u1"], notification: .init(), apns: silentAPS,
            fcm: .object(["notification": .object(["title": .string("Hi")])]))
        #expect(try caps.plan(for: job, notification: "j") != nil)
        job = PushJob(org: org, app: "app1", recipients: ["u1"], notification: .init(title: "Hi"), apns: silentAPS)
        #expect(try caps.plan(for: job, notification: "j") != nil)
        // A raw FCM data message alone may be one the app shows: counted.
        job = PushJob(
            org: org, app: "app1", recipients: ["u1"], notification: .init(),
            fcm: .object(["data": .object(["k": .string("v")])]))
        #expect(try caps.plan(for: job, notification: "j") != nil)
    }

    @Test func enableFrequencyCapIsReadFromAJob() throws {
        let json = try JSONValue(
            parsing: Array(
                #"{"org":"o","app":"a","recipients":["u"],"notification":{"title":"t"},"enableFrequencyCap":false}"#
                    .utf8))
        let job = try PushJob(json: json, defaultOrg: nil)
        #expect(job.enableFrequencyCap == false)
        #expect(JobKeys.unknownKeys(in: json.objectValue ?? [:]).isEmpty)
    }

    @Test func storedRulesReplaceTheFilesAndAreReadAtMostOncePerRefresh() async throws {
        let clock = ManualClock()
        let stored = InMemoryFrequencyCaps()
        let fromFile = try rules([("1h", 3, nil)])
        let book = FrequencyCapRulebook(
            configured: [org: fromFile, "org2": fromFile], stored: stored, clock: clock, refreshSeconds: 5)
        #expect(try book.rules(for: org) == fromFile)
        #expect(try book.rules(for: "org3") == [])
        #expect(stored.ruleReads == 1)
        try await stored.setRules(org: org, try rules([("1d", 1, nil)]))
        try await stored.setRules(org: "org2", [])
        clock.advance(by: 4.9)
        #expect(try book.rules(for: org) == fromFile)
        #expect(stored.ruleReads == 1)
        clock.advance(by: 0.1)
        #expect(try book.rules(for: org) == (try rules([("1d", 1, nil)])))
        // An empty stored list turns the file's caps off for that org.
        #expect(try book.rules(for: "org2") == [])
        #expect(stored.ruleReads == 2)
        _ = try await stored.removeRules(org: org)
        clock.advance(by: 5)
        #expect(try book.rules(for: org) == fromFile)
    }
}
