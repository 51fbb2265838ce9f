import Foundation
import Synchronization
import Testing
import VolleyCore
import VolleyTestTags

/// A seeded random source (SplitMix64), so the jitter a test sees is the same on every run.
struct SeededRandom: RandomNumberGenerator, Sendable {
    var state: UInt64
    init(seed: UInt64) { state = seed }
    mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }
}

func apns(_ status: Int, _ reason: String? = nil, retryAfter: String? = nil) -> AttemptResult {
    AttemptResult(
        answer: ProviderAnswer(provider: .apns, status: status, reason: reason.map { OutcomeReason($0) }),
        retryAfter: retryAfter)
}

func fcm(_ status: Int, _ reason: String? = nil, retryAfter: String? = nil) -> AttemptResult {
    AttemptResult(
        answer: ProviderAnswer(provider: .fcm, status: status, reason: reason.map { OutcomeReason($0) }),
        retryAfter: retryAfter)
}

func transport(safe: Bool, _ kind: String = "stream-reset") -> AttemptResult {
    .transportFailure(.apns, reason: OutcomeReason("transport:" + kind), resendIsSafe: safe, message: "reset")
}

/// One delivery driven through the machine with scripted answers (the last one repeats) and credential refreshes
/// (`refreshes`: whether each refresh yields a newer credential; the last one repeats).
struct Drive {
    var sends: [Int] = []
    var waits: [Double] = []
    var refreshes = 0
    var outcome: DeliveryOutcome?
    var attempts = 0

    init(
        _ answers: [AttemptResult], refreshes refreshResults: [Bool] = [true],
        policy: RetryPolicy = RetryPolicy(
            maxAttempts: 4, baseDelaySeconds: 1, maxDelaySeconds: 30,
            maxRetryAfterSeconds: 120),
        clock: ManualClock = ManualClock(), seed: UInt64 = 42
    ) {
        var machine = DeliveryStateMachine(policy: policy, clock: clock, random: SeededRandom(seed: seed))
        var answered = 0
        func next() -> AttemptResult {
            defer { answered += 1 }
            return answers[min(answered, answers.count - 1)]
        }
        var action = machine.attemptCompleted(next())
        while true {
            switch action {
            case .send(let n):
                sends.append(n)
                action = machine.attemptCompleted(next())
            case .refreshCredential:
                let ok = refreshResults[min(refreshes, refreshResults.count - 1)]
                refreshes += 1
                action = ok ? machine.credentialRefreshed() : machine.credentialRefreshFailed()
            case .wait(let seconds):
                waits.append(seconds)
                clock.advance(by: seconds)
                action = machine.backoffElapsed()
            case .finish(let outcome):
                self.outcome = outcome
                attempts = answered
                #expect(machine.isFinished)
                return
            }
        }
    }
}

