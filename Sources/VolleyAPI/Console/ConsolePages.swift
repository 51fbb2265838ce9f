import Crypto
import Foundation
import Hummingbird
import Mustache
import NIOCore
import VolleyCore

/// The console's pages: Mustache templates (swift-mustache; every `{{value}}` HTML-escaped, no triple braces
/// anywhere) compiled once, the layout around each page, and the values each page shows, made from the stores'
/// types. Templates, the style sheet and the script are compiled into the binary: nothing is read from disk or
/// fetched at run time.
public struct ConsolePages: Sendable {
    let library: MustacheLibrary
    /// Templates that did not compile (a unit test keeps this empty).
    public let problems: [String]

    public init() {
        var templates: [String: MustacheTemplate] = [:]
        var problems: [String] = []
        for (name, text) in ConsoleTemplates.all {
            do { templates[name] = try MustacheTemplate(string: text) } catch {
                problems.append("\(name): \(error)")
            }
        }
        library = MustacheLibrary(templates: templates)
        self.problems = problems
    }

    /// Renders page `name` inside the layout, with the values every page has: the session's CSRF token, whether
    /// the key may send, the org and the role.
    func render(
        _ name: String, _ values: [String: Any], context: APIRequestContext, status: HTTPResponse.Status = .ok
    ) -> Response {
        var all = values
        all["csrf"] = all["csrf"] ?? context.console.csrf
        if case .key(_, let org, let role) = context.caller {
            all["signedIn"] = true
            all["org"] = org.rawValue
            all["role"] = role.rawValue
            all["canSend"] = APIRole.senders.contains(role)
        }
        all["nav_" + name.replacingOccurrences(of: "-", with: "_")] = true
        // Sections that show only when a list has rows (`{{#has_reasons}}`).
        for (key, value) in values { if let list = value as? [Any] { all["has_" + key] = !list.isEmpty } }
        let html = library.render(Self.pruned(all) ?? [:], withTemplate: name) ?? "template \(name) is missing"
        return Response(
            status: status, headers: [.contentType: "text/html; charset=utf-8"],
            body: .init(byteBuffer: ByteBuffer(string: html)))
    }

    /// The values with every nil and every empty string left out, at any depth: in Mustache any value that is
    /// there, an empty string included, opens its section (`{{#reason}}`), and a missing one renders as nothing.
    static func pruned(_ value: Any) -> Any? {
        let mirror = Mirror(reflecting: value)
        if mirror.displayStyle == .optional {
            guard let wrapped = mirror.children.first?.value else { return nil }
            return pruned(wrapped)
        }
        switch value {
        case let text as String: return text.isEmpty ? nil : text
        case let object as [String: Any]: return object.compactMapValues(pruned)
        case let rows as [[String: Any]]: return rows.map { $0.compactMapValues(pruned) }
        default: return value
        }
    }

    /// A failure as a page: its status, what went wrong and the field at fault.
    func errorPage(_ problem: APIProblem, context: APIRequestContext) -> Response {
        var response = render(
            "error",
            [
                "title": problem.title, "status": Int(problem.status.code), "detail": problem.detail,
                "field": problem.field as Any,
            ], context: context, status: problem.status)
        for field in problem.headers where field.name != .wwwAuthenticate { response.headers[field.name] = field.value }
        return response
    }

    // MARK: - values

    /// The campaign list's row of a job.
    static func jobRow(_ s: JobStatus) -> [String: Any] {
        var row: [String: Any] = [
            "id": s.id, "href": "/console/jobs/" + pathEscape(s.id), "state": s.state, "app": s.app ?? "",
            "createdAt": s.createdAt ?? "", "dueAt": s.dueAt ?? "",
        ]
        // A column, not a section: empty text is fine here.
        if let c = s.counts {
            row["audience"] = c.audience
            row["accepted"] = c.accepted
            row["failed"] = c.failed + c.rejected
            row["expired"] = c.expired
            row["capped"] = c.capped
            row["progressValue"] = finished(c)
            row["progressMax"] = max(c.audience, finished(c))
            row["hasProgress"] = true
        } else if let r = s.report {
            row["audience"] = r.devices
            row["accepted"] = r.accepted
            row["failed"] = r.failed + r.rejected
            row["expired"] = r.expired ?? 0
            row["capped"] = r.capped ?? 0
            row["progressValue"] = r.devices
            row["progressMax"] = r.devices
            row["hasProgress"] = r.devices > 0
        }
        // A finished job's report says when it ended otherwise than by sending everything (`cancelled`).
        row["outcome"] = s.report?.status
        row["opened"] = s.opened ?? 0
        return row
    }

