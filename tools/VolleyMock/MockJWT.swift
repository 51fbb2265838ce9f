import Crypto
import CryptoExtras
import Foundation
import VolleyCore

/// JWT parsing and verification for the mock (APNs ES256 provider tokens, FCM RS256 assertions).
enum MockJWT {
    struct Parsed {
        var header: JSONValue
        var claims: JSONValue
        var signingInput: [UInt8]
        var signature: [UInt8]
    }

    static func parse(_ token: Substring) -> Parsed? {
        let bytes = Array(token.utf8)
        guard let d1 = bytes.firstIndex(of: UInt8(ascii: ".")),
            let d2 = bytes[(d1 + 1)...].firstIndex(of: UInt8(ascii: "."))
        else { return nil }
        guard let h = Base64URL.decode(bytes: bytes[..<d1]), let c = Base64URL.decode(bytes: bytes[(d1 + 1)..<d2]),
            let s = Base64URL.decode(bytes: bytes[(d2 + 1)...]),
            let header = JSONValue.parse(h), let claims = JSONValue.parse(c)
        else { return nil }
        guard case .object = header, case .object = claims else { return nil }
        return Parsed(header: header, claims: claims, signingInput: Array(bytes[..<d2]), signature: s)
    }

    enum APNsVerdict: Sendable, Equatable {
        case valid(issuedAt: Int64)
        case invalid
    }

    /// APNs provider token: ES256, header `kid` = our key id, claim `iss` = our team id, `iat` seconds.
    /// Expiry is not decided here (it depends on the time of each request): the caller compares `issuedAt`.
    static func verifyAPNs(_ token: Substring, key: P256.Signing.PublicKey, keyID: String, teamID: String)
        -> APNsVerdict
    {
        guard let jwt = parse(token),
            jwt.header["alg"]?.stringValue == "ES256",
            jwt.header["kid"]?.stringValue == keyID,
            jwt.claims["iss"]?.stringValue == teamID,
            let iat = jwt.claims["iat"]?.doubleValue, iat.isFinite,
            jwt.signature.count == 64,
            let sig = try? P256.Signing.ECDSASignature(rawRepresentation: jwt.signature),
            key.isValidSignature(sig, for: jwt.signingInput)
        else { return .invalid }
        return .valid(issuedAt: Int64(iat))
    }

    /// FCM OAuth assertion (RFC 7523): RS256, iss = client_email, aud = token_uri, scope covers FCM, iat/exp sane.
    /// Returns nil on success or Google's `error_description` text.
    static func verifyFCMAssertion(
        _ token: Substring, key: _RSA.Signing.PublicKey, clientEmail: String,
        audiences: [String], now: Int64
    ) -> String? {
        guard let jwt = parse(token) else {
            return
                "Invalid JWT: Token must be a short-lived token (60 minutes) and in a reasonable timeframe. Check "
                + "your iat and exp values in the JWT claim."
        }
        guard jwt.header["alg"]?.stringValue == "RS256" else { return "Invalid JWT Signature." }
        let sig = _RSA.Signing.RSASignature(rawRepresentation: jwt.signature)
        guard key.isValidSignature(sig, for: jwt.signingInput, padding: .insecurePKCS1v1_5) else {
            return "Invalid JWT Signature."
        }
        guard jwt.claims["iss"]?.stringValue == clientEmail else {
            return "Invalid issuer: not the service account's client_email."
        }
        guard let aud = jwt.claims["aud"]?.stringValue, audiences.contains(aud) else {
            return "Invalid JWT: Failed audience check."
        }
        guard let scope = jwt.claims["scope"]?.stringValue,
            scope.split(separator: " ").contains(where: {
                $0 == "https://www.googleapis.com/auth/firebase.messaging"
                    || $0 == "https://www.googleapis.com/auth/cloud-platform"
            })
        else { return "Invalid OAuth scope or ID token audience provided." }
        guard let iat = jwt.claims["iat"]?.doubleValue, let exp = jwt.claims["exp"]?.doubleValue,
            iat <= Double(now + 300), exp > Double(now), exp - iat <= 3600, exp > iat
        else {
            return
                "Invalid JWT: Token must be a short-lived token (60 minutes) and in a reasonable timeframe. Check "
                + "your iat and exp values in the JWT claim."
        }
        return nil
    }
}

/// Mints tokens signed with the state directory's keys, for tests (and for benchmarks that drive the mock with
/// h2load): an APNs provider token and an FCM OAuth assertion.
public enum MockTokenMinter {
    /// ES256 provider token `{"alg":"ES256","kid":keyID}.{"iss":teamID,"iat":issuedAt}` signed with the p8 key.
    public static func apnsProviderToken(
        credentials: MockCredentials, issuedAt: Int64 = Int64(Date().timeIntervalSince1970),
        keyID: String? = nil, teamID: String? = nil
    ) throws -> String {
        let pem = try String(contentsOfFile: credentials.apnsKeyFile, encoding: .utf8)
        let key = try P256.Signing.PrivateKey(pemRepresentation: pem)
        let header = "{\"alg\":\"ES256\",\"kid\":\(MockJSONWriter.quote(keyID ?? credentials.apnsKeyID))}"
        let claims = "{\"iss\":\(MockJSONWriter.quote(teamID ?? credentials.apnsTeamID)),\"iat\":\(issuedAt)}"
        let input = Base64URL.encode(Array(header.utf8)) + "." + Base64URL.encode(Array(claims.utf8))
        let sig = try key.signature(for: Array(input.utf8))
        return input + "." + Base64URL.encode(Array(sig.rawRepresentation))
    }

    /// RS256 assertion for `POST /token` (RFC 7523) signed with the service account's key.
    public static func fcmAssertion(
        credentials: MockCredentials, audience: String,
        issuedAt: Int64 = Int64(Date().timeIntervalSince1970), lifetime: Int64 = 3600,
        scope: String = "https://www.googleapis.com/auth/firebase.messaging"
    ) throws -> String {
        let pem = try String(contentsOfFile: credentials.fcmKeyFile, encoding: .utf8)
        let key = try _RSA.Signing.PrivateKey(pemRepresentation: pem)
        let header = "{\"alg\":\"RS256\",\"typ\":\"JWT\",\"kid\":\(MockJSONWriter.quote(credentials.fcmPrivateKeyID))}"
        let claims =
            "{\"iss\":\(MockJSONWriter.quote(credentials.fcmClientEmail)),\"scope\":\(MockJSONWriter.quote(scope)),"
            + "\"aud\":\(MockJSONWriter.quote(audience)),\"iat\":\(issuedAt),\"exp\":\(issuedAt + lifetime)}"
        let input = Base64URL.encode(Array(header.utf8)) + "." + Base64URL.encode(Array(claims.utf8))
        let sig = try key.signature(for: Array(input.utf8), padding: .insecurePKCS1v1_5)
        return input + "." + Base64URL.encode(Array(sig.rawRepresentation))
    }
}
