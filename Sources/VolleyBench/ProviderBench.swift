// `volley-bench transport --vs-provider`: the same closed loop, but every request goes through `APNSProvider`
// (prepared once per job; per device: request build, apns-id, cached provider token, outcome table), against the
// same server in the same run, so the provider's overhead over the bare transport shows as a ratio.
import Dispatch
import Foundation
import Logging
import Synchronization
import VolleyAPNs
import VolleyCore
import VolleyHTTP2

extension TransportBench {
    struct ProviderRun {
        var rate: Double
        var cpuSeconds: Double
        var failures: Int
    }

    /// A provider against the bench server, warmed up once and measured once per round (rounds alternate with
    /// the bare transport and h2load, so a noisy spell hits every contender).
    final class ProviderRunner: Sendable {
        let provider: APNSProvider
        let devices: [Device]
        let notification: VolleyCore.Notification
        let inFlight: Int
        let requests: Int
        /// What the provider sends for the first 1,024 devices, built by the provider's own encoder, for the bare
        /// transport to cycle through: byte for byte the provider's kind of request (distinct never-indexed paths
        /// and apns-ids), few enough to stay in cache, so the baseline pays no cold-memory penalty the provider,
        /// which builds each request just before sending it, does not pay either.
        let sameRequests: [HTTP2Request]

        init(_ o: TransportBenchOptions, _ ep: BenchEndpoints, logger: Logger) async throws {
            guard let apns = ep.apns else {
                throw TransportBenchError("--vs-provider needs a server with APNs credentials (the mock)")
            }
            let app = APNSAppConfiguration(
                name: "Bench", credentials: .token(keyFile: apns.p8_file, keyID: apns.key_id, teamID: apns.team_id),
                topic: apns.topic, environment: .production, host: ep.host, port: ep.port,
                caFile: ep.ca_file.isEmpty ? nil : ep.ca_file, connections: o.connections,
                maxConcurrentStreams: o.concurrency)
            provider = try APNSProvider(
                app: app, tokens: APNSTokenRegistry(), logger: logger,
                makeTransport: HTTP2ConnectionPool.submitterFactory(logger: logger))
            // A notification whose encoded payload is about `bodyBytes`, like the transport run's body.
            let pad = String(repeating: "x", count: max(0, o.bodyBytes - 60))
            notification = VolleyCore.Notification(title: "Volley", body: pad)
            inFlight = o.connections * o.concurrency
            requests = o.requests
            let devices = (0..<o.requests).map {
                Device(platform: .ios, token: DeviceToken(String(format: "%064x", $0 + 1)))
            }
            self.devices = devices
            let prepared = try APNSPreparedNotification(
                notification, jobID: JobID("bench-same-requests"), bundleID: apns.topic, now: Date())
            let authorization = try provider.tokenProvider?.authorization()
            let authority = "\(ep.host):\(ep.port)"
            sameRequests = devices.prefix(1024).map {
                prepared.request(for: $0, authority: authority, authorization: authorization)
            }
            _ = await loop("bench-warmup", min(o.warmupRequests, o.requests))
        }

        func shutdown() { provider.shutdown() }

        /// One measured round.
        func run(round: Int) async -> ProviderRun {
            let cpu0 = cpuSeconds(RUSAGE_SELF.rawValue)
            let r = await loop(JobID("bench-provider-\(round)"), requests)
            let cpu = cpuSeconds(RUSAGE_SELF.rawValue) - cpu0
            return ProviderRun(
                rate: r.seconds > 0 ? Double(requests) / r.seconds : 0, cpuSeconds: cpu, failures: r.failures)
        }

        private func loop(_ jobID: JobID, _ count: Int) async -> (seconds: Double, failures: Int) {
            struct S {
                var next = 0
                var done = 0
                var failures = 0
                var cont: CheckedContinuation<Void, Never>?
            }
            let state = Mutex(S())
            let prepared: any PreparedNotification
            do { prepared = try provider.prepare(notification, jobID: jobID) } catch { return (0, count) }
            let start = DispatchTime.now().uptimeNanoseconds
            @Sendable func one(_ i: Int) {
                provider.send(prepared, to: devices[i], jobID: jobID) { outcome in
                    let (next, finished): (Int?, CheckedContinuation<Void, Never>?) = state.withLock { s in
                        s.done += 1
                        if !outcome.isAccepted { s.failures += 1 }
                        if s.next < count {
                            s.next += 1
                            return (s.next - 1, nil)
                        }
                        if s.done == count {
                            let c = s.cont
                            s.cont = nil
                            return (nil, c)
                        }
                        return (nil, nil)
                    }
                    if let next { one(next) }
                    finished?.resume()
                }
            }
            await withCheckedContinuation { (c: CheckedContinuation<Void, Never>) in
                let n = state.withLock { s in
                    s.cont = c
                    s.next = min(count, inFlight)
                    return s.next
                }
                for i in 0..<n { one(i) }
            }
            let failures = state.withLock { $0.failures }
            return (Double(DispatchTime.now().uptimeNanoseconds - start) / 1e9, failures)
        }
    }
}
