import Foundation
import Testing
import VolleyCore
import VolleyTestTags

@testable import VolleyStore

/// The trail outbox's element: what a batch records is what the writer reads back, every byte of ids and reasons.
@Suite(.tags(.unit)) struct TrailBatchTests {
    @Test func aBatchReadsBackAsRecordedEscapesIncluded() throws {
        let trail = DeliveryTrail(
            org: "org1", campaign: "camp%aign", app: "app1", tracking: MessageTracking(org: "org1", job: "camp.s0"))
        let at = Date(timeIntervalSince1970: 1_795_960_000.123)
        let outcomes: [(Device, DeliveryOutcome)] = [
            (Device(platform: .ios, token: DeviceToken("abc123"), user: "user\twith\ntabs%"), .accepted),
            (
                Device(platform: .android, token: DeviceToken("fcm:tok")),
                .rejected(status: 404, reason: "UNREGISTERED", action: .removeToken)
            ),
            (
                Device(platform: .ios, token: DeviceToken("def456"), user: "u2"),
                .failed(reason: "odd\treason\n", resendWasSafe: true)
            ),
            (Device(platform: .ios, token: DeviceToken("0"), user: "u3"), .expired),
        ]
        let text = TrailBatch.encode(trail, job: "camp.s0", at: at, outcomes)
        let batch = try #require(TrailBatch(org: "org1", decoding: text))
        #expect(batch.trail.campaign == "camp%aign" && batch.trail.app == "app1")
        #expect(batch.trail.tracking == MessageTracking(org: "org1", job: "camp.s0"))
        #expect(abs(batch.at.timeIntervalSince(at)) < 0.001)
        #expect(batch.outcomes.map(\.0) == outcomes.map(\.0))
        #expect(batch.outcomes.map(\.1) == outcomes.map(\.1))
        #expect(TrailBatch(org: "org1", decoding: "v2\tx") == nil)
        #expect(TrailBatch(org: "org1", decoding: text + "user\tweb\ttok\ta\n") == nil)
    }
}
