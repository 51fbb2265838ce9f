import Dispatch
import Foundation

/// What `waitUntil` throws when its condition did not hold in time: what was awaited, for how long, and where.
public struct WaitTimedOut: Error, CustomStringConvertible {
    public let what: String
    public let timeout: Duration
    public let fileID: String
    public let line: Int

    public var description: String {
        "waited \(timeout) for \(what) at \(fileID):\(line); it never held"
    }
}

/// Polls `condition` every `interval` until it holds, sleeping with `Task.sleep` in between so no thread of the
/// cooperative pool is held: the servers, workers and engine loops under test run on that pool too. Throws
/// `WaitTimedOut` naming `what` (evaluated only on failure, so it may carry a log) when `timeout` passes first.
/// For what another task, thread or process does; logic with time in it is tested on a manual clock instead.
/// Synchronous conditions pass as they are.
public func waitUntil(
    _ what: @autoclosure () -> String = "the condition",
    timeout: Duration = .seconds(20),
    interval: Duration = .milliseconds(20),
    fileID: String = #fileID,
    line: Int = #line,
    _ condition: () async throws -> Bool
) async throws {
    let clock = ContinuousClock()
    let deadline = clock.now.advanced(by: timeout)
    while clock.now < deadline {
        if try await condition() { return }
        try await Task.sleep(for: interval)
    }
    if try await condition() { return }
    throw WaitTimedOut(what: what(), timeout: timeout, fileID: fileID, line: line)
}

/// `waitUntil` as a value: whether `condition` held within `timeout`, for tests that go on either way.
@discardableResult
public func eventuallyAsync(
    timeout: Double = 20, interval: Duration = .milliseconds(20), _ condition: () async throws -> Bool
) async rethrows -> Bool {
    let clock = ContinuousClock()
    let deadline = clock.now.advanced(by: .seconds(timeout))
    while clock.now < deadline {
        if try await condition() { return true }
        try? await Task.sleep(for: interval)
    }
    return try await condition()
}

/// Runs a call that blocks for long (a process exit, a blocking Redis read, a sleep the protocol needs) on a
/// Dispatch thread, so the test's task waits without holding a thread of the cooperative pool.
public func blocking<T: Sendable>(_ body: @escaping @Sendable () throws -> T) async throws -> T {
    try await withCheckedThrowingContinuation { continuation in
        DispatchQueue.global().async { continuation.resume(with: Result { try body() }) }
    }
}

/// Runs `body` on a thread of its own and waits for it: for a call that blocks for as long as a fault lasts (a
/// command to a stopped Redis), which must start at once however many blocking waits hold the Dispatch pool.
public func onOwnThread<T: Sendable>(_ body: @escaping @Sendable () throws -> T) async throws -> T {
    try await withCheckedThrowingContinuation { continuation in
        Thread { continuation.resume(with: Result { try body() }) }.start()
    }
}

/// A call started on a thread of its own before the initializer returns, for a call that must be under way before
/// the test acts (a command written to a stopped Redis): an `async let` of `onOwnThread` starts only when the
/// cooperative pool has a thread free, which a busy test run may not give it for seconds. `value()` waits for it.
public final class StartedThread<T: Sendable>: @unchecked Sendable {
    private let done = DispatchSemaphore(value: 0)
    private var result: Result<T, any Error>?

    public init(_ body: @escaping @Sendable () throws -> T) {
        Thread { [self] in
            result = Result { try body() }
            done.signal()
        }.start()
    }

    public func value() async throws -> T {
        try await onOwnThread { [self] in
            done.wait()
            guard let result else { throw CancellationError() }
            return try result.get()
        }
    }
}

/// Polls `condition` on a Dispatch thread every `interval` and runs `action` there the moment it holds, for tests
/// that must act mid-way through something fast (kill a worker, restart Redis, throttle the mock): the action comes
/// on time however busy the cooperative pool is. Throws `WaitTimedOut` naming `what` when `timeout` passes first.
public func actWhen(
    _ what: @autoclosure () -> String,
    timeout: Duration = .seconds(20),
    interval: Duration = .milliseconds(5),
    fileID: String = #fileID,
    line: Int = #line,
    _ condition: @escaping () throws -> Bool,
    then action: @escaping () throws -> Void
) async throws {
    // The closures run on the Dispatch thread only while this function awaits them.
    let box = UncheckedBox((condition, action))
    let pause = useconds_t(max(1.0, interval / .microseconds(1)))
    let held = try await blocking {
        let (condition, action) = box.value
        let clock = ContinuousClock()
        let deadline = clock.now.advanced(by: timeout)
        while true {
            if try condition() {
                try action()
                return true
            }
            if clock.now >= deadline { return false }
            usleep(pause)
        }
    }
    if !held { throw WaitTimedOut(what: what(), timeout: timeout, fileID: fileID, line: line) }
}

private struct UncheckedBox<T>: @unchecked Sendable {
    let value: T
    init(_ value: T) { self.value = value }
}
