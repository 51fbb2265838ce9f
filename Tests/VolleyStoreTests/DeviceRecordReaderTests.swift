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
            // A device with a key for encrypted pushes: OAEP, legacy PKCS #1 v1.5 (no cipher), and a key with the
            // line breaks iOS sends (escaped in the JSON, so the reader's slow string path).
            DeviceRecord(
                platform: .ios, token: DeviceToken(String(repeating: "cd", count: 32)), environment: .production,
                locale: nil, user: UserID("k1"), registeredAt: now, lastSeenAt: now,
                rsaPublicKey: "MIIBIjANBgkqhkiG9w0BAQEFAAOCAQ8AMIIBCgKCAQEA+/x=", cipherName: "RSA_OAEP_SHA256"),
            DeviceRecord(
                platform: .android, token: DeviceToken("fcm-key"), user: UserID("k2"), registeredAt: now,
                lastSeenAt: now, rsaPublicKey: "MIIBIjANBgkqhkiG9w0BAQEFAAOC\nAQ8AMIIBCgKCAQEA"),
            // A device with its time zone (`deliverAtLocalTime`); `timeZone` has the length of `platform`.
            DeviceRecord(
                platform: .android, token: DeviceToken("fcm-zone"), user: UserID("z1"), registeredAt: now,
                lastSeenAt: now, timeZone: "America/Argentina/Buenos_Aires"),
        ]
        for r in records {
            let json = try encoded(r)
            let fast = DeviceRecordReader.device(fromJSON: json)
            let slow = try DeviceRecord.decoder.decode(DeviceRecord.self, from: Data(json.utf8)).device
            #expect(fast == slow, "\(json)")
            #expect(fast == r.device)
            #expect(fast?.encryptionKey?.rsaPublicKey == r.rsaPublicKey)
            #expect(fast?.encryptionKey?.cipherName == r.cipherName)
            #expect(fast?.timeZone == r.timeZone)
        }
    }

    /// `cipherName` and `rsaPublicKey` share their lengths with `lastSeenAt` and `registeredAt`: each is matched by
    /// its bytes, in any order, and null is the same as absent.
    @Test func readsKeyFieldsInAnyOrderAndNull() {
        let json =
            #"{"cipherName":"RSA_OAEP_SHA256","platform":"ios","rsaPublicKey":"K\/1","token":"T","user":"u","#
            + #""registeredAt":1,"lastSeenAt":2}"#
        #expect(
            DeviceRecordReader.device(fromJSON: json)?.encryptionKey
                == DeviceKeyMaterial(rsaPublicKey: "K/1", cipherName: "RSA_OAEP_SHA256"))
        let none = #"{"platform":"ios","token":"T","user":"u","registeredAt":1,"lastSeenAt":2,"rsaPublicKey":null}"#
        let read = DeviceRecordReader.device(fromJSON: none)
        #expect(read != nil && read?.encryptionKey == nil)
        let nested = #"{"platform":"ios","token":"T","user":"u","registeredAt":1,"lastSeenAt":2,"rsaPublicKey":{}}"#
        #expect(DeviceRecordReader.device(fromJSON: nested) == nil)
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

/// What registration writes, the registry's read paths return: the key fields through the admin records and the send
/// path's devices, and a list newest first.
@Test(.tags(.integration)) func registrationKeepsTheKeyAndListsNewestFirst() throws {
    let redis = try RedisServerFixture()
    defer { redis.stop() }
    let session = RedisPipelineSession(
        client: redis.client(), store: StoreConfiguration(), consumer: "t", logger: Logger(label: "test"))
    let keyed = String(repeating: "e1", count: 32)
    let plain = String(repeating: "f2", count: 32)
    let t0 = Date(timeIntervalSince1970: 1_790_000_000)
    try session.register(
        [
            DeviceImportRecord(
                org: "o", app: "a", user: "u", platform: .ios, token: DeviceToken(keyed), rsaPublicKey: "KEY+/=",
                cipherName: "RSA_OAEP_SHA256")
        ], now: t0)
    try session.register(
        [DeviceImportRecord(org: "o", app: "a", user: "u", platform: .android, token: DeviceToken("fcm-1"))],
        now: t0.addingTimeInterval(60))
    try session.register(
        [DeviceImportRecord(org: "o", app: "a", user: "u", platform: .ios, token: DeviceToken(plain))],
        now: t0.addingTimeInterval(30))
    let records = try session.records(org: "o", app: "a", user: "u")
    #expect(records.map(\.token.rawValue) == ["fcm-1", plain, keyed])
    #expect(records.last?.rsaPublicKey == "KEY+/=" && records.last?.cipherName == "RSA_OAEP_SHA256")
    #expect(records.first?.rsaPublicKey == nil && records.first?.cipherName == nil)
    let devices = try session.devices(org: "o", app: "a", users: ["u"])[0]
    let byToken = Dictionary(uniqueKeysWithValues: devices.map { ($0.token.rawValue, $0) })
    #expect(byToken[keyed]?.encryptionKey == DeviceKeyMaterial(rsaPublicKey: "KEY+/=", cipherName: "RSA_OAEP_SHA256"))
    #expect(byToken[plain]?.encryptionKey == nil)
    // Re-registering without a key drops the key: the app's latest registration is what counts.
    try session.register(
        [DeviceImportRecord(org: "o", app: "a", user: "u", platform: .ios, token: DeviceToken(keyed))],
        now: t0.addingTimeInterval(90))
    let again = try session.records(org: "o", app: "a", user: "u")
    #expect(again.first?.token.rawValue == keyed && again.first?.rsaPublicKey == nil)
}

