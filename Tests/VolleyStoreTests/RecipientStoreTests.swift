import Foundation
import Testing
import VolleyCore
import VolleyRedis
import VolleyTestDoubles
import VolleyTestSupport
import VolleyTestTags

@testable import VolleyStore

private func jsonl(_ s: String) throws -> [DirectoryRecord] {
    try s.split(separator: "\n").map { try JSONDecoder().decode(DirectoryRecord.self, from: Data($0.utf8)) }
}

/// The directory of the issue's first test: nested groups with a cycle, a queue containing a group,
/// account and opportunity teams, inactive users, duplicates across recipients.
private let sampleDirectory = """
    {"org":"o1","kind":"user","id":"u1"}
    {"org":"o1","kind":"user","id":"u2"}
    {"org":"o1","kind":"user","id":"u3","active":false}
    {"org":"o1","kind":"user","id":"u4"}
    {"org":"o1","kind":"user","id":"u5"}
    {"org":"o1","kind":"user","id":"u6"}
    {"org":"o1","kind":"user","id":"u7"}
    {"org":"o1","kind":"user","id":"u8","active":false}
    {"org":"o1","kind":"group","id":"gA","members":["u1","gB"]}
    {"org":"o1","kind":"group","id":"gB","members":["u2","u3","gC"]}
    {"org":"o1","kind":"group","id":"gC","members":["u4","gA"]}
    {"org":"o1","kind":"queue","id":"q1","members":["u5","gC"]}
    {"org":"o1","kind":"accountTeam","id":"001ACC","members":["u6","u1"]}
    {"org":"o1","kind":"opportunityTeam","id":"006OPP","members":["u7","u8","u2"]}
    {"org":"o2","kind":"group","id":"gA","members":["x1"]}
    """

@Test(.tags(.integration)) func resolvesMixedRecipientsToEachActiveUserOnce() throws {
    let fx = try RedisServerFixture()
    defer { fx.stop() }
    let dir = RedisDirectory(client: fx.client())
    let counts = try dir.importRecords(try jsonl(sampleDirectory))
    #expect(counts.records == 15 && counts.users == 8 && counts.inactiveUsers == 2 && counts.containers == 7)

    var got: [UserID] = []
    let summary = try dir.resolve(
        org: "o1", recipients: ["q1", "gA", "001ACC", "006OPP", "u1", "u3", "nobody", "gA"],
        scope: "job-1", chunkSize: 2
    ) { chunk in
        #expect(chunk.count <= 2)
        got += chunk
    }
    #expect(got.count == Set(got).count) // once each
    #expect(Set(got) == ["u1", "u2", "u4", "u5", "u6", "u7"])
    #expect(summary.users == 6)
    #expect(summary.unknown == ["nobody"])
    #expect(summary.inactive == ["u3"])
    #expect(
        Set(try dir.kinds(org: "o1", ids: ["q1", "001ACC", "006OPP", "u3", "zz"]).map { $0?.rawValue ?? "-" })
            == ["queue", "accountTeam", "opportunityTeam", "user", "-"])
    // The temporary set is drained, and the other org's gA is separate.
    #expect(try fx.client().command(["EXISTS", RecipientKeys(org: "o1").resolution("job-1")]).integer == 0)
    var other: [UserID] = []
    try dir.resolve(org: "o2", recipients: ["gA"], scope: "j", chunkSize: 100) { other += $0 }
    #expect(other == ["x1"])

    let show = try dir.show(org: "o1", id: "q1")
    #expect(show.kind == .queue && show.directMembers == 2 && show.resolvedUsers == 4 && show.nestedContainers == 3)
}

