import Foundation
import VolleyCore

// The FCM send body's checks over its bytes. A per-person campaign sends a body the mock has never seen at every
// send, so the common answer ("this message passes") is decided in one pass without a tree, a String or a search
// the standard library would make generic; only a body this pass cannot vouch for is parsed (`MockEngine.fcm`),
// which also writes the error answer.

/// One pass over an FCM send body: either "its message passes every check `MockEngine.fcm` makes on the parsed
/// tree, with this registration token and this `validate_only`", or nil, and then the body is parsed and checked as
/// a tree.
///
/// Exact where it answers. It accepts only text `JSONValue(parsing:)` accepts (RFC 8259, strict UTF-8, `\u`
/// surrogates in pairs), and answers nil wherever the tree could differ from what it read: a repeated member the
/// checks read (the tree keeps the first), an escape in a member name or in a value it compares, a `data` whose
/// size it cannot bound from the raw bytes, a message without a plain string `token`, an `android` that is not an
/// object, nesting deeper than `maxDepth`, a byte-order mark. Its checks are the tree's:
/// - the document is an object whose `message` is an object;
/// - `message.token` is a non-empty string of printable ASCII (0x21–0x7E);
/// - `message.data`, when present, is an object of strings whose names and values total at most 4,096 bytes
///   (the raw length of an escaped string bounds its decoded length from above);
/// - `message.android.priority`, when present, is `"HIGH"` or `"NORMAL"`; `message.android.ttl` is a duration
///   (`MockEngine.isDuration`);
/// - `validate_only` is true only as the literal `true`.
struct MockFCMSendScan {
    /// What a passing body says: where its token is (byte offsets into the body) and its `validate_only`.
    struct Verdict: Equatable {
        var token: Range<Int>
        var validateOnly: Bool
    }

    /// Containers deeper than this are left to the tree (its own limit, 512, is higher).
    static let maxDepth = 64
    /// `message.data`'s names and values, in bytes (FCM: "Message is too big" above it).
    static let maxDataBytes = 4096

    /// The verdict on `body`, or nil when it has to be parsed.
    static func scan(_ body: UnsafeBufferPointer<UInt8>) -> Verdict? {
        var s = MockFCMSendScan(body)
        return s.document()
    }

    static func scan(_ body: [UInt8]) -> Verdict? { body.withUnsafeBufferPointer { scan($0) } }

    private let b: UnsafeBufferPointer<UInt8>
    private var i = 0

    private init(_ bytes: UnsafeBufferPointer<UInt8>) { self.b = bytes }

    /// Where an object's reading stands after `firstMember` or `nextMember`.
    private enum Step {
        /// At the value of a member, whose name's raw bytes (between the quotes) are `name`; `escaped` when the name
        /// holds an escape (its decoded text is not its bytes).
        case member(name: Range<Int>, escaped: Bool)
        /// Past the closing brace.
        case end
        /// Not JSON, or not JSON this pass vouches for.
        case unknown
    }

    private mutating func document() -> Verdict? {
        skipWS()
        guard i < b.count, b[i] == UInt8(ascii: "{") else { return nil }
        i += 1
        var token: Range<Int>?
        var sawMessage = false
        var sawValidateOnly = false
        var validateOnly = false
        var step = firstMember()
        while case .member(let name, let escaped) = step {
            if escaped { return nil }
            if named(name, "message") {
                guard !sawMessage, i < b.count, b[i] == UInt8(ascii: "{"), let t = message() else { return nil }
                sawMessage = true
                token = t
            } else if named(name, "validate_only") {
                guard !sawValidateOnly else { return nil }
                sawValidateOnly = true
                validateOnly = i < b.count && b[i] == UInt8(ascii: "t")
                guard skipValue(depth: 1) else { return nil }
            } else {
                guard skipValue(depth: 1) else { return nil }
            }
            step = nextMember()
        }
        guard case .end = step, let token else { return nil }
        skipWS()
        return i == b.count ? Verdict(token: token, validateOnly: validateOnly) : nil
    }

