import Dispatch
import Foundation
import Hummingbird
import Logging
import Metrics
import VolleyCore
import VolleyRedis

/// Outermost: maps every error to a problem answer and counts requests.
///
/// `volley_api_requests_total{route,status_class}` and `volley_api_request_duration_seconds{route}`; `route` is the
/// route template (`/v1/jobs/{id}`), never the concrete path, so the label set stays bounded.
struct ObservingMiddleware: RouterMiddleware {
    typealias Context = APIRequestContext
    let logger: Logger
    let metrics: RouteMetrics

    func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws
        -> Response
    {
        let start = DispatchTime.now().uptimeNanoseconds
        let response: Response
        do { response = try await next(request, context) } catch {
            let problem = Self.problem(error, logger: logger)
            response =
                request.uri.path.hasPrefix("/services/data/") ? problem.salesforceResponse() : problem.response()
        }
        let route = context.endpointPath.map(Self.template) ?? "unmatched"
        metrics.record(route: route, status: Int(response.status.code), start: start)
        return response
    }

    /// Hummingbird's `:id` → OpenAPI's `{id}`.
    static func template(_ path: String) -> String {
        path.split(separator: "/", omittingEmptySubsequences: false).map { part in
            part.hasPrefix(":") ? "{\(part.dropFirst())}" : String(part)
        }.joined(separator: "/")
    }

    static func problem(_ error: any Error, logger: Logger) -> APIProblem {
        switch error {
        case let p as APIProblem: return p
        case let e as HTTPError:
            let status = e.status
            let field: String? = status == .contentTooLarge ? "body" : nil
            return APIProblem(status, e.body ?? status.reasonPhrase, field: field)
        case let e as RedisError:
            logger.error("redis: \(e)")
            var p = APIProblem(.serviceUnavailable, "the store is unavailable; retry shortly")
            p.headers[.retryAfter] = "1"
            return p
        default:
            logger.error("unexpected error: \(error)")
            return APIProblem(.internalServerError, "internal error")
        }
    }
}

final class RouteMetrics: Sendable {
    private let cache = NSLockedBox<[String: Counter]>([:])
    private let timers = NSLockedBox<[String: Metrics.Timer]>([:])

    static let statusClasses = ["1xx", "2xx", "3xx", "4xx", "5xx"]

    /// Creates every route's series at zero (each status class), so a dashboard and a `rate()` see them from the
    /// process's start rather than from a route's first request.
    func prime(routes: Set<String>) {
        for route in routes {
            for statusClass in Self.statusClasses { _ = counter(route: route, statusClass: statusClass) }
            _ = timer(route: route)
        }
    }

    func record(route: String, status: Int, start: UInt64) {
        let counter = counter(route: route, statusClass: "\(max(1, min(5, status / 100)))xx")
        let timer = timer(route: route)
        counter.increment()
        timer.recordNanoseconds(Int64(DispatchTime.now().uptimeNanoseconds &- start))
    }

    private func counter(route: String, statusClass: String) -> Counter {
        cache.withLocked { c in
            let key = route + "|" + statusClass
            if let existing = c[key] { return existing }
            let made = Counter(
                label: "volley_api_requests_total", dimensions: [("route", route), ("status_class", statusClass)])
            c[key] = made
            return made
        }
    }

    private func timer(route: String) -> Metrics.Timer {
        timers.withLocked { t in
            if let existing = t[route] { return existing }
            let made = Metrics.Timer(
                label: "volley_api_request_duration_seconds", dimensions: [("route", route)],
                preferredDisplayUnit: .seconds)
            t[route] = made
            return made
        }
    }
}

/// A value behind one lock, reached only through `withLocked`.
final class NSLockedBox<Value>: @unchecked Sendable {
    private var value: Value
    private let lock = NSLock()
    init(_ value: Value) { self.value = value }
    func withLocked<T>(_ body: (inout Value) throws -> T) rethrows -> T {
        lock.lock()
        defer { lock.unlock() }
        return try body(&value)
    }
}

/// Authenticates the bearer credential and charges the caller's rate limit, before any handler runs.
///
/// A user token (`vut1.…`) is verified locally; an API key (`vk_…`) is looked up and its bucket charged in one
/// script call. Unknown or malformed credentials get 401; an exhausted bucket 429 with `Retry-After` (seconds).
struct AuthMiddleware: RouterMiddleware {
    typealias Context = APIRequestContext
    let configuration: APIConfiguration
    let signer: UserTokenSigner
    let scripts: RedisScripts
    let keys: APIKeys
    let records: APIKeyRecordCache

    func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws
        -> Response
    {
        guard let header = request.headers[.authorization], header.count > 7,
            header.prefix(7).lowercased() == "bearer "
        else { throw APIProblem.unauthorized }
        let credential = String(header.dropFirst(7)).trimmingCharacters(in: .whitespaces)
        var context = context
        let limit = configuration.rateLimit
        let rateArgs = [String(limit.requestsPerSecond), String(limit.burst)]
        if credential.hasPrefix("vut1.") {
            guard let claims = signer.verify(credential, now: Date()) else { throw APIProblem.unauthorized }
            let bucket = keys.rate("u:\(claims.org):\(claims.app):\(claims.user)")
            let reply = try await scripts.eval(APIScripts.admit, keys: [keys.apiKeys, bucket], args: [""] + rateArgs)
            try Self.checkAdmitted(reply)
            context.caller = .user(claims)
        } else {
            guard let id = APIKeyFormat.id(of: credential) else { throw APIProblem.unauthorized }
            let bucket = keys.rate("k:\(id)")
            let reply = try await scripts.eval(APIScripts.admit, keys: [keys.apiKeys, bucket], args: [id] + rateArgs)
            try reply.throwIfError("admit")
            guard let parts = reply.array, parts.count == 3, let json = parts[1].string,
                let record = records.record(json: json), APIKeyFormat.matches(credential, record: record)
            else { throw APIProblem.unauthorized }
            try Self.checkAdmitted(reply)
            context.caller = .key(id: id, org: record.org, role: record.role)
        }
        return try await next(request, context)
    }

    private static func checkAdmitted(_ reply: RedisReply) throws {
        try reply.throwIfError("admit")
        guard let parts = reply.array, parts.count == 3, let wait = parts[2].integer else {
            throw APIProblem.unauthorized
        }
        if wait > 0 {
            var p = APIProblem(
                .tooManyRequests, "rate limit exceeded for this credential (api.rateLimit); retry after the delay")
            p.headers[.retryAfter] = String((wait + 999) / 1000)
            throw p
        }
    }
}

/// Decoded API-key records by their stored JSON, so a busy key is not decoded (dates and all) on every request.
///
/// Keyed by the whole JSON text the lookup script returned, which the request still fetches from Redis each time: a
/// revoked key finds no record and a changed record is new text, so the cache never answers for a key Redis no
/// longer holds. Bounded: emptied when it reaches `limit` entries.
final class APIKeyRecordCache: Sendable {
    private let records = NSLockedBox<[String: APIKeyRecord]>([:])
    let limit: Int
    init(limit: Int = 4096) { self.limit = limit }

    func record(json: String) -> APIKeyRecord? {
        if let known = records.withLocked({ $0[json] }) { return known }
        guard let decoded = try? APIKeyStore.decoder.decode(APIKeyRecord.self, from: Data(json.utf8)) else {
            return nil
        }
        records.withLocked { r in
            if r.count >= limit { r.removeAll(keepingCapacity: true) }
            r[json] = decoded
        }
        return decoded
    }
}
