import Dispatch
import Foundation
import Logging
import Synchronization
import VolleyCore
import VolleyHTTP2

/// Builds the transport for one endpoint (production: `HTTP2ConnectionPool`). Throws when the endpoint
/// cannot be used at startup, e.g. a client certificate that is expired or unreadable.
public typealias HTTP2SubmitterFactory = @Sendable (HTTP2ClientConfiguration) throws -> any HTTP2RequestSubmitter

/// The APNs sender for one app: token or certificate auth, one pool per environment endpoint (so tokens of
/// different teams never share a connection: a pool belongs to one app, an app to one team).
/// Each send is one `DeliveryStateMachine` run (retries, credential refresh, the outcome table); `send` completes
/// once with a terminal outcome.
public final class APNSProvider: PushSender, ShellSender, @unchecked Sendable {
    public var platform: Platform { .ios }
    public let app: APNSAppConfiguration
    public let tokenProvider: APNSTokenProvider?

    /// The stop switch, the fleet's pause, the retry timers: what APNs shares with FCM around its requests.
    package let shell: ProviderSendShell
    private let makeTransport: HTTP2SubmitterFactory
    private let lock = NSLock()
    /// One pool per environment endpoint, made on first use (two slots: no hashing on the per-send lookup).
    private var production: Endpoint?
    private var sandbox: Endpoint?
    private var isShutDown = false
    /// The app's own environment, made in `init` and kept: the per-send path takes no lock to find it.
    private let defaultEndpoint: Endpoint
    /// One environment's pool, its `:authority`, and the request prefix encoded for the current provider token.
    final class Endpoint: Sendable {
        let submitter: any HTTP2RequestSubmitter
        let authority: String
        private let prefix = Mutex<(authorization: APNSAuthorization?, fields: HTTP2HeaderBlock)?>(nil)
        init(submitter: any HTTP2RequestSubmitter, authority: String) {
            self.submitter = submitter
            self.authority = authority
        }

        /// `:method`, `:authority`, `authorization` for `authorization` (re-encoded only when the token changes).
        func requestPrefix(_ authorization: APNSAuthorization?) -> HTTP2HeaderBlock {
            prefix.withLock { cached in
                if let cached, cached.authorization === authorization { return cached.fields }
                let fields = APNSPreparedNotification.requestPrefix(
                    authority: authority, authorization: authorization?.value)
                cached = (authorization, fields)
                return fields
            }
        }
    }
    /// Builds the app's pool for its environment now (connections open on first use): a client certificate that
    /// is expired, not yet valid or unreadable stops the app here, with an error naming it.
    public init(
        app: APNSAppConfiguration, tokens: APNSTokenRegistry, clock: any WallClock = SystemClock(),
        retryPolicy: RetryPolicy = RetryPolicy(), logger: Logger, pauses: FleetPauses? = nil,
        makeTransport: @escaping HTTP2SubmitterFactory
    ) throws {
        self.app = app
        self.makeTransport = makeTransport
        var logger = logger
        logger[metadataKey: "app"] = "\(app.name)"
        logger[metadataKey: "provider"] = "apns"
        // This app's own timer queue: sends held through the fleet's pause, the back-off between retries.
        let timers = DispatchQueue(label: "volley.apns.timers.\(app.name)")
        // `pauses`: an APNs 503 (ServiceUnavailable, Shutdown) pauses every worker's sends for this app.
        shell = ProviderSendShell(
            app: app.name, providerName: "APNs", retryPolicy: retryPolicy, clock: clock,
            pauseGate: pauses?.gate(for: FleetPauseKey(provider: .apns, target: app.topic)), pausingStatuses: [503],
            logStop: { [logger] message in logger.error("\(message)") },
            schedule: { seconds, work in timers.asyncAfter(deadline: .now() + seconds, execute: work) })
        switch app.credentials {
        case .token(let keyFile, let keyID, let teamID):
            tokenProvider = try tokens.provider(app: app.name, keyFile: keyFile, keyID: keyID, teamID: teamID)
        case .certificate:
            tokenProvider = nil
        }
        // Open the pool now (connections stay lazy): a certificate that cannot be used stops the app here.
        defaultEndpoint = try Self.makeEndpoint(app: app, env: app.environment, makeTransport: makeTransport)
        switch app.environment {
        case .production: production = defaultEndpoint
        case .sandbox: sandbox = defaultEndpoint
        }
    }

    /// Why this app stopped sending (a `fix-app` answer), if it did.
    public var stopReason: String? { shell.stopSwitch.message }

    public func prepare(_ notification: VolleyCore.Notification, jobID: JobID, tracking: MessageTracking?) throws
        -> any PreparedNotification
    {
        try APNSPreparedNotification(
            notification, jobID: jobID, bundleID: app.topic, now: clock.now(), tracking: tracking)
    }