@Test(.tags(.integration)) func resolvesALargeGroupInChunksWithoutRepeats() throws {
    let fx = try RedisServerFixture()
    defer { fx.stop() }
    let dir = RedisDirectory(client: fx.client())
    // 20,000 users across two overlapping groups nested in a third.
    let a = (0..<12_000).map { RecipientID("u\($0)") }
    let b = (8_000..<20_000).map { RecipientID("u\($0)") }
    try dir.importRecords([
        DirectoryRecord(org: "o", kind: .group, id: "a", members: a),
        DirectoryRecord(org: "o", kind: .group, id: "b", members: b),
        DirectoryRecord(org: "o", kind: .group, id: "all", members: ["a", "b"]),
    ])
    var seen = Set<UserID>()
    var chunks = 0
    let s = try dir.resolve(org: "o", recipients: ["all"], scope: "big", chunkSize: 1000) { c in
        chunks += 1
        for u in c { #expect(seen.insert(u).inserted) }
    }
    #expect(seen.count == 20_000 && s.users == 20_000 && chunks == 20)
}

@Test(.tags(.integration)) func quotaGrantsPartiallyRefundsAndRollsOverAtTheHour() throws {
    let fx = try RedisServerFixture()
    defer { fx.stop() }
    // 04:59:58 UTC
    let clock = ManualClock(Date(timeIntervalSince1970: 1_795_323_598))
    let q = RedisQuotaStore(
        client: fx.client(), defaults: QuotaLimits(ios: 10, android: 5),
        configured: ["big": (ios: 100, android: nil)], clock: clock, graceSeconds: 1)
    let g1 = try q.charge(org: "o", platform: .ios, count: 7)
    #expect(g1.granted == 7 && g1.pending == 7 && g1.limit == 10)
    let g2 = try q.charge(org: "o", platform: .ios, count: 7)
    #expect(g2.granted == 3 && g2.denied == 4 && g2.shouldRetryDenied)
    // 2 refunded (token invalid), 8 delivered: room for 2 more.
    try q.settle(org: "o", platform: .ios, delivered: 8, refunded: 2)
    let g3 = try q.charge(org: "o", platform: .ios, count: 4)
    #expect(g3.granted == 2 && g3.denied == 2 && g3.pending == 2)
    try q.settle(org: "o", platform: .ios, delivered: 2, refunded: 0)
    let g4 = try q.charge(org: "o", platform: .ios, count: 1)
    #expect(g4.granted == 0 && !g4.shouldRetryDenied) // used up, nothing in flight: over quota
    #expect(try q.charge(org: "o", platform: .android, count: 9).granted == 5)
    #expect(try q.charge(org: "big", platform: .ios, count: 50).granted == 50)
    try q.setLimits(org: "big", ios: 60, android: nil)
    #expect(try q.charge(org: "big", platform: .ios, count: 50).granted == 10)

    let usage = try q.usage(org: "o")
    #expect(
        usage.first { $0.platform == .ios }
            == QuotaUsage(platform: .ios, hour: "2026112204", limit: 10, used: 10, pending: 0))

    // The key lives to the end of the hour plus grace (2 s + 1 s): its TTL says so, and Redis expires it.
    let key = RecipientKeys(org: "o").quota(.ios, QuotaHour(containing: clock.now()))
    let ttl = try fx.client().command(["TTL", key]).integer ?? -3
    #expect(ttl > 0 && ttl <= 3)

    // Top of the hour: a fresh counter.
    clock.advance(by: 2)
    #expect(try q.charge(org: "o", platform: .ios, count: 4).granted == 4)
    #expect(try q.usage(org: "o").first { $0.platform == .ios }?.hour == "2026112205")
}

