import RelayCore
/// The Lua scripts of `RedisAdmissionStore`. Each runs atomically inside Redis (no other command interleaves), so
/// "check every limit, then take everything" cannot race between replicas. Loaded with SCRIPT LOAD when a
/// connection becomes ready and called with EVALSHA; on NOSCRIPT (Redis restarted, or SCRIPT FLUSH) the call is
/// repeated once with EVAL, which runs the script and caches it again. An EVALSHA answered NOSCRIPT did not run,
/// so the repeat cannot apply anything twice.
///
/// Arithmetic: Lua numbers are doubles, exact for integers below 2^53. A token bucket holds `burst · 60 000` units
/// (at most 6·10^12) and every millisecond adds `requestsPerMinute` units: the same exact scheme as
/// `RateLimiterState`, in milliseconds. Numbers handed to Redis go through `int()` (`%d`), because Lua 5.1 prints
/// numbers with 14 significant digits.
///
/// Layout (every key under the configured prefix):
/// - `rate:addr:A`, `rate:id:I`: a bucket, HASH {u: units, t: ms of the last refill}; expires once it would be full
///   again (an absent bucket is a full one).
/// - `streams:addr:A`, `streams:id:I`: ZSET of open streams, member = grant uid, score = lease expiry (ms). Expired
///   members are removed before counting: a replica killed with -9 frees its slots within the lease TTL.
/// - `budget:id:K:day:2026-12-01`, `…:month:2026-12`, `budget:total:day:…`, `budget:total:month:…`: HASH
///   {used, reserved, r:<uid>: that grant's reservation}; with `…:res`, a ZSET of the reservations by expiry.
///   Expired reservations are subtracted lazily. Both expire an hour after their window ends.
/// - `budget:usd:id:K:day:…` and the same three others: the dollar windows, the same HASH and ZSET in nano-dollars
///   (integers: a dollar limit is at most 10¹⁵ nano-dollars, so every sum stays below 2^53, exact in Lua).
enum RedisAdmissionScripts {
    enum Name: Int, CaseIterable, Sendable {
        case admit, extend, settle, refresh, report
    }

    static func source(_ name: Name) -> String {
        switch name {
        case .admit: prelude + admit
        case .extend: prelude + extend
        case .settle: prelude + settle
        case .refresh: prelude + refresh
        case .report: prelude + report
        }
    }

    /// `now_ms`: the caller's clock when it passed one (tests), else Redis's own, the one clock every replica shares.
    static let prelude = """
        local function int(x) return string.format('%d', x) end
        local function now_ms(arg)
          if arg ~= '' then return tonumber(arg) end
          local t = redis.call('TIME')
          return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
        end
        local UNIT = 60000
        -- Drops the window's expired reservations; returns used + reserved.
        local function window(hash, zset, now)
          local expired = redis.call('ZRANGEBYSCORE', zset, '-inf', int(now))
          for _, uid in ipairs(expired) do
            local amount = tonumber(redis.call('HGET', hash, 'r:' .. uid))
            if amount then
              redis.call('HINCRBY', hash, 'reserved', int(-amount))
              redis.call('HDEL', hash, 'r:' .. uid)
            end
          end
          if #expired > 0 then redis.call('ZREMRANGEBYSCORE', zset, '-inf', int(now)) end
          local h = redis.call('HMGET', hash, 'used', 'reserved')
          return (tonumber(h[1]) or 0) + (tonumber(h[2]) or 0)
        end
        -- The four windows from KEYS[base] (hash, reservations each): the latest window end (s) past wall among
        -- those that cannot take amount more (limits from ARGV[lim]); 0 when all can.
        local function refusal(base, amount, lim, now, ends, wall)
          local refuse = 0
          for w = 0, 3 do
            local limit = tonumber(ARGV[lim + w])
            local spent = window(KEYS[base + 2 * w], KEYS[base + 1 + 2 * w], now)
            if limit >= 0 and spent + amount > limit then refuse = math.max(refuse, ends[w + 1] - wall, 1) end
          end
          return refuse
        end

        """

