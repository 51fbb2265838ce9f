import Foundation
import Hummingbird
import Logging
import NIOCore
import VolleyCore

/// What the console's middleware decided about a request, for its handler.
public struct ConsoleRequest: Sendable {
    /// The session, nil on the sign-in page and the static files.
    public var session: ConsoleSessions.Session?
    /// The session's CSRF token, for the forms a page renders.
    public var csrf: String
    /// The posted form, CSRF already checked.
    public var form: ConsoleForm
}

/// Every request under `/console`: a page other than sign-in and the static files needs a session whose API key
/// still exists (else a redirect to `/console/login`), a POST needs its form's CSRF token, and every answer carries
/// the console's security headers. A failure renders as an HTML page with its status, not problem JSON.
struct ConsoleMiddleware: RouterMiddleware {
    typealias Context = APIRequestContext
    let sessions: ConsoleSessions
    let auth: AuthMiddleware
    let clock: any WallClock
    let pages: ConsolePages
    let logger: Logger
    /// Cookies get `Secure` when the API serves TLS.
    let secure: Bool
    /// The largest form body read.
    let maxFormBytes: Int

    /// `default-src 'self'`: no inline script or style, nothing from another origin; no framing (clickjacking), forms
    /// post only to the console.
    static let headers: HTTPFields = {
        var h: HTTPFields = [
            .contentSecurityPolicy: "default-src 'self'; frame-ancestors 'none'; form-action 'self'; base-uri 'none'",
            .xContentTypeOptions: "nosniff",
        ]
        if let name = HTTPFields.Element.Name("Referrer-Policy") { h[name] = "same-origin" }
        return h
    }()

    func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws
        -> Response
    {
        var context = context
        let path = request.uri.path
        let open = path == "/console/login" || path.hasPrefix("/console/static/")
        var response: Response
        do {
            var console = ConsoleRequest(session: nil, csrf: "", form: ConsoleForm())
            if !open {
                guard let cookie = request.cookies[ConsoleSessions.sessionCookie]?.value,
                    let session = sessions.verify(cookie, now: clock.now())
                else { return Self.signIn(from: request) }
                let key: APIKeyRecordCache.Entry
                do { key = try await auth.keyRecord(id: session.keyID) } catch let p as APIProblem
                    where p.status == .unauthorized
                {
                    // The key was revoked: the session ends with it.
                    return Self.signIn(from: request)
                }
                context.caller = .key(id: session.keyID, org: key.record.org, role: key.record.role)
                console.session = session
                console.csrf = sessions.csrf(for: session)
            }
            if request.method == .post {
                console.form = try await Self.form(request, max: maxFormBytes)
                if let session = console.session, !sessions.checkCSRF(console.form["csrf"], session: session) {
                    throw APIProblem(
                        .forbidden,
                        "this form's security token is missing or out of date: reload the page and send it "
                            + "again", field: "csrf")
                }
            }
            context.console = console
            response = try await next(request, context)
        } catch {
            let problem = ObservingMiddleware.problem(error, logger: logger)
            response = pages.errorPage(problem, context: context)
        }
        for field in Self.headers { response.headers[field.name] = field.value }
        if response.headers[.cacheControl] == nil { response.headers[.cacheControl] = "no-store" }
        return response
    }

    /// A redirect to the sign-in page that comes back to this page after it (GETs only; a POST's form is gone).
    static func signIn(from request: Request) -> Response {
        var target = "/console/login"
        if request.method == .get, let next = ConsolePages.localPath(request.uri.description) {
            target += "?next=" + ConsolePages.queryEscape(next)
        }
        var r = Response.redirect(to: target, type: .normal)
        r.headers[.cacheControl] = "no-store"
        return r
    }

    /// The posted form: `application/x-www-form-urlencoded`, at most `max` bytes (413 beyond).
    static func form(_ request: Request, max: Int) async throws -> ConsoleForm {
        if let type = request.headers[.contentType],
            !type.lowercased().hasPrefix("application/x-www-form-urlencoded")
        {
            throw APIProblem(
                .unsupportedMediaType, "the console's forms are application/x-www-form-urlencoded",
                field: "Content-Type")
        }
        let buffer: ByteBuffer
        do { buffer = try await request.body.collect(upTo: max) } catch {
            throw APIProblem(.contentTooLarge, "the form is larger than \(max) bytes", field: "body")
        }
        return ConsoleForm(encoded: String(buffer: buffer))
    }
}

extension APIRequestContext {
    /// The console's view of the request (set by `ConsoleMiddleware` under `/console`).
    var console: ConsoleRequest {
        get { consoleRequest ?? ConsoleRequest(session: nil, csrf: "", form: ConsoleForm()) }
        set { consoleRequest = newValue }
    }
}
