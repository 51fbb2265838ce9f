import Foundation
import VolleyCore
import VolleyRedis

/// Registry maintenance used by `volley devices …` and tests (not by the engine's hot path).
extension RedisPipelineSession {
    /// Registers (or refreshes) devices, pipelined. A re-registered token keeps its `registeredAt` only when
    /// `preserveRegisteredAt` is set (it costs a read); otherwise both times are `now`.
    /// A token registered to another user moves to the new user. Returns the number of records written.
    @discardableResult
    public func register(_ records: [DeviceImportRecord], now: Date = Date()) throws -> Int {
        if records.isEmpty { return 0 }
        // Move tokens that currently belong to a different user (rare; one HMGET per (org, app) group).
        var groups: [String: [DeviceImportRecord]] = [:]
        for r in records { groups["\(r.org)\u{1}\(r.app)", default: []].append(r) }
        var commands: [[String]] = []
        for (_, group) in groups {
            let org = group[0].org
            let app = group[0].app
            let fields = group.map { StoreConfiguration.deviceField($0.platform, $0.token) }
            let owners = try client.command(["HMGET", store.tokenIndexKey(org, app)] + fields)
            try owners.throwIfError("HMGET token index")
            let ownerList = owners.array ?? []
            var stale: [Device] = []
            for (i, r) in group.enumerated() {
                if i < ownerList.count, let owner = ownerList[i].string, owner != r.user.rawValue {
                    stale.append(Device(platform: r.platform, token: r.token))
                }
            }
            if !stale.isEmpty { try remove(org: org, app: app, devices: stale) }
            for r in group {
                let rec = DeviceRecord(
                    platform: r.platform, token: r.token,
                    environment: r.platform == .ios ? (r.environment ?? .production) : nil,
                    locale: r.locale, user: r.user, registeredAt: now, lastSeenAt: now,
                    rsaPublicKey: r.rsaPublicKey, cipherName: r.rsaPublicKey == nil ? nil : r.cipherName,
                    timeZone: r.timeZone)
                let json = String(decoding: try DeviceRecord.encoder.encode(rec), as: UTF8.self)
                let field = StoreConfiguration.deviceField(r.platform, r.token)
                commands.append(["HSET", store.deviceKey(org, app, r.user), field, json])
                commands.append(["HSET", store.tokenIndexKey(org, app), field, r.user.rawValue])
                commands.append(["SADD", store.usersKey(org, app), r.user.rawValue])
                // The last-seen index the stale-device sweep reads (StaleDevices.swift).
                commands.append(["ZADD", store.lastSeenKey(org, app), String(now.timeIntervalSince1970), field])
            }
            commands.append(["SADD", store.lastSeenAppsKey, StoreConfiguration.lastSeenAppsMember(org, app)])
        }
        for r in try client.pipeline(commands, window: 512) { try r.throwIfError("register devices") }
        return records.count
    }

    /// Removes one token. Returns true when it was registered.
    public func unregister(org: OrgID, app: AppName, platform: Platform, token: DeviceToken) throws -> Bool {
        try remove(org: org, app: app, devices: [Device(platform: platform, token: token)]) > 0
    }

    /// Device records of one user, the most recently registered first (ties by platform and token).
    public func records(org: OrgID, app: AppName, user: UserID) throws -> [DeviceRecord] {
        let r = try client.checked(["HGETALL", store.deviceKey(org, app, user)])
        return r.fieldPairs.compactMap { try? DeviceRecord.decoder.decode(DeviceRecord.self, from: Data($0.1.utf8)) }
            .sorted(by: DeviceRecord.newestFirst)
    }

