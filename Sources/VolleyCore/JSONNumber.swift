import Foundation

/// A JSON number kept as the text it came as (RFC 8259 §6).
///
/// A pass-through payload's numbers reach the device unchanged: `9007199254740993`, `18446744073709551617` and
/// `0.1` are written out as they were read, not through a `Double`, which holds 53 bits of an integer and rounds
/// the rest. Equality is equality of the text: `1.0` and `1` are different numbers to a pass-through payload.
public struct JSONNumber: Sendable, Hashable, CustomStringConvertible, ExpressibleByIntegerLiteral,
    ExpressibleByFloatLiteral
{
    /// The number's text in RFC 8259's grammar.
    public let text: String

    /// A number whose text was already checked against RFC 8259's grammar (the parser's).
    init(validatedText: String) { text = validatedText }

    /// Text that is a JSON number (RFC 8259's grammar, nothing around it), or nil.
    public init?(text: String) {
        guard Self.isNumber(text.utf8) else { return nil }
        self.text = text
    }

    public init<I: BinaryInteger>(_ value: I) { text = String(value) }

    /// A finite value: a whole one below 2^53 is written as an integer (`3`, not `3.0`), as providers expect of
    /// counts such as `badge`; others in Swift's shortest round-tripping form. A non-finite value, which JSON
    /// cannot write, becomes `0`.
    public init(_ value: Double) {
        if !value.isFinite {
            text = "0"
        } else if value.rounded() == value, abs(value) < 9_007_199_254_740_992 {
            text = String(Int64(value))
        } else {
            text = "\(value)"
        }
    }

    public init(integerLiteral value: Int) { self.init(value) }
    public init(floatLiteral value: Double) { self.init(value) }

    public var description: String { text }

    /// The nearest `Double` (integers beyond 2^53 and most decimals are rounded: read fields, not payloads).
    public var doubleValue: Double { Double(text) ?? 0 }

    /// The value as an `Int` when it is a whole number that fits: `3`, `3.0` and `3e0` alike.
    public var intValue: Int? {
        if let i = Int(text) { return i }
        guard let d = Double(text), d.rounded() == d, abs(d) < 9.2e18 else { return nil }
        return Int(d)
    }

    /// RFC 8259 §6: `-? (0 | [1-9][0-9]*) (. [0-9]+)? ([eE] [+-]? [0-9]+)?`.
    static func isNumber(_ utf8: some Collection<UInt8>) -> Bool {
        var i = utf8.startIndex
        let end = utf8.endIndex
        func digits() -> Int {
            var n = 0
            while i != end, (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(utf8[i]) {
                n += 1
                i = utf8.index(after: i)
            }
            return n
        }
        if i != end, utf8[i] == UInt8(ascii: "-") { i = utf8.index(after: i) }
        guard i != end else { return false }
        if utf8[i] == UInt8(ascii: "0") {
            i = utf8.index(after: i)
        } else if digits() == 0 {
            return false
        }
        if i != end, utf8[i] == UInt8(ascii: ".") {
            i = utf8.index(after: i)
            guard digits() > 0 else { return false }
        }
        if i != end, utf8[i] == UInt8(ascii: "e") || utf8[i] == UInt8(ascii: "E") {
            i = utf8.index(after: i)
            if i != end, utf8[i] == UInt8(ascii: "+") || utf8[i] == UInt8(ascii: "-") { i = utf8.index(after: i) }
            guard digits() > 0 else { return false }
        }
        return i == end
    }
}

extension JSONNumber: Codable {
    /// Through `Codable` (Foundation's `JSONDecoder`, YAML), where the text is not at hand: the first of `Int64`,
    /// `UInt64` and `Decimal` (38 significant digits, exact for what it holds) that reads the value, else `Double`.
    public init(from decoder: any Decoder) throws {
        let c = try decoder.singleValueContainer()
        if let i = try? c.decode(Int64.self) {
            self.init(i)
        } else if let u = try? c.decode(UInt64.self) {
            self.init(u)
        } else if let d = try? c.decode(Decimal.self), d.isFinite, let n = JSONNumber(text: d.description) {
            self = n
        } else {
            self.init(try c.decode(Double.self))
        }
    }

    /// Through `Codable` (`JSONEncoder`): integers as `Int64` or `UInt64`, other numbers as a `Decimal` when it
    /// holds them exactly (at most 38 significant digits), else as the nearest `Double`. Payloads bound for a
    /// provider and jobs bound for the job stream (`PushJob.jsonText`) are written by `JSONValue.encoded()`, which
    /// copies the text and has no such limit.
    public func encode(to encoder: any Encoder) throws {
        var c = encoder.singleValueContainer()
        if let i = Int64(text) {
            try c.encode(i)
        } else if let u = UInt64(text) {
            try c.encode(u)
        } else if significantDigits <= 38, let d = Decimal(string: text, locale: Locale(identifier: "en_US_POSIX")),
            d.isFinite
        {
            try c.encode(d)
        } else {
            try c.encode(doubleValue)
        }
    }

    /// Digits of the mantissa without leading zeros (`0.00120` has three).
    private var significantDigits: Int {
        var count = 0
        var leading = true
        for b in text.utf8 {
            if b == UInt8(ascii: "e") || b == UInt8(ascii: "E") { break }
            guard (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(b) else { continue }
            if leading && b == UInt8(ascii: "0") { continue }
            leading = false
            count += 1
        }
        return count
    }
}
