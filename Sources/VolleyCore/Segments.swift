import Foundation

/// A segment's id in its org: 1–128 letters, digits and `. _ : -` (the characters of a job or template id).
public struct SegmentID: StringIdentifier {
    public let rawValue: String
    public init(_ rawValue: String) { self.rawValue = rawValue }

    public var isValid: Bool { StoredTemplate.isValidID(rawValue) }
}

/// An audience by attribute (`PUT /v1/segments/{id}`): the users whose attributes match `all` or `any` of the
/// filters. A job names it in `recipients` or `exclude` as `{"segment": "<id>"}`; who matches is decided when the
/// job is resolved, from the attributes stored then.
///
/// Matching is on the attributes' text as stored, case-sensitive (`Berlin` is not `berlin`). `gt` and `lt` compare
/// what `AttributeScore` reads: a number with a number, an RFC 3339 time with a time, as such; a value of the other
/// kind, or of neither, never matches. `ne` matches users who have the attribute with another value (a user without
/// it matches `notExists`); `notExists` matches the org's known users (directory user records and users given
/// attributes) without it.
public struct Segment: Sendable, Hashable {
    public var id: SegmentID
    public var match: Match
    public var filters: [SegmentFilter]

    public enum Match: String, Sendable, Hashable, CaseIterable {
        /// Every filter holds (intersection).
        case all
        /// At least one filter holds (union).
        case any
    }

    public init(id: SegmentID, match: Match, filters: [SegmentFilter]) {
        self.id = id
        self.match = match
        self.filters = filters
    }

    /// Filters per segment: each is one set operation on the index when a job is resolved.
    public static let maxFilters = 20
    /// Segments one org may keep.
    public static let maxPerOrg = 1000
    /// The keys of a segment's body; `id`, when given, must be the path's.
    public static let bodyKeys: Set<String> = ["id", "match", "filters"]

    /// Reads a segment's definition (`{"match", "filters"}`; `match` defaults to `all`), checking every limit. The
    /// error names the field: `filters[1].op`, `filters[0].value[2]`.
    public init(id: SegmentID, json: JSONValue, at path: [JSONPathComponent] = []) throws(JSONFieldError) {
        let o = try JSONObjectReader(json, at: path)
        if let unknown = o.members.keys.sorted().first(where: { !Self.bodyKeys.contains($0) }) {
            throw JSONFieldError(
                path: path + [.key(unknown)],
                problem: .expected("one of the keys match, filters"))
        }
        self.id = id
        match = try o.oneOf("match", Match.self) ?? .all
        guard case .array(let list)? = o.value("filters") else {
            if o.value("filters") == nil { throw JSONFieldError(path: path + [.key("filters")], problem: .missing) }
            throw JSONFieldError(path: path + [.key("filters")], problem: .expected("an array of filters"))
        }
        if list.isEmpty {
            throw JSONFieldError(path: path + [.key("filters")], problem: .expected("at least one filter"))
        }
        if list.count > Self.maxFilters {
            throw JSONFieldError(
                path: path + [.key("filters")],
                problem: .expected("at most \(Self.maxFilters) filters, not \(list.count)"))
        }
        var filters: [SegmentFilter] = []
        for (i, f) in list.enumerated() {
            filters.append(try SegmentFilter(json: f, at: path + [.key("filters"), .index(i)]))
        }
        self.filters = filters
    }

    /// The definition as stored and as `GET` answers it without the id: `{"filters", "match"}`.
    public var definitionJSON: JSONValue {
        .object(["match": .string(match.rawValue), "filters": .array(filters.map(\.json))])
    }

    /// The segment as the API answers it: `{"filters", "id", "match"}`.
    public var json: JSONValue {
        .object(["id": .string(id.rawValue), "match": .string(match.rawValue), "filters": .array(filters.map(\.json))])
    }

    /// Whether a user with `attributes` (nil: none stored) is in the segment: the rule the Redis index answers with
    /// set operations, for a user the org knows.
    public func matches(_ attributes: [String: String]?) -> Bool {
        switch match {
        case .all: filters.allSatisfy { $0.matches(attributes) }
        case .any: filters.contains { $0.matches(attributes) }
        }
    }
}

/// One condition on one attribute.
public struct SegmentFilter: Sendable, Hashable {
    public enum Operator: String, Sendable, Hashable, CaseIterable {
        case eq, ne, `in`, exists, notExists, gt, lt
    }

