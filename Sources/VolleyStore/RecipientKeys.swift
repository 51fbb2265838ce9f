import VolleyCore

/// Redis key layout of the directory, quotas, inbox, notification types and shards.
///
/// Every key of an org carries the `{org}` hash tag, so all of an org's keys live in one cluster slot and
/// scripts that derive keys (inbox delivery) stay in that slot.
///
/// ```
/// volley:dir:{O}:kind                    HASH  id → user|group|queue|accountTeam|opportunityTeam
/// volley:dir:{O}:containers              SET   ids of groups, queues and teams
/// volley:dir:{O}:inactive                SET   inactive user ids
/// volley:dir:{O}:m:<id>                  SET   direct members of a container (users, or groups for groups/queues)
/// volley:dir:{O}:attrs                   HASH  user id → the user's attributes, a JSON object of strings
/// volley:attr:{O}:eq:<attr>:<value>     SET   users whose attribute <attr> is <value> (the attribute index)
/// volley:attr:{O}:has:<attr>             SET   users who have <attr>
/// volley:attr:{O}:num:<attr>             ZSET  user → <attr> as a number, for users whose value is one
/// volley:attr:{O}:time:<attr>            ZSET  user → <attr> as ms since 1970, for values that are RFC 3339 times
/// volley:attr:{O}:vals:<attr>            SET   every value of <attr> indexed (what a rebuild clears)
/// volley:attr:{O}:names                  SET   every attribute indexed
/// volley:attr:{O}:users                  SET   the org's known users: directory user records and users given
///                                              attributes (what `notExists` is relative to)
/// volley:attr:{O}:count:<uuid>:…         SET, ZSET  a segment count's scratch sets (TTL 1 hour; deleted)
/// volley:segments:{O}                    HASH  segment id → its definition (JSON: match, filters)
/// volley:resolve:{O}:<scope>             SET   one resolution's de-duplicated active users (TTL 1 day; popped)
/// volley:resolve:{O}:<scope>:last        HASH  step, batch: the drain's last batch, answered again to a repeated
///                                              step (TTL 1 day; deleted with the set)
/// volley:resolve:{O}:<scope>:x           SET   the users a resolution excludes (deleted once subtracted)
/// volley:resolve:{O}:<scope>:s<n>:…      SET, ZSET  a resolution's segment scratch sets (deleted once used)
/// volley:quota:{O}:limits                HASH  ios / android: per-org overrides (`volley quota set`)
/// volley:quota:{O}:<platform>:<yyyyMMddHH> HASH used (charged, in-flight included), pending (charged, unsettled);
///                                              TTL = end of the UTC hour + grace
/// volley:quota:{O}:job:<job>             HASH  <delivery>|<platform>|<hour index> → charges not yet recorded
///                                              (a redelivery adopts other deliveries' fields); TTL as the hour's
/// volley:quota:{O}:job:<job>:last:<d>    STRING "<n> <granted> <pending> <limit>": delivery d's last charge, n its
///                                              number, answered again to a repeated charge; TTL as the hour's
/// volley:throttle:{O}:<job>             HASH  anchor (ms), cells: a throttled job's gate (`ThrottleState`); the
///                                              job a shard belongs to; TTL its arrival time + 10 min
/// volley:inbox:{O}:n:<nid>               HASH  notification content (type, title, body, target, targetPageRef,
///                                              created)
/// volley:inbox:{O}:u:<user>:all          ZSET  nid → created ms (retention: newest maxCount, none older than maxAge)
/// volley:inbox:{O}:u:<user>:unread       ZSET  subset of all not read
/// volley:inbox:{O}:u:<user>:unseen       ZSET  subset of all not seen
/// volley:types:{O}                       HASH  typeId → NotificationType JSON
/// volley:templates:{O}                   HASH  template id → its `notification` object (JSON as put)
/// volley:templates:{O}:times             HASH  template id → "<created ms> <updated ms>"
/// volley:typeapp:{O}:<app>               HASH  typeId → NotificationAppSetting JSON
/// volley:typeorg:{O}                     HASH  typeId → NotificationOrgSetting JSON (the org's channel switches)
/// volley:appsettings:{O}                 HASH  app → AppNotificationSettings JSON (full content push notifications)
/// volley:shard:{O}:<job>:<n>             LIST  user ids of shard n of a parent job
/// volley:shardagg:{O}:<job>              HASH  parent report counters summed over shards + remainingShards
/// volley:shardsdone:{O}:<job>            SET   indexes of shards already counted (idempotent completion)
/// volley:fcap:{O}:u:<user>               ZSET  nid → ms admitted: the user's visible notifications counted by the
///                                              org's frequency caps without a type; trimmed to, and expiring
///                                              after, the longest such window
/// volley:fcap:{O}:t:<n>:<type>:u:<user>  ZSET  the same for the caps of one notification type (n: the type's length)
/// volley:fcaprules                       HASH  org → the org's frequency-cap rules set through the API (JSON list)
/// volley:orgzones                        HASH  org → the org's default IANA zone set through the API
/// ```
public struct RecipientKeys: Sendable {
    public let org: OrgID
    public init(org: OrgID) { self.org = org }
    private var tag: String { "{\(org.rawValue)}" }

