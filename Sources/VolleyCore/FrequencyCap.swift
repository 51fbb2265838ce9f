import Foundation

// Frequency caps: how many visible notifications one person may be pushed in a rolling window, per org and
// optionally per notification type (OneSignal's `enable_frequency_cap`). A notification to a user at a cap is pushed
// to none of the user's devices and is still stored in the inbox, as Salesforce does when the push quota is used.

/// A rolling window's length as users write it: a whole number and a unit, `30m`, `1h`, `7d`.
public struct FrequencyWindow: Sendable, Hashable, CustomStringConvertible {
    public static let minSeconds = 60
    /// 30 days: a user's record of sends is kept as long as the longest window, so this bounds its memory.
    public static let maxSeconds = 30 * 86_400

    public let seconds: Int
    /// The form it was written in (`90m` stays `90m`).
    public let text: String

    /// Parses `<n>m`, `<n>h` or `<n>d`, between one minute and 30 days. The error says what to write.
    public init(parsing text: String) throws(FrequencyCapError) {
        let shape = "a whole number of minutes, hours or days such as 30m, 1h or 7d (1m to 30d)"
        guard let unit = text.last, text.count >= 2, let n = Int(text.dropLast()), n > 0,
            text.dropLast().allSatisfy(\.isASCII)
        else { throw FrequencyCapError("window", "\(shape), got '\(text)'") }
        let per: Int
        switch unit {
        case "m": per = 60
        case "h": per = 3600
        case "d": per = 86_400
        default: throw FrequencyCapError("window", "\(shape), got '\(text)'")
        }
        let (seconds, overflow) = n.multipliedReportingOverflow(by: per)
        guard !overflow, seconds >= Self.minSeconds, seconds <= Self.maxSeconds else {
            throw FrequencyCapError("window", "\(shape), got '\(text)'")
        }
        self.seconds = seconds
        self.text = text
    }

    public var description: String { text }
}

/// One cap: at most `max` visible notifications in any rolling `window`, counting every type (no `type`) or only
/// notifications of `type`.
public struct FrequencyCapRule: Sendable, Hashable, Codable {
    public static let maxMax = 10_000
    /// Rules per org.
    public static let maxRules = 20

    public var window: FrequencyWindow
    public var max: Int
    /// The notification type (`notification.type`) the rule counts and caps; nil: every visible notification.
    public var type: String?

    public init(window: FrequencyWindow, max: Int, type: String? = nil) {
        self.window = window
        self.max = max
        self.type = type
    }

    /// A rule from its fields as given; errors name the field under `at` (`rules[2].max`).
    public static func make(window: String?, max: Int?, type: String?, at path: String) throws(FrequencyCapError)
        -> FrequencyCapRule
    {
        guard let window else { throw FrequencyCapError("\(path).window", "required: 30m, 1h, 7d …") }
        let w: FrequencyWindow
        do { w = try FrequencyWindow(parsing: window) } catch {
            throw FrequencyCapError("\(path).window", error.message)
        }
        guard let max else { throw FrequencyCapError("\(path).max", "required: notifications allowed in the window") }
        guard max >= 1, max <= maxMax else {
            throw FrequencyCapError("\(path).max", "must be 1 to \(maxMax), got \(max)")
        }
        if let type, type.isEmpty || type.count > 128 {
            throw FrequencyCapError("\(path).type", "a notification type of 1 to 128 characters, or left out")
        }
        return FrequencyCapRule(window: w, max: max, type: type)
    }

    /// Checks a whole list: its length, and no two rules for the same window and type (the stricter would hide the
    /// other). `at` names the list (`rules`, `orgs[0].frequencyCaps`).
    public static func check(_ rules: [FrequencyCapRule], at path: String) throws(FrequencyCapError) {
        if rules.count > maxRules {
            throw FrequencyCapError(path, "at most \(maxRules) rules per org, got \(rules.count)")
        }
        var seen = Set<String>()
        for (i, r) in rules.enumerated() where !seen.insert("\(r.window.seconds)|\(r.type ?? "")").inserted {
            throw FrequencyCapError(
                "\(path)[\(i)]",
                "a second rule for window \(r.window)" + (r.type.map { " and type \($0)" } ?? " (every type)"))
        }
    }

