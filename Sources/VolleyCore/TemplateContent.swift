import Synchronization

/// A templated job's per-person content: the template's texts rendered with each recipient's attributes. The
/// planner makes it once per job; the engine asks it for one device at a time.
public final class TemplateContent: PersonalContent {
    /// Compiled, with the job's custom data already bound: a render only looks up attributes.
    public let template: NotificationTemplate
    private let missing = Atomic<Int>(0)

    public init(template: NotificationTemplate) { self.template = template }

    public var needs: RecipientNeeds { RecipientNeeds(attributes: template.usesAttributes) }

    public var tally: PersonalContentTally {
        var t = PersonalContentTally()
        t.templateNamesMissing = missing.load(ordering: .relaxed)
        return t
    }

    /// The notification with one recipient's values; names without a value and a fallback are counted.
    public func render(_ recipient: RecipientContext) -> Notification {
        let r = template.render(attributes: recipient.attributes)
        if r.missing > 0 { missing.add(r.missing, ordering: .relaxed) }
        return r.notification
    }

    public func payload(for device: Device, recipient: RecipientContext) throws(PersonalPayloadError)
        -> PersonalPayload
    {
        .notification(render(recipient))
    }

    /// The plan of a job's texts: its notification (`notification(for:reader:)`), compiled when a text holds
    /// `{{`, the job's `customData` bound. The shared notification is the render for a recipient without
    /// attributes (fallbacks, or empty text), so what the engine prepares per platform never holds an unrendered
    /// name; the content is nil when every recipient gets the same texts (the campaign path sends it).
    public static func plan(for job: PushJob, reader: (any TemplateReader)?) throws -> PersonalPlan {
        let n = try notification(for: job, reader: reader)
        let template = try compile(n, customData: job.customData)
        return PersonalPlan(
            notification: template?.render(attributes: nil).notification ?? n,
            content: template.flatMap { $0.isPersonal ? TemplateContent(template: $0) : nil })
    }

    /// The notification a job sends: its own (with its raw `apns`/`fcm` folded in), or the template `templateId`
    /// names, read from `reader`. Throws `JobRejection` for a template the org does not have or that does not read
    /// (the job is refused, nothing sent), and the reader's own error when the store cannot answer (the job is
    /// retried).
    public static func notification(for job: PushJob, reader: (any TemplateReader)?) throws -> Notification {
        guard let id = job.templateId else { return job.effectiveNotification }
        guard let reader else { throw JobRejection(.invalidJob, "templateId: this worker has no template store") }
        guard let value = try reader.notification(org: job.org, templateID: id) else {
            throw JobRejection(.invalidJob, "templateId: no template '\(id)' in org \(job.org)")
        }
        do {
            var n = try Notification(json: value, at: [.key("notification")])
            if let apns = job.apns { n.apns = apns }
            if let fcm = job.fcm { n.fcm = fcm }
            return n
        } catch {
            throw JobRejection(.invalidNotification, "template '\(id)': \(error)")
        }
    }

    /// `notification` compiled as a template with the job's `customData` bound; nil when no text holds `{{`.
    /// Throws `JobRejection` for a text that does not compile.
    public static func compile(_ notification: Notification, customData: JSONValue?) throws -> NotificationTemplate? {
        let template: NotificationTemplate
        do { template = try NotificationTemplate(notification) } catch { throw error.jobRejection }
        return template.hasNames ? template.binding(customData: customData) : nil
    }
}
