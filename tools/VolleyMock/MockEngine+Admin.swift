import Foundation
import VolleyCore
import VolleyHTTP2
import VolleyHTTP2Server

// The mock's own routes (`/_mock/stats`, `/_mock/pushes`, `/_mock/reset-stats`, `/_mock/config`).

extension MockEngine {
    /// A request path and its query's `name=value` pairs (no percent-decoding: the admin routes' values are plain).
    static func splitQuery(_ full: String) -> (String, [String: String]) {
        guard let q = full.firstIndex(of: "?") else { return (full, [:]) }
        var out: [String: String] = [:]
        for pair in full[full.index(after: q)...].split(separator: "&") {
            let kv = pair.split(separator: "=", maxSplits: 1)
            out[String(kv[0])] = kv.count > 1 ? String(kv[1]) : ""
        }
        return (String(full[..<q]), out)
    }

    func admin(_ req: MockRequest) -> MockDecision {
        var d = MockDecision()
        let json = [HTTP2Header("content-type", "application/json")]
        // `/_mock/pushes?offset=K&limit=N&compact=1`: a page of the captured pushes (a client may cap a response's
        // size); `compact` keeps the token and the time only.
        let (path, query) = Self.splitQuery(req.path)
        switch (req.method, path) {
        case ("GET", "/_mock/stats"):
            d.response = HTTP2Response(status: 200, headers: json, body: Array(stats().json.utf8))
        case ("GET", "/_mock/pushes"):
            let all = capturedPushes()
            let offset = min(all.count, max(0, query["offset"].flatMap { Int($0) } ?? 0))
            let limit = max(0, query["limit"].flatMap { Int($0) } ?? all.count)
            let compact = query["compact"] == "1"
            let pushes = all[offset..<min(all.count, offset + min(limit, all.count - offset))].map { p -> JSONValue in
                if compact {
                    return .object([
                        "token": .string(p.token),
                        "accepted_at": .number(JSONNumber(p.acceptedAt.timeIntervalSince1970)),
                    ])
                }
                return .object([
                    "provider": .string(p.provider.rawValue), "token": .string(p.token),
                    "headers": .object(p.headers.mapValues { .string($0) }),
                    "body": .string(String(decoding: p.body, as: UTF8.self)),
                    "accepted_at": .number(JSONNumber(p.acceptedAt.timeIntervalSince1970)),
                ])
            }
            d.response = HTTP2Response(status: 200, headers: json, body: JSONValue.array(pushes).encoded())
        case ("POST", "/_mock/reset-stats"):
            resetStats()
            d.response = HTTP2Response(status: 200, headers: json, body: Array("{\"ok\":true}".utf8))
        case ("GET", "/_mock/config"):
            d.response = HTTP2Response(status: 200, headers: json, body: Array(configuration.json.utf8))
        case ("POST", "/_mock/config"):
            do {
                try applyConfiguration(json: String(decoding: req.body, as: UTF8.self))
                d.response = HTTP2Response(status: 200, headers: json, body: Array(configuration.json.utf8))
            } catch {
                let body = "{\"error\":\(MockJSONWriter.quote(String(describing: error)))}"
                d.response = HTTP2Response(status: 400, headers: json, body: Array(body.utf8))
            }
        default:
            d.response = HTTP2Response(
                status: 404, headers: json, body: Array("{\"error\":\"unknown /_mock route\"}".utf8))
        }
        return d
    }
}