    /// Reads a list of rules from JSON (`[{"window": "1h", "max": 3, "type": "ORDER_SHIPPED"}]`).
    public static func list(json: JSONValue, at path: String) throws(FrequencyCapError) -> [FrequencyCapRule] {
        guard case .array(let items) = json else { throw FrequencyCapError(path, "expected a list of rules") }
        var out: [FrequencyCapRule] = []
        for (i, item) in items.enumerated() {
            let p = "\(path)[\(i)]"
            guard case .object(let o) = item else { throw FrequencyCapError(p, "expected an object") }
            if let unknown = o.keys.sorted().first(where: { !["window", "max", "type"].contains($0) }) {
                throw FrequencyCapError("\(p).\(unknown)", "unknown key; a rule has window, max and type")
            }
            func string(_ k: String) throws(FrequencyCapError) -> String? {
                switch o[k] {
                case nil, .null?: return nil
                case .string(let s)?: return s
                default: throw FrequencyCapError("\(p).\(k)", "expected a string")
                }
            }
            var max: Int?
            switch o["max"] {
            case nil, .null?: max = nil
            case .number(let n)?:
                guard let v = n.intValue else { throw FrequencyCapError("\(p).max", "expected a whole number") }
                max = v
            default: throw FrequencyCapError("\(p).max", "expected a whole number")
            }
            out.append(try make(window: try string("window"), max: max, type: try string("type"), at: p))
        }
        try check(out, at: path)
        return out
    }

    /// The JSON form: `{"max": 3, "type": "…", "window": "1h"}`.
    public var json: JSONValue {
        var o: [String: JSONValue] = ["window": .string(window.text), "max": .number(JSONNumber(max))]
        if let type { o["type"] = .string(type) }
        return .object(o)
    }

    enum CodingKeys: String, CodingKey { case window, max, type }

    public init(from decoder: any Decoder) throws {
        let c = try decoder.container(keyedBy: CodingKeys.self)
        let window = try c.decode(String.self, forKey: .window)
        do {
            self = try Self.make(
                window: window, max: try c.decode(Int.self, forKey: .max),
                type: try c.decodeIfPresent(String.self, forKey: .type), at: "rule")
        } catch let e as FrequencyCapError {
            throw DecodingError.dataCorrupted(.init(codingPath: c.codingPath, debugDescription: e.description))
        }
    }

    public func encode(to encoder: any Encoder) throws {
        var c = encoder.container(keyedBy: CodingKeys.self)
        try c.encode(window.text, forKey: .window)
        try c.encode(max, forKey: .max)
        try c.encodeIfPresent(type, forKey: .type)
    }
}

/// A rule or window that cannot be used, naming its field.
public struct FrequencyCapError: Error, Sendable, Hashable, CustomStringConvertible {
    public let field: String
    public let message: String
    public init(_ field: String, _ message: String) {
        self.field = field
        self.message = message
    }
    public var description: String { "\(field): \(message)" }
}

/// What one notification must pass for each user: the org's rules that apply to its type, grouped by what they
/// count. Rules without a type count every visible notification (scope nil); rules with the notification's type
/// count only that type's.
public struct FrequencyCapPlan: Sendable, Hashable {
    public struct Limit: Sendable, Hashable {
        public var windowSeconds: Int
        public var max: Int
    }
    public struct Scope: Sendable, Hashable {
        /// nil: every visible notification; else one type's.
        public var type: String?
        public var limits: [Limit]
        /// Sends older than this no longer count for any limit of the scope.
        public var longestSeconds: Int { limits.map(\.windowSeconds).max() ?? 0 }
    }

    /// The notification id (`nid`, the inbox entry's id): a user is counted once per notification, however often
    /// the job is delivered and however many apps send it.
    public var notification: String
    public var scopes: [Scope]

