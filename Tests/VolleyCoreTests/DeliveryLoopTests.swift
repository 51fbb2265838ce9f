import Foundation
import Testing
import VolleyCore

/// The retry/refresh loop as pure logic: scripted answers, timers run at once, delays recorded.
@Suite struct DeliveryLoopTests {
    final class Script: @unchecked Sendable {
        let lock = NSLock()
        var answers: [AttemptResult]
        var attempts = 0
        var delays: [Double] = []
        var refreshes = 0
        init(_ answers: [AttemptResult]) { self.answers = answers }
        func next() -> AttemptResult {
            lock.withLock {
                attempts += 1
                return answers.count > 1 ? answers.removeFirst() : answers[0]
            }
        }
    }

    func run(_ script: Script, refreshAllowed: Bool = true, policy: RetryPolicy = RetryPolicy(maxAttempts: 4)) -> DeliveryOutcome {
        let box = OutcomeBox()
        let loop = DeliveryLoop(
            policy: policy,
            attempt: { done in done(script.next()) },
            refreshCredential: { _ in script.lock.withLock { script.refreshes += 1 }; return refreshAllowed },
            schedule: { delay, work in script.lock.withLock { script.delays.append(delay) }; work() },
            random: { 0.5 },
            completion: { outcome, _ in box.set(outcome) })
        loop.start()
        return box.get()!
    }

    final class OutcomeBox: @unchecked Sendable {
        let lock = NSLock()
        var value: DeliveryOutcome?
        var count = 0
        func set(_ o: DeliveryOutcome) { lock.withLock { value = o; count += 1 } }
        func get() -> DeliveryOutcome? { lock.withLock { value } }
    }

    static func apns(_ status: Int, _ reason: String? = nil, retryAfter: Double? = nil) -> AttemptResult {
        AttemptResult(answer: ProviderAnswer(provider: .apns, status: status, reason: reason.map { OutcomeReason($0) }),
                      messageID: status == 200 ? "id-1" : nil, retryAfterSeconds: retryAfter)
    }

    @Test func retriesThenAccepts() {
        let s = Script([Self.apns(503, "ServiceUnavailable"), Self.apns(429, "TooManyRequests"), Self.apns(200)])
        #expect(run(s) == .accepted)
        #expect(s.attempts == 3)
        #expect(s.delays.count == 2)
        #expect(s.delays[1] > s.delays[0])      // exponential
    }

    @Test func boundedRetriesThenFailed() {
        let s = Script([Self.apns(500, "InternalServerError")])
        #expect(run(s) == .failed(reason: "InternalServerError", resendWasSafe: true))
        #expect(s.attempts == 4)
    }

    @Test func honoursRetryAfter() {
        let s = Script([AttemptResult(answer: ProviderAnswer(provider: .fcm, status: 429, reason: "QUOTA_EXCEEDED"),
                                      retryAfterSeconds: 7), Self.apns(200)])
        _ = run(s)
        #expect(s.delays == [7])
    }

    @Test func refreshAndResendOnce() {
        let s = Script([Self.apns(403, "ExpiredProviderToken"), Self.apns(200)])
        #expect(run(s) == .accepted)
        #expect(s.refreshes == 1)
        #expect(s.delays.isEmpty)
        let again = Script([Self.apns(403, "ExpiredProviderToken")])
        #expect(run(again) == .failed(reason: "ExpiredProviderToken", resendWasSafe: true))
        #expect(again.attempts == 2)
    }

    @Test func refreshNotAllowedBacksOff() {
        let s = Script([Self.apns(403, "ExpiredProviderToken"), Self.apns(200)])
        #expect(run(s, refreshAllowed: false) == .accepted)
        #expect(s.delays.count == 1)
    }

    @Test func terminalAnswersAreNotRetried() {
        for (status, reason, action) in [(410, "Unregistered", RejectionAction.removeToken),
                                         (403, "InvalidProviderToken", .fixApp),
                                         (400, "PayloadEmpty", .invalidNotification),
                                         (400, "Whatever", .unknown)] {
            let s = Script([Self.apns(status, reason)])
            #expect(run(s) == .rejected(status: status, reason: OutcomeReason(reason), action: action))
            #expect(s.attempts == 1)
        }
    }
}
