import Foundation
import Testing
import VolleyCore
import VolleyTestTags

@Suite(.tags(.unit))
struct JSONParserTests {
    /// A string's escaped content, appended to an array or written into a buffer, is what Foundation's encoder
    /// writes between the quotes, for every ASCII byte and for text beyond ASCII.
    @Test func stringContentIsEscapedAsFoundationEscapesIt() throws {
        let encoder = JSONEncoder()
        encoder.outputFormatting = .withoutEscapingSlashes
        var samples = (0..<128).map { String(UnicodeScalar(UInt8($0))) }
        samples += ["héllo wörld ✓ 😀", "a\"b\\c\u{1F}d", "plain-id_1.2:3", ""]
        for text in samples {
            let foundation = String(decoding: try encoder.encode(text).dropFirst().dropLast(), as: UTF8.self)
            var appended: [UInt8] = []
            appendJSONStringContent(text, to: &appended)
            let written = [UInt8](unsafeUninitializedCapacity: 6 * text.utf8.count) { out, count in
                count = writeJSONStringContent(text, into: out)
            }
            #expect(String(decoding: appended, as: UTF8.self) == foundation, "\(Array(text.utf8))")
            #expect(written == appended, "\(Array(text.utf8))")
        }
    }

    /// Documents of every kind read as Foundation's decoder reads them.
    @Test(arguments: [
        #"{"a":1,"b":[true,false,null],"c":{"d":"e"},"f":-2.5e3,"g":"","h":[],"i":{}}"#,
        " \n\t[1, 2.25, -0, 1E2, 0.001, 123456789012345678901234567890]\r\n",
        #""plain""#, "42", "null", "true",
        #"{"unicode":"héllo wörld ✓ 😀","escaped":"\"\\\/\b\f\n\r\t\u0041\u00e9\ud83d\ude00"}"#,
        #"{"k":1,"k":2}"#,
    ])
    func documentsParseAsFoundationReadsThem(_ text: String) throws {
        let ours = try JSONValue(parsing: text)
        let foundation = try JSONDecoder().decode(JSONValue.self, from: Data(text.utf8))
        // Foundation does not hand over a number's text: compare numbers by value, everything else exactly.
        func byValue(_ v: JSONValue) -> JSONValue {
            switch v {
            case .number(let n): return .number(JSONNumber(n.doubleValue))
            case .array(let a): return .array(a.map(byValue))
            case .object(let o): return .object(o.mapValues(byValue))
            default: return v
            }
        }
        #expect(byValue(ours) == byValue(foundation))
    }

