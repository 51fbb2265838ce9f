import Testing
import VolleyTestTags

@testable import VolleyHTTP2

/// The pool's decisions, driven event by event with a manual clock: no sockets, no queues, no waiting.
@Suite("HTTP2PoolStateMachine", .tags(.unit))
struct HTTP2PoolStateMachineTests {
    typealias Machine = HTTP2PoolStateMachine<ManualClock, FixedRandom>
    typealias ID = HTTP2PoolConnectionID

    final class ManualClock: HTTP2PoolClock {
        var now = HTTP2PoolInstant(nanoseconds: 1_000_000_000)
        func advance(seconds: Double) { now = now.advanced(bySeconds: seconds) }
    }

    /// Returns the same number every time: 0 gives the smallest jitter factor (0.5), `.max` the largest (≈ 1).
    struct FixedRandom: RandomNumberGenerator {
        var value: UInt64
        mutating func next() -> UInt64 { value }
    }

    /// Records every completion it gets.
    final class TestRequest: HTTP2PendingRequest, @unchecked Sendable {
        let number: Int
        var completions: [Result<HTTP2Response, HTTP2Error>] = []
        init(_ number: Int) {
            self.number = number
            super.init(HTTP2Request(authority: "api.example", path: "/\(number)"))
        }
        override func complete(_ result: Result<HTTP2Response, HTTP2Error>) { completions.append(result) }
        var error: HTTP2Error? {
            guard completions.count == 1, case .failure(let e) = completions[0] else { return nil }
            return e
        }
        var succeeded: Bool {
            guard completions.count == 1, case .success = completions[0] else { return false }
            return true
        }
    }

    let clock = ManualClock()

    func machine(
        connections: Int = 1, timeout: Double = 10, maxResends: Int = 3, base: Double = 0.1,
        max: Double = 1.0, random: UInt64 = 0, maxQueued: Int = 100, outage: Double = 120,
        resendUnanswered: Bool = false
    ) -> Machine {
        var configuration = HTTP2ClientConfiguration(
            host: "api.example", connections: connections,
            requestTimeoutSeconds: timeout, maxResends: maxResends,
            reconnectBaseSeconds: base, reconnectMaxSeconds: max,
            maxQueuedRequests: maxQueued)
        configuration.providerOutageSeconds = outage
        configuration.resendUnanswered = resendUnanswered
        return Machine(configuration: configuration, clock: clock, random: FixedRandom(value: random))
    }

    /// What the driver does with completions: deliver each one.
    @discardableResult
    func run(_ a: Machine.Action) -> Machine.Action {
        for p in a.complete { p.deliver() }
        return a
    }

    /// A stream of `p` closed with `result`, reported by connection `id`.
    func close(
        _ m: inout Machine, _ p: TestRequest..., on id: ID,
        _ result: Result<HTTP2Response, HTTP2Error> = .success(HTTP2Response(status: 200))
    ) -> Machine.Action {
        run(m.requestsCompleted(p.map { $0.finished(result) }, on: id, peakStreams: 1))
    }

    static let refusedAboveLastStream = HTTP2Error(
        .goAway, resendIsSafe: true,
        "stream 5 above GOAWAY last-stream-id 3")

    func numbers(_ requests: [HTTP2PendingRequest]) -> [Int] { requests.map { ($0 as! TestRequest).number } }

    // MARK: connections and assignment

    @Test func firstSubmitOpensTheConfiguredConnectionsAndQueues() {
        var m = machine(connections: 3)
        let r = TestRequest(0)
        let a = m.requestSubmitted(r)
        #expect(a.open.count == 3)
        #expect(Set(a.open).count == 3)
        #expect(r.custody == .queued)
        #expect(m.queuedCount == 1)
        // More demand opens nothing more: all three are on their way.
        #expect(m.requestSubmitted(TestRequest(1)).open.isEmpty)
        #expect(m.statistics.connectionsOpened == 3)
    }

