import VolleyRedis

/// Lua scripts of the recipients/quota/inbox/shard layer. Each runs atomically on the Redis server (EVALSHA,
/// reloaded on NOSCRIPT by `RedisClient.eval`). Key layouts are documented in `RecipientKeys`.
enum RecipientScripts {
    /// Quota grant: grant up to what is left of the hour (partial grants allowed), charging both `used` and
    /// `pending`. KEYS[1] hour hash, KEYS[2] per-org limit overrides hash, KEYS[3] (optional) the job's unsettled
    /// charges hash, KEYS[4] (with KEYS[3]) this delivery's last charge. ARGV[1] platform ("ios"/"android"),
    /// ARGV[2] default limit, ARGV[3] wanted, ARGV[4] ttl seconds, ARGV[5] (with KEYS[3]) the field of this
    /// delivery, platform and hour, ARGV[6] (with KEYS[4]) the charge's number in its delivery. Returns {granted,
    /// pending after, limit}. A delivery's charges are numbered: the same number again (the client sent the call
    /// again after a timeout, and Redis ran both) answers what the first one granted and charges nothing.
    static let quotaCharge = RedisScript(
        """
        if KEYS[4] then
          local last = redis.call('GET', KEYS[4])
          if last then
            local n, g, p, l = string.match(last, '^(%d+) (%d+) (%-?%d+) (%d+)$')
            if n == ARGV[6] then return {tonumber(g), tonumber(p), tonumber(l)} end
          end
        end
        local limit = tonumber(redis.call('HGET', KEYS[2], ARGV[1]) or ARGV[2])
        local want = tonumber(ARGV[3])
        local used = tonumber(redis.call('HGET', KEYS[1], 'used') or '0')
        local pending = tonumber(redis.call('HGET', KEYS[1], 'pending') or '0')
        local left = limit - used
        if left < 0 then left = 0 end
        local grant = want
        if grant > left then grant = left end
        if grant > 0 then
          redis.call('HINCRBY', KEYS[1], 'used', grant)
          pending = redis.call('HINCRBY', KEYS[1], 'pending', grant)
          redis.call('EXPIRE', KEYS[1], ARGV[4])
          if KEYS[3] then
            redis.call('HINCRBY', KEYS[3], ARGV[5], grant)
            redis.call('EXPIRE', KEYS[3], ARGV[4])
          end
        end
        if KEYS[4] then
          redis.call('SET', KEYS[4], ARGV[6] .. ' ' .. grant .. ' ' .. pending .. ' ' .. limit, 'EX', ARGV[4])
        end
        return {grant, pending, limit}
        """)

    /// Quota settle: the granted pushes have terminal outcomes. Delivered stay in `used`; refunded leave it.
    /// Both leave `pending`. A settle for an hour whose key already expired does nothing (never re-creates it
    /// without a TTL). KEYS[1] hour hash; ARGV[1] delivered, ARGV[2] refunded. Returns pending after.
    static let quotaSettle = RedisScript(
        """
        local d = tonumber(ARGV[1])
        local r = tonumber(ARGV[2])
        if redis.call('EXISTS', KEYS[1]) == 0 then return 0 end
        local p = redis.call('HINCRBY', KEYS[1], 'pending', -(d + r))
        if p < 0 then redis.call('HSET', KEYS[1], 'pending', 0); p = 0 end
        if r > 0 then
          local u = redis.call('HINCRBY', KEYS[1], 'used', -r)
          if u < 0 then redis.call('HSET', KEYS[1], 'used', 0) end
        end
        return p
        """)

    /// A redelivery adopts the unsettled charges of a job's earlier deliveries: every field of KEYS[1] (the job's
    /// charges hash, fields `<delivery>|<platform>|<hour index>`) not of this delivery (ARGV[1]) moves to this
    /// delivery's field of the same platform and hour. Returns {platform, hour index, count, …} of what moved.
    static let quotaAdopt = RedisScript(
        """
        local all = redis.call('HGETALL', KEYS[1])
        local out = {}
        for i = 1, #all, 2 do
          local field, count = all[i], tonumber(all[i + 1])
          local delivery, platform, hour = string.match(field, '^(.*)|([^|]+)|([^|]+)$')
          if delivery and delivery ~= ARGV[1] then
            redis.call('HDEL', KEYS[1], field)
            if count > 0 then
              redis.call('HINCRBY', KEYS[1], ARGV[1] .. '|' .. platform .. '|' .. hour, count)
              table.insert(out, platform); table.insert(out, hour); table.insert(out, count)
            end
          end
        end
        return out
        """)

    /// Inbox delivery for a chunk of users. Idempotent per (user, notification): a redelivered job does not
    /// reset flags. Keys are derived from ARGV[1] (all share the org's `{org}` hash tag, so one slot); KEYS[1], the
    /// notification's content key, is not touched: it routes the call to that slot on a Redis Cluster.
    /// ARGV[1] per-user key prefix, ARGV[2] notification id, ARGV[3] created ms, ARGV[4] max count,
    /// ARGV[5] min score kept (now - max age, ms), ARGV[6] ttl seconds, ARGV[7..] user ids.
    /// Returns each user's unseen count after the delivery (in ARGV order): the badge of a Salesforce payload. A
    /// repeated delivery adds nothing and returns the same counts.
    static let inboxDeliver = RedisScript(
        """
        local nid = ARGV[2]
        local created = ARGV[3]
        local maxCount = tonumber(ARGV[4])
        local minScore = '(' .. ARGV[5]
        local ttl = ARGV[6]
        local unseenCounts = {}
        for i = 7, #ARGV do
          local base = ARGV[1] .. ARGV[i]
          local all = base .. ':all'
          local unread = base .. ':unread'
          local unseen = base .. ':unseen'
          if redis.call('ZADD', all, 'NX', created, nid) == 1 then
            redis.call('ZADD', unread, created, nid)
            redis.call('ZADD', unseen, created, nid)
            local n = redis.call('ZCARD', all)
            if n > maxCount then
              local old = redis.call('ZRANGE', all, 0, n - maxCount - 1)
              for _, id in ipairs(old) do
                redis.call('ZREM', all, id); redis.call('ZREM', unread, id); redis.call('ZREM', unseen, id)
              end
            end
            redis.call('ZREMRANGEBYSCORE', all, '-inf', minScore)
            redis.call('ZREMRANGEBYSCORE', unread, '-inf', minScore)
            redis.call('ZREMRANGEBYSCORE', unseen, '-inf', minScore)
            redis.call('EXPIRE', all, ttl); redis.call('EXPIRE', unread, ttl); redis.call('EXPIRE', unseen, ttl)
          end
          unseenCounts[#unseenCounts + 1] = redis.call('ZCARD', unseen)
        end
        return unseenCounts
        """)

