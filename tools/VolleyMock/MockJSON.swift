/// JSON helpers for the mock: an allocation-free syntax validator (APNs payloads, per request), a small tree parser
/// (FCM bodies, runtime configuration) and string quoting for hand-written answers. No Foundation on the hot path.

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
            // Fast path, eight bytes at a time: skip words with no control byte, no byte >= 0x80, no '"', no '\\'
            // (the classic "has zero byte" test on x, x ^ '"'*8 and x ^ '\\'*8).
            if let base = b.baseAddress {
                let ones: UInt64 = 0x0101_0101_0101_0101
                let highs: UInt64 = 0x8080_8080_8080_8080
                while i + 8 <= b.count {
                    let x = UnsafeRawPointer(base + i).loadUnaligned(as: UInt64.self)
                    let q = x ^ (ones &* 0x22)
                    let bs = x ^ (ones &* 0x5C)
                    let special = (x &- ones &* 0x20) | x | (q &- ones) & ~q | (bs &- ones) & ~bs
                    if special & highs != 0 { break }
                    i += 8
                }
                guard i < b.count else { return false } // no closing quote
            }
            var c = b[i]
            while c >= 0x20, c < 0x80, c != UInt8(ascii: "\""), c != UInt8(ascii: "\\") {
                i += 1
                guard i < b.count else { return false }
                c = b[i]
            }
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
    @inline(__always) func isDigit(_ c: UInt8) -> Bool { c >= 0x30 && c <= 0x39 }

    mutating func number() -> Bool {
        if i < b.count, b[i] == UInt8(ascii: "-") { i += 1 }
        guard i < b.count, isDigit(b[i]) else { return false }
        if b[i] == UInt8(ascii: "0") { i += 1 } else { while i < b.count, isDigit(b[i]) { i += 1 } }
        if i < b.count, b[i] == UInt8(ascii: ".") {
            i += 1
            guard i < b.count, isDigit(b[i]) else { return false }
            while i < b.count, isDigit(b[i]) { i += 1 }
        }
        if i < b.count, b[i] == UInt8(ascii: "e") || b[i] == UInt8(ascii: "E") {
            i += 1
            if i < b.count, b[i] == UInt8(ascii: "+") || b[i] == UInt8(ascii: "-") { i += 1 }
            guard i < b.count, isDigit(b[i]) else { return false }
            while i < b.count, isDigit(b[i]) { i += 1 }
        }
        return true
    }
}

/// A parsed JSON value (FCM bodies, configuration). Numbers keep their text so `"ttl": 3.5` style checks stay exact.
public indirect enum MockJSONValue: Sendable, Equatable {
    case object([(String, MockJSONValue)])
    case array([MockJSONValue])
    case string(String)
    case number(String)
    case bool(Bool)
    case null

    public static func == (a: MockJSONValue, b: MockJSONValue) -> Bool {
        switch (a, b) {
        case (.object(let x), .object(let y)):
            return x.count == y.count && zip(x, y).allSatisfy { $0.0 == $1.0 && $0.1 == $1.1 }
        case (.array(let x), .array(let y)): return x == y
        case (.string(let x), .string(let y)): return x == y
        case (.number(let x), .number(let y)): return x == y
        case (.bool(let x), .bool(let y)): return x == y
        case (.null, .null): return true
        default: return false
        }
    }

    public subscript(key: String) -> MockJSONValue? {
        if case .object(let members) = self { return members.last(where: { $0.0 == key })?.1 }
        return nil
    }
    public var stringValue: String? {
        if case .string(let s) = self { return s }
        return nil
    }
    public var doubleValue: Double? {
        switch self {
        case .number(let s): return Double(s)
        case .string(let s): return Double(s)
        default: return nil
        }
    }
    public var intValue: Int? {
        if case .number(let s) = self { return Int(s) ?? Double(s).flatMap { $0.isFinite ? Int($0) : nil } }
        return nil
    }
    public var boolValue: Bool? {
        if case .bool(let b) = self { return b }
        return nil
    }
    public var arrayValue: [MockJSONValue]? {
        if case .array(let a) = self { return a }
        return nil
    }
    public var objectValue: [(String, MockJSONValue)]? {
        if case .object(let o) = self { return o }
        return nil
    }

    /// Parses one JSON document; nil when the syntax is invalid.
    public static func parse(_ bytes: [UInt8]) -> MockJSONValue? {
        guard MockJSONValidator.validate(bytes) != nil else { return nil }
        return bytes.withUnsafeBufferPointer { buf in
            var p = MockJSONParser(b: buf)
            p.skipWS()
            return p.value()
        }
    }
    public static func parse(_ text: String) -> MockJSONValue? { parse(Array(text.utf8)) }

    /// Compact JSON text.
    public var serialized: String {
        switch self {
        case .object(let m):
            return "{" + m.map { MockJSONWriter.quote($0.0) + ":" + $0.1.serialized }.joined(separator: ",") + "}"
        case .array(let a): return "[" + a.map(\.serialized).joined(separator: ",") + "]"
        case .string(let s): return MockJSONWriter.quote(s)
        case .number(let n): return n
        case .bool(let b): return b ? "true" : "false"
        case .null: return "null"
        }
    }
}