    @Test func escapesAndSurrogatePairsDecode() throws {
        let value = try JSONValue(parsing: #"["\u00e9\ud83d\ude00\n\"\\\/", "a\u0000b"]"#)
        #expect(value == .array([.string("é😀\n\"\\/"), .string("a\u{0}b")]))
    }

    @Test func aByteOrderMarkIsSkipped() throws {
        #expect(try JSONValue(parsing: [0xEF, 0xBB, 0xBF] + Array(#"{"a":1}"#.utf8)) == .object(["a": .number(1)]))
    }

    /// A number is kept as written and written back the same, whatever a `Double` would make of it.
    @Test(arguments: [
        "9007199254740993", "18446744073709551617", "-9223372036854775809", "0.1", "1e-7", "1E+2", "-0",
        "0.30000000000000004", "123456789012345678901234567890123456789012345", "2.50", "1e999",
    ])
    func numbersKeepTheirText(_ text: String) throws {
        let value = try JSONValue(parsing: #"{"data":{"n":\#(text)},"a":[\#(text)]}"#)
        #expect(value["data"]?["n"] == .number(try #require(JSONNumber(text: text))))
        #expect(String(decoding: value.encoded(), as: UTF8.self) == #"{"a":[\#(text)],"data":{"n":\#(text)}}"#)
    }

    /// Through `Codable` (Foundation's coders, YAML), numbers of up to 38 significant digits keep their value.
    @Test(arguments: ["9007199254740993", "18446744073709551617", "0.1", "1e-7", "-42", "18446744073709551615"])
    func numbersKeepTheirValueThroughCodable(_ text: String) throws {
        let value = try JSONValue(parsing: "[\(text)]")
        let json = try JSONEncoder().encode(value)
        let back = try JSONDecoder().decode(JSONValue.self, from: json)
        let original = try #require(JSONNumber(text: text))
        guard case .array(let items) = back, case .number(let n)? = items.first else {
            Issue.record("not an array of a number: \(back)")
            return
        }
        #expect(Decimal(string: n.text) == Decimal(string: original.text), "\(text) came back as \(n)")
    }

    @Test func numberTextIsChecked() {
        for good in ["0", "-0", "1.5", "1e5", "1E-5", "12.34e+56"] { #expect(JSONNumber(text: good) != nil, "\(good)") }
        for bad in ["", "-", "01", "1.", ".5", "+1", "1e", "NaN", "1 ", "0x10"] {
            #expect(JSONNumber(text: bad) == nil, "\(bad)")
        }
        #expect(JSONNumber(3.0).text == "3")
        #expect(JSONNumber(0.5).text == "0.5")
        #expect(JSONNumber(7).intValue == 7)
        #expect(JSONNumber(text: "3e0")?.intValue == 3)
        #expect(JSONNumber(text: "3.5")?.intValue == nil)
    }

    /// Text that is not JSON is refused with where and why, whatever the other parsers forgive.
    @Test(arguments: [
        ("", "unexpected end of the text"),
        ("{\"a\":1,}", "expected a key in double quotes"),
        ("[1,]", "expected a JSON value"),
        ("{'a':1}", "expected a key in double quotes"),
        ("{\"a\" 1}", "expected ':' after a key"),
        ("{\"a\":1 \"b\":2}", "expected ',' or '}' in an object"),
        ("[1 2]", "expected ',' or ']' in an array"),
        ("[1", "unexpected end of the text in an array"),
        ("\"abc", "a string without its closing quote"),
        ("\"a\tb\"", "a control character inside a string"),
        ("\"\\x\"", "an unknown escape"),
        ("\"\\u12\"", "\\u needs four hex digits"),
        ("\"\\ud83d\"", "without its low surrogate"),
        ("\"\\ude00\"", "a lone surrogate"),
        ("01", "after the JSON value"),
        ("-", "a '-' without digits"),
        ("1.", "a '.' without digits after it"),
        ("1e+", "an exponent without digits"),
        (".5", "expected a JSON value"),
        ("+1", "expected a JSON value"),
        ("NaN", "expected a JSON value"),
        ("tru", "unexpected end of the text"),
        ("nul1", "expected a JSON value"),
        ("{} {}", "after the JSON value"),
        ("// comment\n{}", "expected a JSON value"),
    ])
    func textThatIsNotJSONIsRefused(_ text: String, _ problem: String) {
        do {
            let value = try JSONValue(parsing: text)
            Issue.record("parsed \(text.debugDescription) as \(value)")
        } catch {
            #expect(error.message.contains(problem), "\(text.debugDescription): \(error)")
        }
    }

    @Test func invalidUTF8IsRefused() {
        let bytes: [UInt8] = [0x22, 0x61, 0xC3, 0x28, 0x22]
        #expect(throws: JSONSyntaxError(offset: 1, message: "a string that is not valid UTF-8")) {
            try JSONValue(parsing: bytes)
        }
    }

    @Test func nestingStopsAtItsLimit() throws {
        let depth = JSONValue.maxParseDepth
        _ = try JSONValue(parsing: String(repeating: "[", count: depth) + String(repeating: "]", count: depth))
        let deeper = String(repeating: "[", count: depth + 1) + String(repeating: "]", count: depth + 1)
        #expect(throws: JSONSyntaxError.self) { try JSONValue(parsing: deeper) }
    }
}

@Suite(.tags(.unit))
struct JobJSONReadingTests {
    /// A job with every field set. `everyFieldIsSet` fails when PushJob or Notification gains a field this leaves
    /// out, so the round trip below covers each field the reading by hand must know.
    static var fullJob: PushJob {
        let n = Notification(
            title: "t", subtitle: "s", body: "b", localized: ["es": .init(title: "T", subtitle: "S", body: "B")],
            sound: "ping.caf", badge: 3, badgeIncrement: 1, data: ["k": .string("v"), "n": .array([.number(1)])],
            contentAvailable: true, mutableContent: false, category: "c", threadId: "th", collapseId: "co",
            interruptionLevel: "time-sensitive", relevanceScore: 0.5, targetContentId: "tc", ttl: 60, priority: .high,
            pushType: "alert", imageUrl: "https://i", url: "https://u", channelId: "ch", type: "ty", targetId: "001",
            apns: .object(["aps": .object([:])]), fcm: .object(["data": .object([:])]))
        var notification = n
        notification.targetPageRef = #"{"type":"standard__recordPage"}"#
        var job = PushJob(
            id: "j", org: "o", app: "a", recipients: ["005A"],
            devices: [JobDevice(platform: .ios, token: DeviceToken("beef"), environment: .sandbox)],
            notification: notification, apns: .object(["aps": .object(["alert": .string("x")])]),
            fcm: .object(["k": .bool(true)]), platforms: [.ios, .android])
        job.shard = ShardRef(parent: "p", index: 1, count: 4)
        job.recipients = ["005A", .segment("gold-berlin"), .all]
        job.exclude = ["005B", .segment("churned")]
        job.debug = true
        job.salesforcePayload = false
        job.inbox = true
        job.notificationId = "n-1"
        job.templateId = "tpl-1"
        job.customData = .object(["plan": .string("gold")])
        job.throttlePerMinute = 1019
        job.enableFrequencyCap = false
        job.sendAt = ScheduledTime("2026-12-01T09:00:00.25+01:00")
        job.deliverAtLocalTime = LocalDeliveryTime("07:45")
        job.tracking = false
        return job
    }

    @Test func everyFieldIsSet() {
        func unset(_ value: Any) -> [String] {
            Mirror(reflecting: value).children.compactMap { child in
                let m = Mirror(reflecting: child.value)
                return m.displayStyle == .optional && m.children.isEmpty ? child.label : nil
            }
        }
        #expect(unset(Self.fullJob) == [])
        // `resendCollapseId` is the worker's (Notification.resendCollapseId), never in a job.
        #expect(unset(Self.fullJob.notification) == ["resendCollapseId"])
        #expect(unset(Self.fullJob.notification.localized?["es"] as Any) == [])
        #expect(unset(Self.fullJob.devices?.first as Any) == [])
    }

    /// What `Codable` writes, the reading by hand reads back whole.
    @Test func aJobReadsBackWhatCodableWrites() throws {
        let data = try JSONEncoder().encode(Self.fullJob)
        #expect(try PushJob(json: JSONValue(parsing: data), defaultOrg: nil) == Self.fullJob)
        #expect(try JSONDecoder().decode(PushJob.self, from: data) == Self.fullJob)
    }

    @Test func aMissingOrgIsTheDefaultOrRequired() throws {
        let json = try JSONValue(parsing: #"{"app":"a","notification":{}}"#)
        #expect(try PushJob(json: json, defaultOrg: "caller").org == "caller")
        #expect(throws: JSONFieldError(path: [.key("org")], problem: .missing)) {
            try PushJob(json: json, defaultOrg: nil)
        }
    }

    /// A field of the wrong kind is named by its path, and `Codable` callers get the same path.
    @Test func faultsNameTheirPath() throws {
        let json =
            #"{"org":"o","app":"a","devices":[{"platform":"ios","token":"t"},{"platform":"web","token":"t"}],"#
            + #""notification":{}}"#
        #expect(
            throws: JSONFieldError(
                path: [.key("devices"), .index(1), .key("platform")], problem: .expected("one of ios, android"))
        ) { try PushJob(json: JSONValue(parsing: json), defaultOrg: nil) }
        do {
            _ = try JSONDecoder().decode(PushJob.self, from: Data(json.utf8))
            Issue.record("decoded")
        } catch DecodingError.dataCorrupted(let context) {
            #expect(
                context.codingPath.map { $0.intValue.map { "[\($0)]" } ?? $0.stringValue } == [
                    "devices", "[1]", "platform",
                ])
            #expect(context.debugDescription == "expected one of ios, android")
        }
        let missing = #"{"org":"o","notification":{"title":"t"}}"#
        #expect(throws: JSONFieldError(path: [.key("app")], problem: .missing)) {
            try PushJob(json: JSONValue(parsing: missing), defaultOrg: nil)
        }
        #expect(throws: JSONFieldError(path: [.key("notification"), .key("ttl")], problem: .expected("an integer"))) {
            try Notification(json: JSONValue(parsing: #"{"ttl":"60"}"#), at: [.key("notification")])
        }
    }