    @Test func establishedConnectionTakesTheQueueAndNewRequestsGoToTheLeastLoaded() throws {
        var m = machine(connections: 2)
        let r0 = TestRequest(0)
        let r1 = TestRequest(1)
        let opened = m.requestSubmitted(r0).open
        _ = m.requestSubmitted(r1)
        let c0 = opened[0]
        let c1 = opened[1]
        // The first connection ready takes everything waiting, directly (no drain needed).
        let a0 = m.connectionEstablished(c0, maxStreams: 10)
        #expect(numbers(a0.start) == [0, 1])
        #expect(a0.drain.isEmpty)
        #expect(m.connectionEstablished(c1, maxStreams: 10).start.isEmpty)
        // c0 holds 2, c1 none: the next two go to c1, then they are level and the first scanned wins.
        let r2 = TestRequest(2)
        let r3 = TestRequest(3)
        let r4 = TestRequest(4)
        #expect(m.requestSubmitted(r2).drain == [c1])
        #expect(m.requestSubmitted(r3).drain.isEmpty, "c1 has been told to collect already")
        #expect(r2.custody == .connection(c1) && r3.custody == .connection(c1))
        _ = m.requestSubmitted(r4)
        #expect(r4.custody == .connection(c0))
        #expect(numbers(m.workRequested(c1)) == [2, 3])
        #expect(numbers(m.workRequested(c0)) == [4])
        // A connection collected its inbox: the next request assigned to it asks for a drain again.
        let r5 = TestRequest(5)
        let a5 = m.requestSubmitted(r5)
        #expect(a5.drain.count == 1)
    }

    @Test func requestsQueueWhenEveryStreamIsTakenAndGoOutAsStreamsClose() {
        var m = machine()
        let c = m.requestSubmitted(TestRequest(-1)).open[0]
        _ = m.connectionEstablished(c, maxStreams: 2) // takes request -1
        let r0 = TestRequest(0)
        let r1 = TestRequest(1)
        let r2 = TestRequest(2)
        _ = m.requestSubmitted(r0)
        #expect(numbers(m.workRequested(c)) == [0])
        let a = m.requestSubmitted(r1)
        #expect(a.drain.isEmpty && a.open.isEmpty)
        _ = m.requestSubmitted(r2)
        #expect(m.queuedCount == 2)
        // One stream closes: its request completes, one waiting request takes the stream.
        let done = close(&m, r0, on: c)
        #expect(r0.succeeded)
        #expect(numbers(done.start) == [1])
        #expect(done.collectAfterCompletions)
        #expect(m.queuedCount == 1)
        #expect(m.statistics.requestsSucceeded == 1)
    }

    @Test func queueBeyondItsBoundFailsAtOnceSafeToResend() {
        var m = machine(maxQueued: 1)
        _ = m.requestSubmitted(TestRequest(0))
        let r1 = TestRequest(1)
        run(m.requestSubmitted(r1))
        #expect(r1.error?.kind == .queueFull)
        #expect(r1.error?.resendIsSafe == true)
    }

    // MARK: SETTINGS

    @Test func settingsLowerAndRaiseTheStreamLimit() {
        var m = machine()
        let c = m.requestSubmitted(TestRequest(0)).open[0]
        let r0 = TestRequest(0)
        _ = m.requestSubmitted(r0)
        #expect(m.connectionEstablished(c, maxStreams: 4).start.count == 2)
        // Lowered to 1 with 2 open: the open streams stay, nothing new goes out until both closed.
        #expect(m.settingsChanged(c, maxConcurrentStreams: 1).start.isEmpty)
        let r1 = TestRequest(1)
        #expect(m.requestSubmitted(r1).drain.isEmpty)
        #expect(m.queuedCount == 1)
        #expect(close(&m, r0, on: c).start.isEmpty, "one stream still open, the limit is one")
        // Raised to 3: the waiting request goes out on the SETTINGS itself.
        #expect(numbers(m.settingsChanged(c, maxConcurrentStreams: 3).start) == [1])
        #expect(m.queuedCount == 0)
    }

    // MARK: GOAWAY and resends

