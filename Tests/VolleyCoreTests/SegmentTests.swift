import Foundation
import Testing
import VolleyCore
import VolleyTestTags

/// Segments' definitions, their validation (each fault names its field), the comparison rule of `gt` and `lt`, and
/// the entries a job's `recipients` and `exclude` take.
@Suite(.tags(.unit)) struct SegmentTests {
    func segment(_ json: String) throws -> Segment {
        try Segment(id: "s", json: try JSONValue(parsing: json))
    }

    func fault(_ json: String) -> String? {
        do {
            _ = try segment(json)
            return nil
        } catch let e as JSONFieldError {
            return e.field
        } catch {
            return "not a field error: \(error)"
        }
    }

    @Test func aDefinitionReadsAndWritesBackAsGiven() throws {
        let text =
            #"{"filters":[{"attribute":"plan","op":"eq","value":"gold"},{"attribute":"city","op":"in","#
            + #""value":["Berlin","Lisbon"]},{"attribute":"age","op":"gt","value":30},"#
            + #"{"attribute":"seen","op":"lt","value":"2026-01-31T09:00:00+01:00"},{"attribute":"vip","op":"exists"}],"#
            + #""match":"any"}"#
        let s = try segment(text)
        #expect(s.match == .any && s.filters.count == 5)
        #expect(s.definitionJSON.jsonText == text)
        #expect(try segment(s.definitionJSON.jsonText) == s)
        #expect(s.json.objectValue?["id"] == .string("s"))
        // `match` defaults to all.
        #expect(try segment(#"{"filters":[{"attribute":"plan","op":"exists"}]}"#).match == .all)
    }

    @Test(arguments: [
        (
            #"{"filters":[{"attribute":"plan","op":"eq","value":"gold"},{"attribute":"city","op":"like"}]}"#,
            "filters[1].op"
        ),
        (#"{"filters":[{"attribute":"plan","op":"eq"}]}"#, "filters[0].value"),
        (#"{"filters":[{"attribute":"plan","op":"eq","value":7}]}"#, "filters[0].value"),
        (#"{"filters":[{"attribute":"plan","op":"exists","value":"x"}]}"#, "filters[0].value"),
        (#"{"filters":[{"attribute":"plan","op":"notExists","value":""}]}"#, "filters[0].value"),
        (#"{"filters":[{"attribute":"plan","op":"in","value":"gold"}]}"#, "filters[0].value"),
        (#"{"filters":[{"attribute":"plan","op":"in","value":[]}]}"#, "filters[0].value"),
        (#"{"filters":[{"attribute":"plan","op":"in","value":["a",1]}]}"#, "filters[0].value[1]"),
        (#"{"filters":[{"attribute":"age","op":"gt","value":"thirty"}]}"#, "filters[0].value"),
        (#"{"filters":[{"attribute":"age","op":"lt","value":true}]}"#, "filters[0].value"),
        (#"{"filters":[{"attribute":"first name","op":"exists"}]}"#, "filters[0].attribute"),
        (#"{"filters":[{"op":"exists"}]}"#, "filters[0].attribute"),
        (#"{"filters":[{"attribute":"plan"}]}"#, "filters[0].op"),
        (#"{"filters":[{"attribute":"plan","op":"exists","valu":1}]}"#, "filters[0].valu"),
        (#"{"filters":[]}"#, "filters"),
        (#"{"match":"all"}"#, "filters"),
        (#"{"filters":{}}"#, "filters"),
        (#"{"match":"some","filters":[{"attribute":"plan","op":"exists"}]}"#, "match"),
        (#"{"filters":[{"attribute":"plan","op":"exists"}],"matsh":"all"}"#, "matsh"),
        (#"{"filters":["plan"]}"#, "filters[0]"),
    ])
    func aBadFilterNamesItsField(json: String, field: String) {
        #expect(fault(json) == field, "\(json)")
    }

    @Test func limitsAreChecked() throws {
        let many = (0...Segment.maxFilters).map { _ in #"{"attribute":"a","op":"exists"}"# }.joined(separator: ",")
        #expect(fault(#"{"filters":[\#(many)]}"#) == "filters")
        let values = (0...SegmentFilter.maxValues).map { "\"v\($0)\"" }.joined(separator: ",")
        #expect(fault(#"{"filters":[{"attribute":"a","op":"in","value":[\#(values)]}]}"#) == "filters[0].value")
        let long = String(repeating: "x", count: UserAttributes.maxValueCharacters + 1)
        #expect(fault(#"{"filters":[{"attribute":"a","op":"eq","value":"\#(long)"}]}"#) == "filters[0].value")
        let wide = String(repeating: "é", count: UserAttributes.maxValueCharacters)
        #expect(fault(#"{"filters":[{"attribute":"a","op":"eq","value":"\#(wide)"}]}"#) == nil)
    }

    @Test(
        arguments: [
            ("42", AttributeScore(kind: .number, value: 42)),
            ("-2.5", AttributeScore(kind: .number, value: -2.5)),
            ("1e3", AttributeScore(kind: .number, value: 1000)),
            ("007", AttributeScore(kind: .number, value: 7)),
            ("2026-01-31T09:00:00Z", AttributeScore(kind: .instant, value: 1_769_850_000_000)),
            ("2026-01-31T10:00:00+01:00", AttributeScore(kind: .instant, value: 1_769_850_000_000)),
            ("+1", nil), ("1.", nil), (".5", nil), ("inf", nil), ("nan", nil), ("0x10", nil), ("1e999", nil), ("", nil),
            ("gold", nil), ("2026-01-31", nil), ("2026-01-31T09:00:00", nil), (" 1", nil),
        ] as [(String, AttributeScore?)])
    func theComparisonRuleReadsNumbersAndTimes(text: String, expected: AttributeScore?) {
        #expect(AttributeScore(text) == expected)
    }

    @Test func gtAndLtCompareNumbersAsNumbersAndTimesAsInstants() throws {
        let over9 = try segment(#"{"filters":[{"attribute":"n","op":"gt","value":"9"}]}"#)
        #expect(over9.matches(["n": "10"])) // not "10" < "9" as text
        #expect(!over9.matches(["n": "9"]) && !over9.matches(["n": "9.0"]) && over9.matches(["n": "9.5"]))
        #expect(!over9.matches(["n": "2026-01-31T09:00:00Z"])) // a time is not compared with a number
        #expect(!over9.matches(["n": "ten"]) && !over9.matches(nil) && !over9.matches([:]))
        let before = try segment(#"{"filters":[{"attribute":"t","op":"lt","value":"2026-01-31T10:00:00+01:00"}]}"#)
        #expect(before.matches(["t": "2026-01-31T08:59:59.999Z"]))
        #expect(!before.matches(["t": "2026-01-31T09:00:00Z"])) // the same instant, not before it
        #expect(!before.matches(["t": "2026-01-31T09:30:00+00:30"])) // also the same instant
        #expect(!before.matches(["t": "5"]))
        let under = try segment(#"{"filters":[{"attribute":"n","op":"lt","value":-1.5}]}"#)
        #expect(under.matches(["n": "-2"]) && !under.matches(["n": "-1.5"]))
        #expect(under.definitionJSON.jsonText.contains(#""value":-1.5"#))
    }

    @Test func equalityIsExactTextAndNeNeedsTheAttribute() throws {
        let gold = try segment(#"{"filters":[{"attribute":"plan","op":"eq","value":"gold"}]}"#)
        #expect(gold.matches(["plan": "gold"]) && !gold.matches(["plan": "Gold"]) && !gold.matches(["plan": "gold "]))
        let notGold = try segment(#"{"filters":[{"attribute":"plan","op":"ne","value":"gold"}]}"#)
        #expect(notGold.matches(["plan": "silver"]) && !notGold.matches(["plan": "gold"]))
        #expect(!notGold.matches(nil) && !notGold.matches(["city": "Berlin"]))
        let none = try segment(#"{"filters":[{"attribute":"plan","op":"notExists"}]}"#)
        #expect(none.matches(nil) && none.matches(["city": "Berlin"]) && !none.matches(["plan": ""]))
        let either = try segment(
            #"{"match":"any","filters":[{"attribute":"plan","op":"ne","value":"gold"},"#
                + #"{"attribute":"plan","op":"notExists"}]}"#)
        #expect(either.matches(nil) && either.matches(["plan": "silver"]) && !either.matches(["plan": "gold"]))
        let cities = try segment(#"{"filters":[{"attribute":"city","op":"in","value":["Berlin","Lisbon"]}]}"#)
        #expect(cities.matches(["city": "Lisbon"]) && !cities.matches(["city": "Paris"]) && !cities.matches(nil))
        let both = try segment(
            #"{"filters":[{"attribute":"plan","op":"eq","value":"gold"},"#
                + #"{"attribute":"city","op":"eq","value":"Berlin"}]}"#)
        #expect(both.matches(["plan": "gold", "city": "Berlin"]) && !both.matches(["plan": "gold", "city": "Bonn"]))
    }
}

/// A job's `recipients` and `exclude` entries: read, written back byte for byte, and refused naming the field.
@Suite(.tags(.unit)) struct RecipientEntryTests {
    func job(_ members: String) throws -> PushJob {
        try PushJob(
            json: try JSONValue(parsing: #"{"org":"o","app":"a","notification":{"title":"t"},\#(members)}"#),
            defaultOrg: nil)
    }

    func fault(_ members: String) -> String? {
        do {
            _ = try job(members)
            return nil
        } catch let e as JSONFieldError {
            return e.field
        } catch {
            return "not a field error: \(error)"
        }
    }

    @Test func entriesRoundTripInOrder() throws {
        let j = try job(
            #""recipients":["u1",{"segment":"gold-berlin"},"00Gteam",{"all":true}],"#
                + #""exclude":["u2",{"segment":"churned"}]"#)
        #expect(j.recipients == ["u1", .segment("gold-berlin"), "00Gteam", .all])
        #expect(j.exclude == ["u2", .segment("churned")])
        #expect(j.recipientIDs == ["u1", "00Gteam"])
        let text = j.jsonText
        #expect(text.contains(#""recipients":["u1",{"segment":"gold-berlin"},"00Gteam",{"all":true}]"#))
        #expect(text.contains(#""exclude":["u2",{"segment":"churned"}]"#))
        let again = try PushJob(json: try JSONValue(parsing: text), defaultOrg: nil)
        #expect(again == j)
        #expect(again.jsonText == text)
        // Codable goes through the same reading and writing.
        #expect(try JSONDecoder().decode(PushJob.self, from: JSONEncoder().encode(j)) == j)
        // Plain ids stay plain strings.
        #expect(try job(#""recipients":["a","b"]"#).jsonText.contains(#""recipients":["a","b"]"#))
    }

    @Test(arguments: [
        (#""recipients":["a","b","c",{"segment":5}]"#, "recipients[3].segment"),
        (#""recipients":[{"segment":""}]"#, "recipients[0].segment"),
        (#""recipients":[{"segment":"a b"}]"#, "recipients[0].segment"),
        (#""recipients":[{"segmnt":"x"}]"#, "recipients[0].segmnt"),
        (#""recipients":[{"segment":"x","all":true}]"#, "recipients[0]"),
        (#""recipients":[{}]"#, "recipients[0]"),
        (#""recipients":[{"all":false}]"#, "recipients[0].all"),
        (#""recipients":[7]"#, "recipients[0]"),
        (#""recipients":"u1""#, "recipients"),
        (#""recipients":["u"],"exclude":[{"all":true}]"#, "exclude[0].all"),
        (#""recipients":["u"],"exclude":["x",{"segment":null}]"#, "exclude[1].segment"),
    ])
    func aBadEntryNamesItsField(members: String, field: String) {
        #expect(fault(members) == field, "\(members)")
    }

    @Test func unknownKeysOfAnEntryAreNamedWithTheirPath() throws {
        let text = #"{"org":"o","app":"a","recipients":["u",{"segmnt":"x"}],"exclude":[{"al":true}]}"#
        let unknown = try #require(JobKeys.unknownKeys(inJSON: Data(text.utf8)))
        #expect(
            unknown.map(\.description) == [
                "'recipients[1].segmnt' (did you mean 'segment'?)", "'exclude[0].al' (did you mean 'all'?)",
            ])
    }

    @Test func theEntryLimitHoldsForBothLists() throws {
        var j = PushJob(org: "o", app: "a", recipients: ["u"], notification: Notification(title: "t"))
        j.recipients = (0...PushJob.maxRecipients).map { _ in .segment("s") }
        #expect(throws: JobRejection.self) { try j.validate() }
        j.recipients = [.all]
        try j.validate()
        j.exclude = (0...PushJob.maxRecipients).map { .id(RecipientID("u\($0)")) }
        #expect(throws: JobRejection.self) { try j.validate() }
        let many = (0...PushJob.maxRecipients).map { "\"u\($0)\"" }.joined(separator: ",")
        #expect(fault(#""recipients":["u"],"exclude":[\#(many)]"#) == "exclude")
        // A segment or `all` is a target of its own.
        j.exclude = nil
        j.recipients = [.segment("s")]
        try j.validate()
    }
}
