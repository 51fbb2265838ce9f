import Foundation
import Testing
import VolleyCore
import VolleyTestDoubles
import VolleyTestTags

@testable import VolleyConnect

/// The Mobile SDKs' registration body, as each SDK writes it, read into a device; every refusal names its field.
@Suite(.tags(.unit)) struct MobilePushServiceDeviceTests {
    static let apnsToken = String(repeating: "9f", count: 32)

    private func decode(_ json: String) throws(SObjectError) -> MobilePushServiceDevices.Registration {
        try MobilePushServiceDevices.decode(Data(json.utf8))
    }

    /// The iOS SDK: hex token, `Apple`, the bundle id, the key in 64-character lines, and always `CipherName`.
    @Test func theIOSSDKsBodyIsAnIOSDeviceWithItsKey() throws {
        let key = TestDeviceKeys.rsa2048Lines.replacingOccurrences(of: "\n", with: "\\n")
        let r = try decode(
            #"{"ConnectionToken":"\#(Self.apnsToken)","ServiceType":"Apple","ApplicationBundle":"com.acme.app","#
                + #""NetworkId":"0DBxx0000000001","RsaPublicKey":"\#(key)","CipherName":"RSA_OAEP_SHA256"}"#)
        #expect(r.platform == .ios && r.token.rawValue == Self.apnsToken)
        #expect(r.key == DeviceKeyMaterial(rsaPublicKey: TestDeviceKeys.rsa2048, cipherName: "RSA_OAEP_SHA256"))
        // Without a key (the keychain could not make one), `CipherName` alone is dropped.
        let keyless = try decode(
            #"{"ConnectionToken":"\#(Self.apnsToken)","ServiceType":"Apple","ApplicationBundle":"com.acme.app","#
                + #""CipherName":"RSA_OAEP_SHA256"}"#)
        #expect(keyless.key == nil)
    }

    /// The Android SDK: FCM token, `androidGcm`, the package name, a key and no `CipherName` (PKCS #1 v1.5).
    @Test func theAndroidSDKsBodyIsAnAndroidDevice() throws {
        let r = try decode(
            #"{"ConnectionToken":"fcm:APA91b_x-1","ServiceType":"androidGcm","ApplicationBundle":"com.acme.app","#
                + #""RsaPublicKey":"\#(TestDeviceKeys.rsa2048)"}"#)
        #expect(r.platform == .android && r.token.rawValue == "fcm:APA91b_x-1")
        #expect(r.key == DeviceKeyMaterial(rsaPublicKey: TestDeviceKeys.rsa2048, cipherName: nil))
    }

    @Test(arguments: [
        (#"{"ServiceType":"Apple","ApplicationBundle":"b"}"#, "REQUIRED_FIELD_MISSING", ["ConnectionToken"]),
        (
            #"{"ConnectionToken":"","ServiceType":null}"#, "REQUIRED_FIELD_MISSING",
            ["ConnectionToken", "ServiceType", "ApplicationBundle"]
        ),
        (
            #"{"ConnectionToken":"t","ServiceType":"Windows","ApplicationBundle":"b"}"#,
            "INVALID_OR_NULL_FOR_RESTRICTED_PICKLIST", ["ServiceType"]
        ),
        (
            #"{"ConnectionToken":"abc","ServiceType":"Apple","ApplicationBundle":"b"}"#, "FIELD_INTEGRITY_EXCEPTION",
            ["ConnectionToken"]
        ),
        (
            #"{"ConnectionToken":"a b","ServiceType":"androidGcm","ApplicationBundle":"b"}"#,
            "FIELD_INTEGRITY_EXCEPTION", ["ConnectionToken"]
        ),
        (
            #"{"ConnectionToken":"t","ServiceType":"androidGcm","ApplicationBundle":"b","RsaPublicKey":"%%"}"#,
            "FIELD_INTEGRITY_EXCEPTION", ["RsaPublicKey"]
        ),
        (
            #"{"ConnectionToken":"t","ServiceType":"androidGcm","ApplicationBundle":"b","CipherName":"RSA_PKCS1"}"#,
            "FIELD_INTEGRITY_EXCEPTION", ["CipherName"]
        ),
        (
            #"{"ConnectionToken":"t","ServiceType":"androidGcm","ApplicationBundle":"b","#
                + #""RsaPublicKey":"\#(TestDeviceKeys.rsa2048)","CipherName":""}"#,
            "FIELD_INTEGRITY_EXCEPTION", ["CipherName"]
        ),
        (
            #"{"ConnectionToken":"t","ServiceType":"androidGcm","ApplicationBundle":"b","Colour":"red"}"#,
            "INVALID_FIELD", ["Colour"]
        ),
        (
            #"{"ConnectionToken":7,"ServiceType":"androidGcm","ApplicationBundle":"b"}"#, "JSON_PARSER_ERROR",
            ["ConnectionToken"]
        ),
        ("[1]", "JSON_PARSER_ERROR", []),
        ("", "JSON_PARSER_ERROR", []),
    ])
    func refusalsNameTheField(json: String, code: String, fields: [String]) {
        do {
            _ = try decode(json)
            Issue.record("\(json) was taken")
        } catch {
            #expect(error.status == 400)
            #expect(error.errorCode == code, "\(error)")
            #expect(error.fields == fields, "\(error)")
            if let first = fields.first, code == "FIELD_INTEGRITY_EXCEPTION" {
                #expect(error.message.hasPrefix("\(first): "), "\(error.message)")
            }
        }
    }

    @Test func anErrorIsSalesforcesSObjectErrorArray() throws {
        let response = SObjectError(400, "INVALID_FIELD", "No such column", fields: ["X"]).response
        let body = try #require(try JSONSerialization.jsonObject(with: response.body) as? [[String: Any]])
        #expect(body.count == 1)
        #expect(body[0]["errorCode"] as? String == "INVALID_FIELD")
        #expect(body[0]["message"] as? String == "No such column")
        #expect(body[0]["fields"] as? [String] == ["X"])
    }

    /// 18 characters, Salesforce's case-safe suffix, the same for the same device and different for any other.
    @Test func theIDIsStableAndCaseSafe() {
        let id = MobilePushServiceDevices.id(org: "o", app: "a", platform: .ios, token: DeviceToken(Self.apnsToken))
        #expect(id.count == 18 && id.hasPrefix("0Vd"))
        #expect(
            id == MobilePushServiceDevices.id(org: "o", app: "a", platform: .ios, token: DeviceToken(Self.apnsToken)))
        let others = [
            MobilePushServiceDevices.id(org: "o2", app: "a", platform: .ios, token: DeviceToken(Self.apnsToken)),
            MobilePushServiceDevices.id(org: "o", app: "a2", platform: .ios, token: DeviceToken(Self.apnsToken)),
            MobilePushServiceDevices.id(org: "o", app: "a", platform: .android, token: DeviceToken(Self.apnsToken)),
        ]
        #expect(!others.contains(id))
        // Salesforce's own example: 001A0000006Vm9r → 001A0000006Vm9rIAC.
        #expect(MobilePushServiceDevices.caseSafeSuffix(Array("001A0000006Vm9r".utf8)) == Array("IAC".utf8))
        #expect(MobilePushServiceDevices.caseSafeSuffix(Array(id.utf8.prefix(15))) == Array(id.utf8.suffix(3)))
    }
}
