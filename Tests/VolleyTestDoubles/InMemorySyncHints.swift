import Foundation
import VolleyCore

/// The in-memory twin of `RedisSyncHintRepository`: the same answers as its scripts (hint ids that only grow per
/// user and type, ids by the hint that last named them, the full-sync mark past the cap, acks by hint id), no
/// pushing (that is the worker's).
public final class InMemorySyncHintStore: SyncHintStore {
    struct Waiting {
        var ids: [String: Int64] = [:]
        var full: Int64?
        var lastHint: Int64 = 0
    }
    private let state = Locked<[String: Waiting]>([:])
    public let maxRecordIds: Int
    public let outage: StoreOutageSwitch

    public init(maxRecordIds: Int = SyncHintConfiguration.defaultMaxRecordIds, outage: StoreOutageSwitch = .init()) {
        self.maxRecordIds = maxRecordIds
        self.outage = outage
    }

    static func name(_ org: OrgID, _ key: SyncHintKey) -> String { org.rawValue + "\u{1F}" + key.member }

    public func add(org: OrgID, app: AppName, users: [UserID], type: String, recordIds: [String], now: Date)
        async throws -> [SyncHintID]
    {
        try outage.check()
        return state.withLock { s in
            users.map { user in
                let name = Self.name(org, SyncHintKey(app: app, user: user, type: type))
                var w = s[name] ?? Waiting()
                let hint = max(SyncHintID.milliseconds(now), w.lastHint + 1)
                w.lastHint = hint
                if w.full != nil {
                    w.full = hint
                } else {
                    for id in recordIds { w.ids[id] = hint }
                    if w.ids.count > maxRecordIds {
                        w.ids = [:]
                        w.full = hint
                    }
                }
                s[name] = w
                return SyncHintID(milliseconds: hint)
            }
        }
    }

    public func ack(org: OrgID, key: SyncHintKey, upTo: SyncHintID) async throws -> SyncHintAckResult {
        try outage.check()
        return state.withLock { s in
            var w = s[Self.name(org, key)] ?? Waiting()
            let before = w.ids.count
            w.ids = w.ids.filter { $0.value > upTo.milliseconds }
            if let f = w.full, f <= upTo.milliseconds { w.full = nil }
            s[Self.name(org, key)] = w
            return SyncHintAckResult(dropped: before - w.ids.count, remaining: w.ids.count, fullSync: w.full != nil)
        }
    }

    public func status(
        org: OrgID, apps: [AppName], user: UserID, configuration: SyncHintConfiguration, now: Date
    ) async throws -> [SyncHintStatus] {
        try outage.check()
        return state.withLock { s in
            s.compactMap { name, w -> SyncHintStatus? in
                let parts = name.split(separator: "\u{1F}", maxSplits: 1).map(String.init)
                guard parts.count == 2, parts[0] == org.rawValue, let key = SyncHintKey(member: parts[1]),
                    key.user == user, apps.contains(key.app)
                else { return nil }
                let ids = w.ids.sorted { ($0.value, $0.key) < ($1.value, $1.key) }.map(\.key)
                return SyncHintStatus(
                    app: key.app.rawValue, type: key.type, recordIds: ids, fullSync: w.full != nil,
                    lastHintId: String(w.lastHint), lastPushAt: nil, pushesLastHour: 0,
                    nextPushAt: ids.isEmpty && w.full == nil ? nil : now, inFlight: 0)
            }.sorted { ($0.app, $0.type) < ($1.app, $1.type) }
        }
    }
}
