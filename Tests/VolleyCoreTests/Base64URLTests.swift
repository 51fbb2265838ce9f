import Foundation
import Testing
import VolleyCore
import VolleyTestTags

@Suite(.tags(.unit)) struct Base64URLTests {
    /// RFC 4648 §10 (the same strings in base64url: the vectors use no `+` or `/`), unpadded as encoded.
    static let rfc4648: [(String, String)] = [
        ("", ""), ("f", "Zg"), ("fo", "Zm8"), ("foo", "Zm9v"), ("foob", "Zm9vYg"), ("fooba", "Zm9vYmE"),
        ("foobar", "Zm9vYmFy"),
    ]

    @Test(arguments: rfc4648) func rfc4648Vectors(_ plain: String, _ encoded: String) {
        #expect(Base64URL.encode(Array(plain.utf8)) == encoded)
        #expect(Base64URL.decode(encoded) == Array(plain.utf8))
        // The padded form of §10 decodes to the same bytes.
        let padded = encoded + String(repeating: "=", count: (4 - encoded.count % 4) % 4)
        #expect(Base64URL.decode(padded) == Array(plain.utf8))
    }

    @Test func urlSafeAlphabetWhereBase64HasPlusAndSlash() {
        // 0xFB 0xFF 0xBF is "+/+/" in base64.
        #expect(Base64URL.encode([0xFB, 0xFF, 0xBF]) == "-_-_")
        #expect(Base64URL.decode("-_-_") == [0xFB, 0xFF, 0xBF])
        #expect(Base64URL.encode([0xFF]) == "_w")
        #expect(Base64URL.decode("_w") == [0xFF])
    }

    @Test func roundTripsEveryLengthWithoutPadding() {
        var generator = SystemRandomNumberGenerator()
        for length in 0...67 {
            let bytes = (0..<length).map { _ in UInt8.random(in: 0...255, using: &generator) }
            let text = Base64URL.encode(bytes)
            #expect(!text.contains("=") && !text.contains("+") && !text.contains("/"))
            #expect(text.utf8.count == (length * 4 + 2) / 3)
            #expect(Base64URL.decode(text) == bytes)
            #expect(Base64URL.decode(bytes: Array(text.utf8)[...]) == bytes)
        }
        let every = (0...255).map { UInt8($0) }
        #expect(Base64URL.decode(Base64URL.encode(every)) == every)
        // The same as Foundation's base64 with the alphabet swapped and the padding dropped.
        let foundation = Data(every).base64EncodedString().replacingOccurrences(of: "+", with: "-")
            .replacingOccurrences(of: "/", with: "_").replacingOccurrences(of: "=", with: "")
        #expect(Base64URL.encode(every) == foundation)
    }

    @Test(arguments: [
        "Zm9v+", "Zm9v/w", "Zm9v YmFy", "Zm9v\n", "Zm9vY", // plain base64's alphabet, whitespace, a 4n+1 length
        "Zg=", "Zg===", "Zm8==", "Zm9v====", "Z=g=", "=", "Zm9vYg=a", // padding: wrong count or not at the end
        "Zh", "Zm9", "_x", // pad bits not zero (RFC 4648 §3.5): "Zh" would also be "f"
    ])
    func rejectsWhatIsNotCanonicalBase64URL(_ text: String) {
        #expect(Base64URL.decode(text) == nil)
    }
}

/// The standard alphabet (RFC 4648 §4) through the same encoder and decoder: §10's test vectors, and every byte
/// value as Foundation writes it.
@Suite(.tags(.unit)) struct Base64StandardTests {
    @Test func rfc4648TestVectors() {
        let vectors = [
            ("", ""), ("f", "Zg=="), ("fo", "Zm8="), ("foo", "Zm9v"), ("foob", "Zm9vYg=="), ("fooba", "Zm9vYmE="),
            ("foobar", "Zm9vYmFy"),
        ]
        for (plain, encoded) in vectors {
            #expect(Base64.encode(Array(plain.utf8), alphabet: .standard, padded: true) == encoded)
            #expect(Base64.decode(encoded, alphabet: .standard) == Array(plain.utf8))
            #expect(Base64.encodedLength(plain.utf8.count, padded: true) == encoded.utf8.count)
        }
        let every = (0...255).map { UInt8($0) }
        #expect(Base64.encode(every, alphabet: .standard, padded: true) == Data(every).base64EncodedString())
        #expect(Base64.decode(Data(every).base64EncodedString(), alphabet: .standard) == every)
    }

    @Test func eachAlphabetRefusesTheOthersCharacters() {
        #expect(Base64.decode("-_-_", alphabet: .standard) == nil)
        #expect(Base64.decode("+/+/", alphabet: .url) == nil)
        #expect(Base64.decode("+/+/", alphabet: .standard) == [0xFB, 0xFF, 0xBF])
    }
}
