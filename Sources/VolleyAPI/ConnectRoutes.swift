import Foundation
import Hummingbird
import VolleyConnect
import VolleyCore

/// The Salesforce-compatible resources under `/services/data/v{NN.N}/` (any version), answered by `ConnectService`.
/// The credential decides the caller (org, and the user and app of a user token) before the service runs; errors on
/// these paths use Salesforce's shape, `[{"errorCode", "message"}]`.
///
/// Who may call what: with an API key, `read` may only read, `send` may also push (the custom notification action,
/// Connect push), `admin` may also change app and org settings. A user token may read and mark its user's
/// notifications and read the settings; it cannot push or change settings.
extension APIServer {
    func addConnectRoutes(_ group: RouterGroup<APIRequestContext>, _ service: ConnectService) {
        let path: RouterPath = "/services/data/:version/**"
        // Every method reaches the service, so one a resource does not take answers 405 there, not 404 here.
        for method in [HTTPRequest.Method.get, .post, .put, .patch, .delete, .head] {
            group.on(path, method: method) { request, context in try await self.connect(service, request, context) }
        }
    }

    func connect(_ service: ConnectService, _ request: Request, _ context: APIRequestContext) async throws -> Response {
        guard let caller = context.caller else { throw APIProblem.unauthorized }
        guard let resource = ConnectRequest.resourcePath(request.uri.path) else {
            throw APIProblem.notFound("the version segment must look like v60.0")
        }
        let method = request.method.rawValue.uppercased()
        let pushes = resource.hasPrefix("/actions/") || resource == "/connect/notifications/push"
        let settings =
            resource.hasPrefix("/connect/notifications/app-settings")
            || resource.hasPrefix("/connect/notifications/settings")
        let reads = method == "GET" || method == "HEAD"
        let connectCaller: ConnectCaller
        switch caller {
        case .key(_, let org, let role):
            switch role {
            case .read where !reads:
                throw APIProblem.forbidden("a read key can only read")
            case .send where !reads && !pushes:
                throw APIProblem.forbidden("changing settings needs an admin key")
            default: break
            }
            connectCaller = ConnectCaller(org: org)
        case .user(let claims):
            if pushes && !reads { throw APIProblem.forbidden("a user token cannot push: use an API key") }
            if settings && !reads { throw APIProblem.forbidden("changing settings needs an admin key") }
            connectCaller = ConnectCaller(org: claims.org, user: claims.user, app: claims.app.rawValue)
        }
        let body = method == "GET" || method == "HEAD" || method == "DELETE" ? Data() : try await self.body(request)
        var query: [ConnectQueryItem] = []
        for (name, value) in request.uri.queryParameters {
            query.append(ConnectQueryItem(name: String(name), value: String(value)))
        }
        let answer = await service.handle(
            ConnectRequest(method: method, path: resource, query: query, body: body), caller: connectCaller)
        let status = HTTPResponse.Status(code: answer.status)
        if answer.body.isEmpty { return Response(status: status) }
        return Response(
            status: status, headers: [.contentType: ConnectResponse.contentType],
            body: .init(byteBuffer: ByteBuffer(bytes: answer.body)))
    }
}
