import Foundation
import Testing
import VolleyCore
import VolleyTestTags

@Suite(.tags(.unit)) struct NotificationTemplateTests {
    typealias N = VolleyCore.Notification

    static func render(
        _ text: String, _ attributes: [String: String]? = nil, customData: JSONValue? = nil
    ) throws -> (String?, Int) {
        let t = try NotificationTemplate(N(title: text))
        let r = t.render(attributes: attributes, customData: customData)
        return (r.notification.title, r.missing)
    }

    static func error(_ n: N) -> TemplateError? {
        do {
            _ = try NotificationTemplate(n)
            return nil
        } catch { return error }
    }

    @Test(arguments: [
        ("Hi {{ first_name }}!", "Hi Ada!"),
        ("Hi {{first_name}}!", "Hi Ada!"),
        ("Hi {{ first_name | default: 'Friend' }}!", "Hi Ada!"),
        ("Hi {{ first_name | 'Friend' }}!", "Hi Ada!"),
        ("Hi {{ first_name | \"Friend\" }}!", "Hi Ada!"),
        ("{{ first_name }} {{ last_name }}", "Ada Lovelace"),
        ("{{ first_name }}{{ last_name }}", "AdaLovelace"),
        ("no names at all", "no names at all"),
    ])
    func eachSyntaxFormRendersTheUsersValue(text: String, expected: String) throws {
        let (out, missing) = try Self.render(text, ["first_name": "Ada", "last_name": "Lovelace"])
        #expect(out == expected)
        #expect(missing == 0)
    }

    @Test(arguments: [
        ("Hi {{ first_name | default: 'Friend' }}!", "Hi Friend!"),
        ("Hi {{ first_name | 'Friend' }}!", "Hi Friend!"),
        ("Hi {{ first_name | \"dear friend\" }}!", "Hi dear friend!"),
        ("Hi {{ first_name|'it''s' }}", nil),
        ("Hi {{ first_name | \"it's you\" }}", "Hi it's you"),
        ("Hi {{ first_name | '' }}!", "Hi !"),
    ])
    func aFallbackStandsInForAMissingValue(text: String, expected: String?) throws {
        guard let expected else {
            #expect(Self.error(N(title: text)) != nil)
            return
        }
        for attributes in [nil, [:], ["first_name": ""], ["other": "x"]] as [[String: String]?] {
            let (out, missing) = try Self.render(text, attributes)
            #expect(out == expected)
            #expect(missing == 0)
        }
    }

    @Test func aMissingNameWithoutFallbackRendersEmptyAndIsCounted() throws {
        let t = try NotificationTemplate(
            N(title: "Hi {{ first_name }}", body: "{{ city }}, {{ first_name }} and {{ pet | 'a cat' }}"))
        let r = t.render(attributes: ["other": "x"])
        #expect(r.notification.title == "Hi ")
        #expect(r.notification.body == ",  and a cat")
        #expect(r.missing == 3)
        let all = t.render(attributes: ["first_name": "Ada", "city": "London"])
        #expect(all.notification.body == "London, Ada and a cat")
        #expect(all.missing == 0)
    }

    @Test func customDataValuesAreStringsAsTheyAreAndOtherValuesAsTheirJSONText() throws {
        let data = try JSONValue(
            parsing: #"{"order":"A-17","total":12.50,"big":18446744073709551617,"paid":true,"none":null,"#
                + #""empty":"","nested":{"id":7},"list":[1,"x"]}"#)
        let cases: [(String, String, Int)] = [
            ("{{ message.custom_data.order }}", "A-17", 0),
            ("{{ message.custom_data.total }}", "12.50", 0),
            ("{{ message.custom_data.big }}", "18446744073709551617", 0),
            ("{{ message.custom_data.paid }}", "true", 0),
            ("{{ message.custom_data.nested.id }}", "7", 0),
            ("{{ message.custom_data.nested }}", #"{"id":7}"#, 0),
            ("{{ message.custom_data.list }}", #"[1,"x"]"#, 0),
            ("[{{ message.custom_data.none }}]", "[]", 1),
            ("[{{ message.custom_data.empty }}]", "[]", 1),
            ("[{{ message.custom_data.absent }}]", "[]", 1),
            ("{{ message.custom_data.absent | 'n/a' }}", "n/a", 0),
            ("{{ message.custom_data.order.deeper }}", "", 1),
        ]
        for (text, expected, misses) in cases {
            let (out, missing) = try Self.render(text, nil, customData: data)
            #expect(out == expected, "\(text)")
            #expect(missing == misses, "\(text)")
            // Bound once per job, the same text.
            let bound = try NotificationTemplate(N(title: text)).binding(customData: data)
            let r = bound.render(attributes: nil)
            #expect(r.notification.title == expected, "bound \(text)")
            #expect(r.missing == misses, "bound \(text)")
        }
    }

    @Test func everyTextFieldAndEveryLocalizedVariantIsRendered() throws {
        let n = N(
            title: "T {{ a }}", subtitle: "S {{ a }}", body: "B {{ a }}",
            localized: [
                "es": .init(title: "Hola {{ a | 'amigo' }}", subtitle: "s {{ b }}", body: "cuerpo"),
                "pt-BR": .init(body: "Olá {{ a }}"),
            ],
            sound: "{{ a }}", category: "{{ a }}", imageUrl: "https://img.example/{{ a }}.png",
            url: "app://u/{{ a }}")
        let t = try NotificationTemplate(n)
        #expect(t.isPersonal && t.usesAttributes && !t.usesCustomData)
        let r = t.render(attributes: ["a": "X", "b": "Y"]).notification
        #expect(r.title == "T X")
        #expect(r.subtitle == "S X")
        #expect(r.body == "B X")
        #expect(r.localized?["es"]?.title == "Hola X")
        #expect(r.localized?["es"]?.subtitle == "s Y")
        #expect(r.localized?["es"]?.body == "cuerpo")
        #expect(r.localized?["pt-BR"]?.body == "Olá X")
        #expect(r.imageUrl == "https://img.example/X.png")
        #expect(r.url == "app://u/X")
        // Other fields are sent as written: names there are not rendered.
        #expect(r.sound == "{{ a }}")
        #expect(r.category == "{{ a }}")
    }

    @Test func aNotificationWithoutNamesIsNotPersonal() throws {
        let n = N(title: "Sale", body: "50% off {today}", localized: ["es": .init(title: "Oferta")], url: "x://y")
        let t = try NotificationTemplate(n)
        #expect(!t.isPersonal && !t.usesAttributes && !t.usesCustomData)
        let r = t.render(attributes: ["a": "b"])
        #expect(r.notification == n)
        #expect(r.missing == 0)
    }

    @Test func namesOnlyOfCustomDataAreSharedOnceBound() throws {
        let t = try NotificationTemplate(
            N(title: "Order {{ message.custom_data.order }}", body: "{{ message.custom_data.eta | 'soon' }}"))
        #expect(t.isPersonal && t.usesCustomData && !t.usesAttributes)
        let bound = t.binding(customData: .object(["order": .string("A-17")]))
        #expect(!bound.isPersonal)
        #expect(bound.notification.title == "Order A-17")
        #expect(bound.notification.body == "soon")
        // Mixed: custom data is put in once, attributes stay per person.
        let mixed = try NotificationTemplate(N(title: "{{ first_name }}, order {{ message.custom_data.order }}"))
            .binding(customData: .object(["order": .string("A-17")]))
        #expect(mixed.isPersonal && mixed.usesAttributes && !mixed.usesCustomData)
        #expect(mixed.render(attributes: ["first_name": "Ada"]).notification.title == "Ada, order A-17")
    }

    @Test func aBoundMissingCustomDataNameIsCountedByEveryRender() throws {
        let t = try NotificationTemplate(N(title: "{{ first_name | 'Friend' }} {{ message.custom_data.code }}"))
            .binding(customData: nil)
        let r = t.render(attributes: nil)
        #expect(r.notification.title == "Friend ")
        #expect(r.missing == 1)
    }

    @Test(arguments: [
        ["first_name": "{{ evil }}"],
        ["first_name": "{"],
        ["first_name": "{{{{"],
        ["first_name": "}}{{"],
    ])
    func aRenderedTextNeverHoldsAnOpeningPair(attributes: [String: String]) throws {
        for text in [
            "{{ first_name }}", "{{ first_name }}{x", "x{ {{ first_name }}", "a {{ first_name }}{{ first_name }}",
        ] {
            let (out, _) = try Self.render(text, attributes)
            #expect(out?.contains("{{") == false, "\(text) with \(attributes): \(out ?? "nil")")
        }
        let bound = try NotificationTemplate(N(title: "{ {{ message.custom_data.x }}{"))
            .binding(customData: .object(["x": .string(attributes["first_name"] ?? "")]))
        #expect(bound.notification.title?.contains("{{") == false)
    }

    @Test(arguments: [
        ("Hi {{ first_name", "notification.title", "not closed"),
        ("Hi {{ }}", "notification.title", "empty name"),
        ("Hi {{}}", "notification.title", "empty name"),
        ("Hi {{ first name }}", "notification.title", "after the name"),
        ("Hi {{ first_name | upcase }}", "notification.title", "unknown filter 'upcase'"),
        ("Hi {{ first_name | Friend }}", "notification.title", "unknown filter 'Friend'"),
        ("Hi {{ first_name | 'Friend }}", "notification.title", "not closed"),
        ("Hi {{ first_name | default 'Friend' }}", "notification.title", "'default' needs"),
        ("Hi {{ first_name | 'a' 'b' }}", "notification.title", "nothing may follow"),
        ("Hi {{ first_name | }}", "notification.title", "quoted text"),
        ("Hi {{{ first_name }}}", "notification.title", "'{{{' is not supported"),
        ("Hi {{ user.first_name }}", "notification.title", "not a name"),
        ("Hi {{ message.custom_data }}", "notification.title", "not a name"),
        ("Hi {{ message.custom_data..x }}", "notification.title", "empty part"),
        ("Hi {{ a {{ b }}", "notification.title", "inside a name"),
        ("Hi {{ é }}", "notification.title", "letters, digits"),
    ])
    func badSyntaxIsAnErrorNamingTheField(text: String, field: String, message: String) throws {
        let e = try #require(Self.error(N(title: text)))
        #expect(e.field == field)
        #expect(e.message.contains(message), "\(e)")
        #expect(e.message.contains("at character 3"), "\(e)")
        #expect(e.jobRejection.reason == .invalidNotification)
    }

    @Test func errorsNameTheFieldTheyAreIn() throws {
        #expect(Self.error(N(body: "{{ x"))?.field == "notification.body")
        #expect(Self.error(N(subtitle: "{{ x"))?.field == "notification.subtitle")
        #expect(Self.error(N(url: "{{ x"))?.field == "notification.url")
        #expect(Self.error(N(imageUrl: "{{ x"))?.field == "notification.imageUrl")
        #expect(Self.error(N(localized: ["es": .init(body: "{{")]))?.field == "notification.localized.es.body")
        #expect(
            Self.error(N(localized: ["es": .init(title: "ok", subtitle: "{{ x")]))?.field
                == "notification.localized.es.subtitle")
        let e = try #require(Self.error(N(title: "¡Olá {{ x")))
        #expect(e.message.contains("at character 5"), "\(e)")
        // A template given under another name (a stored template's path) names that.
        do {
            _ = try NotificationTemplate(N(title: "{{"), field: "template.notification")
            Issue.record("compiled")
        } catch { #expect(error.field == "template.notification.title") }
    }

    @Test func aStrayClosingPairOrSingleBracesAreText() throws {
        let (out, missing) = try Self.render("a }} b { c } {x} {{ n }}", ["n": "N"])
        #expect(out == "a }} b { c } {x} N")
        #expect(missing == 0)
    }

    /// Property: for random texts of literals and names, a render equals the text with each name replaced by its
    /// value, else its fallback, else nothing; the count of missing names is exact; no `{{` is left.
    @Test func randomTemplatesRenderAsTheirParts() throws {
        var rng = SeededRandom(seed: 0x5eed_30)
        let pieces = ["Hi ", "! ", "{", "}", " }} ", "é", "📣", "a{b}", "{x}"]
        let names = ["first_name", "city", "n-1", "message.custom_data.k", "message.custom_data.o.p"]
        let values = ["Ada", "", "{", "{{", "}}", "x}{y", "Zoë"]
        for _ in 0..<500 {
            var text = ""
            var expected = ""
            var misses = 0
            var attributes: [String: String] = [:]
            var custom: [String: JSONValue] = [:]
            for name in names where rng.next() % 2 == 0 {
                let v = values[Int(rng.next() % UInt64(values.count))]
                switch name {
                case "message.custom_data.k": custom["k"] = .string(v)
                case "message.custom_data.o.p": custom["o"] = .object(["p": .string(v)])
                default: attributes[name] = v
                }
            }
            func value(_ name: String) -> String? {
                let v: String?
                switch name {
                case "message.custom_data.k": v = custom["k"]?.stringValue
                case "message.custom_data.o.p": v = custom["o"]?["p"]?.stringValue
                default: v = attributes[name]
                }
                return v?.isEmpty == false ? v : nil
            }
            for _ in 0..<(1 + Int(rng.next() % 6)) {
                if rng.next() % 2 == 0 {
                    let p = pieces[Int(rng.next() % UInt64(pieces.count))]
                    // A literal brace next to a name's braces would change the syntax; keep them apart.
                    if p.hasSuffix("{") || p.hasPrefix("{") {
                        text += " "
                        expected += " "
                    }
                    text += p
                    expected += p
                    if p.hasSuffix("{") {
                        text += " "
                        expected += " "
                    }
                } else {
                    let name = names[Int(rng.next() % UInt64(names.count))]
                    let fallback: String? = rng.next() % 3 == 0 ? "F\(rng.next() % 10)" : nil
                    let form = rng.next() % 3
                    let tag =
                        fallback.map { f in form == 0 ? " | default: '\(f)'" : form == 1 ? "|\"\(f)\"" : " | '\(f)'" }
                        ?? ""
                    text += "{{ \(name)\(tag) }}"
                    if let v = value(name) ?? fallback { expected += v } else { misses += 1 }
                }
            }
            let t = try NotificationTemplate(N(body: text))
            let r = t.render(attributes: attributes, customData: .object(custom))
            let bound = t.binding(customData: .object(custom)).render(attributes: attributes)
            var unbraced = expected
            while unbraced.contains("{{") { unbraced = unbraced.replacingOccurrences(of: "{{", with: "{ {") }
            #expect(r.notification.body == unbraced, "\(text)")
            #expect(r.missing == misses, "\(text)")
            #expect(bound.notification.body == unbraced, "bound \(text)")
            #expect(bound.missing == misses, "bound \(text)")
            #expect(r.notification.body?.contains("{{") == false)
        }
    }
}

@Suite(.tags(.unit)) struct TemplateContentTests {
    struct Reader: TemplateReader {
        var templates: [String: String]
        func notification(org: OrgID, templateID: String) throws -> JSONValue? {
            guard org == "o1", let text = templates[templateID] else { return nil }
            return try JSONValue(parsing: text)
        }
    }
    static let reader = Reader(templates: [
        "hi": #"{"title":"Hi {{ first_name | 'Friend' }}","body":"Order {{ message.custom_data.order }}"}"#,
        "plain": #"{"title":"Sale","body":"Order {{ message.custom_data.order | 'none' }}"}"#,
        "broken": #"{"title":"Hi {{ first_name"}"#,
        "badType": #"{"title":7}"#,
    ])
    static func job(_ template: String, org: OrgID = "o1") -> PushJob {
        var job = PushJob(id: "j", org: org, app: "a", recipients: ["u"], notification: .init())
        job.templateId = template
        job.customData = .object(["order": .string("A-17")])
        return job
    }
    static let device = Device(platform: .ios, token: DeviceToken("ab"), user: UserID("u"))

    @Test func aTemplatedJobRendersEachRecipientsNamesAndSharesTheRest() throws {
        let plan = try TemplateContent.plan(for: Self.job("hi"), reader: Self.reader)
        // The shared notification holds no name: fallbacks, custom data in place.
        #expect(plan.notification.title == "Hi Friend")
        #expect(plan.notification.body == "Order A-17")
        let content = try #require(plan.content)
        #expect(content.needs == RecipientNeeds(attributes: true))
        let ada = try content.payload(for: Self.device, recipient: RecipientContext(attributes: ["first_name": "Ada"]))
        #expect(ada == .notification(.init(title: "Hi Ada", body: "Order A-17")))
        let nobody = try content.payload(for: Self.device, recipient: RecipientContext())
        #expect(nobody == .notification(.init(title: "Hi Friend", body: "Order A-17")))
    }

    @Test func aTemplateWithoutUserNamesTakesTheSharedPath() throws {
        let plan = try TemplateContent.plan(for: Self.job("plain"), reader: Self.reader)
        #expect(plan.content == nil)
        #expect(plan.notification.body == "Order A-17")
    }

    @Test func anUnknownOrBrokenTemplateRefusesTheJob() throws {
        for (id, reason) in [
            ("nope", JobRejection.Reason.invalidJob), ("broken", .invalidNotification),
            ("badType", .invalidNotification),
        ] {
            do {
                _ = try TemplateContent.plan(for: Self.job(id), reader: Self.reader)
                Issue.record("\(id) planned")
            } catch let r as JobRejection {
                #expect(r.reason == reason, "\(id): \(r)")
            }
        }
        // Another org's job does not find o1's template.
        #expect(throws: JobRejection.self) {
            try TemplateContent.plan(for: Self.job("hi", org: "o2"), reader: Self.reader)
        }
    }
}
