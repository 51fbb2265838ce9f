import Foundation
import Testing
import VolleyCore
import VolleyRedis
import VolleyTestTags

@testable import VolleyStore

/// Job stream shard names and the job id → shard mapping (`worker.streamShards`).
@Suite(.tags(.unit)) struct JobStreamShardTests {
    static func store(_ shards: Int) -> StoreConfiguration {
        var s = StoreConfiguration()
        s.streamShards = shards
        return s
    }

    @Test func oneShardKeepsThePlainNames() {
        let s = Self.store(1)
        #expect(s.jobStreams == ["volley:jobs"])
        #expect(s.deadStreams == ["volley:dead"])
        #expect(s.reportStreams == ["volley:reports"])
        #expect(s.jobStream(for: "anything") == "volley:jobs")
        #expect(s.reportStream(for: "anything") == "volley:reports")
        for id in ["a", "b", "job-1", "c-org-a"] { #expect(s.streamShard(of: JobID(id)) == 0) }
    }

    @Test func eachShardHasItsOwnHashTagSharedByItsThreeStreams() {
        let s = Self.store(3)
        #expect(s.jobStreams == ["volley:jobs:{jobs0}", "volley:jobs:{jobs1}", "volley:jobs:{jobs2}"])
        #expect(s.deadStream(shard: 1) == "volley:dead:{jobs1}")
        #expect(s.reportStream(shard: 2) == "volley:reports:{jobs2}")
        for i in s.streamShardIndexes {
            let slot = RedisClusterSlot(key: s.jobStream(shard: i))
            #expect(RedisClusterSlot(key: s.deadStream(shard: i)) == slot)
            #expect(RedisClusterSlot(key: s.reportStream(shard: i)) == slot)
        }
        #expect(Set(s.jobStreams.map { RedisClusterSlot(key: $0) }).count == 3)
    }

    @Test func theShardOfAJobIDIsItsCRC16ModuloTheShardCount() {
        let s = Self.store(5)
        for id in ["job-1", "camp.s3", "00D5e000000XyZ1EAK:42", "é"] {
            #expect(s.streamShard(of: JobID(id)) == Int(RedisClusterSlot.crc16(id)) % 5)
        }
        // Fixed values: a change of hash would send replays of earlier jobs to another stream.
        #expect(RedisClusterSlot.crc16("123456789") == 0x31C3)
        #expect(s.streamShard(of: "123456789") == 0x31C3 % 5)
        #expect(s.jobStream(for: "123456789") == "volley:jobs:{jobs\(0x31C3 % 5)}")
        #expect(s.reportStream(for: "123456789") == "volley:reports:{jobs\(0x31C3 % 5)}")
    }

    @Test func statusAddsTheShardsUp() {
        let total = RedisFleetStatus.total(
            [
                .init(
                    name: "a", group: "g", length: 3, lag: 1, pending: 2, oldestPendingAgeSeconds: 5,
                    oldestPendingConsumer: "w1"),
                .init(name: "b", group: "g", length: 4, lag: 2, pending: 0),
                .init(
                    name: "c", group: "g", length: 5, lag: 0, pending: 1, oldestPendingAgeSeconds: 9,
                    oldestPendingConsumer: "w2"),
            ], name: "volley:jobs", group: "g")
        #expect(total.name == "volley:jobs" && total.length == 12 && total.lag == 3 && total.pending == 3)
        #expect(total.oldestPendingAgeSeconds == 9 && total.oldestPendingConsumer == "w2")
        // One shard whose lag Redis cannot tell makes the total unknown, not too small.
        let unknown = RedisFleetStatus.total(
            [
                .init(name: "a", group: "g", length: 1, lag: nil, pending: 0),
                .init(name: "b", group: "g", length: 1, lag: 4, pending: 0),
            ], name: "s", group: "g")
        #expect(unknown.lag == nil && unknown.oldestPendingAgeSeconds == nil)
    }

    @Test(arguments: 2...16) func jobIDsSpreadEvenlyOverTheShards(shards: Int) {
        let s = Self.store(shards)
        var counts = [Int](repeating: 0, count: shards)
        let ids = 4_000
        for i in 0..<ids { counts[s.streamShard(of: JobID("job-\(i)"))] += 1 }
        let mean = Double(ids) / Double(shards)
        #expect(counts.allSatisfy { Double($0) > mean * 0.7 && Double($0) < mean * 1.3 }, "\(counts)")
    }

    /// The default names of 3 to 16 shards do not all sit in the slot range of one primary of a three-primary
    /// cluster (0…5460, 5461…10922, 10923…16383), so the shards spread over the primaries.
    @Test(arguments: 3...16) func defaultShardNamesSpreadOverThreePrimaries(shards: Int) {
        let ranges = Self.store(shards).jobStreams.map { RedisClusterSlot(key: $0).rawValue * 3 / 16_384 }
        #expect(Set(ranges).count > 1, "shards \(shards) use slot ranges \(ranges)")
        #expect(Set(Self.store(shards).jobStreams.map { RedisClusterSlot(key: $0) }).count == shards)
        if shards % 3 == 0, shards <= 6 {
            // The common choices put the same number of shards on each primary.
            #expect((0..<3).map { r in ranges.filter { $0 == r }.count } == Array(repeating: shards / 3, count: 3))
        }
    }
}
