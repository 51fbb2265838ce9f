import Crypto
import CryptoExtras
import Foundation
import Testing
import VolleyCore
import VolleyTestTags

@testable import VolleyConnect

/// One 2048-bit key for the suites (generated at test time; no private key is committed).
private let generatedKeyDER = Result { try _RSA.Encryption.PrivateKey(keySize: .bits2048).publicKey.derRepresentation }
private var testKeyDER: Data { get throws { try generatedKeyDER.get() } }
private var testKeyBase64: String { get throws { try testKeyDER.base64EncodedString() } }

private func str(_ s: String) -> JSONValue { .string(s) }
private func num(_ n: Int) -> JSONValue { .number(JSONNumber(n)) }

private func content(
    title: String = "Deal closed", body: String = "Acme signed the renewal", fullContent: Bool = false,
    site: String? = "0DBxx0000000001", sound: String? = nil
) -> SalesforcePushContent {
    SalesforcePushContent(
        orgID: "00Dxx0000000001", userID: "005xx0000000001", notificationID: "0Mlxx0000000001",
        targetID: "006xx0000000001", siteID: site, typeID: "0MLxx0000000001", title: title, body: body,
        fullContent: fullContent, badge: 3, sound: sound, timestamp: 1_764_000_000)
}

private func apns(_ push: SalesforcePush) throws -> [String: JSONValue] {
    guard case .apns(let bytes) = push.payload else { throw SalesforcePushError(message: "not an APNs payload") }
    let value = try JSONValue(parsing: bytes)
    // The bytes are the compact, sorted-key JSON VolleyCore's encoder writes.
    #expect(value.encoded() == bytes)
    return try #require(value.objectValue)
}

private func fcm(_ push: SalesforcePush) throws -> [String: String] {
    guard case .fcmData(let data) = push.payload else { throw SalesforcePushError(message: "not FCM data") }
    return data
}

private func keyError(_ key: String, cipher: String? = nil) -> String? {
    do {
        try DeviceEncryptionKey.validate(rsaPublicKey: key, cipherName: cipher)
        return nil
    } catch {
        #expect(error.status == 400)
        return error.message
    }
}

@Suite(.tags(.unit))
struct SalesforcePushPayloadTests {
    @Test func iosInClearWithoutFullContentCarriesTheTitleAsTheBody() throws {
        let p = try SalesforcePushBuilder.build(content(), platform: .ios)
        let o = try apns(p)
        #expect(!p.encrypted)
        #expect(
            Set(o.keys) == ["aps", "oid", "uid", "nid", "type", "sid", "cid", "notifType", "alertTitle", "alertBody"])
        #expect(
            o["aps"]
                == .object([
                    "alert": .object(["title": str(""), "body": str("Deal closed")]), "badge": num(3),
                    "sound": str("default"),
                ]))
        #expect(o["alertTitle"] == str(""))
        #expect(o["alertBody"] == str("Deal closed"))
        #expect(o["type"] == num(-1))
        #expect(o["oid"] == str("00Dxx0000000001"))
        #expect(o["uid"] == str("005xx0000000001"))
        #expect(o["nid"] == str("0Mlxx0000000001"))
        #expect(o["sid"] == str("006xx0000000001"))
        #expect(o["cid"] == str("0DBxx0000000001"))
        #expect(o["notifType"] == str("0MLxx0000000001"))
    }

    @Test func iosInClearWithFullContentCarriesTitleAndBody() throws {
        let o = try apns(
            try SalesforcePushBuilder.build(content(fullContent: true, site: nil, sound: "chime.caf"), platform: .ios))
        #expect(o["cid"] == nil)
        #expect(
            o["aps"]
                == .object([
                    "alert": .object(["title": str("Deal closed"), "body": str("Acme signed the renewal")]),
                    "badge": num(3),
                    "sound": str("chime.caf"),
                ]))
        #expect(o["alertTitle"] == str("Deal closed"))
        #expect(o["alertBody"] == str("Acme signed the renewal"))
    }

    @Test(arguments: [false, true])
    func androidInClearHasTheGuidesKeysAsStrings(fullContent: Bool) throws {
        let d = try fcm(try SalesforcePushBuilder.build(content(fullContent: fullContent), platform: .android))
        #expect(
            d == [
                "oid": "00Dxx0000000001", "uid": "005xx0000000001", "nid": "0Mlxx0000000001", "type": "-1",
                "sid": "006xx0000000001", "cid": "0DBxx0000000001", "notifType": "0MLxx0000000001",
                "alertTitle": fullContent ? "Deal closed" : "",
                "alertBody": fullContent ? "Acme signed the renewal" : "Deal closed",
                "badge": "3", "timestamp": "1764000000", "alert": "Deal closed",
            ])
    }

    @Test func encryptedIOSCarriesOnlyTheTitleInClear() throws {
        let key = try DeviceEncryptionKey(
            rsaPublicKey: try testKeyBase64, cipherName: "RSA_OAEP_SHA256", platform: .ios)
        let p = try SalesforcePushBuilder.build(content(fullContent: true), platform: .ios, key: key)
        let o = try apns(p)
        #expect(p.encrypted)
        #expect(Set(o.keys) == ["aps", "content", "encrypted", "secret"])
        #expect(o["encrypted"] == .bool(true))
        #expect(
            o["aps"]
                == .object([
                    "alert": .object(["title": str(""), "body": str("Deal closed")]), "badge": num(3),
                    "mutable-content": num(1),
                    "sound": str("default"),
                ]))
        let secretText = try #require(o["secret"]?.stringValue)
        #expect(Data(base64Encoded: secretText)?.count == 256)
        let contentText = try #require(o["content"]?.stringValue)
        #expect((Data(base64Encoded: contentText)?.count ?? 1) % 16 == 0)
        guard case .apns(let bytes) = p.payload else { return }
        let text = String(decoding: bytes, as: UTF8.self)
        for secretText in ["Acme signed the renewal", "00Dxx", "005xx", "0Mlxx", "006xx", "0DBxx", "0MLxx"] {
            #expect(!text.contains(secretText))
        }
        #expect(p.bytes == bytes.count)
    }

    @Test func encryptedAndroidCarriesOnlyTheThreeKeys() throws {
        let key = try DeviceEncryptionKey(
            rsaPublicKey: try testKeyBase64, cipherName: "RSA_OAEP_SHA256", platform: .android)
        let p = try SalesforcePushBuilder.build(content(), platform: .android, key: key)
        let d = try fcm(p)
        #expect(Set(d.keys) == ["encrypted", "secret", "content"])
        #expect(d["encrypted"] == "true")
        #expect(Data(base64Encoded: d["secret"] ?? "")?.count == 256)
        #expect(p.bytes == d.reduce(0) { $0 + $1.key.utf8.count + $1.value.utf8.count })
    }

    @Test func aKeyForTheOtherPlatformIsRefused() throws {
        let key = try DeviceEncryptionKey(rsaPublicKey: try testKeyBase64, cipherName: nil, platform: .android)
        #expect(throws: SalesforcePushError.self) {
            try SalesforcePushBuilder.build(content(), platform: .ios, key: key)
        }
    }
}

