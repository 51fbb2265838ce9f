/// The providers' own preparation of a notification, run where a job is accepted: a notification every worker would
/// refuse (a negative ttl, an unknown push type, a collapse id over 64 bytes, a payload over the provider's limit) is
/// refused there, before anything is written, with the same `NotificationError` the worker would dead-letter it with.
///
/// The composition root builds it from the configured apps with the encoders the workers run (`PushSender.prepare`'s
/// own functions), so there is one set of checks.
public struct NotificationCheck: Sendable {
    /// Prepares `notification` for `platform` of `app` and discards the result; throws `NotificationError` as the
    /// worker's preparation would. `tracked`: the job's visible pushes carry a message id (`mid`), which counts
    /// against the provider's payload limit. An app or platform the process has no configuration for passes (the
    /// worker decides those, with the configuration it has).
    public typealias Prepare =
        @Sendable (_ app: AppName, _ platform: Platform, _ notification: Notification, _ tracked: Bool) throws
        -> Void

    let prepare: Prepare

    public init(_ prepare: @escaping Prepare) { self.prepare = prepare }

    /// A check that passes everything: for processes without the apps' configuration.
    public static let none = NotificationCheck { _, _, _, _ in }

    /// A provider's refusal of a job's notification (or a template's: `app` names the app it was checked for).
    public struct Refusal: Sendable, Hashable {
        public let platform: Platform
        public let error: NotificationError
        public var app: AppName? = nil
    }

    /// The first refusal of `job`'s notification on the platforms it targets (iOS first), or nil when every
    /// provider would prepare it. A job sent as the Salesforce Notification Builder payload is first refused for a
    /// field that payload cannot carry (`PushJob.salesforcePayloadRefusal`), whatever the providers say.
    public func refusal(of job: PushJob) -> Refusal? {
        let notification = job.effectiveNotification
        if let e = job.salesforcePayloadRefusal(notification) {
            return Refusal(platform: Platform.allCases.first(where: job.targets) ?? .ios, error: e)
        }
        for platform in Platform.allCases where job.targets(platform) {
            do {
                try prepare(job.app, platform, notification, job.tracking != false)
            } catch let e as NotificationError {
                return Refusal(platform: platform, error: e)
            } catch {
                return Refusal(platform: platform, error: NotificationError("BadPayload", "\(error)"))
            }
        }
        return nil
    }

    /// The first refusal of a stored template's notification, as `PUT /v1/templates/{id}` and `volley templates put`
    /// check it: rendered as the job door renders a templated job's (no user's attributes, no custom data: each
    /// name its fallback or empty), then prepared for every platform of each of `apps` (the apps the org may use, in
    /// order), tracked, as a job with the default options naming it would be. A template is tied to no app or
    /// platform, so what any job naming it with those options would be refused for is refused when it is stored;
    /// nil when every provider would prepare it, and always with no app (the template's own checks,
    /// `StoredTemplate.check`, are then all there is).
    public func refusal(ofTemplate template: NotificationTemplate, apps: [AppName]) -> Refusal? {
        guard !apps.isEmpty else { return nil }
        let notification = template.render(attributes: nil).notification
        for app in apps {
            for platform in Platform.allCases {
                do {
                    try prepare(app, platform, notification, true)
                } catch let e as NotificationError {
                    return Refusal(platform: platform, error: e, app: app)
                } catch {
                    return Refusal(platform: platform, error: NotificationError("BadPayload", "\(error)"), app: app)
                }
            }
        }
        return nil
    }
}
