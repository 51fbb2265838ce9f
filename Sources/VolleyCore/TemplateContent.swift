/// A templated job's per-person content: the template's texts rendered with each recipient's attributes. The
/// planner makes it once per job (`TemplateContent.plan`); the engine asks it for one device at a time.
public struct TemplateContent: PersonalContent {
    /// Compiled, with the job's custom data already bound: a render only looks up attributes.
    public let template: NotificationTemplate

    public init(template: NotificationTemplate) { self.template = template }

    public var needs: RecipientNeeds { RecipientNeeds(attributes: template.usesAttributes) }

    public func payload(for device: Device, recipient: RecipientContext) throws(PersonalPayloadError)
        -> PersonalPayload
    {
        .notification(template.render(attributes: recipient.attributes).notification)
    }

    /// The plan of a job that names `templateId`: the template read from `reader`, compiled, the job's `customData`
    /// bound. A template whose texts are the same for everyone once bound (no `{{`, or custom data only) has no
    /// per-person content, so the campaign path sends it. Throws `JobRejection` for a template the org does not
    /// have or that does not read or compile (the job is refused, nothing sent), and the reader's own error when
    /// the store cannot answer (the job is retried).
    public static func plan(for job: PushJob, reader: any TemplateReader) throws -> PersonalPlan {
        guard let id = job.templateId else { return PersonalPlan(notification: job.notification, content: nil) }
        guard let value = try reader.notification(org: job.org, templateID: id) else {
            throw JobRejection(.invalidJob, "templateId: no template '\(id)' in org \(job.org)")
        }
        let template: NotificationTemplate
        do {
            let notification = try Notification(json: value, at: [.key("notification")])
            template = try NotificationTemplate(notification).binding(customData: job.customData)
        } catch let e as JSONFieldError {
            throw JobRejection(.invalidNotification, "template '\(id)': \(e)")
        } catch let e as TemplateError {
            throw e.jobRejection
        }
        // The shared notification is the render for a recipient without attributes (fallbacks, or empty text): what
        // the engine prepares per platform never holds an unrendered name.
        return PersonalPlan(
            notification: template.render(attributes: nil).notification,
            content: template.isPersonal ? TemplateContent(template: template) : nil)
    }
}
