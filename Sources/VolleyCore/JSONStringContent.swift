/// Appends a string's JSON-escaped content (no quotes). Tokens and ids are plain ASCII: the fast path copies the
/// whole string at once when no byte needs escaping.
@inlinable
public func appendJSONStringContent(_ s: String, to out: inout [UInt8]) {
    var s = s
    s.withUTF8 { bytes in
        var plain = true
        for b in bytes where b == UInt8(ascii: "\"") || b == UInt8(ascii: "\\") || b < 0x20 {
            plain = false
            break
        }
        if plain {
            out.append(contentsOf: bytes)
            return
        }
        for b in bytes {
            switch b {
            case UInt8(ascii: "\""): out.append(contentsOf: [0x5C, 0x22])
            case UInt8(ascii: "\\"): out.append(contentsOf: [0x5C, 0x5C])
            // The short forms, as Foundation's JSONEncoder writes them.
            case 0x08: out.append(contentsOf: [0x5C, UInt8(ascii: "b")])
            case 0x0C: out.append(contentsOf: [0x5C, UInt8(ascii: "f")])
            case 0x0A: out.append(contentsOf: [0x5C, UInt8(ascii: "n")])
            case 0x0D: out.append(contentsOf: [0x5C, UInt8(ascii: "r")])
            case 0x09: out.append(contentsOf: [0x5C, UInt8(ascii: "t")])
            case 0..<0x20:
                let hex = Array("0123456789abcdef".utf8)
                out.append(contentsOf: [0x5C, UInt8(ascii: "u"), 0x30, 0x30, hex[Int(b >> 4)], hex[Int(b & 0xF)]])
            default: out.append(b)
            }
        }
    }
}
