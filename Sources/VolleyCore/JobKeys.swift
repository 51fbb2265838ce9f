import Foundation

/// The keys a job's JSON may carry. A key outside these sets (a typo such as `titel`, or something Volley does not
/// do, such as `sendAfter`) refuses the job instead of being dropped without a word. Free-form objects (`data`, the raw
/// `apns` / `fcm` payloads, the language tags of `localized`) are not checked.
public enum JobKeys {
    public static let job: Set<String> = [
        "id", "org", "app", "recipients", "exclude", "devices", "notification", "apns", "fcm", "platforms", "shard",
        "debug",
        "salesforcePayload", "inbox", "notificationId", "templateId", "customData", "sendAt",
        "deliverAtLocalTime", "throttlePerMinute", "enableFrequencyCap", "tracking",
    ]
    public static let notification: Set<String> = [
        "title", "subtitle", "body", "localized", "sound", "badge", "badgeIncrement", "data", "contentAvailable",
        "mutableContent", "category", "threadId", "collapseId", "interruptionLevel", "relevanceScore",
        "targetContentId", "ttl", "priority", "pushType", "imageUrl", "url", "channelId", "type", "targetId", "apns",
        "fcm", "targetPageRef",
    ]
    public static let localizedText: Set<String> = ["title", "subtitle", "body"]
    public static let device: Set<String> = ["platform", "token", "environment"]
    public static let shard: Set<String> = ["parent", "index", "count"]
    /// An object entry of `recipients` or `exclude` (`{"segment": "<id>"}`, `{"all": true}`).
    public static let recipientEntry: Set<String> = RecipientEntry.keys

    /// The key sets one reader checks a job against, level by level.
    public struct Schema: Sendable {
        public var job: Set<String>
        public var notification: Set<String>
        public var localizedText: Set<String>
        public var device: Set<String>
        public var shard: Set<String>
        public init(
            job: Set<String>, notification: Set<String>, localizedText: Set<String>, device: Set<String>,
            shard: Set<String>
        ) {
            self.job = job
            self.notification = notification
            self.localizedText = localizedText
            self.device = device
            self.shard = shard
        }

        /// Every key a job on the stream may carry: what workers accept.
        public static let stream = Schema(
            job: JobKeys.job, notification: JobKeys.notification, localizedText: JobKeys.localizedText,
            device: JobKeys.device, shard: JobKeys.shard)
    }

    /// Every unknown key of a job's JSON object, each with its path: the top level first, then `notification`, its
    /// `localized` texts, `devices`, `shard` and the object entries of `recipients` and `exclude`, each level's keys
    /// sorted. Free-form maps (`data`, `apns`, `fcm`) are
    /// not checked; a member of the wrong kind is left to decoding.
    public static func unknownKeys(in job: [String: JSONValue], schema: Schema = .stream) -> [UnknownKey] {
        var out = check(job, known: schema.job, at: "")
        if case .object(let n)? = job["notification"] {
            out += check(n, known: schema.notification, at: "notification")
            if case .object(let localized)? = n["localized"] {
                for (language, text) in localized.sorted(by: { $0.key < $1.key }) {
                    if case .object(let text) = text {
                        out += check(text, known: schema.localizedText, at: "notification.localized.\(language)")
                    }
                }
            }
        }
        if case .array(let devices)? = job["devices"] {
            for (i, d) in devices.enumerated() {
                if case .object(let d) = d { out += check(d, known: schema.device, at: "devices[\(i)]") }
            }
        }
        if case .object(let s)? = job["shard"] { out += check(s, known: schema.shard, at: "shard") }
        for list in ["recipients", "exclude"] {
            guard case .array(let entries)? = job[list] else { continue }
            for (i, e) in entries.enumerated() {
                if case .object(let e) = e { out += check(e, known: recipientEntry, at: "\(list)[\(i)]") }
            }
        }
        return out
    }

    /// Unknown keys of a job given as JSON text; nil when the text is not a JSON object (decoding says why).
    public static func unknownKeys(inJSON text: some Sequence<UInt8>) -> [UnknownKey]? {
        guard case .object(let job)? = try? JSONValue(parsing: text) else { return nil }
        return unknownKeys(in: job)
    }

    /// Unknown keys of one JSON object of a fixed shape (an import line, a `--notification` argument), each with a
    /// "did you mean": records refuse a key they do not know instead of dropping it (`"activ": false` must not
    /// import an active user).
    public static func unknownKeys(in object: [String: JSONValue], known: Set<String>) -> [UnknownKey] {
        check(object, known: known, at: "")
    }

    private static func check(_ object: [String: JSONValue], known: Set<String>, at path: String) -> [UnknownKey] {
        var unknown: [String] = []
        for key in object.keys where !known.contains(key) { unknown.append(key) }
        if unknown.isEmpty { return [] }
        return unknown.sorted().map {
            UnknownKey(path: path.isEmpty ? $0 : "\(path).\($0)", suggestion: KeySuggestion.closest(to: $0, in: known))
        }
    }
}

/// A key that is not part of the schema it appeared in.
public struct UnknownKey: Sendable, Hashable, CustomStringConvertible {
    /// Where it is: `notification.sendAt`, `devices[2].tokn`.
    public var path: String
    /// The known key it most probably meant.
    public var suggestion: String?
    public init(path: String, suggestion: String?) {
        self.path = path
        self.suggestion = suggestion
    }
    public var description: String {
        "'\(path)'" + (suggestion.map { " (did you mean '\($0)'?)" } ?? "")
    }
}

/// "Did you mean": the known key nearest a mistyped one, for configuration files, jobs and API bodies alike.
public enum KeySuggestion {
    /// The closest of `known` to `key`: a case-insensitive match first, else the smallest edit distance when it is
    /// at most a third of the key's length (at least 1), else nil. Ties go to the alphabetically first.
    public static func closest(to key: String, in known: some Collection<String>) -> String? {
        let lower = key.lowercased()
        if let same = known.sorted().first(where: { $0.lowercased() == lower }) { return same }
        let limit = max(1, key.count / 3)
        var best: (distance: Int, key: String)?
        for candidate in known.sorted() {
            let d = editDistance(lower, candidate.lowercased())
            if d <= limit, d < (best?.distance ?? .max) { best = (d, candidate) }
        }
        return best?.key
    }

    /// Edit distance counting insertions, deletions, substitutions and swaps of two neighbours (`titel` → `title`
    /// is 1): the optimal string alignment distance.
    public static func editDistance(_ a: String, _ b: String) -> Int {
        let a = Array(a)
        let b = Array(b)
        if a.isEmpty { return b.count }
        if b.isEmpty { return a.count }
        var d = [[Int]](repeating: [Int](repeating: 0, count: b.count + 1), count: a.count + 1)
        for i in 0...a.count { d[i][0] = i }
        for j in 0...b.count { d[0][j] = j }
        for i in 1...a.count {
            for j in 1...b.count {
                let cost = a[i - 1] == b[j - 1] ? 0 : 1
                d[i][j] = min(d[i - 1][j] + 1, d[i][j - 1] + 1, d[i - 1][j - 1] + cost)
                if i > 1, j > 1, a[i - 1] == b[j - 2], a[i - 2] == b[j - 1] {
                    d[i][j] = min(d[i][j], d[i - 2][j - 2] + 1)
                }
            }
        }
        return d[a.count][b.count]
    }
}
