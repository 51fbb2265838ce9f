import Foundation
import Testing
import VolleyCore
import VolleyService
import VolleyTestSupport

@Suite(.serialized) struct TestPushTests {
    func apps(_ mock: MockServerFixture) -> [ProviderApp] {
        [ProviderApp(name: "Test_App", apns: apnsApp(mock), fcm: fcmApp(mock))]
    }

    func run(_ mock: MockServerFixture, _ platform: Platform, _ token: String, _ n: VolleyCore.Notification,
             dryRun: Bool = false, app: String = "Test_App") async -> TestPushResult {
        await TestPush.run(.init(app: app, platform: platform, token: token, notification: n, dryRun: dryRun),
                           apps: apps(mock), logger: testLogger, makeTransport: pools)
    }

    @Test func outcomesAndJSONKeys() async throws {
        let mock = try MockServerFixture()
        defer { mock.stop() }
        try mock.configure(#"{"apns": {"unregisteredPrefixes": ["dead"]}, "fcm": {"reasonPrefixes": {"quota": {"reason": "QUOTA_EXCEEDED"}, "sender": {"reason": "SENDER_ID_MISMATCH"}}}}"#)
        let n = VolleyCore.Notification(title: "Hi", body: "there")

        let ios = await run(mock, .ios, hexToken("", 1), n)
        #expect(ios.outcome == "accepted")
        #expect(ios.status == 200)
        #expect(ios.apnsId != nil)
        let json = try JSONSerialization.jsonObject(with: JSONEncoder().encode(ios)) as? [String: Any]
        #expect(json?["status"] as? Int == 200)
        #expect(json?["outcome"] as? String == "accepted")
        #expect(json?.keys.contains("reason") == true)   // contract key, null when accepted

        let dead = await run(mock, .ios, hexToken("dead", 2), n)
        #expect(dead.outcome == "remove-token")
        #expect(dead.status == 410)
        #expect(dead.reason == "Unregistered")

        let android = await run(mock, .android, "tok-1", n)
        #expect(android.outcome == "accepted")
        #expect(android.messageName?.contains("/messages/") == true)
        #expect(await run(mock, .android, "quota-1", n).outcome == "retry")
        #expect(await run(mock, .android, "sender-1", n).outcome == "fix-app")

        let tooBig = await run(mock, .ios, hexToken("", 3), .init(body: String(repeating: "x", count: 5000)))
        #expect(tooBig.outcome == "invalid-notification")
        #expect(tooBig.status == nil)
        #expect(tooBig.message?.contains("bytes over the 4096-byte limit") == true)

        let unknownApp = await run(mock, .ios, hexToken("", 4), n, app: "Nope")
        #expect(unknownApp.outcome == "fix-app")
        #expect(unknownApp.message?.contains("Nope") == true)
    }

    @Test func dryRuns() async throws {
        let mock = try MockServerFixture()
        defer { mock.stop() }
        let n = VolleyCore.Notification(title: "Hi")
        let android = await run(mock, .android, "tok-dry", n, dryRun: true)
        #expect(android.outcome == "accepted")
        #expect(mock.stats().fcmValidateOnly == 1)
        let ios = await run(mock, .ios, hexToken("", 5), n, dryRun: true)
        #expect(ios.outcome == "accepted")
        #expect(ios.reason == "DryRun")
        #expect(mock.stats().acceptedAPNs == 0)
    }

    @Test func yamlAppsSection() throws {
        let yaml = """
        redis: {url: "unix:///tmp/x.sock"}
        apps:
          - name: Test_App
            apns:
              keyFile: AuthKey_ABC123DEFG.p8
              keyId: ABC123DEFG
              teamId: DEF123GHIJ
              topic: com.example.app
              environment: sandbox
              host: 127.0.0.1
              port: 2197
              caFile: /path/ca.pem
            fcm:
              serviceAccountFile: service-account.json
              endpoint: https://127.0.0.1:8443
              caFile: /path/ca.pem
          - name: Cert_App
            apns:
              certFile: cert.p12
              certPassword: secret
              topic: com.example.cert
        """
        let apps = try ProviderApps.parse(yaml: yaml, baseDirectory: "/etc/volley")
        #expect(apps.count == 2)
        let a = try #require(apps[0].apns)
        #expect(a.credentials == .token(keyFile: "/etc/volley/AuthKey_ABC123DEFG.p8", keyID: "ABC123DEFG", teamID: "DEF123GHIJ"))
        #expect(a.environment == .sandbox)
        #expect(a.clientConfiguration(for: .sandbox).host == "127.0.0.1")
        #expect(a.clientConfiguration(for: .sandbox).port == 2197)
        #expect(a.caFile == "/path/ca.pem")
        let f = try #require(apps[0].fcm)
        #expect(f.serviceAccountFile == "/etc/volley/service-account.json")
        #expect(f.endpoint == "https://127.0.0.1:8443")
        let c = try #require(apps[1].apns)
        #expect(c.clientCertificate == .pkcs12(file: "/etc/volley/cert.p12", password: "secret"))
        #expect(c.clientConfiguration(for: .production).host == "api.push.apple.com")
        #expect(c.clientConfiguration(for: .sandbox).host == "api.sandbox.push.apple.com")
        #expect(throws: ProviderConfigurationError.self) {
            try ProviderApps.parse(yaml: "apps:\n  - name: X\n    apns: {topic: t}\n", baseDirectory: "/")
        }
    }
}
