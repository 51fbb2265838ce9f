/// A field of a JSON document that is missing or holds the wrong kind of value, named by its path
/// (`notification.title`, `devices[2].token`).
public struct JSONFieldError: Error, Sendable, Hashable, CustomStringConvertible {
    public enum Problem: Sendable, Hashable {
        /// A required field is absent or null.
        case missing
        /// The value is not what the field takes: "a string", "one of ios, android".
        case expected(String)
    }
    public var path: [JSONPathComponent]
    public var problem: Problem

    public init(path: [JSONPathComponent], problem: Problem) {
        self.path = path
        self.problem = problem
    }

    /// The path as users write it: `notification.localized.es.title`, `devices[2].token`; `body` for the document.
    public var field: String {
        var out = ""
        for component in path {
            switch component {
            case .index(let i): out += "[\(i)]"
            case .key(let k): out += out.isEmpty ? k : ".\(k)"
            }
        }
        return out.isEmpty ? "body" : out
    }

    /// What is wrong, without the field: "required", "expected a string".
    public var message: String {
        switch problem {
        case .missing: "required"
        case .expected(let what): "expected \(what)"
        }
    }

    public var description: String { "\(field): \(message)" }

    /// The same fault as `Codable` reports it, under `codingPath` (where the decoder stood).
    public func decodingError(under codingPath: [any CodingKey]) -> DecodingError {
        let keys = codingPath + path.map(\.codingKey)
        switch problem {
        case .missing:
            guard let last = keys.last else {
                return .valueNotFound(Any.self, .init(codingPath: keys, debugDescription: message))
            }
            return .keyNotFound(last, .init(codingPath: Array(keys.dropLast()), debugDescription: message))
        case .expected:
            return .dataCorrupted(.init(codingPath: keys, debugDescription: message))
        }
    }
}

/// One step into a JSON document.
public enum JSONPathComponent: Sendable, Hashable {
    case key(String)
    case index(Int)

    var codingKey: any CodingKey {
        switch self {
        case .key(let k): JSONCodingKey(stringValue: k)
        case .index(let i): JSONCodingKey(intValue: i)
        }
    }
}

private struct JSONCodingKey: CodingKey {
    var stringValue: String
    var intValue: Int?
    init(stringValue: String) { self.stringValue = stringValue }
    init(intValue: Int) {
        stringValue = "Index \(intValue)"
        self.intValue = intValue
    }
}

/// Typed reads of one JSON object's members, each naming its path when the value is of the wrong kind. A member
/// that is absent or null reads as nil, as `Codable`'s `decodeIfPresent` has it.
public struct JSONObjectReader {
    public let members: [String: JSONValue]
    public let path: [JSONPathComponent]
    /// One bit per (length, first byte) of the members' keys. A decoder asks for every key it knows and an object
    /// holds few of them: a key whose bit is clear is absent without hashing it.
    private let keyMask: UInt64

    /// The object at `path`; throws when `value` is not an object.
    public init(_ value: JSONValue, at path: [JSONPathComponent]) throws(JSONFieldError) {
        guard case .object(let members) = value else {
            throw JSONFieldError(path: path, problem: .expected("an object"))
        }
        self.members = members
        self.path = path
        var mask: UInt64 = 0
        for key in members.keys { mask |= Self.bit(key) }
        keyMask = mask
    }

    /// `key`'s bit in `keyMask`.
    @inline(__always) static func bit(_ key: String) -> UInt64 {
        let utf8 = key.utf8
        return 1 &<< ((UInt64(utf8.count) &* 31 &+ UInt64(utf8.first ?? 0)) & 63)
    }

    func fault(_ key: String, _ what: String) -> JSONFieldError {
        JSONFieldError(path: path + [.key(key)], problem: .expected(what))
    }

    /// The member `key`, or nil when it is absent or null.
    public func value(_ key: String) -> JSONValue? {
        guard keyMask & Self.bit(key) != 0 else { return nil }
        switch members[key] {
        case nil, .null?: return nil
        case let v?: return v
        }
    }

    /// `value` when present, else a `missing` fault for `key`.
    public func required<T>(_ value: T?, _ key: String) throws(JSONFieldError) -> T {
        guard let value else { throw JSONFieldError(path: path + [.key(key)], problem: .missing) }
        return value
    }

    public func string(_ key: String) throws(JSONFieldError) -> String? {
        switch value(key) {
        case nil: return nil
        case .string(let s)?: return s
        default: throw fault(key, "a string")
        }
    }

    public func bool(_ key: String) throws(JSONFieldError) -> Bool? {
        switch value(key) {
        case nil: return nil
        case .bool(let b)?: return b
        default: throw fault(key, "a boolean")
        }
    }

    public func double(_ key: String) throws(JSONFieldError) -> Double? {
        switch value(key) {
        case nil: return nil
        case .number(let n)? where n.doubleValue.isFinite: return n.doubleValue
        default: throw fault(key, "a number")
        }
    }

