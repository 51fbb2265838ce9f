import Foundation

/// Runs blocking work (hiredis calls, child processes) on a thread of its own, off Swift's cooperative pool, for the
/// command-line tools' async entry points.
public func runBlocking<T: Sendable>(_ body: @escaping @Sendable () throws -> T) async throws -> T {
    try await withCheckedThrowingContinuation { (cont: CheckedContinuation<T, Error>) in
        Thread { do { cont.resume(returning: try body()) } catch { cont.resume(throwing: error) } }.start()
    }
}
