/// Where and why bytes are not JSON.
public struct JSONSyntaxError: Error, Sendable, Hashable, CustomStringConvertible {
    /// Offset of the byte at fault, from the start of the text.
    public var offset: Int
    public var message: String
    public init(offset: Int, message: String) {
        self.offset = offset
        self.message = message
    }
    public var description: String { "\(message) at byte \(offset)" }
}

extension JSONValue {
    /// Nesting deeper than this is refused rather than parsed (Foundation's JSONDecoder stops at the same depth).
    public static let maxParseDepth = 512

    /// Parses UTF-8 JSON text (RFC 8259): one value, white space around it, a UTF-8 byte-order mark ignored.
    /// Strict: no comments, trailing commas, single quotes, NaN or invalid UTF-8. A repeated key keeps its first
    /// value, as Foundation's JSONDecoder does, so every reader of the same text sees the same job.
    /// Jobs and request bodies are read this way, once, instead of through `Codable`'s keyed containers.
    public init(parsing bytes: UnsafeRawBufferPointer) throws(JSONSyntaxError) {
        var reader = JSONReader(bytes: bytes)
        self = try reader.document()
    }

    /// Parses `bytes` as `init(parsing:)` does.
    public init(parsing bytes: some Sequence<UInt8>) throws(JSONSyntaxError) {
        let parsed: Result<JSONValue, JSONSyntaxError>? = bytes.withContiguousStorageIfAvailable { buffer in
            Result { () throws(JSONSyntaxError) in try JSONValue(parsing: UnsafeRawBufferPointer(buffer)) }
        }
        if let parsed { self = try parsed.get() } else { self = try JSONValue(parsing: Array(bytes)) }
    }

    /// Parses `text`'s UTF-8 as `init(parsing:)` does.
    public init(parsing text: String) throws(JSONSyntaxError) {
        var text = text
        let parsed = text.withUTF8 { buffer in
            Result { () throws(JSONSyntaxError) in try JSONValue(parsing: UnsafeRawBufferPointer(buffer)) }
        }
        self = try parsed.get()
    }
}

/// A recursive-descent reader over one buffer. Strings without escapes are made straight from their bytes.
private struct JSONReader {
    let bytes: UnsafeRawBufferPointer
    var at = 0
    var depth = 0

    init(bytes: UnsafeRawBufferPointer) {
        self.bytes = bytes
        if bytes.count >= 3, bytes[0] == 0xEF, bytes[1] == 0xBB, bytes[2] == 0xBF { at = 3 }
    }

    mutating func document() throws(JSONSyntaxError) -> JSONValue {
        skipSpace()
        let value = try self.value()
        skipSpace()
        guard at == bytes.count else { throw fail("unexpected \(describe(bytes[at])) after the JSON value") }
        return value
    }

    private func fail(_ message: String) -> JSONSyntaxError { JSONSyntaxError(offset: at, message: message) }

    private func describe(_ byte: UInt8) -> String {
        (0x21..<0x7F).contains(byte) ? "'\(Character(Unicode.Scalar(byte)))'" : "byte 0x\(String(byte, radix: 16))"
    }

    private mutating func skipSpace() {
        while at < bytes.count {
            switch bytes[at] {
            case 0x20, 0x09, 0x0A, 0x0D: at += 1
            default: return
            }
        }
    }

    private mutating func value() throws(JSONSyntaxError) -> JSONValue {
        guard at < bytes.count else { throw fail("unexpected end of the text") }
        switch bytes[at] {
        case UInt8(ascii: "{"): return try object()
        case UInt8(ascii: "["): return try array()
        case UInt8(ascii: "\""): return .string(try string())
        case UInt8(ascii: "t"):
            try literal("true")
            return .bool(true)
        case UInt8(ascii: "f"):
            try literal("false")
            return .bool(false)
        case UInt8(ascii: "n"):
            try literal("null")
            return .null
        case UInt8(ascii: "-"), UInt8(ascii: "0")...UInt8(ascii: "9"): return .number(try number())
        case let byte: throw fail("unexpected \(describe(byte)); expected a JSON value")
        }
    }

    private mutating func literal(_ word: StaticString) throws(JSONSyntaxError) {
        let count = word.utf8CodeUnitCount
        guard at + count <= bytes.count else { throw fail("unexpected end of the text") }
        for k in 0..<count where bytes[at + k] != word.utf8Start[k] {
            throw fail("unexpected \(describe(bytes[at])); expected a JSON value")
        }
        at += count
    }

