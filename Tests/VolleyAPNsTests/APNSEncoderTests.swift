import Crypto
import Foundation
import Testing
import VolleyAPNs
import VolleyCore
import VolleyHTTP2
import VolleyTestTags

func jsonObject(_ bytes: [UInt8]) -> [String: Any] {
    ((try? JSONSerialization.jsonObject(with: Data(bytes))) as? [String: Any]) ?? [:]
}

func headerValue(_ r: HTTP2Request, _ name: String) -> String? { r.headers.first(where: { $0.name == name })?.value }

@Suite(.tags(.unit)) struct APNSEncoderTests {
    let now = Date(timeIntervalSince1970: 1_800_000_000)
    let device = Device(platform: .ios, token: DeviceToken(String(repeating: "ab", count: 32)))

    func prepare(_ n: VolleyCore.Notification, job: String = "job-1") throws -> APNSPreparedNotification {
        try APNSPreparedNotification(n, jobID: JobID(job), bundleID: "com.example.app", now: now)
    }

    @Test func aJobWithoutCollapseIdShowsUnderTheWorkersIdentityAndTheJobsOwnWins() throws {
        var n = VolleyCore.Notification(title: "Hi")
        #expect(
            headerValue(try prepare(n).request(for: device, authority: "a", authorization: "x"), "apns-collapse-id")
                == nil)
        n.resendCollapseId = MessageTracking.resendCollapseID(org: "00Dxx0000001gEF", job: "job-1")
        let id = try #require(
            headerValue(try prepare(n).request(for: device, authority: "a", authorization: "x"), "apns-collapse-id"))
        #expect(id.hasPrefix("volley-") && id.utf8.count == 18)
        // One identity per job in its org: another job, or the same job id in another org, shows apart.
        #expect(id == MessageTracking.resendCollapseID(org: "00Dxx0000001gEF", job: "job-1"))
        #expect(id != MessageTracking.resendCollapseID(org: "00Dxx0000001gEF", job: "job-2"))
        #expect(id != MessageTracking.resendCollapseID(org: "00Dxx0000002gEF", job: "job-1"))
        n.collapseId = "score"
        #expect(
            headerValue(try prepare(n).request(for: device, authority: "a", authorization: "x"), "apns-collapse-id")
                == "score")
    }

    @Test func alertHeadersAndPayload() throws {
        let n = VolleyCore.Notification(
            title: "Hi", subtitle: "Sub", body: "Body", sound: "ping.aiff", badge: 3,
            data: ["recordId": .string("001")], mutableContent: true, category: "CASE",
            threadId: "t1", collapseId: "c1", interruptionLevel: "time-sensitive",
            relevanceScore: 0.5, targetContentId: "tc", ttl: 3600, url: "https://x/y")
        let p = try prepare(n)
        let r = p.request(for: device, authority: "api.push.apple.com", authorization: "bearer x")
        #expect(r.method == "POST")
        #expect(r.path == "/3/device/" + device.token.rawValue)
        #expect(headerValue(r, "apns-topic") == "com.example.app")
        #expect(headerValue(r, "apns-push-type") == "alert")
        #expect(headerValue(r, "apns-priority") == "10")
        #expect(headerValue(r, "apns-expiration") == String(1_800_000_000 + 3600))
        #expect(headerValue(r, "apns-collapse-id") == "c1")
        #expect(r.headers.first(where: { $0.name == "authorization" })?.sensitive == true)
        let json = jsonObject(r.body)
        let aps = json["aps"] as? [String: Any]
        let alert = aps?["alert"] as? [String: Any]
        #expect(alert?["title"] as? String == "Hi")
        #expect(alert?["subtitle"] as? String == "Sub")
        #expect(alert?["body"] as? String == "Body")
        #expect(aps?["badge"] as? Int == 3)
        #expect(aps?["sound"] as? String == "ping.aiff")
        #expect(aps?["mutable-content"] as? Int == 1)
        #expect(aps?["category"] as? String == "CASE")
        #expect(aps?["thread-id"] as? String == "t1")
        #expect(aps?["interruption-level"] as? String == "time-sensitive")
        #expect(aps?["relevance-score"] as? Double == 0.5)
        #expect(aps?["target-content-id"] as? String == "tc")
        #expect(json["recordId"] as? String == "001")
        #expect(json["url"] as? String == "https://x/y")
    }

    @Test func withoutTTLTheNotificationExpiresAfterThreeDays() throws {
        let r = try prepare(.init(body: "b")).request(for: device, authority: "a", authorization: nil)
        #expect(headerValue(r, "apns-expiration") == String(1_800_000_000 + 259_200))
        let longest = try prepare(.init(body: "b", ttl: 2_419_200)).request(
            for: device, authority: "a", authorization: nil)
        #expect(headerValue(longest, "apns-expiration") == String(1_800_000_000 + 2_419_200))
    }

    @Test func ttlZeroMeansDeliverOnce() throws {
        let r = try prepare(.init(body: "b", ttl: 0)).request(for: device, authority: "a", authorization: nil)
        #expect(headerValue(r, "apns-expiration") == "0")
        #expect(headerValue(r, "authorization") == nil)
    }

    @Test func silentPushHeaders() throws {
        let p = try prepare(.init(data: ["k": .string("v")], contentAvailable: true))
        let r = p.request(for: device, authority: "a", authorization: nil)
        #expect(headerValue(r, "apns-push-type") == "background")
        #expect(headerValue(r, "apns-priority") == "5")
        let aps = jsonObject(r.body)["aps"] as? [String: Any]
        #expect(aps?.count == 1)
        #expect(aps?["content-available"] as? Int == 1)
    }

    @Test func silentWithHighPriorityIsInvalid() {
        #expect(throws: NotificationError.self) { try prepare(.init(contentAvailable: true, priority: .high)) }
        #expect(throws: NotificationError.self) { try prepare(.init(body: "x", pushType: "background")) }
    }

    @Test(arguments: [
        ("voip", ".voip"), ("complication", ".complication"), ("fileprovider", ".pushkit.fileprovider"),
        ("liveactivity", ".push-type.liveactivity"), ("location", ".location-query"),
        ("pushtotalk", ".voip-ptt"), ("widgets", ".push-type.widgets"), ("alert", ""),
    ])
    func topicSuffix(_ pushType: String, _ suffix: String) throws {
        let p = try prepare(.init(body: "x", pushType: pushType))
        let r = p.request(for: device, authority: "a", authorization: nil)
        #expect(headerValue(r, "apns-topic") == "com.example.app" + suffix)
        #expect(headerValue(r, "apns-push-type") == pushType)
    }

    @Test func unknownPushTypeIsInvalid() {
        #expect(throws: NotificationError.self) { try prepare(.init(body: "x", pushType: "fax")) }
    }

    @Test func payloadLimitSaysByHowManyBytes() throws {
        let big = String(repeating: "x", count: 5000)
        do {
            _ = try prepare(.init(body: big))
            Issue.record("expected PayloadTooLarge")
        } catch let e as NotificationError {
            #expect(e.reason == "PayloadTooLarge")
            let size = try APNSPayload.encode(APNSPayload.payload(for: .init(body: big), text: .init(body: big))).count
            #expect(e.message.contains("\(size) bytes, \(size - 4096) bytes over the 4096-byte limit"))
        }
        // VoIP allows 5120.
        _ = try prepare(.init(body: String(repeating: "x", count: 4500), pushType: "voip"))
        #expect(throws: NotificationError.self) {
            try prepare(.init(body: String(repeating: "x", count: 5200), pushType: "voip"))
        }
    }

    @Test func collapseIDLimit() {
        #expect(throws: NotificationError.self) {
            try prepare(.init(body: "x", collapseId: String(repeating: "c", count: 65)))
        }
    }

    @Test func localizedChoice() throws {
        let n = VolleyCore.Notification(
            title: "Hello", body: "Default",
            localized: [
                "es": .init(title: "Hola", body: "Uno"),
                "pt-BR": .init(body: "Brasil"),
            ])
        let p = try prepare(n)
        func alert(_ locale: String?) -> [String: Any]? {
            let d = Device(platform: .ios, token: device.token, locale: locale)
            return (jsonObject(p.request(for: d, authority: "a", authorization: nil).body)["aps"] as? [String: Any])?[
                "alert"] as? [String: Any]
        }
        #expect(alert("es")?["title"] as? String == "Hola")
        #expect(alert("es-MX")?["body"] as? String == "Uno") // language prefix
        #expect(alert("pt_BR")?["body"] as? String == "Brasil") // exact, normalised
        #expect(alert("pt_BR")?["title"] as? String == "Hello") // field falls back to default
        #expect(alert("pt-PT")?["body"] as? String == "Brasil") // same language
        #expect(alert("fr")?["body"] as? String == "Default")
        #expect(alert(nil)?["body"] as? String == "Default")
    }

    @Test func rawAPSPassesThroughUnchanged() throws {
        let raw: JSONValue = .object(["aps": .object(["alert": .string("raw"), "badge": .number(2)]), "x": .number(1)])
        let p = try prepare(.init(apns: raw))
        let body = p.request(for: device, authority: "a", authorization: nil).body
        #expect(try JSONDecoder().decode(JSONValue.self, from: Data(body)) == raw)
        let silentRaw = try prepare(.init(apns: .object(["aps": .object(["content-available": .number(1)])])))
        #expect(silentRaw.pushType == .background)
        #expect(silentRaw.priority == 5)
    }

    @Test func apexHelperShapes() throws {
        let short = try APNSPayload.apple(
            alert: "Case 42 changed", sound: "", badgeCount: nil,
            userData: ["caseId": .string("500x")])
        #expect(short == .object(["aps": .object(["alert": .string("Case 42 changed")]), "caseId": .string("500x")]))
        let long = try APNSPayload.apple(
            alertBody: "Body", actionLocKey: "VIEW", locKey: "CASE_FMT", locArgs: ["42"],
            launchImage: "img.png", sound: "default", badgeCount: 1, userData: nil)
        #expect(
            long
                == .object([
                    "aps": .object([
                        "alert": .object([
                            "body": .string("Body"), "action-loc-key": .string("VIEW"), "loc-key": .string("CASE_FMT"),
                            "loc-args": .array([.string("42")]), "launch-image": .string("img.png"),
                        ]),
                        "sound": .string("default"), "badge": .number(1),
                    ])
                ]))
        #expect(throws: NotificationError.self) {
            try APNSPayload.apple(alert: nil, sound: "", badgeCount: nil, userData: ["a": .string("b")])
        }
        // An Apex payload is sent as a raw apns payload.
        let p = try prepare(.init(apns: short))
        #expect(p.pushType == .alert)
    }

    /// apns-id = UUIDv8 of SipHash-2-4-128(token) keyed by SHA-256(job id)[0..<16]; the value below was computed
    /// independently (a Python SipHash checked against the reference vectors) so a change of derivation shows.
    @Test func apnsIDDerivationIsPinned() {
        let token = DeviceToken(String(repeating: "ab", count: 32))
        #expect(APNSPreparedNotification.apnsID(jobID: "job-1", token: token) == "388760e6-06dd-86f6-b2fb-2c9d1f0739c9")
    }

    @Test func apnsIDIsDeterministicUUID() {
        let a = APNSPreparedNotification.apnsID(jobID: "job-1", token: device.token)
        let b = APNSPreparedNotification.apnsID(jobID: "job-1", token: device.token)
        let c = APNSPreparedNotification.apnsID(jobID: "job-2", token: device.token)
        #expect(a == b)
        #expect(a != c)
        #expect(UUID(uuidString: a) != nil)
        #expect(a == a.lowercased())
        let chars = Array(a)
        #expect(chars[14] == "8") // version 8
        #expect("89ab".contains(chars[19])) // RFC 9562 variant
    }

    @Test func tokenCadenceWithManualClock() throws {
        let clock = ManualClock()
        let key = P256.Signing.PrivateKey()
        let tokens = try APNSTokenProvider(
            p8PEM: key.pemRepresentation, keyID: "ABC123DEFG", teamID: "DEF123GHIJ", clock: clock)
        let first = try tokens.authorization()
        #expect(tokens.mintCount == 1)
        // ExpiredProviderToken storm inside 20 minutes: never a new token.
        for _ in 0..<100 {
            #expect(tokens.refreshAfterRejection(of: first) == false)
            clock.advance(by: 10)
        }
        #expect(try tokens.authorization() == first)
        clock.advance(by: 19 * 60 - 1000)
        #expect(tokens.refreshAfterRejection(of: first) == false) // 19 min
        clock.advance(by: 61)
        #expect(tokens.refreshAfterRejection(of: first) == true) // > 20 min: refreshed
        #expect(tokens.mintCount == 2)
        let second = try tokens.authorization()
        #expect(second != first)
        // A stale rejection after someone else refreshed: resend with the new one, no mint.
        #expect(tokens.refreshAfterRejection(of: first) == true)
        #expect(tokens.mintCount == 2)
        // Unprompted: a new token once the current one is 50 minutes old (so always by 60).
        clock.advance(by: 49 * 60)
        #expect(try tokens.authorization() == second)
        clock.advance(by: 60)
        #expect(try tokens.authorization() != second)
        #expect(tokens.mintCount == 3)
    }

    @Test func jwtShapeAndSignature() throws {
        let key = P256.Signing.PrivateKey()
        let tokens = try APNSTokenProvider(
            p8PEM: key.pemRepresentation, keyID: "ABC123DEFG", teamID: "DEF123GHIJ",
            clock: ManualClock(Date(timeIntervalSince1970: 1_800_000_000)))
        let auth = try tokens.authorization()
        #expect(auth.hasPrefix("bearer "))
        let parts = auth.dropFirst(7).split(separator: ".").map(String.init)
        #expect(parts.count == 3)
        func b64(_ s: String) -> Data {
            var t = s.replacingOccurrences(of: "-", with: "+").replacingOccurrences(of: "_", with: "/")
            while t.count % 4 != 0 { t += "=" }
            return Data(base64Encoded: t) ?? Data()
        }
        let header = try JSONSerialization.jsonObject(with: b64(parts[0])) as? [String: Any]
        let claims = try JSONSerialization.jsonObject(with: b64(parts[1])) as? [String: Any]
        #expect(header?["alg"] as? String == "ES256")
        #expect(header?["kid"] as? String == "ABC123DEFG")
        #expect(claims?["iss"] as? String == "DEF123GHIJ")
        #expect(claims?["iat"] as? Int == 1_800_000_000)
        let sig = try P256.Signing.ECDSASignature(rawRepresentation: b64(parts[2]))
        #expect(key.publicKey.isValidSignature(sig, for: Data((parts[0] + "." + parts[1]).utf8)))
    }

    /// The refusals the API also runs at the door: each names the notification's field.
    @Test(
        arguments: [
            (VolleyCore.Notification(title: "Hi", ttl: -1), "ttl"),
            (VolleyCore.Notification(title: "Hi", ttl: 2_419_201), "ttl"),
            (VolleyCore.Notification(title: "Hi", pushType: "telegram"), "pushType"),
            (VolleyCore.Notification(title: "Hi", relevanceScore: 5), "relevanceScore"),
            (VolleyCore.Notification(title: "Hi", interruptionLevel: "loud"), "interruptionLevel"),
            (VolleyCore.Notification(title: "Hi", collapseId: String(repeating: "c", count: 65)), "collapseId"),
            (VolleyCore.Notification(title: "Hi", badge: -1), "badge"),
            (VolleyCore.Notification(title: "Hi", data: ["aps": .string("x")]), "data.aps"),
            (VolleyCore.Notification(body: "x", priority: .high, pushType: "background"), "pushType"),
            (VolleyCore.Notification(contentAvailable: true, priority: .high), "priority"),
            (VolleyCore.Notification(title: String(repeating: "x", count: 5000)), nil),
        ] as [(VolleyCore.Notification, String?)])
    func refusalsNameTheField(_ n: VolleyCore.Notification, _ field: String?) throws {
        do {
            _ = try prepare(n)
            Issue.record("prepared a notification APNs refuses")
        } catch let e as NotificationError {
            #expect(e.field == field, "\(e)")
        }
    }

    @Test func theEdgesOfTheRangesPass() throws {
        _ = try prepare(
            .init(title: "Hi", badge: 0, collapseId: String(repeating: "c", count: 64), relevanceScore: 1, ttl: 0))
        _ = try prepare(.init(title: "Hi", relevanceScore: 0))
    }

}
