import CryptoExtras
import Foundation
import VolleyCore

/// A device's RSA public key for Notification Builder push encryption, parsed once (per chunk of devices, not per
/// field) and ready to wrap one AES key per push.
///
/// A device registers `rsaPublicKey`, base64 of the X.509 SubjectPublicKeyInfo DER (iOS sends it in 64-character
/// lines, `NSDataBase64Encoding64CharacterLineLength`; Android with `Base64.encodeToString`), and `cipherName`:
/// `RSA_OAEP_SHA256` from both SDKs today, absent from SDKs that only know PKCS #1 v1.5.
///
/// What each SDK decrypts the `secret` with, read in the SDKs' source:
/// - iOS, forcedotcom/SalesforceMobileSDK-iOS
///   `libs/SalesforceSDKCore/SalesforceSDKCore/Classes/PushNotification/SFSDKPushNotificationDecryption.m`
///   (`getAESKeyFromSecret:`): `SecKeyCreateDecryptedData` with `kSecKeyAlgorithmRSAEncryptionOAEPSHA256` (OAEP,
///   SHA-256 for the label and for MGF1), and when that fails, `kSecKeyAlgorithmRSAEncryptionPKCS1`.
/// - Android, forcedotcom/SalesforceMobileSDK-Android
///   `libs/SalesforceAnalytics/src/com/salesforce/androidsdk/analytics/security/Encryptor.java`
///   (`decryptWithRSAMultiCipherNodes`): `Cipher.getInstance("RSA/ECB/OAEPWithSHA-256AndMGF1Padding",
///   "AndroidKeyStoreBCWorkaround")` and `cipher.init(DECRYPT_MODE, privateKey)` with no `OAEPParameterSpec`, so the
///   Android KeyStore's MGF1 digest is SHA-1 while the label digest is SHA-256; when that fails,
///   `RSA/ECB/PKCS1Padding`.
///
/// Hence the padding Volley encrypts with: iOS and `RSA_OAEP_SHA256`: OAEP SHA-256/MGF1-SHA-256 (swift-crypto's
/// `PKCS1_OAEP_SHA256`); Android and `RSA_OAEP_SHA256`: OAEP SHA-256/MGF1-SHA-1 (OpenSSL, `RSAOAEP+OpenSSL.swift`);
/// no `cipherName`: PKCS #1 v1.5, which both SDKs fall back to. An empty `cipherName` is refused, not read as none.
///
/// Keys of 2048 to 4096 bits are taken: both SDKs generate 2048-bit keys (`kPNEncryptionKeyLength`,
/// `KeyStoreWrapper.RSA_KEY_LENGTH`), smaller ones are too weak, and larger ones cost the fan-out more per device
/// than a push is worth. The description never shows the key.
public struct DeviceEncryptionKey: Sendable, CustomStringConvertible {
    /// The padding of the RSA-encrypted `secret`.
    public enum Cipher: String, Sendable, Hashable {
        /// `cipherName: "RSA_OAEP_SHA256"`: OAEP, digests per platform (see the type's documentation).
        case rsaOAEPSHA256 = "RSA_OAEP_SHA256"
        /// No `cipherName`: PKCS #1 v1.5 (RFC 8017 §7.2), for SDKs before OAEP.
        case pkcs1v15 = "PKCS1"
    }

    public static let minimumBits = 2048
    public static let maximumBits = 4096

    public let cipher: Cipher
    public let platform: Platform
    public let keySizeInBits: Int
    private let backing: Backing

    /// Both backings are immutable after parsing, and BoringSSL and OpenSSL let threads share a public key for
    /// encryption, so a key parsed once serves every lane.
    private enum Backing: @unchecked Sendable {
        case swiftCrypto(_RSA.Encryption.PublicKey, _RSA.Encryption.Padding)
        case openSSLOAEPSHA256MGF1SHA1(OpenSSLRSAPublicKey)
    }

    /// Parses a device's registered key for pushes to `platform`. Errors are 400s naming the field, and never quote
    /// the key.
    public init(rsaPublicKey: String, cipherName: String?, platform: Platform) throws(ConnectError) {
        let (key, cipher, der) = try Self.parse(rsaPublicKey: rsaPublicKey, cipherName: cipherName)
        self.cipher = cipher
        self.platform = platform
        self.keySizeInBits = key.keySizeInBits
        switch (cipher, platform) {
        case (.rsaOAEPSHA256, .android):
            guard let openSSLKey = OpenSSLRSAPublicKey(subjectPublicKeyInfo: der) else {
                throw .invalidInput("rsaPublicKey: not an RSA SubjectPublicKeyInfo")
            }
            backing = .openSSLOAEPSHA256MGF1SHA1(openSSLKey)
        case (.rsaOAEPSHA256, .ios): backing = .swiftCrypto(key, .PKCS1_OAEP_SHA256)
        case (.pkcs1v15, _): backing = .swiftCrypto(key, ._WEAK_AND_INSECURE_PKCS_V1_5)
        }
    }

    /// Checks a registration's key fields without keeping the key: what device registration answers 400 with.
    public static func validate(rsaPublicKey: String, cipherName: String?) throws(ConnectError) {
        _ = try parse(rsaPublicKey: rsaPublicKey, cipherName: cipherName)
    }

