import Foundation
import Testing
import VolleyTestTags

@testable import VolleyCore

@Test(.tags(.unit)) func deviceTokenPrintsRedacted() {
    let t = DeviceToken("0123456789abcdef0123456789abcdef")
    #expect("\(t)" == "012345…cdef")
    #expect(!"\(t)".contains("6789abcdef0123"))
}

@Test(.tags(.unit)) func notificationDecodesCamelCaseKeys() throws {
    let json =
        #"{"title":"Hi","contentAvailable":true,"localized":{"es":{"title":"Hola"}},"data":{"k":"v","n":2},"apns":{"#
        + #""aps":{"alert":"x"}}}"#
    let n = try JSONDecoder().decode(Notification.self, from: Data(json.utf8))
    #expect(n.title == "Hi")
    #expect(n.contentAvailable == true)
    #expect(n.localized?["es"]?.title == "Hola")
    #expect(n.data?["n"] == .number(2))
    #expect(n.apns?["aps"]?["alert"] == .string("x"))
}

@Test(.tags(.unit)) func appStopSwitchKeepsTheFirstStop() {
    let s = AppStopSwitch()
    #expect(s.outcome == nil && s.message == nil)
    let first = DeliveryOutcome.rejected(status: 403, reason: "InvalidProviderToken", action: .fixApp)
    #expect(s.stop(first, message: "first"))
    #expect(!s.stop(.rejected(status: 403, reason: "TopicDisallowed", action: .fixApp), message: "second"))
    #expect(s.outcome == first)
    #expect(s.message == "first")
}

@Test(.tags(.unit)) func platformIndexMatchesAllCases() {
    for (i, p) in Platform.allCases.enumerated() { #expect(p.index == i) }
}
