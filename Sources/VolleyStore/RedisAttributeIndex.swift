import Foundation
import VolleyCore
import VolleyRedis

/// The attribute index segments are resolved with (layout in `RecipientKeys`, all under the org's hash tag): per
/// attribute and value a SET of users (`eq`), per attribute a SET of the users who have it (`has`) and, for values
/// that read as a number or an RFC 3339 time (`AttributeScore`), a sorted set by that score (`num`, `time`).
///
/// Every write of a user's attributes goes through `writeScript`, which reads the attributes stored before and moves
/// the user's index entries in the same step, so the index never disagrees with the attributes: the directory import
/// (`RedisDirectory.importRecords`, one call per batch of users) and `PUT /v1/users/{user}/attributes`
/// (`RedisDirectory.setAttributes`) both call it. Swift reads the values' scores (the one number rule and RFC 3339
/// reader) and passes them in; the script parses nothing but the stored JSON.
enum AttributeIndex {
    /// KEYS[1] the attributes hash, KEYS[2] the index's key prefix (the script derives every index key from it: the
    /// keys an attribute write touches depend on the attributes stored before, which only the script reads).
    /// ARGV[1] the mode: `w` writes, `r` rebuilds; then per user: the user id, the attributes as JSON (`''`: none),
    /// the number n of attributes, and n times: name, value, number score (`''`: none), time score (`''`: none).
    ///
    /// `w`: the stored attributes are replaced by the given ones (or removed); entries of values that changed or
    /// went are removed, entries of the given values added (again, for those that did not change: a write mends an
    /// index that missed the user). `r` (a rebuild, after the
    /// index was cleared): adds the entries of each given value that is still the stored one, writes no attributes.
    /// Both add the user to the org's known users and the attribute to the index's names and values.
    static let writeScript = RedisScript(
        """
        local p = KEYS[2]
        local rebuild = ARGV[1] == 'r'
        local i = 2
        while i <= #ARGV do
          local user = ARGV[i]
          local json = ARGV[i + 1]
          local n = tonumber(ARGV[i + 2])
          i = i + 3
          local new = {}
          for _ = 1, n do
            new[ARGV[i]] = i
            i = i + 4
          end
          local old = {}
          local stored = redis.call('HGET', KEYS[1], user)
          if stored then
            local ok, decoded = pcall(cjson.decode, stored)
            if ok and type(decoded) == 'table' then
              for a, v in pairs(decoded) do
                if type(a) == 'string' and type(v) == 'string' then old[a] = v end
              end
            end
          end
          if not rebuild then
            for a, v in pairs(old) do
              local q = new[a]
              if not q or ARGV[q + 1] ~= v then
                redis.call('SREM', p .. 'eq:' .. a .. ':' .. v, user)
                redis.call('ZREM', p .. 'num:' .. a, user)
                redis.call('ZREM', p .. 'time:' .. a, user)
                if not q then redis.call('SREM', p .. 'has:' .. a, user) end
              end
            end
          end
          for a, q in pairs(new) do
            local v = ARGV[q + 1]
            if not rebuild or old[a] == v then
              redis.call('SADD', p .. 'eq:' .. a .. ':' .. v, user)
              redis.call('SADD', p .. 'has:' .. a, user)
              redis.call('SADD', p .. 'vals:' .. a, v)
              redis.call('SADD', p .. 'names', a)
              if ARGV[q + 2] ~= '' then redis.call('ZADD', p .. 'num:' .. a, ARGV[q + 2], user) end
              if ARGV[q + 3] ~= '' then redis.call('ZADD', p .. 'time:' .. a, ARGV[q + 3], user) end
            end
          end
          if not rebuild then
            if json == '' then redis.call('HDEL', KEYS[1], user) else redis.call('HSET', KEYS[1], user, json) end
          end
          redis.call('SADD', p .. 'users', user)
        end
        return 1
        """)

