import Foundation
import Testing
import VolleyCore
import VolleyTestTags

@testable import VolleyMock

/// The FCM send body's byte-level checks: `MockFCMSendScan` against the tree reading it stands in for, the memo's
/// tail test, and the word-at-a-time skips under them.
@Suite(.tags(.unit)) struct MockFCMBodyTests {
    /// The tree reading of `MockEngine.fcm`: the token and `validate_only` of a body whose message passes every
    /// check before the token's rules, nil for any other. The oracle the scan must never contradict.
    static func treeVerdict(_ body: [UInt8]) -> (token: String, validateOnly: Bool)? {
        guard let doc = JSONValue.parse(body), case .object = doc, let message = doc["message"],
            case .object = message, let token = message["token"]?.stringValue, !token.isEmpty,
            !token.utf8.contains(where: { $0 <= 0x20 || $0 >= 0x7F })
        else { return nil }
        if let data = message["data"] {
            guard let members = data.objectValue else { return nil }
            var size = 0
            for (k, v) in members {
                guard let s = v.stringValue else { return nil }
                size += k.utf8.count + s.utf8.count
            }
            if size > 4096 { return nil }
        }
        if let android = message["android"] {
            if let p = android["priority"] {
                guard let s = p.stringValue, s == "HIGH" || s == "NORMAL" else { return nil }
            }
            if let ttl = android["ttl"] {
                guard let s = ttl.stringValue, MockEngine.isDuration(s) else { return nil }
            }
        }
        return (token, doc["validate_only"]?.boolValue == true)
    }

    static func scan(_ body: [UInt8]) -> (token: String, validateOnly: Bool)? {
        MockFCMSendScan.scan(body).map {
            (String(decoding: body[$0.token], as: UTF8.self), $0.validateOnly)
        }
    }

    /// The scan answers only what the tree answers.
    static func expectAgreement(_ body: [UInt8], _ note: @autoclosure () -> String = "") {
        guard let fast = scan(body) else { return }
        let tree = treeVerdict(body)
        #expect(tree?.token == fast.token && tree?.validateOnly == fast.validateOnly, "\(note())")
    }

    @Test(arguments: [
        (#"{"message":{"token":"abc"}}"#, "abc", false),
        // The token last, after members the checks read and members they skip.
        (
            #"{"message":{"data":{"k":"v","e":"\"q\" \n \u00e9 \ud83d\ude00"},"android":{"ttl":"3.5s","priority":"#
                + #""HIGH","x":[1,-2.5e+3,true,false,null,{}]},"notification":{"title":"Ünïcødé ✓ 🚀"},"#
                + #""token":"bench1:APA91b-x_y"}}"#,
            "bench1:APA91b-x_y", false
        ),
        (" \n{ \"validate_only\" : true , \"message\" : { \"token\" : \"t\" } }\t", "t", true),
        (#"{"message":{"token":"t"},"validate_only":false}"#, "t", false),
        (#"{"message":{"token":"t"},"validate_only":"true"}"#, "t", false),
        (#"{"message":{"token":"t","topic":"news","condition":1,"apns":{"payload":{"aps":{}}}}}"#, "t", false),
        (#"{"message":{"token":"t","android":{"priority":"NORMAL","ttl":"0s"}},"extra":[[[]]]}"#, "t", false),
        // Escaped names and values where the checks do not compare them.
        (#"{"message":{"token":"t","data":{"k\u0031":"v\/"},"notification":{"t\u0069tle":"x"}}}"#, "t", false),
    ])
    func passingBodies(body: String, token: String, validateOnly: Bool) throws {
        let bytes = Array(body.utf8)
        let fast = try #require(Self.scan(bytes), "\(body)")
        #expect(fast.token == token && fast.validateOnly == validateOnly)
        Self.expectAgreement(bytes)
    }

    /// Bodies the scan leaves to the tree: refused ones, and ones whose tree could differ from what it read.
    @Test(arguments: [
        // The token: escaped, empty, not printable ASCII, repeated, absent, not a string.
        #"{"message":{"token":"t\u0031"}}"#, #"{"message":{"token":""}}"#, #"{"message":{"token":"a b"}}"#,
        #"{"message":{"token":"é"}}"#, #"{"message":{"token":"a","token":"b"}}"#, #"{"message":{"topic":"x"}}"#,
        #"{"message":{"token":1}}"#,
        // Members the checks read: repeated, or with escaped names.
        #"{"message":{"token":"a"},"message":{"token":"b"}}"#, #"{"m\u0065ssage":{"token":"a"}}"#,
        #"{"message":{"tok\u0065n":"a"}}"#, #"{"message":{"token":"a"},"validate_only":true,"validate_only":false}"#,
        #"{"message":{"token":"a","data":{},"data":{}}}"#, #"{"message":{"token":"a","android":{},"android":{}}}"#,
        #"{"message":{"token":"a","android":{"ttl":"1s","ttl":"2s"}}}"#,
        #"{"message":{"token":"a","android":{"pri\u006frity":"URGENT"}}}"#,
        // What the checks refuse, or cannot read from the bytes.
        #"{"message":{"token":"a","data":{"n":1}}}"#, #"{"message":{"token":"a","data":[]}}"#,
        #"{"message":{"token":"a","data":null}}"#, #"{"message":{"token":"a","android":"x"}}"#,
        #"{"message":{"token":"a","android":{"priority":"URGENT"}}}"#,
        #"{"message":{"token":"a","android":{"priority":"HIG\u0048"}}}"#,
        #"{"message":{"token":"a","android":{"ttl":"1.s"}}}"#, #"{"message":{"token":"a","android":{"ttl":10}}}"#,
        #"{"message":"x"}"#, #"{"validate_only":true}"#, #"[{"message":{"token":"a"}}]"#,
        // Not JSON, or not JSON `JSONValue(parsing:)` reads.
        #"{"message":{"token":"a"},}"#, #"{"message":{"token":"a"}"#, #"{"message":{"token":"a"}}x"#,
        #"{"message":{"token":"a","n":01}}"#, #"{"message":{"token":"a","n":-}}"#, #"{"message":{"token":"a","n":1.}}"#,
        #"{"message":{"token":"a","n":tru}}"#, #"{"message":{"token":"a","s":"\x"}}"#,
        #"{"message":{"token":"a","s":"\u12"}}"#, #"{"message":{"token":"a","s":"\ud800"}}"#,
        #"{"message":{"token":"a","s":"\udc00\ud800"}}"#, #"{"message":{"token":"a","s":"\ud800\u0041"}}"#,
        "{\"message\":{\"token\":\"a\",\"s\":\"\u{1}\"}}", "\u{FEFF}{\"message\":{\"token\":\"a\"}}",
        #"{"message":{"token":"a","n":[1 2]}}"#, #"{"message":{"token":"a" "n":1}}"#, "",
    ])
    func bodiesLeftToTheTree(body: String) {
        let bytes = Array(body.utf8)
        #expect(MockFCMSendScan.scan(bytes) == nil, "\(body)")
    }

    /// Invalid UTF-8 in a string (Unicode Table 3-7): overlong forms, surrogates, past U+10FFFF, cut sequences.
    @Test func invalidUTF8IsLeftToTheTree() {
        let open = Array(#"{"message":{"token":"a","s":""#.utf8)
        let close = Array(#""}}"#.utf8)
        let bad: [[UInt8]] = [
            [0xC0, 0xAF], [0xC1, 0xBF], [0xE0, 0x80, 0xAF], [0xED, 0xA0, 0x80], [0xF0, 0x80, 0x80, 0xAF],
            [0xF4, 0x90, 0x80, 0x80], [0xF5, 0x80, 0x80, 0x80], [0xFF], [0x80], [0xC3], [0xE2, 0x82], [0xC3, 0x28],
        ]
        for seq in bad {
            #expect(MockFCMSendScan.scan(open + seq + close) == nil, "\(seq)")
            #expect(JSONValue.parse(open + seq + close) == nil, "\(seq)")
        }
        let good: [[UInt8]] = [
            [0xC2, 0x80], [0xDF, 0xBF], [0xE0, 0xA0, 0x80], [0xED, 0x9F, 0xBF], [0xEE, 0x80, 0x80],
            [0xF0, 0x90, 0x80, 0x80], [0xF4, 0x8F, 0xBF, 0xBF],
        ]
        for seq in good { #expect(MockFCMSendScan.scan(open + seq + close) != nil, "\(seq)") }
    }

    /// `message.data` at the size limit passes; a byte more goes to the tree, which refuses it unless escapes made
    /// the raw text longer than what it decodes to.
    @Test func dataSizeLimit() {
        func body(_ value: String) -> [UInt8] {
            Array((#"{"message":{"token":"a","data":{"k":""# + value + #""}}}"#).utf8)
        }
        #expect(MockFCMSendScan.scan(body(String(repeating: "x", count: 4095))) != nil)
        #expect(MockFCMSendScan.scan(body(String(repeating: "x", count: 4096))) == nil)
        let escaped = body(String(repeating: #"\n"#, count: 2100))
        #expect(MockFCMSendScan.scan(escaped) == nil)
        #expect(Self.treeVerdict(escaped)?.token == "a")
    }

    @Test func nestingPastTheLimitIsLeftToTheTree() {
        func body(_ depth: Int) -> [UInt8] {
            Array(
                (#"{"message":{"token":"a","x":"# + String(repeating: "[", count: depth)
                    + String(repeating: "]", count: depth) + "}}").utf8)
        }
        #expect(MockFCMSendScan.scan(body(MockFCMSendScan.maxDepth - 2)) != nil)
        #expect(MockFCMSendScan.scan(body(MockFCMSendScan.maxDepth)) == nil)
        #expect(Self.treeVerdict(body(MockFCMSendScan.maxDepth))?.token == "a")
    }

    /// Every one-byte change of a passing body (each byte replaced by each of the bytes JSON gives a meaning to, or
    /// removed): the scan never passes what the tree refuses, nor names another token.
    @Test func oneByteChangesNeverContradictTheTree() {
        let body = Array(
            (#"{"message":{"token":"tk-1","data":{"a":"b\"c","é":"1"},"android":{"priority":"HIGH","ttl":"2.5s"},"#
                + #""apns":{"x":[0,-1.5e2,true,null]}},"validate_only":true}"#).utf8)
        let replacements: [UInt8] = Array(#"{}[]":,\ 0-.eEtfnu"#.utf8) + [0x00, 0x1F, 0x7F, 0x80, 0xC3, 0xFF]
        for k in body.indices {
            var cut = body
            cut.remove(at: k)
            Self.expectAgreement(cut, "removed \(k)")
            for r in replacements where r != body[k] {
                var changed = body
                changed[k] = r
                Self.expectAgreement(changed, "\(k) → \(r)")
            }
        }
    }

    // MARK: the memo

    @Test func memoTailTestFindsNamesAnywhere() {
        func mayKeep(_ s: String) -> Bool { Array(s.utf8).withUnsafeBufferPointer { MockFCMBodyMemo.mayKeep($0) } }
        #expect(mayKeep(#","data":{"k":"v"}}}"#))
        #expect(mayKeep(#","data":{"tokens":"messages","x":"token "}}}"#))
        #expect(mayKeep(#","data":{"x":"toke"#))
        // At the end, across an eight-byte word, at the start.
        #expect(!mayKeep(#","data":{"x":"token""#))
        for pad in 0..<10 {
            #expect(!mayKeep(String(repeating: "y", count: pad) + #""message":1"#), "\(pad)")
            #expect(!mayKeep(String(repeating: "y", count: pad) + #"\"#), "\(pad)")
        }
        #expect(!mayKeep(#""token":"x"}}"#))
    }

    /// A per-person campaign: every body's tail differs, and the memo never answers for a tail it did not keep.
    @Test func memoAnswersOnlyForTheKeptTail() {
        var memo = MockFCMBodyMemo()
        func body(_ token: String, _ secret: String) -> [UInt8] {
            Array((#"{"message":{"token":""# + token + #"","data":{"s":""# + secret + #""}}}"#).utf8)
        }
        func match(_ b: [UInt8]) -> String? {
            b.withUnsafeBufferPointer { memo.match($0).map { String(decoding: $0.token, as: UTF8.self) } }
        }
        #expect(match(body("a", "1")) == nil)
        body("a", "1").withUnsafeBufferPointer { memo.remember($0, validateOnly: false) }
        #expect(match(body("b", "1")) == "b")
        #expect(match(body("b", "2")) == nil)
        #expect(match(body("b", "12")) == nil)
        body("c", "longer secret").withUnsafeBufferPointer { memo.remember($0, validateOnly: true) }
        #expect(match(body("d", "1")) == nil)
        #expect(match(body("d", "longer secret")) == "d")
        // A tail that cannot be kept leaves the kept one in place.
        body("e", #"\n"#).withUnsafeBufferPointer { memo.remember($0, validateOnly: false) }
        #expect(match(body("f", "longer secret")) == "f")
    }

    // MARK: the skips

    /// The word-at-a-time skips stop exactly where a byte-by-byte loop does, wherever the stop byte sits.
    @Test func skipsStopWhereAByteLoopStops() {
        let stops: [UInt8] = [UInt8(ascii: "\""), UInt8(ascii: "\\"), 0x00, 0x1F, 0x80, 0xFF]
        for count in 0..<20 {
            for at in 0...count {
                for stop in stops {
                    var bytes = [UInt8](repeating: UInt8(ascii: "a"), count: count)
                    if at < count { bytes[at] = stop }
                    bytes.withUnsafeBufferPointer { b in
                        for from in 0...count {
                            var i = from
                            MockBytes.skipPlainText(b, from: &i)
                            var j = from
                            while j < count, b[j] >= 0x20, b[j] < 0x80, b[j] != 0x22, b[j] != 0x5C { j += 1 }
                            #expect(i == j, "plain \(count) \(at) \(stop) \(from)")
                            var u = from
                            MockBytes.skipUnquoted(b, from: &u)
                            var v = from
                            while v < count, b[v] != 0x22, b[v] != 0x5C { v += 1 }
                            #expect(u == v, "unquoted \(count) \(at) \(stop) \(from)")
                        }
                    }
                }
            }
        }
    }
}
