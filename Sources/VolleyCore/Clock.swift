import Foundation

/// Wall-clock time, injectable so tests can move it (JWT cadence, quota hours).
public protocol WallClock: Sendable {
    func now() -> Date
}

public struct SystemClock: WallClock {
    public init() {}
    public func now() -> Date { Date() }
}

/// A clock tests set by hand.
public final class ManualClock: WallClock, @unchecked Sendable {
    private let lock = NSLock()
    private var current: Date
    public init(_ start: Date = Date(timeIntervalSince1970: 1_800_000_000)) { current = start }
    public func now() -> Date { lock.withLock { current } }
    public func advance(by seconds: TimeInterval) { lock.withLock { current += seconds } }
    public func set(_ date: Date) { lock.withLock { current = date } }
}