    private mutating func enter() throws(JSONSyntaxError) {
        depth += 1
        if depth > JSONValue.maxParseDepth { throw fail("nested deeper than \(JSONValue.maxParseDepth) levels") }
    }

    private mutating func object() throws(JSONSyntaxError) -> JSONValue {
        try enter()
        at += 1
        var members: [String: JSONValue] = [:]
        skipSpace()
        if at < bytes.count, bytes[at] == UInt8(ascii: "}") {
            at += 1
            depth -= 1
            return .object(members)
        }
        while true {
            guard at < bytes.count, bytes[at] == UInt8(ascii: "\"") else {
                throw at < bytes.count ? fail("expected a key in double quotes") : fail("unexpected end of the text")
            }
            let key = try string()
            skipSpace()
            guard at < bytes.count, bytes[at] == UInt8(ascii: ":") else { throw fail("expected ':' after a key") }
            at += 1
            skipSpace()
            let value = try self.value()
            if members[key] == nil { members[key] = value }
            skipSpace()
            guard at < bytes.count else { throw fail("unexpected end of the text in an object") }
            if bytes[at] == UInt8(ascii: ",") {
                at += 1
                skipSpace()
            } else if bytes[at] == UInt8(ascii: "}") {
                at += 1
                depth -= 1
                return .object(members)
            } else {
                throw fail("expected ',' or '}' in an object")
            }
        }
    }

    private mutating func array() throws(JSONSyntaxError) -> JSONValue {
        try enter()
        at += 1
        var elements: [JSONValue] = []
        skipSpace()
        if at < bytes.count, bytes[at] == UInt8(ascii: "]") {
            at += 1
            depth -= 1
            return .array(elements)
        }
        while true {
            elements.append(try value())
            skipSpace()
            guard at < bytes.count else { throw fail("unexpected end of the text in an array") }
            if bytes[at] == UInt8(ascii: ",") {
                at += 1
                skipSpace()
            } else if bytes[at] == UInt8(ascii: "]") {
                at += 1
                depth -= 1
                return .array(elements)
            } else {
                throw fail("expected ',' or ']' in an array")
            }
        }
    }

    /// A string from its opening quote; `at` ends past the closing one.
    private mutating func string() throws(JSONSyntaxError) -> String {
        at += 1
        let start = at
        var ascii = true
        while at < bytes.count {
            let byte = bytes[at]
            if byte == UInt8(ascii: "\"") {
                let text = UnsafeRawBufferPointer(rebasing: bytes[start..<at])
                at += 1
                if ascii { return String(decoding: text, as: UTF8.self) }
                guard let s = String(validating: text, as: UTF8.self) else {
                    throw JSONSyntaxError(offset: start, message: "a string that is not valid UTF-8")
                }
                return s
            }
            if byte == UInt8(ascii: "\\") { return try escapedString(from: start) }
            if byte < 0x20 { throw fail("a control character inside a string; escape it") }
            if byte >= 0x80 { ascii = false }
            at += 1
        }
        throw JSONSyntaxError(offset: start - 1, message: "a string without its closing quote")
    }

    /// The rest of a string that holds escapes, from its first content byte.
    private mutating func escapedString(from start: Int) throws(JSONSyntaxError) -> String {
        var out: [UInt8] = Array(UnsafeRawBufferPointer(rebasing: bytes[start..<at]))
        while at < bytes.count {
            let byte = bytes[at]
            switch byte {
            case UInt8(ascii: "\""):
                at += 1
                guard let s = String(validating: out, as: UTF8.self) else {
                    throw JSONSyntaxError(offset: start, message: "a string that is not valid UTF-8")
                }
                return s
            case UInt8(ascii: "\\"):
                do { try JSONEscape.decode(bytes, at: &at, into: &out) } catch {
                    throw JSONSyntaxError(offset: error.offset, message: error.message)
                }
            case 0..<0x20: throw fail("a control character inside a string; escape it")
            default:
                out.append(byte)
                at += 1
            }
        }
        throw JSONSyntaxError(offset: start - 1, message: "a string without its closing quote")
    }

