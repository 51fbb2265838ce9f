import Foundation
import Testing
import VolleyCore
import VolleyTestTags

@Suite(.tags(.unit)) struct OutcomeTableTests {
    static let apnsRows: [(Int, String?, OutcomeDecision)] = [
        (200, nil, .accepted),
        (410, "Unregistered", .removeToken), (410, "ExpiredToken", .removeToken),
        (400, "BadDeviceToken", .removeToken), (400, "DeviceTokenNotForTopic", .removeToken),
        (429, "TooManyRequests", .retry), (500, "InternalServerError", .retry), (503, "ServiceUnavailable", .retry),
        (503, "Shutdown", .retry), (500, nil, .retry), (503, "SomethingNew", .retry),
        (403, "ExpiredProviderToken", .refreshCredential),
        (403, "InvalidProviderToken", .fixApp), (403, "BadCertificate", .fixApp),
        (403, "BadCertificateEnvironment", .fixApp), (400, "TopicDisallowed", .fixApp), (400, "MissingTopic", .fixApp),
        (400, "BadTopic", .fixApp), (403, "Forbidden", .fixApp),
        (400, "PayloadEmpty", .invalidNotification), (413, "PayloadTooLarge", .invalidNotification),
        (400, "BadCollapseId", .invalidNotification), (400, "BadPriority", .invalidNotification),
        (400, "BadExpirationDate", .invalidNotification), (400, "BadMessageId", .invalidNotification),
        (400, "InvalidPushType", .invalidNotification), (400, "MissingDeviceToken", .invalidNotification),
        (400, "BrandNewReason", .unknown), (418, nil, .unknown),
    ]

    @Test(arguments: apnsRows.indices)
    func apnsRow(_ i: Int) {
        let (status, reason, expected) = Self.apnsRows[i]
        let answer = ProviderAnswer(provider: .apns, status: status, reason: reason.map { OutcomeReason($0) })
        #expect(OutcomeTable.decide(answer) == expected, "APNs \(status) \(reason ?? "-")")
    }

    static let fcmRows: [(Int, String?, Bool, OutcomeDecision)] = [
        (200, nil, false, .accepted),
        (404, "UNREGISTERED", false, .removeToken),
        (400, "INVALID_ARGUMENT", true, .removeToken),
        (400, "INVALID_ARGUMENT", false, .invalidNotification),
        (429, "QUOTA_EXCEEDED", false, .retry), (500, "INTERNAL", false, .retry), (503, "UNAVAILABLE", false, .retry),
        (401, "UNAUTHENTICATED", false, .refreshCredential), (401, nil, false, .refreshCredential),
        (403, "SENDER_ID_MISMATCH", false, .fixApp), (401, "THIRD_PARTY_AUTH_ERROR", false, .fixApp),
        (403, "PERMISSION_DENIED", false, .fixApp),
        (400, "NEW_THING", false, .unknown),
    ]

    @Test(arguments: fcmRows.indices)
    func fcmRow(_ i: Int) {
        let (status, reason, namesToken, expected) = Self.fcmRows[i]
        let answer = ProviderAnswer(
            provider: .fcm, status: status, reason: reason.map { OutcomeReason($0) },
            namesToken: namesToken)
        #expect(OutcomeTable.decide(answer) == expected, "FCM \(status) \(reason ?? "-")")
    }

    @Test func transportFailures() {
        #expect(OutcomeTable.decide(ProviderAnswer(provider: .apns, status: 0, transportResendIsSafe: true)) == .retry)
        #expect(
            OutcomeTable.decide(ProviderAnswer(provider: .fcm, status: 0, transportResendIsSafe: false)) == .unknown)
        let r = AttemptResult(answer: ProviderAnswer(provider: .fcm, status: 0), message: "timeout")
        #expect(r.terminalOutcome() == .failed(reason: "timeout", resendWasSafe: false))
    }

    /// The pool already waited its outage budget for a connection: the delivery ends there, safe-to-resend, and
    /// apart from a request written and unanswered.
    @Test func aSendThatNeverLeftWithinTheOutageBudgetFailsWithoutAnotherRetry() {
        let gaveUp = AttemptResult.transportFailure(
            .apns, reason: "transport:provider-unreachable", resendIsSafe: true,
            message: "provider-unreachable: api.example:443 unreachable for 120 s")
        #expect(gaveUp.decision == .unknown)
        #expect(gaveUp.terminalOutcome() == .failed(reason: "transport:provider-unreachable", resendWasSafe: true))
        let unanswered = AttemptResult.transportFailure(
            .fcm, reason: "transport:written-unanswered", resendIsSafe: false, message: nil)
        #expect(unanswered.decision == .unknown)
        #expect(unanswered.terminalOutcome() == .failed(reason: "transport:written-unanswered", resendWasSafe: false))
        // Another never-sent failure is still retried by the senders.
        let refused = AttemptResult.transportFailure(
            .fcm, reason: "transport:connect-failed", resendIsSafe: true, message: nil)
        #expect(refused.decision == .retry)
    }

    @Test func markdownCarriesEveryReason() throws {
        let md = OutcomeTable.markdown()
        for row in OutcomeTable.apnsReasons { #expect(md.contains(row.reason)) }
        for row in OutcomeTable.fcmReasons where !row.reason.hasPrefix("oauth:") { #expect(md.contains(row.reason)) }
        // The copy in docs/ (and the README) is the code's table: regenerate it when the table changes.
        let docs = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .deletingLastPathComponent().appendingPathComponent("docs/outcome-table.md")
        #expect(try String(contentsOf: docs, encoding: .utf8) == md, "docs/outcome-table.md is stale")
        let readme = docs.deletingLastPathComponent().deletingLastPathComponent().appendingPathComponent("README.md")
        #expect(
            try String(contentsOf: readme, encoding: .utf8).contains(
                md.trimmingCharacters(in: .whitespacesAndNewlines)),
            "README.md's outcome table is stale")
        // header + separator + accepted + one row per other decision + `expired`, the outcome without an answer
        #expect(md.split(separator: "\n").count == 2 + OutcomeDecision.allCases.count + 1)
        #expect(md.contains("| expired ("))
    }

    @Test func retryPolicyBoundsAndRetryAfter() {
        let p = RetryPolicy(maxAttempts: 3, baseDelaySeconds: 1, maxDelaySeconds: 30, maxRetryAfterSeconds: 60)
        #expect(p.delay(afterAttempt: 1, retryAfterSeconds: nil, random: 0) == 0.5)
        #expect(p.delay(afterAttempt: 2, retryAfterSeconds: nil, random: 1) == 2)
        #expect(p.delay(afterAttempt: 3, retryAfterSeconds: nil, random: 0) == nil)
        #expect(p.delay(afterAttempt: 1, retryAfterSeconds: 10, random: 0) == 10)
        #expect(p.delay(afterAttempt: 1, retryAfterSeconds: 61, random: 0) == nil)
        let now = Date(timeIntervalSince1970: 1_445_412_470) // Wed, 21 Oct 2015 07:27:50 GMT
        #expect(RetryAfter.seconds(" 7 ", now: now) == 7)
        #expect(RetryAfter.seconds("Wed, 21 Oct 2015 07:28:00 GMT", now: now) == 10)
        #expect(RetryAfter.seconds("tomorrow", now: now) == nil)
    }
}