    /// Devices and users the job has decided about: what its progress bar fills with.
    static func finished(_ c: JobCounts) -> Int64 {
        c.accepted + c.rejected + c.failed + c.quotaExceeded + c.expired + c.capped + c.noDevice
    }

    /// The counts a campaign's page shows, each with the path of its value in `GET /v1/jobs/{id}`'s answer (the
    /// live refresh reads the same paths).
    static let countRows: [(label: String, path: String, help: String, value: @Sendable (JobStatus) -> Int64)] = [
        (
            "Audience", "counts.audience", "devices with an outcome and users skipped so far",
            { $0.counts?.audience ?? 0 }
        ),
        ("Accepted", "counts.accepted", "the provider took the push", { $0.counts?.accepted ?? 0 }),
        (
            "Rejected", "counts.rejected", "the provider refused it for good (below, by reason)",
            { $0.counts?.rejected ?? 0 }
        ),
        ("Failed", "counts.failed", "not delivered after retries (below, by reason)", { $0.counts?.failed ?? 0 }),
        ("Over quota", "counts.quotaExceeded", "the org's hourly quota was used up", { $0.counts?.quotaExceeded ?? 0 }),
        ("Expired", "counts.expired", "its time to live ran out before it could go", { $0.counts?.expired ?? 0 }),
        ("Capped", "counts.capped", "held by a frequency cap", { $0.counts?.capped ?? 0 }),
        ("No device", "counts.noDevice", "the user has no device in this app", { $0.counts?.noDevice ?? 0 }),
        (
            "Tokens removed", "counts.tokensRemoved", "dead tokens taken out of the registry",
            { $0.counts?.tokensRemoved ?? 0 }
        ),
        ("Opened", "opened", "the app reported the push opened", { Int64($0.opened ?? 0) }),
        ("Dismissed", "dismissed", "the app reported it dismissed", { Int64($0.dismissed ?? 0) }),
    ]

    static func jobDetail(_ s: JobStatus, events: [DebugEvent]) -> [String: Any] {
        let c = s.counts ?? JobCounts()
        let final = ["done", "cancelled", "dead-lettered"].contains(s.state)
        var values: [String: Any] = [
            "id": s.id, "idPath": pathEscape(s.id), "state": s.state, "final": final, "live": !final,
            "canPause": ["queued", "running", "scheduled"].contains(s.state), "canResume": s.state == "paused",
            "canCancel": !final,
            "counts": countRows.map {
                ["label": $0.label, "path": $0.path, "help": $0.help, "value": $0.value(s)] as [String: Any]
            },
            "progressValue": finished(c), "progressMax": max(c.audience, finished(c)),
        ]
        values["outcome"] = s.report?.status
        values["outcomeDetail"] = s.report?.statusDetail
        // Absent, not empty: an empty string is a true section in Mustache.
        for (key, value) in [("app", s.app), ("createdAt", s.createdAt), ("dueAt", s.dueAt), ("reason", s.reason)]
        where value?.isEmpty == false {
            values[key] = value
        }
        values["detail"] = s.detail ?? ""
        values["reasons"] = c.byReason.sorted { ($0.value, $1.key) > ($1.value, $0.key) }.map {
            ["reason": $0.key, "count": $0.value, "advice": ReasonAdvice.advice($0.key)] as [String: Any]
        }
        let outcomes = ["accepted", "rejected", "failed", "quotaExceeded", "expired"]
        values["platforms"] = c.byPlatform.keys.sorted().map { platform in
            let o = c.byPlatform[platform] ?? [:]
            return ["platform": platform, "cells": outcomes.map { ["value": o[$0] ?? 0] }] as [String: Any]
        }
        values["waves"] = (c.perWave ?? []).map { w in
            ["wave": w.wave, "cells": outcomes.map { ["value": w.outcomes[$0] ?? 0] }] as [String: Any]
        }
        values["outcomeNames"] = ["Accepted", "Rejected", "Failed", "Over quota", "Expired"].map { ["name": $0] }
        values["actions"] = (s.actions ?? [:]).sorted { $0.key < $1.key }.map {
            ["action": $0.key, "taps": $0.value] as [String: Any]
        }
        values["events"] = events.suffix(200).map { e in
            [
                "at": RFC3339.format(e.at, .milliseconds), "event": e.event.rawValue, "user": e.user?.rawValue ?? "",
                "platform": e.platform?.rawValue ?? "", "status": e.status.map(String.init) ?? "",
            ] as [String: Any]
        }
        values["minutes"] = c.perMinute.count
        return values
    }

