import Foundation
import Testing
import VolleyCore
import VolleyTestTags

/// A registration's token must have its platform's form; lists show the most recently registered first.
@Suite(.tags(.unit)) struct DeviceRegistrationTests {
    @Test(arguments: [
        (String(repeating: "ab", count: 32), true), // Apple's 32 bytes, lower case
        (String(repeating: "AB", count: 32), true), // upper case
        (String(repeating: "0f", count: 100), true), // 100 bytes: the most taken
        (String(repeating: "0f", count: 101), false), // 101 bytes
        (String(repeating: "a", count: 63), false), // odd
        (String(repeating: "a", count: 62), false), // short
        (String(repeating: "ab", count: 31) + "zz", false), // not hex
        ("", false),
        (String(repeating: "ab", count: 31) + " a", false),
    ])
    func apnsTokens(token: String, taken: Bool) {
        let problem = DeviceToken(token).formProblem(for: .ios)
        #expect((problem == nil) == taken, "\(token.count) characters: \(problem ?? "taken")")
    }

    @Test(arguments: [
        ("fcm-token-1", true),
        ("dGhpcyBpcyBhbiBGQ00:APA91bH-_x=", true),
        (String(repeating: "x", count: 4096), true),
        (String(repeating: "x", count: 4097), false),
        ("", false),
        ("has space", false),
        ("tab\there", false),
        ("nbsp\u{A0}here", false),
        ("ctl\u{1}", false),
        ("a/b", false),
    ])
    func fcmTokens(token: String, taken: Bool) {
        let problem = DeviceToken(token).formProblem(for: .android)
        #expect((problem == nil) == taken, "\(token.prefix(20)): \(problem ?? "taken")")
    }

    @Test func problemsNeverQuoteTheToken() {
        let token = String(repeating: "9", count: 70) + "q"
        let problem = DeviceToken(token).formProblem(for: .ios) ?? ""
        #expect(problem.contains("character 71"))
        #expect(!problem.contains("999"))
        let short = DeviceToken(String(repeating: "ab", count: 8)).formProblem(for: .ios) ?? ""
        #expect(short.hasPrefix("invalid device token length") && short.contains("has 16"))
    }

    @Test func newestRegistrationFirstThenPlatformAndToken() {
        let t = Date(timeIntervalSince1970: 1_800_000_000)
        func record(_ token: String, _ platform: Platform, at seconds: Double) -> DeviceRecord {
            DeviceRecord(
                platform: platform, token: DeviceToken(token), user: "u", registeredAt: t + seconds,
                lastSeenAt: t + 1_000)
        }
        let records = [
            record("b", .ios, at: 0), record("a", .ios, at: 0), record("old", .android, at: -5),
            record("new", .ios, at: 10), record("z", .android, at: 0),
        ]
        #expect(records.sorted(by: DeviceRecord.newestFirst).map(\.token.rawValue) == ["new", "z", "a", "b", "old"])
    }
}