    /// A whole number that fits `Int`.
    public func int(_ key: String) throws(JSONFieldError) -> Int? {
        switch value(key) {
        case nil: return nil
        case .number(let n)?:
            guard let i = n.intValue else { throw fault(key, "an integer") }
            return i
        default: throw fault(key, "an integer")
        }
    }

    /// A string that names one of `T`'s cases.
    public func oneOf<T: RawRepresentable & CaseIterable>(_ key: String, _: T.Type) throws(JSONFieldError) -> T?
    where T.RawValue == String {
        guard let s = try string(key) else { return nil }
        guard let v = T(rawValue: s) else {
            throw fault(key, "one of " + T.allCases.map(\.rawValue).joined(separator: ", "))
        }
        return v
    }

    /// An object of any members.
    public func object(_ key: String) throws(JSONFieldError) -> [String: JSONValue]? {
        switch value(key) {
        case nil: return nil
        case .object(let o)?: return o
        default: throw fault(key, "an object")
        }
    }

    /// An array, each element read by `element` at its own path.
    public func array<T>(
        _ key: String, _ element: (JSONValue, [JSONPathComponent]) throws(JSONFieldError) -> T
    ) throws(JSONFieldError) -> [T]? {
        switch value(key) {
        case nil: return nil
        case .array(let elements)?:
            var out: [T] = []
            out.reserveCapacity(elements.count)
            for (i, e) in elements.enumerated() { out.append(try element(e, path + [.key(key), .index(i)])) }
            return out
        default: throw fault(key, "an array")
        }
    }

    /// An array of strings.
    public func strings(_ key: String) throws(JSONFieldError) -> [String]? {
        try array(key) { (v, at) throws(JSONFieldError) in
            guard case .string(let s) = v else { throw JSONFieldError(path: at, problem: .expected("a string")) }
            return s
        }
    }
}

/// Types read from a `JSONValue` by hand (jobs and notifications, on the hot path) that `Codable` decodes the same
/// way, so there is one decoding of each.
public protocol JSONReadable: Decodable {
    init(json: JSONValue, at path: [JSONPathComponent]) throws(JSONFieldError)
}

extension JSONReadable {
    /// `Decodable`'s entry, through the reading by hand: for a type's `init(from:)`.
    public static func decoded(from decoder: any Decoder) throws -> Self {
        let value = try JSONValue(from: decoder)
        do { return try Self(json: value, at: []) } catch { throw error.decodingError(under: decoder.codingPath) }
    }
}

/// Types written as a `JSONValue` (jobs and notifications on their way to the job stream), the inverse of their
/// `JSONReadable` reading: `jsonText` is the one writing of a job for every producer, and its pass-through numbers
/// (`data`, `apns`, `fcm`, `customData`) keep their text, however long. `Codable` encodes the same value through
/// `encode(to:)` (where numbers are what `JSONNumber.encode(to:)` can hold).
public protocol JSONWritable: Encodable {
    /// The value as JSON: a member the reading takes as nil is left out.
    var json: JSONValue { get }
}

extension JSONWritable {
    /// `json` as compact UTF-8 (`JSONValue.encoded()`: keys sorted, numbers as their text).
    public func encoded() -> [UInt8] { json.encoded() }
    /// `encoded()` as text: what a producer puts in a job stream entry's `job` field.
    public var jsonText: String { json.jsonText }
}

/// Members of a JSON object being written, the counterpart of `JSONObjectReader`: a nil value leaves its key out,
/// as the reader takes an absent member for nil.
public struct JSONObjectWriter {
    public private(set) var members: [String: JSONValue] = [:]

    public init() {}

    public var value: JSONValue { .object(members) }

    public mutating func add(_ key: String, _ v: JSONValue?) {
        if let v { members[key] = v }
    }
    public mutating func add(_ key: String, _ v: String?) { add(key, v.map(JSONValue.string)) }
    public mutating func add(_ key: String, _ v: Bool?) { add(key, v.map(JSONValue.bool)) }
    public mutating func add(_ key: String, _ v: Int?) { add(key, v.map { .number(JSONNumber($0)) }) }
    public mutating func add(_ key: String, _ v: Double?) { add(key, v.map { .number(JSONNumber($0)) }) }
    public mutating func add(_ key: String, _ v: [String]?) { add(key, v.map { .array($0.map(JSONValue.string)) }) }
    public mutating func add(_ key: String, _ v: [String: JSONValue]?) { add(key, v.map(JSONValue.object)) }
    public mutating func add(_ key: String, _ v: (some JSONWritable)?) { add(key, v?.json) }
    public mutating func add(_ key: String, _ v: [some JSONWritable]?) { add(key, v.map { .array($0.map(\.json)) }) }
}