    @Test func goAwayRetiresTheConnectionResendsWhatWasNotProcessedAndOpensAReplacement() {
        var m = machine(connections: 1)
        let first = TestRequest(0)
        let c0 = m.requestSubmitted(first).open[0]
        _ = m.connectionEstablished(c0, maxStreams: 10)
        let processed = TestRequest(1)
        let above = TestRequest(2)
        let unstarted = TestRequest(3)
        let inInbox = TestRequest(4)
        for r in [processed, above, unstarted] { _ = m.requestSubmitted(r) }
        _ = m.workRequested(c0)
        _ = m.requestSubmitted(inInbox) // assigned to c0, not collected yet
        // GOAWAY: c0 gives back the request it had not started; its inbox is taken back too.
        let g = m.goAwayReceived(c0, unstarted: [unstarted])
        #expect(g.open.count == 1, "a replacement is opened")
        let c1 = g.open[0]
        #expect(m.queuedCount == 2)
        #expect(m.statistics.goAwaysReceived == 1)
        // Streams at or below last-stream-id are answered; those above close refused: safe, and resent.
        _ = close(&m, first, processed, on: c0)
        let refused = close(&m, above, on: c0, .failure(Self.refusedAboveLastStream))
        #expect(refused.complete.isEmpty)
        #expect(refused.start.isEmpty, "a connection after GOAWAY takes nothing")
        #expect(above.completions.isEmpty && above.resends == 1)
        #expect(m.statistics.resends == 1)
        // New work never goes to c0 either.
        let late = TestRequest(5)
        #expect(m.requestSubmitted(late).drain.isEmpty)
        // The replacement takes the resend first, then the given-back requests, then the rest.
        #expect(numbers(m.connectionEstablished(c1, maxStreams: 10).start) == [2, 3, 4, 5])
        #expect(first.succeeded && processed.succeeded)
        // c0 closes once its streams are done; nothing more to do.
        let closed = m.connectionClosed(
            c0, error: HTTP2Error(.goAway, resendIsSafe: true, "closed after GOAWAY"),
            finished: [], unstarted: [], peakStreams: 3)
        #expect(closed.open.isEmpty && closed.complete.isEmpty)
        #expect(m.failures == 0)
    }

    @Test func aRetiredConnectionDrainsAndIsReplacedAfterAJitteredBackOff() {
        var m = machine(connections: 1, random: .max) // the longest back-off: ≈ 5 s
        let first = TestRequest(0)
        let c0 = m.requestSubmitted(first).open[0]
        _ = m.connectionEstablished(c0, maxStreams: 10)
        let inInbox = TestRequest(1)
        _ = m.requestSubmitted(inInbox) // assigned to c0, not collected yet
        let retired = m.retireRequested(c0)
        #expect(retired.retire == [c0])
        #expect(retired.open.isEmpty, "the replacement waits its back-off")
        let at = m.replaceAt
        let wait = Double(at.nanoseconds - clock.now.nanoseconds) / 1e9
        #expect(abs(wait - 5) < 1e-6)
        #expect(retired.scheduleTimer == at)
        #expect(m.queuedCount == 1, "its inbox waits for another connection")
        #expect(m.statistics.connectionsRetired == 1)
        // Asked again (another stream answered the same): nothing more.
        let again = m.retireRequested(c0)
        #expect(again.retire.isEmpty && again.scheduleTimer == nil)
        #expect(m.replaceAt == at)
        // Its open stream is still answered; it takes no new work, and closing does not bring the replacement early.
        let answered = close(&m, first, on: c0)
        #expect(first.succeeded && answered.start.isEmpty)
        #expect(m.requestSubmitted(TestRequest(2)).drain.isEmpty)
        let closed = m.connectionClosed(
            c0, error: HTTP2Error(.shutdown, resendIsSafe: true, "closed after GOAWAY"), finished: [], unstarted: [],
            peakStreams: 1)
        #expect(closed.open.isEmpty)
        clock.now = HTTP2PoolInstant(nanoseconds: at.nanoseconds - 1)
        #expect(m.timerFired().open.isEmpty)
        clock.now = at
        let fired = m.timerFired()
        #expect(fired.open.count == 1)
        #expect(numbers(m.connectionEstablished(fired.open[0], maxStreams: 10).start) == [1, 2])
    }

    @Test func retireBackOffSpansItsBounds() {
        var low = machine(random: 0)
        var high = machine(random: .max)
        #expect(low.retireBackoffSeconds() == 1)
        #expect(abs(high.retireBackoffSeconds() - 5) < 1e-9)
        var c = HTTP2ClientConfiguration(host: "api.example")
        c.retireBackoffMinSeconds = 2
        c.retireBackoffMaxSeconds = 3
        var custom = Machine(configuration: c, clock: clock, random: FixedRandom(value: 1 << 63))
        #expect(abs(custom.retireBackoffSeconds() - 2.5) < 1e-9)
    }