    public var kind: String { "volley:dir:\(tag):kind" }
    public var containers: String { "volley:dir:\(tag):containers" }
    public var inactive: String { "volley:dir:\(tag):inactive" }
    public func members(_ id: RecipientID) -> String { "volley:dir:\(tag):m:\(id.rawValue)" }
    public var attributes: String { "volley:dir:\(tag):attrs" }
    public func resolution(_ scope: String) -> String { "volley:resolve:\(tag):\(scope)" }
    public func resolutionLastBatch(_ scope: String) -> String { "volley:resolve:\(tag):\(scope):last" }
    /// The users a resolution subtracts (`exclude`).
    public func resolutionExclusion(_ scope: String) -> String { "volley:resolve:\(tag):\(scope):x" }
    /// The prefix of a resolution's scratch sets for its `n`th segment.
    public func resolutionScratch(_ scope: String, _ n: Int) -> String { "volley:resolve:\(tag):\(scope):s\(n)" }

    /// The prefix of every key of the attribute index; the index script derives its keys from it.
    public var attributeIndex: String { "volley:attr:\(tag):" }
    /// SET: users whose `attribute` is `value`.
    public func attributeEquals(_ attribute: String, _ value: String) -> String {
        "\(attributeIndex)eq:\(attribute):\(value)"
    }
    /// SET: users who have `attribute`.
    public func attributeHas(_ attribute: String) -> String { "\(attributeIndex)has:\(attribute)" }
    /// ZSET: users by `attribute` read as a number (`AttributeScore.Kind.number`) or an instant (`.instant`).
    public func attributeScores(_ attribute: String, _ kind: AttributeScore.Kind) -> String {
        "\(attributeIndex)\(kind == .number ? "num" : "time"):\(attribute)"
    }
    /// SET: every value of `attribute` the index holds.
    public func attributeValues(_ attribute: String) -> String { "\(attributeIndex)vals:\(attribute)" }
    /// SET: every attribute the index holds.
    public var attributeNames: String { "\(attributeIndex)names" }
    /// SET: the org's known users, the set `notExists` is relative to.
    public var attributeUsers: String { "\(attributeIndex)users" }
    /// The prefix of one segment count's scratch sets.
    public func segmentCountScratch(_ id: String) -> String { "\(attributeIndex)count:\(id)" }
    /// HASH: segment id → definition.
    public var segments: String { "volley:segments:\(tag)" }

    public var quotaLimits: String { "volley:quota:\(tag):limits" }
    public func quota(_ platform: Platform, _ hour: QuotaHour) -> String {
        "volley:quota:\(tag):\(platform.rawValue):\(hour.label)"
    }
    public func throttle(_ job: JobID) -> String { "volley:throttle:\(tag):\(job.rawValue)" }
    public func quotaCharges(_ job: JobID) -> String { "volley:quota:\(tag):job:\(job.rawValue)" }
    /// One delivery's last quota charge (its number and answer), to answer a charge sent again the same.
    public func quotaLastCharge(_ job: JobID, delivery: String) -> String {
        "volley:quota:\(tag):job:\(job.rawValue):last:\(delivery)"
    }

    public func inboxContent(_ nid: String) -> String { "volley:inbox:\(tag):n:\(nid)" }
    public var inboxUserPrefix: String { "volley:inbox:\(tag):u:" }
    public func inbox(_ user: UserID, _ part: String) -> String { "\(inboxUserPrefix)\(user.rawValue):\(part)" }

    public var types: String { "volley:types:\(tag)" }
    public func typeSettings(_ app: AppName) -> String { "volley:typeapp:\(tag):\(app.rawValue)" }
    public var typeOrgSettings: String { "volley:typeorg:\(tag)" }
    public var appSettings: String { "volley:appsettings:\(tag)" }

    public var templates: String { "volley:templates:\(tag)" }
    public var templateTimes: String { "volley:templates:\(tag):times" }

    public func shardList(_ job: JobID, _ n: Int) -> String { "volley:shard:\(tag):\(job.rawValue):\(n)" }
    public func shardAggregate(_ job: JobID) -> String { "volley:shardagg:\(tag):\(job.rawValue)" }
    public func shardsDone(_ job: JobID) -> String { "volley:shardsdone:\(tag):\(job.rawValue)" }

    /// The prefix a user id completes to the key of the user's sends counted by the caps of `type` (nil: the caps
    /// without a type). The type's length keeps `t:a:u:b` of type `a` apart from type `a:u:b`.
    public func frequencyCapPrefix(type: String?) -> String {
        guard let type else { return "volley:fcap:\(tag):u:" }
        return "volley:fcap:\(tag):t:\(type.utf8.count):\(type):u:"
    }
    /// Declared by the caps' script only to route it to the org's slot; never written.
    public var frequencyCapSlot: String { "volley:fcap:\(tag)" }
    /// Every org's frequency-cap rules set through the API, one hash for the fleet (workers read it whole).
    public static let frequencyCapRules = "volley:fcaprules"
    /// HASH org → the org's default IANA zone set through `PUT /v1/time-zone`.
    public static let orgTimeZones = "volley:orgzones"
}
