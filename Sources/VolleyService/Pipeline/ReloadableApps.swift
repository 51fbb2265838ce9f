import Foundation
import Logging
import Metrics
import Synchronization
import VolleyAPNs
import VolleyCore
import VolleyEngine
import VolleyFCM
import VolleyHTTP2

/// The worker's apps, replaceable while it runs (SIGHUP). Each (app, platform) has one `ManagedSender` that jobs
/// hold; a reload points it at a new provider, so a job in progress sends its next device with the new
/// credentials. The provider it replaced is shut down only once its last in-flight send has answered, so a reload
/// drops nothing. An app whose settings and credential files are unchanged keeps its provider (and its provider
/// token: APNs refuses tokens minted more often than every 20 minutes).
public final class ReloadableApps: AppDirectory, @unchecked Sendable {
    struct Entry {
        var settings: AppSettings
        var fingerprint: Data
        var senders: [Platform: ManagedSender]
    }

    private let state = Mutex<[AppName: Entry]>([:])
    private let clock: any WallClock
    private let logger: Logger
    /// The provider token and pauses shared with the fleet (nil: this process keeps its own).
    private let fleet: FleetSync?
    public let providerMetrics: ProviderMetrics

    public init(
        configuration: VolleyConfiguration, clock: any WallClock = SystemClock(), metrics: ProviderMetrics,
        fleet: FleetSync? = nil, logger: Logger
    ) {
        self.clock = clock
        self.fleet = fleet
        self.logger = logger
        providerMetrics = metrics
        _ = apply(configuration, rejectingUnavailable: false)
    }

    public func lookup(org: OrgID, app: AppName) -> AppLookup {
        state.withLock { apps in
            guard let e = apps[app] else { return .unknownApp }
            guard e.settings.orgs.allows(org) else { return .orgNotAllowed }
            return .senders(e.senders.mapValues { $0 as any PushSender })
        }
    }

    /// The providers sending now (for the metrics read at scrape time).
    public var currentProviders: [any PushSender] {
        let managed = state.withLock { apps in apps.values.flatMap { $0.senders.values } }
        return managed.compactMap { $0.currentSender }
    }

    /// The configured app names (for metric series).
    public var appNames: [AppName] { state.withLock { Array($0.keys) } }

    /// Apps whose credentials could not be loaded: their sends end `fix-app` (for `/readyz`).
    public var unavailableApps: [String] {
        state.withLock { apps in
            apps.flatMap { name, e in
                e.senders.compactMap { p, s in s.isUnavailable ? "\(name.rawValue) (\(p.rawValue))" : nil }
            }.sorted()
        }
    }

    /// What a reload changed.
    public struct Changes: Sendable, Hashable, CustomStringConvertible {
        public var added: [String] = []
        public var removed: [String] = []
        public var replaced: [String] = []
        public var description: String {
            "added [\(added.joined(separator: ","))] removed [\(removed.joined(separator: ","))] "
                + "replaced [\(replaced.joined(separator: ","))]"
        }
    }

