import Dispatch
import Foundation
import Logging
import Synchronization
import VolleyCore
import VolleyHTTP2

/// Builds the transport for one endpoint (production: `HTTP2ConnectionPool`).
public typealias FCMSubmitterFactory = @Sendable (HTTP2ClientConfiguration) throws -> any HTTP2RequestSubmitter

/// One app's FCM settings (YAML `apps[].fcm`).
public struct FCMAppConfiguration: Sendable, Hashable {
    public static let defaultEndpoint = "https://fcm.googleapis.com"
    /// FCM serves ~100 concurrent streams per connection (firebase-admin-java, Pushiko; more ⇒ GOAWAY).
    public static let maxStreamsPerConnection = 100

    public var name: String
    public var serviceAccountFile: String
    public var endpoint: String
    public var caFile: String?
    /// Connections to the FCM endpoint.
    public var connections: Int
    /// Streams each connection opens at most (`fcm.maxStreams`); the server's SETTINGS may lower it further.
    public var maxConcurrentStreams: Int
    public var requestTimeoutSeconds: Double
    /// The project's send budget for the whole fleet (`fcm.maxPerMinute`; FCM's default quota is 600,000 a minute).
    public var maxPerMinute: Int

    public init(
        name: String, serviceAccountFile: String, endpoint: String? = nil, caFile: String? = nil,
        connections: Int = 4, maxConcurrentStreams: Int = maxStreamsPerConnection,
        requestTimeoutSeconds: Double = 30, maxPerMinute: Int = 600_000
    ) {
        self.maxPerMinute = maxPerMinute
        self.name = name
        self.serviceAccountFile = serviceAccountFile
        self.endpoint = endpoint ?? Self.defaultEndpoint
        self.caFile = caFile
        self.connections = connections
        self.maxConcurrentStreams = maxConcurrentStreams
        self.requestTimeoutSeconds = requestTimeoutSeconds
    }

    /// Connections needed for `concurrency` requests in flight at 100 streams each.
    public static func connections(forConcurrency concurrency: Int) -> Int {
        max(1, (concurrency + maxStreamsPerConnection - 1) / maxStreamsPerConnection)
    }
}

/// The FCM HTTP v1 sender for one app. Each send is one `DeliveryStateMachine` run (retries, access token refresh,
/// the outcome table); `send` completes once with a terminal outcome.
public final class FCMProvider: PushSender, ShellSender, @unchecked Sendable {
    public var platform: Platform { .android }
    public let app: FCMAppConfiguration
    public let account: FCMServiceAccount
    public let tokens: FCMAccessTokenProvider

    /// The stop switch, the fleet's pause and budget, the retry timers: what FCM shares with APNs around its requests.
    package let shell: ProviderSendShell
    private let transport: any HTTP2RequestSubmitter
    private let tokenTransport: any HTTP2RequestSubmitter
    private let authority: String
    /// `:authority` and `authorization` encoded for the current access token: re-encoded when the token changes,
    /// not per send (an allocation and a copy of the token each time; Google allows access tokens up to 2 KB).
    private let authorizationFields = Mutex<(authorization: String, fields: HTTP2HeaderBlock)?>(nil)

    public init(
        app: FCMAppConfiguration, clock: any WallClock = SystemClock(), retryPolicy: RetryPolicy = RetryPolicy(),
        logger: Logger, pauses: FleetPauses? = nil, makeTransport: @escaping FCMSubmitterFactory
    ) throws {
        self.app = app
        var logger = logger
        logger[metadataKey: "app"] = "\(app.name)"
        logger[metadataKey: "provider"] = "fcm"
        account = try FCMServiceAccount.load(file: app.serviceAccountFile, app: app.name)
        // This app's own timer queue: sends held through the fleet's pause or budget, the back-off between retries.
        let timers = DispatchQueue(label: "volley.fcm.timers.\(app.name)")
        // `pauses`: this project's 429/503 pauses are shared with the fleet; a throttle pauses every worker's sends
        // to the project, and this worker holds its sends while any worker's pause lasts. The project's send budget
        // (one atomic decrement per send, a block from Redis now and then) holds them the same way.
        let projectKey = FleetPauseKey(provider: .fcm, target: account.projectID)
        shell = ProviderSendShell(
            app: app.name, providerName: "FCM", retryPolicy: retryPolicy, clock: clock,
            pauseGate: pauses?.gate(for: projectKey),
            budgetGate: pauses?.budget(for: projectKey, perMinute: app.maxPerMinute), pausingStatuses: [429, 503],
            logStop: { [logger] message in logger.error("\(message)") },
            schedule: { seconds, work in timers.asyncAfter(deadline: .now() + seconds, execute: work) })
        let endpoint = try FCMEndpoint(url: app.endpoint, app: app.name, what: "fcm.endpoint")
        let tokenEndpoint = try FCMEndpoint(url: account.tokenURI, app: app.name, what: "token_uri")
        authority = endpoint.authority
        do {
            transport = try makeTransport(
                HTTP2ClientConfiguration(
                    host: endpoint.host, port: endpoint.port, caFile: app.caFile, connections: max(1, app.connections),
                    maxConcurrentStreamsCap: max(1, app.maxConcurrentStreams),
                    requestTimeoutSeconds: app.requestTimeoutSeconds))
            tokenTransport = try makeTransport(
                HTTP2ClientConfiguration(
                    host: tokenEndpoint.host, port: tokenEndpoint.port, caFile: app.caFile, connections: 1,
                    maxConcurrentStreamsCap: FCMAppConfiguration.maxStreamsPerConnection, requestTimeoutSeconds: 30))
        } catch {
            throw FCMConfigurationError(app: app.name, "FCM endpoint \(app.endpoint): \(error)")
        }
        tokens = try FCMAccessTokenProvider(
            app: app.name, account: account, transport: tokenTransport,
            clock: clock, logger: logger)
    }

