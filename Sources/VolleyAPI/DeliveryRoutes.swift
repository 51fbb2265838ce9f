import Foundation
import Hummingbird
import VolleyCore

/// A user's delivery history (`GET /v1/users/{user}/deliveries`): what support needs to answer "why did this user
/// get nothing yesterday".
extension APIServer {
    func addDeliveryRoutes(_ v1: RouterGroup<APIRequestContext>) {
        v1.get("/users/:user/deliveries") { request, context in try await self.userDeliveries(request, context) }
    }

    /// The most lines one request answers, and how many without `limit`.
    static let deliveriesMaxLimit = 500
    static let deliveriesDefaultLimit = 100

    /// `?since=<RFC 3339>&limit=<1…500>`: the user's notifications of the kept days, newest first: per device its
    /// outcome and reason (the token redacted), and the jobs that skipped the user (`capped`, `noDevice`). A user
    /// without history answers an empty list (an unknown user and a user of another org look the same).
    func userDeliveries(_ request: Request, _ context: APIRequestContext) async throws -> Response {
        let org = try context.key([.read, .admin])
        let user = try parameter(context, "user")
        let parameters = request.uri.queryParameters
        // With `deliveries.days` 0 no history is kept: there is none to find.
        guard let store = stores.deliveries else {
            throw APIProblem.notFound("no delivery history is kept (the configuration's deliveries.days is 0)")
        }
        let since = try ListQuery.since(parameters.get("since"))
        let limit = try ListQuery.limit(
            parameters.get("limit"), max: Self.deliveriesMaxLimit, default: Self.deliveriesDefaultLimit)
        let lines = try await store.deliveries(org: org, user: UserID(user), since: since, limit: limit)
        struct Answer: Encodable {
            var user: String
            var deliveries: [DeliveryRecord]
        }
        return try JSONResponse.make(Answer(user: user, deliveries: lines))
    }
}