    /// Moves up to ARGV[1] members of the sorted set KEYS[1] (lowest scores first) into the set KEYS[2], which expires
    /// after ARGV[2] seconds; answers how many it moved. A range of the index is first copied whole
    /// (`ZRANGESTORE`, one command) and then moved in such steps, so no step blocks Redis for long and no user id
    /// leaves Redis. Sent twice, a step moves the next members: the first one's are in the set already.
    static let moveScript = RedisScript(
        """
        local popped = redis.call('ZPOPMIN', KEYS[1], ARGV[1])
        local batch = {}
        for i = 1, #popped, 2 do
          batch[#batch + 1] = popped[i]
          if #batch == 4000 then
            redis.call('SADD', KEYS[2], unpack(batch))
            batch = {}
          end
        end
        if #batch > 0 then redis.call('SADD', KEYS[2], unpack(batch)) end
        if #popped > 0 then redis.call('EXPIRE', KEYS[2], ARGV[2]) end
        return #popped / 2
        """)

    /// Members `moveScript` moves per step.
    static let moveBatch = 20_000
    /// Users per `writeScript` call of an import or a rebuild.
    static let usersPerWrite = 500

    /// The compact JSON an attributes hash holds for `attributes` (keys sorted); `''` for none.
    static func storedJSON(_ attributes: [String: String]) -> String {
        attributes.isEmpty ? "" : JSONValue.object(attributes.mapValues { .string($0) }).jsonText
    }

    /// `writeScript`'s arguments for one user (`attributes` empty: remove them).
    static func appendArguments(user: RecipientID, _ attributes: [String: String], to args: inout [String]) {
        args.append(user.rawValue)
        args.append(storedJSON(attributes))
        args.append(String(attributes.count))
        for (name, value) in attributes.sorted(by: { $0.key < $1.key }) {
            args.append(name)
            args.append(value)
            let score = AttributeScore(value)
            args.append(score?.kind == .number ? score?.redisText ?? "" : "")
            args.append(score?.kind == .instant ? score?.redisText ?? "" : "")
        }
    }

    /// Runs `writeScript` for `users` (each with its attributes), `usersPerWrite` users per call.
    static func write(
        org: OrgID, _ users: [(RecipientID, [String: String])], rebuild: Bool = false, on c: RedisClient
    ) throws {
        let keys = RedisKeyGroups.attributeIndexWrite(org: org)
        var i = 0
        while i < users.count {
            let end = min(users.count, i + usersPerWrite)
            var args = [rebuild ? "r" : "w"]
            for (user, attributes) in users[i..<end] { appendArguments(user: user, attributes, to: &args) }
            let reply = try c.eval(writeScript, keys: keys, args: args)
            try reply.throwIfError("attribute index write")
            i = end
        }
    }
}

/// A segment as set operations on the attribute index, run inside Redis: no user id is read into this process.
///
/// Each filter is one set: `eq` and `exists` an index set as it is; `in` the union of its values' sets; `ne` the
/// users with the attribute less those with the value; `notExists` the org's known users less those with it; `gt`
/// and `lt` a score range of the attribute's sorted set, copied with `ZRANGESTORE` and moved into a set in steps
/// (`AttributeIndex.moveScript`). `match: all` intersects the filters' sets (`SINTERSTORE`), `any` unions them.
/// A segment of one filter is left as an expression (`base` less `minus`), so the caller's last `SDIFFSTORE`, which
/// removes containers and inactive users anyway, makes it in the same pass: a segment of most of a million users
/// costs one set built, not three. Scratch sets are named under `scratch`, expire after `ttlSeconds` and are
/// deleted once used (`temporary`).
struct SegmentSets {
    let keys: RecipientKeys
    let scratch: String
    let ttlSeconds: Int

    /// A segment's users: the set `base` less the sets `minus`; `temporary` are the scratch sets to delete after use.
    struct Expression {
        var base: String
        var minus: [String] = []
        var temporary: [String] = []
    }

    /// Adds the segment's users (containers and inactive users still in, the caller removes them) to the set
    /// `destination`, and deletes the scratch sets.
    func add(_ segment: Segment, to destination: String, on c: RedisClient) throws {
        let e = try expression(segment, on: c)
        var finish: [[String]] = []
        if e.minus.isEmpty {
            finish.append(["SUNIONSTORE", destination, destination, e.base])
        } else {
            let difference = "\(scratch):d"
            finish.append(["SDIFFSTORE", difference, e.base] + e.minus)
            finish.append(["SUNIONSTORE", destination, destination, difference])
            finish.append(["DEL", difference])
        }
        finish.append(["EXPIRE", destination, String(ttlSeconds)])
        if !e.temporary.isEmpty { finish.append(["DEL"] + e.temporary) }
        try Self.run(finish, on: c)
    }

