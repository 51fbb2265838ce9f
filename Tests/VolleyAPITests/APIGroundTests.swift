import Foundation
import Logging
import Testing
import VolleyCore
import VolleyTestDoubles
import VolleyTestTags

@testable import VolleyAPI

/// A credential store whose `ping` does not answer until cancelled: Redis stalled.
struct StalledCredentials: CredentialStore {
    func admit(subject: String, keyID: String?, bucket: RateBucket) async throws -> CredentialAdmission? { nil }
    func ping() async throws { try await Task.sleep(for: .seconds(3600)) }
}

@Suite(.tags(.unit)) struct APIGroundTests {
    @Test(arguments: [
        ("application/json", true), ("application/json; charset=utf-8", true), ("Application/JSON", true),
        ("application/json;charset=UTF-8", true), (" application/json ", true), ("text/plain", false),
        ("application/x-www-form-urlencoded", false), ("application/jsonx", false), ("", false),
        ("multipart/form-data; boundary=x", false), ("\tAPPLICATION/json\t;q=1", true), ("application_json", false),
        ("applicatio/json", false), ("application/json;", true), ("application/jsön", false),
        (";application/json", false),
    ])
    func onlyJSONBodiesAreRead(_ header: String, _ accepted: Bool) {
        #expect(JSONContentTypeMiddleware.isJSON(header) == accepted)
    }

    @Test func theConnectionCapLeavesFileDescriptorsForEverythingElse() throws {
        #expect(try ConnectionLimits.cap(configured: nil, fileLimit: 1024) == 1024 - ConnectionLimits.headroom)
        #expect(try ConnectionLimits.cap(configured: nil, fileLimit: 1_048_576) == ConnectionLimits.defaultMaximum)
        #expect(try ConnectionLimits.cap(configured: nil, fileLimit: nil) == ConnectionLimits.defaultMaximum)
        #expect(try ConnectionLimits.cap(configured: 960, fileLimit: 1024) == 960)
        #expect(try ConnectionLimits.cap(configured: 50_000, fileLimit: nil) == 50_000)
        do {
            _ = try ConnectionLimits.cap(configured: 1000, fileLimit: 1024)
            Issue.record("a cap of 1000 under a file limit of 1024 was accepted")
        } catch {
            #expect(error.description.hasPrefix("api.maxConnections: "), "\(error)")
        }
        #expect(throws: ConnectionLimits.Failure.self) { try ConnectionLimits.cap(configured: nil, fileLimit: 40) }
        #expect(throws: ConnectionLimits.Failure.self) { try ConnectionLimits.cap(configured: 0, fileLimit: 1024) }
    }

    @Test func readinessHasADeadlineWhileTheStoreStalls() async throws {
        var configuration = APIConfiguration()
        configuration.readinessTimeoutSeconds = 0.2
        let jobs = InMemoryJobs()
        let types = InMemoryNotificationTypes()
        let server = APIServer(
            configuration: configuration,
            stores: APIServer.Stores(
                credentials: StalledCredentials(), jobs: jobs, jobStatus: jobs, devices: InMemoryDevices(),
                types: types, quota: InMemoryQuota(limits: QuotaLimits(ios: 1, android: 1), clock: SystemClock()),
                templates: InMemoryTemplateStore(), attributes: InMemoryUserAttributeStore()),
            openAPIDocument: "", logger: Logger(label: "test"))
        let problem = try #require(await server.readinessProblem())
        #expect(problem.contains("api.readinessTimeoutSeconds"), "\(problem)")
    }

    @Test func theFirstAnswerIsTaken() async throws {
        let fast = await APIServer.answer(within: 30) { 7 }
        #expect(try fast?.get() == 7)
        struct Refused: Error {}
        let failed = await APIServer.answer(within: 30) { () async throws -> Int in throw Refused() }
        #expect(throws: Refused.self) { try failed?.get() }
        let slow = await APIServer.answer(within: 0.05) { () async throws -> Int in
            try await Task.sleep(for: .seconds(3600))
            return 1
        }
        #expect(slow == nil)
    }
}
