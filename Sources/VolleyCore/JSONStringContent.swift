/// Appends a string's JSON-escaped content (no quotes). Tokens and ids are plain ASCII: the fast path copies the
/// whole string at once when no byte needs escaping.
@inlinable
public func appendJSONStringContent(_ s: String, to out: inout [UInt8]) {
    var s = s
    s.withUTF8 { bytes in
        if isPlainJSONStringContent(bytes) {
            out.append(contentsOf: bytes)
            return
        }
        for b in bytes { forEachJSONEscapedByte(of: b) { out.append($0) } }
    }
}

/// Writes a string's JSON-escaped content (no quotes) at the start of `out` and returns how many bytes it wrote.
/// `out` must have room for 6 bytes per byte of `s` (`\u00XX`), the most an escape takes.
@inlinable
public func writeJSONStringContent(_ s: String, into out: UnsafeMutableBufferPointer<UInt8>) -> Int {
    var s = s
    return s.withUTF8 { bytes in
        if isPlainJSONStringContent(bytes) { return out.initialize(fromContentsOf: bytes) }
        var at = 0
        for b in bytes {
            forEachJSONEscapedByte(of: b) {
                out[at] = $0
                at += 1
            }
        }
        return at
    }
}

/// True when no byte of `bytes` needs escaping inside a JSON string.
@inlinable
public func isPlainJSONStringContent(_ bytes: UnsafeBufferPointer<UInt8>) -> Bool {
    for b in bytes where b == UInt8(ascii: "\"") || b == UInt8(ascii: "\\") || b < 0x20 { return false }
    return true
}

/// Hands `emit` the bytes that stand for `b` inside a JSON string: `b` itself, or its escape. The short forms are
/// the ones Foundation's JSONEncoder writes.
@inlinable
public func forEachJSONEscapedByte(of b: UInt8, _ emit: (UInt8) -> Void) {
    switch b {
    case UInt8(ascii: "\""), UInt8(ascii: "\\"):
        emit(0x5C)
        emit(b)
    case 0x08, 0x09, 0x0A, 0x0C, 0x0D:
        emit(0x5C)
        // \b \t \n (0x0B has none) \f \r
        let letters: StaticString = "btn-fr"
        letters.withUTF8Buffer { emit($0[Int(b) - 0x08]) }
    case 0..<0x20:
        emit(0x5C)
        emit(UInt8(ascii: "u"))
        emit(0x30)
        emit(0x30)
        emit(lowercaseHexDigit(b >> 4))
        emit(lowercaseHexDigit(b & 0xF))
    default: emit(b)
    }
}
