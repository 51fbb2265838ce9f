import Foundation
import Logging
import VolleyAPNs
import VolleyCore
import VolleyFCM
import VolleyHTTP2

/// What `volley test-push` prints: the provider's answer and what Volley does about it.
/// JSON keys `status`, `reason`, `outcome` are a contract.
public struct TestPushResult: Sendable, Codable, Hashable {
    /// HTTP status the provider answered; nil when nothing was sent (bad config, invalid notification, dry run on
    /// APNs).
    public var status: Int?
    public var reason: String?
    /// `accepted`, `remove-token`, `retry`, `fix-app`, `invalid-notification` or `unknown`.
    public var outcome: String
    public var apnsId: String?
    public var messageName: String?
    /// Longer explanation (provider message, what to do).
    public var message: String?

    public var accepted: Bool { outcome == OutcomeDecision.accepted.rawValue }

    enum CodingKeys: String, CodingKey { case status, reason, outcome, apnsId, messageName, message }

    /// `status`, `reason` and `outcome` are always present (null when there is no value).
    public func encode(to encoder: any Encoder) throws {
        var c = encoder.container(keyedBy: CodingKeys.self)
        try c.encode(status, forKey: .status)
        try c.encode(reason, forKey: .reason)
        try c.encode(outcome, forKey: .outcome)
        try c.encodeIfPresent(apnsId, forKey: .apnsId)
        try c.encodeIfPresent(messageName, forKey: .messageName)
        try c.encodeIfPresent(message, forKey: .message)
    }

    /// Human-readable lines.
    public var text: String {
        var lines: [String] = []
        lines.append("status:  \(status.map(String.init) ?? "-")")
        lines.append("reason:  \(reason ?? "-")")
        if let apnsId { lines.append("apns-id: \(apnsId)") }
        if let messageName { lines.append("message: \(messageName)") }
        lines.append("outcome: \(outcome)")
        if let message { lines.append("detail:  \(message)") }
        return lines.joined(separator: "\n")
    }
}

/// `volley test-push` as a function tests can call: one notification to one token, one answer.
public enum TestPush {
    public struct Request: Sendable {
        public var app: String
        public var platform: Platform
        public var token: String
        public var notification: VolleyCore.Notification
        public var dryRun: Bool
        public var locale: String?
        public var environment: APNSEnvironment?
        public init(
            app: String, platform: Platform, token: String, notification: VolleyCore.Notification, dryRun: Bool = false,
            locale: String? = nil, environment: APNSEnvironment? = nil
        ) {
            self.app = app
            self.platform = platform
            self.token = token
            self.notification = notification
            self.dryRun = dryRun
            self.locale = locale
            self.environment = environment
        }
    }

    public static func run(
        _ request: Request, apps: [ProviderApp], clock: any WallClock = SystemClock(),
        logger: Logger, makeTransport: @escaping HTTP2SubmitterFactory
    ) async -> TestPushResult {
        guard let app = apps.first(where: { $0.name == request.app }) else {
            let known = apps.map(\.name).joined(separator: ", ")
            return TestPushResult(
                status: nil, reason: "UnknownApp", outcome: OutcomeDecision.fixApp.rawValue,
                message: "no app named \(request.app) in the config (apps: \(known.isEmpty ? "none" : known))")
        }
        let jobID = JobID.generated(prefix: "test-push-")
        let device = Device(
            platform: request.platform, token: DeviceToken(request.token),
            environment: request.environment, locale: request.locale)
        switch request.platform {
        case .ios:
            guard let config = app.apns else { return missing(app: app.name, platform: "apns") }
            let provider: APNSProvider
            do {
                provider = try APNSProvider(
                    app: config, tokens: APNSTokenRegistry(clock: clock), clock: clock,
                    logger: logger, makeTransport: makeTransport)
            } catch { return configurationFailure(error) }
            let result = await apns(
                request, provider: provider, config: config, device: device, jobID: jobID, clock: clock)
            await closed(provider.shutdown(completion:))
            return result
        case .android:
            guard let config = app.fcm else { return missing(app: app.name, platform: "fcm") }
            let provider: FCMProvider
            do {
                provider = try FCMProvider(app: config, clock: clock, logger: logger, makeTransport: makeTransport)
            } catch { return configurationFailure(error) }
            let result = await fcm(request, provider: provider, device: device)
            await closed(provider.shutdown(completion:))
            return result
        }
    }

