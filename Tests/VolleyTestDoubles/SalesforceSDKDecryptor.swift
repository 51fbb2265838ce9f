import Foundation
import VolleyCore

/// Decrypts Volley's encrypted pushes the way each Salesforce Mobile SDK does, with the `openssl` command line and
/// none of Volley's encryption code:
/// - iOS (`SFSDKPushNotificationDecryption.m`): `secret` base64-decoded, RSA-decrypted with
///   `kSecKeyAlgorithmRSAEncryptionOAEPSHA256` (OAEP, SHA-256 label digest, MGF1-SHA-256), else
///   `kSecKeyAlgorithmRSAEncryptionPKCS1`; exactly 32 bytes, key = the first 16, IV = the last 16; `content`
///   base64-decoded, AES-128-CBC with PKCS #7 padding, UTF-8, a JSON object.
/// - Android (`PushNotificationDecryptor.java`, `Encryptor.java`): the same, with
///   `RSA/ECB/OAEPWithSHA-256AndMGF1Padding` on the Android KeyStore (MGF1-SHA-1) first, then `RSA/ECB/PKCS1Padding`.
public struct SalesforceSDKDecryptor: Sendable {
    public enum RSAPath: String, Sendable { case oaep, pkcs1 }

    public let directory: URL
    public let privateKey: URL
    /// What the device registers: base64 of the SubjectPublicKeyInfo DER.
    public let publicKeyBase64: String

    /// A fresh 2048-bit key pair in a temporary directory, as the SDKs generate.
    public static func make() throws -> SalesforceSDKDecryptor {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("volley-sdk-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        let key = dir.appendingPathComponent("device.pem")
        _ = try openssl(["genpkey", "-algorithm", "RSA", "-pkeyopt", "rsa_keygen_bits:2048", "-out", key.path])
        let der = try openssl(["pkey", "-in", key.path, "-pubout", "-outform", "DER"])
        return SalesforceSDKDecryptor(directory: dir, privateKey: key, publicKeyBase64: der.base64EncodedString())
    }

    public func remove() { try? FileManager.default.removeItem(at: directory) }

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
    public func rsaDecrypt(_ secret: Data, path: RSAPath, platform: Platform) throws -> Data? {
        let input = directory.appendingPathComponent("secret.bin")
        try secret.write(to: input)
        return try? openssl(
            ["pkeyutl", "-decrypt", "-inkey", privateKey.path, "-in", input.path]
                + Self.options(path, platform: platform))
    }

    /// What the SDK of `platform` makes of `secret` and `content`: the RSA path that worked and the decrypted JSON.
    public func decrypt(secret: String, content: String, platform: Platform) throws -> (RSAPath, [String: JSONValue])? {
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
            throw DecryptorError("openssl \(arguments.first ?? "") exited \(process.terminationStatus)")
        }
        return data
    }

    func openssl(_ arguments: [String]) throws -> Data { try Self.openssl(arguments) }

    struct DecryptorError: Error, CustomStringConvertible {
        let description: String
        init(_ d: String) { description = d }
    }
}
