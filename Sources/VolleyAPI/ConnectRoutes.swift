import Foundation
import Hummingbird
import VolleyConnect
import VolleyCore

/// The Salesforce-compatible resources under `/services/data/v{NN.N}/` (any version), answered by `ConnectService`:
/// routes of the one router, each resource declaring who may change it. The credential decides the caller (org, and
/// the user and app of a user token) before an operation runs; errors on these paths use Salesforce's shape,
/// `[{"errorCode", "message"}]`.
///
/// Every credential may read (GET, HEAD). Changing a resource takes what it declares: the custom notification action
/// a `send` or `admin` key; Connect push such a key or a user token (through its own app); marking the context
/// user's notifications an `admin` key or a user token; changing app and org settings an `admin` key. The two
/// pushing resources honour `Idempotency-Key` as `POST /v1/jobs` does.
extension APIServer {
    /// Who may call a resource with a method other than GET and HEAD.
    enum ConnectWrites: Sendable {
        /// Pushing: an API key with role `send` or `admin`; a user token cannot push.
        case push
        /// Pushing from a device: as `push`, or a user token (the operation keeps it to its own app).
        case userPush
        /// Marking notifications read or seen: an `admin` key or a user token.
        case mark
        /// Changing app or org notification settings: an `admin` key.
        case settings
        /// Registering or removing the caller's own device: a user token (the operation refuses an API key, which
        /// has no user).
        case ownDevice
    }

    /// What an operation gets: the caller its credential decided, the query in request order, the body (empty for
    /// GET, HEAD and DELETE) and the path's parameters.
    struct ConnectInput: Sendable {
        var caller: ConnectCaller
        var query: [ConnectQueryItem]
        var body: Data
        var parameters: Parameters
        /// The request's `Idempotency-Key` on the pushing resources, checked for form (nil without one).
        var idempotencyKey: String?

        /// A path parameter, percent-decoded.
        func parameter(_ name: String) throws -> String {
            guard let raw = parameters.get(name), !raw.isEmpty else {
                throw APIProblem.notFound("missing path parameter \(name)")
            }
            return raw.removingPercentEncoding ?? raw
        }
    }

    /// One Salesforce-compatible resource: its path after `/services/data/:version` (`:name` for a parameter, named as
    /// in the OpenAPI document), who may change it, and the methods it takes with their operations.
    struct ConnectResource: Sendable {
        typealias Operation = @Sendable (ConnectService, ConnectInput) async throws -> ConnectResponse
        var path: String
        var writes: ConnectWrites
        var operations: [(method: HTTPRequest.Method, run: Operation)]

        init(_ path: String, writes: ConnectWrites, _ operations: [(method: HTTPRequest.Method, run: Operation)]) {
            self.path = path
            self.writes = writes
            self.operations = operations
        }
    }

