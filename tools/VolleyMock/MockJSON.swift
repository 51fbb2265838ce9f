import VolleyCore

/// JSON helpers for the mock: an allocation-free syntax validator (APNs payloads, per request, where building a tree
/// would cost the mock CPU the benchmarks measure against), `JSONValue` parsing (FCM bodies, runtime configuration)
/// and string quoting for hand-written answers.

enum MockJSONKind: Sendable, Equatable { case object, array, string, number, literal }

/// Validates RFC 8259 syntax over raw bytes without allocating. Depth-limited (64) like real services.
struct MockJSONValidator {
    /// Returns the kind of the top-level value, or nil when the bytes are not one complete JSON value.
    static func validate(_ bytes: UnsafeBufferPointer<UInt8>) -> MockJSONKind? {
        var v = MockJSONValidator(bytes: bytes)
        v.skipWS()
        guard let kind = v.value(depth: 0) else { return nil }
        v.skipWS()
        return v.i == bytes.count ? kind : nil
    }

    static func validate(_ bytes: [UInt8]) -> MockJSONKind? {
        bytes.withUnsafeBufferPointer { validate($0) }
    }

    let b: UnsafeBufferPointer<UInt8>
    var i = 0
    init(bytes: UnsafeBufferPointer<UInt8>) { self.b = bytes }

    @inline(__always) mutating func skipWS() {
        while i < b.count {
            let c = b[i]
            if c == 0x20 || c == 0x0A || c == 0x0D || c == 0x09 { i += 1 } else { break }
        }
    }

    mutating func value(depth: Int) -> MockJSONKind? {
        guard i < b.count, depth < 64 else { return nil }
        switch b[i] {
        case UInt8(ascii: "{"):
            i += 1
            skipWS()
            if i < b.count, b[i] == UInt8(ascii: "}") {
                i += 1
                return .object
            }
            while true {
                guard i < b.count, b[i] == UInt8(ascii: "\""), string() else { return nil }
                skipWS()
                guard i < b.count, b[i] == UInt8(ascii: ":") else { return nil }
                i += 1
                skipWS()
                guard value(depth: depth + 1) != nil else { return nil }
                skipWS()
                guard i < b.count else { return nil }
                if b[i] == UInt8(ascii: ",") {
                    i += 1
                    skipWS()
                    continue
                }
                if b[i] == UInt8(ascii: "}") {
                    i += 1
                    return .object
                }
                return nil
            }
        case UInt8(ascii: "["):
            i += 1
            skipWS()
            if i < b.count, b[i] == UInt8(ascii: "]") {
                i += 1
                return .array
            }
            while true {
                guard value(depth: depth + 1) != nil else { return nil }
                skipWS()
                guard i < b.count else { return nil }
                if b[i] == UInt8(ascii: ",") {
                    i += 1
                    skipWS()
                    continue
                }
                if b[i] == UInt8(ascii: "]") {
                    i += 1
                    return .array
                }
                return nil
            }
        case UInt8(ascii: "\""):
            return string() ? .string : nil
        case UInt8(ascii: "t"): return literal("true") ? .literal : nil
        case UInt8(ascii: "f"): return literal("false") ? .literal : nil
        case UInt8(ascii: "n"): return literal("null") ? .literal : nil
        default:
            return number() ? .number : nil
        }
    }

    mutating func literal(_ word: StaticString) -> Bool {
        let n = word.utf8CodeUnitCount
        guard i + n <= b.count else { return false }
        let p = word.utf8Start
        for k in 0..<n where b[i + k] != p[k] { return false }
        i += n
        return true
    }

    /// At an opening quote; consumes through the closing quote. Checks escapes and rejects control characters.
    /// UTF-8 well-formedness of multi-byte sequences is checked loosely (lead/continuation bytes).
    mutating func string() -> Bool {
        i += 1
        while i < b.count {
            // Plain text (0x20–0x7F but `"` and `\\`), eight bytes at a time where it can.
            MockBytes.skipPlainText(b, from: &i)
            guard i < b.count else { return false } // no closing quote
            let c = b[i]
            if c == UInt8(ascii: "\"") {
                i += 1
                return true
            }
            if c < 0x20 { return false }
            if c == UInt8(ascii: "\\") {
                i += 1
                guard i < b.count else { return false }
                switch b[i] {
                case UInt8(ascii: "\""), UInt8(ascii: "\\"), UInt8(ascii: "/"), UInt8(ascii: "b"), UInt8(ascii: "f"),
                    UInt8(ascii: "n"), UInt8(ascii: "r"), UInt8(ascii: "t"):
                    i += 1
                case UInt8(ascii: "u"):
                    guard i + 4 < b.count else { return false }
                    for k in 1...4 where !isHex(b[i + k]) { return false }
                    i += 5
                default: return false
                }
                continue
            }
            if c < 0x80 {
                i += 1
                continue
            }
            // Multi-byte UTF-8: lead byte decides the length; continuation bytes are 10xxxxxx.
            let len: Int
            if c & 0xE0 == 0xC0, c >= 0xC2 {
                len = 2
            } else if c & 0xF0 == 0xE0 {
                len = 3
            } else if c & 0xF8 == 0xF0, c <= 0xF4 {
                len = 4
            } else {
                return false
            }
            guard i + len <= b.count else { return false }
            for k in 1..<len where b[i + k] & 0xC0 != 0x80 { return false }
            i += len
        }
        return false
    }

    @inline(__always) func isHex(_ c: UInt8) -> Bool {
        (c >= 0x30 && c <= 0x39) || (c >= 0x41 && c <= 0x46) || (c >= 0x61 && c <= 0x66)
    }

    mutating func number() -> Bool { MockBytes.skipNumber(b, from: &i) }
}

extension JSONValue {
    /// Parses one JSON document for the mock (FCM bodies, JWT parts, configuration): Volley's own strict reader,
    /// so the mock and the product agree on what JSON is. Nil when the syntax is invalid.
    static func parse(_ bytes: [UInt8]) -> JSONValue? { try? JSONValue(parsing: bytes) }
    static func parse(_ text: String) -> JSONValue? { try? JSONValue(parsing: text) }
}

enum MockJSONWriter {
    /// A JSON string literal for `s`.
    static func quote(_ s: String) -> String {
        var out = "\""
        for u in s.unicodeScalars {
            switch u {
            case "\"": out += "\\\""
            case "\\": out += "\\\\"
            case "\n": out += "\\n"
            case "\r": out += "\\r"
            case "\t": out += "\\t"
            default:
                if u.value < 0x20 {
                    let hex = String(u.value, radix: 16)
                    out += "\\u" + String(repeating: "0", count: 4 - hex.count) + hex
                } else {
                    out.unicodeScalars.append(u)
                }
            }
        }
        return out + "\""
    }
}
