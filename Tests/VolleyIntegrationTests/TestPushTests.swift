import Foundation
import Testing
import VolleyCore
import VolleyService
import VolleyTestSupport
import VolleyTestTags

@Suite(.serialized, .tags(.integration)) struct TestPushTests {
    func apps(_ mock: MockServerFixture) -> [ProviderApp] {
        [ProviderApp(name: "Test_App", apns: apnsApp(mock), fcm: fcmApp(mock))]
    }

    func run(
        _ mock: MockServerFixture, _ platform: Platform, _ token: String, _ n: VolleyCore.Notification,
        dryRun: Bool = false, app: String = "Test_App"
    ) async -> TestPushResult {
        await TestPush.run(
            .init(app: app, platform: platform, token: token, notification: n, dryRun: dryRun),
            apps: apps(mock), logger: testLogger, makeTransport: pools)
    }

    @Test func outcomesAndJSONKeys() async throws {
        let mock = try MockServerFixture()
        defer { mock.stop() }
        try mock.configure(
            #"{"apns": {"unregisteredPrefixes": ["dead"]}, "fcm": {"reasonPrefixes": {"quota": {"reason": "#
                + #""QUOTA_EXCEEDED"}, "sender": {"reason": "SENDER_ID_MISMATCH"}}}}"#
        )
        let n = VolleyCore.Notification(title: "Hi", body: "there")

        let ios = await run(mock, .ios, hexToken("", 1), n)
        #expect(ios.outcome == "accepted")
        #expect(ios.status == 200)
        #expect(ios.apnsId != nil)
        let json = try JSONSerialization.jsonObject(with: JSONEncoder().encode(ios)) as? [String: Any]
        #expect(json?["status"] as? Int == 200)
        #expect(json?["outcome"] as? String == "accepted")
        #expect(json?.keys.contains("reason") == true) // contract key, null when accepted

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

    @Test func yamlConfigurationToTestPush() async throws {
        let mock = try MockServerFixture()
        defer { mock.stop() }
        let dir = URL(fileURLWithPath: mock.stateDirectory)
        let yaml = """
            apps:
              - name: Test_App
                apns:
                  keyFile: \(URL(fileURLWithPath: mock.apnsKeyFile).lastPathComponent)
                  keyId: \(mock.apnsKeyID)
                  teamId: \(mock.apnsTeamID)
                  topic: \(mock.apnsTopic)
                  environment: sandbox
                  host: \(mock.host)
                  port: \(mock.port)
                  caFile: \(mock.caFile)
                fcm:
                  serviceAccountFile: \(mock.serviceAccountFile)
                  endpoint: https://\(mock.host):\(mock.port)
                  caFile: \(mock.caFile)
              - name: Cert_App
                apns:
                  certFile: \(mock.clientCertificateFile)
                  certKeyFile: \(mock.clientKeyFile)
                  topic: com.example.cert
            """
        let apps = ProviderApps.from(try VolleyConfiguration.parse(yaml: yaml, baseDirectory: dir))
        #expect(apps.count == 2)
        let a = try #require(apps[0].apns)
        #expect(a.credentials == .token(keyFile: mock.apnsKeyFile, keyID: mock.apnsKeyID, teamID: mock.apnsTeamID))
        #expect(a.environment == .sandbox)
        #expect(a.clientConfiguration(for: .sandbox).host == mock.host)
        #expect(a.clientConfiguration(for: .sandbox).port == mock.port)
        let c = try #require(apps[1].apns)
        #expect(
            c.clientCertificate
                == .pem(
                    certificateFile: mock.clientCertificateFile, privateKeyFile: mock.clientKeyFile, passphrase: nil))
        #expect(c.clientConfiguration(for: .production).host == "api.push.apple.com")
        #expect(c.clientConfiguration(for: .sandbox).host == "api.sandbox.push.apple.com")
        let n = VolleyCore.Notification(title: "from yaml")
        let ios = await TestPush.run(
            .init(app: "Test_App", platform: .ios, token: hexToken("", 11), notification: n),
            apps: apps, logger: testLogger, makeTransport: pools)
        #expect(ios.outcome == "accepted")
        let android = await TestPush.run(
            .init(app: "Test_App", platform: .android, token: "tok-yaml", notification: n),
            apps: apps, logger: testLogger, makeTransport: pools)
        #expect(android.outcome == "accepted")
    }
}