    /// nil when no rule applies to a notification of `type`: nothing to check and nothing to record.
    public init?(rules: [FrequencyCapRule], type: String?, notification: String) {
        var all: [Limit] = []
        var typed: [Limit] = []
        for r in rules {
            let limit = Limit(windowSeconds: r.window.seconds, max: r.max)
            if r.type == nil {
                all.append(limit)
            } else if let t = type, r.type == t {
                typed.append(limit)
            }
        }
        var scopes: [Scope] = []
        if !all.isEmpty { scopes.append(Scope(type: nil, limits: all)) }
        if !typed.isEmpty { scopes.append(Scope(type: type, limits: typed)) }
        if scopes.isEmpty { return nil }
        self.notification = notification
        self.scopes = scopes
    }
}

/// One user's recorded sends, per scope (nil: every type), each a notification id and when it was admitted: the
/// state the decision reads and writes. The Redis script (`RecipientScripts.frequencyCapAdmit`) keeps the same
/// state in one sorted set per scope and decides the same way.
public struct FrequencyCapHistory: Sendable, Hashable {
    public private(set) var sends: [String?: [String: Date]] = [:]
    public init() {}

    /// Decides whether `plan`'s notification may be pushed to this user at `now`, and records it when it may.
    ///
    /// 1. Sends at or before `now - longest window` of a scope are dropped (they count for nothing any more).
    /// 2. A notification already recorded in any scope is admitted again and not counted twice (a redelivered job,
    ///    a second app sending the same `nid`).
    /// 3. Otherwise, when a scope already holds `max` sends within the last `window` seconds for any of its limits,
    ///    the user is capped and nothing is recorded.
    /// 4. Otherwise the notification is recorded in every scope at `now` and admitted.
    public mutating func admit(_ plan: FrequencyCapPlan, now: Date) -> Bool {
        for scope in plan.scopes {
            let horizon = now.addingTimeInterval(-Double(scope.longestSeconds))
            if let recorded = sends[scope.type] { sends[scope.type] = recorded.filter { $0.value > horizon } }
        }
        if plan.scopes.contains(where: { sends[$0.type]?[plan.notification] != nil }) { return true }
        for scope in plan.scopes {
            let recorded = sends[scope.type] ?? [:]
            for limit in scope.limits {
                let since = now.addingTimeInterval(-Double(limit.windowSeconds))
                if recorded.values.filter({ $0 > since }).count >= limit.max { return false }
            }
        }
        for scope in plan.scopes { sends[scope.type, default: [:]][plan.notification] = now }
        return true
    }
}

/// Checks and records sends against the caps, for the whole fleet at once.
public protocol FrequencyCapStore: Sendable {
    /// For each of `users`, in order: true when `plan`'s notification may be pushed to them (admitted now and
    /// recorded, or recorded by an earlier delivery of the same notification), false when a cap holds. The users of
    /// one call are decided in one atomic step (`FrequencyCapHistory.admit` per user), so workers racing on the same
    /// users never admit one past a cap.
    func admit(org: OrgID, plan: FrequencyCapPlan, users: [UserID], now: Date) throws -> [Bool]
}

/// The rules set through the API (`PUT /v1/frequency-caps`), for the worker: every org's at once.
public protocol FrequencyCapRuleReader: Sendable {
    func storedRules() throws -> [OrgID: [FrequencyCapRule]]
}

/// The rules in force per org. The API's stored rules replace the configuration's (`orgs[].frequencyCaps`) for that
/// org, an empty stored list included (no caps); an org the API never set keeps the file's. Stored rules are read
/// for every org in one call, at most once per `refreshSeconds` on the worker's clock, so a job pays no round trip
/// of its own and a change through the API holds within `refreshSeconds`.
public final class FrequencyCapRulebook: @unchecked Sendable {
    public static let defaultRefreshSeconds: Double = 5
    public let configured: [OrgID: [FrequencyCapRule]]
    public let refreshSeconds: Double
    private let stored: (any FrequencyCapRuleReader)?
    private let clock: any WallClock
    private let lock = NSLock()
    private var table: [OrgID: [FrequencyCapRule]] = [:]
    private var readAt: Date?