@Suite(.tags(.unit))
struct DeviceEncryptionKeyTests {
    @Test func takesPaddedUnpaddedAndLineWrappedBase64() throws {
        let b64 = try testKeyBase64
        #expect(keyError(b64, cipher: "RSA_OAEP_SHA256") == nil)
        #expect(keyError(b64) == nil)
        #expect(keyError(String(b64.prefix { $0 != "=" })) == nil)
        let wrapped = try testKeyDER.base64EncodedString(options: [
            .lineLength64Characters, .endLineWithCarriageReturn, .endLineWithLineFeed,
        ])
        #expect(wrapped.contains("\r\n"))
        #expect(keyError(wrapped) == nil)
    }

    @Test func cipherNameOtherThanOAEPSHA256IsRefusedNamingTheField() throws {
        let b64 = try testKeyBase64
        for name in ["RSA_OAEP", "rsa_oaep_sha256", "PKCS1", "AES", ""] {
            #expect(keyError(b64, cipher: name)?.hasPrefix("cipherName:") == true, "'\(name)'")
        }
    }

    @Test func keysThatAreNotRSASubjectPublicKeyInfosAreRefusedNamingTheField() throws {
        let der = try testKeyDER
        let ec = P256.KeyAgreement.PrivateKey().publicKey.derRepresentation
        let bare = Data(der.dropFirst(24)) // the PKCS #1 RSAPublicKey inside the BIT STRING
        #expect(bare.first == 0x30 && bare.dropFirst(4).first == 0x02)
        let cases = ["", "not base64!", "QUJD", ec.base64EncodedString(), bare.base64EncodedString()]
        for text in cases {
            let message = try #require(keyError(text))
            #expect(message.hasPrefix("rsaPublicKey:"), "\(message)")
        }
    }

    @Test func keysBelow2048BitsAreRefused() throws {
        let small = try _RSA.Encryption.PrivateKey(unsafeKeySize: .init(bitCount: 1024))
        let message = try #require(keyError(small.publicKey.derRepresentation.base64EncodedString()))
        #expect(message.hasPrefix("rsaPublicKey:") && message.contains("1024 bits"))
    }