    /// What the operator compares with.
    public enum Operand: Sendable, Hashable {
        /// `exists`, `notExists`.
        case none
        /// `eq`, `ne`: the value as text.
        case value(String)
        /// `in`: the values.
        case values([String])
        /// `gt`, `lt`: the bound as `AttributeScore` reads it, and the JSON it was given as (a string or a number).
        case bound(AttributeScore, given: JSONValue)
    }

    public var attribute: String
    public var op: Operator
    public var operand: Operand

    public init(attribute: String, op: Operator, operand: Operand) {
        self.attribute = attribute
        self.op = op
        self.operand = operand
    }

    /// Values an `in` filter may list.
    public static let maxValues = 100
    public static let keys: Set<String> = ["attribute", "op", "value"]

    public init(json: JSONValue, at path: [JSONPathComponent]) throws(JSONFieldError) {
        let o = try JSONObjectReader(json, at: path)
        if let unknown = o.members.keys.sorted().first(where: { !Self.keys.contains($0) }) {
            throw JSONFieldError(
                path: path + [.key(unknown)], problem: .expected("one of the keys attribute, op, value"))
        }
        attribute = try o.required(o.string("attribute"), "attribute")
        guard UserAttributes.isValidKey(attribute) else {
            throw JSONFieldError(
                path: path + [.key("attribute")],
                problem: .expected(
                    "an attribute name: 1–\(UserAttributes.maxKeyLength) letters, digits, '_' and '-'"))
        }
        op = try o.required(o.oneOf("op", Operator.self), "op")
        let valuePath = path + [.key("value")]
        let value = o.value("value")
        func text(_ v: JSONValue, at p: [JSONPathComponent]) throws(JSONFieldError) -> String {
            guard case .string(let s) = v else { throw JSONFieldError(path: p, problem: .expected("a string")) }
            guard UserAttributes.characters(s) <= UserAttributes.maxValueCharacters else {
                throw JSONFieldError(
                    path: p,
                    problem: .expected(
                        "at most \(UserAttributes.maxValueCharacters) characters, not \(UserAttributes.characters(s))"))
            }
            return s
        }
        switch op {
        case .exists, .notExists:
            if value != nil {
                throw JSONFieldError(path: valuePath, problem: .expected("no value: \(op.rawValue) takes none"))
            }
            operand = .none
        case .eq, .ne:
            operand = .value(try text(try o.required(value, "value"), at: valuePath))
        case .in:
            guard case .array(let list) = try o.required(value, "value") else {
                throw JSONFieldError(path: valuePath, problem: .expected("an array of strings"))
            }
            if list.isEmpty { throw JSONFieldError(path: valuePath, problem: .expected("at least one value")) }
            if list.count > Self.maxValues {
                throw JSONFieldError(
                    path: valuePath, problem: .expected("at most \(Self.maxValues) values, not \(list.count)"))
            }
            var values: [String] = []
            for (i, v) in list.enumerated() { values.append(try text(v, at: valuePath + [.index(i)])) }
            operand = .values(values)
        case .gt, .lt:
            let given = try o.required(value, "value")
            let bound: AttributeScore?
            switch given {
            case .string(let s): bound = AttributeScore(s)
            case .number(let n): bound = AttributeScore(n.text)
            default: bound = nil
            }
            guard let bound else {
                throw JSONFieldError(
                    path: valuePath,
                    problem: .expected("a number or an RFC 3339 time (such as 42, \"2.5\" or \"2026-01-31T09:00:00Z\")")
                )
            }
            operand = .bound(bound, given: given)
        }
    }

    public var json: JSONValue {
        var o: [String: JSONValue] = ["attribute": .string(attribute), "op": .string(op.rawValue)]
        switch operand {
        case .none: break
        case .value(let v): o["value"] = .string(v)
        case .values(let v): o["value"] = .array(v.map(JSONValue.string))
        case .bound(_, let given): o["value"] = given
        }
        return .object(o)
    }

    /// Whether a user with `attributes` (nil: none) meets the filter.
    public func matches(_ attributes: [String: String]?) -> Bool {
        let stored = attributes?[attribute]
        switch (op, operand) {
        case (.exists, _): return stored != nil
        case (.notExists, _): return stored == nil
        case (.eq, .value(let v)): return stored == v
        case (.ne, .value(let v)): return stored.map { $0 != v } ?? false
        case (.in, .values(let v)): return stored.map { v.contains($0) } ?? false
        case (.gt, .bound(let b, _)):
            guard let s = stored.flatMap(AttributeScore.init), s.kind == b.kind else { return false }
            return s.value > b.value
        case (.lt, .bound(let b, _)):
            guard let s = stored.flatMap(AttributeScore.init), s.kind == b.kind else { return false }
            return s.value < b.value
        default: return false
        }
    }
}