    @Test func resendsStopAtTheConfiguredCount() {
        var m = machine(maxResends: 1)
        let r = TestRequest(0)
        let c = m.requestSubmitted(r).open[0]
        _ = m.connectionEstablished(c, maxStreams: 10)
        let refused = HTTP2Error(.refusedStream, resendIsSafe: true, "refused")
        #expect(numbers(close(&m, r, on: c, .failure(refused)).start) == [0])
        #expect(r.completions.isEmpty)
        _ = close(&m, r, on: c, .failure(refused))
        #expect(r.error?.kind == .refusedStream)
        #expect(m.statistics.resends == 1 && m.statistics.requestsFailed == 1)
    }

    @Test func failureNotSafeToResendCompletesAtOnce() {
        var m = machine()
        let r = TestRequest(0)
        let c = m.requestSubmitted(r).open[0]
        _ = m.connectionEstablished(c, maxStreams: 10)
        _ = close(&m, r, on: c, .failure(HTTP2Error(.streamReset, resendIsSafe: false, "reset")))
        #expect(r.error?.kind == .streamReset)
        #expect(m.statistics.resends == 0)
    }

    // MARK: failed connects

    @Test func failedConnectsBackOffExponentiallyUpToTheCapWithJitter() {
        var m = machine(base: 0.1, max: 1.0, random: 0) // jitter factor 0.5
        let connectFailed = HTTP2Error(.connectFailed, resendIsSafe: true, "connection refused")
        var c = m.requestSubmitted(TestRequest(0)).open[0]
        var waits: [Double] = []
        for attempt in 0..<6 {
            let failedAt = clock.now
            let r = TestRequest(attempt)
            _ = m.requestSubmitted(r)
            let a = run(m.connectionClosed(c, error: connectFailed, finished: [], unstarted: [], peakStreams: 0))
            // Nobody can serve the queue: it waits for the next connect (its outage budget is far off).
            #expect(r.completions.isEmpty && r.custody == .queued)
            #expect(a.open.isEmpty)
            // The timer is armed for the end of the back-off instead of connecting; more demand connects no sooner.
            let at = m.nextConnectAt
            #expect(a.scheduleTimer == at)
            let next = m.requestSubmitted(TestRequest(100 + attempt))
            #expect(next.open.isEmpty)
            waits.append(Double(at.nanoseconds - failedAt.nanoseconds) / 1e9)
            // Early: nothing happens.
            clock.now = HTTP2PoolInstant(nanoseconds: at.nanoseconds - 1)
            #expect(m.timerFired().open.isEmpty)
            clock.now = at
            let fired = m.timerFired()
            #expect(fired.open.count == 1)
            c = fired.open[0]
        }
        for (w, expected) in zip(waits, [0.05, 0.1, 0.2, 0.4, 0.5, 0.5]) {
            #expect(abs(w - expected) < 1e-6, "\(waits)")
        }
        #expect(m.failures == 6)
        // Established once: the count starts over.
        _ = m.connectionEstablished(c, maxStreams: 10)
        #expect(m.failures == 0 && m.nextConnectAt == .zero)
    }

    @Test func jitterSpansHalfToAllOfTheCappedDelay() {
        var low = machine(base: 0.1, max: 1.0, random: 0)
        var high = machine(base: 0.1, max: 1.0, random: .max)
        #expect(low.backoffSeconds(afterFailures: 1) == 0.05)
        #expect(abs(high.backoffSeconds(afterFailures: 1) - 0.1) < 1e-9)
        #expect(abs(high.backoffSeconds(afterFailures: 4) - 0.8) < 1e-9)
        #expect(abs(high.backoffSeconds(afterFailures: 5) - 1.0) < 1e-9)
        #expect(abs(high.backoffSeconds(afterFailures: 1000) - 1.0) < 1e-9)
        #expect(low.backoffSeconds(afterFailures: 1000) == 0.5)
    }

