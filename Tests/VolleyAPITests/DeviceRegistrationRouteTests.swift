import Foundation
import HTTPTypes
import Hummingbird
import Testing
import VolleyCore
import VolleyTestDoubles
import VolleyTestTags

@testable import VolleyAPI

private func errors(_ text: String) throws -> [[String: Any]] {
    try #require(try JSONSerialization.jsonObject(with: Data(text.utf8)) as? [[String: Any]])
}

/// Device registration on the API's router over in-memory stores: `PUT /v1/devices` with a key, the Mobile SDKs'
/// `MobilePushServiceDevice` sObject, refusals naming the field, and the list's order.
@Suite(.tags(.unit)) struct DeviceRegistrationRouteTests {
    static let apnsToken = String(repeating: "ab", count: 32)
    static let sobject = "/services/data/v60.0/sobjects/MobilePushServiceDevice"

    @Test func putDeviceKeepsTheKeyInTheRegistrysForm() async throws {
        let api = InMemoryAPI()
        let user = try api.userToken(user: "alice")
        let key = TestDeviceKeys.rsa2048Lines.replacingOccurrences(of: "\n", with: "\\n")
        try await api.test { client async throws in
            let put = try await client.call(
                .put, "/v1/devices", token: user,
                json: #"{"platform":"ios","token":"\#(Self.apnsToken)","rsaPublicKey":"\#(key)","#
                    + #""cipherName":"RSA_OAEP_SHA256"}"#)
            #expect(put.status == 200, "\(put.text)")
            let body = try object(put.text)
            #expect(body["rsaPublicKey"] as? String == TestDeviceKeys.rsa2048)
            #expect(body["cipherName"] as? String == "RSA_OAEP_SHA256")
        }
        let stored = try await api.devices.devices(org: "orgA", app: "app1", user: "alice")
        #expect(stored.count == 1)
        #expect(
            stored.first?.device.encryptionKey
                == DeviceKeyMaterial(rsaPublicKey: TestDeviceKeys.rsa2048, cipherName: "RSA_OAEP_SHA256"))
    }

    @Test(arguments: [
        (#"{"platform":"ios","token":"abc"}"#, "token"),
        (#"{"platform":"ios","token":"\#(String(repeating: "g", count: 64))"}"#, "token"),
        (#"{"platform":"android","token":"two words"}"#, "token"),
        (#"{"platform":"android","token":"t","rsaPublicKey":"not base64!"}"#, "rsaPublicKey"),
        (#"{"platform":"android","token":"t","rsaPublicKey":"AAAA"}"#, "rsaPublicKey"),
        (
            #"{"platform":"android","token":"t","rsaPublicKey":"\#(TestDeviceKeys.rsa2048)","cipherName":"RSA"}"#,
            "cipherName"
        ),
        (#"{"platform":"android","token":"t","cipherName":"RSA_OAEP_SHA1"}"#, "cipherName"),
        // An empty name is not PKCS #1 v1.5 (which is `cipherName` left out), with a key or without one.
        (
            #"{"platform":"android","token":"t","rsaPublicKey":"\#(TestDeviceKeys.rsa2048)","cipherName":""}"#,
            "cipherName"
        ),
        (#"{"platform":"ios","token":"\#(apnsToken)","cipherName":""}"#, "cipherName"),
        (#"{"platform":"android","token":"t","rsaPublicKey":7}"#, "rsaPublicKey"),
        // A zone by its IANA name only, as every door that takes one.
        (#"{"platform":"android","token":"t","timeZone":"GMT+5"}"#, "timeZone"),
        (#"{"platform":"android","token":"t","timeZone":"PST"}"#, "timeZone"),
    ])
    func putDeviceRefusalsNameTheField(json: String, field: String) async throws {
        let api = InMemoryAPI()
        let user = try api.userToken(user: "alice")
        try await api.test { client async throws in
            let put = try await client.call(.put, "/v1/devices", token: user, json: json)
            #expect(put.status == 400, "\(put.text)")
            #expect(try object(put.text)["field"] as? String == field, "\(put.text)")
        }
        #expect(try await api.devices.devices(org: "orgA", app: "app1", user: "alice").isEmpty)
    }

    /// The guide's test page lists "the five most recently registered": newest first, across the org's apps.
    @Test func aUsersDevicesListNewestFirst() async throws {
        let api = InMemoryAPI()
        let admin = try api.key(role: .admin)
        let t0 = api.clock.now()
        let registrations: [(AppName, Platform, String, Double)] = [
            ("app1", .android, "fcm-old", 0), ("app2", .ios, Self.apnsToken, 30), ("app1", .android, "fcm-new", 60),
            ("app2", .android, "fcm-mid", 10),
        ]
        for (app, platform, token, at) in registrations {
            try await api.devices.register(
                DeviceImportRecord(org: "orgA", app: app, user: "bob", platform: platform, token: DeviceToken(token)),
                now: t0 + at)
        }
        try await api.test { client async throws in
            let listed = try await client.call(.get, "/v1/users/bob/devices", token: admin)
            #expect(listed.status == 200, "\(listed.text)")
            let devices = try #require(try object(listed.text)["devices"] as? [[String: Any]])
            #expect(devices.map { $0["token"] as? String } == ["fcm-new", Self.apnsToken, "fcm-mid", "fcm-old"])
            let one = try await client.call(.get, "/v1/users/bob/devices?app=app1", token: admin)
            let app1 = try #require(try object(one.text)["devices"] as? [[String: Any]])
            #expect(app1.map { $0["token"] as? String } == ["fcm-new", "fcm-old"])
        }
    }

    /// The Mobile SDKs' own registration: 201 with an id, the same id again for the same token, the device in the
    /// token's app for the token's user, and the DELETE the SDKs send at logout removing only the caller's own.
    @Test func theSDKsRegistrationAndLogout() async throws {
        let api = InMemoryAPI()
        let alice = try api.userToken(user: "alice")
        let bob = try api.userToken(user: "bob")
        let admin = try api.key(role: .admin)
        let body =
            #"{"ConnectionToken":"\#(Self.apnsToken)","ServiceType":"Apple","ApplicationBundle":"com.acme.app","#
            + #""RsaPublicKey":"\#(TestDeviceKeys.rsa2048)","CipherName":"RSA_OAEP_SHA256"}"#
        try await api.test { client async throws in
            let created = try await client.call(.post, Self.sobject, token: alice, json: body)
            #expect(created.status == 201, "\(created.text)")
            let answer = try object(created.text)
            let id = try #require(answer["id"] as? String)
            #expect(id.count == 18)
            #expect(answer["success"] as? Bool == true)
            #expect((answer["errors"] as? [Any])?.isEmpty == true)
            // Registering the same token again is an update: the same id, one device.
            let again = try await client.call(.post, Self.sobject, token: alice, json: body)
            #expect(try object(again.text)["id"] as? String == id)
            #expect(try await api.devices.devices(org: "orgA", app: "app1", user: "alice").count == 1)
            let stored = try await api.devices.devices(org: "orgA", app: "app1", user: "alice").first
            #expect(stored?.platform == .ios && stored?.cipherName == "RSA_OAEP_SHA256")
            #expect(stored?.rsaPublicKey == TestDeviceKeys.rsa2048)

            // An API key has no user to register for; another user cannot remove alice's device.
            let byKey = try await client.call(.post, Self.sobject, token: admin, json: body)
            #expect(byKey.status == 403, "\(byKey.text)")
            let notHers = try await client.call(.delete, "\(Self.sobject)/\(id)", token: bob)
            #expect(notHers.status == 404)
            #expect(try errors(notHers.text).first?["errorCode"] as? String == "NOT_FOUND")
            #expect(try await client.call(.delete, "\(Self.sobject)/\(id)", token: alice).status == 204)
            #expect(try await client.call(.delete, "\(Self.sobject)/\(id)", token: alice).status == 404)
            #expect(try await api.devices.devices(org: "orgA", app: "app1", user: "alice").isEmpty)
        }
    }

    @Test func theSDKsRegistrationRefusesABadTokenAsSalesforceDoes() async throws {
        let api = InMemoryAPI()
        let alice = try api.userToken(user: "alice")
        try await api.test { client async throws in
            let bad = try await client.call(
                .post, Self.sobject, token: alice,
                json: #"{"ConnectionToken":"1234","ServiceType":"Apple","ApplicationBundle":"com.acme.app"}"#)
            #expect(bad.status == 400)
            let e = try #require(try errors(bad.text).first)
            #expect(e["fields"] as? [String] == ["ConnectionToken"])
            #expect((e["message"] as? String)?.contains("invalid device token length") == true, "\(bad.text)")
            // A method the resource does not take answers 405 in Salesforce's shape.
            #expect(try await client.call(.get, Self.sobject, token: alice).status == 405)
        }
        #expect(try await api.devices.devices(org: "orgA", app: "app1", user: "alice").isEmpty)
    }
}
