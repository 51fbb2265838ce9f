import Testing
import VolleyCore
import VolleyRedis
import VolleyStore

/// Each API script's keys fall in one Redis Cluster slot (a cluster refuses a script whose keys do not: CROSSSLOT).
@Suite(.tags(.unit)) struct APIKeySlotTests {
    let keys = APIKeys(prefix: "volley")

    @Test func theAdmitScriptsCredentialsAndBucketShareASlot() {
        let slot = RedisClusterSlot(key: keys.apiKeys)
        #expect(RedisClusterSlot(key: keys.rate("k:abc")) == slot)
        #expect(RedisClusterSlot(key: keys.rate("u:org{1}:app:user}")) == slot)
    }

    @Test func theSubmitScriptsRecordSitsInItsStreamsSlot() {
        // Stream names are plain or carry one non-empty hash tag (an empty `{}` cannot be carried as a tag).
        for stream in ["volley:jobs", "jobs", "volley:{jobs}", "{volley}:jobs:0"] {
            let record = keys.job(OrgID("org{1}"), JobID("j{2}"), stream: stream)
            #expect(RedisClusterSlot(key: record) == RedisClusterSlot(key: stream), "\(stream) → \(record)")
        }
        #expect(keys.job(OrgID("orgA"), JobID("j-1"), stream: "volley:jobs") == "volley:api:job:{volley:jobs}:orgA:j-1")
        #expect(
            keys.job(OrgID("orgA"), JobID("j-1"), stream: "volley:jobs:{jobs3}") == "volley:api:job:{jobs3}:orgA:j-1")
        #expect(keys.job(OrgID("ö"), JobID("j"), stream: "{é}x") == "volley:api:job:{é}:ö:j")
    }

    /// The org's job index is written by the same script, so it shares the record's and the stream's slot; its name
    /// never equals a record's (a record has `}:` after the tag, the index `index:{`).
    @Test func theJobIndexSitsInItsStreamsSlotBesideTheRecords() {
        for stream in ["volley:jobs", "jobs", "volley:{jobs}", "{volley}:jobs:0", "volley:jobs:{jobs2}"] {
            let index = keys.jobIndex(OrgID("org{1}"), stream: stream)
            #expect(RedisClusterSlot(key: index) == RedisClusterSlot(key: stream), "\(stream) → \(index)")
        }
        #expect(keys.jobIndex(OrgID("orgA"), stream: "volley:jobs:{jobs3}") == "volley:api:job:index:{jobs3}:orgA")
        let s = keys.submission(
            org: "orgA", job: "j-1", stream: "volley:jobs", digest: "d", entry: "{}",
            createdAt: "2026-03-01T10:00:00.250Z", app: "app1", ttlSeconds: 60)
        #expect(
            s.keys == [
                "volley:api:job:{volley:jobs}:orgA:j-1", "volley:jobs", "volley:api:job:index:{volley:jobs}:orgA",
            ])
        #expect(s.args == ["d", "{}", "2026-03-01T10:00:00.250Z", "app1", "60", "1772359200250", "j-1"])
    }
}