    /// Makes the apps of `configuration` current: new apps get providers, removed apps stop (their next send ends
    /// `fix-app`), apps whose settings or credential files changed get new providers. With
    /// `rejectingUnavailable` (a reload), a changed app whose credentials cannot be used rejects the whole
    /// configuration: the problems come back, each naming its app, and nothing changes.
    public func apply(_ configuration: VolleyConfiguration, rejectingUnavailable: Bool) -> Result<Changes, Rejected> {
        var changes = Changes()
        let wanted = Dictionary(uniqueKeysWithValues: configuration.apps.map { ($0.name, $0) })
        let current = state.withLock { $0 }
        var toBuild: [AppSettings] = []
        for (name, settings) in wanted {
            let fp = Self.fingerprint(settings)
            if let e = current[name] {
                if e.settings != settings || e.fingerprint != fp { toBuild.append(settings) }
            } else {
                toBuild.append(settings)
            }
        }
        // One token registry per reload: apps sharing a team and key share a token, as at start.
        var built: [AppName: [Platform: any PushSender]] = [:]
        if !toBuild.isEmpty {
            var c = configuration
            c.apps = toBuild
            let pools = ProviderTransport.pools(
                logger: logger, providerOutageSeconds: configuration.worker.providerOutageSeconds,
                resendUnanswered: configuration.worker.unansweredSends == .resend)
            built = ProviderApps.senders(
                for: ProviderApps.from(c), clock: clock, logger: logger, fleet: fleet,
                makeTransport: providerMetrics.transportFactory(.apns, pools),
                makeFCMTransport: providerMetrics.transportFactory(.fcm, pools))
        }
        if rejectingUnavailable {
            var problems: [String] = []
            for (name, senders) in built {
                for (platform, sender) in senders {
                    if let u = sender as? UnavailableSender {
                        let section = platform == .ios ? "apns" : "fcm"
                        problems.append("apps[\(name.rawValue)].\(section): \(u.reason)")
                    }
                }
            }
            if !problems.isEmpty {
                for senders in built.values { for s in senders.values { Self.shutdown(s) } }
                return .failure(Rejected(problems: problems.sorted()))
            }
        }
        // Counted at scrape time from the current providers: count the outgoing ones' tokens before they go.
        providerMetrics.refresh(senders: currentProviders)
        var retired: [ManagedSender.Generation] = []
        state.withLock { apps in
            for (name, e) in apps where wanted[name] == nil {
                for s in e.senders.values { if let g = s.replace(with: nil) { retired.append(g) } }
                apps[name] = nil
                changes.removed.append(name.rawValue)
            }
            for (name, settings) in wanted {
                guard let fresh = built[name] else {
                    apps[name]?.settings = settings // unchanged credentials; orgs may have changed
                    continue
                }
                var e = apps[name] ?? Entry(settings: settings, fingerprint: Data(), senders: [:])
                if apps[name] == nil {
                    changes.added.append(name.rawValue)
                } else {
                    changes.replaced.append(name.rawValue)
                }
                e.settings = settings
                e.fingerprint = Self.fingerprint(settings)
                for (platform, managed) in e.senders where fresh[platform] == nil {
                    if let g = managed.replace(with: nil) { retired.append(g) }
                    e.senders[platform] = nil
                }
                for (platform, sender) in fresh {
                    if let managed = e.senders[platform] {
                        if let g = managed.replace(with: sender) { retired.append(g) }
                    } else {
                        e.senders[platform] = ManagedSender(
                            platform: platform, sender: sender, app: name.rawValue, metrics: providerMetrics)
                    }
                }
                apps[name] = e
            }
        }
        for g in retired { Self.shutdownWhenIdle(g, logger: logger) }
        changes.added.sort()
        changes.removed.sort()
        changes.replaced.sort()
        return .success(changes)
    }

    /// Why a reload was refused.
    public struct Rejected: Error, Sendable, Hashable {
        public var problems: [String]
    }

    /// Closes every provider (at exit).
    public func shutdown() {
        let all = state.withLock { apps in apps.values.flatMap { $0.senders.values } }
        for s in all { if let g = s.replace(with: nil) { Self.shutdown(g.sender) } }
    }

    /// A replaced provider keeps its connections until its last send has answered, then closes them; at most two
    /// minutes after the replacement (every request has a deadline well below that) it closes regardless.
    static func shutdownWhenIdle(_ g: ManagedSender.Generation, logger: Logger) {
        g.retire(graceSeconds: 120) { shutdown(g.sender) }
    }

    static func shutdown(_ sender: any PushSender) {
        (sender as? APNSProvider)?.shutdown()
        (sender as? FCMProvider)?.shutdown()
    }

