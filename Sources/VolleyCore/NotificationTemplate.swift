/// A notification whose texts name each recipient's own values: `Hi {{ first_name | 'Friend' }}`.
///
/// Compiled once per job (or per `PUT /v1/templates/{id}`, to refuse bad syntax at the door), rendered once per
/// recipient. The texts that may hold names are `title`, `subtitle`, `body`, each `localized` variant's three, `url`
/// and `imageUrl`; every other field is sent as written.
///
/// Syntax (OneSignal's Liquid subset, and the seed's own short form):
/// - `{{ first_name }}`: the user's attribute `first_name` (the directory's user `attributes`);
/// - `{{ first_name | default: 'Friend' }}` and `{{ first_name | 'Friend' }}`: the same, with a fallback used when
///   the value is absent or empty (Liquid's `default`); single or double quotes;
/// - `{{ message.custom_data.order_id }}`: the job's `customData` member (nested objects by more dots). A string is
///   inserted as it is, a number as its JSON text (digit for digit), `true`/`false` as such; an object or array
///   as its compact JSON; `null` or absent is missing.
///
/// A name without a value and without a fallback renders as empty and is counted (`Rendered.missing`). Values are
/// inserted verbatim (no HTML escaping: a push is not a web page); a `{{` that a value would leave in the text is
/// broken apart (`{ {`), so a rendered notification never carries an unrendered `{{`. An unterminated `{{`, an
/// empty or malformed name, an unknown filter or an unquoted fallback is a `TemplateError` naming the field.
public struct NotificationTemplate: Sendable {
    /// The notification with every shared text in place (names included in the personal fields, which `render`
    /// fills per recipient).
    public let notification: Notification
    /// The fields that hold names, compiled; fields without `{{` are not listed.
    let fields: [CompiledField]
    /// Names bound to the job's custom data that had no value and no fallback: each render counts them.
    let boundMissing: Int

    /// Compiles `notification`'s texts. `field` prefixes the paths errors name (`notification.title`).
    public init(_ notification: Notification, field: String = "notification") throws(TemplateError) {
        self.notification = notification
        var fields: [CompiledField] = []
        func compile(_ slot: FieldSlot, _ text: String?, _ path: String) throws(TemplateError) {
            guard let text, let parts = try TemplateText.compile(text, field: "\(field).\(path)") else { return }
            fields.append(CompiledField(slot: slot, text: parts))
        }
        try compile(.title, notification.title, "title")
        try compile(.subtitle, notification.subtitle, "subtitle")
        try compile(.body, notification.body, "body")
        try compile(.url, notification.url, "url")
        try compile(.imageUrl, notification.imageUrl, "imageUrl")
        for language in (notification.localized ?? [:]).keys.sorted() {
            let text = notification.localized?[language]
            try compile(.localizedTitle(language), text?.title, "localized.\(language).title")
            try compile(.localizedSubtitle(language), text?.subtitle, "localized.\(language).subtitle")
            try compile(.localizedBody(language), text?.body, "localized.\(language).body")
        }
        self.fields = fields
        boundMissing = 0
    }

    private init(notification: Notification, fields: [CompiledField], boundMissing: Int) {
        self.notification = notification
        self.fields = fields
        self.boundMissing = boundMissing
    }

    /// True when some text holds a `{{ name }}` (before `binding(customData:)`, custom-data names included).
    public var hasNames: Bool { !fields.isEmpty }
    /// True when some text names a user attribute: the engine reads the recipients' attributes for it.
    public var usesAttributes: Bool { fields.contains { $0.text.usesAttributes } }
    /// True when some text names `message.custom_data.*` (not yet bound with `binding(customData:)`).
    public var usesCustomData: Bool { fields.contains { $0.text.usesCustomData } }
    /// True when recipients may receive different texts. A notification without `{{`, or whose names are all the
    /// job's custom data once bound, is not personal: the campaign path (one payload shared by everyone) sends it.
    public var isPersonal: Bool { usesAttributes || usesCustomData }

