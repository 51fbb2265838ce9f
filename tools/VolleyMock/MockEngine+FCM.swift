import Foundation
import VolleyCore
import VolleyHTTP2
import VolleyHTTP2Server

// The FCM v1 send checks (`POST /v1/projects/<project>/messages:send`): path, access token, project, then the
// message (`MockFCMSendScan` over the bytes, the parsed tree when it cannot tell), token rules, injected errors
// and the accepted answer.

extension MockEngine {
    func fcm(
        _ req: MockRequest, _ raw: MockRawFields, state: MockConnectionState, config: MockConfiguration,
        now: Double, authenticated: inout Bool
    ) -> HTTP2Response {
        // /v1/projects/<project>/messages:send
        let rest = req.path.dropFirst("/v1/projects/".utf8.count)
        guard let slash = rest.firstIndex(of: "/"), rest[slash...] == "/messages:send" else {
            return fcmError(state, 404, status: "NOT_FOUND", message: "Requested entity was not found.", errorCode: nil)
        }
        let project = rest[..<slash]
        guard req.method == "POST" else {
            return fcmError(state, 405, status: "METHOD_NOT_ALLOWED", message: "Method not allowed.", errorCode: nil)
        }
        guard let auth = req.header("authorization"), auth.utf8.count > 7, auth.prefix(7).lowercased() == "bearer "
        else {
            return fcmError(
                state, 401, status: "UNAUTHENTICATED",
                message:
                    "Request is missing required authentication credential. Expected OAuth 2 access token, login "
                    + "cookie or other valid authentication credential. See "
                    + "https://developers.google.com/identity/sign-in/web/devconsole-project.",
                errorCode: nil)
        }
        let token = String(auth.dropFirst(7))
        let revocations = accessTokenRevocations.load(ordering: .relaxed)
        if state.accessTokenRevocations != revocations {
            state.accessTokens.removeAll()
            state.accessTokenRevocations = revocations
        }
        var expiry = state.accessTokens[token]
        if expiry == nil {
            expiry = issuedAccessTokens.withLock { $0[token] }
            if let e = expiry { state.accessTokens[token] = e }
        }
        guard let exp = expiry, Double(exp) > now else {
            return fcmError(
                state, 401, status: "UNAUTHENTICATED",
                message:
                    "Request had invalid authentication credentials. Expected OAuth 2 access token, login cookie "
                    + "or other valid authentication credential. See "
                    + "https://developers.google.com/identity/sign-in/web/devconsole-project.",
                errorCode: nil)
        }
        guard project == credentials.fcmProjectID else {
            return fcmError(
                state, 403, status: "PERMISSION_DENIED",
                message:
                    "Permission 'cloudmessaging.messages.create' denied on resource "
                    + "'//cloudresourcemanager.googleapis.com/projects/\(project)' (or it may not exist).",
                errorCode: nil)
        }
        authenticated = true
        // A campaign's next body: the same message after another token, whose checks are already known to pass; or
        // a body read once over its bytes (a per-person campaign's body is new at every send).
        let known = req.body.withUnsafeBufferPointer { b -> HTTP2Response? in
            if let m = state.fcmBodies.match(b) {
                return fcmAccept(
                    req, state: state, config: config, now: now, validateOnly: m.validateOnly, target: m.token)
            }
            guard let v = MockFCMSendScan.scan(b) else { return nil }
            state.fcmBodies.remember(b, validateOnly: v.validateOnly)
            return fcmAccept(
                req, state: state, config: config, now: now, validateOnly: v.validateOnly,
                target: UnsafeBufferPointer(rebasing: b[v.token]))
        }
        if let known { return known }
        guard let doc = JSONValue.parse(req.body), case .object = doc else {
            return fcmError(
                state, 400, status: "INVALID_ARGUMENT",
                message: "Invalid JSON payload received. Unexpected token.", errorCode: nil)
        }
        guard let message = doc["message"], case .object = message else {
            return fcmError(
                state, 400, status: "INVALID_ARGUMENT", message: "Request contains an invalid argument.",
                errorCode: "INVALID_ARGUMENT", field: ("message", "message is required"))
        }
        let target = message["token"]?.stringValue
        let hasTopic = message["topic"]?.stringValue != nil || message["condition"]?.stringValue != nil
        if target == nil && !hasTopic {
            return fcmError(
                state, 400, status: "INVALID_ARGUMENT", message: "Recipient of the message is not set.",
                errorCode: "INVALID_ARGUMENT", field: ("message.token", "Recipient of the message is not set."))
        }
        if let t = target, t.isEmpty || t.utf8.contains(where: { $0 <= 0x20 || $0 >= 0x7F }) {
            return invalidToken(state)
        }
        if let data = message["data"] {
            guard let members = data.objectValue else {
                return fcmError(
                    state, 400, status: "INVALID_ARGUMENT",
                    message:
                        "Invalid value at 'message.data' "
                        + "(type.googleapis.com/google.firebase.fcm.v1.Message.DataEntry), must be an object",
                    errorCode: "INVALID_ARGUMENT", field: ("message.data", "Invalid value"))
            }
            var size = 0
            for (i, (k, v)) in members.sorted(by: { $0.key < $1.key }).enumerated() {
                guard let s = v.stringValue else {
                    return fcmError(
                        state, 400, status: "INVALID_ARGUMENT",
                        message: "Invalid value at 'message.data[\(i)].value' (TYPE_STRING), \(v.jsonText)",
                        errorCode: nil,
                        field: (
                            "message.data[\(i)].value",
                            "Invalid value at 'message.data[\(i)].value' (TYPE_STRING), \(v.jsonText)"
                        ))
                }
                size += k.utf8.count + s.utf8.count
            }
            if size > 4096 {
                return fcmError(
                    state, 400, status: "INVALID_ARGUMENT", message: "Message is too big",
                    errorCode: "INVALID_ARGUMENT", field: ("message.data", "Message is too big"))
            }
        }
        if let android = message["android"] {
            if let p = android["priority"] {
                guard let s = p.stringValue, s == "HIGH" || s == "NORMAL" else {
                    return fcmError(
                        state, 400, status: "INVALID_ARGUMENT",
                        message:
                            "Invalid value at 'message.android.priority' "
                            + "(type.googleapis.com/google.firebase.fcm.v1.AndroidMessagePriority), \(p.jsonText)",
                        errorCode: nil, field: ("message.android.priority", "Invalid value"))
                }
            }
            if let ttl = android["ttl"] {
                guard let s = ttl.stringValue, Self.isDuration(s) else {
                    return fcmError(
                        state, 400, status: "INVALID_ARGUMENT",
                        message:
                            "Invalid value at 'message.android.ttl' "
                            + "(type.googleapis.com/google.protobuf.Duration), \(ttl.jsonText)",
                        errorCode: nil, field: ("message.android.ttl", "Invalid value"))
                }
            }
        }
        let validateOnly = doc["validate_only"]?.boolValue == true
        req.body.withUnsafeBufferPointer { state.fcmBodies.remember($0, validateOnly: validateOnly) }
        guard var target else {
            return fcmAccept(req, state: state, config: config, now: now, validateOnly: validateOnly, target: nil)
        }
        return target.withUTF8 {
            fcmAccept(req, state: state, config: config, now: now, validateOnly: validateOnly, target: $0)
        }
    }

