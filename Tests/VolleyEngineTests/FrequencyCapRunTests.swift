import Foundation
import MetricsTestKit
import Testing
import VolleyCore
import VolleyEngine
import VolleyTestDoubles
import VolleyTestTags

/// The recipient step with frequency caps, run by the engine on the in-memory backend and a manual clock: a user at
/// a cap gets the inbox entry and no push, the report and the metrics count the user, a bypassing job pushes, and a
/// job no cap applies to never asks the caps' store.
@Suite(.tags(.unit)) struct FrequencyCapRunTests {
    /// Each recipient id is a user, in order.
    final class ListDirectory: DirectoryResolver, @unchecked Sendable {
        final class Batches: UserBatches {
            var rest: [UserID]
            let summary: ResolutionSummary
            init(_ users: [UserID]) {
                rest = users
                summary = ResolutionSummary(users: users.count)
            }
            func next(max: Int) throws -> [UserID]? {
                if rest.isEmpty { return nil }
                let take = Array(rest.prefix(max))
                rest.removeFirst(take.count)
                return take
            }
        }
        func open(org: OrgID, recipients: [RecipientID], scope: String) throws -> any UserBatches {
            Batches(recipients.map { UserID($0.rawValue) })
        }
    }

    /// Which users' inboxes got which notification.
    final class RecordingInbox: InboxStore, @unchecked Sendable {
        private let lock = NSLock()
        private var stored: [UserID: [String]] = [:]
        func deliver(org: OrgID, content: InboxContent, to users: [UserID]) throws -> [Int] {
            lock.withLock {
                for u in users where !(stored[u] ?? []).contains(content.id) {
                    stored[u, default: []].append(content.id)
                }
                return users.map { stored[$0]?.count ?? 0 }
            }
        }
        func unseenCounts(org: OrgID, users: [UserID]) throws -> [Int] {
            lock.withLock { users.map { stored[$0]?.count ?? 0 } }
        }
        func list(org: OrgID, user: UserID, size: Int, before: Date?) throws -> [InboxNotification] { [] }
        func status(org: OrgID, user: UserID) throws -> InboxStatus {
            InboxStatus(unreadCount: 0, unseenCount: 0, oldestUnread: nil, oldestUnseen: nil, lastActivity: nil)
        }
        func mark(org: OrgID, user: UserID, _ mark: InboxMark) throws -> Int { 0 }
        func entries(_ user: UserID) -> [String] { lock.withLock { stored[user] ?? [] } }
    }

    let backend = InMemoryBackend()
    let clock = ManualClock()
    let store = InMemoryFrequencyCaps()
    let inbox = RecordingInbox()
    let metrics = TestMetrics()
    let ios = FakePushSender(platform: .ios)

    func worker(rules: [FrequencyCapRule]) -> PipelineWorker {
        var resolver = DirectoryRecipientResolver(
            directory: ListDirectory(), inbox: inbox, types: nil, clock: clock, usersPerRead: 100)
        resolver.frequencyCaps = FrequencyCaps(
            rulebook: FrequencyCapRulebook(configured: ["org1": rules], stored: nil, clock: clock), store: store)
        let c = WorkerConfiguration(
            consumer: "w1", concurrentJobs: 1, inFlight: 100, blockMillis: 20, reclaimIdleMillis: 60_000,
            reclaimIntervalMillis: 60_000, recordBatch: 10, chunkSize: 100)
        return PipelineWorker(
            configuration: c, backend: backend, apps: StaticAppDirectory(["app1": [.ios: ios]]), resolver: resolver,
            metrics: EngineMetrics(apps: ["app1"], factory: metrics))
    }

    func register(_ user: UserID, devices n: Int) {
        backend.register(
            org: "org1", app: "app1", user: user,
            (0..<n).map { Device(platform: .ios, token: DeviceToken("tok-\(user)-\($0)"), user: user) })
    }

    func send(
        _ id: JobID, to users: [RecipientID], org: OrgID = "org1", bypass: Bool? = nil,
        notification: VolleyCore.Notification = .init(title: "t", body: "b")
    ) async throws -> JobReport {
        var job = PushJob(id: id, org: org, app: "app1", recipients: users, notification: notification)
        job.enableFrequencyCap = bypass.map { !$0 }
        let before = backend.allReports.count
        _ = try backend.enqueue(job)
        try await waitUntil("the report of \(id)") { backend.allReports.count > before }
        return try #require(backend.allReports.last)
    }

    func capped() throws -> Int64 {
        try metrics.expectCounter(
            "volley_notifications_total", [("provider", "none"), ("app", "app1"), ("outcome", "frequency_capped")]
        ).totalValue
    }

    @Test func aUserAtTheCapKeepsTheInboxEntryAndGetsNoPush() async throws {
        register("u1", devices: 2)
        register("u2", devices: 1)
        let w = worker(rules: [try FrequencyCapRule.make(window: "1h", max: 2, type: nil, at: "r")])
        try w.start()
        defer { w.drain(deadline: 1) }
        let first = try await send("j1", to: ["u1", "u2", "nodevice"])
        #expect(first.capped == 0 && first.accepted == 3 && first.noDevices == 1)
        clock.advance(by: 600)
        let second = try await send("j2", to: ["u1"])
        #expect(second.capped == 0 && second.accepted == 2)
        clock.advance(by: 600)
        let third = try await send("j3", to: ["u1", "u2"])
        #expect(third.capped == 1 && third.accepted == 1 && third.noDevices == 0 && third.users == 2)
        #expect(ios.perToken["tok-u1-0"] == 2 && ios.perToken["tok-u1-1"] == 2 && ios.perToken["tok-u2-0"] == 2)
        #expect(inbox.entries("u1") == ["j1", "j2", "j3"])
        #expect(try capped() == 1)
        // A user with no device is not counted: three notifications later, still room.
        #expect(store.history(org: "org1", user: "nodevice").sends.isEmpty)
        #expect(store.history(org: "org1", user: "u1").sends[nil]?.count == 2)
        // An hour after the first send the window has room again.
        clock.advance(by: 2400)
        let fourth = try await send("j4", to: ["u1"])
        #expect(fourth.capped == 0 && fourth.accepted == 2)
    }

    @Test func aBypassingJobPushesAndIsNotCounted() async throws {
        register("u1", devices: 1)
        let w = worker(rules: [try FrequencyCapRule.make(window: "1h", max: 1, type: nil, at: "r")])
        try w.start()
        defer { w.drain(deadline: 1) }
        _ = try await send("j1", to: ["u1"])
        let bypass = try await send("j2", to: ["u1"], bypass: true)
        #expect(bypass.capped == nil && bypass.accepted == 1)
        let capped = try await send("j3", to: ["u1"])
        #expect(capped.capped == 1 && capped.accepted == 0)
        let silent = try await send("j4", to: ["u1"], notification: .init(contentAvailable: true))
        #expect(silent.capped == nil && silent.accepted == 1)
        #expect(ios.total == 3)
        #expect(store.history(org: "org1", user: "u1").sends[nil]?.keys.sorted() == ["j1"])
    }

    @Test func aJobNoCapAppliesToNeverAsksTheStore() async throws {
        register("u1", devices: 1)
        let w = worker(rules: [try FrequencyCapRule.make(window: "1h", max: 1, type: "ORDER_SHIPPED", at: "r")])
        try w.start()
        defer { w.drain(deadline: 1) }
        let other = try await send("j1", to: ["u1"], notification: .init(title: "t", type: "PROMO"))
        let uncapped = try await send("j2", to: ["u1"], org: "org2")
        #expect(other.capped == nil && uncapped.capped == nil)
        #expect(store.admitCalls == 0)
        let shipped = try await send("j3", to: ["u1"], notification: .init(title: "t", type: "ORDER_SHIPPED"))
        let again = try await send("j4", to: ["u1"], notification: .init(title: "t", type: "ORDER_SHIPPED"))
        #expect(shipped.capped == 0 && again.capped == 1)
        #expect(store.admitCalls == 2)
    }
}