    public var stopReason: String? { shell.stopSwitch.message }

    public func prepare(_ notification: VolleyCore.Notification, jobID: JobID, tracking: MessageTracking?) throws
        -> any PreparedNotification
    {
        try FCMPreparedNotification(notification, projectID: account.projectID, tracking: tracking)
    }

    public func personalized(
        _ prepared: any PreparedNotification, for device: Device, with payload: PersonalPayload
    ) throws(PersonalPayloadError) -> any PreparedNotification {
        guard let fcm = prepared as? FCMPreparedNotification else {
            throw PersonalPayloadError("INVALID_ARGUMENT", "not an FCM notification")
        }
        return try fcm.personalized(for: device, with: payload)
    }

    /// A prepared notification with `validate_only` (dry runs).
    public func prepare(_ notification: VolleyCore.Notification, validateOnly: Bool) throws -> FCMPreparedNotification {
        try FCMPreparedNotification(notification, projectID: account.projectID, validateOnly: validateOnly)
    }

    /// The per-send path: with a cached access token (the common case) one object per send, a `FanoutRequest` that
    /// is the transport's request and carries the delivery; otherwise (token being fetched) through `attemptOnce`.
    /// A 200 is delivered at once; any other answer goes to the delivery's state machine.
    public func send(
        _ prepared: any PreparedNotification, to device: Device, jobID: JobID,
        receiver: any DeliveryReceiver
    ) {
        sendThroughShell(prepared, to: device, receiver: receiver)
    }

    /// A send the app's stop switch and the fleet's pause and budget let through (`sendThroughShell`).
    package func sendFirstAttempt(
        _ fcm: FCMPreparedNotification, prepared: any PreparedNotification, to device: Device,
        receiver: any DeliveryReceiver, holdable: Bool
    ) {
        guard let auth = tokens.cachedAuthorization() else {
            return attemptOnce(fcm, to: device) { [self] first, credential in
                PendingDelivery(
                    sender: self, prepared: prepared, device: device, credential: credential,
                    receiver: receiver
                ).firstAttemptCompleted(first)
            }
        }
        var request = fcm.request(for: device, authorizationFields: fields(for: auth))
        request.statusOnlyOnSuccess = true // a 200's message name is not kept (DeliveryOutcome.accepted)
        let delivery = PendingDelivery(
            sender: self, prepared: prepared, device: device, credential: auth,
            receiver: receiver)
        transport.submit(FanoutRequest(request, delivery, holdingFor: holdable ? self : nil))
    }

    private func fields(for authorization: String) -> HTTP2HeaderBlock {
        authorizationFields.withLock { cached in
            if let cached, cached.authorization == authorization { return cached.fields }
            let fields = FCMPreparedNotification.authorizationFields(authority: authority, authorization: authorization)
            cached = (authorization, fields)
            return fields
        }
    }

    /// A fan-out send's first attempt: the transport's request and its delivery. FCM supplies only the decoder.
    final class FanoutRequest: HTTP2PendingRequest, @unchecked Sendable {
        let delivery: PendingDelivery
        /// The provider whose pause holds the request before it is written; nil: not held again.
        let holder: FCMProvider?

        init(_ request: HTTP2Request, _ delivery: PendingDelivery, holdingFor holder: FCMProvider?) {
            self.delivery = delivery
            self.holder = holder
            super.init(request)
        }

        override var holdsBeforeWriting: Bool { holder?.shell.pausedNow ?? false }

