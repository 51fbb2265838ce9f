import Foundation
import Synchronization

/// Where the fleet keeps its send budgets (production: Redis, `RedisFleetStore`).
public protocol FleetBudgetStore: Sendable {
    /// Takes up to `count` sends of window `window` (a second since 1970), whose budget is `limit`, for `key`.
    /// Returns how many were granted (0 when the window's budget is spent).
    func takeBudget(_ key: FleetPauseKey, window: Int64, count: Int, limit: Int) throws -> Int
}

/// A send budget the whole fleet keeps to for one FCM project (`apps[].fcm.maxPerMinute`, default 600,000: FCM's
/// default quota per project), so the fleet stays under the quota instead of reacting to 429s.
///
/// Counted in one-second windows of `maxPerMinute / 60`: FCM's minutes are "not aligned to the clock", and a
/// second's window keeps the fleet's sends even within any minute. Each worker takes its sends from Redis in blocks
/// (an eighth of a second's budget, at most 1,000), so Redis sees one round trip per block, never one per send; a
/// new block is asked for when half of the current one is used. Blocks a worker took and did not use are lost with
/// their second: the fleet may send a little less than the budget, never more.
public final class FleetBudgetGate: Sendable {
    public let key: FleetPauseKey
    public let perSecond: Int
    public let block: Int
    /// Sends this worker may still start in `window`; may dip below 0 for a moment (a refused take gives it back).
    private let allowance = Atomic<Int>(0)
    private let window = Atomic<Int64>(-1)
    /// A window whose budget the store said is spent: sends wait for the next second.
    private let spentWindow = Atomic<Int64>(-1)
    private let refillWanted = Atomic<Bool>(false)
    private let wake: @Sendable () -> Void

    /// `wake`: asks the fleet sync to call `refill(from:clock:)` soon.
    public init(key: FleetPauseKey, perMinute: Int, wake: @escaping @Sendable () -> Void) {
        self.key = key
        perSecond = max(1, perMinute / 60)
        block = max(1, min(perSecond / 8, 1_000))
        self.wake = wake
    }

    /// The send path: nil when a send may go now (it is counted), else how many seconds to wait before asking again.
    public func take(clock: any WallClock) -> Double? {
        let now = clock.now().timeIntervalSince1970
        let second = Int64(now)
        if window.load(ordering: .acquiring) == second {
            let left = allowance.wrappingSubtract(1, ordering: .relaxed).newValue
            if left >= 0 {
                if left == block / 2 { requestRefill() }
                return nil
            }
            allowance.wrappingAdd(1, ordering: .relaxed)
        }
        requestRefill()
        if spentWindow.load(ordering: .relaxed) == second { return Double(second + 1) - now }
        return 0.005
    }

    private func requestRefill() {
        if !refillWanted.exchange(true, ordering: .acquiringAndReleasing) { wake() }
    }

    /// The fleet sync: takes a block for the current second when one was asked for.
    public func refill(from store: any FleetBudgetStore, clock: any WallClock) throws {
        guard refillWanted.exchange(false, ordering: .acquiringAndReleasing) else { return }
        let second = Int64(clock.now().timeIntervalSince1970)
        let granted = try store.takeBudget(key, window: second, count: block, limit: perSecond)
        if granted == 0 {
            spentWindow.store(second, ordering: .relaxed)
            return
        }
        if window.load(ordering: .acquiring) == second {
            allowance.wrappingAdd(granted, ordering: .relaxed)
        } else {
            allowance.store(granted, ordering: .relaxed)
            window.store(second, ordering: .releasing)
        }
    }
}
