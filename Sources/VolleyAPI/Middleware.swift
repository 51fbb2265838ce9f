import Dispatch
import Foundation
import Hummingbird
import Logging
import Metrics
import VolleyCore

/// Outermost: maps every error to a problem answer and counts requests.
///
/// `volley_api_requests_total{route,status_class}` and `volley_api_request_duration_seconds{route}`; `route` is the
/// route template (`/v1/jobs/{id}`), never the concrete path, so the label set stays bounded.
struct ObservingMiddleware: RouterMiddleware {
    typealias Context = APIRequestContext
    let logger: Logger
    let metrics: RouteMetrics
    /// Refusals for lack of permission seen so far (each logged once; `/readyz` names the first).
    var refusals = StoreRefusals()

    func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws
        -> Response
    {
        let start = DispatchTime.now().uptimeNanoseconds
        let response: Response
        do { response = try await next(request, context) } catch {
            let salesforce = request.uri.path.hasPrefix("/services/data/")
            var problem = Self.problem(error, logger: logger, refusals: refusals)
            if salesforce && problem.status == .notFound && error is HTTPError {
                // No route takes the path: Salesforce's words for it.
                problem = APIProblem(.notFound, "The requested resource does not exist")
            }
            response = salesforce ? problem.salesforceResponse() : problem.response()
        }
        metrics.record(endpoint: context.endpointPath, status: Int(response.status.code), start: start)
        return response
    }

    /// Hummingbird's `:id` → OpenAPI's `{id}`.
    static func template(_ path: String) -> String {
        path.split(separator: "/", omittingEmptySubsequences: false).map { part in
            part.hasPrefix(":") ? "{\(part.dropFirst())}" : String(part)
        }.joined(separator: "/")
    }

    static func problem(_ error: any Error, logger: Logger, refusals: StoreRefusals? = nil) -> APIProblem {
        switch error {
        case let p as APIProblem: return p
        case let e as HTTPError:
            let status = e.status
            let field: String? = status == .contentTooLarge ? "body" : nil
            return APIProblem(status, e.body ?? status.reasonPhrase, field: field)
        case let e as StoreUnavailable:
            logger.error("store: \(e)")
            var p = APIProblem(.serviceUnavailable, "the store is unavailable; retry shortly")
            p.headers[.retryAfter] = "1"
            return p
        case let e as StorePermissionDenied:
            // A configuration error: the same request fails until an operator fixes the ACL, so no Retry-After.
            if refusals?.record(e) ?? true {
                logger.error(
                    "Redis refused a command: the API's Redis user lacks this permission; fix its ACL",
                    metadata: ["refusal": "\(e)", "see": "docs/redis-keys.md"])
            }
            return APIProblem(
                .internalServerError, "Redis refused \(e); the API's Redis user lacks this permission")
        default:
            logger.error("unexpected error: \(error)")
            return APIProblem(.internalServerError, "internal error")
        }
    }
}

/// Every body the API reads is JSON: a POST, PUT or PATCH that says its body is anything else answers 415 naming the
/// `Content-Type` header, before authentication reads anything. A request without the header is read as JSON
/// (Salesforce's Apex callouts and `curl --data-binary` without `-H` send none); parameters such as
/// `; charset=utf-8` are allowed.
struct JSONContentTypeMiddleware: RouterMiddleware {
    typealias Context = APIRequestContext

    func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws
        -> Response
    {
        switch request.method {
        case .post, .put, .patch:
            // The console's forms post form bodies, read by its own routes.
            if request.uri.path.hasPrefix("/console/") { break }
            if let type = request.headers[.contentType], !Self.isJSON(type) {
                throw APIProblem(
                    .unsupportedMediaType, "the body must be JSON: send Content-Type: application/json",
                    field: "Content-Type")
            }
        default: break
        }
        return try await next(request, context)
    }

    /// True for `application/json` in any case, with or without parameters and surrounding spaces or tabs. Byte by
    /// byte: every POST passes here, and Foundation's trimming and lowercasing cost more than the rest of the check.
    static func isJSON(_ header: String) -> Bool {
        let expected = Array("application/json".utf8)
        var bytes = Substring(header).utf8[...]
        if let semicolon = bytes.firstIndex(of: UInt8(ascii: ";")) { bytes = bytes[..<semicolon] }
        func isBlank(_ b: UInt8) -> Bool { b == UInt8(ascii: " ") || b == UInt8(ascii: "\t") }
        while let first = bytes.first, isBlank(first) { bytes = bytes.dropFirst() }
        while let last = bytes.last, isBlank(last) { bytes = bytes.dropLast() }
        guard bytes.count == expected.count else { return false }
        // ASCII lowercase: setting 0x20 maps A–Z onto a–z and leaves the letters, '/' and every other byte of the
        // expected text as they are; a byte that only matches once lowered must be a letter.
        for (b, e) in zip(bytes, expected) where b != e {
            guard b | 0x20 == e, (UInt8(ascii: "A")...UInt8(ascii: "Z")).contains(b) else { return false }
        }
        return true
    }
}