    /// The same template with the job's custom data put in once, so each render only looks up attributes. A
    /// custom-data name without a value and without a fallback becomes empty text and is still counted by every
    /// render.
    public func binding(customData: JSONValue?) -> NotificationTemplate {
        guard usesCustomData else { return self }
        var missing = boundMissing
        var bound: [CompiledField] = []
        var notification = self.notification
        for field in fields {
            let (text, misses) = field.text.binding(customData: customData)
            missing += misses
            if text.isConstant {
                // Nothing per person left in this field: write it into the shared notification once.
                notification.set(field.slot, Self.unbraced(text.constantText))
            } else {
                bound.append(CompiledField(slot: field.slot, text: text))
            }
        }
        return NotificationTemplate(notification: notification, fields: bound, boundMissing: missing)
    }

    /// What one render made.
    public struct Rendered: Sendable, Hashable {
        public var notification: Notification
        /// Names that had no value and no fallback (each rendered as empty text).
        public var missing: Int
    }

    /// The notification with one recipient's values. Pure and allocation-light: at most one string per
    /// personal field.
    public func render(attributes: [String: String]?, customData: JSONValue? = nil) -> Rendered {
        var out = notification
        var missing = boundMissing
        for field in fields {
            let text = field.text.render(attributes: attributes, customData: customData, missing: &missing)
            out.set(field.slot, text)
        }
        return Rendered(notification: out, missing: missing)
    }

    /// `text` with every `{{` broken apart (`{ {`): what a value or fallback put next to a brace cannot become a
    /// name the device would show unrendered.
    static func unbraced(_ text: String) -> String {
        var text = text
        while text.contains("{{") { text = text.replacingOccurrences(of: "{{", with: "{ {") }
        return text
    }
}

/// Where a compiled text goes back into the notification.
enum FieldSlot: Sendable, Hashable {
    case title, subtitle, body, url, imageUrl
    case localizedTitle(String)
    case localizedSubtitle(String)
    case localizedBody(String)
}

struct CompiledField: Sendable {
    var slot: FieldSlot
    var text: TemplateText
}

extension Notification {
    mutating func set(_ slot: FieldSlot, _ text: String) {
        switch slot {
        case .title: title = text
        case .subtitle: subtitle = text
        case .body: body = text
        case .url: url = text
        case .imageUrl: imageUrl = text
        case .localizedTitle(let l): localized?[l]?.title = text
        case .localizedSubtitle(let l): localized?[l]?.subtitle = text
        case .localizedBody(let l): localized?[l]?.body = text
        }
    }
}

/// A text that failed to compile: the field (`notification.localized.es.body`) and what is wrong there.
public struct TemplateError: Error, Sendable, Hashable, CustomStringConvertible {
    /// The field's path as users write it.
    public var field: String
    /// What is wrong, with the character offset where it starts.
    public var message: String
    public init(field: String, message: String) {
        self.field = field
        self.message = message
    }
    public var description: String { "\(field): \(message)" }
    /// The job-level refusal a worker records for a job whose template does not compile.
    public var jobRejection: JobRejection { JobRejection(.invalidNotification, "template \(description)") }
}

/// One compiled text: literal runs and names, in order.
struct TemplateText: Sendable, Hashable {
    enum Name: Sendable, Hashable {
        /// A user attribute.
        case attribute(String)
        /// `message.custom_data.<path>`.
        case customData([String])
    }
    enum Part: Sendable, Hashable {
        case literal(String)
        case name(Name, fallback: String?)
    }
    var parts: [Part]
    /// Bytes of the literal parts, to reserve the rendered string once.
    var literalBytes: Int
    /// Some literal holds a `{`: a value beside it could make a `{{`, so every render checks its text.
    var literalHasBrace: Bool

    init(parts: [Part], literalBytes: Int) {
        self.parts = parts
        self.literalBytes = literalBytes
        literalHasBrace = parts.contains { if case .literal(let s) = $0 { s.utf8.contains(Self.brace) } else { false } }
    }

    static let brace = UInt8(ascii: "{")

    var usesAttributes: Bool {
        parts.contains { if case .name(.attribute, _) = $0 { true } else { false } }
    }
    var usesCustomData: Bool {
        parts.contains { if case .name(.customData, _) = $0 { true } else { false } }
    }
    var isConstant: Bool { parts.allSatisfy { if case .literal = $0 { true } else { false } } }
    var constantText: String {
        parts.reduce(into: "") { out, p in if case .literal(let s) = p { out += s } }
    }

    /// Most names a text may hold; a text is at most a few hundred bytes, so more is a mistake, not a template.
    static let maxNames = 64
    /// Longest name: attribute keys are at most `UserAttributes.maxKeyLength`; custom-data paths a little longer.
    static let maxNameLength = 128

