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
/// - `encrypted`: the same, and every device registered its own RSA-2048 key (half OAEP, half PKCS #1 v1.5;
///   `--payload-keys` distinct keys, by default one per device, cycled when fewer; see `BenchKeyPool`): per device
///   one key parsed, one RSA public-key operation and one AES pass.
/// - `personalized`: the title and body are a template (`{{ first_name | 'Friend' }}`), rendered per user from the
///   directory's attributes (every campaign user has a `first_name`).
/// - `capped`: the bench org gets a frequency cap (`cappedWindow`, `cappedMax`) that no campaign user reaches, so
///   every chunk of users pays the caps' script (check and record) and every device is still pushed; the plain
///   campaign bypasses the caps (`enableFrequencyCap: false`), which costs nothing. `payload_vs_plain` is the capped
///   campaign's rate against the same campaign without caps.
/// - `tracked`: the campaign as it is sent by default, each push carrying its device's message id (`mid`), against
///   the same campaign with `"tracking": false`, which carries none.
extension E2EBench {
    public enum PayloadKind: String, Sendable, CaseIterable {
        case salesforce, encrypted, personalized, capped, tracked
    }

    /// The cap `--payload capped` puts on the bench org: far above the rounds a run sends to one user.
    static let cappedWindow = "1h"
    static let cappedMax = 1000

    /// The custom notification type the per-person campaign names.
    static let benchType = "0MLbench"
    /// The device keys of `--payload encrypted`: `Options.payloadKeys` distinct keys, one per device by default.
    func benchKeys(count: Int) throws -> BenchKeyPool {
        let started = benchNow()
        let pool = try BenchKeyPool(keys: count)
        if options.progress {
            stderrLine(
                "device keys: \(grouped(Double(pool.count))) distinct RSA-2048 keys from \(pool.primeCount) primes "
                    + String(format: "in %.1f s\n", benchNow() - started))
        }
        return pool
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
        case .salesforce, .encrypted, .capped, .tracked:
            o.title = "Volley"
            o.body = notificationBody()
        case .personalized:
            o.title = "Hi {{ first_name | 'Friend' }}"
            o.body = "{{ first_name | 'Friend' }}, " + notificationBody()
        }
        var job = try JobSubmission.buildJob(o)
        if kind == .capped || kind == .tracked {
            return String(decoding: try Self.jobEncoder.encode(job), as: UTF8.self)
        }
        if kind != .personalized {
            job.notification.type = Self.benchType
            job.notification.targetId = "006bench0000001"
        }
        return String(decoding: try Self.jobEncoder.encode(job), as: UTF8.self)
    }

    /// Sets up what the per-person campaign needs beyond the registry: the custom notification type.
    func preparePayload(_ kind: PayloadKind, settings: PipelineSettings) throws {
        if kind == .tracked { return }
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
        // A custom notification reaches only the apps subscribed to its type.
        try types.setSetting(org: Self.org, app: E2EBench.app, typeID: Self.benchType, enabled: true, pushEnabled: nil)
    }

    /// One campaign job, from its XADD until its report is published and nothing is pending: devices per second,
    /// and the workers' CPU seconds (user + system, /proc) over the same window.
    ///
    /// The poll reads only the report entries added since the XADD (one exclusive XRANGE per report stream every
    /// 20 ms) and decodes each once, so what the bench spends polling stays small and flat however many reports the
    /// run has published: it shares the machine with the worker it measures.
    func campaignRate(
        json: String, id: String, settings: PipelineSettings, client: RedisClient, producer: JobProducer,
        workers: [BenchChild]
    ) throws -> (rate: Double, report: JobReport, workerCPUSeconds: Double) {
        var cursors = try settings.store.reportStreams.map { stream in
            (
                stream,
                try client.checked(["XREVRANGE", stream, "+", "-", "COUNT", "1"]).array?.first?.array?.first?.string
                    ?? "0-0"
            )
        }
        let w0 = workers.map { $0.sample()?.cpuSeconds ?? 0 }
        let t0 = benchNow()
        _ = try client.checked(["XADD", settings.store.jobStream(for: JobID(id)), "*", "job", json])
        var report: JobReport?
        while true {
            if report == nil {
                for k in cursors.indices {
                    let entries = try client.checked(["XRANGE", cursors[k].0, "(" + cursors[k].1, "+"]).array ?? []
                    for e in entries {
                        guard let entry = e.array, entry.count == 2, let entryID = entry[0].string else { continue }
                        cursors[k].1 = entryID
                        guard let text = entry[1].fieldPairs.first(where: { $0.0 == "report" })?.1,
                            let r = try? ReportCoding.decoder.decode(JobReport.self, from: Data(text.utf8)),
                            r.job.rawValue == id
                        else { continue }
                        report = r
                    }
                }
            }
            if let report, try producer.pendingCount() == 0 {
                let seconds = benchNow() - t0
                let w1 = workers.map { $0.sample()?.cpuSeconds ?? 0 }
                let cpu = zip(w1, w0).reduce(0.0) { $0 + max(0, $1.0 - $1.1) }
                return (Double(report.devices) / seconds, report, cpu)
            }
            if benchNow() - t0 > options.timeoutSeconds {
                throw BenchError("the payload campaign \(id) did not finish in \(Int(options.timeoutSeconds)) s")
            }
            usleep(20_000)
        }
    }

    /// Alternates the plain and the per-person campaign `rounds` times and returns their median rates.
    func measurePayload(
        _ kind: PayloadKind, settings: PipelineSettings, client: RedisClient, producer: JobProducer,
        workers: [BenchChild], keys: Int?
    ) throws -> PayloadFigures {
        var plain: [Double] = []
        var personal: [Double] = []
        var plainCPU: [Double] = []
        var personalCPU: [Double] = []
        var last: JobReport?
        let tag = UUID().uuidString.prefix(6)
        for round in 0..<max(1, options.payloadRounds) {
            let plainID = "plain-\(tag)-\(round)"
            let plainJSON = try job(id: plainID, users: [Self.campaignGroup.rawValue])
            let p = try campaignRate(
                json: kind == .capped
                    ? try Self.bypassingCaps(plainJSON) : kind == .tracked ? try Self.untracked(plainJSON) : plainJSON,
                id: plainID,
                settings: settings, client: client, producer: producer, workers: workers)
            plain.append(p.rate)
            plainCPU.append(p.workerCPUSeconds / Double(max(1, p.report.devices)) * 1e6)
            let payloadID = "\(kind.rawValue)-\(tag)-\(round)"
            let q = try campaignRate(
                json: try payloadJob(kind, id: payloadID), id: payloadID, settings: settings, client: client,
                producer: producer, workers: workers)
            personal.append(q.rate)
            personalCPU.append(q.workerCPUSeconds / Double(max(1, q.report.devices)) * 1e6)
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
                    "payload round \(round + 1): plain \(grouped(p.rate)) devices/s "
                        + String(format: "(worker %.1f µs/device), ", plainCPU[round]) + "\(kind.rawValue) "
                        + "\(grouped(q.rate)) devices/s"
                        + String(format: " (worker %.1f µs/device)\n", personalCPU[round]))
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
            payload_template_names_missing: last?.personalContent?.templateNamesMissing ?? 0,
            plain_worker_cpu_us_per_device: median(plainCPU), payload_worker_cpu_us_per_device: median(personalCPU),
            plain_worker_cpu_us_per_device_rounds: plainCPU, payload_worker_cpu_us_per_device_rounds: personalCPU,
            payload_keys: keys)
    }

    /// The plain campaign's job with `enableFrequencyCap: false`.
    static func bypassingCaps(_ json: String) throws -> String {
        var job = try JSONDecoder().decode(PushJob.self, from: Data(json.utf8))
        job.enableFrequencyCap = false
        return String(decoding: try jobEncoder.encode(job), as: UTF8.self)
    }

    /// The plain campaign's job with `"tracking": false`: its pushes carry no message id.
    static func untracked(_ json: String) throws -> String {
        var job = try JSONDecoder().decode(PushJob.self, from: Data(json.utf8))
        job.tracking = false
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
        /// The workers' CPU (user + system) per device of each campaign, µs: medians over the rounds, and each round.
        public var plain_worker_cpu_us_per_device: Double
        public var payload_worker_cpu_us_per_device: Double
        public var plain_worker_cpu_us_per_device_rounds: [Double]
        public var payload_worker_cpu_us_per_device_rounds: [Double]
        /// `encrypted`: the distinct device keys the campaign's devices registered (absent for the other kinds).
        public var payload_keys: Int?
    }
}

