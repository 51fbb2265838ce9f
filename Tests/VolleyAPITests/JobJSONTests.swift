import Foundation
import Testing
import VolleyCore
import VolleyTestTags

@testable import VolleyAPI

@Suite(.tags(.unit))
struct JobJSONTests {
    static let everyKey = #"""
        {"id":"j-1","org":"orgA","app":"app1","recipients":["005A","00G1",{"segment":"gold"},{"all":true}],
         "exclude":["005B",{"segment":"churned"}],
         "devices":[{"platform":"ios","token":"beef","environment":"sandbox"},{"platform":"android","token":"f1"}],
         "notification":{"title":"Hi \"there\"","body":"a/b","localized":{"es":{"title":"Hola","body":"b"}},
           "badge":3,"sound":"ping.caf","data":{"recordId":"001","n":[1,2]},"contentAvailable":true,"ttl":60},
         "apns":{"aps":{"alert":"x"}},"fcm":{"data":{"k":"v"}},"platforms":["ios"],"debug":true,
         "salesforcePayload":false,"inbox":true,"notificationId":"n-1","templateId":"tpl-1",
         "customData":{"plan":"gold","n":9007199254740993},"throttlePerMinute":1019,
         "enableFrequencyCap":false,"sendAt":"2026-12-01T09:00:00.5+01:00",
         "deliverAtLocalTime":"09:30","tracking":false}
        """#

    /// The API reads a body into the job a worker decodes from the same bytes.
    @Test func theBodyReadsAsTheWorkersJob() throws {
        let data = Data(Self.everyKey.utf8)
        let body = try JobBody(data, org: nil)
        #expect(body.job == (try PushJob(json: JSONValue(parsing: data), defaultOrg: nil)))
        #expect(body.job == (try JSONDecoder().decode(PushJob.self, from: data)))
        #expect(Set(body.keys) == Input.jobSchema.job)
    }

    /// The API takes every notification key a worker takes (`targetPageRef` included), and refuses `shard`.
    @Test func theAPITakesTheWorkersNotificationKeys() throws {
        #expect(Input.jobSchema.notification == JobKeys.notification)
        let body = #"{"app":"a","recipients":["u"],"notification":{"title":"t","targetPageRef":"{\"type\":\"x\"}"}}"#
        guard case .object(let job) = try JSONValue(parsing: body) else {
            Issue.record("not an object")
            return
        }
        #expect(JobKeys.unknownKeys(in: job, schema: Input.jobSchema).isEmpty)
        var sharded = job
        sharded["shard"] = .object(["parent": .string("p"), "index": .number(0), "count": .number(2)])
        #expect(JobKeys.unknownKeys(in: sharded, schema: Input.jobSchema).first?.path == "shard")
    }

    /// A body without an org takes the caller's; one with an org keeps it for the caller to check.
    @Test func aBodyWithoutAnOrgTakesTheCallers() throws {
        let body = Data(#"{"app":"app1","recipients":["005A"],"notification":{"title":"t"}}"#.utf8)
        let decoded = try JobBody(body, org: "orgB")
        #expect(decoded.job.org == "orgB")
        #expect(!decoded.keys.contains("org"))
        #expect(throws: APIProblem.self) { try JobBody(body, org: nil) }
        let named = Data(#"{"org":"orgA","app":"app1","recipients":["005A"],"notification":{}}"#.utf8)
        #expect(try JobBody(named, org: "orgB").job.org == "orgA")
    }

    /// Unknown keys are named with their path, at every level the schema fixes; free-form maps are not checked.
    @Test(arguments: [
        (#"{"app":"a","schedule":1,"notification":{}}"#, "schedule"),
        (#"{"app":"a","notification":{"titel":"x"}}"#, "notification.titel"),
        (#"{"app":"a","notification":{"localized":{"es":{"tilte":"x"}}}}"#, "notification.localized.es.tilte"),
        (
            #"{"app":"a","devices":[{"platform":"ios","token":"t"},{"token":"t","x":1}],"notification":{}}"#,
            "devices[1].x"
        ),
        (#"{"app":"a","devices":[7,{"platform":"ios","token":"t","x":1}],"notification":{}}"#, "devices[1].x"),
        (#"{"app":"a","recipients":"u","notification":{}}"#, "recipients"),
        (#"[1,2]"#, "body"),
        (#"{"app":"a","#, "body"),
        (#"{"app":"a","recipients":["u",7],"notification":{}}"#, "recipients[1]"),
        (#"{"app":"a","recipients":["u"],"notification":{"badge":1.5}}"#, "notification.badge"),
        (#"{"app":"a","devices":[{"platform":"blackberry","token":"t"}],"notification":{}}"#, "devices[0].platform"),
        (
            #"{"app":"a","recipients":["u"],"notification":{"localized":{"es":{"title":1}}}}"#,
            "notification.localized.es.title"
        ),
        (#"{"app":"a","recipients":["u"]}"#, "notification"),
        (#"{"app":"a","recipients":["u"],"shard":{"parent":"p","index":0,"count":2},"notification":{}}"#, "shard"),
    ])
    func badBodiesNameTheirField(_ json: String, _ field: String) throws {
        do {
            _ = try JobBody(Data(json.utf8), org: "o")
            Issue.record("decoded \(json)")
        } catch let p as APIProblem {
            #expect(p.field == field, "\(p)")
            #expect(p.status == .badRequest)
        }
    }

    @Test func anUnknownKeySaysWhatItProbablyMeant() throws {
        let json = #"{"app":"a","recipients":["u"],"notification":{"titel":"x"}}"#
        let problem = try #require(throws: APIProblem.self) { try JobBody(Data(json.utf8), org: "o") }
        #expect(problem.field == "notification.titel")
        #expect(problem.detail == "unknown key; did you mean 'title'?")
    }

    @Test func freeFormMapsAreNotChecked() throws {
        let json = #"{"app":"a","recipients":["u"],"notification":{"data":{"anything":1}},"apns":{"aps":{"x":1}}}"#
        _ = try JobBody(Data(json.utf8), org: "o")
    }

    /// The org and id go in as the first members of a body without them, whatever white space it has, escaped.
    @Test func membersAreSplicedIntoTheBodyInFront() throws {
        func spliced(_ body: String, _ members: [(key: String, value: String)]) -> String? {
            Input.addingMembers(members, to: Data(body.utf8))
        }
        #expect(spliced(#"{"app":"app1"}"#, [("org", "org\"A")]) == #"{"org":"org\"A","app":"app1"}"#)
        #expect(spliced(" \n{ }", [("org", "org\"A")]) == " \n{\"org\":\"org\\\"A\" }")
        #expect(spliced("{}", [("id", "j"), ("org", "o")]) == #"{"id":"j","org":"o"}"#)
        #expect(spliced(#"{"a":1}"#, []) == #"{"a":1}"#)
        #expect(spliced(" {}", []) == " {}")
        // Every control character takes its longest escape (`\u00XX`): the text has room for it.
        #expect(
            spliced("{}", [("k", "\u{01}\u{02}\u{1F}")]) == #"{"k":"\u0001\u0002\u001f"}"#)
        let job = try #require(
            Input.addingMembers(
                [("id", "job-1.a_b:c-d"), ("org", "orgA")],
                to: Data(#"{"app":"app1","recipients":["005A"],"notification":{"title":"t"}}"#.utf8)))
        let decoded = try JSONDecoder().decode(PushJob.self, from: Data(job.utf8))
        #expect(decoded.org == "orgA")
        #expect(decoded.id == "job-1.a_b:c-d")
        // Not UTF-8 text that starts with "{": the caller serialises the decoded job instead.
        #expect(Input.addingMembers([("org", "orgA")], to: Data([0xFF, 0xFE, 0x7B, 0x00, 0x7D, 0x00])) == nil)
    }

    /// The ids the API generates come from the kernel's bytes read in bulk: across several refills of the pool (256
    /// ids each) every id is a distinct version-4 UUID.
    @Test func idsFromTheKernelPoolAreDistinctVersion4UUIDs() {
        let ids = (0..<1000).map { _ in KernelRandom.jobID().rawValue }
        #expect(Set(ids).count == ids.count)
        for id in ids {
            let uuid = String(id.dropFirst(4))
            #expect(id.hasPrefix("job-") && UUID(uuidString: uuid)?.uuidString.lowercased() == uuid, "\(id)")
            #expect(Array(uuid.utf8)[14] == UInt8(ascii: "4"), "\(id)")
            #expect(
                [UInt8(ascii: "8"), UInt8(ascii: "9"), UInt8(ascii: "a"), UInt8(ascii: "b")].contains(
                    Array(uuid.utf8)[19]), "\(id)")
        }
    }
}
