import Foundation
import Logging
import VolleyAPNs
import VolleyCore
import VolleyFCM
import VolleyHTTP2

/// One configured app's provider settings, in the providers' own types.
public struct ProviderApp: Sendable, Hashable {
    public var name: String
    public var apns: APNSAppConfiguration?
    public var fcm: FCMAppConfiguration?
    public init(name: String, apns: APNSAppConfiguration? = nil, fcm: FCMAppConfiguration? = nil) {
        self.name = name
        self.apns = apns
        self.fcm = fcm
    }
}

public enum ProviderApps {
    /// Maps `apps[]` of the configuration to the providers' configuration types.
    public static func from(_ configuration: VolleyConfiguration) -> [ProviderApp] {
        configuration.apps.map { app in
            var out = ProviderApp(name: app.name.rawValue)
            if let a = app.apns {
                let credentials: APNSAppConfiguration.Credentials =
                    switch a.auth {
                    case .token(let keyFile, let keyId, let teamId):
                        .token(keyFile: keyFile, keyID: keyId, teamID: teamId)
                    case .certificate(let certFile, let password, let keyFile):
                        .certificate(certFile: certFile, password: password, keyFile: keyFile)
                    }
                out.apns = APNSAppConfiguration(
                    name: app.name.rawValue, credentials: credentials, topic: a.topic,
                    environment: a.environment, host: a.host, port: a.port, caFile: a.caFile,
                    connections: a.connections, maxConcurrentStreams: a.maxStreams)
            }
            if let f = app.fcm {
                out.fcm = FCMAppConfiguration(
                    name: app.name.rawValue, serviceAccountFile: f.serviceAccountFile,
                    endpoint: f.endpoint, caFile: f.caFile, connections: f.connections,
                    maxConcurrentStreams: f.maxStreams, maxPerMinute: f.maxPerMinute)
            }
            return out
        }
    }

    /// Builds every app's senders. An app whose credentials cannot be used (expired certificate, unreadable key)
    /// is logged with its name and gets a sender that answers every send with that `fix-app` error, so its
    /// jobs finish with a clear reason while the other apps keep going.
    /// `fleet`: share APNs provider tokens and provider pauses with the other workers (`volley worker`).
    public static func senders(
        for apps: [ProviderApp], clock: any WallClock = SystemClock(), logger: Logger, fleet: FleetSync? = nil,
        makeTransport: @escaping HTTP2SubmitterFactory, makeFCMTransport: HTTP2SubmitterFactory? = nil
    ) -> [AppName: [Platform: any PushSender]] {
        let tokens = APNSTokenRegistry(clock: clock)
        var out: [AppName: [Platform: any PushSender]] = [:]
        for app in apps {
            var senders: [Platform: any PushSender] = [:]
            if let a = app.apns {
                do {
                    let provider = try APNSProvider(
                        app: a, tokens: tokens, clock: clock, logger: logger, pauses: fleet?.pauses,
                        makeTransport: makeTransport)
                    if let fleet, let tokenProvider = provider.tokenProvider {
                        tokenProvider.shareAcrossFleet(store: fleet.store, owner: fleet.owner, logger: logger)
                    }
                    senders[.ios] = provider
                } catch {
                    logger.error("app \(app.name) stopped for iOS: \(error)")
                    senders[.ios] = UnavailableSender(platform: .ios, reason: "\(error)")
                }
            }
            if let f = app.fcm {
                do {
                    senders[.android] = try FCMProvider(
                        app: f, clock: clock, logger: logger, pauses: fleet?.pauses,
                        makeTransport: makeFCMTransport ?? makeTransport)
                } catch {
                    logger.error("app \(app.name) stopped for Android: \(error)")
                    senders[.android] = UnavailableSender(platform: .android, reason: "\(error)")
                }
            }
            out[AppName(app.name)] = senders
        }
        return out
    }
}

/// The sender of an app that could not start: every send ends `fix-app` with the startup error.
public final class UnavailableSender: PushSender, @unchecked Sendable {
    struct Prepared: PreparedNotification {
        let platform: Platform
        var payloadBytes: Int { 0 }
    }
    public let platform: Platform
    public let reason: String
    public init(platform: Platform, reason: String) {
        self.platform = platform
        self.reason = reason
    }
    public func prepare(_ notification: VolleyCore.Notification, jobID: JobID, tracking: MessageTracking?) throws
        -> any PreparedNotification
    {
        Prepared(platform: platform)
    }
    /// Every send fails `fix-app` whatever its payload.
    public func personalized(
        _ prepared: any PreparedNotification, for device: Device, with payload: PersonalPayload
    ) throws(PersonalPayloadError) -> any PreparedNotification {
        prepared
    }
    public func send(
        _ prepared: any PreparedNotification, to device: Device, jobID: JobID,
        receiver: any DeliveryReceiver
    ) {
        receiver.delivered(device, .rejected(status: 0, reason: OutcomeReason(reason), action: .fixApp))
    }
}
