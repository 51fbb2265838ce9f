// Personalized texts, per recipient: Volley's compiled renderer (`NotificationTemplate`) beside swift-mustache
// (hummingbird-project), the kept library, rendering the same title and body for the same users. Mustache has no
// `{{ name | 'Friend' }}`, so its template spells each fallback as a section and its inverse, and uses `{{{ }}}`
// so it does not HTML-escape a push text. The per-job work (compiling; Volley's binding of the job's custom data)
// is measured apart from the per-recipient render, which is what a campaign pays per device.
import Benchmark
import Foundation
import Mustache
import VolleyCore

let benchmarks: @Sendable () -> Void = {
    Benchmark.defaultConfiguration = .init(
        metrics: [.wallClock, .cpuTotal, .mallocCountTotal, .throughput],
        warmupIterations: 10,
        scalingFactor: .kilo,
        maxDuration: .seconds(2),
        maxIterations: 10_000
    )

    let title = "Hi {{ first_name | 'Friend' }}, your order has shipped"
    let body =
        "{{ first_name | 'Friend' }}, order {{ message.custom_data.order }} leaves {{ city | 'our warehouse' }} today "
        + "and arrives {{ message.custom_data.eta | 'soon' }}."
    let notification = Notification(
        title: title, body: body, sound: "default", data: ["recordId": .string("a0B5e000001AbCdEAF")])
    let customData: JSONValue = .object(["order": .string("A-1717"), "eta": .string("Friday")])

    let mustacheTitle =
        "Hi {{#first_name}}{{{first_name}}}{{/first_name}}{{^first_name}}Friend{{/first_name}}, your order has shipped"
    let mustacheBody =
        "{{#first_name}}{{{first_name}}}{{/first_name}}{{^first_name}}Friend{{/first_name}}, order "
        + "{{{message.custom_data.order}}} leaves {{#city}}{{{city}}}{{/city}}{{^city}}our warehouse{{/city}} today "
        + "and arrives {{#message.custom_data.eta}}{{{message.custom_data.eta}}}{{/message.custom_data.eta}}"
        + "{{^message.custom_data.eta}}soon{{/message.custom_data.eta}}."
    let mustacheCustomData: [String: Any] = ["order": "A-1717", "eta": "Friday"]

    // 1,000 users: most with a first name, some with a city, one in ten with nothing.
    let users: [[String: String]] = (0..<1000).map { i in
        if i % 10 == 0 { return [:] }
        var a = ["first_name": "User\(i)", "last_name": "Surname\(i)"]
        if i % 3 == 0 { a["city"] = "Lisbon" }
        return a
    }

    // MARK: per job

    Benchmark("compile + bind custom data (Volley, per job)") { benchmark in
        for _ in benchmark.scaledIterations {
            blackHole(try NotificationTemplate(notification).binding(customData: customData))
        }
    }

    Benchmark("compile (swift-mustache, per job)") { benchmark in
        for _ in benchmark.scaledIterations {
            blackHole(try MustacheTemplate(string: mustacheTitle))
            blackHole(try MustacheTemplate(string: mustacheBody))
        }
    }

    // MARK: per recipient: the notification with this user's title and body

    Benchmark("render title + body per user (Volley)") { benchmark in
        let template = try NotificationTemplate(notification).binding(customData: customData)
        var i = 0
        for _ in benchmark.scaledIterations {
            blackHole(template.render(attributes: users[i]))
            i = i == users.count - 1 ? 0 : i + 1
        }
    }

    Benchmark("render title + body per user (swift-mustache)") { benchmark in
        let t = try MustacheTemplate(string: mustacheTitle)
        let b = try MustacheTemplate(string: mustacheBody)
        var i = 0
        for _ in benchmark.scaledIterations {
            var context: [String: Any] = users[i]
            context["message"] = ["custom_data": mustacheCustomData]
            var n = notification
            n.title = t.render(context)
            n.body = b.render(context)
            blackHole(n)
            i = i == users.count - 1 ? 0 : i + 1
        }
    }
}
