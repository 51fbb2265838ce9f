import Foundation
import Testing
import VolleyCore
import VolleyService
import VolleyStore
import VolleyTestDoubles
import VolleyTestSupport
import VolleyTestTags

/// `/v1/schedules` on a real Redis, with a real `volley worker` process promoting the due runs and the mock
/// receiving them: a run is a job of its own, with its derived id, accepted once.
@Suite(.serialized, .tags(.integration)) struct SchedulesIntegrationTests {
    @Test func aScheduleThroughTheAPIRunsOnceWithItsDerivedID() async throws {
        let w = try MockWorld()
        defer { w.stop() }
        let api = try await RunningAPI(configFile: try APIServerTests.config(w))
        let send = try APIServerTests.key(w, org: "orgA", role: .send)
        let read = try APIServerTests.key(w, org: "orgA", role: .read)
        let token = "beef" + String(repeating: "2", count: 60)
        // The first run a few seconds ahead, on a whole second.
        let run = Date(timeIntervalSince1970: (Date().timeIntervalSince1970 + 4).rounded(.up))
        let body = """
            {"id":"flash","start":"\(RFC3339.format(run))","frequency":"once","timeZone":"Europe/Berlin",
             "job":{"app":"app1","devices":[{"platform":"ios","token":"\(token)"}],"notification":{"title":"Now"}}}
            """
        let created = try await api.call("POST", "/v1/schedules", token: send, json: body)
        #expect(created.status == 201, "\(created.text)")
        #expect(created.headers["location"] == "/v1/schedules/flash")
        #expect(created.json["nextRunAt"] as? String == RFC3339.format(run))
        #expect(created.json["paused"] as? Bool == false)
        // The same id again is a conflict; a bad field is named.
        #expect(try await api.call("POST", "/v1/schedules", token: send, json: body).status == 409)
        let bad = try await api.call(
            "POST", "/v1/schedules", token: send,
            json: body.replacingOccurrences(of: "Europe/Berlin", with: "Mars/Base"))
        #expect(bad.status == 400)
        #expect(bad.field == "timeZone")
        #expect(try await api.call("POST", "/v1/schedules", token: read, json: body).status == 403)

        let worker = try WorkerProcess(
            config: try w.writeConfig(worker: ["blockMs": "100"]), consumer: "sched-w", logDirectory: w.dir)
        defer { if worker.isRunning { worker.kill9() } }
        let runJob = Schedule.runJobID(schedule: "flash", run: run)
        #expect(runJob.rawValue == "flash-\(Int64(run.timeIntervalSince1970))")
        try await waitUntil("the report of \(runJob): \(worker.log.suffix(1500))", timeout: .seconds(60)) {
            (try? w.h.report(for: runJob)) != nil
        }
        #expect(try w.h.report(for: runJob)?.accepted == 1)
        #expect(w.mock.stats().acceptedAPNs == 1)
        // The run went to the stream once, and the schedule says so.
        let entries = try w.redis.client(name: "x").checked(["XRANGE", "volley:jobs", "-", "+"]).array ?? []
        #expect(entries.count == 1)
        let got = try await api.call("GET", "/v1/schedules/flash", token: read)
        #expect(got.json["lastRunJob"] as? String == runJob.rawValue)
        #expect(got.json["nextRunAt"] is NSNull)
        // The run is a job of its own: the API knows it.
        #expect(try await api.call("GET", "/v1/jobs/\(runJob)", token: read).json["state"] as? String == "done")
        await api.stop()
    }

    /// A schedule's job meets the checks of `POST /v1/jobs` with the providers' own preparation (the encoders the
    /// workers run): what every run would be dead-lettered for is a 4xx naming `job.<field>`, and nothing is stored.
    @Test func aScheduleWhoseRunsWouldAllBeDeadLetteredIsRefused() async throws {
        let w = try MockWorld()
        defer { w.stop() }
        let api = try await RunningAPI(configFile: try APIServerTests.config(w))
        let send = try APIServerTests.key(w, org: "orgA", role: .send)
        func schedule(_ job: String) -> String {
            #"{"id":"digest","start":"2030-01-07T09:00:00+01:00","frequency":"daily","timeZone":"Europe/Berlin","#
                + #""job":\#(job)}"#
        }
        var refused = APIHoldsGroundTests.refused.map { bad in
            (#"{"app":"app1","recipients":["005A"],"notification":\#(bad.notification)}"#, 400, "job." + bad.field)
        }
        refused += [
            (#"{"app":"app1","recipients":["005A"],"templateId":"nowhere"}"#, 404, "job.templateId"),
            (
                #"{"app":"app1","recipients":["005A"],"sendAt":"2030-01-07T08:00:00Z","notification":{"title":"Hi"}}"#,
                400, "job.sendAt"
            ),
        ]
        for (job, status, field) in refused {
            let answer = try await api.call("POST", "/v1/schedules", token: send, json: schedule(job))
            #expect(answer.status == status, "\(field): \(answer.text)")
            #expect(answer.field == field, "\(answer.text)")
        }
        let list = try await api.call("GET", "/v1/schedules", token: send)
        #expect((list.json["schedules"] as? [Any])?.isEmpty == true, "\(list.text)")
        let fine = try await api.call(
            "POST", "/v1/schedules", token: send,
            json: schedule(#"{"app":"app1","recipients":["005A"],"notification":{"title":"Hi","ttl":60}}"#))
        #expect(fine.status == 201, "\(fine.text)")
        await api.stop()
    }

    @Test func aScheduleIsListedPausedResumedAndDeleted() async throws {
        let w = try MockWorld()
        defer { w.stop() }
        let api = try await RunningAPI(configFile: try APIServerTests.config(w))
        let send = try APIServerTests.key(w, org: "orgA", role: .send)
        let otherOrg = try APIServerTests.key(w, org: "orgC", role: .read)
        let body = """
            {"id":"digest","start":"2030-01-07T09:00:00+01:00","frequency":"weekly","days":["mon","thu"],
             "timeZone":"Europe/Berlin","job":{"app":"app1","recipients":["005A"],"notification":{"title":"Digest"}}}
            """
        #expect(try await api.call("POST", "/v1/schedules", token: send, json: body).status == 201)
        let list = try await api.call("GET", "/v1/schedules", token: send)
        #expect((list.json["schedules"] as? [[String: Any]])?.map { $0["id"] as? String } == ["digest"])
        #expect(
            (try await api.call("GET", "/v1/schedules", token: otherOrg).json["schedules"] as? [Any])?.isEmpty == true)
        let paused = try await api.call("POST", "/v1/schedules/digest/pause", token: send)
        #expect(paused.json["paused"] as? Bool == true)
        let resumed = try await api.call("POST", "/v1/schedules/digest/resume", token: send)
        #expect(resumed.json["paused"] as? Bool == false)
        #expect(resumed.json["nextRunAt"] as? String == "2030-01-07T08:00:00Z")
        #expect(resumed.json["days"] as? [String] == ["mon", "thu"])
        #expect(try await api.call("DELETE", "/v1/schedules/digest", token: send).status == 204)
        #expect(try await api.call("GET", "/v1/schedules/digest", token: send).status == 404)
        #expect(try await api.call("POST", "/v1/schedules/digest/pause", token: send).status == 404)
        await api.stop()
    }
}