/// How an attribute's text orders for `gt` and `lt`: a decimal number (`-?digits[.digits][e±digits]`, finite) as its
/// value, an RFC 3339 time (`RFC3339`, the one reader of instants) as milliseconds since 1970. No text is both: a
/// time has `-`, `T` and `:` where a number cannot. Anything else has no order and is only equal or not.
public struct AttributeScore: Sendable, Hashable {
    public enum Kind: String, Sendable, Hashable {
        case number
        case instant
    }
    public var kind: Kind
    /// The number, or the instant in milliseconds since 1970 (fraction kept).
    public var value: Double

    public init(kind: Kind, value: Double) {
        self.kind = kind
        self.value = value
    }

    /// nil when `text` is neither a number nor an RFC 3339 time.
    public init?(_ text: String) {
        if let n = Self.number(text) {
            self.init(kind: .number, value: n)
        } else if let d = RFC3339.date(text) {
            self.init(kind: .instant, value: d.timeIntervalSince1970 * 1000)
        } else {
            return nil
        }
    }

    /// The score as Redis reads it (a sorted set's score, a range bound): Swift's shortest round-tripping text.
    public var redisText: String { value.description }

    /// `-?[0-9]+(\.[0-9]+)?([eE][+-]?[0-9]+)?`, finite as a Double. (`Double(_:)` alone takes `inf`, `nan`, hex and
    /// a leading `+`, none of which an attribute means as a number.)
    static func number(_ text: String) -> Double? {
        var i = text.utf8.startIndex
        let u = text.utf8
        func digits() -> Int {
            var n = 0
            while i < u.endIndex, (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(u[i]) {
                n += 1
                i = u.index(after: i)
            }
            return n
        }
        if i < u.endIndex, u[i] == UInt8(ascii: "-") { i = u.index(after: i) }
        guard digits() > 0 else { return nil }
        if i < u.endIndex, u[i] == UInt8(ascii: ".") {
            i = u.index(after: i)
            guard digits() > 0 else { return nil }
        }
        if i < u.endIndex, u[i] == UInt8(ascii: "e") || u[i] == UInt8(ascii: "E") {
            i = u.index(after: i)
            if i < u.endIndex, u[i] == UInt8(ascii: "+") || u[i] == UInt8(ascii: "-") { i = u.index(after: i) }
            guard digits() > 0 else { return nil }
        }
        guard i == u.endIndex, let d = Double(text), d.isFinite else { return nil }
        return d
    }
}

/// One entry of a job's `recipients` or `exclude`: a directory id (user, group, queue, team), a stored segment
/// (`{"segment": "<id>"}`), or every active user with a device in the job's app (`{"all": true}`, recipients only).
public enum RecipientEntry: Sendable, Hashable, ExpressibleByStringLiteral, CustomStringConvertible, JSONWritable {
    case id(RecipientID)
    case segment(SegmentID)
    case all

    /// The keys an object entry may carry (exactly one of them).
    public static let keys: Set<String> = ["segment", "all"]

    public init(stringLiteral value: String) { self = .id(RecipientID(value)) }

    /// Reads one entry at `path` (`recipients[3]`); `allowsAll` false (for `exclude`) refuses `{"all": true}`.
    public init(json: JSONValue, at path: [JSONPathComponent], allowsAll: Bool = true) throws(JSONFieldError) {
        let shape =
            allowsAll
            ? "a string id, {\"segment\": \"<id>\"} or {\"all\": true}" : "a string id or {\"segment\": \"<id>\"}"
        switch json {
        case .string(let s):
            self = .id(RecipientID(s))
        case .object(let members):
            if let unknown = members.keys.sorted().first(where: { !Self.keys.contains($0) }) {
                throw JSONFieldError(path: path + [.key(unknown)], problem: .expected("one of the keys segment, all"))
            }
            guard members.count == 1, let (key, value) = members.first else {
                throw JSONFieldError(path: path, problem: .expected(shape))
            }
            if key == "segment" {
                guard case .string(let id) = value else {
                    throw JSONFieldError(path: path + [.key(key)], problem: .expected("a segment id (a string)"))
                }
                guard SegmentID(id).isValid else {
                    throw JSONFieldError(
                        path: path + [.key(key)],
                        problem: .expected("a segment id: 1–128 characters of letters, digits and . _ : -"))
                }
                self = .segment(SegmentID(id))
            } else {
                guard allowsAll else {
                    throw JSONFieldError(path: path + [.key(key)], problem: .expected("\(shape); exclude takes no all"))
                }
                guard value == .bool(true) else {
                    throw JSONFieldError(path: path + [.key(key)], problem: .expected("true"))
                }
                self = .all
            }
        default:
            throw JSONFieldError(path: path, problem: .expected(shape))
        }
    }