    /// The `limit` devices of (org, app) registered most recently, newest first: the last-seen index (every
    /// registration writes its time), each member's owner from the token index, then the owner's record.
    public func recentRecords(org: OrgID, app: AppName, limit: Int) throws -> [DeviceRecord] {
        guard limit > 0 else { return [] }
        let fields =
            (try client.checked(["ZRANGE", store.lastSeenKey(org, app), "0", String(limit - 1), "REV"]).array
            ?? []).compactMap(\.string)
        guard !fields.isEmpty else { return [] }
        let owners = try client.checked(["HMGET", store.tokenIndexKey(org, app)] + fields).array ?? []
        let owned = zip(fields, owners).compactMap { field, owner in owner.string.map { (field, $0) } }
        return try records(org: org, app: app, owned: owned)
    }

    /// The records of registry fields (`platform:token`) and their owners, in their order; a field whose record is
    /// gone or unreadable is left out.
    private func records(org: OrgID, app: AppName, owned: [(field: String, user: String)]) throws -> [DeviceRecord] {
        let commands = owned.map { ["HGET", store.deviceKey(org, app, UserID($0.user)), $0.field] }
        return try client.pipeline(commands, window: 64).compactMap { reply in
            guard let json = try reply.throwIfError("device records").string else { return nil }
            return try? DeviceRecord.decoder.decode(DeviceRecord.self, from: Data(json.utf8))
        }
    }

    /// Up to `limit` devices of (org, app) whose token ends with `suffix`: the token index read with `HSCAN … MATCH
    /// *:*<suffix>` a page at a time, at most `DeviceLookup.maxScanned` fields, then each owner's record. The
    /// suffix's glob characters are escaped, so it matches as written.
    public func records(org: OrgID, app: AppName, tokenSuffix suffix: String, limit: Int) throws -> [DeviceRecord] {
        guard limit > 0, !suffix.isEmpty else { return [] }
        var escaped = ""
        for c in suffix {
            if "*?[]\\".contains(c) { escaped.append("\\") }
            escaped.append(c)
        }
        let index = store.tokenIndexKey(org, app)
        var cursor = "0"
        var scanned = 0
        var owners: [(field: String, user: String)] = []
        repeat {
            let r = try client.checked([
                "HSCAN", index, cursor, "MATCH", "*:*" + escaped, "COUNT", String(DeviceLookup.pageSize),
            ])
            guard let parts = r.array, parts.count == 2 else {
                throw RedisError(.unexpectedReply, "HSCAN returned \(r)")
            }
            cursor = parts[0].string ?? "0"
            let flat = (parts[1].array ?? []).compactMap(\.string)
            for i in stride(from: 0, to: flat.count - 1, by: 2) { owners.append((flat[i], flat[i + 1])) }
            scanned += DeviceLookup.pageSize
        } while cursor != "0" && owners.count < limit && scanned < DeviceLookup.maxScanned
        return try records(org: org, app: app, owned: Array(owners.prefix(limit)))
    }

    /// Walks every user with devices in (org, app), `pageSize` users at a time (SSCAN), calling `visit` per page.
    public func forEachUserPage(
        org: OrgID, app: AppName, pageSize: Int = 500,
        _ visit: ([UserID]) throws -> Void
    ) throws {
        var cursor = "0"
        repeat {
            let r = try client.checked(["SSCAN", store.usersKey(org, app), cursor, "COUNT", String(pageSize)])
            guard let parts = r.array, parts.count == 2 else {
                throw RedisError(.unexpectedReply, "SSCAN returned \(r)")
            }
            cursor = parts[0].string ?? "0"
            let users = (parts[1].array ?? []).compactMap(\.string).map(UserID.init)
            if !users.isEmpty { try visit(users) }
        } while cursor != "0"
    }

    /// Number of users with devices, and number of devices, in (org, app).
    public func counts(org: OrgID, app: AppName) throws -> (users: Int, devices: Int) {
        let r = try client.pipeline([["SCARD", store.usersKey(org, app)], ["HLEN", store.tokenIndexKey(org, app)]])
        return (Int(r[0].integer ?? 0), Int(r[1].integer ?? 0))
    }
}