/// The stale-device sweep on a real redis-server: only devices last registered at or before the cutoff go, in
/// batches, under one worker's lease; a device registered again is kept.
@Test(.tags(.integration)) func staleDevicesAreRemovedInBatchesUnderOneLease() throws {
    let redis = try RedisServerFixture()
    defer { redis.stop() }
    let store = StoreConfiguration()
    let session = RedisPipelineSession(client: redis.client(), store: store, consumer: "a", logger: Logger(label: "t"))
    let other = RedisPipelineSession(client: redis.client(), store: store, consumer: "b", logger: Logger(label: "t"))
    let t0 = Date(timeIntervalSince1970: 1_790_000_000)
    func register(_ user: UserID, _ token: String, _ app: AppName = "a", at: Date) throws {
        try session.register(
            [DeviceImportRecord(org: "o", app: app, user: user, platform: .android, token: DeviceToken(token))], now: at
        )
    }
    for i in 0..<5 { try register("old", "old-\(i)", at: t0) }
    try register("old", "old-again", at: t0)
    try register("other-app", "old-b", "b", at: t0)
    try register("new", "new-1", at: t0 + 100 * 86_400)
    try register("old", "old-again", at: t0 + 100 * 86_400) // registered again: seen since

    let cutoff = t0 + 86_400
    // A second worker does not sweep while the first holds the lease.
    let first = try session.sweepStaleDevices(cutoff: cutoff, leaseSeconds: 30, owner: "w1", batch: 3)
    #expect(first == StaleDeviceSweepResult(leased: true, removed: 4, more: true))
    #expect(try other.sweepStaleDevices(cutoff: cutoff, leaseSeconds: 30, owner: "w2", batch: 3).leased == false)
    let second = try session.sweepStaleDevices(cutoff: cutoff, leaseSeconds: 30, owner: "w1", batch: 3)
    #expect(second == StaleDeviceSweepResult(leased: true, removed: 2, more: false))
    #expect(try session.records(org: "o", app: "a", user: "old").map(\.token.rawValue) == ["old-again"])
    #expect(try session.records(org: "o", app: "a", user: "new").map(\.token.rawValue) == ["new-1"])
    #expect(try session.records(org: "o", app: "b", user: "other-app").isEmpty)
    let counts = try session.counts(org: "o", app: "b")
    #expect(counts.users == 0 && counts.devices == 0)
    let third = try session.sweepStaleDevices(cutoff: cutoff, leaseSeconds: 30, owner: "w1", batch: 3)
    #expect(third == StaleDeviceSweepResult(leased: true, removed: 0, more: false))
    // A device removed otherwise (unregistered, refused by the provider) leaves the last-seen index with it.
    let seen = #"volley:devseen:{o}:a"#
    #expect(try redis.client().checked(["ZSCORE", seen, "android:new-1"]).string != nil)
    #expect(try session.unregister(org: "o", app: "a", platform: .android, token: DeviceToken("new-1")))
    #expect(try redis.client().checked(["ZSCORE", seen, "android:new-1"]).string == nil)
}

/// The console's lookups on the registry: the newest registrations of an app (the last-seen index, newest first),
/// and the devices whose token ends with what a user typed, glob characters matched as written, another app's and
/// another org's never.
@Test(.tags(.integration)) func theNewestDevicesAndATokenSuffixAreFoundInTheAppsOwnIndex() throws {
    let redis = try RedisServerFixture()
    defer { redis.stop() }
    let session = RedisPipelineSession(
        client: redis.client(), store: StoreConfiguration(), consumer: "t", logger: Logger(label: "test"))
    func record(_ org: OrgID, _ app: AppName, _ user: String, _ platform: Platform, _ token: String)
        -> DeviceImportRecord
    {
        DeviceImportRecord(org: org, app: app, user: UserID(user), platform: platform, token: DeviceToken(token))
    }
    let base = Date(timeIntervalSince1970: 1_800_000_000)
    for i in 0..<4 {
        let token = String(repeating: "a", count: 56) + String(format: "%08x", i)
        try session.register([record("o", "app", "u\(i)", .ios, token)], now: base.addingTimeInterval(Double(i)))
    }
    try session.register(
        [record("o", "app", "star", .android, "fcm-tok*en[1]"), record("o", "other", "x", .ios, "ffff00000003")],
        now: base.addingTimeInterval(10))
    try session.register([record("p", "app", "y", .ios, "eeee00000003")], now: base.addingTimeInterval(11))
    let newest = try session.recentRecords(org: "o", app: "app", limit: 3)
    #expect(newest.map(\.user.rawValue) == ["star", "u3", "u2"])
    let byTail = try session.records(org: "o", app: "app", tokenSuffix: "00000003", limit: 5)
    #expect(byTail.map(\.user.rawValue) == ["u3"])
    #expect(try session.records(org: "o", app: "app", tokenSuffix: "tok*en[1]", limit: 5).map(\.user) == ["star"])
    #expect(try session.records(org: "o", app: "app", tokenSuffix: "*", limit: 5).isEmpty)
    #expect(try session.records(org: "o", app: "app", tokenSuffix: "ffffffff", limit: 5).isEmpty)
}
