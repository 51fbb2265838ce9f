import VolleyCore
import VolleyRedis

/// Names and limits of the Redis keys Volley uses. Defaults are a contract with producers and operators.
///
/// Layout (all keys under `prefix`, default `volley`):
/// - `volley:jobs` — job stream (field `job` = JSON); consumer group `volley`.
/// - `volley:dead` — dead letters: the original fields + `reason`, `detail`, `worker`, `sourceEntry`, `deliveries`.
/// - `volley:reports` — one entry per job: `job`, `org`, `report` (JSON of `JobReport`), trimmed to
/// ~`reportsMaxLength`.
/// - `volley:dev:{<org>}:<app>:<user>` — hash `platform:token` → device record JSON
///   (`platform`, `token`, `environment`, `locale`, `user`, `registeredAt`, `lastSeenAt`).
/// - `volley:devtok:{<org>}:<app>` — hash `platform:token` → user (reverse index: unregister or remove by token).
/// - `volley:devusers:{<org>}:<app>` — set of users with at least one device (for `devices list`, SSCAN).
/// - `volley:outcomes:{<org>}:<job>` — hash `platform:token` → recorded terminal outcome other than accepted, plus
///   `_report` (the report, kept from the first completion) and `_published` (set once it is on the report stream);
///   expires `ledgerTTLSeconds` after the last write.
/// - `volley:outcomes:{<org>}:<job>:accepted` — list, one element per recorded batch of accepted devices: each device
///   as `<length>:platform:token\n` (the length in decimal bytes of `platform:token`); same expiry.
/// - `volley:events:{<org>}:<job>` — list of debug events (JSON of `DebugEvent`) of a job sent with `"debug": true`,
///   the first `DebugEvent.maxPerJob`; expires `ledgerTTLSeconds` after the last write, like the ledger.
/// - `volley:progress:{<org>}:<job>` — hash `resolved`, `done`: devices resolved and recorded so far (shards count
///   into their parent), for `volley send --wait`; same expiry.
///
/// The braces are literal: `{<org>}` is the Redis Cluster hash tag (docs/redis-keys.md).
public struct StoreConfiguration: Sendable, Hashable {
    public var prefix: String
    public var jobStream: String
    public var deadStream: String
    public var reportStream: String
    public var group: String
    public var reportsMaxLength: Int
    public var deadMaxLength: Int
    public var ledgerTTLSeconds: Int
    /// `redis.waitReplicas`: after each outcome record and each ack, `WAIT` for this many replicas (0: no WAIT).
    public var waitReplicas: Int = 0
    /// How long one such `WAIT` may block.
    public var waitTimeoutMillis: Int = 1_000

    public init(
        prefix: String = "volley", jobStream: String? = nil, deadStream: String? = nil,
        reportStream: String? = nil, group: String = "volley", reportsMaxLength: Int = 100_000,
        deadMaxLength: Int = 100_000, ledgerTTLSeconds: Int = 7 * 86_400
    ) {
        self.prefix = prefix
        self.jobStream = jobStream ?? "\(prefix):jobs"
        self.deadStream = deadStream ?? "\(prefix):dead"
        self.reportStream = reportStream ?? "\(prefix):reports"
        self.group = group
        self.reportsMaxLength = reportsMaxLength
        self.deadMaxLength = deadMaxLength
        self.ledgerTTLSeconds = ledgerTTLSeconds
    }

    // Every per-org key carries the org as its hash tag (`{org}`), so the keys one script or transaction touches
    // live in one Redis Cluster slot (docs/redis-keys.md).
    func deviceKey(_ org: OrgID, _ app: AppName, _ user: UserID) -> String { deviceKeyPrefix(org, app) + user.rawValue }
    func deviceKeyPrefix(_ org: OrgID, _ app: AppName) -> String { "\(prefix):dev:{\(org)}:\(app):" }
    public func tokenIndexKey(_ org: OrgID, _ app: AppName) -> String { "\(prefix):devtok:{\(org)}:\(app)" }
    func usersKey(_ org: OrgID, _ app: AppName) -> String { "\(prefix):devusers:{\(org)}:\(app)" }
    /// The outcome ledger's hash of a job.
    public func ledgerKey(_ org: OrgID, _ job: JobID) -> String { "\(prefix):outcomes:{\(org)}:\(job)" }
    func acceptedKey(_ org: OrgID, _ job: JobID) -> String { "\(prefix):outcomes:{\(org)}:\(job):accepted" }
    func debugEventsKey(_ org: OrgID, _ job: JobID) -> String { "\(prefix):events:{\(org)}:\(job)" }
    func progressKey(_ org: OrgID, _ job: JobID) -> String { "\(prefix):progress:{\(org)}:\(job)" }
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

    /// Appends one accepted-list entry, `<length>:platform:token\n`, to a batch.
    static func appendAcceptedEntry(_ platform: Platform, _ token: DeviceToken, to batch: inout [UInt8]) {
        var p = platform.rawValue
        var t = token.rawValue
        p.withUTF8 { pb in
            t.withUTF8 { tb in
                RedisCommand.decimal(pb.count + 1 + tb.count) { batch.append(contentsOf: $0) }
                batch.append(UInt8(ascii: ":"))
                batch.append(contentsOf: pb)
                batch.append(UInt8(ascii: ":"))
                batch.append(contentsOf: tb)
                batch.append(UInt8(ascii: "\n"))
            }
        }
    }

    /// The `platform:token` fields of one accepted-list element; nil when it is not in that form.
    static func acceptedFields(_ element: String) -> [String]? {
        var out: [String] = []
        var element = element
        let ok = element.withUTF8 { b -> Bool in
            var at = 0
            while at < b.count {
                var length = 0
                var digits = 0
                while at < b.count, b[at] >= 48, b[at] <= 57, digits < 9 {
                    length = length * 10 + Int(b[at] - 48)
                    at += 1
                    digits += 1
                }
                guard digits > 0, at < b.count, b[at] == UInt8(ascii: ":"), at + 1 + length + 1 <= b.count,
                    b[at + 1 + length] == UInt8(ascii: "\n")
                else { return false }
                let field = UnsafeBufferPointer(rebasing: b[(at + 1)..<(at + 1 + length)])
                out.append(String(decoding: field, as: UTF8.self))
                at += length + 2
            }
            return true
        }
        return ok ? out : nil
    }
}
