import type { Redis } from "ioredis";
import { redisKeys, type TierIds, windowStart } from "../../shared/identity";
import { runScript, TIERS, type TierLimits } from "../../shared/limits";

/**
 * The admission check of the release before lease counters (one ZSET member per lease per tier), verbatim, so
 * tests can run it beside the current one: an old replica during a rolling upgrade of a running spoke.
 */
const LEGACY_ADMIT = `
local call = redis.call
local share = 4
local function admit(kb, ab)
  local now = tonumber(ARGV[ab + 1])
  local lease = ARGV[ab + 2]
  local ttl = tonumber(ARGV[ab + 3])
  local n = tonumber(ARGV[ab + 4])
  local strings = call('MGET', KEYS[kb + 1], KEYS[kb + 3], KEYS[kb + 4], KEYS[kb + 6], KEYS[kb + 7], KEYS[kb + 9])
  local tats = {}
  local intervals = {}
  for i = 0, 2 do
    local concKey = KEYS[kb + i * 3 + 2]
    local rps = tonumber(ARGV[ab + 5 + i * 4])
    local interval = 1000 / rps
    local capacity = math.max(interval, 1000)
    local tat = tonumber(strings[i * 2 + 1] or '0')
    if tat < now then tat = now end
    if tat + interval - now > capacity then
      return {i + 1, 'rps', math.max(1, math.ceil(tat + interval - now - capacity))}
    end
    tats[i] = tat
    intervals[i] = interval
    if n > 1 then
      -- rps slots left after the request's own: the largest k with tat + (1 + k) * interval - now <= capacity
      local k = math.floor((capacity - (tat - now)) / interval) - 1
      while k > 0 and tat + (1 + k) * interval - now > capacity do k = k - 1 end
      n = math.min(n, 1 + math.floor(k / share))
    end
    call('ZREMRANGEBYSCORE', concKey, '-inf', now)
    local conc = tonumber(ARGV[ab + 6 + i * 4])
    local card = call('ZCARD', concKey)
    if card >= conc then
      local first = call('ZRANGE', concKey, 0, 0, 'WITHSCORES')
      return {i + 1, 'concurrency', math.max(1, math.ceil(tonumber(first[2]) - now))}
    end
    if n > 1 then n = math.min(n, 1 + math.floor((conc - card - 1) / share)) end
    if tonumber(strings[i * 2 + 2] or '0') >= tonumber(ARGV[ab + 7 + i * 4]) then
      return {i + 1, 'tokens', math.max(1, math.ceil(tonumber(ARGV[ab + 8 + i * 4]) - now))}
    end
  end
  local members = {now + ttl, lease}
  for j = 1, n - 1 do
    members[#members + 1] = now + ttl
    members[#members + 1] = lease .. '.' .. j
  end
  for i = 0, 2 do
    local concKey = KEYS[kb + i * 3 + 2]
    local tat = tats[i] + n * intervals[i]
    call('SET', KEYS[kb + i * 3 + 1], string.format('%.3f', tat), 'PX', math.ceil(tat - now) + 10000)
    call('ZADD', concKey, unpack(members))
    local last = call('ZRANGE', concKey, -1, -1, 'WITHSCORES')
    call('PEXPIREAT', concKey, math.ceil(tonumber(last[2])))
  end
  return {0, lease, n}
end
`;

const LEGACY_CHECK_LUA = `${LEGACY_ADMIT}
return admit(0, 0)
`;

/**
 * One check as an old replica makes it (keys and arguments as that release built them).
 * @returns the allowed lease id, or undefined when denied.
 */
export async function legacyCheck(
    redis: Redis,
    ids: TierIds,
    limits: TierLimits,
    leaseId: string,
    nowMs: number,
    leaseTtlMs: number,
): Promise<string | undefined> {
    const keys: string[] = [];
    const args: (string | number)[] = [nowMs, leaseId, leaseTtlMs, 1];
    for (const t of TIERS) {
        const l = limits[t];
        const start = windowStart(nowMs, l.windowSeconds);
        keys.push(redisKeys.rps(t, ids[t]), redisKeys.concurrency(t, ids[t]), redisKeys.tokens(t, ids[t], start));
        args.push(l.requestsPerSecond, l.concurrentRequests, l.tokensPerWindow, (start + l.windowSeconds) * 1000);
    }
    const r = (await runScript(redis, LEGACY_CHECK_LUA, keys, args)) as [number, string];
    return r[0] === 0 ? r[1] : undefined;
}

/**
 * The `counters` admission check of the release before lease markers moved into the key tier's HASH (one marker
 * string per admission, `rl:lease:c.<expiry>.<token>`), verbatim: a replica of that release during a rolling
 * update.
 */