    /// Every Salesforce-compatible operation, by resource.
    static let connectResources: [ConnectResource] = [
        ConnectResource(
            "/sobjects/MobilePushServiceDevice", writes: .ownDevice,
            [(.post, { s, i in try await s.registerMobilePushDevice(caller: i.caller, body: i.body) })]),
        ConnectResource(
            "/sobjects/MobilePushServiceDevice/:id", writes: .ownDevice,
            [(.delete, { s, i in try await s.unregisterMobilePushDevice(caller: i.caller, id: try i.parameter("id")) })]
        ),
        ConnectResource(
            "/actions/standard/customNotificationAction", writes: .push,
            [
                (.get, { s, _ in s.describeCustomNotificationAction() }),
                (
                    .post,
                    { s, i in
                        try await s.customNotificationAction(
                            caller: i.caller, body: i.body, idempotencyKey: i.idempotencyKey)
                    }
                ),
            ]),
        ConnectResource(
            "/connect/notifications/push", writes: .userPush,
            [(.post, { s, i in try await s.push(caller: i.caller, body: i.body, idempotencyKey: i.idempotencyKey) })]),
        ConnectResource(
            "/connect/notifications", writes: .mark,
            [
                (.get, { s, i in try await s.listNotifications(caller: i.caller, query: i.query) }),
                (.patch, { s, i in try await s.markNotifications(caller: i.caller, query: i.query, body: i.body) }),
            ]),
        ConnectResource(
            "/connect/notifications/status", writes: .mark,
            [(.get, { s, i in try await s.notificationStatus(caller: i.caller) })]),
        ConnectResource(
            "/connect/notifications/app-settings/organization", writes: .settings,
            [(.get, { s, i in try await s.appSettings(caller: i.caller, typeID: nil, query: i.query) })]),
        ConnectResource(
            "/connect/notifications/app-settings/organization/:notificationTypeId", writes: .settings,
            [
                (
                    .get,
                    { s, i in
                        try await s.appSettings(
                            caller: i.caller, typeID: try i.parameter("notificationTypeId"), query: i.query)
                    }
                ),
                (
                    .post,
                    { s, i in
                        try await s.setAppSetting(
                            caller: i.caller, typeID: try i.parameter("notificationTypeId"), query: i.query,
                            body: i.body)
                    }
                ),
                (
                    .delete,
                    { s, i in
                        try await s.resetAppSetting(
                            caller: i.caller, typeID: try i.parameter("notificationTypeId"), query: i.query)
                    }
                ),
            ]),
        ConnectResource(
            "/connect/notifications/settings/organization", writes: .settings,
            [(.get, { s, i in try await s.orgSettings(caller: i.caller) })]),
        ConnectResource(
            "/connect/notifications/settings/organization/:notificationTypeOrId", writes: .settings,
            [
                (
                    .get,
                    { s, i in
                        try await s.orgSetting(caller: i.caller, typeOrID: try i.parameter("notificationTypeOrId"))
                    }
                ),
                (
                    .post,
                    { s, i in
                        try await s.setOrgSetting(
                            caller: i.caller, typeOrID: try i.parameter("notificationTypeOrId"), body: i.body)
                    }
                ),
                (
                    .delete,
                    { s, i in
                        try await s.resetOrgSetting(
                            caller: i.caller, typeOrID: try i.parameter("notificationTypeOrId"))
                    }
                ),
            ]),
        ConnectResource(
            "/connect/notifications/:notificationId", writes: .mark,
            [
                (
                    .get,
                    { s, i in
                        try await s.notification(
                            caller: i.caller, id: try i.parameter("notificationId"), query: i.query)
                    }
                ),
                (
                    .patch,
                    { s, i in
                        try await s.markNotification(
                            caller: i.caller, id: try i.parameter("notificationId"), query: i.query, body: i.body)
                    }
                ),
            ]),
    ]

    /// The methods a request can carry; on each resource, those it does not take answer 405 naming those it does.
    static let connectMethods: [HTTPRequest.Method] = [.get, .head, .post, .put, .patch, .delete]

    /// The methods `resource` takes: its operations', and HEAD wherever it takes GET (answered by the GET operation).
    static func methods(of resource: ConnectResource) -> [HTTPRequest.Method] {
        let taken = resource.operations.map(\.method)
        return taken.contains(.get) && !taken.contains(.head) ? taken + [.head] : taken
    }

