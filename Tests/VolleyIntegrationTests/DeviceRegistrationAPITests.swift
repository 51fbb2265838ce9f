import Foundation
import Testing
import VolleyAPI
import VolleyCore
import VolleyStore
import VolleyTestDoubles
import VolleyTestSupport
import VolleyTestTags

/// Device registration through the real API on a real redis-server: a key through `PUT /v1/devices` reaching the
/// worker's registry read, the Mobile SDKs' `MobilePushServiceDevice` registration and logout with a user token,
/// refusals naming the field, and the list newest first.
@Suite(.serialized, .tags(.integration)) struct DeviceRegistrationAPITests {
    static let sobject = "/services/data/v61.0/sobjects/MobilePushServiceDevice"

    @Test func keysTokensAndTheSDKsRegistration() async throws {
        let w = try MockWorld()
        defer { w.stop() }
        let api = try await RunningAPI(configFile: try APIServerTests.config(w))
        let send = try APIServerTests.key(w, org: "orgA", role: .send)
        let admin = try APIServerTests.key(w, org: "orgA", role: .admin)
        let ada = try await APIServerTests.userToken(api, key: send, user: "ada")
        let bob = try await APIServerTests.userToken(api, key: send, user: "bob")
        let iosToken = String(repeating: "5e", count: 32)

        // PUT /v1/devices with a key in the iOS SDK's 64-character lines: the worker's read carries it.
        let key = TestDeviceKeys.rsa2048Lines.replacingOccurrences(of: "\n", with: "\\n")
        let put = try await api.call(
            "PUT", "/v1/devices", token: ada,
            json: #"{"platform":"ios","token":"\#(iosToken)","rsaPublicKey":"\#(key)","cipherName":"RSA_OAEP_SHA256"}"#)
        #expect(put.status == 200, "\(put.text)")
        let read = try w.h.admin.devices(org: "orgA", app: "app1", users: ["ada"])
        #expect(
            read.first?.first?.encryptionKey
                == DeviceKeyMaterial(rsaPublicKey: TestDeviceKeys.rsa2048, cipherName: "RSA_OAEP_SHA256"))

        // Refusals name the field and register nothing.
        for (json, field) in [
            (#"{"platform":"ios","token":"\#(String(repeating: "5e", count: 8))"}"#, "token"),
            (#"{"platform":"android","token":"with space"}"#, "token"),
            (#"{"platform":"android","token":"f","rsaPublicKey":"bm90IGEga2V5"}"#, "rsaPublicKey"),
            (
                #"{"platform":"android","token":"f","rsaPublicKey":"\#(TestDeviceKeys.rsa2048)","cipherName":"X"}"#,
                "cipherName"
            ),
        ] {
            let bad = try await api.call("PUT", "/v1/devices", token: ada, json: json)
            #expect(bad.status == 400, "\(json): \(bad.text)")
            #expect(bad.field == field, "\(json): \(bad.text)")
        }

        // The Android SDK's registration: 201 with an id; the same again is the same id.
        let sdkBody =
            #"{"ConnectionToken":"fcm-ada-1","ServiceType":"androidGcm","ApplicationBundle":"com.acme.app","#
            + #""RsaPublicKey":"\#(TestDeviceKeys.rsa2048)"}"#
        let created = try await api.call("POST", Self.sobject, token: ada, json: sdkBody)
        #expect(created.status == 201, "\(created.text)")
        let id = try #require(created.json["id"] as? String)
        #expect(created.json["success"] as? Bool == true)
        let again = try await api.call("POST", Self.sobject, token: ada, json: sdkBody)
        #expect(again.status == 201 && again.json["id"] as? String == id)
        // A bad token answers Salesforce's sObject error naming the field.
        let badSDK = try await api.call(
            "POST", Self.sobject, token: ada,
            json: #"{"ConnectionToken":"zz","ServiceType":"Apple","ApplicationBundle":"com.acme.app"}"#)
        #expect(badSDK.status == 400)
        let errors = try #require(try JSONSerialization.jsonObject(with: badSDK.body) as? [[String: Any]])
        #expect(errors.first?["fields"] as? [String] == ["ConnectionToken"], "\(badSDK.text)")
        #expect(try await api.call("POST", Self.sobject, token: admin, json: sdkBody).status == 403)

        // Newest registration first.
        let listed = try await api.call("GET", "/v1/users/ada/devices", token: admin)
        let devices = try #require(listed.json["devices"] as? [[String: Any]])
        #expect(devices.map { $0["token"] as? String } == ["fcm-ada-1", iosToken], "\(listed.text)")
        #expect(devices.first?["rsaPublicKey"] as? String == TestDeviceKeys.rsa2048)
        #expect(devices.first?["cipherName"] == nil)

        // Logout: another user's DELETE is a 404 and removes nothing; the owner's removes the device.
        #expect(try await api.call("DELETE", "\(Self.sobject)/\(id)", token: bob).status == 404)
        #expect(try await api.call("DELETE", "\(Self.sobject)/\(id)", token: ada).status == 204)
        let after = try await api.call("GET", "/v1/users/ada/devices", token: admin)
        #expect((after.json["devices"] as? [[String: Any]])?.map { $0["token"] as? String } == [iosToken])
        await api.stop()
    }
}

/// A `volley worker` process removes the devices not registered again within `devices.staleAfterDays`, logs how
/// many, and keeps the others.
@Test(.tags(.integration)) func aWorkerRemovesStaleDevices() async throws {
    let w = try MockWorld()
    defer { w.stop() }
    let now = Date()
    let stale = (0..<3).map { String(format: "%064x", 0x57A1E + $0) }
    for token in stale {
        try w.h.admin.register(
            [DeviceImportRecord(org: "orgA", app: "app1", user: "gone", platform: .ios, token: DeviceToken(token))],
            now: now - 40 * 86_400)
    }
    try w.h.admin.register(
        [
            DeviceImportRecord(
                org: "orgA", app: "app1", user: "here", platform: .android, token: DeviceToken("fcm-fresh"))
        ],
        now: now - 86_400)
    let config = try w.writeConfig(worker: ["blockMs": "100"])
    let yaml = try String(contentsOfFile: config, encoding: .utf8)
        .replacingOccurrences(of: "level: warning", with: "level: info")
    try (yaml + "\ndevices:\n  staleAfterDays: 30\n").write(toFile: config, atomically: true, encoding: .utf8)
    let worker = try WorkerProcess(config: config, consumer: "sweeper", logDirectory: w.dir)
    defer { if worker.isRunning { worker.kill9() } }
    try await waitUntil("the stale devices are removed: \(worker.log.suffix(1500))", timeout: .seconds(30)) {
        (try? w.h.admin.records(org: "orgA", app: "app1", user: "gone").isEmpty) == true
    }
    try await waitUntil("the removal is logged: \(worker.log.suffix(1500))", timeout: .seconds(10)) {
        worker.log.contains("removed stale devices") && worker.log.contains("removed=3")
    }
    #expect(try w.h.admin.records(org: "orgA", app: "app1", user: "here").map(\.token.rawValue) == ["fcm-fresh"])
    #expect(!stale.contains { worker.log.contains($0) }, "no token in the log")
}
