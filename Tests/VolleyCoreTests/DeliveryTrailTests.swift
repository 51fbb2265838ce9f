import Foundation
import Testing
import VolleyCore
import VolleyTestTags

/// The delivery history's pure parts: how a device is shown, what outcomes are called, and the live counts of the
/// users a job skipped and of a local-time job's waves.
@Suite(.tags(.unit)) struct DeliveryTrailTests {
    @Test func aDeviceIsShownByItsLastEightCharactersNeverWhole() {
        let apns = DeviceToken("beef" + String(format: "%060x", 0xC0FFEE))
        #expect(DeliveryRecord.redacted(apns) == "…00c0ffee")
        // A short token shows nothing of itself, a longer one at most its last half.
        #expect(DeliveryRecord.redacted(DeviceToken("abcdef")) == "…")
        #expect(DeliveryRecord.redacted(DeviceToken("abcdefghijkl")) == "…ghijkl")
        #expect(DeliveryRecord.redacted(DeviceToken("")) == "…")
    }

    @Test func outcomesAreNamedAsTheCountsNameThem() {
        #expect(DeliveryRecord.outcomeName(.accepted) == "accepted")
        let refused = DeliveryOutcome.rejected(status: 410, reason: "Unregistered", action: .removeToken)
        #expect(DeliveryRecord.outcomeName(refused) == "rejected" && DeliveryRecord.reason(refused) == "Unregistered")
        let failed = DeliveryOutcome.failed(reason: "UNAVAILABLE", resendWasSafe: true)
        #expect(DeliveryRecord.outcomeName(failed) == "failed" && DeliveryRecord.reason(failed) == "UNAVAILABLE")
        #expect(DeliveryRecord.outcomeName(.quotaExceeded) == "quotaExceeded")
        #expect(DeliveryRecord.outcomeName(.expired) == "expired" && DeliveryRecord.reason(.expired) == nil)
        #expect(SkippedRecipient.allCases.map(\.rawValue) == ["capped", "noDevice"])
    }

    @Test func countsAddTheSkippedUsersToTheAudienceAndSplitWaves() throws {
        let wave1 = 1_795_000_000
        let wave2 = wave1 + 3_600
        let counts = try #require(
            JobCounts(fields: [
                ("accepted", "7"), ("rejected", "1"), ("expired", "2"), ("capped", "3"), ("noDevice", "4"),
                ("wave:\(wave1):accepted", "5"), ("wave:\(wave2):accepted", "2"), ("wave:\(wave2):expired", "2"),
                ("ios:accepted", "7"),
            ]))
        #expect(counts.capped == 3 && counts.noDevice == 4)
        #expect(counts.audience == 7 + 1 + 2 + 3 + 4)
        let waves = try #require(counts.perWave)
        #expect(waves.map(\.wave) == ["2026-11-18T11:06:40Z", "2026-11-18T12:06:40Z"])
        #expect(waves[0].outcomes == ["accepted": 5] && waves[1].outcomes == ["accepted": 2, "expired": 2])
        #expect(counts.byPlatform == ["ios": ["accepted": 7]])
        // A job of other jobs' kinds has no waves; only skipped users still count as counts.
        let skipped = try #require(JobCounts(fields: [("noDevice", "2")]))
        #expect(skipped.perWave == nil && skipped.audience == 2)
    }
}