    public func personalized(
        _ prepared: any PreparedNotification, for device: Device, with payload: PersonalPayload
    ) throws(PersonalPayloadError) -> any PreparedNotification {
        guard let apns = prepared as? APNSPreparedNotification else {
            throw PersonalPayloadError("BadPayload", "not an APNs notification")
        }
        return try apns.personalized(for: device, with: payload)
    }

    /// The per-send path, one object per send: a `FanoutRequest` is the transport's request and carries the
    /// delivery. A 200 is delivered at once; any other answer goes to the delivery's state machine.
    public func send(
        _ prepared: any PreparedNotification, to device: Device, jobID: JobID,
        receiver: any DeliveryReceiver
    ) {
        sendThroughShell(prepared, to: device, receiver: receiver)
    }

    /// A send the app's stop switch and the fleet's pause let through (`sendThroughShell`).
    package func sendFirstAttempt(
        _ apns: APNSPreparedNotification, prepared: any PreparedNotification, to device: Device,
        receiver: any DeliveryReceiver, holdable: Bool
    ) {
        let attempt: Attempt
        do {
            attempt = try makeAttempt(apns, to: device, statusOnlyOnSuccess: true)
        } catch {
            return PendingDelivery(
                sender: self, prepared: prepared, device: device, credential: nil,
                receiver: receiver
            ).firstAttemptCompleted(error.result)
        }
        let delivery = PendingDelivery(
            sender: self, prepared: prepared, device: device,
            credential: attempt.authorization?.value, receiver: receiver)
        attempt.submitter.submit(
            FanoutRequest(attempt.request, delivery, submitter: attempt.submitter, holdingFor: holdable ? self : nil))
    }

    /// A fan-out send's first attempt: the transport's request and its delivery. APNs supplies only the decoder.
    final class FanoutRequest: HTTP2PendingRequest, @unchecked Sendable {
        let delivery: PendingDelivery
        let submitter: any HTTP2RequestSubmitter
        /// The provider whose pause holds the request before it is written; nil: not held again.
        let holder: APNSProvider?

        init(
            _ request: HTTP2Request, _ delivery: PendingDelivery, submitter: any HTTP2RequestSubmitter,
            holdingFor holder: APNSProvider?
        ) {
            self.delivery = delivery
            self.submitter = submitter
            self.holder = holder
            super.init(request)
        }

        override var holdsBeforeWriting: Bool { holder?.shell.pausedNow ?? false }

        override func complete(_ answer: Result<HTTP2Response, HTTP2Error>) {
            if case .success(let response) = answer, OutcomeTable.isAccepted(status: response.status) {
                return delivery.accepted()
            }
            if let holder, case .failure(let e) = answer, e.kind == .held { return holder.sendHeld(delivery) }
            let result = APNSResponseDecoder.decode(answer)
            APNSProvider.retireIfAsked(result, answer, submitter)
            delivery.firstAttemptCompleted(result)
        }
    }

    /// `429 TooManyProviderTokenUpdates` is about the connection that carried the request: it is retired (GOAWAY
    /// once its open streams are answered) and replaced after a back-off with jitter (the pool's decision), and the
    /// request goes out again through the outcome table's retry, on another connection (APNs rejected it: resending
    /// is safe). Called before the delivery sees the answer, so its retry never lands on the retired connection.
    static func retireIfAsked(
        _ result: AttemptResult, _ answer: Result<HTTP2Response, HTTP2Error>, _ submitter: any HTTP2RequestSubmitter
    ) {
        guard result.answer.status == 429, result.answer.reason?.rawValue == "TooManyProviderTokenUpdates",
            case .success(let response) = answer, let connection = response.connection
        else { return }
        submitter.retireConnection(connection)
    }

    /// A retry handed a notification prepared for FCM.
    package static var wrongPlatformAttempt: AttemptResult {
        AttemptSetupError(message: "not an APNs notification").result
    }

    /// `ExpiredProviderToken`: a newer token when another send already made one or the current one is old enough.
    package func refreshCredential(rejected used: String?) -> Bool {
        guard let tokenProvider, let used else { return false }
        return tokenProvider.refreshAfterRejection(of: used)
    }

    /// One request, no retries: what the provider answered. `volley test-push` uses this directly.
    /// The second value is the `authorization` header that was sent (nil for certificate auth).
    public func attemptOnce(
        _ prepared: APNSPreparedNotification, to device: Device,
        completion: @escaping @Sendable (AttemptResult, String?) -> Void
    ) {
        let attempt: Attempt
        do { attempt = try makeAttempt(prepared, to: device) } catch { return completion(error.result, nil) }
        let submitter = attempt.submitter
        submitter.submit(attempt.request) { answer in
            let result = APNSResponseDecoder.decode(answer)
            Self.retireIfAsked(result, answer, submitter)
            completion(result, attempt.authorization?.value)
        }
    }

