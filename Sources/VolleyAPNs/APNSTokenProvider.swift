import Crypto
import Dispatch
import Foundation
import Logging
import VolleyCore

/// Why an APNs credential could not be used. Names the app and says what to do.
public struct APNSConfigurationError: Error, Sendable, Hashable, CustomStringConvertible {
    public let app: String
    public let message: String
    public init(app: String, _ message: String) {
        self.app = app
        self.message = message
    }
    public var description: String { "app \(app): \(message)" }
}

/// The APNs provider token (ES256 JWT) for one (team, key), shared by every connection of the process.
///
/// Cadence (Apple, "Establishing a token-based connection to APNs"): refresh no more than once every
/// 20 minutes and no less than once every 60 minutes. We mint after 50 minutes of age, and on
/// `403 ExpiredProviderToken` only if the current token is at least 20 minutes old — so a storm of
/// ExpiredProviderToken answers cannot cause `429 TooManyProviderTokenUpdates`.
/// Thread-safe: state behind one lock; signing (~50 µs) happens at most once per refresh.
public final class APNSTokenProvider: @unchecked Sendable {
    public let teamID: String
    public let keyID: String
    /// Age after which the next use mints a new token.
    public let refreshAfterSeconds: Double
    /// Minimum age before any refresh, including forced ones.
    public let minimumIntervalSeconds: Double

    private let key: P256.Signing.PrivateKey
    private let clock: any WallClock
    private let lock = NSLock()
    /// The current token, replaced as a whole on refresh: a lookup hands out a reference, nothing is copied.
    private var current: APNSAuthorization?
    private var token: String? { current?.value }
    private var issuedAt: Date = .distantPast
    private var mints = 0
    /// Set when the token is shared with the fleet (`shareAcrossFleet`); guarded by `lock`.
    private var fleet: Fleet?
    private var fleetMachine = FleetTokenStateMachine()
    /// Syncs with the fleet's store run one at a time.
    private let syncLock = NSLock()
    private let syncQueue = DispatchQueue(label: "volley.apns.fleet-token")

    public init(
        p8PEM: String, keyID: String, teamID: String, clock: any WallClock = SystemClock(),
        refreshAfterSeconds: Double = 50 * 60, minimumIntervalSeconds: Double = 20 * 60
    ) throws {
        self.key = try P256.Signing.PrivateKey(pemRepresentation: p8PEM)
        self.keyID = keyID
        self.teamID = teamID
        self.clock = clock
        self.refreshAfterSeconds = refreshAfterSeconds
        self.minimumIntervalSeconds = minimumIntervalSeconds
    }

    /// How many tokens were minted so far (for tests and metrics).
    public var mintCount: Int { lock.withLock { mints } }

    /// The `authorization` header value ("bearer <jwt>"), minting when none exists or it is ≥ 50 min old.
    public func authorization() throws -> String {
        try currentAuthorization().value
    }

    /// The same as `authorization()`, as the minted object (no allocation when cached; its identity changes on
    /// refresh).
    func currentAuthorization() throws -> APNSAuthorization {
        let now = clock.now()
        lock.lock()
        if let fleet {
            switch fleetMachine.access(now: now) {
            case .use(let t):
                defer { lock.unlock() }
                return authorizationLocked(t)
            case .useAndSync(let t):
                let a = authorizationLocked(t)
                lock.unlock()
                syncQueue.async { [self] in sync(fleet, first: nil) }
                return a
            case .syncFirst:
                lock.unlock()
                return try fleetAuthorizationAfterSync(fleet)
            }
        }
        defer { lock.unlock() }
        if let current, now.timeIntervalSince(issuedAt) < refreshAfterSeconds { return current }
        return try mintLocked(now: now)
    }

    /// After `ExpiredProviderToken` for `rejected` (the header value that was sent): returns true when a
    /// newer token is ready to resend with — either another send already refreshed it, or the current one
    /// is old enough (≥ 20 min) to be replaced now. False means: keep the token, back off.
    public func refreshAfterRejection(of rejected: String) -> Bool {
        if let fleet = lock.withLock({ fleet }) { return fleetRefresh(after: rejected, fleet) }
        return lock.withLock {
            if token != rejected { return token != nil }
            let now = clock.now()
            guard now.timeIntervalSince(issuedAt) >= minimumIntervalSeconds else { return false }
            return (try? mintLocked(now: now)) != nil
        }
    }