    @Test func aConnectionLostAfterItWasReadyReconnectsAtOnce() {
        var m = machine()
        let sent = TestRequest(0)
        let c0 = m.requestSubmitted(sent).open[0]
        _ = m.connectionEstablished(c0, maxStreams: 10)
        let r = TestRequest(1)
        _ = m.requestSubmitted(r)
        #expect(numbers(m.workRequested(c0)) == [1])
        // The stream in flight fails (it may have reached the server); r, held without a stream, waits again;
        // a new connection is opened without back-off.
        let reset = HTTP2Error(.connectionReset, resendIsSafe: false, "reset")
        let a = run(
            m.connectionClosed(
                c0, error: reset, finished: [sent.finished(.failure(reset))], unstarted: [r],
                peakStreams: 1))
        #expect(sent.error == reset)
        #expect(a.open.count == 1)
        #expect(m.failures == 0)
        #expect(r.custody == .queued && r.completions.isEmpty)
        #expect(numbers(m.connectionEstablished(a.open[0], maxStreams: 10).start) == [1])
    }

    // MARK: timeouts

    @Test func aTimerFiringJustBeforeItsInstantIsArmedAgain() {
        // No connection becomes ready: the request's outage budget (2 s, as its timeout) is what the timer ends.
        var m = machine(timeout: 2, outage: 2)
        let r0 = TestRequest(0)
        let deadline = clock.now.advanced(bySeconds: 2)
        #expect(m.requestSubmitted(r0).scheduleTimer == deadline)
        clock.advance(seconds: 1.996) // the fire comes 4 ms before the instant by the pool's clock
        let early = run(m.timerFired())
        #expect(early.complete.isEmpty)
        #expect(early.scheduleTimer == deadline, "armed again, or the request would wait for nothing")
        clock.advance(seconds: 0.004)
        run(m.timerFired())
        #expect(r0.error?.kind == .providerUnreachable)
    }

    @Test func queuedRequestTimesOutAtItsDeadlineSafeToResend() {
        var m = machine(timeout: 2)
        // A connection is ready and its one stream taken: the queue waits for streams, and its deadline applies.
        let busy = TestRequest(99)
        let c = m.requestSubmitted(busy).open[0]
        #expect(numbers(m.connectionEstablished(c, maxStreams: 1).start) == [99])
        clock.advance(seconds: 2)
        #expect(run(m.timerFired()).complete.isEmpty, "the busy request is on its connection, not queued")
        let r0 = TestRequest(0)
        let a = m.requestSubmitted(r0)
        #expect(a.scheduleTimer == clock.now.advanced(bySeconds: 2))
        clock.advance(seconds: 1)
        let r1 = TestRequest(1)
        #expect(m.requestSubmitted(r1).scheduleTimer == nil, "the armed timer comes first")
        #expect(run(m.timerFired()).complete.isEmpty, "a stale fire before the deadline does nothing")
        clock.advance(seconds: 1)
        let fired = run(m.timerFired())
        #expect(r0.error?.kind == .timeout)
        #expect(r0.error?.resendIsSafe == true)
        #expect(r1.completions.isEmpty)
        #expect(m.queuedCount == 1)
        // Re-armed for the next deadline.
        #expect(fired.scheduleTimer == r1.deadline)
        clock.advance(seconds: 1)
        run(m.timerFired())
        #expect(r1.error?.kind == .timeout)
        #expect(m.queuedCount == 0)
        #expect(m.statistics.requestsFailed == 2)
    }

    // MARK: provider outages

    static let connectRefused = HTTP2Error(.connectFailed, resendIsSafe: true, "connection refused")

    /// Fails connect `c` and follows the pool's timer to the next connect; returns it. Every timer armed lies in the
    /// future (no busy loop) and nothing is opened except when the timer fires.
    func failConnect(_ m: inout Machine, _ c: ID) -> ID? {
        let a = run(m.connectionClosed(c, error: Self.connectRefused, finished: [], unstarted: [], peakStreams: 0))
        #expect(a.open.isEmpty, "a failed connect is retried after its back-off, not at once")
        // The timer the driver has armed (the latest arming wins).
        while let t = m.timerAt {
            #expect(t > clock.now, "a timer armed for now or the past would spin")
            clock.now = t
            let fired = run(m.timerFired())
            if let next = fired.open.first { return next }
        }
        return nil
    }

