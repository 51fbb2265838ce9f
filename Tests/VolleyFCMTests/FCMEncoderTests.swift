import Crypto
import CryptoExtras
import Foundation
import Testing
import VolleyCore
import VolleyFCM
import VolleyHTTP2
import VolleyTestTags

private func jsonObject(_ bytes: [UInt8]) -> [String: Any] {
    ((try? JSONSerialization.jsonObject(with: Data(bytes))) as? [String: Any]) ?? [:]
}

@Suite(.tags(.unit)) struct FCMEncoderTests {
    let device = Device(platform: .android, token: DeviceToken("fcm-token:APA91b_xyz"))

    @Test func messageShape() throws {
        let n = VolleyCore.Notification(
            title: "T", body: "B", sound: "ding", badge: 2,
            data: [
                "id": .string("001"), "n": .number(3), "flag": .bool(true),
                "obj": .object(["a": .number(1)]),
            ],
            category: "OPEN_CASE", threadId: "thread", collapseId: "ck", ttl: 60,
            priority: .normal, imageUrl: "https://img/x.png", url: "https://u", channelId: "alerts",
            apns: .object(["aps": .object(["alert": .string("ios")])]))
        let p = try FCMPreparedNotification(n, projectID: "proj-1")
        let r = p.request(for: device, authority: "fcm.googleapis.com", authorization: "Bearer tok")
        #expect(r.path == "/v1/projects/proj-1/messages:send")
        #expect(r.headers.first(where: { $0.name == "authorization" })?.sensitive == true)
        let root = jsonObject(r.body)
        #expect(root["validate_only"] == nil)
        let m = root["message"] as? [String: Any]
        #expect(m?["token"] as? String == "fcm-token:APA91b_xyz")
        let notification = m?["notification"] as? [String: Any]
        #expect(notification?["title"] as? String == "T")
        #expect(notification?["body"] as? String == "B")
        #expect(notification?["image"] as? String == "https://img/x.png")
        let data = m?["data"] as? [String: Any]
        #expect(data?["id"] as? String == "001")
        #expect(data?["n"] as? String == "3")
        #expect(data?["flag"] as? String == "true")
        #expect(data?["obj"] as? String == #"{"a":1}"#)
        #expect(data?["url"] as? String == "https://u")
        // Grouping is not replacing: the thread is data for the app, and the tag (replace) is the collapse id.
        #expect(data?["threadId"] as? String == "thread")
        let android = m?["android"] as? [String: Any]
        #expect(android?["priority"] as? String == "NORMAL")
        #expect(android?["ttl"] as? String == "60s")
        #expect(android?["collapse_key"] as? String == "ck")
        let an = android?["notification"] as? [String: Any]
        #expect(an?["channel_id"] as? String == "alerts")
        #expect(an?["sound"] as? String == "ding")
        #expect(an?["click_action"] as? String == "OPEN_CASE")
        #expect(an?["image"] as? String == "https://img/x.png")
        #expect(an?["tag"] as? String == "ck")
        let apns = m?["apns"] as? [String: Any]
        #expect(((apns?["payload"] as? [String: Any])?["aps"] as? [String: Any])?["alert"] as? String == "ios")
    }

    @Test func theWorkersCollapseIdentityIsTheTagAndNeverTheCollapseKey() throws {
        var n = VolleyCore.Notification(title: "T")
        n.resendCollapseId = "volley-AAAAAAAAAAA"
        let r = try FCMPreparedNotification(n, projectID: "p").request(for: device, authority: "a", authorization: "t")
        let android = (jsonObject(r.body)["message"] as? [String: Any])?["android"] as? [String: Any]
        #expect((android?["notification"] as? [String: Any])?["tag"] as? String == "volley-AAAAAAAAAAA")
        // collapse_key would make FCM keep one message of the key for an offline device: only a job asks for that.
        #expect(android?["collapse_key"] == nil)
        // A silent (data) message has no tag; its `mid` is what an app de-duplicates on.
        var silent = VolleyCore.Notification(data: ["k": .string("v")], contentAvailable: true)
        silent.resendCollapseId = "volley-AAAAAAAAAAA"
        let s = try FCMPreparedNotification(silent, projectID: "p").request(
            for: device, authority: "a", authorization: "t")
        #expect(
            ((jsonObject(s.body)["message"] as? [String: Any])?["android"] as? [String: Any])?["notification"] == nil)
    }

    @Test func withoutTTLTheMessageLivesThreeDays() throws {
        let p = try FCMPreparedNotification(VolleyCore.Notification(title: "T"), projectID: "p")
        let r = p.request(for: device, authority: "a", authorization: "Bearer t")
        let m = jsonObject(r.body)["message"] as? [String: Any]
        #expect((m?["android"] as? [String: Any])?["ttl"] as? String == "259200s")
    }

    @Test func validateOnlyAndRawMerge() throws {
        let n = VolleyCore.Notification(
            title: "T",
            fcm: .object([
                "message": .object([
                    "android": .object(["notification": .object(["icon": .string("ic"), "color": .string("#ff0000")])]),
                    "token": .string("ignored"),
                ])
            ]))
        let p = try FCMPreparedNotification(n, projectID: "p", validateOnly: true)
        let root = jsonObject(p.body(token: device.token, locale: nil))
        #expect(root["validate_only"] as? Bool == true)
        let m = root["message"] as? [String: Any]
        #expect(m?["token"] as? String == device.token.rawValue)
        let an = (m?["android"] as? [String: Any])?["notification"] as? [String: Any]
        #expect(an?["icon"] as? String == "ic")
        #expect(an?["color"] as? String == "#ff0000")
        #expect((m?["android"] as? [String: Any])?["priority"] as? String == "HIGH")
    }

    @Test func silentIsDataOnly() throws {
        let p = try FCMPreparedNotification(.init(data: ["k": .string("v")], contentAvailable: true), projectID: "p")
        let m = jsonObject(p.body(token: device.token, locale: nil))["message"] as? [String: Any]
        #expect(m?["notification"] == nil)
        #expect((m?["android"] as? [String: Any])?["priority"] as? String == "NORMAL")
    }

    @Test func dataLimitSaysByHowManyBytes() {
        do {
            _ = try FCMPreparedNotification(
                .init(title: "t", data: ["k": .string(String(repeating: "v", count: 4100))]),
                projectID: "p")
            Issue.record("expected PayloadTooLarge")
        } catch let e as NotificationError {
            #expect(e.reason == "PayloadTooLarge")
            #expect(e.message.contains("4101 bytes, 5 bytes over the 4096-byte limit"))
        } catch { Issue.record("\(error)") }
    }

    /// FCM's 4,096 bytes hold for the notification as for data: a message whose notification renders past them is
    /// refused as an APNs payload over its limit is (`PayloadTooLarge`, naming the field), when the job is
    /// prepared and per device for a notification made for one recipient. (It used to go out: a 4,724-byte message
    /// was sent.)
    @Test func aNotificationPastTheLimitIsRefusedAtPreparationAndPerDevice() throws {
        let long = VolleyCore.Notification(title: "Hi", body: String(repeating: "b", count: 4_600))
        #expect {
            _ = try FCMPreparedNotification(long, projectID: "p")
        } throws: { e in
            let e = try #require(e as? NotificationError)
            return e.reason == "PayloadTooLarge" && e.field == "body" && e.message.hasPrefix("body: FCM message is")
                && e.message.contains("over the 4096-byte limit")
        }
        #expect(throws: NotificationError.self) { try FCMPreparedNotification.check(long) }
        // Title, body and data together count: each alone fits.
        let together = VolleyCore.Notification(
            title: String(repeating: "t", count: 1_500), body: String(repeating: "b", count: 1_500),
            data: ["k": .string(String(repeating: "v", count: 1_500))])
        #expect(throws: NotificationError.self) { try FCMPreparedNotification.check(together) }
        // Per device: the job's notification fits, one recipient's rendering does not.
        let job = try FCMPreparedNotification(.init(title: "Hi", body: "short"), projectID: "p")
        #expect {
            _ = try job.personalized(for: device, with: .notification(long))
        } throws: { e in
            let e = try #require(e as? PersonalPayloadError)
            return e.reason == "PayloadTooLarge" && e.message.hasPrefix("body:")
        }
        // At the limit it goes.
        let fits = VolleyCore.Notification(title: "Hi", body: String(repeating: "b", count: 4_096 - 13))
        _ = try FCMPreparedNotification(fits, projectID: "p")
        _ = try job.personalized(for: device, with: .notification(fits))
    }

    @Test func theCheckRefusesWhatPreparingRefusesWithTheSameReason() {
        var fcmNotObject = VolleyCore.Notification(title: "t")
        fcmNotObject.fcm = .string("x")
        var fcmDataNumber = VolleyCore.Notification(title: "t")
        fcmDataNumber.fcm = .object(["data": .object(["n": .number(JSONNumber(1))])])
        var negativeTTL = VolleyCore.Notification(title: "t")
        negativeTTL.ttl = -1
        let notifications: [VolleyCore.Notification] = [
            .init(title: "t"),
            .init(title: "t", data: ["k": .string(String(repeating: "v", count: 4100))]),
            // Only the German variant's subtitle takes the data over the limit.
            .init(
                title: "t", localized: ["de": .init(title: "T", subtitle: String(repeating: "u", count: 20))],
                data: ["k": .string(String(repeating: "v", count: 4080))]),
            fcmNotObject, fcmDataNumber, negativeTTL,
        ]
        func reason(_ body: () throws -> Void) -> String? {
            do {
                try body()
                return nil
            } catch let e as NotificationError { return "\(e.reason): \(e.message)" } catch { return "\(error)" }
        }
        var refused = 0
        for n in notifications {
            let preparing = reason { _ = try FCMPreparedNotification(n, projectID: "p") }
            #expect(reason { try FCMPreparedNotification.check(n) } == preparing, "\(n)")
            if preparing != nil { refused += 1 }
        }
        #expect(refused == 5)
    }

    @Test func localizedChoice() throws {
        let p = try FCMPreparedNotification(
            .init(title: "Hello", localized: ["de": .init(title: "Hallo")]), projectID: "p")
        func title(_ l: String?) -> String? {
            ((jsonObject(p.body(token: device.token, locale: l))["message"] as? [String: Any])?["notification"]
                as? [String: Any])?["title"] as? String
        }
        #expect(title("de-AT") == "Hallo")
        #expect(title("en") == "Hello")
    }

    @Test func tokenIsEscaped() throws {
        let p = try FCMPreparedNotification(.init(title: "x"), projectID: "p")
        let odd = DeviceToken("a\"b\\c\u{01}d")
        let m = jsonObject(p.body(token: odd, locale: nil))["message"] as? [String: Any]
        #expect(m?["token"] as? String == "a\"b\\c\u{01}d")
    }

    @Test func errorBodies() {
        func decode(_ status: Int, _ body: String, retryAfter: String? = nil) -> AttemptResult {
            var headers: [HTTP2Header] = []
            if let retryAfter { headers.append(HTTP2Header("retry-after", retryAfter)) }
            return FCMResponseDecoder.decode(HTTP2Response(status: status, headers: headers, body: Array(body.utf8)))
        }
        let ok = decode(200, #"{"name":"projects/p/messages/0:123"}"#)
        #expect(ok.decision == .accepted)
        #expect(ok.messageID == "projects/p/messages/0:123")
        // The byte reader and the full parser agree; escapes and odd shapes go to the full parser.
        #expect(decode(200, " {\n \"name\" : \"projects/p/messages/9\" }").messageID == "projects/p/messages/9")
        #expect(decode(200, #"{"x":"y","name":"projects/p/messages/a\/b"}"#).messageID == "projects/p/messages/a/b")
        #expect(decode(200, #"{"x":"y"}"#).messageID == nil)
        #expect(decode(200, "").decision == .accepted)
        #expect(decode(200, "").messageID == nil)
        #expect(decode(200, #"["name"]"#).messageID == nil)
        let unreg = decode(
            404,
            #"{"error":{"code":404,"message":"Requested entity was not "#
                + #"found.","status":"NOT_FOUND","details":[{"@type":"type.googleapis.com/google.firebase.fcm.v1.Fc"#
                + #"mError","errorCode":"UNREGISTERED"}]}}"#
        )
        #expect(unreg.decision == .removeToken)
        #expect(unreg.answer.reason == "UNREGISTERED")
        let badToken = decode(
            400,
            #"{"error":{"code":400,"message":"Invalid "#
                + #"value","status":"INVALID_ARGUMENT","details":[{"@type":"type.googleapis.com/google.rpc.BadReque"#
                + #"st","fieldViolations":[{"field":"message.token","description":"Invalid registration token"}]}]}}"#
        )
        #expect(badToken.decision == .removeToken)
        let badMessage = decode(
            400,
            #"{"error":{"code":400,"message":"Invalid JSON "#
                + #"payload","status":"INVALID_ARGUMENT","details":[{"@type":"type.googleapis.com/google.rpc.BadReq"#
                + #"uest","fieldViolations":[{"field":"message.android.ttl"}]}]}}"#
        )
        #expect(badMessage.decision == .invalidNotification)
        let quota = decode(
            429, #"{"error":{"code":429,"status":"RESOURCE_EXHAUSTED","details":[{"errorCode":"QUOTA_EXCEEDED"}]}}"#,
            retryAfter: "12")
        #expect(quota.decision == .retry)
        #expect(quota.retryAfter == "12")
        #expect(decode(401, #"{"error":{"code":401,"status":"UNAUTHENTICATED"}}"#).decision == .refreshCredential)
        #expect(
            decode(
                401,
                #"{"error":{"code":401,"status":"UNAUTHENTICATED","details":[{"errorCode":"THIRD_PARTY_AUTH_ERROR"}]}}"#
            ).decision == .fixApp)
        #expect(decode(502, "<html>").decision == .unknown)
    }

    @Test func connectionsForConcurrency() {
        #expect(FCMAppConfiguration.connections(forConcurrency: 1) == 1)
        #expect(FCMAppConfiguration.connections(forConcurrency: 100) == 1)
        #expect(FCMAppConfiguration.connections(forConcurrency: 101) == 2)
        #expect(FCMAppConfiguration.connections(forConcurrency: 1000) == 10)
    }
}

