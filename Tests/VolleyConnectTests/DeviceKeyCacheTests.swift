import Crypto
import CryptoExtras
import Foundation
import Testing
import VolleyConnect
import VolleyCore
import VolleyTestTags

/// The worker's one cache of parsed device keys: each key parsed once while it stays, never more than `capacity`
/// held, whatever the audience.
@Suite(.tags(.unit)) struct DeviceKeyCacheTests {
    /// 100,000 devices with 100,000 distinct keys (the invalid ones are cached too, and cheap to make): memory holds
    /// at most `capacity` of them at every step, each is parsed once, and a key asked for again since the last turn
    /// is not parsed again.
    @Test func theCacheHoldsAtMostItsCapacityWhateverTheAudience() {
        let cache = DeviceKeyCache(capacity: 1_000)
        var largest = 0
        for i in 0..<100_000 {
            let material = DeviceKeyMaterial(rsaPublicKey: "key-\(i)", cipherName: "RSA_OAEP_SHA256")
            guard case .invalid = cache.key(material, platform: .ios) else {
                Issue.record("key-\(i) parsed")
                return
            }
            if i % 100 == 0 { largest = max(largest, cache.count) }
        }
        #expect(largest <= 1_000 && cache.count <= 1_000)
        #expect(cache.parses == 100_000)
        // The most recent keys are still there: asking again parses nothing.
        for i in 99_900..<100_000 {
            _ = cache.key(DeviceKeyMaterial(rsaPublicKey: "key-\(i)", cipherName: "RSA_OAEP_SHA256"), platform: .ios)
        }
        #expect(cache.parses == 100_000)
        // The same text for the other platform is another key (its OAEP differs).
        _ = cache.key(DeviceKeyMaterial(rsaPublicKey: "key-99999", cipherName: "RSA_OAEP_SHA256"), platform: .android)
        #expect(cache.parses == 100_001)
    }

    /// A key in use is kept across turns: asked between every other key's, it is parsed once.
    @Test func aKeyInUseSurvivesTheTurns() throws {
        let der = try _RSA.Encryption.PrivateKey(keySize: .bits2048).publicKey.derRepresentation
        let hot = DeviceKeyMaterial(rsaPublicKey: der.base64EncodedString(), cipherName: "RSA_OAEP_SHA256")
        let cache = DeviceKeyCache(capacity: 10)
        for i in 0..<200 {
            guard case .key = cache.key(hot, platform: .ios) else {
                Issue.record("the key did not parse")
                return
            }
            _ = cache.key(DeviceKeyMaterial(rsaPublicKey: "cold-\(i)"), platform: .ios)
        }
        #expect(cache.parses == 201 && cache.count <= 10)
    }
}
