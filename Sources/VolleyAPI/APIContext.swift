import Foundation
import Hummingbird
import Logging
import VolleyCore

/// Who is calling, decided once from the credential by `AuthMiddleware` before any handler runs.
public enum APICaller: Sendable, Hashable {
    /// A backend with an API key of one org and role.
    case key(id: String, org: OrgID, role: APIRole)
    /// A mobile app's user with a user token.
    case user(UserTokenClaims)

    public var org: OrgID {
        switch self {
        case .key(_, let org, _): org
        case .user(let c): c.org
        }
    }
}

/// The request context of `volley api`: Hummingbird's core storage plus the caller.
public struct APIRequestContext: RequestContext {
    public var coreContext: CoreRequestContextStorage
    public var caller: APICaller?
    /// Under `/console`: the session and the posted form (`ConsoleMiddleware`).
    var consoleRequest: ConsoleRequest?

    public init(source: Source) {
        coreContext = .init(source: source)
    }

    /// The caller's org when it holds an API key with one of `roles`; 403 otherwise.
    func key(_ roles: Set<APIRole>) throws -> OrgID {
        guard let caller else { throw APIProblem.unauthorized }
        guard case .key(_, let org, let role) = caller else {
            throw APIProblem.forbidden("this resource needs an API key; a user token cannot call it")
        }
        guard roles.contains(role) else {
            let names = roles.map(\.rawValue).sorted().joined(separator: " or ")
            throw APIProblem.forbidden("this resource needs a key with role \(names); this key's role is \(role)")
        }
        return org
    }

    /// The user token's claims; 403 for an API key.
    func user() throws -> UserTokenClaims {
        guard let caller else { throw APIProblem.unauthorized }
        guard case .user(let claims) = caller else {
            throw APIProblem.forbidden(
                "this resource is called as the app's user: use a user token (POST /v1/user-tokens)")
        }
        return claims
    }
}