/// The request series of each route: one counter per status class and a duration timer, made once per route.
final class RouteMetrics: Sendable {
    private struct Series {
        /// Indexed by status class: 1xx … 5xx.
        var counters: [Counter]
        var timer: Metrics.Timer
    }

    /// By Hummingbird's endpoint path (`/v1/jobs/:id`), so a request finds its series without building the template.
    private let series = NSLockedBox<[String: Series]>([:])

    static let statusClasses = ["1xx", "2xx", "3xx", "4xx", "5xx"]

    /// Creates every route's series at zero (each status class), so a dashboard and a `rate()` see them from the
    /// process's start rather than from a route's first request. `endpoints` are Hummingbird's paths.
    func prime(endpoints: Set<String>) {
        for endpoint in endpoints { _ = series(endpoint) }
    }

    func record(endpoint: String?, status: Int, start: UInt64) {
        let s = series(endpoint ?? "unmatched")
        s.counters[max(1, min(5, status / 100)) - 1].increment()
        s.timer.recordNanoseconds(Int64(DispatchTime.now().uptimeNanoseconds &- start))
    }

    private func series(_ endpoint: String) -> Series {
        series.withLocked { all in
            if let known = all[endpoint] { return known }
            let route = ObservingMiddleware.template(endpoint)
            let made = Series(
                counters: Self.statusClasses.map {
                    Counter(label: "volley_api_requests_total", dimensions: [("route", route), ("status_class", $0)])
                },
                timer: Metrics.Timer(
                    label: "volley_api_request_duration_seconds", dimensions: [("route", route)],
                    preferredDisplayUnit: .seconds))
            all[endpoint] = made
            return made
        }
    }
}

/// The store's refusals for lack of permission, once each: the first is what `/readyz` reports.
final class StoreRefusals: Sendable {
    private let seen = NSLockedBox<(first: String?, all: Set<String>)>((nil, []))

    /// Records a refusal; true the first time this one is seen (log it then).
    func record(_ refusal: StorePermissionDenied) -> Bool {
        seen.withLocked { s in
            if s.first == nil { s.first = refusal.description }
            return s.all.insert(refusal.description).inserted
        }
    }

    /// The first refusal, naming the command and key; nil while none happened.
    var first: String? { seen.withLocked { $0.first } }
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
/// A user token (`vut1.…`) is verified locally. An API key (`vk_…`) is checked against its record: read from the
/// credential store together with the bucket charge in one call, then kept for `api.keyCacheSeconds`, during which
/// only the bucket is charged (and nothing is read when rate limiting is off). Unknown or malformed credentials get
/// 401; an exhausted bucket 429 with `Retry-After` (seconds).
struct AuthMiddleware: RouterMiddleware {
    typealias Context = APIRequestContext
    let configuration: APIConfiguration
    let signer: UserTokenSigner
    let credentials: any CredentialStore
    let records: APIKeyRecordCache
    let bucket: RateBucket
    /// The API's clock: a user token's expiry is checked against it.
    let clock: any WallClock

    init(
        configuration: APIConfiguration, signer: UserTokenSigner, credentials: any CredentialStore,
        records: APIKeyRecordCache, clock: any WallClock
    ) {
        self.clock = clock
        self.configuration = configuration
        self.signer = signer
        self.credentials = credentials
        self.records = records
        bucket = configuration.bucket
    }

    func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws
        -> Response
    {
        guard let header = request.headers[.authorization], let credential = Self.bearerCredential(header) else {
            throw APIProblem.unauthorized
        }
        var context = context
        let limited = bucket.requestsPerSecond > 0
        if credential.hasPrefix("vut1.") {
            guard let claims = signer.verify(credential, now: clock.now()) else { throw APIProblem.unauthorized }
            if limited {
                try Self.checkAdmitted(
                    try await credentials.admit(
                        subject: "u:\(claims.org):\(claims.app):\(claims.user)", keyID: nil, bucket: bucket))
            }
            context.caller = .user(claims)
        } else {
            guard let id = APIKeyFormat.id(of: credential) else { throw APIProblem.unauthorized }
            let key = try await keyRecord(id: id)
            guard key.matches(credential) else { throw APIProblem.unauthorized }
            context.caller = .key(id: id, org: key.record.org, role: key.record.role)
        }
        return try await next(request, context)
    }

