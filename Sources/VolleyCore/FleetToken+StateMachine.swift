import Foundation

/// The APNs provider token (ES256 JWT) one (team, key) shares across the whole fleet, as kept in the fleet store.
public struct FleetToken: Sendable, Hashable {
    /// The `authorization` header value ("bearer <jwt>").
    public var value: String
    /// The JWT's `iat`.
    public var issuedAt: Date
    public init(value: String, issuedAt: Date) {
        self.value = value
        self.issuedAt = issuedAt
    }
}

/// Names the credential a fleet token belongs to: one APNs signing key of one team.
public struct FleetCredential: Sendable, Hashable, CustomStringConvertible {
    public var teamID: String
    public var keyID: String
    public init(teamID: String, keyID: String) {
        self.teamID = teamID
        self.keyID = keyID
    }
    public var description: String { teamID + ":" + keyID }
}

/// Where the fleet keeps its one provider token per (team, key) (production: Redis, `RedisFleetStore`).
/// Every call may throw when the store is unreachable; the caller then falls back to a token of its own.
public protocol FleetTokenStore: Sendable {
    /// The fleet's current token, or nil when none was published (or it expired).
    func currentToken(for credential: FleetCredential) throws -> FleetToken?
    /// Takes the right to mint for `seconds` (SET NX PX): true for exactly one caller while the lease lasts.
    func acquireMintLease(for credential: FleetCredential, owner: String, seconds: Double) throws -> Bool
    /// Publishes `token` only if the current token is still `expected` (nil: none) and is at least
    /// `minimumIntervalSeconds` old; releases `owner`'s lease. Returns the token current afterwards: `token` when
    /// this call won, else the one another worker published.
    func publish(
        _ token: FleetToken, replacing expected: FleetToken?, for credential: FleetCredential, owner: String,
        minimumIntervalSeconds: Double
    ) throws -> FleetToken?
}

/// The decisions of one worker about the fleet's APNs provider token for one (team, key), without I/O: the token
/// provider reads the store, takes the lease, mints and publishes as the machine says, and reports back.
///
/// Apple: refresh "no more than once every 20 minutes and no less than once every 60 minutes", and do not mint
/// several tokens for one team ("APNs does not distinguish multiple tokens generated using different keys
/// contemporarily vs. the same key"). So the fleet shares one token: it is minted again once it is
/// `refreshAfterSeconds` (50 min) old, by the one worker holding the mint lease; the store refuses any newer token
/// within `minimumIntervalSeconds` (20 min) of the current one. `ExpiredProviderToken` mints again only when the
/// rejected token is still the fleet's current one (compare-and-set). When the store is unreachable, the worker
/// uses a token of its own (logged), and tries the store again after `storeRetrySeconds`.
///
///     access --(token fresh)--> use    --(token ≥ 50 min, or none)--> sync: read
///     read   --(fresh shared)--> adopt  --(stale or none)--> acquireLease
///     lease  --(won)--> mint + publish  --(lost)--> wait for the holder's token (use the old one while valid)
///     failed --> own token (fallback) until storeRetrySeconds
public struct FleetTokenStateMachine: Sendable {
    public struct Policy: Sendable, Hashable {
        public var refreshAfterSeconds: Double
        public var minimumIntervalSeconds: Double
        /// APNs rejects a token older than an hour (`ExpiredProviderToken`).
        public var maximumAgeSeconds: Double
        /// How long the mint lease lasts (a worker that dies holding it blocks minting no longer than this).
        public var leaseSeconds: Double
        /// While another worker holds the lease: how soon to read the store again.
        public var leaseWaitSeconds: Double
        /// After the store failed: how long to use the worker's own token before trying the store again.
        public var storeRetrySeconds: Double
        public init(
            refreshAfterSeconds: Double = 50 * 60, minimumIntervalSeconds: Double = 20 * 60,
            maximumAgeSeconds: Double = 60 * 60, leaseSeconds: Double = 10, leaseWaitSeconds: Double = 0.05,
            storeRetrySeconds: Double = 30
        ) {
            self.refreshAfterSeconds = refreshAfterSeconds
            self.minimumIntervalSeconds = minimumIntervalSeconds
            self.maximumAgeSeconds = maximumAgeSeconds
            self.leaseSeconds = leaseSeconds
            self.leaseWaitSeconds = leaseWaitSeconds
            self.storeRetrySeconds = storeRetrySeconds
        }
    }

    /// What the token provider does on a send.
    public enum Access: Sendable, Hashable {
        /// Send with this token.
        case use(FleetToken)
        /// Send with this token, and sync with the store off the send path (it is due for a refresh).
        case useAndSync(FleetToken)
        /// No usable token: sync with the store before sending.
        case syncFirst
    }

    /// What the token provider does after reading the store or trying the lease.
    public enum SyncAction: Sendable, Hashable {
        /// The token to use from now on; the sync is over.
        case use(FleetToken)
        /// Try to take the mint lease and report `leaseAnswered(won:now:)`.
        case acquireLease
        /// Mint a token and publish it replacing `replacing`; report `published(_:now:)`.
        case mintAndPublish(replacing: FleetToken?)
        /// Another worker is minting: read the store again after this many seconds (`read(shared:now:)`).
        case readAgain(afterSeconds: Double)
        /// The store failed: mint a token of this worker's own and report `mintedOwn(_:)` (log it).
        case mintOwn
    }