@Test(.tags(.integration)) func quotaNeverOverAdmitsUnderConcurrencyAndRefundsRefill() async throws {
    let fx = try RedisServerFixture()
    defer { fx.stop() }
    let limit = 1000
    let accepted = LockedCounter()
    let threads = 6
    let group = DispatchGroup()
    for t in 0..<threads {
        let q = RedisQuotaStore(client: fx.client(name: "t\(t)"), defaults: QuotaLimits(ios: limit, android: 0))
        group.enter()
        let th = Thread {
            defer { group.leave() }
            var n = 0
            var denied = 0
            // Each thread has 1,000 devices; every 10th device's token is invalid (refunded).
            var device = 0
            while device < 1000 {
                guard let g = try? q.charge(org: "o", platform: .ios, count: 7) else { return }
                var delivered = 0
                var refunded = 0
                for _ in 0..<g.granted {
                    if (device + t) % 10 == 0 { refunded += 1 } else { delivered += 1 }
                    device += 1
                }
                n += delivered
                try? q.settle(org: "o", platform: .ios, delivered: delivered, refunded: refunded)
                if g.granted == 0 {
                    if g.shouldRetryDenied {
                        usleep(1000)
                        continue
                    }
                    denied += 1
                    break
                }
            }
            accepted.add(n)
            _ = denied
        }
        th.start()
    }
    try await blocking { group.wait() }
    // 6,000 devices, 600 refunded: exactly the limit is delivered.
    #expect(accepted.value == limit)
}

final class LockedCounter: @unchecked Sendable {
    private let lock = NSLock()
    private var n = 0
    func add(_ k: Int) { lock.withLock { n += k } }
    var value: Int { lock.withLock { n } }
}

@Test(.tags(.integration)) func inboxStoresListsAndMarksLikeSalesforce() throws {
    let fx = try RedisServerFixture()
    defer { fx.stop() }
    let clock = ManualClock(Date(timeIntervalSince1970: 1_795_323_000))
    let inbox = RedisInboxStore(
        client: fx.client(), retention: InboxRetention(maxCount: 3, maxAgeSeconds: 3600), clock: clock)
    inbox.usersPerCall = 2
    let users: [UserID] = ["a", "b", "c", "d", "e"]
    for i in 1...4 {
        clock.advance(by: 10)
        try inbox.deliver(
            org: "o",
            content: InboxContent(
                id: "n\(i)", type: "T", title: "Title \(i)", body: "Body",
                target: "001X", createdAt: clock.now()), to: users)
    }
    // Redelivery of n4 changes nothing.
    try inbox.deliver(
        org: "o",
        content: InboxContent(
            id: "n4", type: "T", title: "Title 4", body: "Body", target: "001X",
            createdAt: clock.now()), to: ["a"])
    let list = try inbox.list(org: "o", user: "a", size: 10, before: nil)
    #expect(list.map(\.id) == ["n4", "n3", "n2"]) // retention: newest 3
    #expect(list.allSatisfy { !$0.read && !$0.seen && $0.type == "T" && $0.target == "001X" })
    var st = try inbox.status(org: "o", user: "e")
    #expect(st.unreadCount == 3 && st.unseenCount == 3)
    #expect(st.oldestUnread == Date(timeIntervalSince1970: 1_795_323_020))

    #expect(try inbox.mark(org: "o", user: "e", InboxMark(.ids(["n2", "zz"]), read: true, seen: nil)) == 1)
    #expect(
        try inbox.mark(
            org: "o", user: "e", InboxMark(.before(Date(timeIntervalSince1970: 1_795_323_035)), read: nil, seen: true))
            == 2)
    st = try inbox.status(org: "o", user: "e")
    #expect(st.unreadCount == 2 && st.unseenCount == 1)
    #expect(st.oldestUnread == Date(timeIntervalSince1970: 1_795_323_030))
    let e = try inbox.list(org: "o", user: "e", size: 10, before: nil)
    #expect(e.map { "\($0.id):\($0.read ? "r" : "-")\($0.seen ? "s" : "-")" } == ["n4:--", "n3:-s", "n2:rs"])
    #expect(
        try inbox.list(org: "o", user: "e", size: 1, before: Date(timeIntervalSince1970: 1_795_323_040)).map(\.id) == [
            "n3"
        ])
    // Unread again: stays seen.
    try inbox.mark(org: "o", user: "e", InboxMark(.ids(["n2"]), read: false, seen: nil))
    #expect(try inbox.status(org: "o", user: "e").unreadCount == 3)

    // Age retention: an hour later a new notification pushes out everything older than an hour.
    clock.advance(by: 3601)
    try inbox.deliver(
        org: "o",
        content: InboxContent(id: "n5", type: nil, title: "t", body: "b", target: nil, createdAt: clock.now()),
        to: ["e"])
    #expect(try inbox.list(org: "o", user: "e", size: 10, before: nil).map(\.id) == ["n5"])
    #expect(try inbox.status(org: "o", user: "e").unreadCount == 1)
}