/// Never used for sending: the assertion test needs a transport only to construct the provider.
final class UnreachableSubmitter: HTTP2RequestSubmitter, @unchecked Sendable {
    func submit(_ request: HTTP2PendingRequest) {
        request.complete(.failure(HTTP2Error(.connectFailed, resendIsSafe: true, "unreachable")))
    }
    func shutdown(completion: @escaping @Sendable () -> Void) { completion() }
}

@Suite(.tags(.unit)) struct FCMAssertionTests {
    @Test func rs256AssertionClaimsAndSignature() throws {
        let key = try _RSA.Signing.PrivateKey(keySize: .bits2048)
        let account = FCMServiceAccount(
            clientEmail: "sender@proj.iam.gserviceaccount.com", privateKeyPEM: key.pemRepresentation,
            tokenURI: "https://oauth2.googleapis.com/token", projectID: "proj")
        let provider = try FCMAccessTokenProvider(
            app: "A", account: account, transport: UnreachableSubmitter(),
            logger: .init(label: "t"))
        let jwt = try provider.assertion(now: Date(timeIntervalSince1970: 1_800_000_000))
        let parts = jwt.split(separator: ".").map(String.init)
        #expect(parts.count == 3)
        func b64(_ s: String) -> Data {
            var t = s.replacingOccurrences(of: "-", with: "+").replacingOccurrences(of: "_", with: "/")
            while t.count % 4 != 0 { t += "=" }
            return Data(base64Encoded: t) ?? Data()
        }
        let header = try JSONSerialization.jsonObject(with: b64(parts[0])) as? [String: Any]
        let claims = try JSONSerialization.jsonObject(with: b64(parts[1])) as? [String: Any]
        #expect(header?["alg"] as? String == "RS256")
        #expect(claims?["iss"] as? String == "sender@proj.iam.gserviceaccount.com")
        #expect(claims?["scope"] as? String == "https://www.googleapis.com/auth/firebase.messaging")
        #expect(claims?["aud"] as? String == "https://oauth2.googleapis.com/token")
        #expect(claims?["iat"] as? Int == 1_800_000_000)
        #expect(claims?["exp"] as? Int == 1_800_003_600)
        let signature = _RSA.Signing.RSASignature(rawRepresentation: b64(parts[2]))
        #expect(
            key.publicKey.isValidSignature(
                signature, for: Data((parts[0] + "." + parts[1]).utf8),
                padding: .insecurePKCS1v1_5))
    }

    /// The refusals the API also runs at the door: each names the notification's field.
    @Test func refusalsNameTheField() throws {
        let cases: [(VolleyCore.Notification, String)] = [
            (.init(title: "T", ttl: -1), "ttl"),
            (.init(title: "T", ttl: 2_419_201), "ttl"),
            (.init(title: "T", data: ["big": .string(String(repeating: "x", count: 5000))]), "data"),
            (.init(title: "T", fcm: .string("not an object")), "fcm"),
        ]
        for (n, field) in cases {
            do {
                _ = try FCMPreparedNotification(n, projectID: "p")
                Issue.record("prepared a notification FCM refuses: \(field)")
            } catch let e as NotificationError {
                #expect(e.field == field, "\(e)")
            }
        }
    }

}