    @Test func connectsFailingThenSucceedingWithinTheBudgetSendEveryQueuedRequest() throws {
        var m = machine(timeout: 2, base: 0.5, max: 4, outage: 60)
        let requests = (0..<5).map { TestRequest($0) }
        var c = m.requestSubmitted(requests[0]).open[0]
        for r in requests.dropFirst() { _ = m.requestSubmitted(r) }
        let start = clock.now
        for _ in 0..<6 { c = try #require(failConnect(&m, c)) }
        // Back-offs of 0.25, 0.5, 1, 2, 2, 2 s: well past the 2 s request timeout, inside the budget.
        #expect(clock.now.nanoseconds - start.nanoseconds > 2_000_000_000)
        #expect(requests.allSatisfy { $0.completions.isEmpty && $0.custody == .queued })
        #expect(m.statistics.connectsFailed == 6 && m.statistics.requestsFailed == 0)
        // The connect succeeds: every request goes out, each with its whole request timeout from now.
        let a = m.connectionEstablished(c, maxStreams: 10)
        #expect(numbers(a.start) == [0, 1, 2, 3, 4])
        #expect(requests.allSatisfy { $0.deadline == clock.now.advanced(bySeconds: 2) })
        for r in requests { _ = close(&m, r, on: c) }
        #expect(requests.allSatisfy { $0.succeeded })
        #expect(m.statistics.requestsSucceeded == 5 && m.statistics.requestsUnreachable == 0)
    }

    @Test func requestsFailOnlyPastTheirBudgetNamingTheLastConnectError() throws {
        var m = machine(timeout: 2, base: 0.5, max: 4, outage: 10)
        let early = TestRequest(0)
        let first = m.requestSubmitted(early)
        var c = first.open[0]
        // The connect hangs past the queue deadline: the timer fires, and with no connection ready the request
        // waits on.
        clock.now = try #require(first.scheduleTimer)
        #expect(run(m.timerFired()).complete.isEmpty)
        clock.advance(seconds: 3)
        let late = TestRequest(1)
        _ = m.requestSubmitted(late)
        var connects = 0
        while early.completions.isEmpty, let next = failConnect(&m, c) {
            c = next
            connects += 1
        }
        // The first request's budget ended 10 s after its submit; the second waits on (its budget ends at 15 s).
        let error = try #require(early.error)
        #expect(error.kind == .providerUnreachable && error.resendIsSafe)
        #expect(error.message.contains("unreachable for 10 s"), "\(error.message)")
        #expect(error.message.contains("connection refused"), "\(error.message)")
        #expect(late.completions.isEmpty && late.custody == .queued)
        while late.completions.isEmpty, let next = failConnect(&m, c) { c = next }
        #expect(late.error?.kind == .providerUnreachable)
        #expect(m.statistics.requestsUnreachable == 2 && m.statistics.requestsFailed == 2)
        #expect(connects >= 3)
    }

    @Test func refusedStreamsAndStreamsAboveGoAwayAreResent() {
        // Refused on a live connection: resent within maxResends.
        var m = machine(maxResends: 1)
        let r = TestRequest(0)
        let c = m.requestSubmitted(r).open[0]
        _ = m.connectionEstablished(c, maxStreams: 10)
        let refused = HTTP2Error(.refusedStream, resendIsSafe: true, "refused")
        #expect(numbers(close(&m, r, on: c, .failure(refused)).start) == [0])
        // Above GOAWAY's last-stream-id, after its resends are spent: the connection is going away, so it waits
        // for the replacement (within its budget) instead of failing.
        let g = m.goAwayReceived(c, unstarted: [])
        let replacement = g.open[0]
        _ = close(&m, r, on: c, .failure(Self.refusedAboveLastStream))
        #expect(r.completions.isEmpty && r.custody == .queued && r.resends == 2)
        #expect(numbers(m.connectionEstablished(replacement, maxStreams: 10).start) == [0])
        _ = close(&m, r, on: replacement)
        #expect(r.succeeded)
    }

    @Test func aRequestWrittenWhenItsConnectionDiedIsNotResentAndCountedApart() {
        var m = machine(maxResends: 0)
        let written = TestRequest(0)
        let unwritten = TestRequest(1)
        let c = m.requestSubmitted(written).open[0]
        _ = m.requestSubmitted(unwritten)
        #expect(numbers(m.connectionEstablished(c, maxStreams: 10).start) == [0, 1])
        let lost = HTTP2Error.peerClosed
        let a = run(
            m.connectionClosed(
                c, error: lost,
                finished: [
                    written.finished(
                        .failure(HTTP2Error(.writtenUnanswered, resendIsSafe: false, "the peer closed"))),
                    unwritten.finished(
                        .failure(HTTP2Error(.connectionReset, resendIsSafe: true, "closed (request never written)"))),
                ], unstarted: [], peakStreams: 2))
        #expect(written.error?.kind == .writtenUnanswered && written.error?.resendIsSafe == false)
        // The one never written waits for the new connection, past maxResends (0), within its budget.
        #expect(unwritten.completions.isEmpty && unwritten.custody == .queued)
        #expect(m.statistics.requestsWrittenUnanswered == 1 && m.statistics.requestsFailed == 1)
        #expect(numbers(m.connectionEstablished(a.open[0], maxStreams: 10).start) == [1])
    }

    @Test func aPoolThatResendsUnansweredResendsAWrittenRequestWithinItsBudgetOnly() {
        var m = machine(maxResends: 0, outage: 10, resendUnanswered: true)
        let written = TestRequest(0)
        let c = m.requestSubmitted(written).open[0]
        #expect(numbers(m.connectionEstablished(c, maxStreams: 10).start) == [0])
        let unanswered = HTTP2Error(.writtenUnanswered, resendIsSafe: false, "the peer closed")
        let a = run(
            m.connectionClosed(
                c, error: HTTP2Error.peerClosed, finished: [written.finished(.failure(unanswered))], unstarted: [],
                peakStreams: 1))
        // Resent past maxResends (0): it waits for the next connection, counted as an unanswered resend.
        #expect(written.completions.isEmpty && written.custody == .queued)
        #expect(m.statistics.unansweredResends == 1 && m.statistics.requestsWrittenUnanswered == 0)
        let c2 = a.open[0]
        #expect(numbers(m.connectionEstablished(c2, maxStreams: 10).start) == [0])
        // Cut again after its budget (10 s from its submit): it fails written and unanswered, as without resends.
        clock.advance(seconds: 11)
        run(
            m.connectionClosed(
                c2, error: HTTP2Error.peerClosed, finished: [written.finished(.failure(unanswered))], unstarted: [],
                peakStreams: 1))
        #expect(written.error?.kind == .writtenUnanswered)
        #expect(m.statistics.unansweredResends == 1 && m.statistics.requestsWrittenUnanswered == 1)
    }

    @Test func aRequestItsOwnerHeldBeforeWritingCompletesHeldAndIsNotResent() {
        // Safe to resend, yet the pool leaves it to its owner, who sends it again when its target's pause ends.
        var m = machine(maxResends: 3)
        let r = TestRequest(0)
        let c = m.requestSubmitted(r).open[0]
        _ = m.connectionEstablished(c, maxStreams: 10)
        _ = close(&m, r, on: c, .failure(HTTP2Error(.held, resendIsSafe: true, "held")))
        #expect(r.error?.kind == .held && r.resends == 0)
        #expect(m.statistics.requestsHeld == 1 && m.statistics.requestsFailed == 0)
        #expect(m.statistics.requestsSucceeded == 0 && m.statistics.resends == 0)
    }

    @Test func aStreamTheServerResetIsNotResentEvenByAPoolThatResendsUnanswered() {
        // Only a connection's death leaves a written request unanswered; a reset stream is the server's answer.
        var m = machine(maxResends: 3, resendUnanswered: true)
        let r = TestRequest(0)
        let c = m.requestSubmitted(r).open[0]
        _ = m.connectionEstablished(c, maxStreams: 10)
        _ = close(&m, r, on: c, .failure(HTTP2Error(.streamReset, resendIsSafe: false, "INTERNAL_ERROR")))
        #expect(r.error?.kind == .streamReset && m.statistics.unansweredResends == 0)
    }

    @Test func aConnectErrorThatSaysTheSettingsAreWrongFailsTheQueueAtOnce() {
        var m = machine(outage: 600)
        let r = TestRequest(0)
        let c = m.requestSubmitted(r).open[0]
        let untrusted = HTTP2Error(.certificateVerification, resendIsSafe: false, "certificate verify failed")
        run(m.connectionClosed(c, error: untrusted, finished: [], unstarted: [], peakStreams: 0))
        #expect(r.error?.kind == .certificateVerification && r.error?.resendIsSafe == false)
        #expect(m.statistics.requestsUnreachable == 0)
    }

    @Test func shutdownDuringAnOutageFailsTheWaitingRequestsAtOnce() {
        var m = machine(outage: 600)
        let requests = (0..<3).map { TestRequest($0) }
        let c = m.requestSubmitted(requests[0]).open[0]
        for r in requests.dropFirst() { _ = m.requestSubmitted(r) }
        let a = run(m.connectionClosed(c, error: Self.connectRefused, finished: [], unstarted: [], peakStreams: 0))
        #expect(a.complete.isEmpty)
        let done = ShutdownFlag()
        let s = run(m.shutdownRequested(completion: { done.set() }))
        #expect(requests.allSatisfy { $0.error?.kind == .shutdown })
        #expect(s.shutdownCompleted.count == 1)
        #expect(m.queuedCount == 0)
    }

    // MARK: shutdown

    @Test func shutdownFailsQueuedRequestsRetiresConnectionsAndCompletesWhenTheyClosed() {
        var m = machine(connections: 2)
        let r0 = TestRequest(0)
        let r1 = TestRequest(1)
        let r2 = TestRequest(2)
        let opened = m.requestSubmitted(r0).open
        _ = m.connectionEstablished(opened[0], maxStreams: 1) // takes r0
        _ = m.requestSubmitted(r1) // waits: no free stream
        let done = ShutdownFlag()
        let s = run(m.shutdownRequested { done.set() })
        #expect(r1.error?.kind == .shutdown)
        #expect(r1.error?.resendIsSafe == true)
        #expect(Set(s.retire) == Set(opened))
        #expect(s.shutdownCompleted.isEmpty)
        run(m.requestSubmitted(r2))
        #expect(r2.error?.kind == .shutdown)
        // The open stream is still answered.
        _ = close(&m, r0, on: opened[0])
        #expect(r0.succeeded)
        let closeError = HTTP2Error(.shutdown, resendIsSafe: true, "pool shut down")
        #expect(
            m.connectionClosed(opened[0], error: closeError, finished: [], unstarted: [], peakStreams: 1)
                .shutdownCompleted.isEmpty)
        let last = m.connectionClosed(opened[1], error: closeError, finished: [], unstarted: [], peakStreams: 0)
        for f in last.shutdownCompleted { f() }
        #expect(done.isSet)
    }