    /// Waits until a provider's connections are closed and freed, so `volley test-push` exits with nothing of them
    /// still inside OpenSSL (its exit-time cleanup would crash under them). Bounded: a connection the peer never
    /// lets go does not keep the command from printing its answer.
    private static func closed(_ shutdown: (@escaping @Sendable () -> Void) -> Void) async {
        let done = DispatchGroup()
        done.enter()
        shutdown { done.leave() }
        _ = try? await runBlocking { done.wait(timeout: .now() + 5) }
    }

    private static func apns(
        _ request: Request, provider: APNSProvider, config: APNSAppConfiguration, device: Device, jobID: JobID,
        clock: any WallClock
    ) async -> TestPushResult {
        let prepared: APNSPreparedNotification
        do {
            prepared = try APNSPreparedNotification(
                request.notification, jobID: jobID, bundleID: config.topic, now: clock.now())
        } catch { return invalid(error) }
        if request.dryRun {
            // APNs has no validate-only mode: the request is built, signed and size-checked, not sent.
            _ = try? provider.tokenProvider?.authorization()
            return TestPushResult(
                status: nil, reason: "DryRun", outcome: OutcomeDecision.accepted.rawValue,
                apnsId: APNSPreparedNotification.apnsID(jobID: jobID, token: device.token),
                message:
                    "dry run: \(prepared.payloadBytes)-byte payload, push type \(prepared.pushType.rawValue), "
                    + "topic \(prepared.topic), priority \(prepared.priority); validated locally, not sent "
                    + "(APNs has no validate-only mode)"
            )
        }
        let result = await attemptWithRefresh(
            attempt: { done in provider.attemptOnce(prepared, to: device, completion: done) },
            refresh: { auth in auth.map { provider.tokenProvider?.refreshAfterRejection(of: $0) ?? false } ?? false
            })
        var out = summary(result)
        out.apnsId = result.messageID ?? APNSPreparedNotification.apnsID(jobID: jobID, token: device.token)
        return out
    }

    private static func fcm(_ request: Request, provider: FCMProvider, device: Device) async -> TestPushResult {
        let prepared: FCMPreparedNotification
        do { prepared = try provider.prepare(request.notification, validateOnly: request.dryRun) } catch {
            return invalid(error)
        }
        let result = await attemptWithRefresh(
            attempt: { done in provider.attemptOnce(prepared, to: device, completion: done) },
            refresh: { auth in
                if let auth { provider.tokens.invalidate(auth) }
                return true
            })
        var out = summary(result)
        out.messageName = result.messageID
        return out
    }

    /// One attempt; on `refresh-credential` refresh and resend once (as a real send would). No backoff retries:
    /// a `retry` answer is reported as such.
    private static func attemptWithRefresh(
        attempt: @escaping @Sendable (@escaping @Sendable (AttemptResult, String?) -> Void) -> Void,
        refresh: @escaping @Sendable (String?) -> Bool
    ) async -> AttemptResult {
        let first = await withCheckedContinuation { (c: CheckedContinuation<(AttemptResult, String?), Never>) in
            attempt { r, a in c.resume(returning: (r, a)) }
        }
        guard first.0.decision == .refreshCredential, refresh(first.1) else { return first.0 }
        return await withCheckedContinuation { (c: CheckedContinuation<AttemptResult, Never>) in
            attempt { r, _ in c.resume(returning: r) }
        }
    }

    private static func summary(_ r: AttemptResult) -> TestPushResult {
        var decision = r.decision
        // A second credential rejection after a refresh: Volley would fail the delivery and retry later.
        if decision == .refreshCredential { decision = .retry }
        let status: Int? = r.answer.status == 0 ? nil : r.answer.status
        var message = r.message
        if decision != .accepted {
            message = [r.message, OutcomeTable.explanation(decision)].compactMap { $0 }.joined(separator: " — ")
        }
        return TestPushResult(
            status: status, reason: r.answer.reason?.rawValue ?? (status == nil ? "NoResponse" : nil),
            outcome: decision.rawValue, message: message)
    }

    private static func missing(app: String, platform: String) -> TestPushResult {
        TestPushResult(
            status: nil, reason: "NotConfigured", outcome: OutcomeDecision.fixApp.rawValue,
            message: "app \(app) has no \(platform) section in the config")
    }

    private static func configurationFailure(_ error: any Error) -> TestPushResult {
        TestPushResult(
            status: nil, reason: "Configuration", outcome: OutcomeDecision.fixApp.rawValue, message: "\(error)")
    }

    private static func invalid(_ error: any Error) -> TestPushResult {
        let reason = (error as? NotificationError)?.reason.rawValue ?? "InvalidNotification"
        let message = (error as? NotificationError)?.message ?? "\(error)"
        return TestPushResult(
            status: nil, reason: reason, outcome: OutcomeDecision.invalidNotification.rawValue, message: message)
    }
}
