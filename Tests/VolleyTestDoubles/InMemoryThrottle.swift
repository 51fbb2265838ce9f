import Foundation
import VolleyCore

/// The fleet's throttle in memory: the same arithmetic as the Redis script (`ThrottleArithmetic`), on the caller's
/// clock, one gate per org and job, shared by everything that holds this instance (as Redis is shared by workers).
/// `asks` counts round trips, to check a throttled job asks once per slice, not once per device.
public final class InMemoryThrottle: JobThrottle, @unchecked Sendable {
    private let lock = NSLock()
    private var gates: [String: ThrottleState] = [:]
    private var _asks = 0
    private var _granted = 0

    public init() {}

    public var asks: Int { lock.withLock { _asks } }
    public var granted: Int { lock.withLock { _granted } }

    public func take(org: OrgID, job: JobID, rate: ThrottleRate, count: Int, now: Date) throws -> ThrottleGrant {
        let key = "\(org.rawValue)|\(job.rawValue)"
        let ms = Int64((now.timeIntervalSince1970 * 1000).rounded())
        return lock.withLock {
            let (state, grant, _) = ThrottleArithmetic.take(gates[key], rate: rate, count: count, nowMillis: ms)
            gates[key] = state
            _asks += 1
            _granted += grant.granted
            return grant
        }
    }
}
