import VolleyCore

/// The keys each Lua script and each MULTI/EXEC touches, built in one place so the call sites and the slot test use
/// the same names. Redis Cluster runs a script or a transaction only when all its keys hash to one slot (CROSSSLOT
/// otherwise), and a script may touch a key it derives only when that key is in the slot of its declared keys: each
/// group below lists the declared keys first and then an example of every derived key.
enum RedisKeyGroups {
    /// `RecipientScripts.quotaCharge`: the hour's counters, the org's limits and (optional) the job's charges.
    static func quotaCharge(
        org: OrgID, platform: Platform, hour: QuotaHour, job: JobID?, delivery: String = ""
    ) -> [String] {
        let k = RecipientKeys(org: org)
        return [k.quota(platform, hour), k.quotaLimits]
            + (job.map { [k.quotaCharges($0), k.quotaLastCharge($0, delivery: delivery)] } ?? [])
    }

    /// `RecipientScripts.quotaSettle`.
    static func quotaSettle(org: OrgID, platform: Platform, hour: QuotaHour) -> [String] {
        [RecipientKeys(org: org).quota(platform, hour)]
    }

    /// `RecipientScripts.quotaAdopt`.
    static func quotaAdopt(org: OrgID, job: JobID) -> [String] { [RecipientKeys(org: org).quotaCharges(job)] }

    /// `RecipientScripts.inboxDeliver` declares the notification's content key only to be routed to its slot; the
    /// per-user keys it derives from the prefix share the `{org}` tag.
    static func inboxDeliver(org: OrgID, notification: String) -> [String] {
        [RecipientKeys(org: org).inboxContent(notification)]
    }

    /// Keys `inboxDeliver` derives for one user.
    static func inboxDerived(org: OrgID, user: UserID) -> [String] {
        let k = RecipientKeys(org: org)
        return ["all", "unread", "unseen"].map { k.inbox(user, $0) }
    }

    /// `RecipientScripts.frequencyCapAdmit` declares the org's slot key; the per-user keys it derives from the
    /// prefixes share the `{org}` tag.
    static func frequencyCapAdmit(org: OrgID) -> [String] { [RecipientKeys(org: org).frequencyCapSlot] }

    /// Keys `frequencyCapAdmit` derives for one user.
    static func frequencyCapDerived(org: OrgID, user: UserID, type: String) -> [String] {
        let k = RecipientKeys(org: org)
        return [k.frequencyCapPrefix(type: nil) + user.rawValue, k.frequencyCapPrefix(type: type) + user.rawValue]
    }

    /// `RedisSyncHintStore`'s scripts declare the org's due and oldest sets and derive each key's waiting, taken and
    /// state keys and the user's type set from the org's prefix.
    static func syncHints(org: OrgID, key: SyncHintKey) -> [String] {
        let k = SyncHintKeys(org: org)
        return [k.due, k.oldest, k.ids(key), k.taken(key), k.state(key), k.userTypes(key.app, key.user)]
    }

    /// `RecipientScripts.inboxMark`.
    static func inboxMark(org: OrgID, user: UserID) -> [String] { inboxDerived(org: org, user: user) }

    /// `RecipientScripts.shardComplete`.
    static func shardComplete(org: OrgID, parent: JobID) -> [String] {
        let k = RecipientKeys(org: org)
        return [k.shardAggregate(parent), k.shardsDone(parent)]
    }

    /// `SUNIONSTORE` / `SDIFFSTORE` / `SINTER` of a directory resolution: the scratch set, members and containers.
    static func directoryResolution(org: OrgID, scope: String, containers ids: [RecipientID]) -> [String] {
        let k = RecipientKeys(org: org)
        return [k.resolution(scope), k.containers, k.inactive] + ids.map { k.members($0) }
    }

    /// `AttributeIndex.writeScript`: the attributes hash and the index's prefix, declared; then an example of every
    /// key the script derives from the prefix.
    static func attributeIndexWrite(org: OrgID) -> [String] {
        let k = RecipientKeys(org: org)
        return [k.attributes, k.attributeIndex]
    }

