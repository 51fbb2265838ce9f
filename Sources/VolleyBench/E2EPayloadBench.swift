// swift-format-ignore-file: AlwaysUseLowerCamelCase

// The result types' properties are the `--json` keys (snake_case, a contract with users' scripts), named as written.
import Foundation
import VolleyCore
import VolleyRedis
import VolleyService
import VolleyStore

/// `volley-bench e2e --payload salesforce|encrypted|personalized`: what per-person payloads cost against the shared
/// payload of a campaign, measured in one run on the same workers, registry and mock. After the main load phase the
/// bench sends the campaign (one group job to every campaign user) alternately as a plain job and as the chosen
/// per-person job, `payloadRounds` times each, and reports the median rate of each.
///
/// - `salesforce`: the notification names a custom notification type: each device gets the Notification Builder
///   payload (`nid`, `uid`, badge = the user's unseen count read as the inbox stores the notification).
/// - `encrypted`: the same, and every device registered an RSA-2048 key (half OAEP, half PKCS #1 v1.5; a pool of
///   `encryptionKeys` keys, each parsed once per job delivery): one RSA public-key operation and one AES pass per
///   device.
/// - `personalized`: the title and body are a template (`{{ first_name | 'Friend' }}`), rendered per user from the
///   directory's attributes (every campaign user has a `first_name`).
/// - `capped`: the bench org gets a frequency cap (`cappedWindow`, `cappedMax`) that no campaign user reaches, so
///   every chunk of users pays the caps' script (check and record) and every device is still pushed; the plain
///   campaign bypasses the caps (`enableFrequencyCap: false`), which costs nothing. `payload_vs_plain` is the capped
///   campaign's rate against the same campaign without caps.
extension E2EBench {
    public enum PayloadKind: String, Sendable, CaseIterable {
        case salesforce, encrypted, personalized, capped
    }

    /// The cap `--payload capped` puts on the bench org: far above the rounds a run sends to one user.
    static let cappedWindow = "1h"
    static let cappedMax = 1000

    /// The custom notification type the per-person campaign names.
    static let benchType = "0MLbench"
    /// Distinct device keys for `--payload encrypted`, cycled over the devices.
    static let encryptionKeys = 16

    /// RSA-2048 public keys (base64 SubjectPublicKeyInfo DER, as the SDKs register them), made with `openssl`.
    static func benchKeys(count: Int, directory: String) throws -> [String] {
        try (0..<count).map { i in
            let pem = directory + "/device-key-\(i).pem"
            try runTool(
                "/usr/bin/env",
                [
                    "openssl", "genpkey", "-algorithm", "RSA", "-pkeyopt", "rsa_keygen_bits:2048",
                    "-out", pem,
                ])
            let der = try runTool("/usr/bin/env", ["openssl", "pkey", "-in", pem, "-pubout", "-outform", "DER"])
            return der.base64EncodedString()
        }
    }

    @discardableResult
    static func runTool(_ executable: String, _ arguments: [String]) throws -> Data {
        let p = Process()
        p.executableURL = URL(fileURLWithPath: executable)
        p.arguments = arguments
        let out = Pipe()
        p.standardOutput = out
        p.standardError = FileHandle.nullDevice
        try p.run()
        let data = out.fileHandleForReading.readDataToEndOfFile()
        p.waitUntilExit()
        guard p.terminationStatus == 0 else {
            throw BenchError("\(arguments.prefix(2).joined(separator: " ")) exited \(p.terminationStatus)")
        }
        return data
    }

    /// The per-person variant of the campaign job.
    func payloadJob(_ kind: PayloadKind, id: String) throws -> String {
        var o = JobSubmission.Options(org: Self.org.rawValue, app: Self.app.rawValue)
        o.users = [Self.campaignGroup.rawValue]
        o.id = id
        switch kind {
        case .salesforce, .encrypted, .capped:
            o.title = "Volley"
            o.body = notificationBody()
        case .personalized:
            o.title = "Hi {{ first_name | 'Friend' }}"
            o.body = "{{ first_name | 'Friend' }}, " + notificationBody()
        }
        var job = try JobSubmission.buildJob(o)
        if kind == .capped { return String(decoding: try Self.jobEncoder.encode(job), as: UTF8.self) }
        if kind != .personalized {
            job.notification.type = Self.benchType
            job.notification.targetId = "006bench0000001"
        }
        return String(decoding: try Self.jobEncoder.encode(job), as: UTF8.self)
    }

