import Foundation
import VolleyCore

/// Reading and writing the JSON of the Salesforce-compatible resources: strict about keys, lenient about the forms
/// Salesforce's own examples use (booleans as strings, single-quoted payloads).
enum ConnectJSON {
    static let encoder: JSONEncoder = {
        let e = JSONEncoder()
        e.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        return e
    }()

    // MARK: Bodies

    /// The body as a JSON object, refusing keys outside `allowed` (named in the error). An empty body is `{}`.
    static func object(_ body: Data, allowed: Set<String>) throws(ConnectError) -> [String: JSONValue] {
        if body.allSatisfy({ $0 == 0x20 || $0 == 0x0A || $0 == 0x0D || $0 == 0x09 }) { return [:] }
        let value: JSONValue
        do {
            value = try JSONValue(parsing: body)
        } catch {
            throw .jsonParser("body: the request body is not valid JSON")
        }
        guard case .object(let o) = value else { throw .jsonParser("body: the request body must be a JSON object") }
        try checkKeys(o, allowed: allowed, path: "")
        return o
    }

    static func checkKeys(_ o: [String: JSONValue], allowed: Set<String>, path: String) throws(ConnectError) {
        if let bad = o.keys.sorted().first(where: { !allowed.contains($0) }) {
            throw .jsonParser(
                "Unrecognized field \"\(path)\(bad)\"; accepted: \(allowed.sorted().joined(separator: ", "))")
        }
    }

    /// A boolean given as `true` / `false` or, as Salesforce's examples write them, `"true"` / `"false"`.
    static func bool(_ v: JSONValue?, field: String) throws(ConnectError) -> Bool? {
        switch v {
        case nil, .null?: return nil
        case .bool(let b)?: return b
        case .string(let s)?:
            if let b = boolText(s) { return b }
            throw .invalidInput("\(field): expected true or false, got \"\(s)\"")
        default: throw .invalidInput("\(field): expected a boolean (true or false)")
        }
    }

    static func boolText(_ s: String) -> Bool? {
        switch s.lowercased() {
        case "true": true
        case "false": false
        default: nil
        }
    }

    static func string(_ v: JSONValue?, field: String) throws(ConnectError) -> String? {
        switch v {
        case nil, .null?: return nil
        case .string(let s)?: return s
        default: throw .invalidInput("\(field): expected a string")
        }
    }

    /// An array of non-empty strings (a single string is taken as a list of one, as Flow passes a lone id).
    static func stringList(_ v: JSONValue?, field: String) throws(ConnectError) -> [String]? {
        switch v {
        case nil, .null?: return nil
        case .string(let s)?:
            if s.isEmpty { throw .invalidInput("\(field): must not be empty") }
            return [s]
        case .array(let a)?:
            var out: [String] = []
            out.reserveCapacity(a.count)
            for (i, x) in a.enumerated() {
                guard case .string(let s) = x else { throw .invalidInput("\(field)[\(i)]: expected a string") }
                if s.isEmpty { throw .invalidInput("\(field)[\(i)]: must not be empty") }
                out.append(s)
            }
            return out
        default: throw .invalidInput("\(field): expected an array of strings")
        }
    }

    // MARK: Payloads

    /// Parses a push payload given as JSON text. Salesforce's guide writes it with single quotes
    /// (`"{ 'aps':{ 'alert': 'test' } }"`), which is not JSON: when strict parsing fails, single-quoted strings are
    /// rewritten as JSON strings and the text is parsed again. Nil when neither form is JSON.
    static func payload(_ text: String) -> JSONValue? {
        if let v = try? JSONValue(parsing: text) { return v }
        guard let rewritten = doubleQuoted(text) else { return nil }
        return try? JSONValue(parsing: rewritten)
    }

    /// Rewrites single-quoted strings as double-quoted ones: `'it\'s "x"'` → `"it's \"x\""`. Double-quoted strings
    /// pass unchanged. Nil when a string is left open.
    static func doubleQuoted(_ text: String) -> String? {
        enum State { case outside, single, double }
        var state = State.outside
        var out = ""
        out.reserveCapacity(text.utf8.count + 8)
        var chars = text.makeIterator()
        while let c = chars.next() {
            switch state {
            case .outside:
                if c == "'" {
                    out.append("\"")
                    state = .single
                } else {
                    if c == "\"" { state = .double }
                    out.append(c)
                }
            case .double:
                out.append(c)
                if c == "\\" {
                    guard let n = chars.next() else { return nil }
                    out.append(n)
                } else if c == "\"" {
                    state = .outside
                }
            case .single:
                if c == "\\" {
                    guard let n = chars.next() else { return nil }
                    if n != "'" { out.append(c) }
                    out.append(n)
                } else if c == "\"" {
                    out.append("\\\"")
                } else if c == "'" {
                    out.append("\"")
                    state = .outside
                } else {
                    out.append(c)
                }
            }
        }
        return state == .outside ? out : nil
    }

    /// JSON text of a value (FCM data values are strings; objects and numbers are sent as their JSON, numbers as
    /// the text they came as).
    static func text(_ v: JSONValue) -> String {
        if case .string(let s) = v { return s }
        return v.jsonText
    }
}

extension Character {
    var isASCIIDigit: Bool { isASCII && isNumber }
}