    /// nil when `text` holds no `{{` (a plain text). Throws for bad syntax, naming `field`.
    static func compile(_ text: String, field: String) throws(TemplateError) -> TemplateText? {
        let bytes = Array(text.utf8)
        guard let first = find(open, in: bytes, from: 0) else { return nil }
        var parts: [Part] = []
        var literalBytes = 0
        var names = 0
        var i = 0
        var start: Int? = first
        func offset(_ at: Int) -> Int { String(decoding: bytes[..<at], as: UTF8.self).count }
        func fail(_ at: Int, _ what: String) -> TemplateError {
            TemplateError(field: field, message: "\(what) (at character \(offset(at)))")
        }
        while let s = start {
            if s > i {
                parts.append(.literal(String(decoding: bytes[i..<s], as: UTF8.self)))
                literalBytes += s - i
            }
            guard let close = find(self.close, in: bytes, from: s + 2) else {
                throw fail(s, "'{{' is not closed by '}}'")
            }
            let inner = bytes[(s + 2)..<close]
            if inner.first == UInt8(ascii: "{") {
                throw fail(s, "'{{{' is not supported: Volley never escapes values, write {{ name }}")
            }
            if find(open, in: Array(inner), from: 0) != nil {
                throw fail(s, "'{{' inside a name; close the first one with '}}'")
            }
            let (name, fallback) = try parseTag(Array(inner), fail: { what in fail(s, what) })
            names += 1
            if names > maxNames { throw fail(s, "more than \(maxNames) names in one text") }
            parts.append(.name(name, fallback: fallback))
            i = close + 2
            start = find(open, in: bytes, from: i)
        }
        if i < bytes.count {
            parts.append(.literal(String(decoding: bytes[i...], as: UTF8.self)))
            literalBytes += bytes.count - i
        }
        return TemplateText(parts: parts, literalBytes: literalBytes)
    }

    static let open: [UInt8] = Array("{{".utf8)
    static let close: [UInt8] = Array("}}".utf8)

    static func find(_ needle: [UInt8], in bytes: [UInt8], from: Int) -> Int? {
        guard bytes.count >= needle.count, from <= bytes.count - needle.count else { return nil }
        var i = from
        while i <= bytes.count - needle.count {
            if bytes[i] == needle[0] && bytes[i + 1] == needle[1] { return i }
            i += 1
        }
        return nil
    }

    /// `name`, `name | 'x'`, `name | "x"`, `name | default: 'x'`, blanks anywhere between.
    static func parseTag(_ inner: [UInt8], fail: (String) -> TemplateError) throws(TemplateError) -> (
        Name, String?
    ) {
        var i = 0
        func skipBlanks() { while i < inner.count, isBlank(inner[i]) { i += 1 } }
        skipBlanks()
        let nameStart = i
        while i < inner.count, isNameByte(inner[i]) { i += 1 }
        let nameText = String(decoding: inner[nameStart..<i], as: UTF8.self)
        guard !nameText.isEmpty else {
            if i == inner.count || inner[i...].allSatisfy(isBlank) { throw fail("an empty name") }
            throw fail("a name is letters, digits, '_', '-' and '.'")
        }
        guard nameText.utf8.count <= maxNameLength else { throw fail("a name longer than \(maxNameLength) bytes") }
        let name = try parseName(nameText, fail: fail)
        skipBlanks()
        if i == inner.count { return (name, nil) }
        guard inner[i] == UInt8(ascii: "|") else {
            throw fail("after the name '\(nameText)' only '| default: 'text'' or '| 'text'' may follow")
        }
        i += 1
        skipBlanks()
        if i < inner.count, isNameByte(inner[i]) {
            let filterStart = i
            while i < inner.count, isNameByte(inner[i]) { i += 1 }
            let filter = String(decoding: inner[filterStart..<i], as: UTF8.self)
            guard filter == "default" else { throw fail("unknown filter '\(filter)'; only 'default' is supported") }
            skipBlanks()
            guard i < inner.count, inner[i] == UInt8(ascii: ":") else { throw fail("'default' needs ': 'text''") }
            i += 1
            skipBlanks()
        }
        guard i < inner.count, inner[i] == UInt8(ascii: "'") || inner[i] == UInt8(ascii: "\"") else {
            throw fail("a fallback is quoted text: '| 'Friend''")
        }
        let quote = inner[i]
        i += 1
        let textStart = i
        while i < inner.count, inner[i] != quote { i += 1 }
        guard i < inner.count else { throw fail("the fallback's quote is not closed") }
        let fallback = String(decoding: inner[textStart..<i], as: UTF8.self)
        i += 1
        skipBlanks()
        guard i == inner.count else { throw fail("nothing may follow the fallback") }
        return (name, fallback)
    }