    /// KEYS: 1 address bucket, 2 identity bucket, 3 address streams, 4 identity streams, 5-12 the four budget
    /// windows (hash, reservations) as identity day, identity month, total day, total month, 13 the grant's
    /// tombstone (`released:UID`: the caller gave up waiting and released it; this run is late and takes nothing).
    /// ARGV: 1 now ms or '', 2 lease TTL ms, 3 uid, 4-7 address rpm (0: none), burst, stream cap (-1: none),
    /// concurrency Retry-After, 8-11 the same for the identity, 12 has identity (1/0), 13 tokens to reserve
    /// (0: no budget), 14-17 the windows' limits (-1: none), 18 wall clock s, 19 day end s, 20 month end s.
    /// Dollars (optional, when the request has a budget): KEYS 14-21 the four dollar windows, ARGV 21 nano-dollars to
    /// reserve, 22-25 their limits; checked and taken with the tokens, all or nothing.
    /// Returns {1} or {0, reason, retryAfterSeconds}.
    static let admit = """
        if redis.call('EXISTS', KEYS[13]) == 1 then return {0, 'released', 0} end
        local now = now_ms(ARGV[1])
        local ttl = tonumber(ARGV[2])
        local uid = ARGV[3]
        local has_identity = ARGV[12] == '1'
        local function limits(i) return tonumber(ARGV[i]), tonumber(ARGV[i + 1]), tonumber(ARGV[i + 2]), tonumber(ARGV[i + 3]) end
        local a_rpm, a_burst, a_cap, a_retry = limits(4)
        local i_rpm, i_burst, i_cap, i_retry = limits(8)
        if not has_identity then i_rpm = 0; i_cap = -1 end

        local function streams(key, cap)
          if cap < 0 then return 0 end
          redis.call('ZREMRANGEBYSCORE', key, '-inf', int(now))
          return redis.call('ZCARD', key)
        end
        if a_cap >= 0 and streams(KEYS[3], a_cap) >= a_cap then return {0, 'concurrency', a_retry} end
        if i_cap >= 0 and streams(KEYS[4], i_cap) >= i_cap then return {0, 'concurrency', i_retry} end

        local function bucket(key, rpm, burst)
          if rpm <= 0 then return nil end
          local cap = burst * UNIT
          local h = redis.call('HMGET', key, 'u', 't')
          local units, at = tonumber(h[1]), tonumber(h[2])
          if units == nil or at == nil then return cap end
          if now > at and units < cap then
            local elapsed = now - at
            local full_after = math.floor((cap - units + rpm - 1) / rpm)
            if elapsed >= full_after then units = cap else units = units + elapsed * rpm end
          end
          return units
        end
        local function retry_after(units, rpm)
          local wait_ms = math.floor((UNIT - units + rpm - 1) / rpm)
          return math.max(1, math.floor((wait_ms + 999) / 1000))
        end
        local a_units = bucket(KEYS[1], a_rpm, a_burst)
        if a_units and a_units < UNIT then return {0, 'rate', retry_after(a_units, a_rpm)} end
        local i_units = bucket(KEYS[2], i_rpm, i_burst)
        if i_units and i_units < UNIT then return {0, 'rate', retry_after(i_units, i_rpm)} end

        local tokens = tonumber(ARGV[13])
        local wall = tonumber(ARGV[18])
        local ends = {tonumber(ARGV[19]), tonumber(ARGV[20]), tonumber(ARGV[19]), tonumber(ARGV[20])}
        local nano = tonumber(ARGV[21] or '0')
        if tokens > 0 or nano > 0 then
          local refuse = 0
          if tokens > 0 then refuse = refusal(5, tokens, 14, now, ends, wall) end
          if nano > 0 then refuse = math.max(refuse, refusal(14, nano, 22, now, ends, wall)) end
          if refuse > 0 then return {0, 'budget', refuse} end
        end

        local function take(key, units, rpm, burst)
          units = units - UNIT
          redis.call('HSET', key, 'u', int(units), 't', int(now))
          redis.call('PEXPIRE', key, int(math.floor((burst * UNIT - units + rpm - 1) / rpm) + 1000))
        end
        if a_units then take(KEYS[1], a_units, a_rpm, a_burst) end
        if i_units then take(KEYS[2], i_units, i_rpm, i_burst) end
        local expiry = int(now + ttl)
        if a_cap >= 0 then
          redis.call('ZADD', KEYS[3], expiry, uid)
          redis.call('PEXPIRE', KEYS[3], int(ttl + 1000))
        end
        if has_identity then
          if i_cap < 0 then redis.call('ZREMRANGEBYSCORE', KEYS[4], '-inf', int(now)) end
          redis.call('ZADD', KEYS[4], expiry, uid)
          redis.call('PEXPIRE', KEYS[4], int(ttl + 1000))
        end
        local function reserve(base, amount)
          for w = 0, 3 do
            local hash, zset = KEYS[base + 2 * w], KEYS[base + 1 + 2 * w]
            redis.call('HINCRBY', hash, 'reserved', int(amount))
            redis.call('HSET', hash, 'r:' .. uid, int(amount))
            redis.call('ZADD', zset, expiry, uid)
            redis.call('EXPIREAT', hash, int(ends[w + 1] + 3600))
            redis.call('EXPIREAT', zset, int(ends[w + 1] + 3600))
          end
        end
        if tokens > 0 then reserve(5, tokens) end
        if nano > 0 then reserve(14, nano) end
        return {1}
        """

