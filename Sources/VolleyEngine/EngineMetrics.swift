import Foundation
import Metrics
import VolleyCore

/// The engine's metrics, through swift-metrics only (the process's `main` chooses the backend; without one they
/// cost a no-op call). Every series of a closed label set is created when the worker starts, so a dashboard sees
/// zeros rather than gaps; labels are bounded: provider, configured app, outcome, a reason from the providers'
/// documented tables or `other` — never an org, a job or a token.
///
/// Counting is per recorded batch (a few hundred outcomes at once), not per send.
public final class EngineMetrics: @unchecked Sendable {
    /// `volley_notifications_total{outcome}`: per device, what was recorded for it; per recipient, why nothing
    /// was sent (`no_devices`, `unknown_recipient`, `not_enabled`, `frequency_capped`: a user a frequency cap held
    /// back, stored in the inbox only; these carry `provider="none"`).
    public static let deviceOutcomes = ["accepted", "rejected", "failed", "quota_exceeded", "expired"]
    public static let recipientOutcomes = ["no_devices", "unknown_recipient", "not_enabled", "frequency_capped"]
    /// `volley_jobs_total{result}`.
    public static let jobResults = [
        "completed", "sharded", "duplicate", "dead_lettered", "abandoned", "parked", "cancelled", "paused",
        "waves_waiting",
    ]
    /// `volley_notification_failures_total{reason}` of each provider: its documented reasons, the transport's two
    /// ways of ending a send without an answer, then `other`.
    public static let failureReasons: [PushProvider: [String]] = [
        .apns: OutcomeTable.apnsReasons.map(\.reason) + transportReasons + ["other"],
        .fcm: OutcomeTable.fcmReasons.map(\.reason) + transportReasons + ["other"],
    ]
    /// A send that never reached the provider within `worker.providerOutageSeconds`, and one written and never
    /// answered (not resent): what an alert on a provider outage looks at.
    public static let transportReasons = ["transport:provider-unreachable", "transport:written-unanswered"]
    public static let deadLetterReasons: [JobRejection.Reason] = [
        .invalidJSON, .invalidJob, .unknownApp, .tooManyRecipients, .noTargets, .invalidNotification,
        .tooManyDeliveries,
    ]

    private let lock = NSLock()
    private var notifications: [NotificationKey: Counter] = [:]
    private let failures: [PushProvider: [String: Counter]]
    private let tokensRemoved: [PushProvider: Counter]
    private let quotaExceeded: [Platform: Counter]
    private let jobs: [String: Counter]
    private let deadLetters: [String: Counter]
    private let deadLetterOther: Counter
    let redisErrors: Counter
    let jobDuration: Timer
    let queueWait: Timer
    /// From a scheduled job's due time (`sendAt`) to its first send.
    let scheduleLag: Timer
    private let draining: Recorder
    private let factory: any MetricsFactory

    private struct NotificationKey: Hashable {
        let provider: String
        let app: String
        let outcome: String
    }

    /// Creates every series at zero, `apps` being the configured app names. `factory`: the bootstrapped backend
    /// unless a test passes its own.
    public init(apps: [AppName], factory: any MetricsFactory = MetricsSystem.factory) {
        self.factory = factory
        var failures: [PushProvider: [String: Counter]] = [:]
        for (provider, reasons) in Self.failureReasons {
            var byReason: [String: Counter] = [:]
            for r in reasons {
                byReason[r] = Counter(
                    label: "volley_notification_failures_total",
                    dimensions: [("provider", provider.rawValue), ("reason", r)], factory: factory)
            }
            failures[provider] = byReason
        }
        self.failures = failures
        tokensRemoved = Dictionary(
            uniqueKeysWithValues: PushProvider.allCases.map {
                (
                    $0,
                    Counter(
                        label: "volley_device_tokens_removed_total", dimensions: [("provider", $0.rawValue)],
                        factory: factory)
                )
            })
        quotaExceeded = Dictionary(
            uniqueKeysWithValues: Platform.allCases.map {
                (
                    $0,
                    Counter(
                        label: "volley_quota_exceeded_total", dimensions: [("platform", $0.rawValue)], factory: factory)
                )
            })
        jobs = Dictionary(
            uniqueKeysWithValues: Self.jobResults.map {
                ($0, Counter(label: "volley_jobs_total", dimensions: [("result", $0)], factory: factory))
            })
        deadLetters = Dictionary(
            uniqueKeysWithValues: Self.deadLetterReasons.map {
                (
                    $0.rawValue,
                    Counter(label: "volley_dead_letters_total", dimensions: [("reason", $0.rawValue)], factory: factory)
                )
            })
        deadLetterOther = Counter(
            label: "volley_dead_letters_total", dimensions: [("reason", "other")], factory: factory)
        redisErrors = Counter(label: "volley_redis_errors_total", factory: factory)
        jobDuration = Timer(label: "volley_job_duration_seconds", factory: factory)
        queueWait = Timer(label: "volley_job_queue_wait_seconds", factory: factory)
        scheduleLag = Timer(label: "volley_schedule_due_to_send_seconds", factory: factory)
        draining = Recorder(label: "volley_draining", aggregate: false, factory: factory)
        draining.record(0)
        registerApps(apps)
    }

