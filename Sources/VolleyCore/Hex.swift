extension Sequence<UInt8> {
    /// Lower-case hex, two digits per byte. Built byte by byte: `String(format:)` per byte costs more than the
    /// SHA-256 it prints, on every authenticated request. A digest prints fastest from its bytes
    /// (`digest.withUnsafeBytes { $0.lowercaseHex }`): its own iterator copies them into an array first.
    public var lowercaseHex: String {
        var out: [UInt8] = []
        out.reserveCapacity(underestimatedCount * 2)
        for byte in self {
            out.append(lowercaseHexDigit(byte >> 4))
            out.append(lowercaseHexDigit(byte & 0x0F))
        }
        return String(decoding: out, as: UTF8.self)
    }
}

/// Writes 16 bytes as a UUID's canonical text (8-4-4-4-12 lower-case hex, 36 bytes) at the start of `out`, with
/// `version` in the high nibble of byte 6 and the RFC 9562 variant (binary 10) in the top bits of byte 8.
@inlinable
public func writeUUIDText(_ bytes: UnsafeRawBufferPointer, version: UInt8, into out: UnsafeMutableBufferPointer<UInt8>)
{
    var at = 0
    for i in 0..<16 {
        var byte = bytes[i]
        if i == 6 { byte = byte & 0x0F | version << 4 }
        if i == 8 { byte = byte & 0x3F | 0x80 }
        if i == 4 || i == 6 || i == 8 || i == 10 {
            out[at] = UInt8(ascii: "-")
            at += 1
        }
        out[at] = lowercaseHexDigit(byte >> 4)
        out[at + 1] = lowercaseHexDigit(byte & 0x0F)
        at += 2
    }
}

/// The lower-case hex digit of a value 0–15.
@inlinable
public func lowercaseHexDigit(_ nibble: UInt8) -> UInt8 {
    nibble < 10 ? UInt8(ascii: "0") + nibble : UInt8(ascii: "a") - 10 + nibble
}

/// The value 0–15 of a hex digit in either case; nil for any other byte.
@inlinable
public func hexDigitValue(_ c: UInt8) -> UInt8? {
    switch c {
    case UInt8(ascii: "0")...UInt8(ascii: "9"): c - UInt8(ascii: "0")
    case UInt8(ascii: "a")...UInt8(ascii: "f"): c - UInt8(ascii: "a") + 10
    case UInt8(ascii: "A")...UInt8(ascii: "F"): c - UInt8(ascii: "A") + 10
    default: nil
    }
}

extension [UInt8] {
    /// The bytes that `hex` spells, two digits (either case) per byte; nil when it is not such a string.
    public init?(hex: String) {
        let digits = Array(hex.utf8)
        guard digits.count % 2 == 0 else { return nil }
        var out: [UInt8] = []
        out.reserveCapacity(digits.count / 2)
        for i in stride(from: 0, to: digits.count, by: 2) {
            guard let hi = hexDigitValue(digits[i]), let lo = hexDigitValue(digits[i + 1]) else { return nil }
            out.append(hi << 4 | lo)
        }
        self = out
    }
}