    /// KEYS: 1-8 the four budget windows, 9-16 the four dollar windows. ARGV: 1 now ms or '', 2 lease TTL ms, 3 uid,
    /// 4 tokens, 5-8 limits, 9 nano-dollars, 10-13 their limits. Returns 1 (both reserved) or 0 (a budget cannot
    /// cover it; nothing changed).
    static let extend = """
        local now = now_ms(ARGV[1])
        local uid = ARGV[3]
        local tokens = tonumber(ARGV[4])
        local nano = tonumber(ARGV[9] or '0')
        local never = {0, 0, 0, 0}
        if refusal(1, tokens, 5, now, never, -1) > 0 then return 0 end
        if nano > 0 and refusal(9, nano, 10, now, never, -1) > 0 then return 0 end
        local function grow(base, amount)
          for w = 0, 3 do
            local hash, zset = KEYS[base + 2 * w], KEYS[base + 1 + 2 * w]
            redis.call('HINCRBY', hash, 'reserved', int(amount))
            redis.call('HINCRBY', hash, 'r:' .. uid, int(amount))
            redis.call('ZADD', zset, int(now + tonumber(ARGV[2])), uid)
          end
        end
        grow(1, tokens)
        if nano > 0 then grow(9, nano) end
        return 1
        """

    /// KEYS: 1 address streams, 2 identity streams, then the four budget windows when ARGV[3] is 1 (and the four
    /// dollar windows after them when ARGV[7] is 1), then the grant's tombstone. ARGV: 1 uid, 2 tokens used, 3 has
    /// budget, 4 day end s, 5 month end s, 6 the tombstone's TTL in ms (0: none is left), 7 has dollar windows,
    /// 8 nano-dollars used. The tombstone makes the settle happen once: a settle sent again (its first reply
    /// was lost, so it may have run) finds it and changes nothing (returns 2), and an admission whose answer never
    /// came (it may still run) finds it and takes nothing. A settle that charges nothing is idempotent as it is and
    /// leaves none.
    static let settle = """
        if redis.call('EXISTS', KEYS[#KEYS]) == 1 then return 2 end
        local uid = ARGV[1]
        redis.call('ZREM', KEYS[1], uid)
        redis.call('ZREM', KEYS[2], uid)
        local function charge(base, used)
          local ends = {ARGV[4], ARGV[5], ARGV[4], ARGV[5]}
          for w = 0, 3 do
            local hash, zset = KEYS[base + 2 * w], KEYS[base + 1 + 2 * w]
            local amount = tonumber(redis.call('HGET', hash, 'r:' .. uid))
            if amount then
              redis.call('HINCRBY', hash, 'reserved', int(-amount))
              redis.call('HDEL', hash, 'r:' .. uid)
            end
            redis.call('ZREM', zset, uid)
            redis.call('HINCRBY', hash, 'used', used)
            redis.call('EXPIREAT', hash, int(tonumber(ends[w + 1]) + 3600))
          end
        end
        if ARGV[3] == '1' then charge(3, ARGV[2]) end
        if ARGV[7] == '1' then charge(11, ARGV[8]) end
        if tonumber(ARGV[6]) > 0 then redis.call('SET', KEYS[#KEYS], '1', 'PX', ARGV[6]) end
        return 1
        """

    /// Pushes the expiry of live leases and reservations. KEYS: the sorted sets; the first ARGV[3] of them are
    /// stream sets (whose key TTL follows the leases). ARGV: 1 now ms or '', 2 lease TTL ms, 3 count, then per key
    /// its members separated by spaces. ZADD XX: a member already settled or expired is not brought back.
    static let refresh = """
        local now = now_ms(ARGV[1])
        local ttl = tonumber(ARGV[2])
        local stream_sets = tonumber(ARGV[3])
        local expiry = int(now + ttl)
        for i, key in ipairs(KEYS) do
          for uid in string.gmatch(ARGV[3 + i], '%S+') do
            redis.call('ZADD', key, 'XX', expiry, uid)
          end
          if i <= stream_sets then redis.call('PEXPIRE', key, int(ttl + 1000)) end
        end
        return 1
        """

    /// KEYS: 1-4 the identity's day and month windows (hash, reservations), 5 its streams, 6-9 its dollar day and
    /// month windows. ARGV: 1 now ms or ''. Returns {used day, reserved day, used month, reserved month, open
    /// streams, then the same four in nano-dollars}.
    static let report = """
        local now = now_ms(ARGV[1])
        local out = {}
        local function read(base)
          for w = 0, 1 do
            window(KEYS[base + 2 * w], KEYS[base + 1 + 2 * w], now)
            local h = redis.call('HMGET', KEYS[base + 2 * w], 'used', 'reserved')
            out[#out + 1] = tonumber(h[1]) or 0
            out[#out + 1] = tonumber(h[2]) or 0
          end
        end
        read(1)
        out[#out + 1] = redis.call('ZCOUNT', KEYS[5], '(' .. int(now), '+inf')
        read(6)
        return out
        """
}
