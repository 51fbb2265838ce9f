import Foundation
import Synchronization
import Testing
import VolleyCore
import VolleyTestTags

/// The part of a send APNs and FCM share, on a provider whose requests, timers and log the test holds.
@Suite(.tags(.unit)) struct ProviderSendShellTests {
    struct Prepared: PreparedNotification {
        var platform: Platform { .ios }
        var payloadBytes: Int { 1 }
    }
    struct OtherPrepared: PreparedNotification {
        var platform: Platform { .android }
        var payloadBytes: Int { 1 }
    }

    struct Log {
        var firstAttempts = 0
        var attempts = 0
        var timers: [(seconds: Double, work: @Sendable () -> Void)] = []
        var logged: [String] = []
        var delivered: [DeliveryOutcome] = []
    }

    final class LogBox: Sendable {
        private let state = Mutex(Log())
        func withLock<T>(_ body: (inout Log) -> T) -> T { state.withLock { body(&$0) } }
    }

    final class Provider: ShellSender, DeliveryReceiver, @unchecked Sendable {
        let log: LogBox
        let clock: ManualClock
        let pause: FleetPauseGate
        let shell: ProviderSendShell

        init(pausingStatuses: [Int] = [503]) {
            let log = LogBox()
            let clock = ManualClock()
            self.log = log
            self.clock = clock
            pause = FleetPauses(onThrottle: { _, _ in }).gate(for: FleetPauseKey(provider: .apns, target: "topic"))
            shell = ProviderSendShell(
                app: "Test_App", providerName: "APNs", retryPolicy: RetryPolicy(), clock: clock,
                pauseGate: pause, pausingStatuses: pausingStatuses,
                logStop: { message in log.withLock { $0.logged.append(message) } },
                schedule: { seconds, work in log.withLock { $0.timers.append((seconds, work)) } })
        }

        func sendFirstAttempt(
            _ notification: Prepared, prepared: any PreparedNotification, to device: Device,
            receiver: any DeliveryReceiver, holdable: Bool
        ) {
            log.withLock { $0.firstAttempts += 1 }
        }
        func attemptOnce(
            _ notification: Prepared, to device: Device,
            completion: @escaping @Sendable (AttemptResult, String?) -> Void
        ) {
            log.withLock { $0.attempts += 1 }
            completion(AttemptResult(answer: ProviderAnswer(provider: .apns, status: 200)), nil)
        }
        static var wrongPlatformAttempt: AttemptResult {
            .transportFailure(.apns, reason: "WrongPlatform", resendIsSafe: false, message: nil)
        }
        func refreshCredential(rejected used: String?) -> Bool { false }
        func delivered(_ device: Device, _ outcome: DeliveryOutcome) { log.withLock { $0.delivered.append(outcome) } }

        func send(_ prepared: any PreparedNotification) {
            sendThroughShell(prepared, to: device, receiver: self)
        }
        /// Moves the clock by the oldest timer's wait and runs it.
        func fireTimer() -> Bool {
            let timer = log.withLock { $0.timers.isEmpty ? nil : $0.timers.removeFirst() }
            guard let timer else { return false }
            clock.advance(by: timer.seconds)
            timer.work()
            return true
        }
        let device = Device(platform: .ios, token: DeviceToken("t"))
    }

    static func answer(_ status: Int, _ reason: OutcomeReason? = nil, retryAfter: String? = nil) -> AttemptResult {
        AttemptResult(answer: ProviderAnswer(provider: .apns, status: status, reason: reason), retryAfter: retryAfter)
    }

    @Test func aSendTheGatesLetThroughGoesToTheProviderAtOnce() {
        let provider = Provider()
        provider.send(Prepared())
        #expect(provider.log.withLock { $0.firstAttempts == 1 && $0.timers.isEmpty && $0.delivered.isEmpty })
    }

    @Test func anotherPlatformsNotificationFinishesWithoutARequest() {
        let provider = Provider()
        provider.send(OtherPrepared())
        #expect(provider.log.withLock { $0.delivered } == [.wrongPlatform])
        #expect(provider.log.withLock { $0.firstAttempts } == 0)
        let result = Mutex<AttemptResult?>(nil)
        provider.attempt(OtherPrepared(), to: provider.device) { r, _ in result.withLock { $0 = r } }
        #expect(result.withLock { $0?.answer } == Provider.wrongPlatformAttempt.answer)
        #expect(provider.log.withLock { $0.attempts } == 0)
    }

    @Test func aStoppedAppFailsEverySendWithItsOutcomeAndLogsOnce() {
        let provider = Provider()
        let fixApp = DeliveryOutcome.rejected(status: 403, reason: "InvalidProviderToken", action: .fixApp)
        provider.stopApp(fixApp)
        provider.stopApp(fixApp)
        provider.send(Prepared())
        provider.send(OtherPrepared())
        #expect(provider.log.withLock { $0.delivered } == [fixApp, fixApp])
        #expect(provider.log.withLock { $0.firstAttempts } == 0)
        let logged = provider.log.withLock { $0.logged }
        #expect(logged.count == 1)
        #expect(logged.first?.hasPrefix("app Test_App: APNs answered 403 InvalidProviderToken — ") == true)
        #expect(provider.shell.stopSwitch.message == logged.first)
    }

    @Test func aPausingAnswerHoldsFirstSendsAndRetriesOnTheProvidersTimer() {
        let provider = Provider()
        provider.answered(Self.answer(503, "ServiceUnavailable", retryAfter: "10"))
        provider.send(Prepared())
        provider.attempt(Prepared(), to: provider.device) { _, _ in }
        let waits = provider.log.withLock { $0.timers.map(\.seconds) }
        #expect(waits.count == 2)
        #expect(waits.allSatisfy { $0 >= 10 && $0 <= 10.05 })
        #expect(provider.log.withLock { $0.firstAttempts + $0.attempts } == 0)
        // The pause is over when the timer fires: each goes on, once.
        #expect(provider.fireTimer())
        #expect(provider.fireTimer())
        #expect(!provider.fireTimer())
        #expect(provider.log.withLock { $0.firstAttempts == 1 && $0.attempts == 1 })
    }

    @Test func onlyThePausingStatusesPauseTheFleet() {
        let apns = Provider(pausingStatuses: [503])
        apns.answered(Self.answer(429, "TooManyRequests", retryAfter: "10"))
        apns.send(Prepared())
        #expect(apns.log.withLock { $0.firstAttempts == 1 && $0.timers.isEmpty })
        let fcm = Provider(pausingStatuses: [429, 503])
        fcm.answered(Self.answer(429, "QUOTA_EXCEEDED", retryAfter: "10"))
        fcm.send(Prepared())
        #expect(fcm.log.withLock { $0.firstAttempts == 0 && $0.timers.count == 1 })
    }

    @Test func aSendHeldLongerThanTheRetryBudgetGoesAnyway() {
        let provider = Provider()
        let start = provider.clock.now()
        // The fleet's pause moves later while the send waits, past RetryPolicy.maxRetryAfterSeconds (120 s).
        provider.pause.sharedRead(start.addingTimeInterval(100))
        provider.send(Prepared())
        provider.pause.sharedRead(start.addingTimeInterval(1000))
        #expect(provider.fireTimer())
        // Held again after 100 s: within the budget.
        #expect(provider.log.withLock { $0.firstAttempts == 0 && $0.timers.count == 1 })
        provider.pause.sharedRead(start.addingTimeInterval(5000))
        #expect(provider.fireTimer())
        // Held about 1000 s: the send goes although the pause lasts.
        #expect(provider.log.withLock { $0.firstAttempts } == 1)
        #expect(provider.pause.holdSeconds(clock: provider.clock) != nil)
    }
}
