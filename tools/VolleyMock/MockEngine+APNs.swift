import Foundation
import VolleyCore
import VolleyHTTP2
import VolleyHTTP2Server

// The APNs send checks, in the order APNs applies them: apns-id, method and path, the device token, provider
// authentication (ES256 JWT, per connection), topic, push type, priority, expiration, collapse id, payload.

extension MockEngine {
    static let pushTypes: Set<String> = [
        "alert", "background", "location", "voip", "complication", "fileprovider", "mdm", "liveactivity",
        "pushtotalk", "widgets", "controls",
    ]
    static func isPushType(_ s: String) -> Bool {
        switch s {
        case "alert", "background", "location", "voip", "complication", "fileprovider", "mdm", "liveactivity",
            "pushtotalk", "widgets", "controls":
            return true
        default: return false
        }
    }
    static let pushTypeBytes: [[UInt8]] = [
        "alert", "background", "location", "voip", "complication", "fileprovider", "mdm", "liveactivity",
        "pushtotalk", "widgets", "controls",
    ].map { Array($0.utf8) }
    static func isPushType(_ s: UnsafeBufferPointer<UInt8>) -> Bool {
        pushTypeBytes.contains { MockBytes.equal(s, $0) }
    }
    static let topicSuffixes = [
        ".voip", ".complication", ".pushkit.fileprovider", ".push-type.liveactivity",
        ".location-query", ".voip-ptt", ".push-type.widgets",
    ]

    func apnsError(
        _ state: MockConnectionState, _ status: Int, _ reason: String, apnsID: String?, now: Double,
        retryAfter: Int? = nil
    ) -> HTTP2Response {
        state.counters.withLock { c in
            c.requests += 1
            c.errors[MockOutcomeKey(.apns, status, reason), default: 0] += 1
        }
        var body = "{\"reason\":\(MockJSONWriter.quote(reason))"
        if status == 410 { body += ",\"timestamp\":\(Int64(now * 1000))" }
        body += "}"
        var headers = [HTTP2Header("apns-id", apnsID ?? state.uuid()), HTTP2Header("content-type", "application/json")]
        if let ra = retryAfter { headers.append(HTTP2Header("retry-after", String(ra))) }
        return HTTP2Response(status: status, headers: headers, body: Array(body.utf8))
    }

