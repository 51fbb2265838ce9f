import Foundation
import VolleyCore

/// The New campaign form as a job body for `acceptJob`: the page checks nothing the API would not; its fields map
/// onto the job's keys, and a problem's field maps back onto the form's input (`field(for:)`).
enum ConsoleJobForm {
    /// `previewFor`: the user a preview renders for, who is the audience when the form names none yet.
    static func job(from f: ConsoleForm, previewFor: String? = nil) throws -> String {
        var job: [String: JSONValue] = [:]
        guard let app = f.text("app") else { throw APIProblem.badRequest("app", "choose the app to send through") }
        job["app"] = .string(app)
        if let id = f.text("jobId") { job["id"] = .string(id) }
        var recipients: [JSONValue] = []
        if f.checked("everyone") { recipients.append(.object(["all": .bool(true)])) }
        if let segment = f.text("segment") { recipients.append(.object(["segment": .string(segment)])) }
        for user in (f["users"] ?? "").split(whereSeparator: { $0 == "," || $0.isWhitespace }) {
            recipients.append(.string(String(user)))
        }
        if recipients.isEmpty, let previewFor { recipients.append(.string(previewFor)) }
        guard !recipients.isEmpty else {
            throw APIProblem.badRequest("recipients", "choose an audience: user ids, a segment or everyone")
        }
        job["recipients"] = .array(recipients)
        if let segment = f.text("excludeSegment") {
            job["exclude"] = .array([.object(["segment": .string(segment)])])
        }
        var notification: [String: JSONValue] = [:]
        if let title = f.text("jobTitle") { notification["title"] = .string(title) }
        if let body = f.text("body") { notification["body"] = .string(body) }
        if let data = f.text("data") {
            guard case .object? = try? JSONValue(parsing: Data(data.utf8)) else {
                throw APIProblem.badRequest(
                    "notification.data", "must be a JSON object, such as {\"recordId\": \"42\"}")
            }
            // Parsed again where the job is read: the text goes into the body as it was typed, numbers and all.
            notification["data"] = try? JSONValue(parsing: Data(data.utf8))
        }
        if let template = f.text("templateId") { job["templateId"] = .string(template) }
        if !notification.isEmpty { job["notification"] = .object(notification) }
        if job["notification"] == nil && job["templateId"] == nil {
            throw APIProblem.badRequest("notification.title", "write a title and body, or choose a template")
        }
        if let sendAt = f.text("sendAt") { job["sendAt"] = .string(sendAt) }
        if let local = f.text("localTime") { job["deliverAtLocalTime"] = .string(local) }
        if let throttle = f.text("throttle") {
            guard let n = Int(throttle), n > 0 else {
                throw APIProblem.badRequest("throttlePerMinute", "a whole number of pushes per minute, 1 or more")
            }
            job["throttlePerMinute"] = .number(JSONNumber(n))
        }
        if f.checked("bypassCap") { job["enableFrequencyCap"] = .bool(false) }
        return JSONValue.object(job).jsonText
    }

    /// The form input a problem's field belongs to.
    static func input(for field: String) -> String {
        let top = String(field.prefix { $0 != "." && $0 != "[" })
        switch top {
        case "app", "templateId", "sendAt": return top
        case "recipients": return "audience"
        case "exclude": return "excludeSegment"
        case "deliverAtLocalTime": return "localTime"
        case "throttlePerMinute": return "throttle"
        case "id", "Idempotency-Key": return "jobId"
        case "previewUser": return "previewUser"
        case "notification":
            if field.hasPrefix("notification.title") { return "jobTitle" }
            if field.hasPrefix("notification.data") { return "data" }
            return "body"
        default: return "body"
        }
    }
}

/// The Send test notification form, as the Salesforce guide describes it, as a `POST /v1/test-push` body. Its
/// checks answer with the guide's messages where one applies.
enum ConsoleTestPushForm {
    static let recipientRequired = "Recipient is required"
    static let badgeNotNumber = "Badge must be a number"
    static let invalidJSON = "Payload must be in a valid JSON format"
    static let nothingToSend =
        "You must enter a value for at least one of the following fields: Alert, Badge, Sound, or Custom Payload"

