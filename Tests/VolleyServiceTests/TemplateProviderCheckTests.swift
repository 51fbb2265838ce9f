import Foundation
import Testing
import VolleyCore
import VolleyService
import VolleyTestTags

/// `PUT /v1/templates/{id}` and `volley templates put` check a template with the workers' own encoders
/// (`NotificationCheck.providers`), for each app the org may use: what a job naming it would be refused for is
/// refused, naming the field; names (`{{ first_name }}`) still pass.
@Suite(.tags(.unit)) struct TemplateProviderCheckTests {
    static func check() throws -> (NotificationCheck, [AppName]) {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("volley-tpl-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: dir) }
        try "k".write(to: dir.appendingPathComponent("k.p8"), atomically: true, encoding: .utf8)
        try "{}".write(to: dir.appendingPathComponent("sa.json"), atomically: true, encoding: .utf8)
        let c = try VolleyConfiguration.parse(
            yaml: """
                apps:
                  - name: A
                    orgs: ["00Dorg"]
                    apns: {keyFile: k.p8, keyId: K, teamId: T, topic: com.x}
                    fcm: {serviceAccountFile: sa.json}
                """, baseDirectory: dir)
        return (.providers(c.apps), c.apps.map(\.name))
    }

    static func template(_ json: String) throws -> NotificationTemplate {
        try StoredTemplate.check(notification: try JSONValue(parsing: json))
    }

    @Test(arguments: [
        (#"{"title":"Hi","fcm":[null,null]}"#, "fcm", Platform.android),
        (#"{"title":"Hi {{ first_name }}","ttl":2419201}"#, "ttl", Platform.ios),
        (#"{"title":"Hi","apns":"x"}"#, "apns", Platform.ios),
        (#"{"title":"Hi","collapseId":"\#(String(repeating: "c", count: 65))"}"#, "collapseId", Platform.ios),
    ])
    func whatAProviderRefusesIsRefused(json: String, field: String, platform: Platform) throws {
        let (check, apps) = try Self.check()
        let refusal = try #require(check.refusal(ofTemplate: try Self.template(json), apps: apps))
        #expect(refusal.error.field == field, "\(refusal.error)")
        #expect(refusal.platform == platform)
        #expect(refusal.app == "A")
    }

    @Test func aTemplateWithNamesPasses() throws {
        let (check, apps) = try Self.check()
        let json =
            #"{"title":"Hi {{ first_name | 'Friend' }}","body":"Order {{ message.custom_data.order }}","#
            + #""url":"{{ link }}","ttl":2419200,"fcm":{"data":{"k":"v"}}}"#
        #expect(check.refusal(ofTemplate: try Self.template(json), apps: apps) == nil)
    }
}