    static func deviceRow(_ d: DeviceRecord, app: String, pickable: Bool) -> [String: Any] {
        [
            "platform": d.platform.rawValue, "token": redacted(d.token.rawValue), "user": d.user.rawValue, "app": app,
            "environment": d.environment?.rawValue ?? "", "registeredAt": RFC3339.format(d.registeredAt),
            "lastSeenAt": RFC3339.format(d.lastSeenAt), "keyRegistered": d.rsaPublicKey != nil,
            "userHref": "/console/devices?user=\(queryEscape(d.user.rawValue))&app=\(queryEscape(app))",
            // A picked device is sent to by its id in the form (platform and user), never by a token in the page.
            "pick": pickable ? "\(d.platform.rawValue):\(d.user.rawValue):\(tokenSuffix(d.token.rawValue))" : "",
        ]
    }

    static func deliveryRow(_ d: DeliveryRecord) -> [String: Any] {
        [
            "job": d.job, "href": "/console/jobs/" + pathEscape(d.job), "at": d.at, "platform": d.platform ?? "",
            "device": d.device ?? "", "outcome": d.outcome, "reason": d.reason ?? "",
            "advice": d.reason.map(ReasonAdvice.advice) ?? "",
        ]
    }

    /// A token as the console shows it: its last 8 characters after `…`, as the delivery history does.
    static func redacted(_ token: String) -> String { "…" + tokenSuffix(token) }
    static func tokenSuffix(_ token: String) -> String { String(token.suffix(8)) }

    static func newJobForm(_ f: ConsoleForm, apps: [String], segments: [String], templates: [String]) -> [String: Any] {
        let app = f["app"] ?? apps.first ?? ""
        return [
            "apps": apps.map { ["name": $0, "selected": $0 == app] as [String: Any] },
            "segments": segments.map { ["name": $0, "selected": $0 == f["segment"]] as [String: Any] },
            "excludeSegments": segments.map { ["name": $0, "selected": $0 == f["excludeSegment"]] as [String: Any] },
            "templates": templates.map { ["name": $0, "selected": $0 == f["templateId"]] as [String: Any] },
            "users": f["users"] ?? "", "everyone": f.checked("everyone"), "jobTitle": f["jobTitle"] ?? "",
            "body": f["body"] ?? "", "data": f["data"] ?? "", "sendAt": f["sendAt"] ?? "",
            "localTime": f["localTime"] ?? "", "throttle": f["throttle"] ?? "",
            "bypassCap": f.checked("bypassCap"), "jobId": f["jobId"] ?? "", "previewUser": f["previewUser"] ?? "",
        ]
    }

    static func testPushForm(_ f: ConsoleForm, apps: [String], app: String) -> [String: Any] {
        let platform = f["platform"] ?? "ios"
        return [
            "apps": apps.map { ["name": $0, "selected": $0 == app] as [String: Any] },
            "app": app, "ios": platform == "ios", "android": platform == "android",
            "recipient": f["recipient"] ?? "", "alert": f["alert"] ?? "", "badge": f["badge"] ?? "",
            "sound": f["sound"] ?? "", "customPayload": f["customPayload"] ?? "", "payload": f["payload"] ?? "",
            "dryRun": f.checked("dryRun"), "sandbox": f["environment"] == "sandbox",
        ]
    }

