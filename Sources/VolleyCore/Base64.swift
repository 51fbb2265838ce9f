/// Base64 (RFC 4648), Volley's one encoder and decoder, in both alphabets: the standard one (§4: `+` and `/`,
/// padded), as the Salesforce Mobile SDKs decode an encrypted push's `content` and `secret`, and the URL- and
/// filename-safe one (§5: `-` and `_`, unpadded), as JWTs (RFC 7515 §2) and Volley's API keys and user tokens
/// write it.
public enum Base64 {
    public enum Alphabet: Sendable {
        /// RFC 4648 §4: `+` and `/`.
        case standard
        /// RFC 4648 §5: `-` and `_`.
        case url

        fileprivate var table: [UInt8] { self == .standard ? Base64.standardTable : Base64.urlTable }
    }

    private static let standardTable = Array("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/".utf8)
    private static let urlTable = Array("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_".utf8)

    /// How many characters `count` bytes encode to.
    public static func encodedLength(_ count: Int, padded: Bool) -> Int {
        padded ? (count + 2) / 3 * 4 : (count * 4 + 2) / 3
    }

    /// Appends `bytes` in base64 to `out`; `padded` adds `=` to a multiple of four characters.
    public static func append(
        _ bytes: some Collection<UInt8>, alphabet: Alphabet, padded: Bool, to out: inout [UInt8]
    ) {
        let table = alphabet.table
        out.reserveCapacity(out.count + encodedLength(bytes.count, padded: padded))
        var i = bytes.startIndex
        while i != bytes.endIndex {
            let b0 = bytes[i]
            i = bytes.index(after: i)
            let b1 = i != bytes.endIndex ? bytes[i] : nil
            if b1 != nil { i = bytes.index(after: i) }
            let b2 = b1 != nil && i != bytes.endIndex ? bytes[i] : nil
            if b2 != nil { i = bytes.index(after: i) }
            let group = UInt32(b0) << 16 | UInt32(b1 ?? 0) << 8 | UInt32(b2 ?? 0)
            out.append(table[Int(group >> 18 & 0x3F)])
            out.append(table[Int(group >> 12 & 0x3F)])
            if b1 != nil {
                out.append(table[Int(group >> 6 & 0x3F)])
            } else if padded {
                out.append(UInt8(ascii: "="))
            }
            if b2 != nil {
                out.append(table[Int(group & 0x3F)])
            } else if padded {
                out.append(UInt8(ascii: "="))
            }
        }
    }

    /// `bytes` in base64.
    public static func encode(_ bytes: some Collection<UInt8>, alphabet: Alphabet, padded: Bool) -> String {
        var out: [UInt8] = []
        append(bytes, alphabet: alphabet, padded: padded, to: &out)
        return String(decoding: out, as: UTF8.self)
    }

    /// The bytes `text` encodes in `alphabet`, with or without padding; nil when it is not base64 of that alphabet.
    /// Rejected: characters outside the alphabet (the other alphabet's two included), padding anywhere but at the
    /// end or more than the length needs, a length no encoding has (one character past a multiple of four), and pad
    /// bits that are not zero (RFC 4648 §3.5), so every byte string has exactly one accepted unpadded form.
    public static func decode(bytes text: some Collection<UInt8>, alphabet: Alphabet) -> [UInt8]? {
        var end = text.count
        // Padding: up to two `=` at the end, only to make the length a multiple of four.
        var padding = 0
        for c in text.reversed() {
            guard c == UInt8(ascii: "=") else { break }
            padding += 1
        }
        if padding > 0 {
            guard padding <= 2, end % 4 == 0 else { return nil }
            end -= padding
            // Two `=` after two characters of a group, one after three.
            guard end % 4 == 4 - padding else { return nil }
        }
        if end % 4 == 1 { return nil }
        var out: [UInt8] = []
        out.reserveCapacity(end * 3 / 4)
        var acc: UInt32 = 0
        var bits = 0
        for c in text.prefix(end) {
            guard let v = value(c, alphabet) else { return nil }
            acc = acc << 6 | UInt32(v)
            bits += 6
            if bits >= 8 {
                bits -= 8
                out.append(UInt8(truncatingIfNeeded: acc >> UInt32(bits)))
                acc &= (1 << UInt32(bits)) - 1
            }
        }
        // Whatever is left is padding from the last character: it must be zero.
        guard acc == 0 else { return nil }
        return out
    }

    /// `decode(bytes:alphabet:)` on the text's UTF-8 bytes.
    public static func decode(_ text: some StringProtocol, alphabet: Alphabet) -> [UInt8]? {
        decode(bytes: Array(text.utf8), alphabet: alphabet)
    }

    private static func value(_ c: UInt8, _ alphabet: Alphabet) -> UInt8? {
        switch c {
        case UInt8(ascii: "A")...UInt8(ascii: "Z"): c - UInt8(ascii: "A")
        case UInt8(ascii: "a")...UInt8(ascii: "z"): c - UInt8(ascii: "a") + 26
        case UInt8(ascii: "0")...UInt8(ascii: "9"): c - UInt8(ascii: "0") + 52
        case UInt8(ascii: "+") where alphabet == .standard, UInt8(ascii: "-") where alphabet == .url: 62
        case UInt8(ascii: "/") where alphabet == .standard, UInt8(ascii: "_") where alphabet == .url: 63
        default: nil
        }
    }
}

/// Base64url without padding (RFC 4648 §5), the spelling of `Base64` that JWTs, API keys and user tokens use.
public enum Base64URL {
    /// `bytes` in base64url without padding.
    public static func encode(_ bytes: some Collection<UInt8>) -> String {
        Base64.encode(bytes, alphabet: .url, padded: false)
    }

    /// The bytes `text` encodes, with or without padding; nil when it is not base64url (see `Base64.decode`).
    public static func decode(_ text: some StringProtocol) -> [UInt8]? {
        Base64.decode(text, alphabet: .url)
    }

    /// `decode(_:)` on the text's UTF-8 bytes.
    public static func decode(bytes text: some Collection<UInt8>) -> [UInt8]? {
        Base64.decode(bytes: text, alphabet: .url)
    }
}
