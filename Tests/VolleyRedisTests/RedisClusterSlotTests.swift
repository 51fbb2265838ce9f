import Testing
import VolleyRedis
import VolleyTestTags

/// Redis Cluster specification, "Keys distribution model" and "Hash tags", and the CLUSTER KEYSLOT examples.
@Suite(.tags(.unit)) struct RedisClusterSlotTests {
    @Test func crc16MatchesTheSpecificationCheckValue() {
        #expect(RedisClusterSlot.crc16("123456789") == 0x31C3)
        #expect(RedisClusterSlot(key: "123456789").rawValue == 0x31C3 & 0x3FFF)
    }

    @Test(arguments: [
        ("somekey", 11058), ("foo{hash_tag}", 2515), ("foo", 12182), ("bar", 5061), ("hello", 866),
    ])
    func knownSlots(key: String, slot: Int) {
        #expect(RedisClusterSlot(key: key).rawValue == slot)
    }

    @Test func hashTagsHashOnlyTheTag() {
        // The specification's examples.
        #expect(RedisClusterSlot(key: "{user1000}.following") == RedisClusterSlot(key: "{user1000}.followers"))
        #expect(RedisClusterSlot(key: "{user1000}.following") == RedisClusterSlot(key: "user1000"))
        #expect(RedisClusterSlot(key: "foo{}{bar}") != RedisClusterSlot(key: "bar"))
        #expect(RedisClusterSlot(key: "foo{{bar}}zap") == RedisClusterSlot(key: "{bar"))
        #expect(RedisClusterSlot(key: "foo{bar}{zap}") == RedisClusterSlot(key: "bar"))
        #expect(RedisClusterSlot(key: "foo{") == RedisClusterSlot(key: "foo{"))
        #expect(RedisClusterSlot(key: "{}") != RedisClusterSlot(key: ""))
        #expect(RedisClusterSlot(key: "").rawValue == 0)
    }

    /// The hashed part as a string, for keys that carry another key's tag: the specification's examples, and a tag
    /// of characters beyond ASCII.
    @Test func theHashedPartOfAKeyIsItsTagOrTheWholeKey() {
        #expect(RedisClusterSlot.hashedPart(of: "{user1000}.following") == "user1000")
        #expect(RedisClusterSlot.hashedPart(of: "foo{}{bar}") == "foo{}{bar}")
        #expect(RedisClusterSlot.hashedPart(of: "foo{{bar}}zap") == "{bar")
        #expect(RedisClusterSlot.hashedPart(of: "foo{bar}{zap}") == "bar")
        #expect(RedisClusterSlot.hashedPart(of: "foo{") == "foo{")
        #expect(RedisClusterSlot.hashedPart(of: "volley:jobs") == "volley:jobs")
        #expect(RedisClusterSlot.hashedPart(of: "é{ü}x") == "ü")
    }

    @Test func slotsAreInRange() {
        for i in 0..<2_000 { #expect(RedisClusterSlot(key: "k\(i)").rawValue < RedisClusterSlot.count) }
        #expect(RedisClusterSlot(rawValue: 16_384) == nil)
        #expect(RedisClusterSlot(rawValue: -1) == nil)
    }
}
