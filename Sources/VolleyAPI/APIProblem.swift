import Foundation
import Hummingbird
import VolleyCore

/// An RFC 9457 problem answer (`application/problem+json`) on Volley's own paths. `field` names the input at fault
/// (`recipients`, `notification.badge`, `devices[2].token`) so a client can point at it.
public struct APIProblem: Error, Sendable, CustomStringConvertible {
    public var status: HTTPResponse.Status
    public var title: String
    public var detail: String
    public var field: String?
    /// Extra headers (Retry-After, WWW-Authenticate).
    public var headers: HTTPFields = [:]

    public init(_ status: HTTPResponse.Status, _ detail: String, field: String? = nil, title: String? = nil) {
        self.status = status
        self.detail = detail
        self.field = field
        self.title = title ?? status.reasonPhrase
    }

    public var description: String { "\(status.code) \(field.map { "\($0): " } ?? "")\(detail)" }

    static func badRequest(_ field: String?, _ detail: String) -> APIProblem {
        APIProblem(.badRequest, detail, field: field)
    }
    static func notFound(_ what: String, field: String? = nil) -> APIProblem {
        APIProblem(.notFound, what, field: field)
    }
    static let unauthorized: APIProblem = {
        var p = APIProblem(.unauthorized, "send Authorization: Bearer <API key or user token>", field: "Authorization")
        p.headers[.wwwAuthenticate] = "Bearer"
        return p
    }()
    static func forbidden(_ detail: String) -> APIProblem { APIProblem(.forbidden, detail, field: "Authorization") }
    /// A resource this process was built without (`what`: the store or credentials it lacks): 501, the same answer on
    /// every retry until the process is started with it, so no `Retry-After`. A store that is there but does not
    /// answer is 503 instead.
    static func startedWithout(_ what: String) -> APIProblem {
        APIProblem(.notImplemented, "this API process was started without \(what)")
    }

    /// The same error in Salesforce's shape, for the compatible paths: `[{"errorCode", "message"}]`, the message
    /// starting with the field.
    func salesforceResponse() -> Response {
        let code: String
        switch status.code {
        case 400, 413: code = "INVALID_API_INPUT"
        case 401: code = "INVALID_SESSION_ID"
        case 403: code = "INSUFFICIENT_ACCESS"
        case 404: code = "NOT_FOUND"
        case 405: code = "METHOD_NOT_ALLOWED"
        case 415: code = "UNSUPPORTED_MEDIA_TYPE"
        case 429: code = "REQUEST_LIMIT_EXCEEDED"
        case 503: code = "SERVER_UNAVAILABLE"
        default: code = "UNKNOWN_EXCEPTION"
        }
        let message = field.map { "\($0): \(detail)" } ?? detail
        let data = JSONResponse.object([("errorCode", .text(code)), ("message", .text(message))], inArray: true)
        var headers = headers
        headers[.contentType] = "application/json;charset=UTF-8"
        return Response(status: status, headers: headers, body: .init(byteBuffer: ByteBuffer(bytes: data)))
    }

    func response() -> Response {
        var members: [(String, JSONResponse.Member)] = [("detail", .text(detail))]
        if let field { members.append(("field", .text(field))) }
        members += [("status", .number(Int(status.code))), ("title", .text(title)), ("type", .text("about:blank"))]
        var headers = headers
        headers[.contentType] = "application/problem+json"
        return Response(
            status: status, headers: headers, body: .init(byteBuffer: ByteBuffer(bytes: JSONResponse.object(members))))
    }
}

enum JSONResponse {
    static let encoder: JSONEncoder = {
        let e = JSONEncoder()
        e.outputFormatting = [.sortedKeys]
        e.dateEncodingStrategy = RFC3339.encodingStrategy()
        return e
    }()

    static func make<T: Encodable>(_ value: T, status: HTTPResponse.Status = .ok, headers: HTTPFields = [:]) throws
        -> Response
    {
        let data = try encoder.encode(value)
        return raw(data, status: status, headers: headers)
    }

    static func raw(_ data: some Sequence<UInt8>, status: HTTPResponse.Status = .ok, headers: HTTPFields = [:])
        -> Response
    {
        var headers = headers
        headers[.contentType] = "application/json"
        return Response(status: status, headers: headers, body: .init(byteBuffer: ByteBuffer(bytes: data)))
    }

    static func noContent() -> Response { Response(status: .noContent) }

    enum Member {
        case text(String)
        case number(Int)
    }

    /// A flat JSON object of `members` in the order given (sorted by the callers), optionally inside an array.
    /// Written directly: error answers are as frequent as the errors a busy client makes (401s, 429s), and an
    /// accepted job's answer as frequent as jobs.
    static func object(_ members: [(String, Member)], inArray: Bool = false) -> [UInt8] {
        var out: [UInt8] = inArray ? [UInt8(ascii: "["), UInt8(ascii: "{")] : [UInt8(ascii: "{")]
        for (i, (key, value)) in members.enumerated() {
            if i > 0 { out.append(UInt8(ascii: ",")) }
            out.append(UInt8(ascii: "\""))
            appendJSONStringContent(key, to: &out)
            out.append(contentsOf: #"":"#.utf8)
            switch value {
            case .text(let t):
                out.append(UInt8(ascii: "\""))
                appendJSONStringContent(t, to: &out)
                out.append(UInt8(ascii: "\""))
            case .number(let n): out.append(contentsOf: String(n).utf8)
            }
        }
        out.append(UInt8(ascii: "}"))
        if inArray { out.append(UInt8(ascii: "]")) }
        return out
    }
}
