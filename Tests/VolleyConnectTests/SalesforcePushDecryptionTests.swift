import Foundation
import Testing
import VolleyCore
import VolleyTestDoubles
import VolleyTestTags

@testable import VolleyConnect

private let sample = SalesforcePushContent(
    orgID: "00Dxx0000000001", userID: "005xx0000000001", notificationID: "0Mlxx0000000001",
    targetID: "006xx0000000001", siteID: "0DBxx0000000001", typeID: "0MLxx0000000001", title: "Deal closed",
    body: "Acme signed the renewal — «ünïcode» \"quoted\"", fullContent: true, badge: 7, timestamp: 1_764_000_000)

/// `secret` and `content` of a push, wherever the platform puts them.
private func secretAndContent(_ push: SalesforcePush) throws -> (String, String) {
    switch push.payload {
    case .apns(let bytes):
        let o = try #require(try JSONValue(parsing: bytes).objectValue)
        return (try #require(o["secret"]?.stringValue), try #require(o["content"]?.stringValue))
    case .fcmData(let d):
        return (try #require(d["secret"]), try #require(d["content"]))
    }
}

@Suite(.tags(.integration))
struct SalesforcePushDecryptionTests {
    /// OAEP devices decrypt on the SDK's first attempt; legacy devices (no `cipherName`) on its PKCS #1 fallback.
    @Test(
        arguments: [
            (Platform.ios, "RSA_OAEP_SHA256", "oaep"), (.android, "RSA_OAEP_SHA256", "oaep"), (.ios, nil, "pkcs1"),
            (.android, nil, "pkcs1"),
        ] as [(Platform, String?, String)])
    func theSDKsDecryptWhatVolleySends(platform: Platform, cipherName: String?, expectedPath: String) throws {
        let sdk = try SalesforceSDKDecryptor.make()
        defer { sdk.remove() }
        let key = try DeviceEncryptionKey(rsaPublicKey: sdk.publicKeyBase64, cipherName: cipherName, platform: platform)
        let push = try SalesforcePushBuilder.build(sample, platform: platform, key: key)
        let (secret, content) = try secretAndContent(push)
        let (path, object) = try #require(try sdk.decrypt(secret: secret, content: content, platform: platform))
        #expect(path.rawValue == expectedPath)
        var expected: [String: JSONValue] = [
            "oid": .string("00Dxx0000000001"), "uid": .string("005xx0000000001"), "nid": .string("0Mlxx0000000001"),
            "type": .number(-1), "sid": .string("006xx0000000001"), "cid": .string("0DBxx0000000001"),
            "notifType": .string("0MLxx0000000001"), "alertTitle": .string("Deal closed"),
            "alertBody": .string("Acme signed the renewal — «ünïcode» \"quoted\""),
        ]
        if platform == .android {
            expected["badge"] = .number(7)
            expected["timestamp"] = .number(1_764_000_000)
            expected["alert"] = .string("Deal closed")
        }
        #expect(object == expected)
    }

    /// A custom notification's `data` and `url` (and Android's `threadId`) travel inside the encrypted content, as
    /// the SDKs hand the decrypted keys to the app; nothing of them is in clear. `aps` keeps what iOS itself needs
    /// in clear (`thread-id`, `category`, `interruption-level`).
    @Test(arguments: Platform.allCases)
    func theNotificationsKeysForTheAppAreInsideTheEncryptedContent(platform: Platform) throws {
        let sdk = try SalesforceSDKDecryptor.make()
        defer { sdk.remove() }
        var c = sample
        c.data = ["order": .string("A-17"), "count": .number(3)]
        c.url = "app://deal/17"
        c.threadID = "deals"
        c.category = "DEAL"
        c.interruptionLevel = "time-sensitive"
        let key = try DeviceEncryptionKey(
            rsaPublicKey: sdk.publicKeyBase64, cipherName: "RSA_OAEP_SHA256", platform: platform)
        let push = try SalesforcePushBuilder.build(c, platform: platform, key: key)
        let (secret, content) = try secretAndContent(push)
        let (_, object) = try #require(try sdk.decrypt(secret: secret, content: content, platform: platform))
        #expect(object["order"] == .string("A-17") && object["count"] == .number(3))
        #expect(object["url"] == .string("app://deal/17") && object["oid"] == .string("00Dxx0000000001"))
        #expect(object["threadId"] == (platform == .android ? .string("deals") : nil))
        switch push.payload {
        case .apns(let bytes):
            let o = try #require(try JSONValue(parsing: bytes).objectValue)
            #expect(Set(o.keys) == ["aps", "content", "encrypted", "secret"])
            #expect(o["aps"]?["thread-id"] == .string("deals") && o["aps"]?["category"] == .string("DEAL"))
            #expect(o["aps"]?["interruption-level"] == .string("time-sensitive"))
        case .fcmData(let d): #expect(Set(d.keys) == ["content", "encrypted", "secret"])
        }
    }

    /// The two OAEP variants really differ: a secret padded for iOS does not open with Android's MGF1-SHA-1, nor
    /// the other way round, so a wrong choice would show.
    @Test func theIOSAndAndroidOAEPPaddingsAreNotInterchangeable() throws {
        let sdk = try SalesforceSDKDecryptor.make()
        defer { sdk.remove() }
        for (sent, other) in [(Platform.ios, Platform.android), (.android, .ios)] {
            let key = try DeviceEncryptionKey(
                rsaPublicKey: sdk.publicKeyBase64, cipherName: "RSA_OAEP_SHA256", platform: sent)
            let (secret, _) = try secretAndContent(try SalesforcePushBuilder.build(sample, platform: sent, key: key))
            let bytes = try #require(Data(base64Encoded: secret))
            #expect(try sdk.rsaDecrypt(bytes, path: .oaep, platform: sent)?.count == 32)
            #expect(try sdk.rsaDecrypt(bytes, path: .oaep, platform: other) == nil)
            // OpenSSL 3.0 may take an OAEP block as PKCS #1 v1.5 by chance (about 1 in 256), never as 32 bytes.
            #expect(try sdk.rsaDecrypt(bytes, path: .pkcs1, platform: sent)?.count != 32)
        }
    }

    /// A trimmed push still decrypts, and what it carries is a prefix of the body.
    @Test(arguments: Platform.allCases)
    func aTrimmedEncryptedPushStillDecrypts(platform: Platform) throws {
        let sdk = try SalesforceSDKDecryptor.make()
        defer { sdk.remove() }
        var long = sample
        long.body = String(repeating: "Überlänge 👍 ", count: 500)
        let key = try DeviceEncryptionKey(
            rsaPublicKey: sdk.publicKeyBase64, cipherName: "RSA_OAEP_SHA256", platform: platform)
        let push = try SalesforcePushBuilder.build(long, platform: platform, key: key)
        #expect(push.bytes <= 4096 && push.trimmedFields == 1)
        let (secret, content) = try secretAndContent(push)
        let (_, object) = try #require(try sdk.decrypt(secret: secret, content: content, platform: platform))
        let body = try #require(object["alertBody"]?.stringValue)
        #expect(!body.isEmpty && long.body.hasPrefix(body) && body.utf8.count < long.body.utf8.count)
    }
}
