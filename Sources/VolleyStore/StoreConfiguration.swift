import VolleyCore
import VolleyRedis

/// Names and limits of the Redis keys Volley uses. Defaults are the contract of issue 4.
///
/// Layout (all keys under `prefix`, default `volley`):
/// - `volley:jobs` — job stream (field `job` = JSON); consumer group `volley`.
/// - `volley:dead` — dead letters: the original fields + `reason`, `detail`, `worker`, `sourceEntry`, `deliveries`.
/// - `volley:reports` — one entry per job: `job`, `org`, `report` (JSON of `JobReport`), trimmed to ~`reportsMaxLength`.
/// - `volley:dev:{org}:{app}:{user}` — hash `platform:token` → device record JSON
///   (`platform`, `token`, `environment`, `locale`, `user`, `registeredAt`, `lastSeenAt`).
/// - `volley:devtok:{org}:{app}` — hash `platform:token` → user (reverse index: unregister or remove by token).
/// - `volley:devusers:{org}:{app}` — set of users with at least one device (for `devices list`, SSCAN).
/// - `volley:outcomes:{org}:{job}` — hash `platform:token` → recorded terminal outcome, plus `_report` once the
///   report is published; expires `ledgerTTLSeconds` after the last write.
public struct StoreConfiguration: Sendable, Hashable {
    public var prefix: String
    public var jobStream: String
    public var deadStream: String
    public var reportStream: String
    public var group: String
    public var reportsMaxLength: Int
    public var deadMaxLength: Int
    public var ledgerTTLSeconds: Int

    public init(prefix: String = "volley", jobStream: String? = nil, deadStream: String? = nil,
                reportStream: String? = nil, group: String = "volley", reportsMaxLength: Int = 100_000,
                deadMaxLength: Int = 100_000, ledgerTTLSeconds: Int = 7 * 86_400) {
        self.prefix = prefix
        self.jobStream = jobStream ?? "\(prefix):jobs"
        self.deadStream = deadStream ?? "\(prefix):dead"
        self.reportStream = reportStream ?? "\(prefix):reports"
        self.group = group
        self.reportsMaxLength = reportsMaxLength
        self.deadMaxLength = deadMaxLength
        self.ledgerTTLSeconds = ledgerTTLSeconds
    }

    func deviceKey(_ org: OrgID, _ app: AppName, _ user: UserID) -> String { "\(prefix):dev:\(org):\(app):\(user)" }
    func tokenIndexKey(_ org: OrgID, _ app: AppName) -> String { "\(prefix):devtok:\(org):\(app)" }
    func usersKey(_ org: OrgID, _ app: AppName) -> String { "\(prefix):devusers:\(org):\(app)" }
    func ledgerKey(_ org: OrgID, _ job: JobID) -> String { "\(prefix):outcomes:\(org):\(job)" }
    static func deviceField(_ platform: Platform, _ token: DeviceToken) -> String {
        // Built with one allocation (interpolation sizes its buffer by guess and may grow it): twice per device.
        var field = platform.rawValue
        field.reserveCapacity(platform.rawValue.utf8.count + 1 + token.rawValue.utf8.count)
        field.append(":")
        field.append(token.rawValue)
        return field
    }

    /// Appends `deviceField(platform, token)` to `command` as one argument, without making the String.
    static func appendDeviceField(_ platform: Platform, _ token: DeviceToken, to command: inout RedisCommand) {
        command.append(platform.rawValue, UInt8(ascii: ":"), token.rawValue)
    }
}
