import Foundation
import Logging
import Testing
import VolleyCore
import VolleyTestTags

@testable import VolleyBench

/// `volley-bench chaos` end to end at its smallest: a real redis-server, the real mock killed and restarted, a real
/// `volley worker`. Asserts the tool's own accounting (not Volley's figures under the fault, which
/// docs/guarantees.md records): the accept journal outlives the mock's `kill -9`, and every count adds up.
@Suite(.serialized, .tags(.integration))
struct ChaosBenchTests {
    @Test func providerKillRunAccountsForEveryDevice() throws {
        var o = ChaosBench.Options()
        o.fault = .providerKill
        o.seconds = 1
        o.devices = 1_000
        o.devicesPerUser = 50
        o.workers = 1
        o.shards = 2
        o.progress = false
        o.timeoutSeconds = 120
        let r = try ChaosBench(options: o, logger: Logger(label: "test.chaos")).run(command: "test")

        #expect(r.fault == "provider-kill")
        #expect(r.devices == 1_000)
        #expect(r.report_devices == 1_000)
        #expect(r.accepted + r.rejected + r.failed == r.report_devices)
        // The fault started at the trigger, and the journal kept what the killed mock had taken.
        #expect(r.fault_at_accepted >= 250)
        #expect(r.provider_devices >= r.fault_at_accepted)
        // Every device Volley counts accepted was taken by the mock; the rest of the journal adds up.
        #expect(r.provider_devices >= r.accepted)
        #expect(r.provider_devices + r.never_reached == r.devices)
        #expect(r.provider_pushes == r.provider_devices + r.duplicate_pushes)
        #expect(r.reached_not_accepted == r.provider_devices - r.accepted)
        #expect(r.failed_other == r.failed - (r.written_unanswered ?? 0))
        #expect(r.fault_held_s >= 1)
        // Sends written and unanswered when the mock died were resent under the job's collapse identity (the
        // default `worker.unansweredSends: resend`): no device lost, none shown twice, whatever was duplicated.
        #expect(r.unanswered_sends == "resend")
        #expect(r.lost == r.devices - r.accepted - r.rejected)
        #expect(r.lost == 0 && r.failed == 0, "\(r.failed_by_reason)")
        #expect(r.shown_twice == 0 && r.shown_twice <= r.duplicated_devices)
        let table = ChaosBench.table(r)
        #expect(table.contains("provider-kill") && table.contains("quota"))
    }

    @Test func aDeviceShowsAPushTwiceUnlessEveryCopyCarriedTheFirstOnesIdentity() {
        #expect(!ChaosBench.showsTwice(["volley-a"]))
        #expect(!ChaosBench.showsTwice(["volley-a", "volley-a"]))
        #expect(ChaosBench.showsTwice(["volley-a", "volley-b"]))
        #expect(ChaosBench.showsTwice(["-", "-"]))
        #expect(ChaosBench.showsTwice(["volley-a", "-"]))
        #expect(!ChaosBench.showsTwice(["-"]))
    }

    @Test func writtenUnansweredIsReadFromTheReasonOrAField() {
        var rep = JobReport(
            job: JobID("j"), entry: nil, org: OrgID("o"), app: AppName("a"), startedAt: Date(timeIntervalSince1970: 0))
        #expect(ChaosBench.writtenUnanswered(rep, raw: [:]) == nil)
        #expect(ChaosBench.writtenUnanswered(rep, raw: ["writtenUnanswered": 7]) == 7)
        rep.failedByReason["transport:written-unanswered"] = 3
        #expect(ChaosBench.writtenUnanswered(rep, raw: [:]) == 3)
    }
}
