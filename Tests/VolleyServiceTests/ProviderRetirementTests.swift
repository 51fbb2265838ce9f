import Synchronization
import Testing
import VolleyCore
import VolleyTestTags

@testable import VolleyService

/// A provider replaced by a configuration reload closes when its last send has answered, not on a poll.
@Suite(.tags(.unit))
struct ProviderRetirementTests {
    private func generation() -> ManagedSender.Generation {
        ManagedSender.Generation(sender: UnavailableSender(platform: .ios, reason: "test"), number: 1)
    }

    @Test func closesWhenTheLastSendAnswers() {
        let g = generation()
        let closed = Atomic<Int>(0)
        g.inFlight.add(2, ordering: .relaxed)
        g.retire(graceSeconds: 3600) { closed.add(1, ordering: .relaxed) }
        #expect(closed.load(ordering: .relaxed) == 0)
        g.sendFinished()
        #expect(closed.load(ordering: .relaxed) == 0)
        g.sendFinished()
        #expect(closed.load(ordering: .relaxed) == 1)
    }

    @Test func closesAtOnceWhenNothingIsOut() {
        let g = generation()
        let closed = Atomic<Int>(0)
        g.retire(graceSeconds: 3600) { closed.add(1, ordering: .relaxed) }
        #expect(closed.load(ordering: .relaxed) == 1)
    }

    @Test func aCurrentProviderIsNeverClosedBySendsAnswering() {
        let g = generation()
        let closed = Atomic<Int>(0)
        g.inFlight.add(1, ordering: .relaxed)
        g.sendFinished()
        g.inFlight.add(1, ordering: .relaxed)
        g.retire(graceSeconds: 3600) { closed.add(1, ordering: .relaxed) }
        g.sendFinished()
        g.retire(graceSeconds: 3600) { closed.add(1, ordering: .relaxed) }
        #expect(closed.load(ordering: .relaxed) == 1)
    }
}