    /// Sets up what the per-person campaign needs beyond the registry: the custom notification type.
    func preparePayload(_ kind: PayloadKind, settings: PipelineSettings) throws {
        if kind == .capped {
            let caps = RedisFrequencyCapStore(client: settings.client(name: "bench-caps", logger: logger))
            try caps.setRules(
                org: Self.org,
                [try FrequencyCapRule.make(window: Self.cappedWindow, max: Self.cappedMax, type: nil, at: "bench")])
            // Workers read the stored rules at most once per refresh: past it, every worker has them.
            usleep(useconds_t((FrequencyCapRulebook.defaultRefreshSeconds + 1) * 1_000_000))
            return
        }
        let types = RedisNotificationTypeStore(client: settings.client(name: "bench-types", logger: logger))
        try types.setType(org: Self.org, NotificationType(id: Self.benchType, name: "Bench"))
    }

    /// One campaign job, from its XADD until its report is published and nothing is pending: devices per second.
    func campaignRate(
        json: String, id: String, settings: PipelineSettings, client: RedisClient, producer: JobProducer
    ) throws -> (rate: Double, report: JobReport) {
        let t0 = benchNow()
        _ = try client.checked(["XADD", settings.store.jobStream(for: JobID(id)), "*", "job", json])
        while true {
            if let r = try producer.allReports().first(where: { $0.job.rawValue == id }),
                try producer.pendingCount() == 0
            {
                let seconds = benchNow() - t0
                return (Double(r.devices) / seconds, r)
            }
            if benchNow() - t0 > options.timeoutSeconds {
                throw BenchError("the payload campaign \(id) did not finish in \(Int(options.timeoutSeconds)) s")
            }
            usleep(20_000)
        }
    }

    /// Alternates the plain and the per-person campaign `rounds` times and returns their median rates.
    func measurePayload(
        _ kind: PayloadKind, settings: PipelineSettings, client: RedisClient, producer: JobProducer
    ) throws -> PayloadFigures {
        var plain: [Double] = []
        var personal: [Double] = []
        var last: JobReport?
        let tag = UUID().uuidString.prefix(6)
        for round in 0..<max(1, options.payloadRounds) {
            let plainID = "plain-\(tag)-\(round)"
            let plainJSON = try job(id: plainID, users: [Self.campaignGroup.rawValue])
            let p = try campaignRate(
                json: kind == .capped ? try Self.bypassingCaps(plainJSON) : plainJSON, id: plainID,
                settings: settings, client: client, producer: producer)
            plain.append(p.rate)
            let payloadID = "\(kind.rawValue)-\(tag)-\(round)"
            let q = try campaignRate(
                json: try payloadJob(kind, id: payloadID), id: payloadID, settings: settings, client: client,
                producer: producer)
            personal.append(q.rate)
            last = q.report
            if kind == .capped, q.report.capped != 0 {
                throw BenchError(
                    "the capped campaign's report says capped \(q.report.capped.map(String.init) ?? "absent"), not 0: "
                        + "the workers did not apply the bench org's cap, or a user reached it")
            }
            guard q.report.accepted == q.report.devices else {
                throw BenchError(
                    "the \(kind.rawValue) campaign was not fully accepted: \(q.report.accepted) of "
                        + "\(q.report.devices) (rejected \(q.report.rejectedByReason), "
                        + "failed \(q.report.failedByReason))"
                )
            }
            if options.progress {
                stderrLine(
                    "payload round \(round + 1): plain \(grouped(p.rate)) devices/s, \(kind.rawValue) "
                        + "\(grouped(q.rate)) devices/s\n")
            }
        }
        func median(_ a: [Double]) -> Double {
            let s = a.sorted()
            return s.count % 2 == 1 ? s[s.count / 2] : (s[s.count / 2 - 1] + s[s.count / 2]) / 2
        }
        return PayloadFigures(
            payload: kind.rawValue, plain_rate: median(plain), payload_rate: median(personal),
            payload_vs_plain: median(personal) / median(plain), plain_rates: plain, payload_rates: personal,
            payload_encrypted: last?.personalContent?.encrypted ?? 0,
            payload_template_names_missing: last?.personalContent?.templateNamesMissing ?? 0)
    }

    /// The plain campaign's job with `enableFrequencyCap: false`.
    static func bypassingCaps(_ json: String) throws -> String {
        var job = try JSONDecoder().decode(PushJob.self, from: Data(json.utf8))
        job.enableFrequencyCap = false
        return String(decoding: try jobEncoder.encode(job), as: UTF8.self)
    }

    /// What `--payload` measured; merged into the run's JSON at the top level.
    public struct PayloadFigures: Sendable, Codable {
        public var payload: String
        /// Median devices per second of the plain campaign and of the per-person one, and their ratio.
        public var plain_rate: Double
        public var payload_rate: Double
        public var payload_vs_plain: Double
        /// Every round's rate, in the order run (plain first in each round).
        public var plain_rates: [Double]
        public var payload_rates: [Double]
        /// From the last per-person campaign's report: pushes encrypted, template names missing.
        public var payload_encrypted: Int
        public var payload_template_names_missing: Int
    }
}