    /// At `message`'s `{`: its token when the message passes.
    private mutating func message() -> Range<Int>? {
        i += 1
        var token: Range<Int>?
        var sawData = false
        var sawAndroid = false
        var step = firstMember()
        while case .member(let name, let escaped) = step {
            if escaped { return nil }
            if named(name, "token") {
                guard token == nil, let s = plainString(), !s.isEmpty else { return nil }
                for k in s where b[k] <= 0x20 || b[k] >= 0x7F { return nil }
                token = s
            } else if named(name, "data") {
                guard !sawData, i < b.count, b[i] == UInt8(ascii: "{"), data() else { return nil }
                sawData = true
            } else if named(name, "android") {
                guard !sawAndroid, i < b.count, b[i] == UInt8(ascii: "{"), android() else { return nil }
                sawAndroid = true
            } else {
                // `topic` and `condition` decide nothing once the token is a string.
                guard skipValue(depth: 2) else { return nil }
            }
            step = nextMember()
        }
        guard case .end = step else { return nil }
        return token
    }

    /// At `data`'s `{`: true when every value is a string and the raw names and values fit `maxDataBytes`.
    private mutating func data() -> Bool {
        i += 1
        var size = 0
        var step = firstMember()
        while case .member(let name, _) = step {
            guard i < b.count, b[i] == UInt8(ascii: "\""), let value = string() else { return false }
            size += name.count + value.content.count
            step = nextMember()
        }
        guard case .end = step else { return false }
        return size <= Self.maxDataBytes
    }

    /// At `android`'s `{`: true when its `priority` and `ttl` (when present) pass.
    private mutating func android() -> Bool {
        i += 1
        var sawPriority = false
        var sawTTL = false
        var step = firstMember()
        while case .member(let name, let escaped) = step {
            if escaped { return false }
            if named(name, "priority") {
                guard !sawPriority, let p = plainString(), named(p, "HIGH") || named(p, "NORMAL") else { return false }
                sawPriority = true
            } else if named(name, "ttl") {
                guard !sawTTL, let t = plainString(), MockEngine.isDuration(UnsafeBufferPointer(rebasing: b[t]))
                else { return false }
                sawTTL = true
            } else {
                guard skipValue(depth: 3) else { return false }
            }
            step = nextMember()
        }
        if case .end = step { return true }
        return false
    }

    // MARK: objects

    /// Just past an object's `{`.
    private mutating func firstMember() -> Step {
        skipWS()
        if i < b.count, b[i] == UInt8(ascii: "}") {
            i += 1
            return .end
        }
        return member()
    }

    /// Just past a member's value.
    private mutating func nextMember() -> Step {
        skipWS()
        guard i < b.count else { return .unknown }
        if b[i] == UInt8(ascii: "}") {
            i += 1
            return .end
        }
        guard b[i] == UInt8(ascii: ",") else { return .unknown }
        i += 1
        skipWS()
        return member()
    }

    /// At a member's name: reads the name and the colon, and stops at the value.
    private mutating func member() -> Step {
        guard i < b.count, b[i] == UInt8(ascii: "\""), let name = string() else { return .unknown }
        skipWS()
        guard i < b.count, b[i] == UInt8(ascii: ":") else { return .unknown }
        i += 1
        skipWS()
        guard i < b.count else { return .unknown }
        return .member(name: name.content, escaped: name.escaped)
    }

    @inline(__always) private func named(_ r: Range<Int>, _ word: StaticString) -> Bool {
        MockBytes.equal(UnsafeBufferPointer(rebasing: b[r]), word)
    }

    // MARK: values

