import Foundation
import VolleyCore

/// Frequency caps in memory: each user's `FrequencyCapHistory` behind one lock (a call decides its users in one
/// step, as the Redis script does), and the rules the API stores.
public final class InMemoryFrequencyCaps: FrequencyCapStore, FrequencyCapRuleReader, FrequencyCapRepository,
    @unchecked Sendable
{
    private struct UserKey: Hashable {
        var org: OrgID
        var user: UserID
    }
    private let lock = NSLock()
    private var histories: [UserKey: FrequencyCapHistory] = [:]
    private var stored: [OrgID: [FrequencyCapRule]] = [:]
    /// Calls of `admit` so far (a job no cap applies to makes none).
    public private(set) var admitCalls = 0
    /// Calls of `storedRules` so far.
    public private(set) var ruleReads = 0

    public init() {}

    private func locked<T>(_ body: () throws -> T) rethrows -> T {
        lock.lock()
        defer { lock.unlock() }
        return try body()
    }

    public func admit(org: OrgID, plan: FrequencyCapPlan, users: [UserID], now: Date) throws -> [Bool] {
        locked {
            admitCalls += 1
            return users.map { histories[UserKey(org: org, user: $0), default: .init()].admit(plan, now: now) }
        }
    }

    /// The user's recorded sends (for assertions).
    public func history(org: OrgID, user: UserID) -> FrequencyCapHistory {
        locked { histories[UserKey(org: org, user: user)] ?? .init() }
    }

    public func storedRules() throws -> [OrgID: [FrequencyCapRule]] {
        locked {
            ruleReads += 1
            return stored
        }
    }

    public func rules(org: OrgID) async throws -> [FrequencyCapRule]? { locked { stored[org] } }
    public func setRules(org: OrgID, _ rules: [FrequencyCapRule]) async throws { locked { stored[org] = rules } }
    public func removeRules(org: OrgID) async throws -> Bool {
        locked { stored.removeValue(forKey: org) != nil }
    }
}
