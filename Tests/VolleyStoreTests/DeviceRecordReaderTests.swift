import Foundation
import Logging
import Testing
import VolleyCore
import VolleyRedis
import VolleyTestSupport
import VolleyTestTags

@testable import VolleyStore

/// The fast registry-record reader must read exactly what `JSONDecoder` reads, and decline what it cannot.
@Suite(.tags(.integration)) struct DeviceRecordReaderTests {
    private func encoded(_ r: DeviceRecord) throws -> String {
        String(decoding: try DeviceRecord.encoder.encode(r), as: UTF8.self)
    }

    @Test func readsWhatTheRegistryWritesLikeJSONDecoder() throws {
        let now = Date(timeIntervalSince1970: 1_790_000_000.25)
        let records = [
            DeviceRecord(
                platform: .ios, token: DeviceToken(String(repeating: "ab", count: 32)), environment: .sandbox,
                locale: "en_US", user: UserID("005xx000001"), registeredAt: now, lastSeenAt: now),
            DeviceRecord(
                platform: .android, token: DeviceToken("fcm:APA91b-_x/y+z=="), environment: nil, locale: nil,
                user: UserID("u"), registeredAt: now, lastSeenAt: now.addingTimeInterval(5)),
            DeviceRecord(
                platform: .ios, token: DeviceToken("t"), environment: .production, locale: "fr",
                user: UserID("quote\" back\\slash \u{1}ctl tab\t é 漢 🎉"), registeredAt: now, lastSeenAt: now),
        ]
        for r in records {
            let json = try encoded(r)
            let fast = DeviceRecordReader.device(fromJSON: json)
            let slow = try DeviceRecord.decoder.decode(DeviceRecord.self, from: Data(json.utf8)).device
            #expect(fast == slow, "\(json)")
            #expect(fast == r.device)
        }
    }

    @Test func readsEscapesWhitespaceUnknownKeysAndNulls() {
        let json =
            #" { "user" : "a\u00e9\ud83c\udf89\/\n" , "extra": true, "n": null, "x": -1.5e3, "token":"T", "#
            + #""platform":"android", "environment": null, "locale": null, "registeredAt": 1, "lastSeenAt": 2.5 } "#
        let d = DeviceRecordReader.device(fromJSON: json)
        #expect(
            d
                == Device(
                    platform: .android, token: DeviceToken("T"), environment: nil, locale: nil,
                    user: UserID("aé🎉/\n")))
    }

    /// Keys are matched from their bytes: an escaped key means the same key, a near miss is an unknown key.
    @Test func matchesKeysExactlyEscapedOrNot() {
        let escaped = #"{"\u0074oken":"T","pl\u0061tform":"ios","user":"u","registeredAt":1,"lastSeenAt":2}"#
        #expect(
            DeviceRecordReader.device(fromJSON: escaped)
                == Device(platform: .ios, token: DeviceToken("T"), environment: nil, locale: nil, user: UserID("u")))
        for near in ["Token", "tokens", "toke", "tokem"] {
            let json = #"{"\#(near)":"T","platform":"ios","user":"u","registeredAt":1,"lastSeenAt":2}"#
            #expect(DeviceRecordReader.device(fromJSON: json) == nil, "\(json)") // no token: the decoder decides
        }
    }

    @Test func declinesWhatItDoesNotRecogniseSoTheDecoderDecides() {
        let bad = [
            "", "{}", "[]", "not json",
            // lastSeenAt missing
            #"{"platform":"ios","token":"t","user":"u","registeredAt":1}"#,
            #"{"platform":"windows","token":"t","user":"u","registeredAt":1,"lastSeenAt":1}"#,
            #"{"platform":"ios","token":"t","user":"u","registeredAt":1,"lastSeenAt":1,"meta":{"a":1}}"#,
            #"{"platform":"ios","token":"t","user":"u","registeredAt":1,"lastSeenAt":1"#,
            #"{"platform":"ios","token":"t","user":"u","registeredAt":1,"lastSeenAt":1} x"#,
            #"{"platform":"ios","token":"t\q","user":"u","registeredAt":1,"lastSeenAt":1}"#,
            #"{"platform":"ios","token":"\ud800","user":"u","registeredAt":1,"lastSeenAt":1}"#,
            #"{"platform":"ios","token":"t","user":"u","registeredAt":"x","lastSeenAt":1}"#,
            #"{"platform":"ios","token":"t","user":"u","registeredAt":1-2,"lastSeenAt":1}"#,
            #"{"platform":"ios","token":"t","user":"u","registeredAt":01,"lastSeenAt":1}"#,
            #"{"platform":"ios","token":"t","user":"u","registeredAt":1.,"lastSeenAt":1e}"#,
            "{\"platform\":\"ios\",\"token\":\"a\nb\",\"user\":\"u\",\"registeredAt\":1,\"lastSeenAt\":1}",
            #"{"platform":"ios","environment":"staging","token":"t","user":"u","registeredAt":1,"lastSeenAt":1}"#,
        ]
        for json in bad {
            #expect(DeviceRecordReader.device(fromJSON: json) == nil, "\(json)")
        }
    }
}