    /// The app's settings plus the bytes of every file they name: a key or certificate replaced in place (a
    /// Kubernetes Secret update) counts as a change.
    static func fingerprint(_ s: AppSettings) -> Data {
        var files: [String] = []
        if let a = s.apns {
            switch a.auth {
            case .token(let keyFile, _, _): files.append(keyFile)
            case .certificate(let certFile, _, let keyFile): files += [certFile] + (keyFile.map { [$0] } ?? [])
            }
            if let ca = a.caFile { files.append(ca) }
        }
        if let f = s.fcm {
            files.append(f.serviceAccountFile)
            if let ca = f.caFile { files.append(ca) }
        }
        var d = Data()
        for f in files {
            d.append(Data(f.utf8))
            d.append(0)
            d.append((try? Data(contentsOf: URL(fileURLWithPath: f))) ?? Data())
            d.append(0)
        }
        return d
    }
}

/// The sender a job holds for one (app, platform): forwards each send to the app's current provider and measures
/// it (`volley_provider_requests_total`, `volley_provider_request_duration_seconds`, in-flight sends).
public final class ManagedSender: PushSender, @unchecked Sendable {
    /// One provider's term as the current one, with its sends still out.
    final class Generation: Sendable {
        let sender: any PushSender
        let number: Int
        let inFlight = Atomic<Int>(0)
        /// nil while current; once replaced, what closes it, taken by whoever closes it first.
        private let retirement = Mutex<Retirement>(.current)
        enum Retirement {
            case current
            case retired(@Sendable () -> Void)
            case closed
        }

        init(sender: any PushSender, number: Int) {
            self.sender = sender
            self.number = number
        }

        /// Replaced: `close` runs when the last send out has answered (now, if none is), or after `graceSeconds`.
        func retire(graceSeconds: Double, close: @escaping @Sendable () -> Void) {
            retirement.withLock { if case .current = $0 { $0 = .retired(close) } }
            if inFlight.load(ordering: .acquiring) == 0 { closeIfRetired() }
            DispatchQueue.global().asyncAfter(deadline: .now() + graceSeconds) { [self] in closeIfRetired() }
        }

        /// One send answered.
        func sendFinished() {
            if inFlight.subtract(1, ordering: .acquiringAndReleasing).newValue == 0 { closeIfRetired() }
        }

        private func closeIfRetired() {
            let close: (@Sendable () -> Void)? = retirement.withLock { state in
                guard case .retired(let close) = state else { return nil }
                state = .closed
                return close
            }
            close?()
        }
    }

    public let platform: Platform
    let app: String
    private let current: Mutex<Generation?>
    private let metrics: ProviderMetrics
    private let provider: ProviderMetrics.PerProvider

    init(platform: Platform, sender: any PushSender, app: String, metrics: ProviderMetrics) {
        self.platform = platform
        self.app = app
        self.metrics = metrics
        provider = metrics.of(platform)
        current = Mutex(Generation(sender: sender, number: 0))
    }

    var isUnavailable: Bool { current.withLock { $0?.sender is UnavailableSender } }
    var currentSender: (any PushSender)? { current.withLock { $0?.sender } }

    /// Makes `sender` current (nil: the app was removed); returns the generation it replaced.
    func replace(with sender: (any PushSender)?) -> Generation? {
        current.withLock { g in
            let old = g
            g = sender.map { Generation(sender: $0, number: (old?.number ?? 0) + 1) }
            return old
        }
    }

    /// Prepared by one generation's provider (the job's notification, or one device's own payload on it); made
    /// again by a newer one after a reload, with `remake`.
    final class Prepared: PreparedNotification, @unchecked Sendable {
        let platform: Platform
        private let remake: @Sendable (Generation) throws -> any PreparedNotification
        private let lock = NSLock()
        private var byGeneration: (Int, any PreparedNotification)
        init(
            platform: Platform, generation: Int, prepared: any PreparedNotification,
            remake: @escaping @Sendable (Generation) throws -> any PreparedNotification
        ) {
            self.platform = platform
            self.remake = remake
            byGeneration = (generation, prepared)
        }
        var payloadBytes: Int { lock.withLock { byGeneration.1.payloadBytes } }

