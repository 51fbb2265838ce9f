import Foundation
import VolleyCore

/// Who is calling, decided by the HTTP layer from the credential before any handler runs. Handlers never read an
/// org from a path or a body to decide access: everything they touch is keyed by `org`.
public struct ConnectCaller: Sendable, Hashable {
    public var org: OrgID
    /// The context user (a user token). The Notifications resources need one; the push resources do not.
    public var user: UserID?
    /// The connected app the credential is bound to (a user token's app), if any.
    public var app: String?

    public init(org: OrgID, user: UserID? = nil, app: String? = nil) {
        self.org = org
        self.user = user
        self.app = app
    }

    var appName: AppName? { app.flatMap { $0.isEmpty ? nil : AppName($0) } }
}

/// One query item, in request order (names may repeat).
public struct ConnectQueryItem: Sendable, Hashable {
    public var name: String
    public var value: String
    public init(name: String, value: String) {
        self.name = name
        self.value = value
    }
}

/// What a handler answers: a status and a JSON body (empty for 204).
public struct ConnectResponse: Sendable, Hashable {
    public static let contentType = "application/json;charset=UTF-8"

    public var status: Int
    public var body: Data

    public init(status: Int, body: Data) {
        self.status = status
        self.body = body
    }

    static let noContent = ConnectResponse(status: 204, body: Data())

    static func json<T: Encodable>(_ status: Int, _ value: T) -> ConnectResponse {
        do {
            return ConnectResponse(status: status, body: try ConnectJSON.encoder.encode(value))
        } catch {
            return ConnectError.internalError("response could not be encoded").response
        }
    }
}

/// An error in Salesforce's shape: the body is `[{"errorCode": …, "message": …}]`. Messages name the field.
public struct ConnectError: Error, Sendable, Hashable, CustomStringConvertible {
    public var status: Int
    public var errorCode: String
    public var message: String

    public init(status: Int, errorCode: String, message: String) {
        self.status = status
        self.errorCode = errorCode
        self.message = message
    }

    public var description: String { "\(status) \(errorCode): \(message)" }

    /// A field with a bad value (wrong type, out of range, too many ids).
    public static func invalidInput(_ message: String) -> ConnectError {
        ConnectError(status: 400, errorCode: "INVALID_API_INPUT", message: message)
    }
    /// A body that is not JSON, or a key the resource does not take.
    public static func jsonParser(_ message: String) -> ConnectError {
        ConnectError(status: 400, errorCode: "JSON_PARSER_ERROR", message: message)
    }
    public static func notFound(_ message: String = "The requested resource does not exist") -> ConnectError {
        ConnectError(status: 404, errorCode: "NOT_FOUND", message: message)
    }
    public static func methodNotAllowed(_ method: String, allowed: [String]) -> ConnectError {
        ConnectError(
            status: 405, errorCode: "METHOD_NOT_ALLOWED",
            message: "HTTP method '\(method)' not allowed. Allowed are \(allowed.joined(separator: ","))")
    }
    public static func forbidden(_ message: String) -> ConnectError {
        ConnectError(status: 403, errorCode: "INSUFFICIENT_ACCESS", message: message)
    }
    public static func internalError(_ message: String) -> ConnectError {
        ConnectError(status: 500, errorCode: "UNKNOWN_EXCEPTION", message: message)
    }

    private struct Wire: Encodable {
        var errorCode: String
        var message: String
    }

    public var response: ConnectResponse {
        let body =
            (try? ConnectJSON.encoder.encode([Wire(errorCode: errorCode, message: message)]))
            ?? Data("[{\"errorCode\":\"UNKNOWN_EXCEPTION\",\"message\":\"error\"}]".utf8)
        return ConnectResponse(status: status, body: body)
    }
}
