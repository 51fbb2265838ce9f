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
}
