import Foundation

/// Polls `condition` every 20 ms until it holds or `timeout` passes; returns whether it held. Blocks its thread:
/// only for synchronous code outside the cooperative pool. Async tests use `waitUntil`, which sleeps instead.
@discardableResult
public func eventually(timeout: Double = 20, _ condition: () throws -> Bool) rethrows -> Bool {
    let until = Date().addingTimeInterval(timeout)
    while Date() < until {
        if try condition() { return true }
        usleep(20_000)
    }
    return try condition()
}
