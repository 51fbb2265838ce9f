import Foundation
import Hummingbird
import VolleyCore

/// Turns request bodies into values, or into a 400 that names the field at fault.
enum Input {
    /// What `POST /v1/jobs` takes: a job as producers write it, with the keys workers accept (`JobKeys`), less
    /// `shard`, which workers set when they split a campaign. Anything else is a 400 naming it.
    static let jobSchema = JobKeys.Schema(
        job: JobKeys.job.subtracting(["shard"]), notification: JobKeys.notification,
        localizedText: JobKeys.localizedText, device: JobKeys.device, shard: [])

    /// Reads a JSON object body with Volley's one JSON reader (`JSONValue(parsing:)`, the job reader's: RFC 8259
    /// only, so no trailing commas, comments or single quotes); a 400 naming `body` when it is not one.
    static func object(_ data: Data) throws -> JSONObjectReader {
        guard !data.isEmpty else { throw APIProblem.badRequest("body", "the request needs a JSON object body") }
        let parsed: JSONValue
        do { parsed = try JSONValue(parsing: data) } catch {
            throw APIProblem.badRequest("body", "malformed JSON: \(error)")
        }
        guard case .object = parsed else { throw APIProblem.badRequest("body", "the body must be a JSON object") }
        return try fields { () throws(JSONFieldError) in try JSONObjectReader(parsed, at: []) }
    }

    /// Runs a reading of fields, turning a field's fault into a 400 naming it (`notification.title`, `ttlSeconds`).
    static func fields<T>(_ read: () throws(JSONFieldError) -> T) throws -> T {
        do { return try read() } catch { throw APIProblem.badRequest(error.field, error.message) }
    }

    /// Reads a `JSONReadable` body (a job, a notification) with the same reader; a 400 names the field at fault.
    static func read<T: JSONReadable>(_ type: T.Type, from data: Data) throws -> T {
        let parsed: JSONValue
        do { parsed = try JSONValue(parsing: data) } catch {
            throw APIProblem.badRequest("body", "malformed JSON: \(error)")
        }
        return try fields { () throws(JSONFieldError) in try T(json: parsed, at: []) }
    }