    /// One attempt's request, the pool it goes to, and the provider token it carries.
    struct Attempt {
        let request: HTTP2Request
        let submitter: any HTTP2RequestSubmitter
        let authorization: APNSAuthorization?
    }

    /// An attempt that could not be made (no pool for the device's environment, no provider token).
    struct AttemptSetupError: Error {
        let message: String
        var result: AttemptResult {
            AttemptResult(
                answer: ProviderAnswer(provider: .apns, status: 0, transportResendIsSafe: false),
                message: message)
        }
    }

    /// `statusOnlyOnSuccess`: the caller needs nothing of a 200 but its status (the fan-out send).
    private func makeAttempt(
        _ prepared: APNSPreparedNotification, to device: Device,
        statusOnlyOnSuccess: Bool = false
    ) throws(AttemptSetupError) -> Attempt {
        let env = device.environment ?? app.environment
        do {
            let endpoint = env == app.environment ? defaultEndpoint : try transport(for: env)
            let auth = try tokenProvider?.currentAuthorization()
            var request = prepared.request(for: device, prefix: endpoint.requestPrefix(auth))
            request.statusOnlyOnSuccess = statusOnlyOnSuccess
            return Attempt(request: request, submitter: endpoint.submitter, authorization: auth)
        } catch {
            throw AttemptSetupError(message: "\(error)")
        }
    }

    /// Closes the app's connections.
    public func shutdown() { shutdown(completion: {}) }

    /// Closes the app's connections; `completion` runs once every one is closed and freed (a process may then exit
    /// without a connection still inside OpenSSL).
    public func shutdown(completion: @escaping @Sendable () -> Void) {
        let all = lock.withLock { () -> [any HTTP2RequestSubmitter] in
            isShutDown = true
            let t = [production, sandbox].compactMap { $0?.submitter }
            production = nil
            sandbox = nil
            return t
        }
        let group = DispatchGroup()
        for t in all {
            group.enter()
            t.shutdown { group.leave() }
        }
        group.notify(queue: .global(), execute: completion)
    }

    /// The pool for a device's environment when it is not the app's own (made on first use).
    private func transport(for env: APNSEnvironment) throws -> Endpoint {
        try lock.withLock {
            switch env {
            case .production: if let t = production { return t }
            case .sandbox: if let t = sandbox { return t }
            }
            if isShutDown { throw APNSConfigurationError(app: app.name, "the APNs provider is shut down") }
            let t = try Self.makeEndpoint(app: app, env: env, makeTransport: makeTransport)
            switch env {
            case .production: production = t
            case .sandbox: sandbox = t
            }
            return t
        }
    }

    private static func makeEndpoint(
        app: APNSAppConfiguration, env: APNSEnvironment,
        makeTransport: HTTP2SubmitterFactory
    ) throws -> Endpoint {
        let config = app.clientConfiguration(for: env)
        do {
            return Endpoint(
                submitter: try makeTransport(config), authority: authority(host: config.host, port: config.port))
        } catch {
            throw APNSConfigurationError(
                app: app.name, "APNs \(env.rawValue) endpoint \(config.host):\(config.port): \(error)")
        }
    }
}

/// APNs answers → `AttemptResult` (Apple, "Handling notification responses from APNs").
public enum APNSResponseDecoder {
    struct ErrorBody: Decodable {
        var reason: String?
        var timestamp: Double?
    }

    public static func decode(_ result: Result<HTTP2Response, HTTP2Error>) -> AttemptResult {
        switch result {
        case .failure(let error):
            return .transportFailure(
                .apns, reason: OutcomeReason("transport:" + error.kind.rawValue),
                resendIsSafe: error.resendIsSafe, message: error.description)
        case .success(let response):
            return decode(response)
        }
    }

    public static func decode(_ response: HTTP2Response) -> AttemptResult {
        let apnsID = response.header("apns-id")
        if response.status == 200 {
            return AttemptResult(answer: ProviderAnswer(provider: .apns, status: 200), messageID: apnsID)
        }
        var reason: OutcomeReason?
        if !response.body.isEmpty, let body = try? JSONDecoder().decode(ErrorBody.self, from: Data(response.body)),
            let r = body.reason
        {
            // 410: `timestamp` (ms since 1970) says since when the token is invalid; the registry keeps it.
            let since = body.timestamp.map { Date(timeIntervalSince1970: $0 / 1000) }
            reason = OutcomeReason(r, tokenInvalidSince: since)
        }
        return AttemptResult(
            answer: ProviderAnswer(provider: .apns, status: response.status, reason: reason),
            messageID: apnsID, retryAfter: response.header("retry-after"),
            message: reason.map { "APNs \(response.status) \($0)" } ?? "APNs \(response.status)")
    }
}