        func prepared(for g: Generation) throws -> any PreparedNotification {
            let (n, p) = lock.withLock { byGeneration }
            if n == g.number { return p }
            let fresh = try remake(g)
            lock.withLock { byGeneration = (g.number, fresh) }
            return fresh
        }
    }

    public func personalized(
        _ prepared: any PreparedNotification, for device: Device, with payload: PersonalPayload
    ) throws(PersonalPayloadError) -> any PreparedNotification {
        guard let g = current.withLock({ $0 }) else {
            throw PersonalPayloadError("AppRemoved", "the app was removed from the configuration")
        }
        let base: any PreparedNotification
        do { base = try (prepared as? Prepared)?.prepared(for: g) ?? prepared } catch {
            throw PersonalPayloadError((error as? NotificationError)?.reason.rawValue ?? "BadPayload", "\(error)")
        }
        return Prepared(
            platform: prepared.platform, generation: g.number,
            prepared: try g.sender.personalized(base, for: device, with: payload),
            remake: { g in
                let base = try (prepared as? Prepared)?.prepared(for: g) ?? prepared
                return try g.sender.personalized(base, for: device, with: payload)
            })
    }

    public func prepare(_ notification: VolleyCore.Notification, jobID: JobID, tracking: MessageTracking?) throws
        -> any PreparedNotification
    {
        guard let g = current.withLock({ $0 }) else {
            throw NotificationError("AppRemoved", "the app was removed from the configuration")
        }
        return Prepared(
            platform: platform, generation: g.number,
            prepared: try g.sender.prepare(notification, jobID: jobID, tracking: tracking),
            remake: { g in try g.sender.prepare(notification, jobID: jobID, tracking: tracking) })
    }

    public func send(
        _ prepared: any PreparedNotification, to device: Device, jobID: JobID, receiver: any DeliveryReceiver
    ) {
        guard let g = current.withLock({ $0 }) else {
            receiver.delivered(
                device,
                .rejected(
                    status: 0, reason: "AppRemoved: the app was removed from the configuration", action: .fixApp))
            return
        }
        let inner: any PreparedNotification
        do {
            inner = try (prepared as? Prepared)?.prepared(for: g) ?? prepared
        } catch {
            let personal = (error as? PersonalPayloadError).map { OutcomeReason($0.reason) }
            let reason = (error as? NotificationError)?.reason ?? personal ?? OutcomeReason("\(error)")
            receiver.delivered(device, .rejected(status: 0, reason: reason, action: .invalidNotification))
            return
        }
        g.inFlight.add(1, ordering: .relaxed)
        provider.inFlight.add(1, ordering: .relaxed)
        let measured = MeasuredReceiver(
            receiver: receiver, generation: g, provider: provider, started: DispatchTime.now().uptimeNanoseconds)
        g.sender.send(inner, to: device, jobID: jobID, receiver: measured)
    }
}

/// Times one send and counts its answer, then hands the outcome on.
final class MeasuredReceiver: DeliveryReceiver, @unchecked Sendable {
    let receiver: any DeliveryReceiver
    let generation: ManagedSender.Generation
    let provider: ProviderMetrics.PerProvider
    let started: UInt64
    init(
        receiver: any DeliveryReceiver, generation: ManagedSender.Generation, provider: ProviderMetrics.PerProvider,
        started: UInt64
    ) {
        self.receiver = receiver
        self.generation = generation
        self.provider = provider
        self.started = started
    }

    func delivered(_ device: Device, _ outcome: DeliveryOutcome) {
        provider.answered(outcome, nanoseconds: DispatchTime.now().uptimeNanoseconds &- started)
        generation.sendFinished()
        provider.inFlight.subtract(1, ordering: .relaxed)
        receiver.delivered(device, outcome)
    }
}
