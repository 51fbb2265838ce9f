import Foundation
import Testing
import VolleyCore
import VolleyTestTags

@testable import VolleyAPI

@Suite(.tags(.unit))
struct UserTokenTests {
    let current = UserTokenKey(id: "k2", secret: Array(repeating: 7, count: 32))
    let previous = UserTokenKey(id: "k1", secret: Array(repeating: 9, count: 32))
    let now = Date(timeIntervalSince1970: 1_800_000_000)

    func claims(expiringIn seconds: Int64 = 600) -> UserTokenClaims {
        UserTokenClaims(
            org: "orgA", user: "005A", app: "app1", exp: Int64(now.timeIntervalSince1970) + seconds)
    }

    @Test func aSignedTokenVerifiesToItsClaims() throws {
        let signer = UserTokenSigner(keys: [current, previous])
        let token = try signer.sign(claims())
        #expect(token.hasPrefix("vut1.k2."))
        #expect(signer.verify(token, now: now) == claims())
    }

    @Test func rotationKeepsOldTokensValidUntilTheOldKeyIsDropped() throws {
        let old = try UserTokenSigner(keys: [previous]).sign(claims())
        #expect(UserTokenSigner(keys: [current, previous]).verify(old, now: now) == claims())
        #expect(UserTokenSigner(keys: [current]).verify(old, now: now) == nil)
    }

    @Test func expiredTamperedAndForeignTokensAreRefused() throws {
        let signer = UserTokenSigner(keys: [current])
        let expired = try signer.sign(claims(expiringIn: -1))
        #expect(signer.verify(expired, now: now) == nil)
        let token = try signer.sign(claims())
        var parts = token.split(separator: ".").map(String.init)
        // Another user's claims under the original signature.
        var other = claims()
        other.user = "005B"
        parts[2] = Base64URL.encode(Array(try JSONEncoder().encode(other)))
        #expect(signer.verify(parts.joined(separator: "."), now: now) == nil)
        let foreign = try UserTokenSigner(keys: [UserTokenKey(id: "k2", secret: Array(repeating: 1, count: 32))])
            .sign(claims())
        #expect(signer.verify(foreign, now: now) == nil)
        #expect(signer.verify("vut1.k2.garbage", now: now) == nil)
        #expect(signer.verify("", now: now) == nil)
    }

    @Test func signingWithoutKeysFails() {
        #expect(throws: UserTokenSigner.Failure.self) { try UserTokenSigner(keys: []).sign(claims()) }
    }
}

@Suite(.tags(.unit))
struct APIKeyTests {
    @Test func aKeyMatchesOnlyItsOwnRecord() {
        let (id, key) = APIKeyFormat.generate()
        #expect(APIKeyFormat.id(of: key) == id)
        let record = APIKeyRecord(
            id: id, org: "orgA", role: .send, name: nil, sha256: APIKeyFormat.digest(key), createdAt: Date())
        #expect(APIKeyFormat.matches(key, record: record))
        let (_, other) = APIKeyFormat.generate()
        #expect(!APIKeyFormat.matches(other, record: record))
        #expect(!APIKeyFormat.matches(key + "x", record: record))
    }

    @Test(arguments: [
        "", "vk_", "vk_abc_def", "xx_0123456789abcdef_" + String(repeating: "a", count: 43), "Bearer",
        "vk_0123456789abcdeg_" + String(repeating: "a", count: 43),
        "vk_0123456789abcdef-" + String(repeating: "a", count: 43),
        "vk_0123456789abcdef_" + String(repeating: "a", count: 39),
        "vk_0123456789abcde_" + String(repeating: "a", count: 44),
    ])
    func malformedKeysHaveNoID(_ key: String) {
        #expect(APIKeyFormat.id(of: key) == nil)
    }

    /// The 60 characters a key needs are characters, not bytes: 20 two-byte characters after the id make 60 bytes
    /// and only 40 characters.
    @Test func aKeyIsCountedInCharacters() {
        #expect(APIKeyFormat.id(of: "vk_0123456789abcdef_" + String(repeating: "é", count: 20)) == nil)
        #expect(APIKeyFormat.id(of: "vk_0123456789abcdef_" + String(repeating: "é", count: 40)) == "0123456789abcdef")
    }

