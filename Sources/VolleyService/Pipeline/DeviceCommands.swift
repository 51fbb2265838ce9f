import Foundation
import Logging
import VolleyConnect
import VolleyCore
import VolleyStore

/// `volley devices …` logic (blocking; run off the cooperative pool).
public enum DeviceCommands {
    public static func session(_ settings: PipelineSettings) -> RedisPipelineSession {
        var o = settings.redisOptions
        o.giveUpAfter = 10
        return RedisPipelineBackend(endpoint: settings.endpoint, store: settings.store, consumer: "cli", options: o)
            .makeRedisSession(name: "devices")
    }

    public static func register(
        settings: PipelineSettings, org: OrgID, app: AppName, user: UserID, platform: Platform,
        token: DeviceToken, environment: APNSEnvironment?, locale: String?, rsaPublicKey: String? = nil,
        cipherName: String? = nil, timeZone: String? = nil
    ) throws {
        let record = try checked(
            DeviceImportRecord(
                org: org, app: app, user: user, platform: platform, token: token, environment: environment,
                locale: locale, rsaPublicKey: rsaPublicKey, cipherName: cipherName, timeZone: timeZone))
        try session(settings).register([record])
    }

    /// A registration as every entry point checks it (the API, the `MobilePushServiceDevice` sObject, `register`,
    /// `import`): the token's form for its platform, the key and cipher; the record with its key in the registry's
    /// form. The error names the field (`token`, `rsaPublicKey`, `cipherName`, `timeZone`).
    public static func checked(_ record: DeviceImportRecord) throws(DeviceRegistrationError) -> DeviceImportRecord {
        if let problem = record.token.formProblem(for: record.platform) {
            throw DeviceRegistrationError(field: "token", message: problem)
        }
        if let zone = record.timeZone, let problem = IANAZone.problem(zone) {
            throw DeviceRegistrationError(field: "timeZone", message: problem)
        }
        var out = record
        do {
            let key = try DeviceEncryptionKey.registration(
                rsaPublicKey: record.rsaPublicKey, cipherName: record.cipherName)
            out.rsaPublicKey = key?.rsaPublicKey
            out.cipherName = key?.cipherName
        } catch {
            throw DeviceRegistrationError(field: error.field ?? "rsaPublicKey", message: error.fieldMessage)
        }
        return out
    }

    /// Device lists show the most recently registered first, per user.
    public static func list(
        settings: PipelineSettings, org: OrgID, app: AppName, user: UserID?, json: Bool,
        limit: Int, output: (String) -> Void = { print($0) }
    ) throws {
        let s = session(settings)
        let encoder = JSONEncoder()
        encoder.dateEncodingStrategy = RFC3339.encodingStrategy()
        encoder.outputFormatting = [.sortedKeys]
        var shown = 0
        func show(_ records: [DeviceRecord]) {
            for r in records where shown < limit {
                shown += 1
                if json {
                    output((try? String(decoding: encoder.encode(r), as: UTF8.self)) ?? "{}")
                } else {
                    output(
                        "\(r.user)\t\(r.platform)\t\(r.token.redacted)\t\(r.environment?.rawValue ?? "-")\t"
                            + "\(r.locale ?? "-")\tlastSeen \(RFC3339.format(r.lastSeenAt))"
                    )
                }
            }
        }
        if let user {
            show(try s.records(org: org, app: app, user: user))
        } else {
            struct Done: Error {}
            do {
                try s.forEachUserPage(org: org, app: app) { users in
                    for u in users {
                        show(try s.records(org: org, app: app, user: u))
                        if shown >= limit { throw Done() }
                    }
                }
            } catch is Done {}
            if !json {
                let (users, devices) = try s.counts(org: org, app: app)
                output(
                    "— \(devices) devices, \(users) users in \(org)/\(app)"
                        + (shown < devices ? " (showing \(shown))" : ""))
            }
        }
    }
}

/// A registration refused: the field at fault and why (never the token or key itself).
public struct DeviceRegistrationError: Error, Sendable, Hashable, CustomStringConvertible {
    public var field: String
    public var message: String
    public init(field: String, message: String) {
        self.field = field
        self.message = message
    }
    public var description: String { "\(field): \(message)" }
}

/// Unblocks SIGTERM/SIGINT for the process (a parent such as a test runner may have blocked them, and children
/// inherit the mask); swift-service-lifecycle's signal sources need them delivered.
public enum SignalMask {
    public static func unblockTerminationSignals() {
        var set = sigset_t()
        sigemptyset(&set)
        sigaddset(&set, SIGTERM)
        sigaddset(&set, SIGINT)
        pthread_sigmask(SIG_UNBLOCK, &set, nil)
        sigprocmask(SIG_UNBLOCK, &set, nil)
    }

    /// SIGHUP reloads a worker's configuration; a parent may have blocked it.
    public static func unblockReloadSignal() {
        var set = sigset_t()
        sigemptyset(&set)
        sigaddset(&set, SIGHUP)
        pthread_sigmask(SIG_UNBLOCK, &set, nil)
        sigprocmask(SIG_UNBLOCK, &set, nil)
    }
}
