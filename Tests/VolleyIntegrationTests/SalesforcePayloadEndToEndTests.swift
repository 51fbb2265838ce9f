import Foundation
import Logging
import Testing
import VolleyConnect
import VolleyCore
import VolleyEngine
import VolleyMock
import VolleyService
import VolleyStore
import VolleyTestDoubles
import VolleyTestSupport
import VolleyTestTags

/// A custom notification through the real engine, the real providers and the real mock over TLS, to users whose iOS
/// and Android devices registered an encryption key (OAEP and legacy) or none: every push carries the
/// Notification Builder keys, the badge is each user's unseen count, `nid` opens the user's inbox entry, and the
/// SDKs' decryption (an independent `openssl` implementation, `SalesforceSDKDecryptor`) recovers the content.
@Suite(.serialized, .tags(.integration)) struct SalesforcePayloadEndToEndTests {
    static func hexToken(_ n: Int) -> String { "beef" + String(format: "%060x", n) }

    @Test func aCustomNotificationReachesEachDeviceAsTheSDKsReadIt() async throws {
        let w = try MockWorld(mockConfig: #"{"capturePushes": 100}"#)
        defer { w.stop() }
        let oaepIOS = try SalesforceSDKDecryptor.make()
        let legacyIOS = try SalesforceSDKDecryptor.make()
        let oaepAndroid = try SalesforceSDKDecryptor.make()
        let legacyAndroid = try SalesforceSDKDecryptor.make()
        defer { for sdk in [oaepIOS, legacyIOS, oaepAndroid, legacyAndroid] { sdk.remove() } }

        // The devices: a key and its cipher (nil: PKCS #1 v1.5, an SDK before OAEP), or no key.
        typealias Registered = (
            user: String, platform: Platform, token: String, sdk: SalesforceSDKDecryptor?, cipher: String?
        )
        let oaep = "RSA_OAEP_SHA256"
        let devices: [Registered] = [
            ("user0", .ios, Self.hexToken(1), nil, nil), ("user0", .android, "fcm-user0-oaep", oaepAndroid, oaep),
            ("user1", .ios, Self.hexToken(2), oaepIOS, oaep), ("user2", .android, "fcm-user2-clear", nil, nil),
            ("user2", .ios, Self.hexToken(3), legacyIOS, nil),
            ("user3", .android, "fcm-user3-legacy", legacyAndroid, nil),
        ]
        try w.h.admin.register(
            devices.map { d in
                DeviceImportRecord(
                    org: "org1", app: "app1", user: UserID(d.user), platform: d.platform, token: DeviceToken(d.token),
                    rsaPublicKey: d.sdk?.publicKeyBase64, cipherName: d.cipher)
            })
        let directory = RedisDirectory(client: w.redis.client(name: "dir"))
        try directory.importRecords(
            (0..<4).map { DirectoryRecord(org: "org1", kind: .user, id: RecipientID("user\($0)")) })
        let types = RedisNotificationTypeStore(client: w.redis.client(name: "types"))
        try types.setType(org: "org1", NotificationType(id: "0MLdeal", name: "Deal won"))
        try types.setSetting(org: "org1", app: "app1", typeID: "0MLdeal", enabled: true, pushEnabled: nil)
        let inbox = RedisInboxStore(client: w.redis.client(name: "inbox"))
        // user0 has an unseen notification already: its badge is 2, the others' 1.
        try inbox.deliver(
            org: "org1",
            content: InboxContent(
                id: "earlier", type: "0MLdeal", title: "Earlier", body: "", target: nil,
                createdAt: Date(timeIntervalSinceNow: -60)),
            to: ["user0"])

        let apps = try w.apps()
        defer { apps.shutdown() }
        let worker = PipelineWorker(
            configuration: WorkerConfiguration(consumer: "sf", inFlight: 16, blockMillis: 50),
            backend: RedisPipelineBackend(endpoint: w.redis.endpoint, consumer: "sf"), apps: apps,
            resolver: DirectoryRecipientResolver(directory: directory, inbox: inbox, types: types),
            personalContent: NotificationContentPlanner())
        try worker.start()
        defer { worker.drain(deadline: 2) }

        try w.h.producer.enqueueRaw(fields: [
            "job": #"{"id":"sf-1","org":"org1","app":"app1","recipients":["user0","user1","user2","user3"],"#
                + #""notification":{"title":"Deal won","body":"Acme signed","type":"0MLdeal","targetId":"006X"}}"#
        ])
        try await waitUntil("the report of sf-1", timeout: .seconds(30)) { (try? w.h.report(for: "sf-1")) != nil }
        let report = try #require(try w.h.report(for: "sf-1"))
        #expect(report.accepted == devices.count, "\(report)")
        #expect(report.personalContent?.encrypted == 4)

        let pushes = Dictionary(
            w.mock.capturedPushes().map { ($0.token, $0) }, uniquingKeysWith: { _, last in last })
        #expect(Set(pushes.keys) == Set(devices.map(\.token)))
        for d in devices {
            let push = try #require(pushes[d.token], "\(d.token) got nothing")
            let body = try #require(push.json, "\(d.token): not JSON")
            let unseen = try inbox.status(org: "org1", user: UserID(d.user)).unseenCount
            #expect(unseen == (d.user == "user0" ? 2 : 1))
            // What the SDK hands the app: the clear keys, or the decrypted content.
            var keys: [String: JSONValue]
            switch (d.platform, d.sdk) {
            case (.ios, nil):
                keys = try #require(body.objectValue)
                #expect(body["aps"]?["alert"] == .object(["title": .string(""), "body": .string("Deal won")]))
                #expect(body["aps"]?["badge"] == .number(JSONNumber(unseen)))
                #expect(body["aps"]?["sound"] == .string("default"))
            case (.ios, let sdk?):
                #expect(body["encrypted"] == .bool(true))
                #expect(body["aps"]?["mutable-content"] == .number(1))
                #expect(body["aps"]?["alert"] == .object(["title": .string(""), "body": .string("Deal won")]))
                #expect(body["aps"]?["badge"] == .number(JSONNumber(unseen)))
                let text = String(decoding: push.body, as: UTF8.self)
                #expect(!text.contains("006X") && !text.contains("user") && !text.contains("0MLdeal"))
                let secret = try #require(body["secret"]?.stringValue)
                let encrypted = try #require(body["content"]?.stringValue)
                let (path, content) = try #require(try sdk.decrypt(secret: secret, content: encrypted, platform: .ios))
                #expect(path == (d.cipher == nil ? .pkcs1 : .oaep))
                keys = content
            case (.android, nil):
                let data = try #require(body["message"]?["data"]?.objectValue)
                #expect(body["message"]?["notification"] == nil)
                #expect(data["badge"] == .string(String(unseen)) && data["alert"] == .string("Deal won"))
                keys = data
            case (.android, let sdk?):
                let data = try #require(body["message"]?["data"]?.objectValue)
                #expect(body["message"]?["notification"] == nil)
                #expect(Set(data.keys) == ["encrypted", "secret", "content"])
                let secret = try #require(data["secret"]?.stringValue)
                let encrypted = try #require(data["content"]?.stringValue)
                let (path, content) = try #require(
                    try sdk.decrypt(secret: secret, content: encrypted, platform: .android))
                #expect(path == (d.cipher == nil ? .pkcs1 : .oaep))
                #expect(content["badge"] == .number(JSONNumber(unseen)) && content["alert"] == .string("Deal won"))
                keys = content
            }
            // The guide's custom keys, as strings on clear Android and as JSON elsewhere.
            func text(_ k: String) -> String? {
                switch keys[k] {
                case .string(let s)?: s
                case .number(let n)?: n.text
                default: nil
                }
            }
            #expect(text("oid") == "org1" && text("uid") == d.user && text("nid") == "sf-1", "\(d.token)")
            #expect(text("type") == "-1" && text("sid") == "006X" && text("notifType") == "0MLdeal")
            #expect(text("alertTitle") == "" && text("alertBody") == "Deal won")
            // `nid` opens the user's own inbox entry.
            let entries = try inbox.list(org: "org1", user: UserID(d.user), size: 10, before: nil)
            #expect(entries.first?.id == text("nid") && entries.first?.title == "Deal won")
        }
    }

    /// A templated job through the real engine to the mock: each user's own name from the directory's attributes,
    /// the fallback for a user without one, the job's custom data, and never a `{{`; the same template as a custom
    /// notification carries the rendered title in the Salesforce payload.
    @Test func aTemplatedJobRendersEachUsersOwnName() async throws {
        let w = try MockWorld(mockConfig: #"{"capturePushes": 100}"#)
        defer { w.stop() }
        let tokens = ["ada": Self.hexToken(11), "bob": Self.hexToken(12), "cy": Self.hexToken(13)]
        try w.h.admin.register(
            tokens.map {
                DeviceImportRecord(
                    org: "org1", app: "app1", user: UserID($0.key), platform: .ios,
                    token: DeviceToken($0.value))
            }
                + [
                    DeviceImportRecord(
                        org: "org1", app: "app1", user: "ada", platform: .android,
                        token: DeviceToken("fcm-ada-template"))
                ])
        let directory = RedisDirectory(client: w.redis.client(name: "dir"))
        try directory.importRecords([
            DirectoryRecord(org: "org1", kind: .user, id: "ada", attributes: ["first_name": "Ada"]),
            DirectoryRecord(org: "org1", kind: .user, id: "bob", attributes: ["last_name": "Builder"]),
            DirectoryRecord(org: "org1", kind: .user, id: "cy"),
        ])
        let types = RedisNotificationTypeStore(client: w.redis.client(name: "types"))
        try types.setType(org: "org1", NotificationType(id: "0MLdeal", name: "Deal won"))
        try types.setSetting(org: "org1", app: "app1", typeID: "0MLdeal", enabled: true, pushEnabled: nil)
        let templates = RedisTemplateStore(client: w.redis.client(name: "templates"))
        _ = try templates.put(
            org: "org1", id: "welcome",
            notification: try JSONValue(
                parsing: #"{"title":"Hi {{ first_name | 'Friend' }}","body":"Order {{ message.custom_data.order }}"}"#),
            now: Date(), maxCount: 10)
        _ = try templates.put(
            org: "org1", id: "deal",
            notification: try JSONValue(parsing: #"{"title":"{{ first_name | 'Someone' }} won","type":"0MLdeal"}"#),
            now: Date(), maxCount: 10)
        let inbox = RedisInboxStore(client: w.redis.client(name: "inbox"))
        let apps = try w.apps()
        defer { apps.shutdown() }
        let worker = PipelineWorker(
            configuration: WorkerConfiguration(consumer: "tpl", inFlight: 16, blockMillis: 50),
            backend: RedisPipelineBackend(endpoint: w.redis.endpoint, consumer: "tpl"), apps: apps,
            resolver: DirectoryRecipientResolver(
                directory: directory, inbox: inbox, types: types, attributes: directory),
            personalContent: NotificationContentPlanner(templates: templates))
        try worker.start()
        defer { worker.drain(deadline: 2) }

        try w.h.producer.enqueueRaw(fields: [
            "job": #"{"id":"tpl-1","org":"org1","app":"app1","recipients":["ada","bob","cy"],"templateId":"welcome","#
                + #""customData":{"order":"A-17"}}"#
        ])
        try await waitUntil("the report of tpl-1", timeout: .seconds(30)) { (try? w.h.report(for: "tpl-1")) != nil }
        let report = try #require(try w.h.report(for: "tpl-1"))
        #expect(report.accepted == 4, "\(report)")
        let pushes = Dictionary(w.mock.capturedPushes().map { ($0.token, $0) }, uniquingKeysWith: { _, last in last })
        for push in pushes.values {
            #expect(!String(decoding: push.body, as: UTF8.self).contains("{{"), "\(push.token)")
        }
        func alert(_ token: String) -> JSONValue? { pushes[token]?.json?["aps"]?["alert"] }
        #expect(alert(tokens["ada"]!)?["title"] == .string("Hi Ada"))
        #expect(alert(tokens["ada"]!)?["body"] == .string("Order A-17"))
        #expect(alert(tokens["bob"]!)?["title"] == .string("Hi Friend"))
        #expect(alert(tokens["cy"]!)?["title"] == .string("Hi Friend"))
        #expect(pushes["fcm-ada-template"]?.json?["message"]?["notification"]?["title"] == .string("Hi Ada"))
        // The inbox keeps the render without names: the fallbacks.
        #expect(try inbox.list(org: "org1", user: "ada", size: 1, before: nil).first?.title == "Hi Friend")

        // A templated custom notification: the Salesforce payload with each user's own title.
        w.mock.resetStats()
        try w.h.producer.enqueueRaw(fields: [
            "job": #"{"id":"tpl-2","org":"org1","app":"app1","recipients":["ada","cy"],"templateId":"deal"}"#
        ])
        try await waitUntil("the report of tpl-2", timeout: .seconds(30)) { (try? w.h.report(for: "tpl-2")) != nil }
        let deal = Dictionary(w.mock.capturedPushes().map { ($0.token, $0) }, uniquingKeysWith: { _, last in last })
        #expect(deal[tokens["ada"]!]?.json?["alertBody"] == .string("Ada won"))
        #expect(deal[tokens["ada"]!]?.json?["nid"] == .string("tpl-2"))
        #expect(deal[tokens["cy"]!]?.json?["alertBody"] == .string("Someone won"))
        #expect(deal["fcm-ada-template"]?.json?["message"]?["data"]?["alert"] == .string("Ada won"))
    }
}
