/// A JSON value kept as it came: used for pass-through payloads (`apns`, `fcm`, `data`). Numbers keep their text
/// (`JSONNumber`), so what a job carries reaches the provider digit for digit.
public enum JSONValue: Sendable, Hashable, Codable {
    case null
    case bool(Bool)
    case number(JSONNumber)
    case string(String)
    case array([JSONValue])
    case object([String: JSONValue])

    public init(from decoder: any Decoder) throws {
        let c = try decoder.singleValueContainer()
        if c.decodeNil() {
            self = .null
            return
        }
        if let b = try? c.decode(Bool.self) {
            self = .bool(b)
            return
        }
        if let n = try? c.decode(JSONNumber.self) {
            self = .number(n)
            return
        }
        if let s = try? c.decode(String.self) {
            self = .string(s)
            return
        }
        if let a = try? c.decode([JSONValue].self) {
            self = .array(a)
            return
        }
        if let o = try? c.decode([String: JSONValue].self) {
            self = .object(o)
            return
        }
        throw DecodingError.dataCorruptedError(in: c, debugDescription: "not a JSON value")
    }

    public func encode(to encoder: any Encoder) throws {
        var c = encoder.singleValueContainer()
        switch self {
        case .null: try c.encodeNil()
        case .bool(let b): try c.encode(b)
        case .number(let n): try c.encode(n)
        case .string(let s): try c.encode(s)
        case .array(let a): try c.encode(a)
        case .object(let o): try c.encode(o)
        }
    }

    public subscript(key: String) -> JSONValue? {
        if case .object(let o) = self { return o[key] }
        return nil
    }

    public var stringValue: String? {
        if case .string(let s) = self { return s }
        return nil
    }
    public var objectValue: [String: JSONValue]? {
        if case .object(let o) = self { return o }
        return nil
    }
    public var arrayValue: [JSONValue]? {
        if case .array(let a) = self { return a }
        return nil
    }
    public var boolValue: Bool? {
        if case .bool(let b) = self { return b }
        return nil
    }
    public var numberValue: JSONNumber? {
        if case .number(let n) = self { return n }
        return nil
    }
    /// A number's nearest `Double`; nil for anything else.
    public var doubleValue: Double? { numberValue?.doubleValue }
    /// A number that is a whole `Int`; nil for anything else.
    public var intValue: Int? { numberValue?.intValue }
    /// `encoded()` as text.
    public var jsonText: String { String(decoding: encoded(), as: UTF8.self) }
}

extension JSONValue {
    /// Compact UTF-8 JSON with object keys sorted (stable bytes for tests, digests and caches) and `/` unescaped:
    /// the bytes Volley sends to a provider. Numbers are written as their text, so none is rounded.
    public func encoded() -> [UInt8] {
        var out: [UInt8] = []
        out.reserveCapacity(256)
        append(to: &out)
        return out
    }

    /// Appends `encoded()`'s bytes to `out`.
    public func append(to out: inout [UInt8]) {
        switch self {
        case .null: out.append(contentsOf: "null".utf8)
        case .bool(let b): out.append(contentsOf: (b ? "true" : "false").utf8)
        case .number(let n): out.append(contentsOf: n.text.utf8)
        case .string(let s): Self.appendString(s, to: &out)
        case .array(let a):
            out.append(UInt8(ascii: "["))
            for (i, v) in a.enumerated() {
                if i > 0 { out.append(UInt8(ascii: ",")) }
                v.append(to: &out)
            }
            out.append(UInt8(ascii: "]"))
        case .object(let o):
            out.append(UInt8(ascii: "{"))
            for (i, key) in o.keys.sorted().enumerated() {
                if i > 0 { out.append(UInt8(ascii: ",")) }
                Self.appendString(key, to: &out)
                out.append(UInt8(ascii: ":"))
                o[key]?.append(to: &out)
            }
            out.append(UInt8(ascii: "}"))
        }
    }

    /// A quoted string, escaped as Foundation's `JSONEncoder` escapes it.
    static func appendString(_ s: String, to out: inout [UInt8]) {
        out.append(UInt8(ascii: "\""))
        appendJSONStringContent(s, to: &out)
        out.append(UInt8(ascii: "\""))
    }
}