@Test(.tags(.integration)) func notificationTypesDecideThePolicy() throws {
    let fx = try RedisServerFixture()
    defer { fx.stop() }
    let types = RedisNotificationTypeStore(client: fx.client())
    try types.setType(org: "o", NotificationType(id: "deal", name: "Deal won", mobile: true, desktop: true))
    try types.setType(org: "o", NotificationType(id: "desk", name: "Desk", mobile: false, desktop: true))
    // No app is subscribed to a type until its setting says enabled: true.
    #expect(!(try types.policy(org: "o", app: "sales", typeID: "deal").storesInbox))
    try types.setSetting(org: "o", app: "sales", typeID: "deal", enabled: true, pushEnabled: nil)
    try types.setSetting(org: "o", app: "sales", typeID: "desk", enabled: true, pushEnabled: nil)
    #expect(try types.policy(org: "o", app: "sales", typeID: "deal") == .pushAndInbox)
    #expect(try types.policy(org: "o", app: "sales", typeID: nil) == .pushAndInbox)
    #expect(!(try types.policy(org: "o", app: "sales", typeID: "desk").sendsPush))
    #expect(!(try types.policy(org: "o", app: "sales", typeID: "nope").storesInbox))
    try types.setSetting(org: "o", app: "sales", typeID: "deal", enabled: nil, pushEnabled: false)
    let p = try types.policy(org: "o", app: "sales", typeID: "deal")
    #expect(!p.sendsPush && p.storesInbox)
    try types.setSetting(org: "o", app: "sales", typeID: "deal", enabled: false, pushEnabled: nil)
    #expect(!(try types.policy(org: "o", app: "sales", typeID: "deal").storesInbox))
    #expect(!(try types.policy(org: "o", app: "other", typeID: "deal").storesInbox))
    try types.resetSetting(org: "o", app: "sales", typeID: "deal")
    #expect(!(try types.policy(org: "o", app: "sales", typeID: "deal").storesInbox))
    #expect(try types.types(org: "o").map(\.id) == ["deal", "desk"])
}

