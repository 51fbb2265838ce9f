import Foundation
import Hummingbird
import VolleyCore

/// `/v1/time-zone`: the org's default zone for `deliverAtLocalTime`, the zone of the devices and users that have
/// none of their own. One set here replaces the configuration's (`orgs[].timeZone`) for the org; DELETE returns to
/// it. Workers read it when they open a local-time job, so a change holds from the next such job.
extension APIServer {
    private struct TimeZoneAnswer: Encodable {
        var org: String
        /// Where the zone in force comes from: `api`, `configuration`, or `default` (UTC).
        var source: String
        var timeZone: String
    }

    private func timeZoneStore() throws -> any OrgTimeZoneRepository {
        guard let store = stores.timeZones else {
            throw APIProblem.startedWithout("a time-zone store")
        }
        return store
    }

    private func timeZoneAnswer(org: OrgID, stored: String?) throws -> Response {
        if let stored {
            return try JSONResponse.make(TimeZoneAnswer(org: org.rawValue, source: "api", timeZone: stored))
        }
        if let configured = configuration.orgTimeZones[org] {
            return try JSONResponse.make(
                TimeZoneAnswer(org: org.rawValue, source: "configuration", timeZone: configured))
        }
        return try JSONResponse.make(TimeZoneAnswer(org: org.rawValue, source: "default", timeZone: "UTC"))
    }

    func getTimeZone(_ context: APIRequestContext) async throws -> Response {
        let org = try context.key([.read, .admin])
        return try timeZoneAnswer(org: org, stored: try await timeZoneStore().zone(org: org))
    }

    func putTimeZone(_ request: Request, _ context: APIRequestContext) async throws -> Response {
        let org = try context.key([.admin])
        let store = try timeZoneStore()
        let o = try Input.object(try await body(request))
        try Input.rejectUnknownKeys(o.members.keys, known: ["timeZone"], at: "")
        guard case .string(let zone)? = o.value("timeZone") else {
            throw APIProblem.badRequest("timeZone", "required: an IANA time zone such as Europe/Berlin")
        }
        if let problem = IANAZone.problem(zone) { throw APIProblem.badRequest("timeZone", problem) }
        try await store.setZone(org: org, zone)
        return try timeZoneAnswer(org: org, stored: zone)
    }

    func deleteTimeZone(_ context: APIRequestContext) async throws -> Response {
        let org = try context.key([.admin])
        _ = try await timeZoneStore().removeZone(org: org)
        return try timeZoneAnswer(org: org, stored: nil)
    }
}
