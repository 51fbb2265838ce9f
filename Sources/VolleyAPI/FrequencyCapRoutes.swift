import Foundation
import Hummingbird
import VolleyCore

/// `/v1/frequency-caps`: the org's caps on how many visible notifications one user is pushed in rolling windows.
/// Rules put here replace the configuration's (`orgs[].frequencyCaps`) for the org; DELETE returns to those.
extension APIServer {
    private struct FrequencyCapsAnswer: Encodable {
        var org: String
        /// Where the rules in force come from: `api`, `configuration`, or `none`.
        var source: String
        var rules: [FrequencyCapRule]
    }

    private func frequencyCapStore() throws -> any FrequencyCapRepository {
        guard let store = stores.frequencyCaps else {
            throw APIProblem.startedWithout("a frequency-cap store")
        }
        return store
    }

    private func frequencyCapsAnswer(org: OrgID, stored: [FrequencyCapRule]?) throws -> Response {
        if let stored {
            return try JSONResponse.make(FrequencyCapsAnswer(org: org.rawValue, source: "api", rules: stored))
        }
        let configured = configuration.frequencyCaps[org] ?? []
        return try JSONResponse.make(
            FrequencyCapsAnswer(
                org: org.rawValue, source: configured.isEmpty ? "none" : "configuration", rules: configured))
    }

    func getFrequencyCaps(_ context: APIRequestContext) async throws -> Response {
        let org = try context.key([.read, .admin])
        return try frequencyCapsAnswer(org: org, stored: try await frequencyCapStore().rules(org: org))
    }

    func putFrequencyCaps(_ request: Request, _ context: APIRequestContext) async throws -> Response {
        let org = try context.key([.admin])
        let store = try frequencyCapStore()
        let o = try Input.object(try await body(request))
        try Input.rejectUnknownKeys(o.members.keys, known: ["rules"], at: "")
        guard let raw = o.value("rules") else {
            throw APIProblem.badRequest("rules", "required: a list of {window, max, type} ([] turns the caps off)")
        }
        let rules: [FrequencyCapRule]
        do { rules = try FrequencyCapRule.list(json: raw, at: "rules") } catch {
            throw APIProblem.badRequest(error.field, error.message)
        }
        try await store.setRules(org: org, rules)
        return try frequencyCapsAnswer(org: org, stored: rules)
    }

    func deleteFrequencyCaps(_ context: APIRequestContext) async throws -> Response {
        let org = try context.key([.admin])
        _ = try await frequencyCapStore().removeRules(org: org)
        return try frequencyCapsAnswer(org: org, stored: nil)
    }
}
