import Foundation

/// Polls `condition` every 20 ms until it holds or `timeout` passes; returns whether it held. For what another
/// thread or process does; logic with time in it is tested on a manual clock instead.
@discardableResult
public func eventually(timeout: Double = 20, _ condition: () throws -> Bool) rethrows -> Bool {
    let until = Date().addingTimeInterval(timeout)
    while Date() < until {
        if try condition() { return true }
        usleep(20_000)
    }
    return try condition()
}