    /// A number as RFC 8259 writes it, kept as its text: no digit of a pass-through payload is rounded.
    private mutating func number() throws(JSONSyntaxError) -> JSONNumber {
        let start = at
        if bytes[at] == UInt8(ascii: "-") { at += 1 }
        if at < bytes.count, bytes[at] == UInt8(ascii: "0") {
            at += 1
        } else {
            let first = at
            while at < bytes.count, (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(bytes[at]) { at += 1 }
            guard at > first else { throw fail("a '-' without digits") }
        }
        if at < bytes.count, bytes[at] == UInt8(ascii: ".") {
            at += 1
            try someDigits("a '.' without digits after it")
        }
        if at < bytes.count, bytes[at] == UInt8(ascii: "e") || bytes[at] == UInt8(ascii: "E") {
            at += 1
            if at < bytes.count, bytes[at] == UInt8(ascii: "+") || bytes[at] == UInt8(ascii: "-") { at += 1 }
            try someDigits("an exponent without digits")
        }
        return JSONNumber(
            validatedText: String(decoding: UnsafeRawBufferPointer(rebasing: bytes[start..<at]), as: UTF8.self))
    }

    private mutating func someDigits(_ problem: String) throws(JSONSyntaxError) {
        let start = at
        while at < bytes.count, (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(bytes[at]) { at += 1 }
        if at == start { throw fail(problem) }
    }
}

/// The escapes of JSON strings (RFC 8259 §7), for the readers that decode strings by hand: `JSONValue(parsing:)`
/// and the registry's device-record reader.
public enum JSONEscape {
    /// An escape that cannot be decoded: where (a byte offset) and why.
    public struct Fault: Error, Sendable, Hashable {
        public var offset: Int
        public var message: String
    }

    /// Decodes the escape whose backslash is at `at`: appends its UTF-8 to `out` and moves `at` past it. `\uXXXX`
    /// escapes join a surrogate pair; a lone surrogate is a fault.
    public static func decode(
        _ bytes: UnsafeRawBufferPointer, at: inout Int, into out: inout [UInt8]
    ) throws(Fault) {
        at += 1
        guard at < bytes.count else { throw Fault(offset: at, message: "a string without its closing quote") }
        let escape = bytes[at]
        switch escape {
        case UInt8(ascii: "\""), UInt8(ascii: "\\"), UInt8(ascii: "/"): out.append(escape)
        case UInt8(ascii: "b"): out.append(0x08)
        case UInt8(ascii: "f"): out.append(0x0C)
        case UInt8(ascii: "n"): out.append(0x0A)
        case UInt8(ascii: "r"): out.append(0x0D)
        case UInt8(ascii: "t"): out.append(0x09)
        case UInt8(ascii: "u"):
            at += 1
            UTF8.encode(try unicodeScalar(bytes, at: &at)) { out.append($0) }
            return
        default:
            throw Fault(offset: at, message: "an unknown escape \\\(Character(Unicode.Scalar(escape)))")
        }
        at += 1
    }

    /// The scalar of `\uXXXX` (`at` past the `u`), joining a surrogate pair.
    private static func unicodeScalar(_ bytes: UnsafeRawBufferPointer, at: inout Int) throws(Fault) -> Unicode.Scalar {
        let first = try hex4(bytes, at: &at)
        var code = UInt32(first)
        if (0xD800..<0xDC00).contains(first) {
            let unpaired = Fault(
                offset: at, message: "a high surrogate \\u\(String(first, radix: 16)) without its low surrogate")
            guard at + 1 < bytes.count, bytes[at] == UInt8(ascii: "\\"), bytes[at + 1] == UInt8(ascii: "u") else {
                throw unpaired
            }
            at += 2
            let second = try hex4(bytes, at: &at)
            guard (0xDC00..<0xE000).contains(second) else { throw unpaired }
            code = 0x10000 + ((UInt32(first) - 0xD800) << 10) + (UInt32(second) - 0xDC00)
        }
        guard let scalar = Unicode.Scalar(code) else {
            throw Fault(offset: at, message: "a lone surrogate \\u\(String(first, radix: 16))")
        }
        return scalar
    }

    private static func hex4(_ bytes: UnsafeRawBufferPointer, at: inout Int) throws(Fault) -> UInt16 {
        guard at + 4 <= bytes.count else { throw Fault(offset: at, message: "\\u needs four hex digits") }
        var v: UInt16 = 0
        for _ in 0..<4 {
            guard let digit = hexDigitValue(bytes[at]) else {
                throw Fault(offset: at, message: "\\u needs four hex digits")
            }
            v = v << 4 | UInt16(digit)
            at += 1
        }
        return v
    }
}
