extension Sequence<UInt8> {
    /// Lower-case hex, two digits per byte. Built byte by byte: `String(format:)` per byte costs more than the
    /// SHA-256 it prints, on every authenticated request.
    public var lowercaseHex: String {
        let digits = Array("0123456789abcdef".utf8)
        var out: [UInt8] = []
        out.reserveCapacity(underestimatedCount * 2)
        for byte in self {
            out.append(digits[Int(byte >> 4)])
            out.append(digits[Int(byte & 0x0F)])
        }
        return String(decoding: out, as: UTF8.self)
    }
}
