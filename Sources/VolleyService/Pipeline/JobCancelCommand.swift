import Foundation
import Logging
import VolleyCore
import VolleyStore

/// `volley jobs cancel ID`: the same cancel as `DELETE /v1/jobs/{id}`, for jobs sent any way (the API, `volley send`,
/// a producer's own XADD).
public enum JobCancelCommand {
    /// What the cancel did, as one line for the operator.
    public static func cancel(settings: PipelineSettings, org: OrgID, job: JobID, logger: Logger, now: Date = Date())
        throws -> (cancelled: Bool, message: String)
    {
        let client = settings.client(name: "cancel", logger: logger)
        switch try RedisScheduleAdmin(store: settings.store).cancel(client, org: org, job: job, now: now) {
        case .finished:
            return (false, "job \(job) of org \(org) has finished (its report is published): nothing to cancel")
        case .unparked(let due):
            return (
                true,
                "job \(job) cancelled: it was scheduled for \(ScheduledTime.utcText(due)); nothing was sent"
            )
        case .marked:
            return (
                true,
                "job \(job) marked cancelled: a worker sends nothing more of it after the sends it has started, "
                    + "and its report says status cancelled (a job not read yet sends nothing)"
            )
        }
    }
}

/// `volley jobs pause ID` and `volley jobs resume ID`: the same as `POST /v1/jobs/{id}/pause` and `/resume`.
public enum JobPauseCommand {
    /// Pauses the job; false (with the reason) when it has finished or was cancelled.
    public static func pause(settings: PipelineSettings, org: OrgID, job: JobID, logger: Logger, now: Date = Date())
        throws -> (paused: Bool, message: String)
    {
        let client = settings.client(name: "pause", logger: logger)
        if try RedisScheduleAdmin(store: settings.store).pause(client, org: org, job: job, now: now) {
            return (
                true,
                "job \(job) paused: a worker sends nothing more of it after the sends it has started, records what "
                    + "went and parks it until `volley jobs resume`"
            )
        }
        return (false, "job \(job) of org \(org) has finished or was cancelled: nothing to pause")
    }

    /// Resumes the job: the mark goes, and every parked part comes back to the stream.
    public static func resume(settings: PipelineSettings, org: OrgID, job: JobID, logger: Logger, now: Date = Date())
        throws -> String
    {
        let client = settings.client(name: "resume", logger: logger)
        let parts = try RedisScheduleAdmin(store: settings.store).resume(client, org: org, job: job, now: now)
        return "job \(job) resumed: \(parts) parked part\(parts == 1 ? "" : "s") brought back to the job stream"
    }
}
