import Foundation
import VolleyCore
import VolleyHTTP2
import VolleyHTTP2Server

// FCM's OAuth 2 token endpoint (`POST /token`): a service account's signed assertion for an access token.

extension MockEngine {
    func oauthError(_ state: MockConnectionState, _ status: Int, _ error: String, _ description: String)
        -> HTTP2Response
    {
        state.counters.withLock { c in
            c.requests += 1
            c.tokenRequests += 1
            c.errors[MockOutcomeKey(.oauth, status, error), default: 0] += 1
        }
        let body =
            "{\"error\":\(MockJSONWriter.quote(error)),\"error_description\":\(MockJSONWriter.quote(description))}"
        return HTTP2Response(
            status: status, headers: [HTTP2Header("content-type", "application/json; charset=utf-8")],
            body: Array(body.utf8))
    }

    static func formValue(_ body: [UInt8], _ name: String) -> String? {
        for pair in body.split(separator: UInt8(ascii: "&")) {
            guard let eq = pair.firstIndex(of: UInt8(ascii: "=")) else { continue }
            if percentDecode(pair[pair.startIndex..<eq]) == name { return percentDecode(pair[(eq + 1)...]) }
        }
        return nil
    }

    static func percentDecode(_ bytes: ArraySlice<UInt8>) -> String {
        var out: [UInt8] = []
        out.reserveCapacity(bytes.count)
        var i = bytes.startIndex
        while i < bytes.endIndex {
            let c = bytes[i]
            if c == UInt8(ascii: "+") {
                out.append(0x20)
                i += 1
                continue
            }
            if c == UInt8(ascii: "%"), i + 2 < bytes.endIndex + 0, let h = hexValue(bytes[i + 1]),
                let l = hexValue(bytes[i + 2])
            {
                out.append(h << 4 | l)
                i += 3
                continue
            }
            out.append(c)
            i += 1
        }
        return String(decoding: out, as: UTF8.self)
    }

    func oauth(
        _ req: MockRequest, state: MockConnectionState, config: MockConfiguration, now: Double,
        authenticated: inout Bool
    ) -> HTTP2Response {
        guard req.method == "POST" else {
            return oauthError(state, 405, "invalid_request", "Method not allowed; use POST.")
        }
        guard let grant = Self.formValue(req.body, "grant_type") else {
            return oauthError(state, 400, "invalid_request", "Missing required parameter: grant_type")
        }
        guard grant == "urn:ietf:params:oauth:grant-type:jwt-bearer" else {
            return oauthError(state, 400, "unsupported_grant_type", "Invalid grant_type: \(grant)")
        }
        guard let assertion = Self.formValue(req.body, "assertion") else {
            return oauthError(state, 400, "invalid_request", "Missing required parameter: assertion")
        }
        let p = port.withLock { $0 }
        let audiences = [
            credentials.tokenURI(host: host, port: p), credentials.tokenURI(host: "localhost", port: p),
            credentials.tokenURI(host: "127.0.0.1", port: p),
        ]
        if let problem = MockJWT.verifyFCMAssertion(
            assertion[...], key: credentials.fcmPublicKey,
            clientEmail: credentials.fcmClientEmail, audiences: audiences,
            now: Int64(now))
        {
            return oauthError(state, 400, "invalid_grant", problem)
        }
        authenticated = true
        let n = accessTokenCounter.add(1, ordering: .relaxed).newValue
        let token = "ya29.mock-\(n)-\(String(state.nextRandom(), radix: 16))\(String(state.nextRandom(), radix: 16))"
        let lifetime = config.accessTokenLifetimeSeconds
        let expiry = Int64(now) + Int64(lifetime)
        issuedAccessTokens.withLock { $0[token] = expiry }
        state.accessTokens[token] = expiry
        state.counters.withLock { c in
            c.requests += 1
            c.tokenRequests += 1
        }
        let body = "{\"access_token\":\"\(token)\",\"expires_in\":\(lifetime),\"token_type\":\"Bearer\"}"
        return HTTP2Response(
            status: 200, headers: [HTTP2Header("content-type", "application/json; charset=utf-8")],
            body: Array(body.utf8))
    }
}
