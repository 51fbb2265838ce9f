import Foundation
import Testing
import VolleyCore
import VolleyTestTags

@testable import VolleyMock

/// A tracked campaign's FCM bodies differ in the token and in `data.mid`: the memo answers for them without
/// reading them again, and for nothing else.
@Suite(.tags(.unit)) struct MockMessageIDMemoTests {
    func body(_ token: String, mid: String, rest: String = #""k":"v""#) -> [UInt8] {
        Array(
            (#"{"message":{"token":""# + token + #"","android":{"priority":"HIGH"},"data":{"mid":""# + mid + #"","#
                + rest + "}}}").utf8)
    }

    @Test func bodiesThatDifferInTokenAndMessageIDMatch() {
        let tracking = MessageTracking(org: "o", job: "j")
        var memo = MockFCMBodyMemo()
        func match(_ b: [UInt8]) -> String? {
            b.withUnsafeBufferPointer { memo.match($0).map { String(decoding: $0.token, as: UTF8.self) } }
        }
        let first = body("a", mid: tracking.messageID(for: DeviceToken("a")))
        #expect(MockFCMSendScan.scan(first) != nil)
        first.withUnsafeBufferPointer { memo.remember($0, validateOnly: false) }
        #expect(match(body("b", mid: tracking.messageID(for: DeviceToken("b")))) == "b")
        #expect(match(body("c", mid: tracking.messageID(for: DeviceToken("c")))) == "c")
        // Anything else that differs is read again.
        #expect(match(body("b", mid: tracking.messageID(for: DeviceToken("b")), rest: #""k":"w""#)) == nil)
        #expect(match(body("b", mid: String(tracking.messageID(for: DeviceToken("b")).dropLast()))) == nil)
        #expect(match(body("b", mid: String(tracking.messageID(for: DeviceToken("b")).dropLast()) + "+")) == nil)
        #expect(match(body("b", mid: String(tracking.messageID(for: DeviceToken("b")).dropLast()) + "xx")) == nil)
        // A kept tail without a message id matches only itself.
        let plain = Array(#"{"message":{"token":"a","data":{"mid":"short"}}}"#.utf8)
        plain.withUnsafeBufferPointer { memo.remember($0, validateOnly: false) }
        #expect(match(Array(#"{"message":{"token":"z","data":{"mid":"short"}}}"#.utf8)) == "z")
        #expect(match(Array(#"{"message":{"token":"z","data":{"mid":"shirt"}}}"#.utf8)) == nil)
    }
}
