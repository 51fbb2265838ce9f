import Foundation
import VolleyCore

/// Turns request bodies into values, or into a 400 that names the field at fault.
enum Input {
    /// The keys a job may carry (README "Jobs"); anything else is a 400 naming it.
    static let jobKeys: Set<String> = [
        "id", "org", "app", "recipients", "devices", "notification", "apns", "fcm", "platforms",
    ]
    static let notificationKeys: Set<String> = [
        "title", "subtitle", "body", "localized", "sound", "badge", "badgeIncrement", "data", "contentAvailable",
        "mutableContent", "category", "threadId", "collapseId", "interruptionLevel", "relevanceScore",
        "targetContentId", "ttl", "priority", "pushType", "imageUrl", "url", "channelId", "type", "targetId", "apns",
        "fcm",
    ]
    static let localizedKeys: Set<String> = ["title", "subtitle", "body"]
    static let jobDeviceKeys: Set<String> = ["platform", "token", "environment"]

    /// Parses a JSON object body; a 400 naming `field` (default: the body) when it is not one.
    static func object(_ data: Data) throws -> [String: Any] {
        guard !data.isEmpty else { throw APIProblem.badRequest("body", "the request needs a JSON object body") }
        let parsed: Any
        do { parsed = try JSONSerialization.jsonObject(with: data, options: [.fragmentsAllowed]) } catch {
            throw APIProblem.badRequest("body", "malformed JSON: \(shortError(error))")
        }
        guard let object = parsed as? [String: Any] else {
            throw APIProblem.badRequest("body", "the body must be a JSON object")
        }
        return object
    }

    /// `data`, a UTF-8 JSON object without `key`, with `"key": value` added as its first member; nil when the body
    /// does not start with `{` after white space (another encoding), for the caller to serialise instead.
    static func addingMember(_ key: String, _ value: String, to data: Data) throws -> Data? {
        func isSpace(_ b: UInt8) -> Bool { b == 0x20 || b == 0x09 || b == 0x0A || b == 0x0D }
        guard let open = data.firstIndex(where: { !isSpace($0) }), data[open] == UInt8(ascii: "{") else { return nil }
        let member = try JSONEncoder().encode([key: value]).dropFirst().dropLast()
        let rest = data[data.index(after: open)...]
        let empty = rest.first(where: { !isSpace($0) }) == UInt8(ascii: "}")
        var out = Data(capacity: data.count + member.count + 1)
        out.append(data[...open])
        out.append(contentsOf: member)
        if !empty { out.append(UInt8(ascii: ",")) }
        out.append(rest)
        return out
    }

    /// A 400 naming the first key of `object` outside `known`.
    static func rejectUnknownKeys(_ object: [String: Any], known: Set<String>, at path: String) throws {
        if let unknown = object.keys.filter({ !known.contains($0) }).sorted().first {
            let field = path.isEmpty ? unknown : "\(path).\(unknown)"
            throw APIProblem.badRequest(
                field, "unknown key '\(unknown)'; known keys: \(known.sorted().joined(separator: ", "))")
        }
    }

    /// Unknown keys anywhere in a job's structure (free-form maps such as `data`, `apns`, `fcm` are not checked).
    static func checkJobKeys(_ job: [String: Any]) throws {
        try rejectUnknownKeys(job, known: jobKeys, at: "")
        if let n = job["notification"] as? [String: Any] {
            try rejectUnknownKeys(n, known: notificationKeys, at: "notification")
            if let loc = n["localized"] as? [String: Any] {
                for (lang, value) in loc.sorted(by: { $0.key < $1.key }) {
                    if let v = value as? [String: Any] {
                        try rejectUnknownKeys(v, known: localizedKeys, at: "notification.localized.\(lang)")
                    }
                }
            }
        }
        if let devices = job["devices"] as? [Any] {
            for (i, d) in devices.enumerated() {
                if let d = d as? [String: Any] { try rejectUnknownKeys(d, known: jobDeviceKeys, at: "devices[\(i)]") }
            }
        }
    }

    /// Decodes `T`, turning a decoding error into a 400 naming its coding path.
    static func decode<T: Decodable>(_ type: T.Type, from data: Data) throws -> T {
        do { return try JSONDecoder().decode(type, from: data) } catch let e as DecodingError {
            throw problem(e)
        }
    }

    static func problem(_ e: DecodingError) -> APIProblem {
        switch e {
        case .typeMismatch(let t, let c):
            return .badRequest(path(c.codingPath), "expected \(describe(t)): \(c.debugDescription)")
        case .valueNotFound(let t, let c):
            return .badRequest(path(c.codingPath), "expected \(describe(t)), found null")
        case .keyNotFound(let k, let c):
            return .badRequest(path(c.codingPath + [k]), "required")
        case .dataCorrupted(let c):
            return .badRequest(path(c.codingPath), c.debugDescription)
        @unknown default:
            return .badRequest("body", "\(e)")
        }
    }

    /// `notification.localized.es.title`, `devices[2].token`.
    static func path(_ keys: [any CodingKey]) -> String {
        var out = ""
        for k in keys {
            if let i = k.intValue {
                out += "[\(i)]"
            } else {
                out += out.isEmpty ? k.stringValue : ".\(k.stringValue)"
            }
        }
        return out.isEmpty ? "body" : out
    }

    private static func describe(_ t: Any.Type) -> String {
        switch t {
        case is String.Type: "a string"
        case is Int.Type, is Int64.Type: "an integer"
        case is Double.Type: "a number"
        case is Bool.Type: "a boolean"
        default:
            String(describing: t).contains("Array")
                ? "an array"
                : String(describing: t).contains("Dictionary")
                    ? "an object" : "\(t)"
        }
    }

    private static func shortError(_ error: any Error) -> String {
        let s = (error as NSError).userInfo[NSDebugDescriptionErrorKey] as? String ?? "\(error)"
        return String(s.prefix(200))
    }

    /// Ids that travel in Redis key names and URLs: 1–128 of letters, digits and `._:-`.
    static func isSafeID(_ s: String) -> Bool {
        !s.isEmpty && s.utf8.count <= 128
            && s.unicodeScalars.allSatisfy {
                ($0.isASCII && (CharacterSet.alphanumerics.contains($0))) || "._:-".unicodeScalars.contains($0)
            }
    }
}
