import Crypto
import Foundation
import Logging
import VolleyCore

/// The Salesforce-compatible resources under `/services/data/v{NN.N}/`, one method per operation, free of any HTTP
/// framework. The HTTP layer routes to them (each route declares the credential it takes), authenticates, builds
/// the `ConnectCaller`, and runs the method through `answer(_:_:)`, which turns whatever it throws into Salesforce's
/// error array.
///
/// Everything is keyed by the caller's org: another org's notifications, types and apps answer 404.
/// The stores are VolleyCore protocols (Redis in `volley api`, in memory in tests); nothing here blocks a thread.
public final class ConnectService: Sendable {
    public struct Options: Sendable {
        /// The apps an org may push through (configuration `apps[].orgs`), in configuration order; nil when the
        /// org may use any app. A custom notification action without an app-bound caller goes to every one of them
        /// subscribed to its type (an org allowed any app needs an app-bound caller).
        public var apps: @Sendable (OrgID) -> [AppName]?
        /// A new id: a Connect push's job id, a custom notification's notification id (the id the recipients'
        /// inboxes show; its jobs are `<id>:<app>`).
        public var newJobID: @Sendable () -> JobID
        public var clock: any WallClock
        /// The providers' preparation: a push every worker would refuse is refused here, before it is queued.
        public var check: NotificationCheck

        public init(
            apps: @escaping @Sendable (OrgID) -> [AppName]? = { _ in nil },
            newJobID: @escaping @Sendable () -> JobID = { JobID.generated(prefix: "") },
            clock: any WallClock = SystemClock(), check: NotificationCheck = .none
        ) {
            self.apps = apps
            self.newJobID = newJobID
            self.clock = clock
            self.check = check
        }

        /// `apps` from the configuration's apps, in order, each with the orgs that may use it: an org may use the
        /// apps that allow it, and no other (an app the configuration does not name answers 404).
        public static func apps(configured: [(name: AppName, orgs: AppOrgs)]) -> @Sendable (OrgID) -> [AppName]? {
            { org in configured.filter { $0.orgs.allows(org) }.map(\.name) }
        }
    }

    let types: any NotificationTypeRepository
    let inbox: any InboxRepository
    let jobs: any JobSubmitter
    /// The Mobile SDKs' own device registration (`MobilePushServiceDevice`); nil: those paths answer 404, which the
    /// Android SDK reads as "push is not enabled for this app".
    let mobileDevices: MobilePushServiceDevices?
    let options: Options
    let logger: Logger

    public init(
        types: any NotificationTypeRepository, inbox: any InboxRepository, jobs: any JobSubmitter,
        devices: (any DeviceStore)? = nil, options: Options = Options(), logger: Logger
    ) {
        self.types = types
        self.inbox = inbox
        self.jobs = jobs
        mobileDevices = devices.map { MobilePushServiceDevices(devices: $0, clock: options.clock) }
        self.options = options
        self.logger = logger
    }

    /// Runs one operation and answers it: a `ConnectError` as its Salesforce error array, any other failure (a store
    /// that cannot answer) as `UNKNOWN_EXCEPTION`, logged with `path`. Never throws.
    public func answer(_ path: String, _ operation: () async throws -> ConnectResponse) async -> ConnectResponse {
        do {
            return try await operation()
        } catch let e as ConnectError {
            return e.response
        } catch {
            logger.error("connect request failed", metadata: ["path": "\(path)", "error": "\(error)"])
            return ConnectError.internalError("the request could not be completed; try again").response
        }
    }

    /// `GET /actions/standard/customNotificationAction`: the action's description.
    public func describeCustomNotificationAction() -> ConnectResponse {
        .json(200, CustomNotificationAction.describe)
    }

    // MARK: Sending