    /// `data`, a UTF-8 JSON object without the keys of `members`, as text with each `"key": "value"` added in front
    /// of its first member; nil when the body does not start with `{` after white space (another encoding), for the
    /// caller to serialise instead. The text is the only allocation: it is the job's stream entry, made on every job
    /// POST.
    static func addingMembers(_ members: [(key: String, value: String)], to data: Data) -> String? {
        data.withUnsafeBytes { (bytes: UnsafeRawBufferPointer) -> String? in
            func isSpace(_ b: UInt8) -> Bool { b == 0x20 || b == 0x09 || b == 0x0A || b == 0x0D }
            guard let open = bytes.firstIndex(where: { !isSpace($0) }), bytes[open] == UInt8(ascii: "{") else {
                return nil
            }
            let rest = bytes[(open + 1)...]
            let empty = rest.first(where: { !isSpace($0) }) == UInt8(ascii: "}")
            // At most 6 bytes per byte of a key or value (`\u00XX`), and `"":"",` around each member.
            let most = members.reduce(bytes.count + 1) { $0 + 6 * ($1.key.utf8.count + $1.value.utf8.count) + 6 }
            return String(unsafeUninitializedCapacity: most) { out in
                var at = 0
                func copy(_ part: some Collection<UInt8>) {
                    at += UnsafeMutableBufferPointer(rebasing: out[at...]).initialize(fromContentsOf: part)
                }
                copy(bytes[...open])
                for (i, m) in members.enumerated() {
                    copy(i > 0 ? #",""#.utf8 : #"""#.utf8)
                    at += writeJSONStringContent(m.key, into: UnsafeMutableBufferPointer(rebasing: out[at...]))
                    copy(#"":""#.utf8)
                    at += writeJSONStringContent(m.value, into: UnsafeMutableBufferPointer(rebasing: out[at...]))
                    copy(#"""#.utf8)
                }
                if !empty && !members.isEmpty { copy(",".utf8) }
                copy(rest)
                return at
            }
        }
    }

    /// A 400 naming the first of `keys` (sorted) outside `known`.
    static func rejectUnknownKeys(_ keys: some Collection<String>, known: Set<String>, at path: String) throws {
        if let unknown = keys.filter({ !known.contains($0) }).min() {
            let field = path.isEmpty ? unknown : "\(path).\(unknown)"
            throw APIProblem.badRequest(
                field, "unknown key '\(unknown)'; known keys: \(known.sorted().joined(separator: ", "))")
        }
    }

    /// Ids that travel in Redis key names and URLs: 1–128 of letters, digits and `._:-`.
    /// A job id as the API hands it out or derives it (a schedule's run `<schedule>-<seconds>`, a Salesforce
    /// notification's job per app `<key>:<app>`, a campaign's shard `<job>.s<n>`): the characters of `isSafeID`,
    /// up to 512 bytes, so every job that can be sent can be followed and cancelled.
    static func isJobID(_ s: String) -> Bool { isSafeID(s, maxBytes: 512) }

    static func isSafeID(_ s: String, maxBytes: Int = 128) -> Bool {
        !s.isEmpty && s.utf8.count <= maxBytes
            && s.unicodeScalars.allSatisfy {
                ($0.isASCII && (CharacterSet.alphanumerics.contains($0))) || "._:-".unicodeScalars.contains($0)
            }
    }
}

/// A job body (`POST /v1/jobs`) read in one parse: its keys checked against the job's schema, where an unknown key is
/// a 400 naming it (free-form maps such as `data`, `apns`, `fcm` are not checked), then the job read from the same
/// parse by `PushJob`'s own decoding. A body without `org` takes the caller's. `keys` says which top-level keys the
/// body carries, so the caller can add `org` and `id` without a second key of the same name.
struct JobBody {
    var job: PushJob
    var keys: Dictionary<String, JSONValue>.Keys

    /// A job read elsewhere (a schedule's `job`), with the keys its object has.
    init(job: PushJob, keys: Dictionary<String, JSONValue>.Keys) {
        self.job = job
        self.keys = keys
    }

    init(_ data: Data, org: OrgID?) throws {
        let parsed: JSONValue
        do { parsed = try JSONValue(parsing: data) } catch {
            throw APIProblem.badRequest("body", "malformed JSON: \(error)")
        }
        guard case .object(let top) = parsed else {
            throw APIProblem.badRequest("body", "the body must be a JSON object")
        }
        // A value of the wrong type is left to the job's own decoding below, which names the field and the type.
        if let unknown = JobKeys.unknownKeys(in: top, schema: Input.jobSchema).first {
            throw APIProblem.badRequest(
                unknown.path, "unknown key" + (unknown.suggestion.map { "; did you mean '\($0)'?" } ?? ""))
        }
        do { job = try PushJob(json: parsed, defaultOrg: org) } catch {
            throw APIProblem.badRequest(error.field, error.message)
        }
        keys = top.keys
    }
}

extension HTTPFields.Element.Name {
    /// Made once: a name built per request validates and lowercases its text each time.
    static let idempotencyKey = Self("Idempotency-Key")!
    static let idempotentReplayed = Self("Idempotent-Replayed")!
}

/// The query parameters lists take, read one way: a bad one is a 400 naming it.
enum ListQuery {
    /// `since`: an RFC 3339 time.
    static func since(_ text: String?) throws -> Date? {
        guard let text else { return nil }
        do { return try RFC3339.parse(text) } catch {
            throw APIProblem.badRequest("since", "\(error) (for example 2026-03-01T00:00:00Z)")
        }
    }

    /// `limit`: a whole number from 1 to `max`; `default` without one.
    static func limit(_ text: String?, max: Int, default fallback: Int) throws -> Int {
        guard let text else { return fallback }
        guard let n = Int(text), (1...max).contains(n) else {
            throw APIProblem.badRequest("limit", "an integer from 1 to \(max)")
        }
        return n
    }
}
