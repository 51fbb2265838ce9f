import Foundation
import Testing
import VolleyCore
import VolleyTestTags

@testable import VolleyAPI

/// The pure parts of `GET /v1/jobs` and the CSV export: RFC 4180 quoting, token redaction, the outcome columns,
/// `Accept` negotiation, and the list's query parameters (each fault a 400 naming its field).
@Suite(.tags(.unit)) struct JobHistoryTests {
    func field(_ s: String) -> String {
        var out: [UInt8] = []
        OutcomeCSV.appendField(s, to: &out)
        return String(decoding: out, as: UTF8.self)
    }

    @Test(arguments: [
        ("plain", "plain"), ("", ""), ("a,b", "\"a,b\""), ("say \"hi\"", "\"say \"\"hi\"\"\""),
        ("two\nlines", "\"two\nlines\""), ("cr\rhere", "\"cr\rhere\""), ("\"", "\"\"\"\""), ("Zürich", "Zürich"),
        (" spaced ", " spaced "),
    ])
    func fieldsAreQuotedAsRFC4180Says(_ input: String, _ expected: String) {
        #expect(field(input) == expected)
    }

    @Test func aRowHasFiveColumnsEndsInCRLFAndRedactsTheToken() {
        let row = OutcomeExportRow(
            platform: .ios, token: DeviceToken("beef00000000000000001a2b3c4d"), user: UserID("005,\"A\""),
            outcome: .rejected(status: 410, reason: OutcomeReason("Unregistered"), action: .removeToken))
        var out: [UInt8] = []
        OutcomeCSV.appendRow(row, to: &out)
        #expect(String(decoding: out, as: UTF8.self) == "ios,…1a2b3c4d,\"005,\"\"A\"\"\",rejected,Unregistered\r\n")
        #expect(String(decoding: OutcomeCSV.header, as: UTF8.self) == "platform,token,user,outcome,reason\r\n")
    }

    @Test func theOutcomeColumnsNameEachOutcome() {
        #expect(OutcomeCSV.outcome(.accepted) == ("accepted", ""))
        #expect(
            OutcomeCSV.outcome(.failed(reason: OutcomeReason("timeout"), resendWasSafe: false)) == ("failed", "timeout")
        )
        #expect(OutcomeCSV.outcome(.quotaExceeded) == ("quotaExceeded", ""))
        #expect(OutcomeCSV.outcome(.expired) == ("expired", ""))
        let unregistered = OutcomeCSV.outcome(
            .rejected(status: 404, reason: OutcomeReason("UNREGISTERED"), action: .removeToken))
        #expect(unregistered == ("rejected", "UNREGISTERED"))
    }

    @Test func aShortTokenShowsNothingOfItself() {
        #expect(OutcomeCSV.redacted(DeviceToken("12345678")) == "…")
        // Never more than half of a token; a real token's last 8 characters.
        #expect(OutcomeCSV.redacted(DeviceToken("123456789")) == "…6789")
        #expect(
            OutcomeCSV.redacted(DeviceToken("beef" + String(repeating: "0", count: 52) + "c0ffee42")) == "…c0ffee42")
        #expect(OutcomeCSV.redacted(DeviceToken("")) == "…")
    }

    @Test(
        arguments: [
            (nil, false), ("*/*", false), ("application/json", false), ("text/csv", true), ("TEXT/CSV", true),
            ("text/csv;q=0", false), ("application/json, text/csv", true),
            ("application/json;q=1, text/csv;q=0.5", false),
            ("text/csv;q=0.9, */*;q=0.1", true), ("text/*", false),
            ("text/html,application/xhtml+xml,*/*;q=0.8", false),
            ("text/csv; charset=utf-8", true),
        ] as [(String?, Bool)])
    func theStatusRouteAnswersCSVOnlyWhenAskedByName(_ accept: String?, _ csv: Bool) {
        #expect(OutcomeCSV.prefersCSV(accept: accept) == csv)
    }

    @Test(
        arguments: [
            (nil, true), ("*/*", true), ("text/*", true), ("text/csv", true), ("application/json", false),
            ("text/csv;q=0, */*", false), ("text/csv;q=x", false),
        ] as [(String?, Bool)])
    func theOutcomesRouteRefusesAnAcceptWithoutCSV(_ accept: String?, _ ok: Bool) {
        #expect(OutcomeCSV.acceptsCSV(accept: accept) == ok)
    }

    func query(_ parameters: [String: String]) throws -> JobListQuery {
        try APIServer.jobListQuery { parameters[$0] }
    }

    func refusedField(_ parameters: [String: String]) -> String? {
        do {
            _ = try query(parameters)
            return nil
        } catch let p as APIProblem {
            #expect(p.status == .badRequest)
            return p.field
        } catch {
            return "\(error)"
        }
    }

    @Test func theListQueryReadsEachParameter() throws {
        let q = try query([
            "state": "dead-lettered", "since": "2026-03-01T10:00:00.250+01:00", "limit": "100",
            "cursor": "1772355600250:job-1.s2",
        ])
        #expect(q.state == "dead-lettered")
        #expect(q.since == Date(timeIntervalSince1970: 1_772_355_600.25))
        #expect(q.limit == 100)
        #expect(q.cursor == JobListCursor(createdAtMillis: 1_772_355_600_250, job: "job-1.s2"))
        let defaults = try query([:])
        #expect(defaults.limit == JobListQuery.defaultLimit && defaults.state == nil && defaults.cursor == nil)
    }

    @Test(arguments: [
        (["state": "sent"], "state"), (["state": ""], "state"), (["since": "yesterday"], "since"),
        (["since": "2026-03-01T10:00:00"], "since"), (["since": "2026-03-01 10:00:00Z"], "since"),
        (["limit": "0"], "limit"), (["limit": "101"], "limit"), (["limit": "ten"], "limit"), (["limit": "-1"], "limit"),
        (["cursor": "abc"], "cursor"), (["cursor": ":job"], "cursor"), (["cursor": "12:"], "cursor"),
        (["cursor": "-12:job"], "cursor"), (["cursor": "99999999999999999999:job"], "cursor"),
    ])
    func aBadParameterIsA400NamingIt(_ parameters: [String: String], _ field: String) {
        #expect(refusedField(parameters) == field)
    }

    @Test func aCursorWritesWhatItReadsAndOrdersNewestFirst() throws {
        let c = try #require(JobListCursor("1700000000000:a:b"))
        #expect(c.job == "a:b" && c.createdAtMillis == 1_700_000_000_000)
        #expect(c.description == "1700000000000:a:b")
        #expect(JobListCursor(c.description) == c)
        // After the cursor: older, or as old with a smaller id (the order of ZREVRANGEBYSCORE).
        #expect(c.precedes(millis: 1_699_999_999_999, job: "z"))
        #expect(c.precedes(millis: 1_700_000_000_000, job: "a:a"))
        #expect(!c.precedes(millis: 1_700_000_000_000, job: "a:b"))
        #expect(!c.precedes(millis: 1_700_000_000_000, job: "a:c"))
        #expect(!c.precedes(millis: 1_700_000_000_001, job: "a"))
    }
}