    @Test func generatedJobIDsAreVersion4UUIDs() {
        let ids = (0..<100).map { _ in JobID.generated().rawValue }
        #expect(Set(ids).count == 100)
        for id in ids {
            #expect(id.hasPrefix("job-"))
            let uuid = UUID(uuidString: String(id.dropFirst(4)))
            #expect(uuid != nil, "\(id)")
            #expect(uuid?.uuidString.lowercased() == String(id.dropFirst(4)))
            #expect(Array(id.utf8)[4 + 14] == UInt8(ascii: "4"))
        }
    }

    /// The reader's key mask only ever answers "absent" for a key the object does not hold: every member is found,
    /// including keys that share a length and a first byte (one bit) with another, present or not.
    @Test func theObjectReaderFindsEveryMemberAndNoOther() throws {
        var keys = ["", "a", "ab", "ba", "é", "title", "titlf", "x\u{0}", "notification", "recipients"]
        var rng = SystemRandomNumberGenerator()
        for _ in 0..<200 {
            let length = Int.random(in: 1...20, using: &rng)
            keys.append(String((0..<length).map { _ in "abcdefghijklmnopqrstuvwxyzé{}_".randomElement(using: &rng)! }))
        }
        for size in [0, 1, 2, 5, 8, 40, 210] {
            let present = Array(Set(keys).shuffled(using: &rng).prefix(size))
            var members: [String: JSONValue] = [:]
            for (i, key) in present.enumerated() { members[key] = .string("v\(i)") }
            let reader = try JSONObjectReader(.object(members), at: [])
            for key in Set(keys) {
                #expect(reader.value(key) == members[key], "size \(size), key \(key.debugDescription)")
            }
            #expect(reader.value("titlg") == members["titlg"])
        }
    }

    /// The id's bits are the generator's, little-endian word by word, with the version and variant bits set.
    @Test func generatedJobIDsTakeTheirBitsFromTheGivenGenerator() {
        struct Fixed: RandomNumberGenerator {
            var words: [UInt64] = [0x0011_2233_4455_6677, 0x8899_AABB_CCDD_EEFF]
            mutating func next() -> UInt64 { words.removeFirst() }
        }
        var rng = Fixed()
        #expect(JobID.generated(prefix: "p-", using: &rng).rawValue == "p-77665544-3322-4100-bfee-ddccbbaa9988")
    }
}