    public var json: JSONValue {
        switch self {
        case .id(let id): .string(id.rawValue)
        case .segment(let id): .object(["segment": .string(id.rawValue)])
        case .all: .object(["all": .bool(true)])
        }
    }

    public func encode(to encoder: any Encoder) throws { try json.encode(to: encoder) }

    /// The directory id, for an `id` entry.
    public var recipientID: RecipientID? { if case .id(let id) = self { id } else { nil } }
    /// The segment id, for a `segment` entry.
    public var segmentID: SegmentID? { if case .segment(let id) = self { id } else { nil } }

    /// How a report names an entry it could not resolve: the id, `segment:<id>`, or `all`.
    public var description: String {
        switch self {
        case .id(let id): id.rawValue
        case .segment(let id): "segment:\(id.rawValue)"
        case .all: "all"
        }
    }

    /// Reads a job's `recipients` or `exclude` array. (`validate()` checks their length; `exclude` is checked here
    /// too, so the API's answer names it rather than `recipients`.)
    static func list(_ o: JSONObjectReader, _ key: String, allowsAll: Bool) throws(JSONFieldError)
        -> [RecipientEntry]?
    {
        if !allowsAll, case .array(let a)? = o.value(key), a.count > PushJob.maxRecipients {
            throw JSONFieldError(
                path: o.path + [.key(key)],
                problem: .expected("at most \(PushJob.maxRecipients) entries, not \(a.count)"))
        }
        return try o.array(key) { (v, at) throws(JSONFieldError) in
            try RecipientEntry(json: v, at: at, allowsAll: allowsAll)
        }
    }
}

/// Whom one job's recipient step resolves: the entries of `recipients` less those of `exclude`, in the job's org
/// and app (`{"all": true}` is the app's users with a device).
public struct Audience: Sendable, Hashable {
    public var include: [RecipientEntry]
    public var exclude: [RecipientEntry]
    public var app: AppName

    public init(include: [RecipientEntry], exclude: [RecipientEntry] = [], app: AppName) {
        self.include = include
        self.exclude = exclude
        self.app = app
    }

    public init(job: PushJob) {
        self.init(include: job.recipients ?? [], exclude: job.exclude ?? [], app: job.app)
    }

    /// True when every entry is a directory id: what a resolver without segments can answer.
    public var isPlainIDs: Bool {
        include.allSatisfy { $0.recipientID != nil } && exclude.allSatisfy { $0.recipientID != nil }
    }
}

/// What `SegmentStore.put` did.
public enum SegmentPut: Sendable, Hashable {
    /// A new segment.
    case created(Segment)
    /// An existing segment, its definition replaced.
    case replaced(Segment)
    /// The org already has `Segment.maxPerOrg` segments and this id is not one of them: nothing was written.
    case limitReached
}

/// An org's segments as the API and the CLI change and count them. (The worker reads a job's segments through its
/// `DirectoryResolver`.)
public protocol SegmentStore: Sendable {
    /// Creates or replaces the segment; at most `maxCount` per org, checked in the same step as the write.
    func put(org: OrgID, _ segment: Segment, maxCount: Int) async throws -> SegmentPut
    /// nil when the org has no segment `id`.
    func segment(org: OrgID, id: SegmentID) async throws -> Segment?
    /// True when the segment existed.
    func delete(org: OrgID, id: SegmentID) async throws -> Bool
    /// Every segment of the org, by id.
    func list(org: OrgID) async throws -> [Segment]
    /// How many active users match the segment now, as a job naming it would reach; nil when the org has no
    /// segment `id`.
    func count(org: OrgID, id: SegmentID) async throws -> Int?
}

extension PushJob {
    /// The directory ids among `recipients`, in order (segments and `all` left out).
    public var recipientIDs: [RecipientID] { (recipients ?? []).compactMap(\.recipientID) }
}