@Suite("DeliveryStateMachine", .tags(.unit)) struct DeliveryStateMachineTests {
    @Test func acceptedOnTheFirstAnswer() {
        let d = Drive([apns(200)])
        #expect(d.outcome == .accepted)
        #expect(d.attempts == 1)
        #expect(d.sends.isEmpty && d.waits.isEmpty)
        #expect(Drive([fcm(200)]).outcome == .accepted)
    }

    @Test func unregisteredRemovesTheToken() {
        #expect(
            Drive([apns(410, "Unregistered")]).outcome
                == .rejected(status: 410, reason: "Unregistered", action: .removeToken))
        #expect(
            Drive([fcm(404, "UNREGISTERED")]).outcome
                == .rejected(status: 404, reason: "UNREGISTERED", action: .removeToken))
    }

    static let transient: [AttemptResult] = [
        apns(429, "TooManyRequests"), apns(503, "ServiceUnavailable"), apns(500, "InternalServerError"),
        fcm(429, "QUOTA_EXCEEDED"), fcm(503, "UNAVAILABLE"), fcm(503),
    ]

    /// Back-off doubles from the base and is jittered into [½, 1] of it; attempts are bounded, then failed.
    @Test(arguments: transient)
    func transientRetriesWithGrowingJitteredBackoffThenFails(_ answer: AttemptResult) {
        let policy = RetryPolicy(maxAttempts: 5, baseDelaySeconds: 1, maxDelaySeconds: 30, maxRetryAfterSeconds: 120)
        let d = Drive([answer], policy: policy)
        #expect(d.outcome == .failed(reason: answer.reportedReason, resendWasSafe: true))
        #expect(d.attempts == 5)
        #expect(d.sends == [2, 3, 4, 5])
        #expect(d.waits.count == 4)
        for (i, wait) in d.waits.enumerated() {
            let full = Double(1 << i)
            #expect(wait >= full / 2 && wait <= full, "wait \(i + 1): \(wait) s")
        }
        for i in 1..<d.waits.count { #expect(d.waits[i] > d.waits[i - 1]) }
        // Seeded: the same seed gives the same waits; jitter spreads another seed's.
        #expect(Drive([answer], policy: policy).waits == d.waits)
        #expect(Drive([answer], policy: policy, seed: 7).waits != d.waits)
    }

    @Test func backoffIsCappedAtTheMaximum() {
        let policy = RetryPolicy(maxAttempts: 8, baseDelaySeconds: 1, maxDelaySeconds: 4, maxRetryAfterSeconds: 120)
        let d = Drive([apns(503, "ServiceUnavailable")], policy: policy)
        #expect(d.waits.count == 7)
        #expect(d.waits.allSatisfy { $0 <= 4 })
        #expect(d.waits.suffix(4).allSatisfy { $0 >= 2 })
    }

    @Test func retriesThenAccepts() {
        let d = Drive([apns(503, "ServiceUnavailable"), apns(429, "TooManyRequests"), apns(200)])
        #expect(d.outcome == .accepted)
        #expect(d.attempts == 3)
        #expect(d.waits.count == 2)
    }

    /// Retry-After as delta-seconds and as an HTTP-date in each of its three forms, read against the clock.
    @Test(arguments: [
        "20", " 20 ", "Fri, 15 Jan 2027 08:00:20 GMT", "Friday, 15-Jan-27 08:00:20 GMT",
        "Fri Jan 15 08:00:20 2027",
    ])
    func retryAfterIsHonoured(_ header: String) {
        let clock = ManualClock(Date(timeIntervalSince1970: 1_800_000_000)) // Fri, 15 Jan 2027 08:00:00 GMT
        let d = Drive([fcm(503, "UNAVAILABLE", retryAfter: header), fcm(200)], clock: clock)
        #expect(d.outcome == .accepted)
        #expect(d.waits == [20])
    }

    @Test func retryAfterInThePastOrUnreadableLeavesTheBackoff() {
        let clock = ManualClock(Date(timeIntervalSince1970: 1_800_000_000))
        for header in ["Fri, 15 Jan 2027 07:59:00 GMT", "soon", "-3", "Fri, 32 Jan 2027 08:00:20 GMT"] {
            let d = Drive([fcm(429, "QUOTA_EXCEEDED", retryAfter: header), fcm(200)], clock: clock)
            #expect(d.waits.count == 1)
            #expect(d.waits[0] >= 0.5 && d.waits[0] <= 1, "\(header): \(d.waits)")
        }
    }

    @Test func retryAfterLongerThanThePolicyWaitsEndsTheDelivery() {
        let d = Drive([fcm(429, "QUOTA_EXCEEDED", retryAfter: "121"), fcm(200)])
        #expect(d.outcome == .failed(reason: "QUOTA_EXCEEDED", resendWasSafe: true))
        #expect(d.attempts == 1)
        #expect(d.waits.isEmpty)
    }

    static let credentialRejections: [AttemptResult] = [
        apns(403, "ExpiredProviderToken"), fcm(401, "UNAUTHENTICATED"), fcm(401),
    ]

    @Test(arguments: credentialRejections)
    func credentialRejectionRefreshesAndResendsOnce(_ rejection: AttemptResult) {
        let ok = Drive([rejection, apns(200)])
        #expect(ok.outcome == .accepted)
        #expect(ok.refreshes == 1)
        #expect(ok.sends == [2])
        #expect(ok.waits.isEmpty)
        // Rejected again after the refresh: terminal, no second refresh, no back-off.
        let again = Drive([rejection])
        #expect(again.outcome == .failed(reason: rejection.reportedReason, resendWasSafe: true))
        #expect(again.refreshes == 1)
        #expect(again.attempts == 2)
        #expect(again.waits.isEmpty)
    }

    /// No newer credential yet (APNs allows one provider token per 20 minutes): back off like a transient answer.
    @Test func refreshNotReadyBacksOffThenRefreshesLater() {
        let d = Drive(
            [apns(403, "ExpiredProviderToken"), apns(403, "ExpiredProviderToken"), apns(200)],
            refreshes: [false, true])
        #expect(d.outcome == .accepted)
        #expect(d.refreshes == 2)
        #expect(d.waits.count == 1)
        #expect(d.attempts == 3)
        let never = Drive([apns(403, "ExpiredProviderToken")], refreshes: [false])
        #expect(never.outcome == .failed(reason: "ExpiredProviderToken", resendWasSafe: true))
        #expect(never.attempts == 4)
    }

    static let terminalAnswers: [(AttemptResult, RejectionAction)] = [
        (apns(403, "InvalidProviderToken"), .fixApp), (apns(403, "BadCertificate"), .fixApp),
        (apns(403, "BadCertificateEnvironment"), .fixApp), (apns(400, "TopicDisallowed"), .fixApp),
        (apns(400, "BadTopic"), .fixApp), (apns(403, "Forbidden"), .fixApp),
        (fcm(403, "SENDER_ID_MISMATCH"), .fixApp), (fcm(401, "THIRD_PARTY_AUTH_ERROR"), .fixApp),
        (fcm(403, "PERMISSION_DENIED"), .fixApp), (fcm(400, "oauth:invalid_grant"), .fixApp),
        (apns(400, "PayloadEmpty"), .invalidNotification), (fcm(400, "INVALID_ARGUMENT"), .invalidNotification),
        (apns(400, "BrandNewReason"), .unknown), (fcm(418), .unknown),
    ]

    @Test(arguments: terminalAnswers)
    func terminalAnswersAreNotRetried(_ answer: AttemptResult, _ action: RejectionAction) {
        let d = Drive([answer, apns(200)])
        #expect(d.outcome == .rejected(status: answer.answer.status, reason: answer.reportedReason, action: action))
        #expect(d.attempts == 1)
        #expect(d.refreshes == 0)
    }

    @Test func transportFailureIsRetriedOnlyWhenSafe() {
        let safe = Drive([transport(safe: true, "connect-failed"), apns(200)])
        #expect(safe.outcome == .accepted)
        #expect(safe.waits.count == 1)
        let unsafe = Drive([transport(safe: false), apns(200)])
        #expect(unsafe.outcome == .failed(reason: "transport:stream-reset", resendWasSafe: false))
        #expect(unsafe.attempts == 1)
        let alwaysSafe = Drive([transport(safe: true, "connect-failed")])
        #expect(alwaysSafe.outcome == .failed(reason: "transport:connect-failed", resendWasSafe: true))
        #expect(alwaysSafe.attempts == 4)
        // A transport that cannot be set up for this app is its configuration.
        let misconfigured = Drive([transport(safe: true, "certificate-verification")])
        #expect(
            misconfigured.outcome
                == .rejected(status: 0, reason: "transport:certificate-verification", action: .fixApp))
    }

    @Test func httpDateForms() {
        let now = Date(timeIntervalSince1970: 1_800_000_000)
        let rfc = Date(timeIntervalSince1970: 784_111_777) // RFC 9110 §5.6.7's example
        #expect(RetryAfter.httpDate("Sun, 06 Nov 1994 08:49:37 GMT", now: now) == rfc)
        #expect(RetryAfter.httpDate("Sunday, 06-Nov-94 08:49:37 GMT", now: now) == rfc)
        #expect(RetryAfter.httpDate("Sun Nov  6 08:49:37 1994", now: now) == rfc)
        // A two-digit year more than 50 years ahead is the latest past year with those digits.
        #expect(
            RetryAfter.httpDate("Saturday, 06-Nov-77 08:49:37 GMT", now: now)
                == RetryAfter.httpDate("Sat, 06 Nov 2077 08:49:37 GMT", now: now))
        #expect(
            RetryAfter.httpDate("Sunday, 06-Nov-78 08:49:37 GMT", now: now)
                == RetryAfter.httpDate("Sun, 06 Nov 1978 08:49:37 GMT", now: now))
        for bad in [
            "", "Sun, 06 Nov 1994 08:49:37 UTC", "Sun, 06 Foo 1994 08:49:37 GMT",
            "Sun, 06 Nov 1994 25:00:00 GMT", "Sun, 06 Nov 1994 08:49 GMT", "06 Nov 1994 08:49:37",
            "Sun, 06 Nov 994 08:49:37 GMT",
        ] {
            #expect(RetryAfter.httpDate(bad, now: now) == nil, "\(bad)")
        }
        #expect(RetryAfter.seconds("7", now: now) == 7)
        #expect(RetryAfter.seconds("Fri, 15 Jan 2027 08:01:00 GMT", now: now) == 60)
    }
}