    @Test func aKeyIDIsItsSixteenHexDigits() {
        #expect(APIKeyFormat.id(of: "vk_0123456789ABCdef_" + String(repeating: "x", count: 40)) == "0123456789ABCdef")
    }

    @Test(
        arguments: [
            ("Bearer abc", "abc"), ("bearer abc", "abc"), ("BEARER \tabc  ", "abc"), ("Bearer a b", "a b"),
            ("Bearer  ", nil), ("Basic abc", nil), ("Bearerabc", nil), ("Bearer", nil), ("Bear\u{0}r abc", nil),
        ] as [(String, String?)])
    func theBearerCredentialIsTheHeaderAfterItsScheme(_ header: String, _ credential: String?) {
        #expect(AuthMiddleware.bearerCredential(header) == credential)
    }
}

@Suite(.tags(.unit))
struct InputTests {
    @Test func decodingErrorsNameTheField() throws {
        let body = Data(#"{"org":"o","app":"a","recipients":["u"],"notification":{"badge":"x"}}"#.utf8)
        do {
            _ = try Input.read(PushJob.self, from: body)
            Issue.record("decoded a string badge")
        } catch let p as APIProblem {
            #expect(p.field == "notification.badge")
            #expect(p.status == .badRequest)
        }
    }

    @Test(arguments: [("", false), ("job-1", true), ("a b", false), ("x/y", false), ("é", false), ("a:b.c_d-e", true)])
    func safeIDs(_ id: String, _ ok: Bool) {
        #expect(Input.isSafeID(id) == ok)
    }

    @Test func streamIDsCompareNumerically() {
        #expect(JobStatus.isAfter("10-0", "9-5"))
        #expect(JobStatus.isAfter("9-10", "9-9"))
        #expect(!JobStatus.isAfter("9-9", "9-9"))
    }

    @Test func routeTemplatesUseOpenAPIParameters() {
        #expect(ObservingMiddleware.template("/v1/jobs/:id") == "/v1/jobs/{id}")
        #expect(ObservingMiddleware.template("/livez") == "/livez")
    }
}

@Suite(.tags(.unit))
struct APIKeyRecordCacheTests {
    func json(role: String, sha: String = String(repeating: "a", count: 64)) -> String {
        #"{"createdAt":"2026-11-24T00:00:00Z","id":"0123456789abcdef","org":"orgA","role":"\#(role)","#
            + #""sha256":"\#(sha)"}"#
    }

    @Test func aRecordIsUsedForItsLifetimeThenReadAgain() throws {
        let key = "vk_0123456789abcdef_" + String(repeating: "s", count: 43)
        let sha = APIKeyFormat.digest(key)
        let cache = APIKeyRecordCache(lifetimeSeconds: 2)
        #expect(cache.entry(id: "0123456789abcdef", now: 0) == nil)
        let stored = try #require(cache.store(id: "0123456789abcdef", json: json(role: "send", sha: sha), now: 10))
        #expect(stored.record.role == .send)
        #expect(stored.matches(key))
        #expect(!stored.matches(key + "x"))
        #expect(cache.entry(id: "0123456789abcdef", now: 10 + 1_999_999_999)?.record.role == .send)
        #expect(cache.entry(id: "0123456789abcdef", now: 10 + 2_000_000_000) == nil)
        // Garbage, a record of another id and a digest that is not hex are no record, and are not kept.
        #expect(cache.store(id: "0123456789abcdef", json: "not json", now: 0) == nil)
        #expect(cache.store(id: "fedcba9876543210", json: json(role: "send", sha: sha), now: 0) == nil)
        #expect(cache.store(id: "0123456789abcdef", json: json(role: "send", sha: "zz"), now: 0) == nil)
    }

    @Test func aZeroLifetimeKeepsNothing() throws {
        let cache = APIKeyRecordCache(lifetimeSeconds: 0)
        let sha = String(repeating: "ab", count: 32)
        #expect(cache.store(id: "0123456789abcdef", json: json(role: "read", sha: sha), now: 5)?.record.role == .read)
        #expect(cache.entry(id: "0123456789abcdef", now: 5) == nil)
    }
}