/// A redelivery adopts the charges of the devices a killed delivery charged and never recorded: each device of the
/// job is charged once. The ledger write releases a batch's charges with its outcomes, in one transaction.
@Test(.tags(.integration)) func redeliveryAdoptsOnlyTheChargesOfUnrecordedDevices() throws {
    let fx = try RedisServerFixture()
    defer { fx.stop() }
    let clock = ManualClock(Date(timeIntervalSince1970: 1_795_320_000))
    let q = RedisQuotaStore(client: fx.client(), defaults: QuotaLimits(ios: 10, android: 10), clock: clock)
    let ledger = RedisPipelineBackend(
        endpoint: fx.endpoint, store: StoreConfiguration(), consumer: "t", options: .init(giveUpAfter: 5)
    ).makeRedisSession(name: "ledger")
    let devices = (0..<10).map { Device(platform: .ios, token: DeviceToken("token-\($0)")) }
    func outcomes(_ r: Range<Int>) -> [(Device, DeliveryOutcome)] { devices[r].map { ($0, .accepted) } }
    func usage() throws -> QuotaUsage? { try q.usage(org: "o").first { $0.platform == .ios } }
    func unreleased() throws -> Int {
        let values = try fx.client().command(["HVALS", RecipientKeys(org: "o").quotaCharges("job")]).array ?? []
        return values.compactMap { $0.string.flatMap { Int($0) } }.reduce(0, +)
    }

    // Delivery 1 charges all 10 devices and records 4 (released with them, hour settled); it records 2 more and
    // is killed before it settles their hour.
    let first = try q.account(org: "o", job: "job", delivery: "A#1", adoptingEarlierCharges: false)
    #expect(try first.charge(platform: .ios, count: 10).granted == 10)
    let s1 = first.settlement(platform: .ios, delivered: 4, refunded: 0)
    try ledger.record(org: "o", job: "job", outcomes: outcomes(0..<4), releasing: s1)
    try first.settle(s1)
    let s2 = first.settlement(platform: .ios, delivered: 2, refunded: 0)
    try ledger.record(org: "o", job: "job", outcomes: outcomes(4..<6), releasing: s2)
    #expect(try usage()?.used == 10 && usage()?.pending == 6)
    #expect(try unreleased() == 4)

    // Delivery 2 sends the 4 unrecorded devices again: it adopts exactly their 4 charges, so nothing more is
    // charged and the limit of 10 still admits them all.
    let second = try q.account(org: "o", job: "job", delivery: "B#2", adoptingEarlierCharges: true)
    let grant = try second.charge(platform: .ios, count: 4)
    #expect(grant.granted == 4 && grant.denied == 0)
    let s3 = second.settlement(platform: .ios, delivered: 3, refunded: 1)
    try ledger.record(org: "o", job: "job", outcomes: outcomes(6..<10), releasing: s3)
    try second.settle(s3)
    // Each device charged once: 10, less the one refund. The killed delivery's last hour settle never ran, so its
    // 2 stay pending until the hour's key expires.
    #expect(try usage()?.used == 9 && usage()?.pending == 2)
    #expect(try unreleased() == 0)

    // Without adoption the resent devices are charged a second time (what a redelivery did before).
    let third = try q.account(org: "o", job: "other", delivery: "A#1", adoptingEarlierCharges: false)
    #expect(try third.charge(platform: .ios, count: 1).granted == 1)
    let fourth = try q.account(org: "o", job: "other", delivery: "B#2", adoptingEarlierCharges: false)
    #expect(try fourth.charge(platform: .ios, count: 1).granted == 0)
}

/// A charge Redis runs twice (the client sent it again after a command timeout while Redis stalled, and the stalled
/// server ran the first copy too) counts once: the same charge number answers the first grant and charges nothing.
@Test(.tags(.integration)) func aChargeSentAgainIsChargedOnce() throws {
    let fx = try RedisServerFixture()
    defer { fx.stop() }
    let clock = ManualClock(Date(timeIntervalSince1970: 1_795_320_000))
    let q = RedisQuotaStore(client: fx.client(), defaults: QuotaLimits(ios: 10, android: 10), clock: clock)
    let keys = RecipientKeys(org: "o")
    let job = (key: keys.quotaCharges("job"), delivery: "A#1", lastCharge: keys.quotaLastCharge("job", delivery: "A#1"))
    func used() throws -> Int? { try q.usage(org: "o").first { $0.platform == .ios }?.used }

    let first = try q.charge(org: "o", platform: .ios, count: 6, job: (job.key, job.delivery, job.lastCharge, 1))
    let again = try q.charge(org: "o", platform: .ios, count: 6, job: (job.key, job.delivery, job.lastCharge, 1))
    #expect(first.granted == 6 && again.granted == 6 && again.pending == first.pending)
    #expect(try used() == 6, "the repeated charge was counted")
    // The next charge of the delivery is a new one: granted from what is left.
    let next = try q.charge(org: "o", platform: .ios, count: 6, job: (job.key, job.delivery, job.lastCharge, 2))
    #expect(next.granted == 4)
    #expect(try used() == 10)
    // Through the account: each call is a new charge.
    let account = try q.account(org: "o", job: "job2", delivery: "B#1", adoptingEarlierCharges: false)
    clock.advance(by: 3600)
    #expect(try account.charge(platform: .ios, count: 3).granted == 3)
    #expect(try account.charge(platform: .ios, count: 3).granted == 3)
    #expect(try used() == 6)
}