    static func testPushResult(_ json: Data) -> [String: Any] {
        guard case .object(let o)? = try? JSONValue(parsing: json) else {
            return ["raw": String(decoding: json, as: UTF8.self)]
        }
        func text(_ key: String) -> String {
            switch o[key] {
            case .string(let s)?: s
            case .number(let n)?: n.description
            default: ""
            }
        }
        let outcome = text("outcome")
        return [
            "status": text("status"), "reason": text("reason"), "outcome": outcome, "apnsId": text("apnsId"),
            "messageName": text("messageName"), "message": text("message"), "accepted": outcome == "accepted",
            "removed": outcome == "remove-token", "advice": ReasonAdvice.advice(text("reason")),
        ]
    }

    // MARK: - escaping

    /// `raw` when it is a path on this console (`/console…`, no scheme, no `//`), nil otherwise: where a sign-in
    /// may send the browser next (never another site).
    static func localPath(_ raw: String) -> String? {
        guard raw.hasPrefix("/console"), !raw.hasPrefix("//"), !raw.contains("\\"),
            !raw.unicodeScalars.contains(where: { $0.value < 0x20 || $0.value == 0x7F })
        else { return nil }
        return raw
    }

    private static let unreserved = CharacterSet(
        charactersIn: "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-._~")

    static func queryEscape(_ s: String) -> String { s.addingPercentEncoding(withAllowedCharacters: unreserved) ?? "" }
    static func pathEscape(_ s: String) -> String {
        s.addingPercentEncoding(withAllowedCharacters: unreserved.union(CharacterSet(charactersIn: ":"))) ?? ""
    }

    // MARK: - static files

    struct StaticFile: Sendable {
        var text: String
        var contentType: String
        /// A strong validator: the SHA-256 of the bytes, quoted.
        var etag: String

        init(_ text: String, _ contentType: String) {
            self.text = text
            self.contentType = contentType
            etag =
                "\"" + SHA256.hash(data: Data(text.utf8)).prefix(12).map { String(format: "%02x", $0) }.joined()
                + "\""
        }
    }

    static let staticFiles: [String: StaticFile] = [
        "console.css": StaticFile(ConsoleTemplates.css, "text/css; charset=utf-8"),
        "console.js": StaticFile(ConsoleTemplates.js, "text/javascript; charset=utf-8"),
    ]
}

/// What a provider's reason means and what to do about it, as the campaign page and the delivery history show it.
enum ReasonAdvice {
    static func advice(_ reason: String) -> String {
        let r = reason.split(separator: ":").last.map(String.init) ?? reason
        switch r {
        case "BadDeviceToken", "Unregistered", "UNREGISTERED", "NOT_FOUND", "DeviceTokenNotForTopic":
            return "The token is dead or belongs to another app or environment: it was removed; the app registers "
                + "a new one when it next starts."
        case "ExpiredToken":
            return "The token expired: it was removed; the app registers a new one when it next starts."
        case "PayloadTooLarge", "MessageTooBig":
            return "The payload is over the provider's limit (4 KB): shorten the text or data."
        case "TooManyRequests", "QUOTA_EXCEEDED", "RESOURCE_EXHAUSTED":
            return "The provider throttled the sends: Volley waited and retried; lower the throttle if it persists."
        case "InvalidProviderToken", "ExpiredProviderToken", "MissingProviderToken", "THIRD_PARTY_AUTH_ERROR",
            "SENDER_ID_MISMATCH", "UNAUTHENTICATED", "PERMISSION_DENIED":
            return "The app's credentials were refused: check its APNs key (key id, team id, topic) or FCM service "
                + "account in the configuration."
        case "TopicDisallowed", "BadTopic", "MissingTopic":
            return "The APNs topic is not the app's bundle id: fix apps[].apns.topic."
        case "InternalServerError", "ServiceUnavailable", "Shutdown", "UNAVAILABLE", "INTERNAL":
            return "The provider was unavailable: Volley retried within its outage budget; nothing to fix."
        case "INVALID_ARGUMENT", "BadPriority", "BadExpirationDate", "BadCollapseId", "BadMessageId",
            "InvalidPushType", "MissingDeviceToken", "PayloadEmpty":
            return "The provider refused the request's form: check the notification's fields."
        case "written-unanswered":
            return "The connection died before the provider answered (worker.unansweredSends: fail)."
        case "":
            return ""
        default:
            return "See docs/outcomes.md for this reason."
        }
    }
}