    static func parseName(_ text: String, fail: (String) -> TemplateError) throws(TemplateError) -> Name {
        let segments = text.split(separator: ".", omittingEmptySubsequences: false).map(String.init)
        if segments.contains(where: \.isEmpty) { throw fail("'\(text)' has an empty part between dots") }
        if segments.count == 1 { return .attribute(text) }
        guard segments.count >= 3, segments[0] == "message", segments[1] == "custom_data" else {
            throw fail(
                "'\(text)' is not a name: use a user attribute (first_name) or message.custom_data.<key>")
        }
        return .customData(Array(segments.dropFirst(2)))
    }

    static func isBlank(_ b: UInt8) -> Bool {
        b == UInt8(ascii: " ") || b == UInt8(ascii: "\t") || b == UInt8(ascii: "\n") || b == UInt8(ascii: "\r")
    }
    static func isNameByte(_ b: UInt8) -> Bool {
        (UInt8(ascii: "a")...UInt8(ascii: "z")).contains(b) || (UInt8(ascii: "A")...UInt8(ascii: "Z")).contains(b)
            || (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(b) || b == UInt8(ascii: "_")
            || b == UInt8(ascii: "-") || b == UInt8(ascii: ".")
    }

    /// The custom data's value at `path` as text; nil when absent, null or empty.
    static func customDataText(_ customData: JSONValue?, _ path: [String]) -> String? {
        var value = customData
        for key in path { value = value?[key] }
        switch value {
        case nil, .null?: return nil
        case .string(let s)?: return s.isEmpty ? nil : s
        case .number(let n)?: return n.text
        case .bool(let b)?: return b ? "true" : "false"
        case let v?: return v.jsonText
        }
    }

    /// Custom-data names replaced by their text (or fallback, or empty), adjacent literals merged; answers how
    /// many had nothing.
    func binding(customData: JSONValue?) -> (TemplateText, missing: Int) {
        var parts: [Part] = []
        var missing = 0
        func appendLiteral(_ s: String) {
            if case .literal(let last)? = parts.last {
                parts[parts.count - 1] = .literal(last + s)
            } else {
                parts.append(.literal(s))
            }
        }
        for part in self.parts {
            switch part {
            case .literal(let s): appendLiteral(s)
            case .name(.customData(let path), let fallback):
                if let text = Self.customDataText(customData, path) {
                    appendLiteral(text)
                } else if let fallback {
                    appendLiteral(fallback)
                } else {
                    missing += 1
                }
            case .name: parts.append(part)
            }
        }
        let bytes = parts.reduce(0) { n, p in if case .literal(let s) = p { n + s.utf8.count } else { n } }
        return (TemplateText(parts: parts, literalBytes: bytes), missing)
    }

    func render(attributes: [String: String]?, customData: JSONValue?, missing: inout Int) -> String {
        var out = ""
        out.reserveCapacity(literalBytes + 16 * (parts.count / 2 + 1))
        var mayBrace = literalHasBrace
        for part in parts {
            switch part {
            case .literal(let s): out += s
            case .name(let name, let fallback):
                let value: String?
                switch name {
                case .attribute(let key):
                    if let v = attributes?[key], !v.isEmpty { value = v } else { value = nil }
                case .customData(let path): value = Self.customDataText(customData, path)
                }
                if let v = value ?? fallback {
                    out += v
                    if !mayBrace, v.utf8.contains(Self.brace) { mayBrace = true }
                } else {
                    missing += 1
                }
            }
        }
        // What was put in (a value, a fallback, bound custom data) may make a `{{` of its own or with a brace beside
        // it; none may reach a device. Without a `{` in a literal or in what was put in, there is none to look for.
        if mayBrace, Self.hasOpen(out) { return NotificationTemplate.unbraced(out) }
        return out
    }

    static func hasOpen(_ s: String) -> Bool {
        var previous: UInt8 = 0
        for b in s.utf8 {
            if b == UInt8(ascii: "{") && previous == b { return true }
            previous = b
        }
        return false
    }
}
