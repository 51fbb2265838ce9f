import Foundation
import Testing
import VolleyCore

@testable import VolleyConnect

@Test func resourcePathAcceptsAnyVersion() {
    #expect(ConnectRequest.resourcePath("/services/data/v58.0/connect/notifications") == "/connect/notifications")
    #expect(
        ConnectRequest.resourcePath("/services/data/v46.0/actions/standard/customNotificationAction")
            == "/actions/standard/customNotificationAction")
    #expect(ConnectRequest.resourcePath("/services/data/v5x.0/connect") == nil)
    #expect(ConnectRequest.resourcePath("/v1/jobs") == nil)
}
