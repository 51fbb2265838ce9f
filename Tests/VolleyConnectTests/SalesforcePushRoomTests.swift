import Foundation
import Testing
import VolleyConnect
import VolleyCore
import VolleyTestTags

/// A tracked Notification Builder push leaves room for the message id the provider adds (`reserve`): a long text is
/// cut so the push with its id still fits the provider's limit.
@Suite(.tags(.unit)) struct SalesforcePushRoomTests {
    func content(title: String) -> SalesforcePushContent {
        SalesforcePushContent(
            orgID: "00Dxx0000000001", userID: "005xx0000000001", notificationID: "0Mlxx0000000001",
            targetID: "006xx0000000001", typeID: "0MLxx0000000001", title: title, body: "", badge: 1,
            timestamp: 1_764_000_000)
    }

    @Test(arguments: [
        (Platform.ios, MessageTracking.apnsPayloadBytes), (Platform.android, MessageTracking.fcmDataBytes),
    ])
    func aLongTitleIsCutToLeaveTheIDsRoom(_ platform: Platform, _ reserve: Int) throws {
        let long = content(title: String(repeating: "T", count: 6000))
        let plain = try SalesforcePushBuilder.build(long, platform: platform)
        let roomy = try SalesforcePushBuilder.build(long, platform: platform, reserve: reserve)
        #expect(plain.bytes <= 4096 && plain.bytes > 4096 - reserve)
        #expect(roomy.bytes <= 4096 - reserve && roomy.bytes > 4096 - 2 * reserve)
        #expect(roomy.trimmedBytes > plain.trimmedBytes)
        // A short one is the same push either way.
        let short = content(title: "Deal won")
        let a = try SalesforcePushBuilder.build(short, platform: platform)
        let b = try SalesforcePushBuilder.build(short, platform: platform, reserve: reserve)
        #expect(a.bytes == b.bytes && b.trimmedFields == 0)
    }
}