    /// Skips one value; false when it is not one this pass vouches for.
    private mutating func skipValue(depth: Int) -> Bool {
        guard i < b.count else { return false }
        switch b[i] {
        case UInt8(ascii: "{"):
            guard depth < Self.maxDepth else { return false }
            i += 1
            var step = firstMember()
            while case .member = step {
                guard skipValue(depth: depth + 1) else { return false }
                step = nextMember()
            }
            if case .end = step { return true }
            return false
        case UInt8(ascii: "["):
            guard depth < Self.maxDepth else { return false }
            i += 1
            skipWS()
            if i < b.count, b[i] == UInt8(ascii: "]") {
                i += 1
                return true
            }
            while true {
                guard skipValue(depth: depth + 1) else { return false }
                skipWS()
                guard i < b.count else { return false }
                if b[i] == UInt8(ascii: "]") {
                    i += 1
                    return true
                }
                guard b[i] == UInt8(ascii: ",") else { return false }
                i += 1
                skipWS()
            }
        case UInt8(ascii: "\""): return string() != nil
        case UInt8(ascii: "t"): return literal("true")
        case UInt8(ascii: "f"): return literal("false")
        case UInt8(ascii: "n"): return literal("null")
        case UInt8(ascii: "-"), UInt8(ascii: "0")...UInt8(ascii: "9"): return number()
        default: return false
        }
    }

    @inline(__always) private mutating func skipWS() {
        while i < b.count {
            switch b[i] {
            case 0x20, 0x0A, 0x0D, 0x09: i += 1
            default: return
            }
        }
    }

    private mutating func literal(_ word: StaticString) -> Bool {
        let n = word.utf8CodeUnitCount
        guard i + n <= b.count else { return false }
        for k in 0..<n where b[i + k] != word.utf8Start[k] { return false }
        i += n
        return true
    }

    private mutating func number() -> Bool { MockBytes.skipNumber(b, from: &i) }

    // MARK: strings

    /// At a string whose value is compared: its raw bytes when it holds no escape (they are then its decoded UTF-8).
    private mutating func plainString() -> Range<Int>? {
        guard i < b.count, b[i] == UInt8(ascii: "\""), let s = string(), !s.escaped else { return nil }
        return s.content
    }

    /// At an opening quote; moves past the closing one. The raw bytes between the quotes, and whether they hold an
    /// escape; nil for a control character, invalid UTF-8 (Unicode Table 3-7, as `String(validating:)` reads it),
    /// an unknown escape, a `\u` without four hex digits or a surrogate out of its pair.
    private mutating func string() -> (content: Range<Int>, escaped: Bool)? {
        i += 1
        let start = i
        var escaped = false
        while i < b.count {
            MockBytes.skipPlainText(b, from: &i)
            guard i < b.count else { return nil }
            let c = b[i]
            if c == UInt8(ascii: "\"") {
                i += 1
                return (start..<(i - 1), escaped)
            }
            if c == UInt8(ascii: "\\") {
                escaped = true
                guard escape() else { return nil }
            } else if c < 0x20 {
                return nil
            } else if c < 0x80 {
                i += 1
            } else {
                guard let n = utf8Sequence() else { return nil }
                i += n
            }
        }
        return nil
    }

    /// At a backslash: moves past the escape, or false when `JSONEscape.decode` would refuse it.
    private mutating func escape() -> Bool {
        guard i + 1 < b.count else { return false }
        switch b[i + 1] {
        case UInt8(ascii: "\""), UInt8(ascii: "\\"), UInt8(ascii: "/"), UInt8(ascii: "b"), UInt8(ascii: "f"),
            UInt8(ascii: "n"), UInt8(ascii: "r"), UInt8(ascii: "t"):
            i += 2
            return true
        case UInt8(ascii: "u"):
            guard let first = hex4(at: i + 2) else { return false }
            if first >= 0xD800 && first < 0xDC00 {
                guard i + 7 < b.count, b[i + 6] == UInt8(ascii: "\\"), b[i + 7] == UInt8(ascii: "u"),
                    let second = hex4(at: i + 8), second >= 0xDC00 && second < 0xE000
                else { return false }
                i += 12
                return true
            }
            guard first < 0xDC00 || first >= 0xE000 else { return false }
            i += 6
            return true
        default:
            return false
        }
    }