/// The registry read on the send path (HVALS replies read in place): records the fast reader takes, records only
/// `JSONDecoder` reads (nested values), and unreadable ones (skipped), per user, in the users' order.
@Test(.tags(.integration)) func registryReadTakesFastFallbackAndSkipsUnreadable() throws {
    let redis = try RedisServerFixture()
    defer { redis.stop() }
    let store = StoreConfiguration()
    let session = RedisPipelineSession(
        client: redis.client(), store: store, consumer: "t", logger: Logger(label: "test"))
    let token1 = String(repeating: "a", count: 64)
    let token2 = String(repeating: "b", count: 64)
    let plain = #"{"platform":"ios","token":"\#(token1)","user":"u1","registeredAt":1,"lastSeenAt":2}"#
    let nested =
        #"{"platform":"android","token":"\#(token2)","user":"u1","registeredAt":1,"lastSeenAt":2,"extra":{"k":[1]}}"#
    _ = try redis.client().pipeline([
        [
            "HSET", store.deviceKey("o", "app", "u1"), "ios:" + token1, plain, "android:" + token2, nested, "bad",
            "{not json",
        ]
    ])
    let lists = try session.devices(org: "o", app: "app", users: ["nobody", "u1"])
    #expect(lists.count == 2)
    #expect(lists[0].isEmpty)
    #expect(Set(lists[1].map(\.token.rawValue)) == [token1, token2])
    #expect(Set(lists[1].map(\.platform)) == [.ios, .android])
}

/// The ledger's per-device field is written as bytes on the send path and as a String elsewhere: the same argument.
@Test(.tags(.integration)) func deviceFieldBytesMatchTheString() {
    for (platform, token) in [(Platform.ios, String(repeating: "ab", count: 32)), (.android, "fcm:APA91b-_x/y+z==é")] {
        var built = RedisCommand(["HMGET", "k"])
        StoreConfiguration.appendDeviceField(platform, DeviceToken(token), to: &built)
        #expect(
            built.wireBytes
                == RedisCommand(["HMGET", "k", StoreConfiguration.deviceField(platform, DeviceToken(token))]).wireBytes)
    }
}

/// Accepted-list entries are length-prefixed, so a token may hold any character (the registry takes any string up
/// to 4,096 characters), and a damaged element is refused rather than half read.
@Test(.tags(.integration)) func acceptedListEntriesRoundTripAnyToken() {
    let devices: [(Platform, String)] = [
        (.ios, String(repeating: "ab", count: 32)),
        (.android, "fcm:APA91b-_x/y+z==é"), (.android, "line\nbreak:12:colons"),
        (.ios, String(repeating: "z", count: 4096)),
    ]
    var batch: [UInt8] = []
    for (p, t) in devices { StoreConfiguration.appendAcceptedEntry(p, DeviceToken(t), to: &batch) }
    let element = String(decoding: batch, as: UTF8.self)
    #expect(element.hasPrefix("68:ios:abab"))
    let fields = devices.map { StoreConfiguration.deviceField($0.0, DeviceToken($0.1)) }
    #expect(StoreConfiguration.acceptedFields(element) == fields)
    #expect(StoreConfiguration.acceptedFields("") == [])
    for damaged in ["6:ios:a\n", "x:ios:abc\n", "7:ios:abc", "7:ios:abc\n8:ios", "7ios:abc\n"] {
        #expect(StoreConfiguration.acceptedFields(damaged) == nil, "\(damaged)")
    }
}