    /// Makes what the segment needs made (its filters' scratch sets) and answers the expression of its users.
    func expression(_ segment: Segment, on c: RedisClient) throws -> Expression {
        if segment.filters.count == 1, let f = segment.filters.first, let e = Self.plain(f, keys) { return e }
        var prepare: [[String]] = []
        var ranges: [(sorted: String, set: String)] = []
        var operands: [String] = []
        var temporary: [String] = []
        let ttl = String(ttlSeconds)
        for (i, f) in segment.filters.enumerated() {
            let a = f.attribute
            let t = "\(scratch):f\(i)"
            switch (f.op, f.operand) {
            case (.eq, .value(let v)):
                operands.append(keys.attributeEquals(a, v))
                continue
            case (.exists, _):
                operands.append(keys.attributeHas(a))
                continue
            case (.in, .values(let values)):
                prepare.append(["SUNIONSTORE", t] + values.map { keys.attributeEquals(a, $0) })
            case (.ne, .value(let v)):
                prepare.append(["SDIFFSTORE", t, keys.attributeHas(a), keys.attributeEquals(a, v)])
            case (.notExists, _):
                prepare.append(["SDIFFSTORE", t, keys.attributeUsers, keys.attributeHas(a)])
            case (.gt, .bound(let b, _)), (.lt, .bound(let b, _)):
                let z = "\(scratch):z\(i)"
                let (min, max) = f.op == .gt ? ("(" + b.redisText, "+inf") : ("-inf", "(" + b.redisText)
                prepare.append(["DEL", t])
                prepare.append(["ZRANGESTORE", z, keys.attributeScores(a, b.kind), min, max, "BYSCORE"])
                prepare.append(["EXPIRE", z, ttl])
                ranges.append((z, t))
                temporary.append(z)
            default:
                throw DirectoryError("segment \(segment.id): filter \(i) (\(f.op.rawValue)) has no fitting value")
            }
            prepare.append(["EXPIRE", t, ttl])
            operands.append(t)
            temporary.append(t)
        }
        if !prepare.isEmpty { try Self.run(prepare, on: c) }
        for (sorted, set) in ranges {
            while true {
                let r = try c.eval(
                    AttributeIndex.moveScript, keys: [sorted, set], args: [String(AttributeIndex.moveBatch), ttl])
                if try r.int("move a score range") < AttributeIndex.moveBatch { break }
            }
        }
        if operands.count == 1, let only = operands.first { return Expression(base: only, temporary: temporary) }
        let combined = "\(scratch):c"
        try Self.run(
            [
                [segment.match == .all ? "SINTERSTORE" : "SUNIONSTORE", combined] + operands,
                ["EXPIRE", combined, ttl],
            ],
            on: c)
        return Expression(base: combined, temporary: temporary + [combined])
    }

    /// A filter whose users are an index set, or one less another, as they are: nothing to make.
    static func plain(_ f: SegmentFilter, _ keys: RecipientKeys) -> Expression? {
        switch (f.op, f.operand) {
        case (.eq, .value(let v)): Expression(base: keys.attributeEquals(f.attribute, v))
        case (.exists, _): Expression(base: keys.attributeHas(f.attribute))
        case (.ne, .value(let v)):
            Expression(base: keys.attributeHas(f.attribute), minus: [keys.attributeEquals(f.attribute, v)])
        case (.notExists, _): Expression(base: keys.attributeUsers, minus: [keys.attributeHas(f.attribute)])
        default: nil
        }
    }

    /// Runs `commands` as one pipeline; the first error throws, naming its command.
    static func run(_ commands: [[String]], on c: RedisClient) throws {
        let replies = try c.pipeline(commands)
        for (i, r) in replies.enumerated() { try r.throwIfError(commands[i].first ?? "") }
    }
}
