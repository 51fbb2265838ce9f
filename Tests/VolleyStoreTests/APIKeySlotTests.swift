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
}