    /// `POST /actions/standard/customNotificationAction`: one result per input. Each valid input is one job per app
    /// of the org subscribed to its type (`DeliveryPolicy.subscribes`), the jobs sharing one notification id, so
    /// each recipient's inbox holds it once however many apps push it.
    ///
    /// With `idempotencyKey`, every id derives from the key (input `i`'s notification id `<key>:<i>`, its job through
    /// app `a` `<key>:<i>:<a>`) and each job is submitted once per id, as `POST /v1/jobs` does: the same request
    /// again is answered as the first and sends nothing more; another request under the key is a 422.
    public func customNotificationAction(caller: ConnectCaller, body: Data, idempotencyKey: String? = nil)
        async throws -> ConnectResponse
    {
        let inputs = try CustomNotificationAction.inputs(body)
        let candidates = try actionApps(caller)
        let submission = idempotencyKey.map { Submission(key: $0, digest: Self.digest(body), now: options.clock.now()) }
        var subscribed: [String: [AppName]?] = [:] // by type id; nil: the org does not define the type
        var results: [CustomNotificationAction.Result] = []
        results.reserveCapacity(inputs.count)
        for (index, raw) in inputs.enumerated() {
            let input: CustomNotificationAction.Input
            switch CustomNotificationAction.decode(raw) {
            case .invalid(let errors):
                results.append(.init(errors: errors))
                continue
            case .valid(let valid): input = valid
            }
            let typeID = input.customNotifTypeId
            if subscribed[typeID] == nil {
                // The type and every candidate app's setting for it: one read per type of the request.
                if let settings = try await types.subscriptions(org: caller.org, typeID: typeID, apps: candidates) {
                    subscribed[typeID] = .some(
                        candidates.filter { DeliveryPolicy.subscribes(settings[$0] ?? nil) })
                } else {
                    subscribed[typeID] = .some(nil)
                }
            }
            guard let apps = subscribed[typeID] ?? nil else {
                results.append(
                    .init(errors: [
                        .init(
                            "INVALID_ID_FIELD", "customNotifTypeId: no notification type '\(typeID)' in this org",
                            fields: ["customNotifTypeId"])
                    ]))
                continue
            }
            guard !apps.isEmpty else {
                results.append(
                    .init(errors: [
                        .init(
                            "INVALID_INPUT",
                            "customNotifTypeId: no connected app of this org is subscribed to type '\(typeID)' "
                                + "(no app setting of the type says enabled: true)", fields: ["customNotifTypeId"])
                    ]))
                continue
            }
            let notificationID = submission.map { "\($0.key):\(index)" } ?? options.newJobID().rawValue
            let jobs = apps.map { app in
                var job = CustomNotificationAction.job(
                    input, id: JobID("\(notificationID):\(app.rawValue)"), org: caller.org, app: app)
                job.notificationId = notificationID
                return job
            }
            // Every app's provider must take it before any job is queued.
            if let refusal = jobs.lazy.compactMap({ self.options.check.refusal(of: $0) }).first {
                let (platform, e) = (refusal.platform, refusal.error)
                // The notification's text is the input's title and body; any other field is Volley's own.
                let fields = e.field.map { [$0] } ?? ["title", "body"]
                results.append(
                    .init(errors: [
                        .init(
                            "INVALID_INPUT", "\(fields.joined(separator: ", ")): \(platform): \(e.message)",
                            fields: fields)
                    ]))
                continue
            }
            do {
                for job in jobs { try await queue(job, submission) }
                results.append(.success)
            } catch let e as ConnectError {
                throw e
            } catch {
                logger.error("custom notification not enqueued", metadata: ["error": "\(error)"])
                results.append(
                    .init(errors: [
                        .init("UNKNOWN_EXCEPTION", "the notification could not be queued; try again", fields: [])
                    ]))
            }
        }
        return .json(200, results)
    }

    /// The apps a custom notification action may go through: the caller's app when the credential is bound to one,
    /// else every app the org may use (configuration `apps[].orgs`, in order).
    func actionApps(_ caller: ConnectCaller) throws(ConnectError) -> [AppName] {
        if let app = caller.appName {
            try checkApp(app, org: caller.org)
            return [app]
        }
        guard let apps = options.apps(caller.org), !apps.isEmpty else {
            throw ConnectError.invalidInput(
                "customNotifTypeId: no connected app to deliver through (the org has no app configured)")
        }
        return apps
    }

    /// An idempotent request: its key, the SHA-256 of its body (a replay is the same bytes again) and when it came.
    struct Submission: Sendable {
        var key: String
        var digest: String
        var now: Date
    }

    static func digest(_ body: Data) -> String {
        SHA256.hash(data: body).withUnsafeBytes { $0.lowercaseHex }
    }