/// Distinct RSA-2048 public keys for `--payload encrypted`, as many as there are devices, made once per run: the
/// moduli are the products of pairs of 1,024-bit primes from a pool (`openssl prime -generate`, on every core), so
/// `p` primes give p·(p−1)/2 keys: 448 primes for 100,000 devices, 1,415 for 1,000,000. Each key is a real RSA-2048
/// key (n = p·q with both primes 1,024 bits and the top two bits set, e = 65537 prime to p−1 and q−1), parsed and
/// used by the worker exactly as a device's own key; keys sharing a prime would be broken by a GCD, which does not
/// matter to a benchmark that only encrypts to them. Key `i` is built when asked for (a multiplication and 294 bytes
/// of DER), so a million devices do not hold a million keys.
struct BenchKeyPool: Sendable {
    /// The distinct keys; key `i` is key `i % count`.
    let count: Int
    /// The primes, little-endian 64-bit limbs (16 each).
    private let primes: [[UInt64]]
    var primeCount: Int { primes.count }

    static let exponent: UInt64 = 65537

    init(keys: Int) throws {
        let count = max(1, keys)
        var p = 2
        while p * (p - 1) / 2 < count { p += 1 }
        self.count = count
        self.primes = try Self.makePrimes(p)
    }

    /// Key `i` as devices register it: base64 of the SubjectPublicKeyInfo DER.
    func key(_ i: Int) -> String {
        let k = i % count
        // Pairs in the order (0,1), (0,2), (1,2), (0,3), …: key k is (a, b) with b(b−1)/2 ≤ k < b(b+1)/2.
        var b = Int((1 + (1 + 8 * Double(k)).squareRoot()) / 2)
        while b * (b - 1) / 2 > k { b -= 1 }
        while (b + 1) * b / 2 <= k { b += 1 }
        let a = k - b * (b - 1) / 2
        return Data(Self.subjectPublicKeyInfo(modulus: Self.product(primes[a], primes[b]))).base64EncodedString()
    }