    /// Registers every resource's operations under `/services/data/:version`, behind `auth`, on each resource the
    /// methods it does not take as 405 answers, and below the version any other path as Salesforce's 404.
    func addConnectRoutes(_ router: Router<APIRequestContext>, auth: AuthMiddleware, _ service: ConnectService) {
        let group = router.group("/services/data/:version").add(middleware: auth)
            .add(middleware: ConnectVersionMiddleware())
        for resource in Self.connectResources {
            let path = RouterPath(resource.path)
            var operations = resource.operations
            // HEAD wherever GET: the GET operation answers it.
            if let get = operations.first(where: { $0.method == .get }),
                !operations.contains(where: { $0.method == .head })
            {
                operations.append((.head, get.run))
            }
            for operation in operations {
                let method = operation.method
                let writes = resource.writes
                group.on(path, method: method) { request, context in
                    let caller = try Self.connectCaller(context, method: method, writes: writes)
                    let reads = method == .get || method == .head || method == .delete
                    var idempotencyKey: String?
                    if !reads && (writes == .push || writes == .userPush),
                        let key = request.headers[.idempotencyKey]
                    {
                        guard Input.isSafeID(key) else {
                            return Self.response(
                                ConnectError.invalidInput(
                                    "Idempotency-Key: 1–128 characters of letters, digits and . _ : -"
                                ).response)
                        }
                        idempotencyKey = key
                    }
                    let input = ConnectInput(
                        caller: caller, query: Self.queryItems(request),
                        body: reads ? Data() : try await self.body(request),
                        parameters: context.parameters, idempotencyKey: idempotencyKey)
                    return Self.response(
                        await service.answer(request.uri.path) { try await operation.run(service, input) })
                }
            }
            let taken = Self.methods(of: resource)
            let allowed = resource.operations.map { $0.method.rawValue.uppercased() }
            for method in Self.connectMethods where !taken.contains(method) {
                let writes = resource.writes
                group.on(path, method: method) { _, context in
                    // The credential is checked first, as on the resource's own methods.
                    _ = try Self.connectCaller(context, method: method, writes: writes)
                    return Self.response(
                        ConnectError.methodNotAllowed(method.rawValue.uppercased(), allowed: allowed).response)
                }
            }
        }
        // A path no resource has: the credential first, as everywhere under the version, then the 404.
        for method in Self.connectMethods {
            group.on("**", method: method) { _, context in
                guard context.caller != nil else { throw APIProblem.unauthorized }
                return Self.response(ConnectError.notFound().response)
            }
        }
    }

    /// The caller of a Salesforce-compatible operation, when the credential may call it with `method`; 403 otherwise.
    static func connectCaller(
        _ context: APIRequestContext, method: HTTPRequest.Method, writes: ConnectWrites
    ) throws -> ConnectCaller {
        guard let caller = context.caller else { throw APIProblem.unauthorized }
        let reads = method == .get || method == .head
        switch caller {
        case .key(_, let org, let role):
            if !reads && role == .read { throw APIProblem.forbidden("a read key can only read") }
            // A device is its user's: the operation answers an API key 403 in the sObject's error shape.
            if !reads && role == .send && writes != .push && writes != .userPush && writes != .ownDevice {
                throw APIProblem.forbidden("changing settings needs an admin key")
            }
            return ConnectCaller(org: org)
        case .user(let claims):
            if !reads && writes == .push { throw APIProblem.forbidden("a user token cannot push: use an API key") }
            if !reads && writes == .settings { throw APIProblem.forbidden("changing settings needs an admin key") }
            return ConnectCaller(org: claims.org, user: claims.user, app: claims.app.rawValue)
        }
    }

    static func queryItems(_ request: Request) -> [ConnectQueryItem] {
        request.uri.queryParameters.map { ConnectQueryItem(name: String($0.key), value: String($0.value)) }
    }

    static func response(_ answer: ConnectResponse) -> Response {
        let status = HTTPResponse.Status(code: answer.status)
        if answer.body.isEmpty { return Response(status: status) }
        return Response(
            status: status, headers: [.contentType: ConnectResponse.contentType],
            body: .init(byteBuffer: ByteBuffer(bytes: answer.body)))
    }
}

/// The version segment of `/services/data/{version}/…`: `v` and two dot-separated numbers (any version, as Salesforce
/// accepts); another answers 404.
struct ConnectVersionMiddleware: RouterMiddleware {
    typealias Context = APIRequestContext

    func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws
        -> Response
    {
        guard let version = context.parameters.get("version"), Self.isVersion(version) else {
            throw APIProblem.notFound("the version segment must look like v60.0")
        }
        return try await next(request, context)
    }

    /// True for `v58.0`, `v60.12`: a `v`, digits, a dot, digits.
    static func isVersion(_ segment: String) -> Bool {
        guard segment.first == "v" else { return false }
        let parts = segment.utf8.dropFirst().split(separator: UInt8(ascii: "."), omittingEmptySubsequences: false)
        return parts.count == 2
            && parts.allSatisfy { !$0.isEmpty && $0.allSatisfy { $0 >= UInt8(ascii: "0") && $0 <= UInt8(ascii: "9") } }
    }
}
