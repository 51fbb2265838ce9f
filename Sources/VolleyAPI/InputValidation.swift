import Foundation
import VolleyCore

/// Turns request bodies into values, or into a 400 that names the field at fault.
enum Input {
    /// The keys a job may carry (README "Jobs"); anything else is a 400 naming it.
    static let jobKeys: Set<String> = [
        "id", "org", "app", "recipients", "devices", "notification", "apns", "fcm", "platforms", "debug",
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

    /// `data`, a UTF-8 JSON object without the keys of `members`, with each `"key": "value"` added in front of its
    /// first member; nil when the body does not start with `{` after white space (another encoding), for the caller
    /// to serialise instead.
    static func addingMembers(_ members: [(key: String, value: String)], to data: Data) -> Data? {
        func isSpace(_ b: UInt8) -> Bool { b == 0x20 || b == 0x09 || b == 0x0A || b == 0x0D }
        guard let open = data.firstIndex(where: { !isSpace($0) }), data[open] == UInt8(ascii: "{") else { return nil }
        if members.isEmpty { return data }
        var added: [UInt8] = []
        for (i, m) in members.enumerated() {
            if i > 0 { added.append(UInt8(ascii: ",")) }
            added.append(UInt8(ascii: "\""))
            appendJSONStringContent(m.key, to: &added)
            added.append(contentsOf: #"":""#.utf8)
            appendJSONStringContent(m.value, to: &added)
            added.append(UInt8(ascii: "\""))
        }
        let rest = data[data.index(after: open)...]
        let empty = rest.first(where: { !isSpace($0) }) == UInt8(ascii: "}")
        var out = Data(capacity: data.count + added.count + 1)
        out.append(data[...open])
        out.append(contentsOf: added)
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

    /// A 400 naming the first of `keys` (sorted) outside `known`.
    static func rejectUnknownKeys(_ keys: [some CodingKey], known: Set<String>, at path: String) throws {
        if let unknown = keys.map(\.stringValue).filter({ !known.contains($0) }).sorted().first {
            let field = path.isEmpty ? unknown : "\(path).\(unknown)"
            throw APIProblem.badRequest(
                field, "unknown key '\(unknown)'; known keys: \(known.sorted().joined(separator: ", "))")
        }
    }

    /// Decodes `T`, turning a decoding error into a 400 naming its coding path.
    static func decode<T: Decodable>(
        _ type: T.Type, from data: Data, userInfo: [CodingUserInfoKey: any Sendable] = [:]
    ) throws -> T {
        let decoder = JSONDecoder()
        decoder.userInfo = userInfo
        do { return try decoder.decode(type, from: data) } catch let e as DecodingError {
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

/// A job body (`POST /v1/jobs`) read in one parse: its keys checked against the job's schema, where an unknown key is
/// a 400 naming it (free-form maps such as `data`, `apns`, `fcm` are not checked), and the job decoded from the same
/// parse. A body without `org` takes the caller's (`JobBody.org` in the decoder's `userInfo`). `keys` says which
/// top-level keys the body carries, so the caller can add `org` and `id` without a second key of the same name.
struct JobBody: Decodable {
    static let org = CodingUserInfoKey(rawValue: "volley.api.org")!

    var job: PushJob
    var keys: Set<String>

    init(from decoder: any Decoder) throws {
        let top: KeyedDecodingContainer<BodyKey>
        do { top = try decoder.container(keyedBy: BodyKey.self) } catch {
            throw APIProblem.badRequest("body", "the body must be a JSON object")
        }
        try Input.rejectUnknownKeys(top.allKeys, known: Input.jobKeys, at: "")
        keys = Set(top.allKeys.map(\.stringValue))
        // A value of the wrong type is left to the job's own decoding below, which names the field and the type.
        if let n = try? top.nestedContainer(keyedBy: BodyKey.self, forKey: "notification") {
            try Input.rejectUnknownKeys(n.allKeys, known: Input.notificationKeys, at: "notification")
            if let localized = try? n.nestedContainer(keyedBy: BodyKey.self, forKey: "localized") {
                for language in localized.allKeys.sorted(by: { $0.stringValue < $1.stringValue }) {
                    if let text = try? localized.nestedContainer(keyedBy: BodyKey.self, forKey: language) {
                        try Input.rejectUnknownKeys(
                            text.allKeys, known: Input.localizedKeys,
                            at: "notification.localized.\(language.stringValue)")
                    }
                }
            }
        }
        if var devices = try? top.nestedUnkeyedContainer(forKey: "devices") {
            var index = 0
            while !devices.isAtEnd {
                if let device = try? devices.nestedContainer(keyedBy: BodyKey.self) {
                    try Input.rejectUnknownKeys(device.allKeys, known: Input.jobDeviceKeys, at: "devices[\(index)]")
                } else if (try? devices.decode(Skipped.self)) == nil {
                    break
                }
                index += 1
            }
        }
        guard let org = try top.decodeIfPresent(OrgID.self, forKey: "org") ?? decoder.userInfo[Self.org] as? OrgID
        else { throw APIProblem.badRequest("org", "required") }
        // The fields of `Input.jobKeys`, decoded as `PushJob`'s own decoding does (a unit test holds them equal).
        job = PushJob(
            id: try top.decodeIfPresent(JobID.self, forKey: "id"), org: org,
            app: try top.decode(AppName.self, forKey: "app"),
            recipients: try top.decodeIfPresent([RecipientID].self, forKey: "recipients"),
            devices: try top.decodeIfPresent([JobDevice].self, forKey: "devices"),
            notification: try top.decode(VolleyCore.Notification.self, forKey: "notification"),
            apns: try top.decodeIfPresent(JSONValue.self, forKey: "apns"),
            fcm: try top.decodeIfPresent(JSONValue.self, forKey: "fcm"),
            platforms: try top.decodeIfPresent([Platform].self, forKey: "platforms"))
        job.debug = try top.decodeIfPresent(Bool.self, forKey: "debug")
    }

    /// Any key of a JSON object.
    struct BodyKey: CodingKey, ExpressibleByStringLiteral {
        var stringValue: String
        var intValue: Int? { nil }
        init(stringValue: String) { self.stringValue = stringValue }
        init?(intValue: Int) { nil }
        init(stringLiteral value: String) { stringValue = value }
    }

    /// Moves an unkeyed container past one element of any type.
    private struct Skipped: Decodable {
        init(from decoder: any Decoder) throws {}
    }
}
