import Foundation
import Testing
import VolleyCore
import VolleyMock
import VolleyRedis
import VolleyStore
import VolleyTestDoubles
import VolleyTestSupport
import VolleyTestTags

/// Four `volley worker` processes share one campaign (split into shard jobs) through one app: what they share
/// through Redis is seen at the mock — one APNs provider token, and one pause after an FCM 429.
@Suite(.serialized, .tags(.integration)) struct FleetProcessTests {
    static let users = 500

    func enqueueCampaign(_ w: MockWorld) throws {
        try w.h.producer.enqueue(
            PushJob(
                id: "campaign", org: "org1", app: "app1",
                recipients: (0..<Self.users).map { RecipientID("user\($0)") },
                notification: VolleyCore.Notification(title: "Sale", body: "Today only")))
    }

    func startWorkers(_ w: MockWorld, inFlight: Int) throws -> [WorkerProcess] {
        let config = try w.writeConfig(worker: [
            "inFlight": "\(inFlight)", "recordBatchSize": "100", "shardSize": "25", "blockMs": "100",
            "reclaimIdleMs": "30000", "drainSeconds": "2",
        ])
        return try (0..<4).map { try WorkerProcess(config: config, consumer: "w\($0)", logDirectory: w.dir) }
    }

    func logs(_ workers: [WorkerProcess]) -> String {
        workers.map { String($0.log.suffix(1500)) }.joined(separator: "\n")
    }

    @Test func fourWorkersSendWithOneAPNsProviderToken() async throws {
        // The mock enforces Apple's limit across connections: a second token within 20 minutes gets 429.
        let w = try MockWorld(mockConfig: #"{"apns": {"tokenUpdateLimitSeconds": 1200}, "latencyMs": 2}"#)
        defer { w.stop() }
        let devicesPerUser = 8
        try w.h.register(
            app: "app1", users: Self.users, devicesPerUser: devicesPerUser, platform: { _ in .ios },
            token: { u, d in String(format: "%08x%08x", u, d) + String(repeating: "b", count: 48) })
        let workers = try startWorkers(w, inFlight: 100)
        defer { for p in workers where p.isRunning { p.kill9() } }
        try enqueueCampaign(w)
        try await waitUntil("the report of campaign: no report: \(logs(workers))", timeout: .seconds(90)) {
            (try? w.h.report(for: "campaign")) != nil
        }
        let r = try #require(try w.h.report(for: "campaign"))
        let s = w.mock.stats()
        #expect(r.accepted == Self.users * devicesPerUser)
        #expect(s.apnsProviderTokens.count == 1, "distinct provider tokens at the mock")
        #expect(s.count(.apns, 429, "TooManyProviderTokenUpdates") == 0)
        // The fleet's token is the one in Redis.
        let key = FleetKeys.apnsToken(FleetCredential(teamID: w.mock.apnsTeamID, keyID: w.mock.apnsKeyID))
        #expect(try w.h.admin.client.checked(["EXISTS", key]).integer == 1)
    }

    @Test func anFCMThrottlePausesTheWholeFleet() async throws {
        // 20 ms per answer, 100 streams per connection and 1,000 sends in flight per worker: most of a worker's
        // sends wait in its pool's queue when the 429 comes (those are what the pause must hold too), the mock has
        // few written ones to work through, and the campaign is still going when the mock throttles and again when
        // the pause ends.
        let w = try MockWorld(mockConfig: #"{"latencyMs": 20, "maxConcurrentStreams": 100}"#)
        defer { w.stop() }
        let devicesPerUser = 48
        try w.h.register(
            app: "app1", users: Self.users, devicesPerUser: devicesPerUser, platform: { _ in .android },
            token: { u, d in "fcm-\(u)-\(d)-" + String(repeating: "c", count: 40) })
        let workers = try startWorkers(w, inFlight: 1000)
        defer { for p in workers where p.isRunning { p.kill9() } }
        try enqueueCampaign(w)
        try await actWhen("4,000 FCM sends accepted: not sending: \(logs(workers))", timeout: .seconds(60)) {
            w.mock.stats().acceptedFCM >= 4_000
        } then: {
            w.mock.server.engine.throttleFCM(sends: 1, retryAfter: 3)
        }
        try await waitUntil("an FCM send arriving after the throttle", timeout: .seconds(10)) {
            w.mock.server.engine.fcmArrivalsAfterThrottle.throttledAtNanos != 0
        }
        try await waitUntil("the report of campaign: no report: \(logs(workers))", timeout: .seconds(90)) {
            (try? w.h.report(for: "campaign")) != nil
        }
        let r = try #require(try w.h.report(for: "campaign"))
        #expect(r.accepted == Self.users * devicesPerUser)
        #expect(w.mock.stats().count(.fcm, 429, "QUOTA_EXCEEDED") == 1)
        let arrivals = w.mock.server.engine.fcmArrivalsAfterThrottle.per100ms
        print("FCM sends per 100 ms after the 429: \(arrivals.prefix(45))")
        // The throttled worker stops as soon as it reads the 429, the others when its announcement arrives; what each
        // worker had already handed to its connections and not yet written is held there too (not only what comes
        // next). From half a second after the 429 nothing arrives until the Retry-After has passed (measured on
        // 197865f: the last sends within 0.2–0.3 s, alone and with the integration lane and a soak on the same
        // two cores).
        #expect(arrivals[5..<30].reduce(0, +) == 0, "sends during the pause: \(arrivals.prefix(35))")
        // And sending resumed afterwards.
        #expect(arrivals[30...].reduce(0, +) > 0)
    }
}
