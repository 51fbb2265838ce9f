import Foundation
import VolleyCore

/// What `volley api` needs from the configuration file (section `api`, plus `apps`); the stores it talks to are
/// wired by the caller (`APIServer.Stores`).
public struct APIConfiguration: Sendable {
    /// Address to listen on (`api.host`, default 127.0.0.1).
    public var host: String = "127.0.0.1"
    /// `api.port`, default 8080 (0 picks a free port; tests read it back from `APIServer.onListening`).
    public var port: Int = 8080
    /// `api.tls`: when set, the API serves HTTPS with this certificate and key instead of plain HTTP.
    public var tls: APITLS?
    /// `api.maxBodyBytes`: larger request bodies get 413. Default 1 MiB.
    public var maxBodyBytes: Int = 1 << 20
    /// `api.rateLimit`: token bucket per API key (and per user token subject), shared by the fleet in Redis.
    public var rateLimit = RateLimit()
    /// `api.userTokens.keys`: signing keys; the first signs, every one verifies (rotation).
    public var userTokenKeys: [UserTokenKey] = []
    /// `api.userTokens.maxTTLSeconds`: the longest lifetime a user token may ask for (at most 24 h).
    public var userTokenMaxTTLSeconds: Int = 86_400
    /// `api.drainSeconds`: after SIGTERM, `/readyz` answers 503 for this long before the listener closes.
    public var drainSeconds: Double = 5
    /// `api.keyCacheSeconds`: a process reads an API key's record from Redis at most once in this long, so a revoked
    /// or changed key takes effect within it; 0 reads it on every request.
    public var keyCacheSeconds: Double = 5
    /// `api.headerTimeoutSeconds`: a new connection that has not sent a whole request head (or finished its TLS
    /// handshake) within this long is closed. Default 10.
    public var headerTimeoutSeconds: Double = 10
    /// `api.idleTimeoutSeconds`: a keep-alive connection with no request in progress, or a request body that stops
    /// arriving, is closed after this long. Default 60.
    public var idleTimeoutSeconds: Double = 60
    /// `api.maxConnections`: open connections the API serves at once; beyond it a new connection is answered 503 and
    /// closed. Nil: `ConnectionLimits.defaultCap(fileLimit:)` of the process's file limit.
    public var maxConnections: Int?
    /// `api.readinessTimeoutSeconds`: `/readyz` answers 503 when Redis has not answered within this long. Default 2.
    public var readinessTimeoutSeconds: Double = 2
    /// `schedule.maxAheadDays`: how far ahead a job's `sendAt` may be.
    public var scheduleMaxAheadDays: Int = 30
    /// Apps by name and the orgs allowed to use each (`apps[].orgs`).
    public var apps: [AppName: AppOrgs] = [:]
    /// Each org's frequency caps from the file (`orgs[].frequencyCaps`); rules set through the API replace them.
    public var frequencyCaps: [OrgID: [FrequencyCapRule]] = [:]
    /// Each org's default zone from the file (`orgs[].timeZone`); one set through `/v1/time-zone` replaces it.
    public var orgTimeZones: [OrgID: String] = [:]
    /// `syncHints`: the status read says when the next push may go by the same rules the workers follow.
    public var syncHints = SyncHintConfiguration()

    public struct RateLimit: Sendable, Hashable {
        /// Steady rate allowed per key (`api.rateLimit.requestsPerSecond`, default 100; 0 turns limiting off).
        public var requestsPerSecond: Double = 100
        /// Bucket size: requests allowed at once after a quiet period (`api.rateLimit.burst`, default 200).
        public var burst: Int = 200
        public init(requestsPerSecond: Double = 100, burst: Int = 200) {
            self.requestsPerSecond = requestsPerSecond
            self.burst = burst
        }
    }

    /// `console`: the web console under `/console`.
    public var console = Console()

    public struct Console: Sendable, Hashable {
        /// `console.enabled`: off by default.
        public var enabled = false
        /// `console.sessionHours`, in seconds.
        public var sessionSeconds: Double = 8 * 3600
        public init(enabled: Bool = false, sessionSeconds: Double = 8 * 3600) {
            self.enabled = enabled
            self.sessionSeconds = sessionSeconds
        }
    }

    public init() {}

    /// The bucket every credential gets.
    var bucket: RateBucket { RateBucket(requestsPerSecond: rateLimit.requestsPerSecond, burst: rateLimit.burst) }

    /// True when `org` may send through `app`; false for an app that does not exist.
    func org(_ org: OrgID, mayUse app: AppName) -> Bool { apps[app]?.allows(org) ?? false }

    /// The apps `org` may use, sorted by name.
    func apps(for org: OrgID) -> [AppName] {
        apps.filter { $0.value.allows(org) }.map(\.key).sorted { $0.rawValue < $1.rawValue }
    }
}

/// One user-token signing key: `id` travels in the token so verifiers pick the right secret.
public struct UserTokenKey: Sendable, Hashable {
    public var id: String
    public var secret: [UInt8]
    public init(id: String, secret: [UInt8]) {
        self.id = id
        self.secret = secret
    }
}