    @Test func theDescriptionShowsNoKeyMaterial() throws {
        let key = try DeviceEncryptionKey(
            rsaPublicKey: try testKeyBase64, cipherName: "RSA_OAEP_SHA256", platform: .ios)
        #expect(key.description == "DeviceEncryptionKey(RSA-2048, RSA_OAEP_SHA256, ios)")
    }
}

@Suite(.tags(.unit))
struct SalesforcePushFitTests {
    @Test func aLongBodyIsTrimmedFirstOnCharacterBoundaries() throws {
        let body = String(repeating: "Ünïcödé 👩‍👩‍👧 ", count: 400)
        for platform in Platform.allCases {
            let p = try SalesforcePushBuilder.build(content(body: body, fullContent: true), platform: platform)
            let alertBody: String
            switch p.payload {
            case .apns(let bytes):
                #expect(bytes.count <= 4096)
                alertBody = try #require(try apns(p)["alertBody"]?.stringValue)
                #expect(try apns(p)["alertTitle"] == str("Deal closed"))
            case .fcmData(let d):
                #expect(p.bytes <= 4096)
                alertBody = try #require(d["alertBody"])
                #expect(d["alertTitle"] == "Deal closed" && d["alert"] == "Deal closed")
            }
            #expect(p.trimmedFields == 1)
            #expect(p.trimmedBytes == body.utf8.count - alertBody.utf8.count)
            #expect(body.hasPrefix(alertBody))
            #expect(Array(body).starts(with: Array(alertBody)))
            // The longest that fits: one more character would not.
            #expect(p.bytes > 4096 - 40)
        }
    }

    @Test(arguments: Platform.allCases)
    func anEncryptedPushIsTrimmedBeforeItIsEncrypted(platform: Platform) throws {
        let key = try DeviceEncryptionKey(
            rsaPublicKey: try testKeyBase64, cipherName: "RSA_OAEP_SHA256", platform: platform)
        let body = String(repeating: "a\"b\\c ", count: 1000)
        let p = try SalesforcePushBuilder.build(content(body: body, fullContent: true), platform: platform, key: key)
        #expect(p.trimmedFields == 1 && p.trimmedBytes > 0)
        switch p.payload {
        case .apns(let bytes):
            #expect(bytes.count == p.bytes && bytes.count <= 4096)
        case .fcmData(let d):
            #expect(d.reduce(0) { $0 + $1.key.utf8.count + $1.value.utf8.count } == p.bytes)
            #expect(p.bytes <= 4096)
        }
        // AES-CBC blocks are 16 bytes, base64 turns 3 into 4: the cut is within one block of the limit.
        #expect(p.bytes > 4096 - 24)
    }

    @Test func aLongTitleIsTrimmedAfterTheBodyIsEmpty() throws {
        // Without full content `alertBody` is the title, and Android's `alert` is the title too: the body goes
        // first, then the title.
        let title = String(repeating: "T", count: 6000)
        let p = try SalesforcePushBuilder.build(content(title: title, fullContent: false), platform: .android)
        let d = try fcm(p)
        #expect(p.trimmedFields == 2)
        #expect(d["alertBody"] == "" && d["alertTitle"] == "")
        let alert = try #require(d["alert"])
        #expect(alert.count > 3500 && alert.count < 4096)
        #expect(title.hasPrefix(alert))
        #expect(p.bytes <= 4096 && p.bytes > 4096 - 1)
        #expect(p.trimmedBytes == 6000 + (6000 - alert.utf8.count))
    }

    @Test func inClearOnIOSTheTitleTravelsAsAlertBodyAndIsTrimmedAsIt() throws {
        let title = String(repeating: "T", count: 6000)
        let p = try SalesforcePushBuilder.build(content(title: title, fullContent: false), platform: .ios)
        let o = try apns(p)
        let body = try #require(o["alertBody"]?.stringValue)
        #expect(o["aps"]?["alert"]?["body"] == str(body))
        #expect(p.trimmedFields == 1 && body.count < 2048 && p.bytes <= 4096)
    }

    @Test func aPushThatCannotFitEvenWithEmptyTextsIsAnError() {
        var c = content()
        c.targetID = String(repeating: "0", count: 5000)
        for platform in Platform.allCases {
            #expect(throws: SalesforcePushError.self) { try SalesforcePushBuilder.build(c, platform: platform) }
        }
    }

    @Test func base64IsStandardAndPadded() {
        for n in 0..<40 {
            let bytes = (0..<n).map { UInt8(truncatingIfNeeded: $0 &* 37 &+ 250) }
            #expect(SalesforcePushBuilder.base64(bytes) == Array(Data(bytes).base64EncodedString().utf8))
        }
    }
}