    /// A registration's key fields checked (400s naming the field, as `validate`) and in the form the registry keeps:
    /// the key's base64 without the line breaks iOS sends, and `cipherName` only when it is `RSA_OAEP_SHA256`. Nil
    /// without a key: a `cipherName` alone is checked and dropped, since the iOS SDK sends `RSA_OAEP_SHA256` whether
    /// or not it could make a key.
    public static func registration(rsaPublicKey: String?, cipherName: String?) throws(ConnectError)
        -> DeviceKeyMaterial?
    {
        guard let rsaPublicKey, !rsaPublicKey.isEmpty else {
            _ = try cipher(named: cipherName)
            return nil
        }
        let (_, cipher, _) = try parse(rsaPublicKey: rsaPublicKey, cipherName: cipherName)
        let compact = String(rsaPublicKey.unicodeScalars.filter { !$0.properties.isWhitespace }.map(Character.init))
        return DeviceKeyMaterial(rsaPublicKey: compact, cipherName: cipher == .rsaOAEPSHA256 ? cipher.rawValue : nil)
    }

    public var description: String { "DeviceEncryptionKey(RSA-\(keySizeInBits), \(cipher.rawValue), \(platform))" }

    /// The RSA ciphertext of `plaintext` (the 32 bytes of AES key and IV), as long as the modulus.
    func encrypt(_ plaintext: [UInt8]) throws(SalesforcePushError) -> [UInt8] {
        switch backing {
        case .swiftCrypto(let key, let padding):
            do {
                return Array(try key.encrypt(plaintext, padding: padding))
            } catch {
                throw SalesforcePushError(message: "RSA encryption of the push secret failed")
            }
        case .openSSLOAEPSHA256MGF1SHA1(let key):
            guard let out = key.encryptOAEPSHA256MGF1SHA1(plaintext) else {
                throw SalesforcePushError(message: "RSA encryption of the push secret failed")
            }
            return out
        }
    }

    /// The RSA ciphertext's length: the modulus in bytes.
    var secretBytes: Int { (keySizeInBits + 7) / 8 }

    private static func parse(rsaPublicKey: String, cipherName: String?) throws(ConnectError) -> (
        _RSA.Encryption.PublicKey, Cipher, [UInt8]
    ) {
        let cipher = try cipher(named: cipherName)
        guard let der = decodeBase64(rsaPublicKey), !der.isEmpty else {
            throw .invalidInput("rsaPublicKey: not base64 (of an X.509 SubjectPublicKeyInfo)")
        }
        guard isSubjectPublicKeyInfo(der) else {
            throw .invalidInput("rsaPublicKey: not an X.509 SubjectPublicKeyInfo (a bare PKCS #1 key is not taken)")
        }
        let key: _RSA.Encryption.PublicKey
        do {
            // `unsafeDERRepresentation` parses keys from 1024 bits, so a short key gets its own message below.
            key = try _RSA.Encryption.PublicKey(unsafeDERRepresentation: der)
        } catch {
            throw .invalidInput("rsaPublicKey: not an RSA public key (X.509 SubjectPublicKeyInfo DER)")
        }
        guard (minimumBits...maximumBits).contains(key.keySizeInBits) else {
            throw .invalidInput(
                "rsaPublicKey: an RSA key of \(key.keySizeInBits) bits; \(minimumBits) to \(maximumBits) are taken")
        }
        return (key, cipher, der)
    }

    /// The padding a registration's `cipherName` names: `RSA_OAEP_SHA256`, or PKCS #1 v1.5 only when the field is
    /// absent (or null). An empty string is refused like any other name: it is not how either SDK says "PKCS #1", and
    /// taking it as absence would silently weaken the padding of a device that meant to ask for OAEP.
    private static func cipher(named cipherName: String?) throws(ConnectError) -> Cipher {
        switch cipherName {
        case nil: return .pkcs1v15
        case Cipher.rsaOAEPSHA256.rawValue?: return .rsaOAEPSHA256
        case ""?: throw .invalidInput("cipherName: empty; RSA_OAEP_SHA256, or leave it out for PKCS #1 v1.5")
        default: throw .invalidInput("cipherName: must be RSA_OAEP_SHA256 or absent")
        }
    }

    /// A DER SEQUENCE whose first element is a SEQUENCE (the AlgorithmIdentifier, RFC 5280 §4.1), not an INTEGER
    /// (the modulus of a bare PKCS #1 `RSAPublicKey`, which swift-crypto would also take but OpenSSL's `d2i_PUBKEY`
    /// and the SDKs' encoders never produce).
    static func isSubjectPublicKeyInfo(_ der: [UInt8]) -> Bool {
        guard der.count > 4, der[0] == 0x30 else { return false }
        var i = 2
        if der[1] & 0x80 != 0 { i += Int(der[1] & 0x7F) }
        return i < der.count && der[i] == 0x30
    }

    /// Standard base64 (RFC 4648 §4), with or without padding; line breaks and spaces are skipped, since iOS sends
    /// the key in 64-character lines. Nil for any other character.
    static func decodeBase64(_ text: String) -> [UInt8]? {
        var cleaned: [UInt8] = []
        cleaned.reserveCapacity(text.utf8.count + 3)
        for b in text.utf8 {
            switch b {
            case UInt8(ascii: " "), UInt8(ascii: "\n"), UInt8(ascii: "\r"), UInt8(ascii: "\t"): continue
            default: cleaned.append(b)
            }
        }
        if cleaned.count % 4 == 1 { return nil }
        while cleaned.count % 4 != 0 { cleaned.append(UInt8(ascii: "=")) }
        guard let data = Data(base64Encoded: Data(cleaned)) else { return nil }
        return Array(data)
    }
}