    /// `count` distinct 1,024-bit primes p with p mod 65537 ≠ 1, from `openssl prime`, one shell loop per core.
    private static func makePrimes(_ count: Int) throws -> [[UInt64]] {
        let lanes = max(1, min(count, ProcessInfo.processInfo.activeProcessorCount))
        final class Results: @unchecked Sendable {
            let lock = NSLock()
            var texts: [String] = []
            var error: Error?
        }
        var primes: [[UInt64]] = []
        var seen = Set<[UInt64]>()
        while primes.count < count {
            let wanted = count - primes.count + 2
            let results = Results()
            DispatchQueue.concurrentPerform(iterations: lanes) { lane in
                let n = wanted / lanes + (lane < wanted % lanes ? 1 : 0)
                guard n > 0 else { return }
                do {
                    let out = try E2EBench.runTool(
                        "/bin/sh", ["-c", "for i in $(seq \(n)); do openssl prime -generate -bits 1024 -hex; done"])
                    results.lock.withLock { results.texts.append(String(decoding: out, as: UTF8.self)) }
                } catch {
                    results.lock.withLock { results.error = error }
                }
            }
            if let e = results.error { throw BenchError("generating device key primes with openssl failed: \(e)") }
            for line in results.texts.joined(separator: "\n").split(whereSeparator: \.isNewline) {
                guard let limbs = limbs(hex: line), limbs[15] >> 62 == 3, remainder(limbs, exponent) != 1,
                    seen.insert(limbs).inserted, primes.count < count
                else { continue }
                primes.append(limbs)
            }
        }
        return primes
    }

    /// 256 hex digits as 16 little-endian limbs.
    static func limbs(hex: Substring) -> [UInt64]? {
        let digits = Array(hex.utf8)
        guard digits.count == 256 else { return nil }
        var out = [UInt64](repeating: 0, count: 16)
        for (j, c) in digits.enumerated() {
            guard let d = hexDigitValue(c) else { return nil }
            let bit = (255 - j) * 4
            out[bit / 64] |= UInt64(d) << UInt64(bit % 64)
        }
        return out
    }

    /// `x mod m` for a small `m`.
    static func remainder(_ x: [UInt64], _ m: UInt64) -> UInt64 {
        var r: UInt64 = 0
        for limb in x.reversed() {
            r = ((r << 32) | (limb >> 32)) % m
            r = ((r << 32) | (limb & 0xFFFF_FFFF)) % m
        }
        return r
    }

    /// The product of two numbers in little-endian limbs.
    static func product(_ x: [UInt64], _ y: [UInt64]) -> [UInt64] {
        var out = [UInt64](repeating: 0, count: x.count + y.count)
        for i in x.indices {
            var carry: UInt64 = 0
            for j in y.indices {
                let (high, low) = x[i].multipliedFullWidth(by: y[j])
                let (s1, o1) = low.addingReportingOverflow(out[i + j])
                let (s2, o2) = s1.addingReportingOverflow(carry)
                out[i + j] = s2
                carry = high &+ (o1 ? 1 : 0) &+ (o2 ? 1 : 0)
            }
            out[i + y.count] = carry
        }
        return out
    }

    /// DER of SubjectPublicKeyInfo { rsaEncryption, RSAPublicKey { n, 65537 } } for a 2,048-bit modulus (RFC 8017
    /// A.1.1, RFC 5280 §4.1.2.7): 294 bytes.
    static func subjectPublicKeyInfo(modulus n: [UInt64]) -> [UInt8] {
        var out: [UInt8] = [0x30, 0x82, 0x01, 0x22]
        // AlgorithmIdentifier: rsaEncryption (1.2.840.113549.1.1.1), NULL parameters.
        out += [0x30, 0x0D, 0x06, 0x09, 0x2A, 0x86, 0x48, 0x86, 0xF7, 0x0D, 0x01, 0x01, 0x01, 0x05, 0x00]
        // BIT STRING, no unused bits, holding RSAPublicKey: INTEGER n (a leading zero keeps it positive), INTEGER e.
        out += [0x03, 0x82, 0x01, 0x0F, 0x00, 0x30, 0x82, 0x01, 0x0A, 0x02, 0x82, 0x01, 0x01, 0x00]
        for limb in n.reversed() {
            for shift in stride(from: 56, through: 0, by: -8) { out.append(UInt8(truncatingIfNeeded: limb >> shift)) }
        }
        out += [0x02, 0x03, 0x01, 0x00, 0x01]
        return out
    }
}