/// A token endpoint whose transport always fails with one error.
final class FailingSubmitter: HTTP2RequestSubmitter, @unchecked Sendable {
    let error: HTTP2Error
    init(_ error: HTTP2Error) { self.error = error }
    func submit(_ request: HTTP2PendingRequest) { request.complete(.failure(error)) }
    func shutdown(completion: @escaping @Sendable () -> Void) { completion() }
}

/// How a failed access-token request decides the send that waited for it (the outcome table's rows).
@Suite(.tags(.unit)) struct FCMTokenFailureTests {
    static let key = try? _RSA.Signing.PrivateKey(keySize: .bits2048)

    static let rows: [(HTTP2Error, String, OutcomeDecision)] = [
        // TLS: the app's trust settings or the endpoint are wrong; retrying cannot help.
        (
            HTTP2Error(.certificateVerification, resendIsSafe: false, "unable to get local issuer certificate"),
            "transport:certificate-verification", .fixApp
        ),
        (
            HTTP2Error(.tlsHandshake, resendIsSafe: false, "sslv3 alert handshake failure"), "transport:tls-handshake",
            .fixApp
        ),
        (HTTP2Error(.alpnNotH2, resendIsSafe: false, "no h2"), "transport:alpn-not-h2", .fixApp),
        (HTTP2Error(.configuration, resendIsSafe: false, "cannot read CA file"), "transport:configuration", .fixApp),
        // Unreachable or slow: nothing reached FCM, the send is retried.
        (HTTP2Error(.connectFailed, resendIsSafe: true, "Connection refused"), "transport:oauth-token", .retry),
        (HTTP2Error(.timeout, resendIsSafe: false, "no answer in 30 s"), "transport:oauth-token", .retry),
        (
            HTTP2Error(.connectionReset, resendIsSafe: true, "peer closed mid-handshake"), "transport:oauth-token",
            .retry
        ),
    ]

    @Test(arguments: rows.indices)
    func tokenEndpointTransportFailure(_ i: Int) async throws {
        let (error, reason, decision) = Self.rows[i]
        let key = try #require(Self.key)
        let account = FCMServiceAccount(
            clientEmail: "sender@proj.iam.gserviceaccount.com", privateKeyPEM: key.pemRepresentation,
            tokenURI: "https://oauth2.googleapis.com/token", projectID: "proj")
        let tokens = try FCMAccessTokenProvider(
            app: "A", account: account, transport: FailingSubmitter(error), logger: .init(label: "t"))
        let result = await withCheckedContinuation { c in tokens.authorization { c.resume(returning: $0) } }
        guard case .failure(let failure) = result else {
            Issue.record("a token despite \(error)")
            return
        }
        #expect(failure.answer.reason?.rawValue == reason, "\(error)")
        #expect(OutcomeTable.decide(failure.answer) == decision, "\(error)")
        #expect(failure.description.contains(error.message), "the reason is in the message")
    }

    @Test func refusedServiceAccountIsFixAppAndServerErrorIsRetried() {
        var refused = FCMConfigurationError(app: "A", "refused")
        refused.status = 400
        refused.oauthError = "invalid_grant"
        #expect(OutcomeTable.decide(refused.answer) == .fixApp)
        var unavailable = FCMConfigurationError(app: "A", "503")
        unavailable.status = 503
        unavailable.oauthError = "oauth_error"
        unavailable.resendIsSafe = true
        #expect(OutcomeTable.decide(unavailable.answer) == .retry)
    }
}
