import HTTPTypes
import Hummingbird
import Logging
import NIOCore
import NIOEmbedded

@testable import VolleyAPI

/// Requests handed to the API's router as Hummingbird's server hands them: a request head and body in, the response
/// head and body out, every middleware on the way, and no socket. (The real-socket, real-client tests of the API
/// are the integration lane's and the contract run's.)
struct RouterClient: Sendable {
    let responder: RouterResponder<APIRequestContext>
    let logger = Logger(label: "test")

    init(_ router: Router<APIRequestContext>) {
        responder = router.buildResponder()
    }

    struct Answer: Sendable {
        var status: HTTPResponse.Status
        var headers: HTTPFields
        var body: ByteBuffer
    }

    /// One request. A handler's error that no middleware turned into a response is a 500, as the server answers it.
    func execute(uri: String, method: HTTPRequest.Method, headers: HTTPFields = [:], body: ByteBuffer? = nil)
        async throws -> Answer
    {
        var fields = headers
        if let body { fields[.contentLength] = String(body.readableBytes) }
        let request = Request(
            head: .init(method: method, scheme: "http", authority: "localhost", path: uri, headerFields: fields),
            body: RequestBody(buffer: body ?? ByteBuffer()))
        let context = APIRequestContext(source: .init(channel: EmbeddedChannel(), logger: logger))
        let response: Response
        do {
            response = try await responder.respond(to: request, context: context)
        } catch {
            response = Response(status: .internalServerError)
        }
        let collected = Collected()
        try await response.body.write(Collector(into: collected))
        return Answer(status: response.status, headers: response.headers, body: collected.body)
    }

    /// One request with `token` as the bearer credential; answers the status, body and headers.
    func call(
        _ method: HTTPRequest.Method, _ uri: String, token: String? = nil, json: String? = nil,
        headers: HTTPFields = [:]
    ) async throws -> (status: Int, text: String, headers: HTTPFields) {
        var h = headers
        if let token { h[.authorization] = "Bearer \(token)" }
        if json != nil { h[.contentType] = "application/json" }
        let answer = try await execute(
            uri: uri, method: method, headers: h, body: json.map { ByteBuffer(string: $0) })
        return (Int(answer.status.code), String(buffer: answer.body), answer.headers)
    }

    /// The response body's bytes, as the server would write them (the writer is consumed by the body).
    private final class Collected: @unchecked Sendable {
        var body = ByteBuffer()
    }

    private struct Collector: ResponseBodyWriter {
        let into: Collected
        mutating func write(_ buffer: ByteBuffer) async throws { into.body.writeImmutableBuffer(buffer) }
        consuming func finish(_ trailingHeaders: HTTPFields?) async throws {}
    }
}