    final class ShutdownFlag: @unchecked Sendable {
        private(set) var isSet = false
        func set() { isSet = true }
    }

    // MARK: completing once

    @Test func aCompletionForARequestTheConnectionDoesNotHoldIsIgnored() {
        var m = machine(connections: 2)
        let r = TestRequest(0)
        let opened = m.requestSubmitted(r).open
        _ = m.connectionEstablished(opened[0], maxStreams: 10)
        _ = m.connectionEstablished(opened[1], maxStreams: 10)
        _ = close(&m, r, on: opened[0])
        #expect(r.succeeded)
        let before = m.statistics
        // Reported again by the same connection, by another one, and by one the pool does not know.
        r.result = .success(HTTP2Response(status: 200))
        for id in [opened[0], opened[1], ID(rawValue: 99)] {
            let again = m.requestsCompleted([r], on: id, peakStreams: 1)
            #expect(again.complete.isEmpty)
            #expect(again.ignored.count == 1)
        }
        // Never submitted at all.
        let stranger = TestRequest(1).finished(.success(HTTP2Response(status: 200)))
        #expect(m.requestsCompleted([stranger], on: opened[1], peakStreams: 1).ignored.count == 1)
        #expect(m.statistics == before)
        #expect(r.completions.count == 1)
        // A mixed batch: the expected completion goes through, the foreign one is set aside.
        let good = TestRequest(2)
        _ = m.requestSubmitted(good)
        let mixed = m.requestsCompleted(
            [good.finished(.success(HTTP2Response(status: 200))), r], on: good.connection,
            peakStreams: 1)
        #expect(numbers(mixed.complete) == [2])
        #expect(numbers(mixed.ignored) == [0])
    }
}

extension HTTP2PendingRequest {
    /// The connection the request is assigned to (tests).
    fileprivate var connection: HTTP2PoolConnectionID {
        if case .connection(let id) = custody { return id }
        return HTTP2PoolConnectionID(rawValue: -1)
    }
}
