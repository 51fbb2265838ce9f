/// Device keys for registration tests: public keys only, in the forms the Mobile SDKs send them.
public enum TestDeviceKeys {
    /// A 2048-bit RSA public key, base64 of its X.509 SubjectPublicKeyInfo DER in 64-character lines, as the iOS
    /// SDK sends it (`NSDataBase64Encoding64CharacterLineLength`).
    public static let rsa2048Lines = """
        MIIBIjANBgkqhkiG9w0BAQEFAAOCAQ8AMIIBCgKCAQEAorSITsE2Ot4GFmdzVpM9
        MnBQfLxjzBy33b/YFeD3w0f4D5J0rKOLBQaxPnzSJLUMOTrsc5xFvAZR32FvVgTa
        UE/gsJOx36xjfYaaVlbeHJOFQJ+oP9NF1xciIJMbbaXhCgV19qzWJgi9Ptca/IwS
        +kqauOqQZUazvpF0CLvYG0sU5no/BHDR7LUXMali4rK+ZgMCqYFfPrrx+P3o4zFB
        /tAcmvhUoJ0vJMjt7FEE3carqusmFRynWJGSmLnz1DhBhSPToudpEBa/NjRa2b2g
        Keq88hxWsGexsItcI1QrczgMhwLWURpEHYTDDY6Kaca6svOz58BRHpOD8Yx9RUfP
        TwIDAQAB
        """

    /// The same key on one line, as the registry keeps it.
    public static let rsa2048: String = rsa2048Lines.split(separator: "\n").joined()
}