    /// The record of API key `id`, charging its bucket: from the cache while it is fresh, else read with the charge in
    /// one call. 401 for a key the store does not hold, 429 for an empty bucket. The console's sessions, which name
    /// their key by id, pass here on every page too.
    func keyRecord(id: String) async throws -> APIKeyRecordCache.Entry {
        let now = DispatchTime.now().uptimeNanoseconds
        if let known = records.entry(id: id, now: now) {
            if bucket.requestsPerSecond > 0 {
                try Self.checkAdmitted(try await credentials.admit(subject: "k:\(id)", keyID: nil, bucket: bucket))
            }
            return known
        }
        let admission = try await credentials.admit(subject: "k:\(id)", keyID: id, bucket: bucket)
        guard let admission, let json = admission.record, let read = records.store(id: id, json: json, now: now)
        else { throw APIProblem.unauthorized }
        try Self.checkAdmitted(admission)
        return read
    }

    /// The credential of an `Authorization: Bearer <credential>` header (scheme in any case, spaces and tabs around
    /// the credential dropped); nil for another scheme or an empty credential.
    static func bearerCredential(_ header: String) -> String? {
        let bytes = header.utf8
        guard bytes.count > 7,
            zip(bytes.prefix(7), "bearer ".utf8).allSatisfy({ $0 == $1 || ($1 >= 0x61 && $0 | 0x20 == $1) })
        else { return nil }
        func isBlank(_ b: UInt8) -> Bool { b == 0x20 || b == 0x09 }
        let rest = bytes.dropFirst(7)
        guard let first = rest.firstIndex(where: { !isBlank($0) }), let last = rest.lastIndex(where: { !isBlank($0) })
        else { return nil }
        return String(decoding: rest[first...last], as: UTF8.self)
    }

    private static func checkAdmitted(_ admission: CredentialAdmission?) throws {
        guard let admission else { throw APIProblem.unauthorized }
        let wait = admission.retryAfterMilliseconds
        if wait > 0 {
            var p = APIProblem(
                .tooManyRequests, "rate limit exceeded for this credential (api.rateLimit); retry after the delay")
            p.headers[.retryAfter] = String((wait + 999) / 1000)
            throw p
        }
    }
}

/// API-key records read from the credential store, each used for `lifetime` after it was read (`api.keyCacheSeconds`).
///
/// A revoked or changed key therefore takes effect within that time on every process; a key the store does not hold is
/// never kept, so it is looked up again on each try. Bounded: emptied when it reaches `limit` entries.
final class APIKeyRecordCache: Sendable {
    struct Entry: Sendable {
        let record: APIKeyRecord
        /// The stored SHA-256 of the key, as bytes.
        let digest: [UInt8]
        /// When it was read (`DispatchTime` uptime nanoseconds).
        let readAt: UInt64

        /// True when `key` hashes to the stored digest, compared in constant time.
        func matches(_ key: String) -> Bool {
            APIKeyFormat.matches(key, digest: digest)
        }
    }

    private let entries = NSLockedBox<[String: Entry]>([:])
    private let lifetime: UInt64
    let limit: Int

    init(lifetimeSeconds: Double, limit: Int = 4096) {
        lifetime = UInt64(max(0, lifetimeSeconds) * 1e9)
        self.limit = limit
    }

    /// The record of key `id` when it was read less than the lifetime ago.
    func entry(id: String, now: UInt64) -> Entry? {
        guard lifetime > 0, let e = entries.withLocked({ $0[id] }), now &- e.readAt < lifetime else { return nil }
        return e
    }

    /// Decodes the record the lookup script returned and keeps it; nil when it is not a valid record of `id`.
    func store(id: String, json: String, now: UInt64) -> Entry? {
        guard let record = try? APIKeyStore.decoder.decode(APIKeyRecord.self, from: Data(json.utf8)),
            record.id == id, let digest = [UInt8](hex: record.sha256)
        else { return nil }
        let e = Entry(record: record, digest: digest, readAt: now)
        if lifetime > 0 {
            entries.withLocked { r in
                if r.count >= limit { r.removeAll(keepingCapacity: true) }
                r[id] = e
            }
        }
        return e
    }
}