    /// Inbox mark. KEYS[1] all, KEYS[2] unread, KEYS[3] unseen. ARGV[1] read ("1","0","-"), ARGV[2] seen
    /// ("1","0","-"), ARGV[3] mode ("ids" or "before"), ARGV[4] before-score (exclusive, ms) or unused,
    /// ARGV[5..] ids. Only ids present in the inbox are touched. Returns how many were touched.
    static let inboxMark = RedisScript(
        """
        local ids
        if ARGV[3] == 'before' then
          ids = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', '(' .. ARGV[4])
        else
          ids = {}
          for i = 5, #ARGV do ids[#ids + 1] = ARGV[i] end
        end
        local touched = 0
        for _, id in ipairs(ids) do
          local score = redis.call('ZSCORE', KEYS[1], id)
          if score then
            touched = touched + 1
            if ARGV[1] == '1' then redis.call('ZREM', KEYS[2], id)
            elseif ARGV[1] == '0' then redis.call('ZADD', KEYS[2], score, id) end
            if ARGV[2] == '1' then redis.call('ZREM', KEYS[3], id)
            elseif ARGV[2] == '0' then redis.call('ZADD', KEYS[3], score, id) end
          end
        end
        local ttl = redis.call('TTL', KEYS[1])
        if ttl > 0 then
          if redis.call('EXISTS', KEYS[2]) == 1 then redis.call('EXPIRE', KEYS[2], ttl) end
          if redis.call('EXISTS', KEYS[3]) == 1 then redis.call('EXPIRE', KEYS[3], ttl) end
        end
        return touched
        """)

    /// Shard completion, idempotent per shard: the first completion of shard ARGV[1] adds its counters to the
    /// parent aggregate and decrements the remaining count; a repeat (redelivered shard) changes nothing.
    /// KEYS[1] parent aggregate hash, KEYS[2] done-shards set. ARGV[1] shard index, ARGV[2] ttl seconds,
    /// ARGV[3..] counter name/value pairs. Returns remaining shards (-1 for a repeat).
    static let shardComplete = RedisScript(
        """
        if redis.call('SADD', KEYS[2], ARGV[1]) == 0 then return -1 end
        for i = 3, #ARGV, 2 do
          redis.call('HINCRBY', KEYS[1], ARGV[i], ARGV[i + 1])
        end
        local left = redis.call('HINCRBY', KEYS[1], 'remainingShards', -1)
        redis.call('EXPIRE', KEYS[1], ARGV[2]); redis.call('EXPIRE', KEYS[2], ARGV[2])
        return left
        """)

    /// Frequency caps for one chunk of users, atomically (`FrequencyCapHistory.admit` per user, in Lua). KEYS[1] the
    /// org's slot key (not touched). ARGV[1] now (ms), ARGV[2] the notification id, ARGV[3] the number of scopes;
    /// per scope: its key prefix, its longest window (ms), its number of limits, then (window ms, max) per limit;
    /// then the users. Per user: drop sends at or before now − longest window; a notification already recorded in
    /// a scope is admitted again (1) without counting; else 0 when any limit already holds `max` sends after
    /// now − window, else record it in every scope (score now, expiry the longest window) and answer 1.
    static let frequencyCapAdmit = RedisScript(
        """
        local now = tonumber(ARGV[1])
        local nid = ARGV[2]
        local n = tonumber(ARGV[3])
        local scopes = {}
        local i = 4
        for s = 1, n do
          local sc = {prefix = ARGV[i], longest = tonumber(ARGV[i + 1]), limits = {}}
          local m = tonumber(ARGV[i + 2])
          i = i + 3
          for l = 1, m do
            sc.limits[l] = {tonumber(ARGV[i]), tonumber(ARGV[i + 1])}
            i = i + 2
          end
          scopes[s] = sc
        end
        local out = {}
        for u = i, #ARGV do
          local keys = {}
          local again = false
          for s = 1, n do
            local key = scopes[s].prefix .. ARGV[u]
            keys[s] = key
            redis.call('ZREMRANGEBYSCORE', key, '-inf', now - scopes[s].longest)
            if redis.call('ZSCORE', key, nid) then again = true end
          end
          local ok = 1
          if not again then
            for s = 1, n do
              for _, lim in ipairs(scopes[s].limits) do
                if ok == 1 and redis.call('ZCOUNT', keys[s], '(' .. (now - lim[1]), '+inf') >= lim[2] then ok = 0 end
              end
            end
            if ok == 1 then
              for s = 1, n do
                redis.call('ZADD', keys[s], now, nid)
                redis.call('PEXPIRE', keys[s], scopes[s].longest)
              end
            end
          end
          out[#out + 1] = ok
        end
        return out
        """)
}