    /// Queues `job`: once per (org, job id) under an idempotent submission (a replay of the same body is skipped,
    /// another body under the key is a 422), else as a new stream entry.
    func queue(_ job: PushJob, _ submission: Submission?) async throws {
        guard let submission, let id = job.id else {
            try await jobs.enqueue(job)
            return
        }
        let answer = try await jobs.submit(
            org: job.org, job: id, app: job.app, digest: submission.digest, entry: job.jsonText,
            createdAt: RFC3339.format(submission.now, .milliseconds))
        if case .conflict = answer {
            throw ConnectError(
                status: 422, errorCode: "DUPLICATE_VALUE",
                message: "Idempotency-Key: a different request was already accepted with this key")
        }
    }

    /// `POST /connect/notifications/push`: 202 with the job id. A push-only job (Salesforce's Apex and Connect
    /// pushes keep nothing in-app). A user token pushes through its own connected app only (the guide's
    /// device-to-device push), to users of its org; an API key through any app its org may use.
    /// With `idempotencyKey` the job id is the key, submitted once as `POST /v1/jobs` does.
    public func push(caller: ConnectCaller, body: Data, idempotencyKey: String? = nil) async throws -> ConnectResponse {
        let request = try ConnectPush.decode(body)
        if caller.user != nil, request.appName != caller.appName {
            throw ConnectError.forbidden(
                "appName: a user token pushes through its own connected app ('\(caller.app ?? "")') only")
        }
        try checkApp(request.appName, org: caller.org)
        let job = ConnectPush.job(
            request, id: idempotencyKey.map(JobID.init) ?? options.newJobID(), org: caller.org)
        if let refusal = options.check.refusal(of: job) {
            throw ConnectError.invalidInput("payload: \(refusal.platform): \(refusal.error.message)")
        }
        try await queue(
            job, idempotencyKey.map { Submission(key: $0, digest: Self.digest(body), now: options.clock.now()) })
        return .json(202, ["id": job.id?.rawValue ?? ""])
    }

    /// The org may push through `app` (another org's app answers 404, as if it did not exist).
    func checkApp(_ app: AppName, org: OrgID) throws(ConnectError) {
        if let allowed = options.apps(org), !allowed.contains(app) {
            throw .notFound("appName: no connected app '\(app)' in this org")
        }
    }

    // MARK: Notifications (the context user's)

    func contextUser(_ caller: ConnectCaller) throws(ConnectError) -> UserID {
        guard let user = caller.user else {
            throw .forbidden("the Notifications resources need a user token (they answer for the context user)")
        }
        return user
    }

    /// Which notification types the calling app shows: types the org defines and the app is subscribed to (its app
    /// settings say `enabled: true`), as the worker decides when it stores them. Without an app, types enabled for
    /// desktop.
    struct Visibility: Sendable {
        var types: [String: NotificationType]
        var settings: [String: NotificationAppSetting]
        var orgSettings: [String: NotificationOrgSetting]
        var app: AppName?

        /// True when a type the org defines is hidden from the app (types the org no longer defines are hidden too,
        /// but only `list` sees those: the fast status counts them).
        var hidesAnyType: Bool { types.keys.contains { !shows($0) } }

        func shows(_ typeID: String?) -> Bool {
            guard let typeID else { return true } // a plain push stored in-app belongs to every app
            guard let type = types[typeID] else { return false }
            if app != nil { return settings[typeID]?.subscribed == true }
            return (orgSettings[typeID] ?? NotificationOrgSetting()).effective(for: type).desktop
        }
    }

    func visibility(_ caller: ConnectCaller) async throws -> Visibility {
        let org = caller.org
        let all = try await types.types(org: org)
        var settings: [String: NotificationAppSetting] = [:]
        var orgSettings: [String: NotificationOrgSetting] = [:]
        if let app = caller.appName {
            settings = try await types.settings(org: org, app: app)
        } else {
            orgSettings = try await types.orgSettings(org: org)
        }
        return Visibility(
            types: Dictionary(all.map { ($0.id, $0) }, uniquingKeysWith: { a, _ in a }), settings: settings,
            orgSettings: orgSettings, app: caller.appName)
    }