        override func complete(_ answer: Result<HTTP2Response, HTTP2Error>) {
            if case .success(let response) = answer, OutcomeTable.isAccepted(status: response.status) {
                return delivery.accepted()
            }
            if let holder, case .failure(let e) = answer, e.kind == .held { return holder.sendHeld(delivery) }
            delivery.firstAttemptCompleted(FCMResponseDecoder.decode(answer))
        }
    }

    /// A retry handed a notification prepared for APNs.
    package static var wrongPlatformAttempt: AttemptResult {
        .transportFailure(.fcm, reason: "WrongPlatform", resendIsSafe: false, message: "not an FCM notification")
    }

    /// 401: drop the rejected token; the resend's `authorization` call refreshes (single-flight).
    package func refreshCredential(rejected used: String?) -> Bool {
        if let used { tokens.invalidate(used) }
        return true
    }

    /// One request, no retries (used by `volley test-push`). The second value is the authorization sent.
    public func attemptOnce(
        _ prepared: FCMPreparedNotification, to device: Device,
        completion: @escaping @Sendable (AttemptResult, String?) -> Void
    ) {
        if let auth = tokens.cachedAuthorization() {
            let request = prepared.request(for: device, authority: authority, authorization: auth)
            transport.submit(request) { result in completion(FCMResponseDecoder.decode(result), auth) }
            return
        }
        tokens.authorization { [self] result in
            switch result {
            case .failure(let error):
                // No access token. Refused (4xx, e.g. invalid_grant) or a token endpoint this app's TLS settings
                // cannot reach (untrusted certificate, handshake refused) → fix-app. Unreachable or 5xx: nothing
                // was sent to FCM, so retrying is safe.
                completion(AttemptResult(answer: error.answer, message: error.description), nil)
            case .success(let auth):
                let request = prepared.request(for: device, authority: authority, authorization: auth)
                transport.submit(request) { result in completion(FCMResponseDecoder.decode(result), auth) }
            }
        }
    }

    public func shutdown() { shutdown(completion: {}) }

    /// Closes the app's connections (FCM's and the token endpoint's); `completion` runs once every one is closed
    /// and freed (a process may then exit without a connection still inside OpenSSL).
    public func shutdown(completion: @escaping @Sendable () -> Void) {
        let group = DispatchGroup()
        for t in [transport, tokenTransport] {
            group.enter()
            t.shutdown { group.leave() }
        }
        group.notify(queue: .global(), execute: completion)
    }
}

/// FCM answers → `AttemptResult`. Google's error body:
/// `{"error": {"code", "message", "status", "details": [{"@type": "…FcmError", "errorCode"},
///  {"@type": "…BadRequest", "fieldViolations": [{"field", "description"}]}]}}`.
public enum FCMResponseDecoder {
    public static func decode(_ result: Result<HTTP2Response, HTTP2Error>) -> AttemptResult {
        switch result {
        case .failure(let error):
            return .transportFailure(
                .fcm, reason: OutcomeReason("transport:" + error.kind.rawValue),
                resendIsSafe: error.resendIsSafe, message: error.description)
        case .success(let response):
            return decode(response)
        }
    }

    public static func decode(_ response: HTTP2Response) -> AttemptResult {
        // Fan-out sends keep no body for a 200 (statusOnlyOnSuccess): a success body is parsed only for test-push,
        // which shows the message name.
        let json = (try? JSONSerialization.jsonObject(with: Data(response.body))) as? [String: Any]
        if response.status == 200 {
            return AttemptResult(
                answer: ProviderAnswer(provider: .fcm, status: 200), messageID: json?["name"] as? String)
        }
        let error = json?["error"] as? [String: Any]
        let status = error?["status"] as? String
        let message = error?["message"] as? String
        var errorCode: String?
        var namesToken = false
        for detail in (error?["details"] as? [[String: Any]]) ?? [] {
            if let code = detail["errorCode"] as? String, errorCode == nil { errorCode = code }
            for v in (detail["fieldViolations"] as? [[String: Any]]) ?? [] {
                if let field = v["field"] as? String, field == "message.token" { namesToken = true }
            }
        }
        // FCM often says only "The registration token is not a valid FCM registration token".
        if !namesToken, let m = message?.lowercased(), m.contains("registration token") { namesToken = true }
        let reason = (errorCode ?? status).map { OutcomeReason($0) }
        let answer = ProviderAnswer(provider: .fcm, status: response.status, reason: reason, namesToken: namesToken)
        var text = "FCM \(response.status)"
        if let reason { text += " \(reason)" }
        if let message { text += ": \(message)" }
        return AttemptResult(answer: answer, retryAfter: response.header("retry-after"), message: text)
    }
}