/// Parser over bytes already checked by `MockJSONValidator`, so it can be lenient about errors.
private struct MockJSONParser {
    let b: UnsafeBufferPointer<UInt8>
    var i = 0

    mutating func skipWS() {
        while i < b.count, b[i] == 0x20 || b[i] == 0x0A || b[i] == 0x0D || b[i] == 0x09 { i += 1 }
    }

    mutating func value() -> MockJSONValue? {
        guard i < b.count else { return nil }
        switch b[i] {
        case UInt8(ascii: "{"):
            i += 1
            skipWS()
            var members: [(String, MockJSONValue)] = []
            if b[i] == UInt8(ascii: "}") {
                i += 1
                return .object(members)
            }
            while true {
                guard let key = string() else { return nil }
                skipWS()
                i += 1
                skipWS() // ':'
                guard let v = value() else { return nil }
                members.append((key, v))
                skipWS()
                if b[i] == UInt8(ascii: ",") {
                    i += 1
                    skipWS()
                    continue
                }
                i += 1
                return .object(members)
            }
        case UInt8(ascii: "["):
            i += 1
            skipWS()
            var items: [MockJSONValue] = []
            if b[i] == UInt8(ascii: "]") {
                i += 1
                return .array(items)
            }
            while true {
                guard let v = value() else { return nil }
                items.append(v)
                skipWS()
                if b[i] == UInt8(ascii: ",") {
                    i += 1
                    skipWS()
                    continue
                }
                i += 1
                return .array(items)
            }
        case UInt8(ascii: "\""):
            return string().map { .string($0) }
        case UInt8(ascii: "t"):
            i += 4
            return .bool(true)
        case UInt8(ascii: "f"):
            i += 5
            return .bool(false)
        case UInt8(ascii: "n"):
            i += 4
            return .null
        default:
            let start = i
            while i < b.count,
                b[i] == UInt8(ascii: "-") || b[i] == UInt8(ascii: "+") || b[i] == UInt8(ascii: ".")
                    || b[i] == UInt8(ascii: "e") || b[i] == UInt8(ascii: "E") || (b[i] >= 0x30 && b[i] <= 0x39)
            { i += 1 }
            return .number(String(decoding: UnsafeBufferPointer(rebasing: b[start..<i]), as: UTF8.self))
        }
    }

    mutating func string() -> String? {
        guard i < b.count, b[i] == UInt8(ascii: "\"") else { return nil }
        i += 1
        let start = i
        var simple = true
        while b[i] != UInt8(ascii: "\"") {
            if b[i] == UInt8(ascii: "\\") {
                simple = false
                i += 2
            } else {
                i += 1
            }
        }
        let raw = UnsafeBufferPointer(rebasing: b[start..<i])
        i += 1
        if simple { return String(decoding: raw, as: UTF8.self) }
        var out: [UInt8] = []
        out.reserveCapacity(raw.count)
        var k = 0
        var pendingHigh: UInt32? = nil
        while k < raw.count {
            let c = raw[k]
            if c != UInt8(ascii: "\\") {
                out.append(c)
                k += 1
                continue
            }
            let e = raw[k + 1]
            k += 2
            switch e {
            case UInt8(ascii: "n"): out.append(0x0A)
            case UInt8(ascii: "t"): out.append(0x09)
            case UInt8(ascii: "r"): out.append(0x0D)
            case UInt8(ascii: "b"): out.append(0x08)
            case UInt8(ascii: "f"): out.append(0x0C)
            case UInt8(ascii: "u"):
                var code: UInt32 = 0
                for h in raw[k..<(k + 4)] {
                    let d: UInt32 =
                        h <= 0x39 ? UInt32(h - 0x30) : (h | 0x20) >= 0x61 ? UInt32((h | 0x20) - 0x61 + 10) : 0
                    code = code << 4 | d
                }
                k += 4
                if code >= 0xD800 && code < 0xDC00 {
                    pendingHigh = code
                    continue
                }
                if code >= 0xDC00 && code < 0xE000, let high = pendingHigh {
                    code = 0x10000 + ((high - 0xD800) << 10) + (code - 0xDC00)
                }
                pendingHigh = nil
                if let scalar = Unicode.Scalar(code) { out.append(contentsOf: Array(String(Character(scalar)).utf8)) }
            default: out.append(e)
            }
        }
        return String(decoding: out, as: UTF8.self)
    }
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
