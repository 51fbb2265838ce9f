import Foundation

/// When the hints waiting for one (app, user, type) become a push, decided on the engine's clock.
///
/// The first hint after a quiet period goes out at once. After a push, later hints merge until
/// `syncHints.minIntervalSeconds` has passed since it; then one push carries the union. At most
/// `syncHints.maxPerHour` pushes go within any rolling hour: a hint beyond waits, merged, until the oldest push of
/// that hour is an hour old. Nothing is ever dropped: a push that cannot list every id says `fullSync: true`.
///
/// The store keeps the window (`SyncHintWindow`) in Redis, so every worker decides the same from what it reads;
/// taking a batch is guarded by the last push the decision saw, so two workers deciding at once push it once.
public struct SyncHintStateMachine: Sendable {
    public enum Action: Sendable, Hashable {
        /// Nothing waits: forget the key until a hint arrives.
        case forget
        /// Something waits, but not before `until`.
        case wait(until: Date)
        /// Take what waits and push it now; `fullSync` when the ids are not all kept.
        case push(fullSync: Bool)
        /// A batch was taken and its push not confirmed within the lease (its worker died): push it again, under
        /// the same job id.
        case pushAgain(batch: Int64)
    }

    public let configuration: SyncHintConfiguration

    public init(configuration: SyncHintConfiguration) {
        self.configuration = configuration
    }

    /// What to do with `window` at `now`.
    public func decide(_ window: SyncHintWindow, now: Date) -> Action {
        if let taken = window.taken {
            let expires = taken.at.addingTimeInterval(configuration.leaseSeconds)
            return now >= expires ? .pushAgain(batch: taken.batch) : .wait(until: expires)
        }
        guard window.waiting > 0 || window.fullSync else { return .forget }
        let next = nextPush(window, now: now)
        guard now >= next else { return .wait(until: next) }
        return .push(fullSync: window.fullSync || window.waiting > configuration.maxRecordIds)
    }

    /// The earliest time a push may go: `minIntervalSeconds` after the last one, and no more than `maxPerHour`
    /// within the hour before it.
    public func nextPush(_ window: SyncHintWindow, now: Date) -> Date {
        var next = Date.distantPast
        if let last = window.lastPush { next = last.addingTimeInterval(configuration.minIntervalSeconds) }
        let hourAgo = now.addingTimeInterval(-3_600)
        let recent = window.recentPushes.filter { $0 > hourAgo }.sorted()
        if configuration.maxPerHour > 0, recent.count >= configuration.maxPerHour {
            // The push that must leave the rolling hour before another may go.
            let gate = recent[recent.count - configuration.maxPerHour].addingTimeInterval(3_600)
            next = max(next, gate)
        }
        return next
    }
}
