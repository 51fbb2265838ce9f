import Foundation
import VolleyCore
import VolleyRedis

/// The engagement keys, every one in its org's slot (`{<org>}`), under the store prefix (default `volley`):
/// - `volley:mid:{<org>}:<campaign>` — hash `job`, `app`, `inbox`: which job a message id's campaign counts for
///   (`MessageTracking`), written by the worker once per tracked delivery; expires with the outcome ledger.
/// - `volley:engaged:{<org>}:<campaign>` — set of `<device>:<event>[:<action id>]`: the interactions counted, so a
///   replay counts once; expires with the outcome ledger after its last addition.
/// - `volley:counts:{<org>}:<job>` — hash: the job's live counts (`StoreConfiguration.countsKey`); engagement adds
///   `opened`, `dismissed`, `action:<action id>` and `opened:<minute>` (minutes since 1970); expires with the
///   outcome ledger.
public struct EngagementKeys: Sendable {
    public let store: StoreConfiguration
    public init(store: StoreConfiguration) { self.store = store }
    private var prefix: String { store.prefix }

    /// The prefix a campaign completes to its mapping's key.
    public func campaignPrefix(_ org: OrgID) -> String { "\(prefix):mid:{\(org)}:" }
    public func campaign(_ org: OrgID, _ campaign: String) -> String { campaignPrefix(org) + campaign }
    /// The prefix a campaign completes to its set of counted interactions.
    public func engagedPrefix(_ org: OrgID) -> String { "\(prefix):engaged:{\(org)}:" }
    public func engaged(_ org: OrgID, _ campaign: String) -> String { engagedPrefix(org) + campaign }
    /// The prefix a job id completes to the job's live counts.
    public func countsPrefix(_ org: OrgID) -> String { store.countsKey(org, "") }
}

/// The worker's side: a tracked delivery's campaign mapped to its job, one pipelined `HSET` + `EXPIRE` per delivery.
/// Shared by the lanes (one call at a time on its own connection).
public final class RedisMessageTracking: MessageTrackingStore, @unchecked Sendable {
    private let redis: SerializedRedis
    private let keys: EngagementKeys
    private let ttl: String

    public init(client: RedisClient, store: StoreConfiguration) {
        redis = SerializedRedis(client)
        keys = EngagementKeys(store: store)
        ttl = String(store.ledgerTTLSeconds)
    }

    public func register(org: OrgID, campaign: String, job: JobID, app: AppName, inbox: String?) throws {
        let key = keys.campaign(org, campaign)
        var hset = ["HSET", key, "job", job.rawValue, "app", app.rawValue]
        if let inbox { hset += ["inbox", inbox] }
        try redis.with { client in
            for r in try client.pipeline([hset, ["EXPIRE", key, ttl]]) { try r.throwIfError("message ids") }
        }
    }
}

/// The API's side: one script per batch counts the interactions (`EngagementScripts.record`), on the hot path's
/// connection; then the `opened` ones of notifications with an in-app entry mark it read through the inbox's own
/// mark, as the Notifications resource does. The mark follows counted and replayed opens alike (it is idempotent),
/// so a batch sent again after a failed mark still marks.
public final class RedisInteractionRecorder: InteractionRecorder {
    private let redis: RedisScriptRoute
    private let store: StoreConfiguration
    private let keys: EngagementKeys
    private let inbox: any InboxRepository
    private let ttl: String
    private let maxLength: String

    public init(redis: RedisScriptRoute, store: StoreConfiguration, inbox: any InboxRepository) {
        self.redis = redis
        self.store = store
        self.inbox = inbox
        keys = EngagementKeys(store: store)
        ttl = String(store.ledgerTTLSeconds)
        maxLength = String(store.eventsMaxLength)
    }