    /// Keys `attributeIndexWrite` derives for one attribute and value.
    static func attributeIndexDerived(org: OrgID, attribute: String, value: String) -> [String] {
        let k = RecipientKeys(org: org)
        return [
            k.attributeEquals(attribute, value), k.attributeHas(attribute), k.attributeScores(attribute, .number),
            k.attributeScores(attribute, .instant), k.attributeValues(attribute), k.attributeNames, k.attributeUsers,
        ]
    }

    /// A segment's set operations in a resolution (`SegmentSets`), and `AttributeIndex.moveScript`'s two keys: the
    /// resolution and exclusion sets, the segment's scratch sets, the index keys it reads, containers, inactive users
    /// and the app's users with a device.
    static func segmentResolution(
        _ store: StoreConfiguration, org: OrgID, app: AppName, scope: String, attribute: String, value: String
    ) -> [String] {
        let k = RecipientKeys(org: org)
        let scratch = k.resolutionScratch(scope, 0)
        return [k.resolution(scope), k.resolutionExclusion(scope), scratch + ":f0", scratch + ":z0", k.segments]
            + attributeIndexDerived(org: org, attribute: attribute, value: value)
            + [k.containers, k.inactive, store.usersKey(org, app), k.segmentCountScratch("c") + ":f0"]
    }

    /// `RedisDirectory.drainScript`: the resolution set and its last batch.
    static func directoryDrain(org: OrgID, scope: String) -> [String] {
        let k = RecipientKeys(org: org)
        return [k.resolution(scope), k.resolutionLastBatch(scope)]
    }

    /// `RedisPipelineSession.keepAliveScript`: the job stream (group and consumer are arguments, not keys).
    static func keepAlive(stream: String) -> [String] { [stream] }

    /// `ScheduleScripts.park`: the shard's schedule, its parked bodies and its job stream (the entry is acknowledged).
    static func schedulePark(_ store: StoreConfiguration, shard: Int) -> [String] {
        [store.scheduleKey(shard: shard), store.scheduledJobsKey(shard: shard), store.jobStream(shard: shard)]
    }

    /// `ScheduleScripts.promote`: the same, and the shard's promotion lease.
    static func schedulePromote(_ store: StoreConfiguration, shard: Int) -> [String] {
        schedulePark(store, shard: shard) + [store.scheduleLeaseKey(shard: shard)]
    }

    /// `ScheduleScripts.unpark`: the shard's schedule and its parked bodies.
    static func scheduleUnpark(_ store: StoreConfiguration, shard: Int) -> [String] {
        [store.scheduleKey(shard: shard), store.scheduledJobsKey(shard: shard)]
    }

    /// `RedisTemplateStore.putScript`: the org's templates and their times.
    static func templatePut(org: OrgID) -> [String] {
        let k = RecipientKeys(org: org)
        return [k.templates, k.templateTimes]
    }

    /// `RedisPipelineSession.removeScript`: the token index, the user set and the device-key prefix the script
    /// appends user ids to.
    static func removeTokens(_ store: StoreConfiguration, org: OrgID, app: AppName) -> [String] {
        [
            store.tokenIndexKey(org, app), store.usersKey(org, app), store.deviceKeyPrefix(org, app),
            store.lastSeenKey(org, app),
        ]
    }

    /// `RedisPipelineSession.publishScript`: the job's ledger only (the report stream is written after it).
    static func publish(_ store: StoreConfiguration, org: OrgID, job: JobID) -> [String] {
        [store.ledgerKey(org, job)]
    }

    /// `RedisPipelineSession.record`'s MULTI/EXEC and `ledgerState`'s multi-key EXISTS: the ledger, the accepted
    /// list and the job's quota charges.
    static func recordTransaction(_ store: StoreConfiguration, org: OrgID, job: JobID) -> [String] {
        [store.acceptedKey(org, job), store.ledgerKey(org, job), RecipientKeys(org: org).quotaCharges(job)]
    }
}