/// The provider side of a delivery: a scripted sender whose timers and attempts run when the test says.
@Suite("DeliveryStateMachine run", .tags(.unit)) struct DeliveryRunTests {
    final class ScriptedSender: DeliverySender, DeliveryReceiver, @unchecked Sendable {
        let retryPolicy = RetryPolicy(
            maxAttempts: 3, baseDelaySeconds: 1, maxDelaySeconds: 30,
            maxRetryAfterSeconds: 120)
        let clock: any WallClock = ManualClock()
        struct Log {
            var answers: [AttemptResult]
            var attempts = 0
            var timers: [(seconds: Double, work: @Sendable () -> Void)] = []
            var rejected: [String?] = []
            var stopped: [DeliveryOutcome] = []
            var delivered: [DeliveryOutcome] = []
        }
        let log: Mutex<Log>
        init(_ answers: [AttemptResult]) { log = Mutex(Log(answers: answers)) }

        func attempt(
            _ prepared: any PreparedNotification, to device: Device,
            completion: @escaping @Sendable (AttemptResult, String?) -> Void
        ) {
            let (answer, n) = log.withLock { l in
                l.attempts += 1
                return (l.answers[min(l.attempts - 1, l.answers.count - 1)], l.attempts)
            }
            completion(answer, "credential-\(n)")
        }
        func refreshCredential(rejected used: String?) -> Bool {
            log.withLock { $0.rejected.append(used) }
            return true
        }
        func schedule(after seconds: Double, _ work: @escaping @Sendable () -> Void) {
            log.withLock { $0.timers.append((seconds, work)) }
        }
        func stopApp(_ outcome: DeliveryOutcome) { log.withLock { $0.stopped.append(outcome) } }
        func delivered(_ device: Device, _ outcome: DeliveryOutcome) { log.withLock { $0.delivered.append(outcome) } }
        /// Fires the oldest pending timer.
        func fireTimer() -> Bool {
            let work = log.withLock { $0.timers.isEmpty ? nil : $0.timers.removeFirst().work }
            guard let work else { return false }
            work()
            return true
        }
    }

    struct Prepared: PreparedNotification {
        var platform: Platform { .ios }
        var payloadBytes: Int { 1 }
    }

    func start(_ sender: ScriptedSender, first: AttemptResult) {
        PendingDelivery(
            sender: sender, prepared: Prepared(), device: Device(platform: .ios, token: DeviceToken("t")),
            credential: "credential-0", receiver: sender
        ).firstAttemptCompleted(first)
    }

    @Test func retriesRunOnTheSendersTimersAndCompleteOnce() {
        let sender = ScriptedSender([apns(503, "ServiceUnavailable"), apns(200)])
        start(sender, first: apns(503, "ServiceUnavailable"))
        #expect(sender.log.withLock { $0.delivered.isEmpty && $0.timers.count == 1 })
        #expect(sender.fireTimer())
        #expect(sender.log.withLock { $0.timers.count == 1 })
        #expect(sender.fireTimer())
        #expect(!sender.fireTimer())
        #expect(sender.log.withLock { $0.delivered } == [.accepted])
        #expect(sender.log.withLock { $0.attempts } == 2)
    }

    @Test func refreshNamesTheRejectedCredential() {
        let sender = ScriptedSender([apns(403, "ExpiredProviderToken")])
        start(sender, first: apns(403, "ExpiredProviderToken"))
        #expect(sender.log.withLock { $0.rejected } == ["credential-0"])
        #expect(sender.log.withLock { $0.delivered } == [.failed(reason: "ExpiredProviderToken", resendWasSafe: true)])
        #expect(sender.log.withLock { $0.attempts } == 1)
    }

    @Test func fixAppStopsTheAppAndDelivers() {
        let sender = ScriptedSender([apns(200)])
        start(sender, first: apns(403, "InvalidProviderToken"))
        let fix = DeliveryOutcome.rejected(status: 403, reason: "InvalidProviderToken", action: .fixApp)
        #expect(sender.log.withLock { $0.stopped } == [fix])
        #expect(sender.log.withLock { $0.delivered } == [fix])
        #expect(sender.log.withLock { $0.attempts } == 0)
    }
}
