import Foundation
import Testing
import VolleyCore
import VolleyTestTags

/// The one writing of a job (`PushJob.jsonText`), which every producer puts on the job stream: every field is
/// written, the worker's reading reads it back whole, and a number keeps its text however long it is.
@Suite(.tags(.unit))
struct JobJSONWritingTests {
    /// Past 2^53, past 64 bits, decimals a `Double` rounds, an exponent, 42 digits, and forms a reformatting writer
    /// would change (`1E+2`, `2.50`, `-0`).
    static let numbers = [
        "9007199254740993", "18446744073709551617", "0.1", "1e-7", "123456789012345678901234567890123456789012",
        "-9223372036854775809", "1E+2", "2.50", "-0",
    ]

    /// The members a value's `json` writes are its stored properties, all of them, for a value with every field
    /// set: a field added to a job without a writing fails here.
    @Test func everyFieldIsWritten() throws {
        func labels(_ value: Any) -> Set<String> { Set(Mirror(reflecting: value).children.compactMap(\.label)) }
        func keys(_ json: JSONValue) throws -> Set<String> { Set(try #require(json.objectValue).keys) }
        let job = JobJSONReadingTests.fullJob
        #expect(try keys(job.json) == labels(job))
        // `resendCollapseId` is the worker's (Notification.resendCollapseId): never read from a job nor written.
        #expect(try keys(job.notification.json) == labels(job.notification).subtracting(["resendCollapseId"]))
        let localized = try #require(job.notification.localized?["es"])
        #expect(try keys(localized.json) == labels(localized))
        let device = try #require(job.devices?.first)
        #expect(try keys(device.json) == labels(device))
        let shard = try #require(job.shard)
        #expect(try keys(shard.json) == labels(shard))
    }

    /// What the writer writes, the worker's reading reads back whole; and `Codable` writes the same value.
    @Test func aJobReadsBackWhatItsWriterWrites() throws {
        let job = JobJSONReadingTests.fullJob
        #expect(try PushJob(json: JSONValue(parsing: job.jsonText), defaultOrg: nil) == job)
        #expect(try JSONValue(parsing: JSONEncoder().encode(job)) == job.json)
        #expect(try JSONDecoder().decode(PushJob.self, from: JSONEncoder().encode(job)) == job)
    }

    /// A number in `data`, in raw `apns` and `fcm` payloads (the job's and the notification's) and in
    /// `customData` comes out of the writer as the text that went into the reading.
    @Test(arguments: numbers)
    func numbersKeepTheirText(_ text: String) throws {
        let body =
            #"{"apns":{"aps":{"alert":"N"},"n":\#(text)},"app":"a","customData":{"n":\#(text)},"#
            + #""devices":[{"platform":"ios","token":"t"}],"fcm":{"data":{"n":"x"},"n":[\#(text)]},"id":"j","#
            + #""notification":{"apns":{"n":\#(text)},"data":{"n":\#(text),"o":{"m":[\#(text)]}},"#
            + #""fcm":{"n":\#(text)},"title":"T"},"org":"o"}"#
        let job = try PushJob(json: JSONValue(parsing: body), defaultOrg: nil)
        // Compact, keys sorted: the body is already in the writer's form, so it comes out byte for byte.
        #expect(job.jsonText == body)
        #expect(job.encoded() == Array(body.utf8))
        let number = try #require(JSONNumber(text: text))
        #expect(job.notification.data?["n"] == .number(number))
        #expect(try PushJob(json: JSONValue(parsing: job.jsonText), defaultOrg: nil) == job)
    }

    /// Numbers a job's own fields hold as Swift values are written as integers where they are whole.
    @Test func fieldNumbersAreWrittenPlainly() throws {
        var job = PushJob(
            org: "o", app: "a", recipients: ["005A"],
            notification: Notification(badge: 3, relevanceScore: 1, ttl: 0))
        job.throttlePerMinute = 600
        job.notification.relevanceScore = 0.25
        let text = job.jsonText
        #expect(text.contains(#""badge":3"#))
        #expect(text.contains(#""ttl":0"#))
        #expect(text.contains(#""relevanceScore":0.25"#))
        #expect(text.contains(#""throttlePerMinute":600"#))
        #expect(!text.contains("null"))
    }

    /// A sync hint's push is submitted under the SHA-256 of its text, and a flusher that died after submitting
    /// submits the same batch again: the text stays what it was, so the second submission is a replay.
    @Test func aSyncHintPushKeepsItsText() {
        let batch = SyncHintBatch(
            key: SyncHintKey(app: "app1", user: "ada", type: "Account"), batch: 7, recordIds: ["a0", "001xx"])
        #expect(
            SyncHintPush.job(org: "orgA", batch: batch).jsonText
                == #"{"app":"app1","id":"synchint-c790410b08909ba0-7","inbox":false,"notification":{"#
                + #""collapseId":"sync-Account","contentAvailable":true,"data":{"recordIds":["a0","001xx"],"#
                + #""type":"Account"},"priority":"normal","pushType":"background","ttl":3600},"org":"orgA","#
                + #""recipients":["ada"],"salesforcePayload":false}"#)
    }
}
