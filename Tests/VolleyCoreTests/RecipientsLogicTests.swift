import Foundation
import Testing
import VolleyTestTags

@testable import VolleyCore

@Test(.tags(.unit)) func closureWalksNestedGroupsWithCycleOnce() throws {
    // g1 → g2 → g3 → g1 (cycle), g1 → q1 → g2 (diamond), t1 standalone
    let graph: [RecipientID: [RecipientID]] = ["g1": ["g2", "q1"], "g2": ["g3"], "g3": ["g1"], "q1": ["g2"], "t1": []]
    var calls = 0
    let order = try ContainerClosure.compute(roots: ["g1", "t1", "g1"]) { level in
        calls += 1
        return level.map { graph[$0] ?? [] }
    }
    #expect(Set(order) == ["g1", "g2", "g3", "q1", "t1"])
    #expect(order.count == 5)
    #expect(calls == 3) // levels: {g1,t1} → {g2,q1} → {g3}
}

@Test(.tags(.unit)) func closureStopsARunawayGraph() {
    #expect(throws: DirectoryError.self) {
        _ = try ContainerClosure.compute(roots: ["0"], maxContainers: 100) { level in
            level.map { [RecipientID(String(Int($0.rawValue)! + 1))] }
        }
    }
}

@Test(.tags(.unit)) func directoryRecordDecodesAndValidates() throws {
    let r = try JSONDecoder().decode(
        DirectoryRecord.self, from: Data(#"{"org":"o","kind":"accountTeam","id":"001A","members":["u1","u2"]}"#.utf8))
    #expect(r.kind == .accountTeam && r.members == ["u1", "u2"] && r.problems().isEmpty)
    let bad = DirectoryRecord(org: "o", kind: .user, id: "u1", members: ["u2"])
    #expect(!bad.problems().isEmpty)
    #expect(throws: DecodingError.self) {
        _ = try JSONDecoder().decode(DirectoryRecord.self, from: Data(#"{"org":"o","kind":"team","id":"x"}"#.utf8))
    }
}

@Test(.tags(.unit)) func quotaHourFollowsTheUTCClock() {
    // 2026-11-22T04:59:59Z and 05:00:00Z
    let before = Date(timeIntervalSince1970: 1_795_323_599)
    let after = Date(timeIntervalSince1970: 1_795_323_600)
    let h1 = QuotaHour(containing: before)
    let h2 = QuotaHour(containing: after)
    #expect(h1.label == "2026112204")
    #expect(h2.label == "2026112205")
    #expect(h2.index == h1.index + 1)
    #expect(h1.ttlSeconds(at: before, grace: 0) == 1)
    #expect(h2.ttlSeconds(at: after, grace: 60) == 3660)
    #expect(QuotaHour(containing: Date(timeIntervalSince1970: 1_795_323_600 + 3599)) == h2)
}

@Test(.tags(.unit)) func quotaGrantRetriesOnlyWhileSomethingIsPending() {
    let h = QuotaHour(index: 1)
    #expect(QuotaGrant(granted: 0, denied: 5, pending: 3, hour: h, limit: 10).shouldRetryDenied)
    #expect(!QuotaGrant(granted: 0, denied: 5, pending: 0, hour: h, limit: 10).shouldRetryDenied)
    #expect(!QuotaGrant(granted: 5, denied: 0, pending: 5, hour: h, limit: 10).shouldRetryDenied)
}

@Test(.tags(.unit)) func inboxMarkFollowsSalesforceRules() throws {
    #expect(throws: InboxError.self) { _ = try InboxMark(.ids(["n1"]), read: true, seen: false) }
    #expect(throws: InboxError.self) { _ = try InboxMark(.ids(["n1"]), read: nil, seen: nil) }
    #expect(throws: InboxError.self) { _ = try InboxMark(.ids((0..<51).map(String.init)), read: true, seen: nil) }
    let m = try InboxMark(.ids(["n1"]), read: true, seen: nil)
    #expect(m.seen == true)
    let u = try InboxMark(.before(Date()), read: false, seen: nil)
    #expect(u.seen == nil && u.read == false)
}

@Test(.tags(.unit)) func inboxClipsTitleAndBody() {
    let c = InboxContent(
        id: "n", type: nil, title: String(repeating: "é", count: 300), body: String(repeating: "x", count: 800),
        target: nil, createdAt: Date())
    #expect(c.title.count == 250 && c.body.count == 750)
}

@Test(
    .tags(.unit),
    arguments: [
        (nil as String?, nil as NotificationType?, nil as NotificationAppSetting?, "push"),
        ("t", nil, nil, "not"),
        // An app reaches a custom type's recipients only when subscribed to it (enabled: true).
        ("t", NotificationType(id: "t", name: "T"), nil, "not"),
        ("t", NotificationType(id: "t", name: "T"), NotificationAppSetting(), "not"),
        ("t", NotificationType(id: "t", name: "T"), NotificationAppSetting(enabled: true), "push"),
        ("t", NotificationType(id: "t", name: "T"), NotificationAppSetting(enabled: false), "not"),
        ("t", NotificationType(id: "t", name: "T"), NotificationAppSetting(pushEnabled: false), "not"),
        ("t", NotificationType(id: "t", name: "T"), NotificationAppSetting(enabled: true, pushEnabled: false), "inbox"),
        ("t", NotificationType(id: "t", name: "T", mobile: false, desktop: true), nil, "not"),
        ("t", NotificationType(id: "t", name: "T", mobile: false, desktop: true), .init(enabled: true), "inbox"),
    ])
func deliveryPolicy(typeID: String?, type: NotificationType?, setting: NotificationAppSetting?, expected: String) {
    let p = DeliveryPolicy.decide(typeID: typeID, type: type, setting: setting, app: "app")
    switch (p, expected) {
    case (.pushAndInbox, "push"), (.inboxOnly, "inbox"), (.notEnabled, "not"): break
    default: Issue.record("got \(p), expected \(expected)")
    }
}

/// The report of a job of a type its app is not subscribed to says so, naming the app, the type and the fix.
@Test(.tags(.unit)) func anUnsubscribedAppsJobIsNotEnabledAndSaysWhy() {
    let p = DeliveryPolicy.decide(typeID: "t", type: NotificationType(id: "t", name: "T"), setting: nil, app: "sales")
    guard case .notEnabled(let why) = p else {
        Issue.record("got \(p)")
        return
    }
    #expect(why.contains("app sales is not subscribed to notification type 't'"))
    #expect(why.contains("--enabled true"))
}