const PREVIOUS_COUNTERS_CHECK_LUA = `
local call = redis.call
local share = 4

local function sweep(cc, now)
  local all = call('HGETALL', cc)
  local held, first, dead = 0, nil, {}
  for j = 1, #all, 2 do
    local b = tonumber(all[j])
    if b then
      if b <= now then dead[#dead + 1] = all[j]
      else
        held = held + tonumber(all[j + 1])
        if not first or b < first then first = b end
      end
    end
  end
  if #dead > 0 then call('HDEL', cc, unpack(dead)) end
  if first then call('HSET', cc, 'n', held, 'e', first) else call('HSET', cc, 'n', 0) call('HDEL', cc, 'e') end
  return held, first or math.huge
end

-- Each counter HASH this call touches is read once and written once, by flush() at the end: the call is atomic,
-- so a batch of checks sharing the model and team tiers reads and writes those HASHes once, not once per check.
local states, listed = {}, {}
local function state(cc, field)
  local s = states[cc]
  if not s then
    local h = call('HMGET', cc, 't', 'n', 'e', 'l', 'x', field)
    s = {t = tonumber(h[1]), n = tonumber(h[2]) or 0, e = tonumber(h[3]) or math.huge, l = tonumber(h[4]) or 0,
      x = tonumber(h[5]) or 0, b = {[field] = tonumber(h[6]) or 0}, dirty = {}, changed = false, expire = false}
    states[cc] = s
    if not listed[cc] then listed[cc] = true listed[#listed + 1] = cc end
  elseif not s.b[field] then
    s.b[field] = tonumber(call('HGET', cc, field)) or 0
  end
  return s
end
local function save(cc, s)
  if not s.changed then return end
  local w = {'t', string.format('%.3f', s.t), 'n', s.n, 'e', s.e, 'l', s.l, 'x', s.x}
  for f in pairs(s.dirty) do w[#w + 1] = f w[#w + 1] = s.b[f] end
  call('HSET', cc, unpack(w))
  if s.expire then call('PEXPIREAT', cc, s.x) end
  s.changed, s.dirty, s.expire = false, {}, false
end
local function flush()
  for j = 1, #listed do
    local s = states[listed[j]]
    if s then save(listed[j], s) end
  end
end
local sel, tats, intervals = {}, {}, {}
local marks = {'\\255'}
local function admit(kb, ab)
  local now = tonumber(ARGV[ab + 1])
  local n = tonumber(ARGV[ab + 3])
  local field = ARGV[ab + 4]
  local bucket = tonumber(field)
  local tokens = call('MGET', KEYS[kb + 2], KEYS[kb + 4], KEYS[kb + 6])
  for i = 1, 3 do
    local cc = KEYS[kb + i * 2 - 1]
    local a = ab + 1 + i * 4
    local s = state(cc, field)
    if s.e <= now then
      -- expired buckets leave the count (once a second per busy tier): write what this call changed, sweep, reread
      save(cc, s)
      sweep(cc, now)
      states[cc] = nil
      s = state(cc, field)
    end
    local interval = 1000 / tonumber(ARGV[a])
    local capacity = interval > 1000 and interval or 1000
    local tat = s.t or now
    if tat < now then tat = now end
    if tat + interval - now > capacity then
      return {i, 'rps', math.max(1, math.ceil(tat + interval - now - capacity))}
    end
    if n > 1 then
      local k = math.floor((capacity - (tat - now)) / interval) - 1
      while k > 0 and tat + (1 + k) * interval - now > capacity do k = k - 1 end
      n = math.min(n, 1 + math.floor(k / share))
    end
    local conc = tonumber(ARGV[a + 1])
    if s.n >= conc then
      local first = s.e
      if first == math.huge then first = now + 1 end
      return {i, 'concurrency', math.max(1, math.ceil(first - now))}
    end
    if n > 1 then n = math.min(n, 1 + math.floor((conc - s.n - 1) / share)) end
    if (tonumber(tokens[i]) or 0) >= tonumber(ARGV[a + 2]) then
      return {i, 'tokens', math.max(1, math.ceil(tonumber(ARGV[a + 3]) - now))}
    end
    sel[i] = s tats[i] = tat intervals[i] = interval
  end
  local m = n <= 8 and marks[1] or string.rep(marks[1], math.ceil(n / 8))
  call('SET', KEYS[kb + 7], m, 'PXAT', field)
  for i = 1, 3 do
    local s = sel[i]
    s.t = tats[i] + n * intervals[i]
    s.n = s.n + n
    s.b[field] = s.b[field] + n
    s.dirty[field] = true
    if bucket < s.e then s.e = bucket end
    if bucket > s.l then s.l = bucket end
    -- the HASH lives past its last bucket and 10 s past its rps state; its expiry moves in 10 s steps
    local need = math.ceil(s.t) + 10000
    if need < bucket then need = bucket end
    if need > s.x then s.x = need + 10000 s.expire = true end
    s.changed = true
  end
  return {0, ARGV[ab + 2], n}
end

local r = admit(0, 0)
flush()
return r
`;

/**
 * One check as a `counters` replica of the previous release makes it.
 * @returns the allowed lease id (`c.…`), or undefined when denied.
 */
export async function previousCountersCheck(
    redis: Redis,
    ids: TierIds,
    limits: TierLimits,
    leaseToken: string,
    nowMs: number,
    leaseTtlMs: number,
): Promise<string | undefined> {
    const bucket = Math.ceil((nowMs + leaseTtlMs) / 1000) * 1000;
    const leaseId = `c.${bucket.toString(36)}.${leaseToken}`;
    const keys: string[] = [];
    const args: (string | number)[] = [nowMs, leaseId, 1, bucket];
    for (const t of TIERS) {
        const l = limits[t];
        const start = windowStart(nowMs, l.windowSeconds);
        keys.push(redisKeys.counters(t, ids[t]), redisKeys.tokens(t, ids[t], start));
        args.push(l.requestsPerSecond, l.concurrentRequests, l.tokensPerWindow, (start + l.windowSeconds) * 1000);
    }
    keys.push(redisKeys.lease(leaseId));
    const r = (await runScript(redis, PREVIOUS_COUNTERS_CHECK_LUA, keys, args)) as [number, string];
    return r[0] === 0 ? r[1] : undefined;
}