    /// Creates the notification series of apps added to the configuration (a reload); existing ones stay.
    public func registerApps(_ apps: [AppName]) {
        lock.withLock {
            for app in apps {
                for provider in PushProvider.allCases {
                    for outcome in Self.deviceOutcomes { _ = counter(provider.rawValue, app.rawValue, outcome) }
                }
                for outcome in Self.recipientOutcomes { _ = counter("none", app.rawValue, outcome) }
            }
        }
    }

    /// Caller holds `lock`.
    private func counter(_ provider: String, _ app: String, _ outcome: String) -> Counter {
        let key = NotificationKey(provider: provider, app: app, outcome: outcome)
        if let c = notifications[key] { return c }
        let c = Counter(
            label: "volley_notifications_total",
            dimensions: [("provider", provider), ("app", app), ("outcome", outcome)], factory: factory)
        notifications[key] = c
        return c
    }

    static func provider(_ platform: Platform) -> PushProvider { platform == .ios ? .apns : .fcm }

    /// The failure reason label: the provider's documented reason, else `other`.
    static func failureLabel(_ reason: OutcomeReason, provider: PushProvider) -> String {
        let known = provider == .apns ? apnsReasonSet : fcmReasonSet
        return known.contains(reason.rawValue) ? reason.rawValue : "other"
    }
    private static let apnsReasonSet = Set(OutcomeTable.apnsReasons.map(\.reason) + transportReasons)
    private static let fcmReasonSet = Set(OutcomeTable.fcmReasons.map(\.reason) + transportReasons)

    /// Counts a recorded batch. `counts[platform.index]` per outcome is added in one increment each.
    func recorded(_ tally: BatchTally, app: AppName) {
        var increments: [(Counter, Int64)] = []
        lock.withLock {
            for p in Platform.allCases {
                let provider = Self.provider(p).rawValue
                let t = tally.byPlatform[p.index]
                if t.accepted > 0 { increments.append((counter(provider, app.rawValue, "accepted"), t.accepted)) }
                if t.rejected > 0 { increments.append((counter(provider, app.rawValue, "rejected"), t.rejected)) }
                if t.failed > 0 { increments.append((counter(provider, app.rawValue, "failed"), t.failed)) }
                if t.quotaExceeded > 0 {
                    increments.append((counter(provider, app.rawValue, "quota_exceeded"), t.quotaExceeded))
                }
                if t.expired > 0 { increments.append((counter(provider, app.rawValue, "expired"), t.expired)) }
            }
        }
        for (c, n) in increments { c.increment(by: n) }
        for p in Platform.allCases where tally.byPlatform[p.index].quotaExceeded > 0 {
            quotaExceeded[p]?.increment(by: tally.byPlatform[p.index].quotaExceeded)
        }
        for (key, n) in tally.failures {
            failures[key.provider]?[key.reason]?.increment(by: n)
        }
    }

    func tokensRemoved(_ count: Int, platform: Platform) {
        if count > 0 { tokensRemoved[Self.provider(platform)]?.increment(by: count) }
    }

    /// Recipients that got nothing: users without devices, unknown ids, a disabled notification type.
    func recipients(_ outcome: String, _ count: Int, app: AppName) {
        guard count > 0 else { return }
        lock.withLock { counter("none", app.rawValue, outcome) }.increment(by: count)
    }

    func job(_ result: String) { jobs[result]?.increment() }

    func deadLettered(_ reason: JobRejection.Reason) {
        (deadLetters[reason.rawValue] ?? deadLetterOther).increment()
    }

    func setDraining(_ on: Bool) { draining.record(on ? 1 : 0) }
}

/// One recorded batch's counts, built on the lane without locks and handed to `EngineMetrics` once.
struct BatchTally {
    struct PerPlatform {
        var accepted: Int64 = 0
        var rejected: Int64 = 0
        var failed: Int64 = 0
        var quotaExceeded: Int64 = 0
        var expired: Int64 = 0
    }
    struct FailureKey: Hashable {
        let provider: PushProvider
        let reason: String
    }
    var byPlatform = [PerPlatform](repeating: PerPlatform(), count: Platform.allCases.count)
    var failures: [FailureKey: Int64] = [:]

    mutating func failure(_ reason: OutcomeReason, platform: Platform) {
        let provider = EngineMetrics.provider(platform)
        let key = FailureKey(provider: provider, reason: EngineMetrics.failureLabel(reason, provider: provider))
        failures[key, default: 0] += 1
    }
}

extension StreamEntryID {
    /// The Redis stream entry id's time part (`<ms>-<seq>`): when the entry was added, in ms since 1970.
    var milliseconds: Int64? {
        guard let dash = rawValue.firstIndex(of: "-") else { return Int64(rawValue) }
        return Int64(rawValue[..<dash])
    }
}