    private func hex4(at k: Int) -> UInt16? {
        guard k + 4 <= b.count else { return nil }
        var v: UInt16 = 0
        for j in k..<(k + 4) {
            guard let d = hexDigitValue(b[j]) else { return nil }
            v = v << 4 | UInt16(d)
        }
        return v
    }

    /// The length of the well-formed UTF-8 sequence at `i` (a byte ≥ 0x80), or nil.
    private func utf8Sequence() -> Int? {
        let c = b[i]
        @inline(__always) func within(_ k: Int, _ low: UInt8, _ high: UInt8) -> Bool {
            i + k < b.count && b[i + k] >= low && b[i + k] <= high
        }
        switch c {
        case 0xC2...0xDF: return within(1, 0x80, 0xBF) ? 2 : nil
        case 0xE0: return within(1, 0xA0, 0xBF) && within(2, 0x80, 0xBF) ? 3 : nil
        case 0xED: return within(1, 0x80, 0x9F) && within(2, 0x80, 0xBF) ? 3 : nil
        case 0xE1...0xEF: return within(1, 0x80, 0xBF) && within(2, 0x80, 0xBF) ? 3 : nil
        case 0xF0: return within(1, 0x90, 0xBF) && within(2, 0x80, 0xBF) && within(3, 0x80, 0xBF) ? 4 : nil
        case 0xF4: return within(1, 0x80, 0x8F) && within(2, 0x80, 0xBF) && within(3, 0x80, 0xBF) ? 4 : nil
        case 0xF1...0xF3: return within(1, 0x80, 0xBF) && within(2, 0x80, 0xBF) && within(3, 0x80, 0xBF) ? 4 : nil
        default: return nil
        }
    }
}

/// The last FCM send body of a connection that passed every check of its message, kept so that the next body that
/// differs from it only in the registration token is not read again: a campaign's bodies are one tail after
/// different tokens, and a tracked campaign's also differ in the message id of `data.mid`.
///
/// Exact, not a guess: a body of the form `{"message":{"token":"<token>",<tail>` whose token is printable ASCII
/// without `"` or `\` parses to the same tree for every such token, so every check but the token's own gives the
/// same answer for the same tail. The message's target is that token unless the tail could name another (a
/// `"token"` or `"message"` member, or any escape, which could spell one); such tails are never kept. The same holds
/// for the value of a `"mid"` member when it is Volley's message id (23 characters of base64url and a dot): no check
/// reads a `mid` but as a string of its length.
struct MockFCMBodyMemo {
    private static let prefix: StaticString = #"{"message":{"token":""#
    /// The tail of the last body that passed (its storage is reused from one kept tail to the next).
    private var tail: [UInt8] = []
    /// The kept tail's `validate_only`; nil while no tail is kept.
    private var validateOnly: Bool?
    /// Where the kept tail's message id starts (the value of its first `"mid"` member), if it has one.
    private var messageIDAt: Int?
    static let messageIDLength = 23

    /// The token and the tail of a body of the memo's form, or nil.
    static func split(_ body: UnsafeBufferPointer<UInt8>) -> (
        token: UnsafeBufferPointer<UInt8>, tail: UnsafeBufferPointer<UInt8>
    )? {
        guard let parts = tokenAndTail(body), mayKeep(parts.tail) else { return nil }
        return parts
    }