    /// Newest first, only what the app shows, paging past hidden ones (at most ten store pages per request).
    func visibleList(
        org: OrgID, user: UserID, size: Int, before: Date?, after: Date?, _ vis: Visibility
    ) async throws -> [InboxNotification] {
        var out: [InboxNotification] = []
        var cursor = before
        let page = max(size, 10)
        for _ in 0..<10 {
            let batch = try await inbox.list(org: org, user: user, size: page, before: cursor, after: after)
            out += batch.filter { vis.shows($0.type) }
            guard out.count < size, batch.count == page, let last = batch.last else { break }
            cursor = last.createdAt
        }
        return Array(out.prefix(size))
    }

    public func listNotifications(caller: ConnectCaller, query: [ConnectQueryItem]) async throws -> ConnectResponse {
        let user = try contextUser(caller)
        let p = try NotificationListParameters(query: query)
        let vis = try await visibility(caller)
        let list = try await visibleList(
            org: caller.org, user: user, size: p.size, before: p.before, after: p.after, vis)
        return .json(200, collection(list, caller: caller, user: user, trim: p.trimMessages))
    }

    public func markNotifications(caller: ConnectCaller, query: [ConnectQueryItem], body: Data) async throws
        -> ConnectResponse
    {
        let user = try contextUser(caller)
        let p = try NotificationMarkParameters(body: body, query: query, single: false)
        let trim = try trimMessages(query)
        let mark = try p.mark(now: options.clock.now())
        try await inbox.mark(org: caller.org, user: user, mark)
        let vis = try await visibility(caller)
        let touched: [InboxNotification]
        switch mark.selection {
        case .ids(let ids):
            var found: [InboxNotification] = []
            for id in ids {
                if let n = try await inbox.notification(org: caller.org, user: user, id: id), vis.shows(n.type) {
                    found.append(n)
                }
            }
            touched = found.sorted { $0.createdAt > $1.createdAt }
        case .before(let date):
            touched = try await visibleList(
                org: caller.org, user: user, size: NotificationListParameters.maxSize, before: date, after: nil, vis)
        }
        return .json(200, collection(touched, caller: caller, user: user, trim: trim))
    }

    public func notification(caller: ConnectCaller, id: String, query: [ConnectQueryItem]) async throws
        -> ConnectResponse
    {
        let user = try contextUser(caller)
        let trim = try trimMessages(query)
        let n = try await visibleNotification(caller: caller, user: user, id: id)
        return .json(200, ConnectNotification(n, org: caller.org, user: user, trim: trim))
    }

    public func markNotification(caller: ConnectCaller, id: String, query: [ConnectQueryItem], body: Data) async throws
        -> ConnectResponse
    {
        let user = try contextUser(caller)
        let p = try NotificationMarkParameters(body: body, query: query, single: true)
        let trim = try trimMessages(query)
        _ = try await visibleNotification(caller: caller, user: user, id: id)
        var one = p
        one.notificationIds = [id]
        try await inbox.mark(org: caller.org, user: user, try one.mark(now: options.clock.now()))
        let n = try await visibleNotification(caller: caller, user: user, id: id)
        return .json(200, ConnectNotification(n, org: caller.org, user: user, trim: trim))
    }

    /// Counts over what the app shows, dates now when there is nothing to date. When the app hides no type of the
    /// org, the counts come from two ZCARDs; otherwise every notification's type is read and filtered.
    public func notificationStatus(caller: ConnectCaller) async throws -> ConnectResponse {
        let user = try contextUser(caller)
        let vis = try await visibility(caller)
        let s: InboxStatus
        if vis.hidesAnyType {
            s = try await inbox.status(org: caller.org, user: user, includes: { vis.shows($0) })
        } else {
            s = try await inbox.status(org: caller.org, user: user)
        }
        return .json(200, ConnectNotificationStatus(s, now: options.clock.now()))
    }

    func visibleNotification(caller: ConnectCaller, user: UserID, id: String) async throws -> InboxNotification {
        guard let n = try await inbox.notification(org: caller.org, user: user, id: id),
            try await visibility(caller).shows(n.type)
        else { throw ConnectError.notFound("notificationId: no notification '\(id)' for the context user") }
        return n
    }