    @discardableResult
    private func mintLocked(now: Date) throws -> APNSAuthorization {
        let value = APNSAuthorization(try sign(iat: Int(now.timeIntervalSince1970)))
        current = value
        issuedAt = now
        mints += 1
        return value
    }

    /// "bearer <jwt>" for `iat`. Thread-safe (the key only signs).
    private func sign(iat: Int) throws -> String {
        let header = #"{"alg":"ES256","kid":"\#(keyID)"}"#
        let claims = #"{"iss":"\#(teamID)","iat":\#(iat)}"#
        let signingInput = Base64URL.encode(Array(header.utf8)) + "." + Base64URL.encode(Array(claims.utf8))
        let signature = try key.signature(for: Array(signingInput.utf8))
        return "bearer " + signingInput + "." + Base64URL.encode(Array(signature.rawRepresentation))
    }

    // MARK: One token for the fleet

    /// Shares this (team, key)'s token with every worker through `store` (`FleetTokenStateMachine` decides).
    /// `owner` names this worker in the mint lease.
    public func shareAcrossFleet(
        store: any FleetTokenStore, owner: String, policy: FleetTokenStateMachine.Policy = .init(), logger: Logger
    ) {
        lock.withLock {
            // Apps of one team share this provider: the first call decides.
            if fleet != nil { return }
            fleetMachine = FleetTokenStateMachine(policy: policy)
            fleet = Fleet(store: store, owner: owner, logger: logger)
        }
    }

    struct Fleet: Sendable {
        let store: any FleetTokenStore
        let owner: String
        let logger: Logger
    }

    private var credential: FleetCredential { FleetCredential(teamID: teamID, keyID: keyID) }

    /// No usable token yet (the first send, or the fleet's is about to expire): sync with the store before sending.
    private func fleetAuthorizationAfterSync(_ fleet: Fleet) throws -> APNSAuthorization {
        sync(fleet, first: nil)
        return try lock.withLock {
            guard let t = fleetMachine.token else {
                throw APNSConfigurationError(app: "\(credential)", "no APNs provider token could be made")
            }
            return authorizationLocked(t)
        }
    }

    /// The `APNSAuthorization` for `t`, the same object while the token is the same.
    private func authorizationLocked(_ t: FleetToken) -> APNSAuthorization {
        if let current, current.value == t.value { return current }
        let a = APNSAuthorization(t.value)
        current = a
        issuedAt = t.issuedAt
        return a
    }

    /// One sync with the store, carried out as the machine says. Syncs run one at a time (`syncLock`); a send that
    /// waited for another's sync finds the token it made. `first`: the action to start from (nil: read the store).
    private func sync(_ fleet: Fleet, first: FleetTokenStateMachine.SyncAction?) {
        syncLock.lock()
        defer { syncLock.unlock() }
        // Another sync may have done the work while this one waited.
        if first == nil, !lock.withLock({ fleetMachine.needsSync(now: clock.now()) }) { return }
        var action = first ?? readStore(fleet)
        while true {
            let now = clock.now()
            switch action {
            case .use:
                return
            case .acquireLease:
                do {
                    let won = try fleet.store.acquireMintLease(
                        for: credential, owner: fleet.owner, seconds: fleetPolicy.leaseSeconds)
                    action = lock.withLock { fleetMachine.leaseAnswered(won: won, now: now) }
                } catch {
                    action = storeFailed(fleet, error)
                }
            case .mintAndPublish(let replacing):
                do {
                    let iat = Int(now.timeIntervalSince1970)
                    let t = FleetToken(value: try sign(iat: iat), issuedAt: Date(timeIntervalSince1970: Double(iat)))
                    lock.withLock { mints += 1 }
                    let winner = try fleet.store.publish(
                        t, replacing: replacing, for: credential, owner: fleet.owner,
                        minimumIntervalSeconds: fleetPolicy.minimumIntervalSeconds)
                    if winner == t {
                        fleet.logger.info("minted the fleet's APNs provider token", metadata: ["key": "\(credential)"])
                    }
                    action = lock.withLock { fleetMachine.published(winner, now: now) }
                } catch {
                    action = storeFailed(fleet, error)
                }
            case .readAgain(let seconds):
                // Only while no token is usable (first send, or the fleet's is about to expire): a short wait for
                // the worker holding the lease, on the sending thread.
                Thread.sleep(forTimeInterval: seconds)
                action = readStore(fleet)
            case .mintOwn:
                let iat = Int(now.timeIntervalSince1970)
                guard let value = try? sign(iat: iat) else { return }
                let t = FleetToken(value: value, issuedAt: Date(timeIntervalSince1970: Double(iat)))
                lock.withLock {
                    mints += 1
                    fleetMachine.mintedOwn(t)
                }
                fleet.logger.warning(
                    "the fleet's token store is unreachable: this worker uses an APNs provider token of its own",
                    metadata: ["key": "\(credential)"])
                return
            }
        }
    }