    /// The body's token, when it opens the body as the memo's prefix and is plain, and the bytes after it.
    private static func tokenAndTail(_ body: UnsafeBufferPointer<UInt8>) -> (
        token: UnsafeBufferPointer<UInt8>, tail: UnsafeBufferPointer<UInt8>
    )? {
        let p = prefix.utf8Start
        let n = prefix.utf8CodeUnitCount
        guard body.count > n else { return nil }
        for i in 0..<n where body[i] != p[i] { return nil }
        var end = n
        while end < body.count {
            let c = body[end]
            if c == UInt8(ascii: "\"") { break }
            guard c > 0x20, c < 0x7F, c != UInt8(ascii: "\\") else { return nil }
            end += 1
        }
        guard end > n, end < body.count else { return nil }
        return (UnsafeBufferPointer(rebasing: body[n..<end]), UnsafeBufferPointer(rebasing: body[(end + 1)...]))
    }

    /// False for a tail that could name another target than the token: one holding an escape, `"token"` or
    /// `"message"` anywhere in its bytes.
    static func mayKeep(_ tail: UnsafeBufferPointer<UInt8>) -> Bool {
        var k = 0
        while k < tail.count {
            MockBytes.skipUnquoted(tail, from: &k)
            guard k < tail.count else { return true }
            if tail[k] == UInt8(ascii: "\\") { return false }
            if tail[k] == UInt8(ascii: "\"") {
                if MockBytes.hasPrefix(tail, at: k + 1, #"token""#) { return false }
                if MockBytes.hasPrefix(tail, at: k + 1, #"message""#) { return false }
            }
            k += 1
        }
        return true
    }

    /// The token and `validate_only` of a body whose message passes every check but the token's own, known without
    /// reading it; nil when the body has to be read. A tail equal to the kept one was checked when it was kept.
    func match(_ body: UnsafeBufferPointer<UInt8>) -> (token: UnsafeBufferPointer<UInt8>, validateOnly: Bool)? {
        guard let validateOnly, let parts = Self.tokenAndTail(body) else { return nil }
        guard let at = messageIDAt else { return MockBytes.equal(parts.tail, tail) ? (parts.token, validateOnly) : nil }
        let end = at + Self.messageIDLength
        guard parts.tail.count == tail.count, let new = parts.tail.baseAddress,
            parts.tail[at..<end].allSatisfy(Self.isMessageIDByte)
        else { return nil }
        let same = tail.withUnsafeBufferPointer { kept -> Bool in
            guard let old = kept.baseAddress else { return false }
            return memcmp(new, old, at) == 0 && memcmp(new + end, old + end, kept.count - end) == 0
        }
        return same ? (parts.token, validateOnly) : nil
    }

    /// The offset of the first `"mid"` member's value in `tail` when it is a message id, else nil.
    static func messageIDStart(in tail: UnsafeBufferPointer<UInt8>) -> Int? {
        let key: StaticString = #""mid":""#
        var k = 0
        while k < tail.count {
            if tail[k] == UInt8(ascii: "\""), MockBytes.hasPrefix(tail, at: k, key) {
                let at = k + key.utf8CodeUnitCount
                let end = at + messageIDLength
                guard end < tail.count, tail[end] == UInt8(ascii: "\""),
                    tail[at..<end].allSatisfy(isMessageIDByte)
                else { return nil }
                return at
            }
            k += 1
        }
        return nil
    }

    /// A byte of a message id: base64url or its dot.
    static func isMessageIDByte(_ c: UInt8) -> Bool {
        switch c {
        case UInt8(ascii: "A")...UInt8(ascii: "Z"), UInt8(ascii: "a")...UInt8(ascii: "z"),
            UInt8(ascii: "0")...UInt8(ascii: "9"), UInt8(ascii: "-"), UInt8(ascii: "_"), UInt8(ascii: "."):
            return true
        default: return false
        }
    }

    /// Keeps the tail of a body whose message passed every check (when the body has the memo's form).
    mutating func remember(_ body: UnsafeBufferPointer<UInt8>, validateOnly: Bool) {
        guard let parts = Self.split(body) else { return }
        tail.removeAll(keepingCapacity: true)
        tail.append(contentsOf: parts.tail)
        messageIDAt = Self.messageIDStart(in: parts.tail)
        self.validateOnly = validateOnly
    }
}