    /// The APNs rules on the request's bytes. Every byte comparison is against an ASCII constant with no
    /// character that has a canonical equivalent elsewhere, so it decides exactly what the String comparison it
    /// replaces decided; the topic (free text) falls back to Strings when its bytes differ.
    func apns(
        _ req: MockRequest, _ raw: MockRawFields, state: MockConnectionState, config: MockConfiguration, now: Double,
        authenticated: inout Bool
    ) -> HTTP2Response {
        let apnsIDBytes = raw.apnsID
        if let id = apnsIDBytes, !Self.isUUID(id) {
            return apnsError(state, 400, "BadMessageId", apnsID: nil, now: now)
        }
        // Decoded only when present (echoed in the answer).
        let apnsID = apnsIDBytes.map { String(decoding: $0, as: UTF8.self) }
        guard let method = raw.method, MockBytes.equal(method, "POST") else {
            return apnsError(state, 405, "MethodNotAllowed", apnsID: apnsID, now: now)
        }
        let path = raw.path
        let prefixLength = "/3/device/".utf8.count
        guard MockBytes.hasPrefix(path, "/3/device/") || MockBytes.equal(path, "/3/device") else {
            return apnsError(state, 404, "BadPath", apnsID: apnsID, now: now)
        }
        let token =
            path.count > prefixLength
            ? UnsafeBufferPointer(rebasing: path[prefixLength...]) : UnsafeBufferPointer(start: nil, count: 0)
        if token.isEmpty { return apnsError(state, 400, "MissingDeviceToken", apnsID: apnsID, now: now) }
        for c in token where hexValue(c) == nil {
            return apnsError(state, 400, "BadDeviceToken", apnsID: apnsID, now: now)
        }

        // Provider authentication: certificate connections need no JWT; token connections need a valid ES256 JWT.
        if !state.clientCertificate {
            let verdict: MockJWT.APNsVerdict
            if let auth = raw.authorization, MockBytes.equal(auth, state.lastAuthorization) {
                // The common case: the bytes of the last value, which passed the length check below.
                verdict = state.lastVerdict
            } else {
                guard let auth = raw.authorization, MockBytes.decodedCount(auth) > 7 else {
                    return apnsError(state, 403, "MissingProviderToken", apnsID: apnsID, now: now)
                }
                let authString = String(decoding: auth, as: UTF8.self)
                if let v = state.jwtVerdicts[authString] {
                    verdict = v
                } else {
                    let scheme = authString.prefix(7)
                    if scheme.lowercased() != "bearer " {
                        verdict = .invalid
                    } else {
                        // The credentials' key first, then any other key of the team the tests trusted.
                        let teamID = credentials.apnsTeamID
                        let keys =
                            [(credentials.apnsKeyID, credentials.apnsPublicKey)]
                            + additionalAPNsKeys.withLock { $0.map { ($0.key, $0.value) } }
                        verdict =
                            keys.lazy.map {
                                MockJWT.verifyAPNs(
                                    authString.dropFirst(7), key: $0.1, keyID: $0.0, teamID: teamID)
                            }.first { $0 != .invalid } ?? .invalid
                    }
                    state.counters.withLock { $0.jwtVerifications += 1 }
                    if state.jwtVerdicts.count > 1024 { state.jwtVerdicts.removeAll() }
                    state.jwtVerdicts[authString] = verdict
                }
                state.lastAuthorization = Array(auth)
                state.lastVerdict = verdict
                // Once per connection and token: the team-wide record of distinct tokens.
                if case .valid = verdict {
                    let limit = config.tokenUpdateLimitSeconds
                    state.lastTooManyUpdates = providerTokens.withLock {
                        $0.note(String(decoding: auth, as: UTF8.self), now: now, limit: limit)
                    }
                }
            }
            guard case .valid(let iat) = verdict else {
                return apnsError(state, 403, "InvalidProviderToken", apnsID: apnsID, now: now)
            }
            if Int64(now) - iat > Int64(config.jwtMaxAgeSeconds) {
                return apnsError(state, 403, "ExpiredProviderToken", apnsID: apnsID, now: now)
            }
            if state.refusesProviderTokens == nil { state.refusesProviderTokens = takeTokenRefusal() }
            if state.lastTooManyUpdates || state.refusesProviderTokens == true {
                return apnsError(state, 429, "TooManyProviderTokenUpdates", apnsID: apnsID, now: now)
            }
        }

        guard let topicBytes = raw.topic else { return apnsError(state, 400, "MissingTopic", apnsID: apnsID, now: now) }
        if !MockBytes.equal(topicBytes, apnsTopicBytes) {
            let topic = String(decoding: topicBytes, as: UTF8.self)
            let accepted = credentials.apnsTopic
            var ok = topic == accepted
            if !ok, topic.hasPrefix(accepted) {
                let rest = topic.dropFirst(accepted.utf8.count)
                ok = Self.topicSuffixes.contains(where: { rest == $0 })
            }
            if !ok {
                return apnsError(
                    state, 400, state.clientCertificate ? "TopicDisallowed" : "DeviceTokenNotForTopic",
                    apnsID: apnsID, now: now)
            }
        }
        let pushType = raw.pushType
        if let pt = pushType, !Self.isPushType(pt) {
            return apnsError(state, 400, "InvalidPushType", apnsID: apnsID, now: now)
        }
        if let p = raw.priority {
            let ten = MockBytes.equal(p, "10")
            guard ten || MockBytes.equal(p, "5") || MockBytes.equal(p, "1") else {
                return apnsError(state, 400, "BadPriority", apnsID: apnsID, now: now)
            }
            if ten, let pt = pushType, MockBytes.equal(pt, "background") {
                return apnsError(state, 400, "BadPriority", apnsID: apnsID, now: now)
            }
        }
        if let e = raw.expiration {
            guard !e.isEmpty, e.count <= 19, e.allSatisfy({ $0 >= 0x30 && $0 <= 0x39 }) else {
                return apnsError(state, 400, "BadExpirationDate", apnsID: apnsID, now: now)
            }
        }
        if let c = raw.collapseID, MockBytes.decodedCount(c) > 64 {
            return apnsError(state, 400, "BadCollapseId", apnsID: apnsID, now: now)
        }
        if req.body.isEmpty { return apnsError(state, 400, "PayloadEmpty", apnsID: apnsID, now: now) }
        let limit = pushType.map { MockBytes.equal($0, "voip") } == true ? 5120 : 4096
        if req.body.count > limit { return apnsError(state, 413, "PayloadTooLarge", apnsID: apnsID, now: now) }
        guard MockJSONValidator.validate(req.body) == .object else {
            return apnsError(state, 400, "BadPayload", apnsID: apnsID, now: now)
        }
        // The request is well-formed and authenticated from here on.
        authenticated = true

        if !config.apns.isEmpty, let m = config.apns.match(String(decoding: token, as: UTF8.self)[...]) {
            switch m {
            case .unregistered: return apnsError(state, 410, "Unregistered", apnsID: apnsID, now: now)
            case .invalid: return apnsError(state, 400, "BadDeviceToken", apnsID: apnsID, now: now)
            case .reason(let r):
                return apnsError(state, r.status, r.reason, apnsID: apnsID, now: now, retryAfter: r.retryAfter)
            }
        }
        if config.errorRate > 0, !config.errorStatuses.isEmpty, state.nextUnit() < config.errorRate {
            let s = config.errorStatuses[Int(state.nextRandom() % UInt64(config.errorStatuses.count))]
            let reason = s == 429 ? "TooManyRequests" : s == 500 ? "InternalServerError" : "ServiceUnavailable"
            return apnsError(state, s, reason, apnsID: apnsID, now: now)
        }
        var duplicate = false
        if config.duplicateTracking, duplicateTrackingAllowed, let id = apnsID,
            let key = MockDuplicateTracker.key(uuid: id[...])
        {
            duplicate = duplicates.insert(key)
        }
        state.counters.withLock { c in
            c.requests += 1
            c.apnsAccepted += 1
            if duplicate { c.duplicates += 1 }
        }
        noteAccepted()
        acceptJournal?.recordAPNs(token: token, apnsID: apnsIDBytes, collapseID: raw.collapseID)
        if config.capturePushes > 0 {
            var headers: [String: String] = [:]
            for (name, value) in [
                ("apns-push-type", raw.pushType), ("apns-priority", raw.priority), ("apns-expiration", raw.expiration),
                ("apns-collapse-id", raw.collapseID), ("apns-topic", raw.topic),
            ] {
                if let value { headers[name] = String(decoding: value, as: UTF8.self) }
            }
            let push = MockCapturedPush(
                provider: .apns, token: String(decoding: token, as: UTF8.self), headers: headers, body: req.body)
            captured.withLock { $0.append(push, keep: config.capturePushes) }
        }
        // Never indexed (RFC 7541 §6.2.3): a value unique per response would only churn both HPACK tables.
        return HTTP2Response(status: 200, headers: [HTTP2Header("apns-id", apnsID ?? state.uuid(), sensitive: true)])
    }

    static func isUUID(_ s: String) -> Bool {
        var s = s
        return s.withUTF8 { isUUID($0) }
    }

    static func isUUID(_ s: UnsafeBufferPointer<UInt8>) -> Bool {
        guard s.count == 36 else { return false }
        for (i, c) in s.enumerated() {
            if i == 8 || i == 13 || i == 18 || i == 23 {
                if c != UInt8(ascii: "-") { return false }
            } else if hexValue(c) == nil {
                return false
            }
        }
        return true
    }
}