    func trimMessages(_ query: [ConnectQueryItem]) throws(ConnectError) -> Bool {
        guard let v = query.last(where: { $0.name == "trimMessages" })?.value else { return true }
        return try NotificationListParameters.flag(v, field: "trimMessages")
    }

    func collection(_ list: [InboxNotification], caller: ConnectCaller, user: UserID, trim: Bool)
        -> ConnectNotificationCollection
    {
        ConnectNotificationCollection(
            notifications: list.map { ConnectNotification($0, org: caller.org, user: user, trim: trim) })
    }

    // MARK: App settings

    static let appSettingKeys: Set<String> = [
        "applicationId", "enabled", "pushEnabled", "fullContentPushNotifications",
    ]

    /// The app a settings request is about: `applicationId` (body, then query), else the caller's app.
    func settingsApp(caller: ConnectCaller, query: [ConnectQueryItem], body: [String: JSONValue] = [:]) throws
        -> AppName
    {
        let given =
            try ConnectJSON.string(body["applicationId"], field: "applicationId")
            ?? query.last(where: { $0.name == "applicationId" })?.value
        guard let app = given.flatMap({ $0.isEmpty ? nil : AppName($0) }) ?? caller.appName else {
            throw ConnectError.invalidInput(
                "applicationId: required when the credential is not bound to a connected app")
        }
        do {
            try checkApp(app, org: caller.org)
        } catch {
            throw ConnectError.notFound("applicationId: no connected app '\(app)' in this org")
        }
        return app
    }

    /// A type of the caller's org by id or API name; another org's type answers 404.
    func orgType(_ caller: ConnectCaller, _ idOrName: String) async throws -> NotificationType {
        if let t = try await types.type(org: caller.org, id: idOrName) { return t }
        if let t = try await types.types(org: caller.org).first(where: { $0.name == idOrName }) { return t }
        throw ConnectError.notFound("notificationTypeId: no notification type '\(idOrName)' in this org")
    }

    /// GET on the collection, or on one type: Salesforce answers a collection for both.
    public func appSettings(caller: ConnectCaller, typeID: String?, query: [ConnectQueryItem]) async throws
        -> ConnectResponse
    {
        let app = try settingsApp(caller: caller, query: query)
        let list = if let typeID { [try await orgType(caller, typeID)] } else { try await types.types(org: caller.org) }
        let settings = try await types.settings(org: caller.org, app: app)
        let orgSettings = try await types.orgSettings(org: caller.org)
        let appSettings = try await types.appNotificationSettings(org: caller.org, app: app)
        return .json(
            200,
            ConnectAppSettingCollection(
                notificationAppSettings: list.map {
                    ConnectAppSetting(
                        type: $0, app: app, setting: settings[$0.id], org: orgSettings[$0.id], appSettings: appSettings)
                }))
    }

    public func setAppSetting(caller: ConnectCaller, typeID: String, query: [ConnectQueryItem], body: Data) async throws
        -> ConnectResponse
    {
        let o = try ConnectJSON.object(body, allowed: Self.appSettingKeys)
        let enabled = try ConnectJSON.bool(o["enabled"], field: "enabled")
        let pushEnabled = try ConnectJSON.bool(o["pushEnabled"], field: "pushEnabled")
        let fullContent = try ConnectJSON.bool(
            o["fullContentPushNotifications"], field: "fullContentPushNotifications")
        let app = try settingsApp(caller: caller, query: query, body: o)
        let type = try await orgType(caller, typeID)
        if enabled == nil && pushEnabled == nil && fullContent == nil {
            throw ConnectError.invalidInput("enabled: give enabled, pushEnabled, fullContentPushNotifications or more")
        }
        if enabled != nil || pushEnabled != nil {
            try await types.setSetting(
                org: caller.org, app: app, typeID: type.id, enabled: enabled, pushEnabled: pushEnabled)
        }
        // Full content is the app's, not the type's: setting it through any type's setting sets it for the app.
        let appSettings =
            if let fullContent {
                try await types.setAppNotificationSettings(
                    org: caller.org, app: app, AppNotificationSettings(fullContentPushNotifications: fullContent))
            } else {
                try await types.appNotificationSettings(org: caller.org, app: app)
            }
        let setting = try await types.settings(org: caller.org, app: app)[type.id]
        let orgSetting = try await types.orgSettings(org: caller.org)[type.id]
        return .json(
            200, ConnectAppSetting(type: type, app: app, setting: setting, org: orgSetting, appSettings: appSettings))
    }