    private var fleetPolicy: FleetTokenStateMachine.Policy { fleetMachine.policy }

    private func readStore(_ fleet: Fleet) -> FleetTokenStateMachine.SyncAction {
        do {
            let shared = try fleet.store.currentToken(for: credential)
            return lock.withLock { fleetMachine.read(shared: shared, now: clock.now()) }
        } catch {
            return storeFailed(fleet, error)
        }
    }

    private func storeFailed(_ fleet: Fleet, _ error: any Error) -> FleetTokenStateMachine.SyncAction {
        fleet.logger.warning(
            "cannot reach the fleet's APNs token store", metadata: ["key": "\(credential)", "error": "\(error)"])
        return lock.withLock { fleetMachine.storeFailed(now: clock.now()) }
    }

    /// `ExpiredProviderToken` with the fleet: a newer token when the store has one, else a compare-and-set mint
    /// when the rejected token is still the fleet's and at least 20 minutes old.
    private func fleetRefresh(after rejected: String, _ fleet: Fleet) -> Bool {
        if let held = lock.withLock({ fleetMachine.token }), held.value != rejected { return true }
        syncLock.lock()
        let action: FleetTokenStateMachine.SyncAction?
        do {
            let shared = try fleet.store.currentToken(for: credential)
            action = lock.withLock { fleetMachine.rejected(rejected, current: shared, now: clock.now()) }
        } catch {
            action = storeFailed(fleet, error)
        }
        syncLock.unlock()
        guard let action else { return false }
        if case .use = action {} else { sync(fleet, first: action) }
        return lock.withLock { fleetMachine.token.map { $0.value != rejected } ?? false }
    }
}

/// One minted `authorization` header value ("bearer <jwt>"). Immutable; a refresh replaces the whole object, so its
/// identity tells the provider when to re-encode its request prefix.
final class APNSAuthorization: Sendable {
    let value: String
    init(_ value: String) { self.value = value }
}

/// One `APNSTokenProvider` per (team, key) for the whole process. Owned by the composition root and
/// passed to every APNs sender, so two apps of one team share the token (Apple: "avoid generating multiple
/// tokens for the same TeamID").
public final class APNSTokenRegistry: @unchecked Sendable {
    private let lock = NSLock()
    private var providers: [String: APNSTokenProvider] = [:]
    private let clock: any WallClock
    public init(clock: any WallClock = SystemClock()) { self.clock = clock }

    public func provider(app: String, keyFile: String, keyID: String, teamID: String) throws -> APNSTokenProvider {
        try lock.withLock {
            let k = teamID + "/" + keyID
            if let p = providers[k] { return p }
            guard let pem = try? String(contentsOfFile: keyFile, encoding: .utf8) else {
                throw APNSConfigurationError(
                    app: app, "cannot read APNs key file \(keyFile): check apps[].apns.keyFile")
            }
            let p: APNSTokenProvider
            do {
                p = try APNSTokenProvider(p8PEM: pem, keyID: keyID, teamID: teamID, clock: clock)
            } catch {
                throw APNSConfigurationError(
                    app: app,
                    "APNs key file \(keyFile) is not a PKCS#8 P-256 private key (.p8 from Apple): \(error)")
            }
            providers[k] = p
            return p
        }
    }
}
