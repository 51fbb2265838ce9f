import VolleyCore

extension JobRun {
    /// The message ids of a delivery's pushes, registered before anything is sent: a job with `"tracking": false`,
    /// a silent push, or a worker without a tracking store sends none (nil).
    ///
    /// The campaign half names the delivery's own job (a campaign shard's own id), and the registration maps it to
    /// the job whose counts the interactions feed (the campaign: a shard's parent) and to the in-app entry this job
    /// stored, which is the shard's own unless the job names a `notificationId`. A device belongs to one shard, so
    /// one interaction is still counted once for the campaign.
    func messageTracking(
        for job: PushJob, jobID: JobID, notification: VolleyCore.Notification
    ) throws -> MessageTracking? {
        guard let store = worker.messageTracking, job.tracking != false, !notification.isSilent else { return nil }
        let tracking = MessageTracking(org: job.org, job: jobID)
        try store.register(
            org: job.org, campaign: tracking.campaign, job: job.shard?.parent ?? jobID, app: job.app,
            inbox: job.storesInbox ? job.inboxEntryID(jobID: jobID) : nil)
        return tracking
    }
}