    public func record(org: OrgID, app: AppName?, _ events: [Interaction]) async throws -> [InteractionResult] {
        if events.isEmpty { return [] }
        // Entries older than `events.maxAgeSeconds` before the newest interaction go (stream ids are milliseconds).
        let newest = events.map(\.at).max() ?? Date(timeIntervalSince1970: 0)
        let minID =
            store.eventsMaxAgeSeconds > 0
            ? String(max(0, Int64((newest.timeIntervalSince1970 - Double(store.eventsMaxAgeSeconds)) * 1000))) : ""
        var args = [ttl, store.eventsEnabled ? "1" : "0", maxLength, org.rawValue, app?.rawValue ?? "", minID]
        args.reserveCapacity(args.count + events.count * 7)
        for e in events {
            args.append(e.messageID.campaign)
            args.append(e.messageID.device)
            args.append(e.event.rawValue)
            args.append(e.actionID ?? "")
            args.append(RFC3339.format(e.at, .milliseconds))
            args.append(String(e.minute))
            args.append(e.user?.rawValue ?? "")
        }
        let reply: RedisReply
        do {
            reply = try await redis.eval(
                EngagementScripts.record,
                keys: [
                    keys.campaignPrefix(org), keys.engagedPrefix(org), keys.countsPrefix(org),
                    store.eventStream(org: org),
                ],
                args: args)
            try reply.throwIfError("interactions")
        } catch let e as RedisError {
            throw apiStoreError(e)
        }
        guard let parts = reply.array, parts.count == 2 * events.count else {
            throw StoreUnavailable("interactions: unexpected reply \(reply)")
        }
        var results: [InteractionResult] = []
        results.reserveCapacity(events.count)
        // Per user, the in-app entries their opens mark read.
        var marks: [UserID: [String]] = [:]
        for (i, e) in events.enumerated() {
            let result: InteractionResult
            switch parts[2 * i].integer {
            case 1: result = .accepted
            case 2: result = .duplicate
            default: result = .unknown
            }
            results.append(result)
            if result != .unknown, e.event == .opened, let user = e.user, let entry = parts[2 * i + 1].string,
                !entry.isEmpty, marks[user]?.contains(entry) != true
            {
                marks[user, default: []].append(entry)
            }
        }
        for (user, entries) in marks {
            // The mark takes at most 50 ids (Salesforce's limit).
            var at = 0
            while at < entries.count {
                let ids = Array(entries[at..<min(entries.count, at + 50)])
                try await inbox.mark(org: org, user: user, InboxMark(.ids(ids), read: true, seen: true))
                at += 50
            }
        }
        return results
    }
}

/// The engagement scripts.
public enum EngagementScripts {
    /// Counts a batch of interactions of one org, each once. KEYS: the prefixes of the campaign mappings, of the
    /// counted-interaction sets and of the jobs' live counts (each completed by a campaign or job id: every key the
    /// script derives carries the org's hash tag, in the slot the declared ones route it to), and the event stream.
    /// ARGV: the TTL (seconds), events on ('1'/'0'), the stream's MAXLEN, the org, the app a campaign must be of
    /// ('' any), the stream's MINID cutoff ('' none: trim by length only); then 7 per interaction: campaign, device,
    /// event, action id ('' none), at (RFC 3339), minute, user ('' none). Answers 2 per interaction: 1 counted, 2
    /// counted before, 0 unknown campaign; the in-app entry of its job ('' none).
    ///
    /// Counted: `SADD` of `<device>:<event>[:<action>]` to the campaign's set answers 1; then `HINCRBY` of `opened`
    /// (and `opened:<minute>`), `dismissed` or `action:<id>` on the job's counts, and one `XADD` of the interaction to
    /// the event stream, in this one script, so each interaction is counted and told exactly once.
    public static let record = RedisScript(
        """
        local ttl, events, maxlen, org, app, minid = ARGV[1], ARGV[2] == '1', ARGV[3], ARGV[4], ARGV[5], ARGV[6]
        local jobs, touched, out = {}, {}, {}
        for i = 7, #ARGV, 7 do
          local c, d, ev, action, at, minute, user =
            ARGV[i], ARGV[i + 1], ARGV[i + 2], ARGV[i + 3], ARGV[i + 4], ARGV[i + 5], ARGV[i + 6]
          local m = jobs[c]
          if m == nil then
            local r = redis.call('HMGET', KEYS[1] .. c, 'job', 'app', 'inbox')
            if r[1] and (app == '' or r[2] == app) then m = {r[1], r[3] or ''} else m = false end
            jobs[c] = m
          end
          if not m then
            out[#out + 1] = 0
            out[#out + 1] = ''
          else
            local member = d .. ':' .. ev
            if action ~= '' then member = member .. ':' .. action end
            local seen = KEYS[2] .. c
            if redis.call('SADD', seen, member) == 0 then
              out[#out + 1] = 2
            else
              local counts = KEYS[3] .. m[1]
              if ev == 'action' then
                redis.call('HINCRBY', counts, 'action:' .. action, 1)
              else
                redis.call('HINCRBY', counts, ev, 1)
                if ev == 'opened' then redis.call('HINCRBY', counts, 'opened:' .. minute, 1) end
              end
              touched[seen] = true
              touched[counts] = true
              if events then
                local f = {'kind', 'interaction', 'org', org, 'job', m[1], 'messageId', c .. '.' .. d, 'event', ev}
                if action ~= '' then
                  f[#f + 1] = 'actionId'
                  f[#f + 1] = action
                end
                f[#f + 1] = 'at'
                f[#f + 1] = at
                if user ~= '' then
                  f[#f + 1] = 'user'
                  f[#f + 1] = user
                end
                redis.call('XADD', KEYS[4], 'MAXLEN', '~', maxlen, '*', unpack(f))
              end
              out[#out + 1] = 1
            end
            out[#out + 1] = m[2]
          end
        end
        for k in pairs(touched) do redis.call('EXPIRE', k, ttl) end
        if events and minid ~= '' and #out > 0 then redis.call('XTRIM', KEYS[4], 'MINID', '~', minid) end
        return out
        """)
}
