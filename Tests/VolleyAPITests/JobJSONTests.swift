import Foundation
import Testing
import VolleyCore

@testable import VolleyAPI

struct JobJSONTests {
    /// The stream entry built from the id-less encoding decodes to the job with its id, as a worker reads it.
    @Test func theStreamEntryIsTheDigestedJSONWithTheIDAdded() throws {
        let job = PushJob(
            org: "orgA", app: "app1", recipients: ["005A", "005B"],
            notification: .init(title: "Hi \"there\"", body: "a/b"), platforms: [.ios])
        let canonical = try JSONResponse.encoder.encode(job)
        let entry = APIServer.jobJSON(canonical, id: JobID("job-1.a_b:c-d"))
        #expect(entry.hasPrefix(#"{"id":"job-1.a_b:c-d","#))
        var expected = job
        expected.id = JobID("job-1.a_b:c-d")
        #expect(try JSONDecoder().decode(PushJob.self, from: Data(entry.utf8)) == expected)
        #expect(APIServer.jobJSON(Data("{}".utf8), id: JobID("x")) == #"{"id":"x"}"#)
    }

    /// The key's org goes in as the first member of an org-less body, whatever white space the body has.
    @Test func theOrgIsSplicedIntoTheBodyAsItsFirstMember() throws {
        func spliced(_ body: String) throws -> String? {
            try Input.addingMember("org", "org\"A", to: Data(body.utf8)).map { String(decoding: $0, as: UTF8.self) }
        }
        #expect(try spliced(#"{"app":"app1"}"#) == #"{"org":"org\"A","app":"app1"}"#)
        #expect(try spliced(" \n{ }") == " \n{\"org\":\"org\\\"A\" }")
        #expect(try spliced("{}") == #"{"org":"org\"A"}"#)
        let job = try #require(
            try Input.addingMember(
                "org", "orgA", to: Data(#"{"app":"app1","recipients":["005A"],"notification":{"title":"t"}}"#.utf8)))
        #expect(try JSONDecoder().decode(PushJob.self, from: job).org == "orgA")
        // Not UTF-8 text that starts with "{": the caller serialises the parsed object instead.
        #expect(try Input.addingMember("org", "orgA", to: Data([0xFF, 0xFE, 0x7B, 0x00, 0x7D, 0x00])) == nil)
    }
}
