import Foundation
import Testing
import VolleyCore
import VolleyRedis
import VolleyTestTags

@testable import VolleyStore

/// Every Lua script's keys, declared and derived, and every MULTI/EXEC's keys hash to one Redis Cluster slot, so
/// the same layout runs on one Redis and on a cluster (CROSSSLOT otherwise).
@Suite(.tags(.unit)) struct RedisKeySlotTests {
    static let orgs: [OrgID] = ["o1", "00D5e000000XyZ1EAK", "org:with:colons", "org with spaces", "x{y"]
    static let jobs: [JobID] = ["j1", "1732400000000-0", "job{tagged}"]
    static let users: [UserID] = ["u1", "005xx000001Sv6AAAS", "{u}"]

    static func groups() -> [(String, [String])] {
        let store = StoreConfiguration()
        let hour = QuotaHour(containing: Date(timeIntervalSince1970: 1_764_000_000))
        var out: [(String, [String])] = []
        for org in orgs {
            for job in jobs {
                for platform in Platform.allCases {
                    out.append(
                        ("quotaCharge", RedisKeyGroups.quotaCharge(org: org, platform: platform, hour: hour, job: job)))
                    out.append(
                        (
                            "quotaSettle+charge",
                            RedisKeyGroups.quotaSettle(org: org, platform: platform, hour: hour)
                                + RedisKeyGroups.quotaAdopt(org: org, job: job)
                        ))
                }
                out.append(("shardComplete", RedisKeyGroups.shardComplete(org: org, parent: job)))
                out.append(("publish", RedisKeyGroups.publish(store, org: org, job: job)))
                out.append(
                    (
                        "record (MULTI/EXEC), ledgerState",
                        RedisKeyGroups.recordTransaction(store, org: org, job: job)
                            + RedisKeyGroups.quotaCharge(org: org, platform: .ios, hour: hour, job: job)
                    ))
            }
            for user in users {
                out.append(
                    (
                        "inboxDeliver",
                        RedisKeyGroups.inboxDeliver(org: org, notification: "n1")
                            + RedisKeyGroups.inboxDerived(org: org, user: user)
                    ))
                out.append(("inboxMark", RedisKeyGroups.inboxMark(org: org, user: user)))
                out.append(
                    (
                        "frequencyCapAdmit",
                        RedisKeyGroups.frequencyCapAdmit(org: org)
                            + RedisKeyGroups.frequencyCapDerived(org: org, user: user, type: "ORDER:{x}")
                    ))
                out.append(
                    (
                        "syncHints",
                        RedisKeyGroups.syncHints(org: org, key: SyncHintKey(app: "app1", user: user, type: "T"))
                    ))
                for app: AppName in ["app1", "Sales App"] {
                    out.append(
                        (
                            "removeTokens",
                            RedisKeyGroups.removeTokens(store, org: org, app: app)
                                + [store.deviceKey(org, app, user)]
                        ))
                }
            }
            out.append(
                (
                    "directoryResolution",
                    RedisKeyGroups.directoryResolution(org: org, scope: "job-1", containers: ["g1", "q{1}"])
                ))
            out.append(("directoryDrain", RedisKeyGroups.directoryDrain(org: org, scope: "job-1")))
            out.append(("templatePut", RedisKeyGroups.templatePut(org: org)))
            for (attribute, value) in [("plan", "gold"), ("city", "{Berlin}"), ("n", "1:2"), ("seen", "")] {
                out.append(
                    (
                        "attributeIndexWrite",
                        RedisKeyGroups.attributeIndexWrite(org: org)
                            + RedisKeyGroups.attributeIndexDerived(org: org, attribute: attribute, value: value)
                    ))
                out.append(
                    (
                        "segmentResolution",
                        RedisKeyGroups.segmentResolution(
                            store, org: org, app: "Sales App", scope: "job{1}", attribute: attribute, value: value)
                    ))
            }
        }
        out.append(("keepAlive", RedisKeyGroups.keepAlive(stream: store.jobStream)))
        // The schedule's scripts, with one job stream and with shards, default and configured stream names.
        for shards in [1, 3, 6] {
            for name in ["volley:jobs", "jobs", "acme:push:jobs"] {
                var s = StoreConfiguration(jobStream: name)
                s.streamShards = shards
                for shard in s.streamShardIndexes {
                    out.append(
                        ("schedulePromote \(name) \(shard)/\(shards)", RedisKeyGroups.schedulePromote(s, shard: shard)))
                    out.append(
                        ("scheduleUnpark \(name) \(shard)/\(shards)", RedisKeyGroups.scheduleUnpark(s, shard: shard)))
                }
            }
        }
        return out
    }

    @Test func everyScriptAndTransactionStaysInOneSlot() {
        for (name, keys) in Self.groups() {
            let slots = Set(keys.map { RedisClusterSlot(key: $0) })
            #expect(slots.count == 1, "\(name): \(keys) span slots \(slots.sorted())")
        }
    }

    @Test func anOrgsKeysAreTaggedWithTheOrg() {
        let store = StoreConfiguration()
        let org: OrgID = "00D5e000000XyZ1EAK"
        let slot = RedisClusterSlot(key: org.rawValue)
        for key in [
            store.deviceKey(org, "a", "u"), store.tokenIndexKey(org, "a"), store.usersKey(org, "a"),
            store.ledgerKey(org, "j"), store.acceptedKey(org, "j"), RecipientKeys(org: org).types,
            RecipientKeys(org: org).kind, RecipientKeys(org: org).quotaLimits, RecipientKeys(org: org).attributes,
            RecipientKeys(org: org).templates, RecipientKeys(org: org).templateTimes,
        ] {
            #expect(RedisClusterSlot(key: key) == slot, "\(key)")
        }
    }
}
