private import COpenSSL

// OpenSSL 3, for the one RSA padding swift-crypto does not offer: OAEP with SHA-256 as the label digest and SHA-1
// as the MGF1 digest, which is what the Salesforce Mobile SDK for Android decrypts with (see
// `DeviceEncryptionKey`). Nothing here is public.

/// Owns an `EVP_PKEY*` holding an RSA public key, parsed once from its SubjectPublicKeyInfo DER and freed in
/// deinit. The key is never changed after `init`; OpenSSL 3 lets threads share an `EVP_PKEY` as long as each
/// operation has its own `EVP_PKEY_CTX`, which `encryptOAEPSHA256MGF1SHA1` creates and frees per call, so the class
/// is `Sendable`.
final class OpenSSLRSAPublicKey: @unchecked Sendable {
    private let pointer: OpaquePointer

    /// The key in `der` (X.509 SubjectPublicKeyInfo), or nil when it is not one or not RSA.
    init?(subjectPublicKeyInfo der: [UInt8]) {
        let parsed: OpaquePointer? = der.withUnsafeBufferPointer { buffer in
            guard let base = buffer.baseAddress else { return nil }
            var cursor: UnsafePointer<UInt8>? = base
            return d2i_PUBKEY(nil, &cursor, buffer.count)
        }
        guard let parsed else {
            ERR_clear_error()
            return nil
        }
        guard EVP_PKEY_get_base_id(parsed) == EVP_PKEY_RSA else {
            EVP_PKEY_free(parsed)
            return nil
        }
        pointer = parsed
    }

    deinit { EVP_PKEY_free(pointer) }

    /// RSAES-OAEP (RFC 8017 §7.1) with SHA-256 hashing the (empty) label and SHA-1 in MGF1: Java's
    /// `RSA/ECB/OAEPWithSHA-256AndMGF1Padding` initialised without `OAEPParameterSpec` on the Android KeyStore.
    /// Nil when OpenSSL refuses (a message too long for the modulus); its error queue is cleared, so the thread's
    /// TLS work never sees this call's errors.
    func encryptOAEPSHA256MGF1SHA1(_ plaintext: [UInt8]) -> [UInt8]? {
        guard let ctx = EVP_PKEY_CTX_new(pointer, nil) else {
            ERR_clear_error()
            return nil
        }
        defer { EVP_PKEY_CTX_free(ctx) }
        guard EVP_PKEY_encrypt_init(ctx) == 1,
            EVP_PKEY_CTX_set_rsa_padding(ctx, RSA_PKCS1_OAEP_PADDING) == 1,
            EVP_PKEY_CTX_set_rsa_oaep_md(ctx, EVP_sha256()) == 1,
            EVP_PKEY_CTX_set_rsa_mgf1_md(ctx, EVP_sha1()) == 1
        else {
            ERR_clear_error()
            return nil
        }
        var length = 0
        guard EVP_PKEY_encrypt(ctx, nil, &length, plaintext, plaintext.count) == 1, length > 0 else {
            ERR_clear_error()
            return nil
        }
        var out = [UInt8](repeating: 0, count: length)
        let status = out.withUnsafeMutableBufferPointer { buffer in
            EVP_PKEY_encrypt(ctx, buffer.baseAddress, &length, plaintext, plaintext.count)
        }
        guard status == 1 else {
            ERR_clear_error()
            return nil
        }
        out.removeSubrange(length...)
        return out
    }
}