    public init(
        configured: [OrgID: [FrequencyCapRule]], stored: (any FrequencyCapRuleReader)?, clock: any WallClock,
        refreshSeconds: Double = FrequencyCapRulebook.defaultRefreshSeconds
    ) {
        self.configured = configured
        self.stored = stored
        self.clock = clock
        self.refreshSeconds = max(0, refreshSeconds)
    }

    /// The org's rules now (empty: no caps).
    public func rules(for org: OrgID) throws -> [FrequencyCapRule] {
        guard let stored else { return configured[org] ?? [] }
        return try lock.withLock {
            let now = clock.now()
            if readAt.map({ now.timeIntervalSince($0) >= refreshSeconds || now < $0 }) ?? true {
                table = try stored.storedRules()
                readAt = now
            }
            return table[org] ?? configured[org] ?? []
        }
    }
}

/// The caps as the recipient step applies them: the rules in force and the store that counts.
public struct FrequencyCaps: Sendable {
    public let rulebook: FrequencyCapRulebook
    public let store: any FrequencyCapStore

    public init(rulebook: FrequencyCapRulebook, store: any FrequencyCapStore) {
        self.rulebook = rulebook
        self.store = store
    }

    /// What `job`'s notification must pass, or nil when no cap applies: the job bypasses them
    /// (`enableFrequencyCap: false`), its notification is not visible (a silent, background push, Volley-shaped or
    /// a raw payload: `Notification.isVisible`), or no rule of its org applies to its type.
    public func plan(for job: PushJob, notification id: String) throws -> FrequencyCapPlan? {
        if job.enableFrequencyCap == false { return nil }
        let n = job.effectiveNotification
        if !n.isVisible { return nil }
        let rules = try rulebook.rules(for: job.org)
        if rules.isEmpty { return nil }
        return FrequencyCapPlan(rules: rules, type: n.type, notification: id)
    }
}

extension Notification {
    /// False for a push the user does not see: a silent one (content-available only), Volley-shaped (`isSilent`)
    /// or a raw payload (`isRawSilent`: the Connect push resource's, an Apex-style `apns`), or an APNs `background`
    /// push. Frequency caps count and cap visible pushes only.
    public var isVisible: Bool { !isSilent && !isRawSilent && pushType != "background" }

    /// True for a silent push given as a raw payload: the notification has no text or image of its own, its raw
    /// APNs payload is silent (`apnsPayloadIsSilent`, which the APNs encoder sends as `background`), and its raw
    /// FCM payload, if any, has no notification block (`notification` or `android.notification`), so neither
    /// platform shows anything. A raw FCM payload alone (no `apns`) is not judged silent: a data message may be
    /// one the app renders.
    public var isRawSilent: Bool {
        guard title == nil, subtitle == nil, body == nil, imageUrl == nil, localized?.isEmpty != false,
            Self.apnsPayloadIsSilent(apns)
        else { return false }
        guard let fcm else { return true }
        let message = fcm["message"] ?? fcm
        return message["notification"] == nil && message["android"]?["notification"] == nil
    }

    /// True when a raw APNs payload is a silent push: its `aps` holds `content-available` and nothing else (no
    /// alert, sound or badge). The one rule: the APNs encoder sends such a payload as `background` with priority 5.
    public static func apnsPayloadIsSilent(_ raw: JSONValue?) -> Bool {
        guard let aps = raw?["aps"]?.objectValue else { return false }
        return aps.count == 1 && aps["content-available"] != nil
    }
}

/// The org's frequency-cap rules as the API reads and replaces them (`/v1/frequency-caps`).
public protocol FrequencyCapRepository: Sendable {
    /// The org's stored rules, or nil when none were set through the API (the configuration's hold).
    func rules(org: OrgID) async throws -> [FrequencyCapRule]?
    /// Replaces the org's stored rules (an empty list turns the org's caps off, the configuration's included).
    func setRules(org: OrgID, _ rules: [FrequencyCapRule]) async throws
    /// Removes the org's stored rules, so the configuration's hold again; true when there were some.
    func removeRules(org: OrgID) async throws -> Bool
}
