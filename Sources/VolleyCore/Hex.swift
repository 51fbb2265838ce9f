extension Sequence<UInt8> {
    /// Lower-case hex, two digits per byte. Built byte by byte: `String(format:)` per byte costs more than the
    /// SHA-256 it prints, on every authenticated request. A digest prints fastest from its bytes
    /// (`digest.withUnsafeBytes { $0.lowercaseHex }`): its own iterator copies them into an array first.
    public var lowercaseHex: String {
        var out: [UInt8] = []
        out.reserveCapacity(underestimatedCount * 2)
        for byte in self {
            out.append(hexDigit(byte >> 4))
            out.append(hexDigit(byte & 0x0F))
        }
        return String(decoding: out, as: UTF8.self)
    }
}

@inline(__always)
private func hexDigit(_ nibble: UInt8) -> UInt8 {
    nibble < 10 ? UInt8(ascii: "0") + nibble : UInt8(ascii: "a") - 10 + nibble
}
