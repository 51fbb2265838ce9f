import Foundation
import Synchronization
import Testing
import VolleyTestDoubles
import VolleyTestTags

@testable import VolleyService

/// The background passes' thread sleeps on the monotonic clock and wakes at `stop`, however long its sleep.
@Suite(.tags(.unit)) struct WorkerThreadTests {
    @Test func aWaitOfZeroOrLessReturnsAtOnceAndStopEndsAnHourLongSleep() async throws {
        let thread = WorkerThread(name: "volley-test-sleep")
        #expect(thread.sleep(seconds: 0) == false)
        #expect(thread.sleep(seconds: -3) == false)
        let woke = Mutex<Bool?>(nil)
        thread.start { woke.withLock { $0 = thread.sleep(seconds: 3_600) } }
        thread.stop()
        try await waitUntil("the hour-long sleep ends at stop", timeout: .seconds(10)) {
            woke.withLock { $0 } != nil
        }
        #expect(woke.withLock { $0 } == true)
        #expect(thread.isStopped)
    }
}
