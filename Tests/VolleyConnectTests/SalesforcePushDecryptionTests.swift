import Foundation
import Testing
import VolleyCore
import VolleyTestTags

@testable import VolleyConnect

/// Decrypts Volley's encrypted pushes the way each Salesforce Mobile SDK does, with the `openssl` command line and
/// none of Volley's encryption code:
/// - iOS (`SFSDKPushNotificationDecryption.m`): `secret` base64-decoded, RSA-decrypted with
///   `kSecKeyAlgorithmRSAEncryptionOAEPSHA256` (OAEP, SHA-256 label digest, MGF1-SHA-256), else
///   `kSecKeyAlgorithmRSAEncryptionPKCS1`; exactly 32 bytes, key = the first 16, IV = the last 16; `content`
///   base64-decoded, AES-128-CBC with PKCS #7 padding, UTF-8, a JSON object.
/// - Android (`PushNotificationDecryptor.java`, `Encryptor.java`): the same, with
///   `RSA/ECB/OAEPWithSHA-256AndMGF1Padding` on the Android KeyStore (MGF1-SHA-1) first, then `RSA/ECB/PKCS1Padding`.
private struct SDKDecryptor {
    enum RSAPath: String { case oaep, pkcs1 }

    let directory: URL
    let privateKey: URL
    let publicKeyBase64: String

    /// A fresh 2048-bit key pair in a temporary directory, as the SDKs generate.
    static func make() throws -> SDKDecryptor {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("volley-sdk-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        let key = dir.appendingPathComponent("device.pem")
        _ = try openssl(["genpkey", "-algorithm", "RSA", "-pkeyopt", "rsa_keygen_bits:2048", "-out", key.path])
        let der = try openssl(["pkey", "-in", key.path, "-pubout", "-outform", "DER"])
        return SDKDecryptor(directory: dir, privateKey: key, publicKeyBase64: der.base64EncodedString())
    }

    func remove() { try? FileManager.default.removeItem(at: directory) }

    /// The RSA options of one SDK attempt.
    static func options(_ path: RSAPath, platform: Platform) -> [String] {
        switch (path, platform) {
        case (.pkcs1, _): ["-pkeyopt", "rsa_padding_mode:pkcs1"]
        case (.oaep, .ios):
            ["-pkeyopt", "rsa_padding_mode:oaep", "-pkeyopt", "rsa_oaep_md:sha256", "-pkeyopt", "rsa_mgf1_md:sha256"]
        case (.oaep, .android):
            ["-pkeyopt", "rsa_padding_mode:oaep", "-pkeyopt", "rsa_oaep_md:sha256", "-pkeyopt", "rsa_mgf1_md:sha1"]
        }
    }

    /// One RSA attempt: the plaintext, or nil when OpenSSL refuses the padding.
    func rsaDecrypt(_ secret: Data, path: RSAPath, platform: Platform) throws -> Data? {
        let input = directory.appendingPathComponent("secret.bin")
        try secret.write(to: input)
        return try? openssl(
            ["pkeyutl", "-decrypt", "-inkey", privateKey.path, "-in", input.path]
                + Self.options(path, platform: platform))
    }

    /// What the SDK of `platform` makes of `secret` and `content`: the RSA path that worked and the decrypted JSON.
    func decrypt(secret: String, content: String, platform: Platform) throws -> (RSAPath, [String: JSONValue])? {
        guard let secretBytes = Data(base64Encoded: secret), let contentBytes = Data(base64Encoded: content) else {
            return nil
        }
        var found: (RSAPath, Data)?
        for path in [RSAPath.oaep, .pkcs1] {
            if let plain = try rsaDecrypt(secretBytes, path: path, platform: platform) {
                found = (path, plain)
                break
            }
        }
        guard let (path, keyAndIV) = found, keyAndIV.count == 32 else { return nil }
        let hex = { (d: Data) in d.map { String(format: "%02x", $0) }.joined() }
        let input = directory.appendingPathComponent("content.bin")
        try contentBytes.write(to: input)
        let plain = try openssl([
            "enc", "-d", "-aes-128-cbc", "-K", hex(keyAndIV.prefix(16)), "-iv", hex(keyAndIV.suffix(16)), "-in",
            input.path,
        ])
        guard let object = try JSONValue(parsing: Array(plain)).objectValue else { return nil }
        return (path, object)
    }

    /// Runs `openssl` and returns its standard output; throws when it exits non-zero.
    @discardableResult
    static func openssl(_ arguments: [String]) throws -> Data {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        process.arguments = ["openssl"] + arguments
        let out = Pipe()
        process.standardOutput = out
        process.standardError = FileHandle.nullDevice
        try process.run()
        let data = out.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        guard process.terminationStatus == 0 else {
            throw SalesforcePushError(message: "openssl \(arguments.first ?? "") exited \(process.terminationStatus)")
        }
        return data
    }

    func openssl(_ arguments: [String]) throws -> Data { try Self.openssl(arguments) }
}

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
        let sdk = try SDKDecryptor.make()
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

    /// The two OAEP variants really differ: a secret padded for iOS does not open with Android's MGF1-SHA-1, nor
    /// the other way round, so a wrong choice would show.
    @Test func theIOSAndAndroidOAEPPaddingsAreNotInterchangeable() throws {
        let sdk = try SDKDecryptor.make()
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
        let sdk = try SDKDecryptor.make()
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