    public enum Mode: Sendable, Hashable {
        /// Using the fleet's token.
        case fleet
        /// The store failed: using the worker's own token until `retryAt`.
        case fallback(retryAt: Date)
    }

    public let policy: Policy
    /// The token this worker sends with.
    public private(set) var token: FleetToken?
    public private(set) var mode = Mode.fleet
    /// The last token seen in the store (what a publish replaces).
    private var shared: FleetToken?
    /// A sync is under way (the send path starts at most one).
    public private(set) var syncing = false
    /// Reads made while waiting for another worker's lease.
    private var leaseWaits = 0
    /// No background sync before this (after losing the lease while the old token is still usable).
    private var notBefore = Date.distantPast

    public init(policy: Policy = Policy()) { self.policy = policy }

    private func age(_ t: FleetToken, _ now: Date) -> Double { now.timeIntervalSince(t.issuedAt) }

    /// A send needs a token.
    public mutating func access(now: Date) -> Access {
        guard let token, usable(token, now) else {
            syncing = true
            return .syncFirst
        }
        if !syncing && needsSync(now: now) {
            syncing = true
            return .useAndSync(token)
        }
        return .use(token)
    }

    /// Whether the store should be consulted: no usable token, or it is due for a refresh (or the fallback's retry).
    public func needsSync(now: Date) -> Bool {
        guard let token, usable(token, now) else { return true }
        if now < notBefore { return false }
        switch mode {
        case .fleet: return age(token, now) >= policy.refreshAfterSeconds
        case .fallback(let retryAt): return now >= retryAt || age(token, now) >= policy.refreshAfterSeconds
        }
    }

    /// APNs accepts a token for an hour; keep a minute's margin for clock skew.
    private func usable(_ t: FleetToken, _ now: Date) -> Bool { age(t, now) < policy.maximumAgeSeconds - 60 }

    /// The store answered a read with `current`.
    public mutating func read(shared current: FleetToken?, now: Date) -> SyncAction {
        shared = current
        if let current, age(current, now) < policy.refreshAfterSeconds {
            return adopt(current)
        }
        return .acquireLease
    }

    /// The mint lease was taken (`won`) or is held by another worker.
    public mutating func leaseAnswered(won: Bool, now: Date) -> SyncAction {
        if won {
            leaseWaits = 0
            return .mintAndPublish(replacing: shared)
        }
        // Another worker mints. Keep sending with a token still valid; else wait for theirs, a bounded while
        // (the lease expires on its own if its holder died).
        leaseWaits += 1
        if Double(leaseWaits) * policy.leaseWaitSeconds > policy.leaseSeconds {
            leaseWaits = 0
            return .acquireLease
        }
        if let token, usable(token, now) {
            syncing = false
            notBefore = now.addingTimeInterval(policy.leaseWaitSeconds)
            return .use(token)
        }
        return .readAgain(afterSeconds: policy.leaseWaitSeconds)
    }

    /// A publish answered: `current` is the store's token afterwards (this worker's when it won).
    public mutating func published(_ current: FleetToken?, now: Date) -> SyncAction {
        guard let current else { return storeFailed(now: now) }
        shared = current
        return adopt(current)
    }

    /// The store could not be reached (or answered nonsense): fall back to a token of this worker's own.
    public mutating func storeFailed(now: Date) -> SyncAction {
        let retryAt = now.addingTimeInterval(policy.storeRetrySeconds)
        let wasFleet = mode == .fleet
        mode = .fallback(retryAt: retryAt)
        syncing = false
        // Keep a token that is still fresh (the fleet's or our own); mint only when none is.
        if let token, age(token, now) < policy.refreshAfterSeconds {
            return .use(token)
        }
        if !wasFleet, let token, age(token, now) < policy.minimumIntervalSeconds {
            return .use(token)
        }
        return .mintOwn
    }

    /// A token of this worker's own was minted (fallback).
    public mutating func mintedOwn(_ own: FleetToken) {
        token = own
        syncing = false
    }

    /// APNs answered `ExpiredProviderToken` for `rejected` (the header value sent), and the store's token is
    /// `current`. `.use` with a token other than `rejected`: resend with it. `.mintAndPublish`: the rejected token is
    /// still the fleet's and old enough to replace (compare-and-set). nil: keep it and back off (less than 20 min
    /// old: a newer one would risk `TooManyProviderTokenUpdates`).
    public mutating func rejected(_ rejected: String, current: FleetToken?, now: Date) -> SyncAction? {
        shared = current
        if let current, current.value != rejected {
            return adopt(current)
        }
        if let current, age(current, now) < policy.minimumIntervalSeconds { return nil }
        return .mintAndPublish(replacing: current)
    }

    private mutating func adopt(_ t: FleetToken) -> SyncAction {
        token = t
        mode = .fleet
        syncing = false
        leaseWaits = 0
        return .use(t)
    }
}