    static func body(from f: ConsoleForm, token: String?) throws -> String {
        guard let app = f.text("app") else { throw APIProblem.badRequest("app", "choose the connected app") }
        let platform = f["platform"] == "android" ? "android" : "ios"
        guard let token, !token.isEmpty else { throw APIProblem.badRequest("token", recipientRequired) }
        var body: [String: JSONValue] = [
            "app": .string(app), "platform": .string(platform), "token": .string(token),
        ]
        if platform == "ios" {
            var aps: [String: JSONValue] = [:]
            if let alert = f.text("alert") {
                // An alert is a message or, per Apple, a dictionary (title, body, …).
                if alert.hasPrefix("{") {
                    guard case .object? = try? JSONValue(parsing: Data(alert.utf8)) else {
                        throw APIProblem.badRequest("alert", invalidJSON)
                    }
                    aps["alert"] = try? JSONValue(parsing: Data(alert.utf8))
                } else {
                    aps["alert"] = .string(alert)
                }
            }
            if let badge = f.text("badge") {
                guard let n = Int(badge), n >= 0 else { throw APIProblem.badRequest("badge", badgeNotNumber) }
                aps["badge"] = .number(JSONNumber(n))
            }
            if let sound = f.text("sound") { aps["sound"] = .string(sound) }
            var payload: [String: JSONValue] = [:]
            if let custom = f.text("customPayload") {
                guard case .object(let o)? = try? JSONValue(parsing: Data(custom.utf8)) else {
                    throw APIProblem.badRequest("customPayload", invalidJSON)
                }
                payload = o
            }
            guard !aps.isEmpty || !payload.isEmpty else { throw APIProblem.badRequest("alert", nothingToSend) }
            if case .object(let custom)? = payload["aps"] { aps.merge(custom) { mine, _ in mine } }
            payload["aps"] = .object(aps)
            body["notification"] = .object(["apns": .object(payload)])
            if f["environment"] == "sandbox" { body["environment"] = .string("sandbox") }
        } else {
            guard let text = f.text("payload") else { throw APIProblem.badRequest("payload", invalidJSON) }
            guard case .object(let o)? = try? JSONValue(parsing: Data(text.utf8)) else {
                throw APIProblem.badRequest("payload", invalidJSON)
            }
            // An FCM message (data, notification, android …) as it is; any other object is its data.
            let message = ["data", "notification", "android", "fcm_options"].contains { o[$0] != nil }
            body["notification"] = .object(["fcm": message ? .object(o) : .object(["data": .object(o)])])
            if f.checked("dryRun") { body["dryRun"] = .bool(true) }
        }
        return JSONValue.object(body).jsonText
    }

    /// The page's words for a problem: the guide's message where one applies, else the API's.
    static func message(for p: APIProblem) -> String {
        if p.field == "token", p.detail == recipientRequired { return recipientRequired }
        if p.field == "token", p.status == .badRequest {
            if p.detail.contains("length") { return "Invalid device token length: \(p.detail)" }
            return "Recipient field contains invalid device token: \(p.detail)"
        }
        if p.status == .tooManyRequests {
            return "The hourly push limit has been reached for this org: \(p.detail)"
        }
        return p.detail
    }

    /// The form input a problem's field belongs to.
    static func input(for field: String) -> String {
        switch field {
        case "token": "recipient"
        case "badge", "sound", "customPayload", "payload", "app", "alert": field
        default: field.hasPrefix("notification.fcm") ? "payload" : "alert"
        }
    }
}

/// A campaign's accepted and opened pushes per minute as an SVG bar chart: drawn on the server, no script, no style
/// attribute (the console's Content-Security-Policy allows neither inline), served as an image the page refreshes.
enum ConsoleChart {
    static let width = 720
    static let height = 180

    static func svg(_ minutes: [JobCounts.Minute]) -> String {
        let top = max(1, minutes.map { max($0.accepted, $0.opened) }.max() ?? 1)
        let shown = Array(minutes.suffix(60))
        let plotHeight = Double(height - 40)
        let slot = Double(width - 60) / Double(max(1, shown.count))
        let bar = min(24, max(1, slot / 2 - 1))
        var out = """
            <svg xmlns="http://www.w3.org/2000/svg" width="\(width)" height="\(height)" \
            viewBox="0 0 \(width) \(height)" role="img" font-family="sans-serif" font-size="11">\
            <title>Accepted and opened pushes per minute</title>\
            <rect width="\(width)" height="\(height)" fill="#ffffff"/>\
            <text x="4" y="14" fill="#333333">\(top)</text>\
            <line x1="50" y1="\(height - 20)" x2="\(width - 10)" y2="\(height - 20)" stroke="#666666"/>
            """
        for (i, m) in shown.enumerated() {
            let x = 50 + Double(i) * slot
            for (j, (value, colour)) in [(m.accepted, "#1f6feb"), (m.opened, "#b35900")].enumerated() {
                let h = plotHeight * Double(value) / Double(top)
                let y = Double(height - 20) - h
                let what = j == 0 ? "accepted" : "opened"
                out +=
                    "<rect x=\"\(n(x + Double(j) * (bar + 1)))\" y=\"\(n(y))\" width=\"\(n(bar))\" "
                    + "height=\"\(n(h))\" fill=\"\(colour)\"><title>\(escape(m.minute)) \(what) \(value)</title></rect>"
            }
        }
        if let first = shown.first, let last = shown.last {
            out += "<text x=\"50\" y=\"\(height - 5)\" fill=\"#333333\">\(escape(first.minute))</text>"
            out +=
                "<text x=\"\(width - 10)\" y=\"\(height - 5)\" fill=\"#333333\" text-anchor=\"end\">"
                + "\(escape(last.minute))</text>"
        } else {
            out +=
                "<text x=\"\(width / 2)\" y=\"\(height / 2)\" fill=\"#333333\" text-anchor=\"middle\">"
                + "Nothing accepted yet</text>"
        }
        out += "<text x=\"\(width - 160)\" y=\"14\" fill=\"#1f6feb\">■ accepted</text>"
        out += "<text x=\"\(width - 80)\" y=\"14\" fill=\"#b35900\">■ opened</text></svg>"
        return out
    }

    /// A coordinate with one decimal.
    static func n(_ d: Double) -> String { String(format: "%.1f", d) }

    static func escape(_ s: String) -> String {
        s.replacingOccurrences(of: "&", with: "&amp;").replacingOccurrences(of: "<", with: "&lt;")
            .replacingOccurrences(of: ">", with: "&gt;").replacingOccurrences(of: "\"", with: "&quot;")
    }
}