    public func resetAppSetting(caller: ConnectCaller, typeID: String, query: [ConnectQueryItem]) async throws
        -> ConnectResponse
    {
        let app = try settingsApp(caller: caller, query: query)
        let type = try await orgType(caller, typeID)
        try await types.resetSetting(org: caller.org, app: app, typeID: type.id)
        return .noContent
    }

    // MARK: Org settings

    static let orgSettingKeys: Set<String> = ["desktopEnabled", "emailEnabled", "mobileEnabled", "slackEnabled"]

    public func orgSettings(caller: ConnectCaller) async throws -> ConnectResponse {
        let settings = try await types.orgSettings(org: caller.org)
        return .json(
            200,
            ConnectOrgSettingCollection(
                notificationSettings: try await types.types(org: caller.org).map {
                    ConnectOrgSetting(type: $0, setting: settings[$0.id])
                }))
    }

    public func orgSetting(caller: ConnectCaller, typeOrID: String) async throws -> ConnectResponse {
        let type = try await orgType(caller, typeOrID)
        return .json(200, ConnectOrgSetting(type: type, setting: try await types.orgSettings(org: caller.org)[type.id]))
    }

    /// Sets channel switches. As in Salesforce, an org can turn off a channel its type has, not turn on one the
    /// type lacks (desktop, mobile); email and Slack are recorded as given (Volley delivers neither).
    public func setOrgSetting(caller: ConnectCaller, typeOrID: String, body: Data) async throws -> ConnectResponse {
        let o = try ConnectJSON.object(body, allowed: Self.orgSettingKeys)
        let change = NotificationOrgSetting(
            desktopEnabled: try ConnectJSON.bool(o["desktopEnabled"], field: "desktopEnabled"),
            emailEnabled: try ConnectJSON.bool(o["emailEnabled"], field: "emailEnabled"),
            mobileEnabled: try ConnectJSON.bool(o["mobileEnabled"], field: "mobileEnabled"),
            slackEnabled: try ConnectJSON.bool(o["slackEnabled"], field: "slackEnabled"))
        let type = try await orgType(caller, typeOrID)
        if change == NotificationOrgSetting() {
            throw ConnectError.invalidInput(
                "desktopEnabled: give at least one of desktopEnabled, emailEnabled, mobileEnabled, slackEnabled")
        }
        if change.desktopEnabled == true && !type.desktop {
            throw ConnectError.invalidInput(
                "desktopEnabled: type '\(type.id)' has no desktop channel, so it can't be enabled")
        }
        if change.mobileEnabled == true && !type.mobile {
            throw ConnectError.invalidInput(
                "mobileEnabled: type '\(type.id)' has no mobile channel, so it can't be enabled")
        }
        let stored = try await types.setOrgSetting(org: caller.org, typeID: type.id, change)
        return .json(200, ConnectOrgSetting(type: type, setting: stored))
    }

    public func resetOrgSetting(caller: ConnectCaller, typeOrID: String) async throws -> ConnectResponse {
        let type = try await orgType(caller, typeOrID)
        try await types.resetOrgSetting(org: caller.org, typeID: type.id)
        return .noContent
    }
}

// MARK: Device registration

extension ConnectService {
    /// `POST /sobjects/MobilePushServiceDevice`: the Mobile SDKs' registration of the caller's device.
    public func registerMobilePushDevice(caller: ConnectCaller, body: Data) async throws -> ConnectResponse {
        guard let mobileDevices else { return SObjectError.notFound.response }
        return try await mobileDevices.register(caller: caller, body: body)
    }

    /// `DELETE /sobjects/MobilePushServiceDevice/{id}`: the Mobile SDKs' logout.
    public func unregisterMobilePushDevice(caller: ConnectCaller, id: String) async throws -> ConnectResponse {
        guard let mobileDevices else { return SObjectError.notFound.response }
        return try await mobileDevices.unregister(caller: caller, id: id)
    }
}