    /// What a send decides after its message passed the checks: token rules, injected errors, then the accepted
    /// answer. `target` is the registration token's UTF-8 (nil for a topic or condition), made a String only where a
    /// rule, the journal or the capture needs one.
    func fcmAccept(
        _ req: MockRequest, state: MockConnectionState, config: MockConfiguration, now: Double,
        validateOnly: Bool, target: UnsafeBufferPointer<UInt8>?
    ) -> HTTP2Response {
        if !validateOnly {
            noteFCMArrival()
            if fcmThrottles.load(ordering: .relaxed) > 0, let ra = takeFCMThrottle() {
                return fcmError(
                    state, 429, status: FCMErrorCode.googleStatus(forHTTP: 429),
                    message: FCMErrorCode.message(for: "QUOTA_EXCEEDED"), errorCode: "QUOTA_EXCEEDED", retryAfter: ra)
            }
        }
        if !config.fcm.isEmpty, let t = target, let m = config.fcm.match(String(decoding: t, as: UTF8.self)[...]) {
            switch m {
            case .unregistered:
                return fcmError(
                    state, 404, status: "NOT_FOUND", message: "Requested entity was not found.",
                    errorCode: "UNREGISTERED")
            case .invalid: return invalidToken(state)
            case .reason(let r):
                if r.reason == "INVALID_ARGUMENT" { return invalidToken(state) }
                return fcmError(
                    state, r.status, status: FCMErrorCode.googleStatus(forHTTP: r.status),
                    message: FCMErrorCode.message(for: r.reason), errorCode: r.reason, retryAfter: r.retryAfter)
            }
        }
        if config.errorRate > 0, !config.errorStatuses.isEmpty, state.nextUnit() < config.errorRate {
            let s = config.errorStatuses[Int(state.nextRandom() % UInt64(config.errorStatuses.count))]
            let code = s == 429 ? "QUOTA_EXCEEDED" : s == 500 ? "INTERNAL" : "UNAVAILABLE"
            return fcmError(
                state, s, status: FCMErrorCode.googleStatus(forHTTP: s), message: FCMErrorCode.message(for: code),
                errorCode: code, retryAfter: s == 500 ? nil : config.retryAfterSeconds)
        }
        var duplicate = false
        if !validateOnly, config.duplicateTracking, duplicateTrackingAllowed,
            let id = req.header("x-volley-delivery-id")
        {
            duplicate = duplicates.insert(MockDuplicateTracker.key(string: id[...]))
        }
        state.counters.withLock { c in
            c.requests += 1
            if validateOnly { c.fcmValidateOnly += 1 } else { c.fcmAccepted += 1 }
            if duplicate { c.duplicates += 1 }
        }
        if !validateOnly {
            noteAccepted()
            acceptJournal?.recordFCM(token: target, body: req.body)
        }
        if !validateOnly, config.capturePushes > 0 {
            let token = target.map { String(decoding: $0, as: UTF8.self) } ?? ""
            let push = MockCapturedPush(provider: .fcm, token: token, headers: [:], body: req.body)
            captured.withLock { $0.append(push, keep: config.capturePushes) }
        }
        // {"name":"projects/<project>/messages/<id>"}, id "0:<unix µs>%<counter, hex>" (or Google's validate_only id).
        var body: [UInt8] = []
        body.reserveCapacity(fcmNamePrefixBytes.count + 48)
        body.append(contentsOf: #"{"name":""#.utf8)
        body.append(contentsOf: fcmNamePrefixBytes)
        if validateOnly {
            body.append(contentsOf: "fake_message_id".utf8)
        } else {
            body.append(contentsOf: "0:".utf8)
            MockBytes.appendDecimal(Int64(now * 1_000_000), to: &body)
            body.append(UInt8(ascii: "%"))
            MockBytes.appendHex(messageCounter.add(1, ordering: .relaxed).newValue, to: &body)
        }
        body.append(contentsOf: #""}"#.utf8)
        return HTTP2Response(
            status: 200, headers: [HTTP2Header("content-type", "application/json; charset=UTF-8")],
            body: body)
    }

    static func isDuration(_ s: String) -> Bool {
        var s = s
        return s.withUTF8 { isDuration($0) }
    }

    static func isDuration(_ u: UnsafeBufferPointer<UInt8>) -> Bool {
        // ^\d+(\.\d+)?s$
        guard u.count >= 2, u.last == UInt8(ascii: "s") else { return false }
        var i = 0
        let digits = { (from: Int) -> Int in
            var j = from
            while j < u.count - 1, u[j] >= 0x30, u[j] <= 0x39 { j += 1 }
            return j
        }
        let a = digits(i)
        guard a > i else { return false }
        i = a
        if i == u.count - 1 { return true }
        guard u[i] == UInt8(ascii: ".") else { return false }
        let b = digits(i + 1)
        return b > i + 1 && b == u.count - 1
    }

    func invalidToken(_ state: MockConnectionState) -> HTTP2Response {
        fcmError(
            state, 400, status: "INVALID_ARGUMENT",
            message: "The registration token is not a valid FCM registration token",
            errorCode: "INVALID_ARGUMENT",
            field: ("message.token", "The registration token is not a valid FCM registration token"))
    }

    /// Google's error shape: {"error":{"code","message","status","details":[FcmError, BadRequest?]}}.
    func fcmError(
        _ state: MockConnectionState, _ code: Int, status: String, message: String, errorCode: String?,
        field: (String, String)? = nil, retryAfter: Int? = nil
    ) -> HTTP2Response {
        state.counters.withLock { c in
            c.requests += 1
            c.errors[MockOutcomeKey(.fcm, code, errorCode ?? status), default: 0] += 1
        }
        var details: [String] = []
        if let e = errorCode {
            details.append(
                "{\"@type\":\"type.googleapis.com/google.firebase.fcm.v1.FcmError\",\"errorCode\":"
                    + "\(MockJSONWriter.quote(e))}"
            )
        }
        if let (f, d) = field {
            details.append(
                "{\"@type\":\"type.googleapis.com/google.rpc.BadRequest\",\"fieldViolations\":[{\"field\":"
                    + "\(MockJSONWriter.quote(f)),\"description\":\(MockJSONWriter.quote(d))}]}"
            )
        }
        var body =
            "{\"error\":{\"code\":\(code),\"message\":\(MockJSONWriter.quote(message)),\"status\":"
            + "\(MockJSONWriter.quote(status))"
        if !details.isEmpty { body += ",\"details\":[" + details.joined(separator: ",") + "]" }
        body += "}}"
        var headers = [HTTP2Header("content-type", "application/json; charset=UTF-8")]
        if let ra = retryAfter { headers.append(HTTP2Header("retry-after", String(ra))) }
        return HTTP2Response(status: code, headers: headers, body: Array(body.utf8))
    }
}

/// FCM error codes → Google HTTP status and canonical status names.
enum FCMErrorCode {
    static func httpStatus(for code: String) -> Int {
        switch code {
        case "UNREGISTERED": return 404
        case "INVALID_ARGUMENT": return 400
        case "SENDER_ID_MISMATCH": return 403
        case "QUOTA_EXCEEDED": return 429
        case "UNAVAILABLE": return 503
        case "INTERNAL": return 500
        case "THIRD_PARTY_AUTH_ERROR", "APNS_AUTH_ERROR": return 401
        default: return 500
        }
    }
    static func googleStatus(forHTTP status: Int) -> String {
        switch status {
        case 400: return "INVALID_ARGUMENT"
        case 401: return "UNAUTHENTICATED"
        case 403: return "PERMISSION_DENIED"
        case 404: return "NOT_FOUND"
        case 429: return "RESOURCE_EXHAUSTED"
        case 500: return "INTERNAL"
        case 503: return "UNAVAILABLE"
        default: return "UNKNOWN"
        }
    }
    static func message(for code: String) -> String {
        switch code {
        case "UNREGISTERED": return "Requested entity was not found."
        case "SENDER_ID_MISMATCH": return "SenderId mismatch"
        case "QUOTA_EXCEEDED":
            return "Quota exceeded for quota metric 'Messages sent' and limit 'Messages sent per minute'."
        case "UNAVAILABLE": return "The service is currently unavailable."
        case "INTERNAL": return "Internal error encountered."
        case "THIRD_PARTY_AUTH_ERROR", "APNS_AUTH_ERROR": return "Auth error from APNS or Web Push Service"
        default: return "Request contains an invalid argument."
        }
    }
}
