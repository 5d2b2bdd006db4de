import { createHash, randomBytes } from "node:crypto";
import { performance } from "node:perf_hooks";
import type { Redis } from "ioredis";
import type { Policy } from "./bundle";
import { redisKeys, type Tier, type TierIds, windowStart } from "./identity";

/**
 * Three-tier limits in Redis, shared by the auth service (admission: rps, concurrency, token
 * windows) and the metering service (lease release and token accounting from usage events).
 *
 * Key layout is {@link redisKeys}. One check touches the keys of all three tiers in a single script, so the
 * keys span three hash slots: this needs a standalone (or Sentinel-managed) Redis, not Redis Cluster.
 *
 * Clock: every time is passed in by the caller (`nowMs`, ms since the Unix epoch), so all replicas must run
 * with synchronised clocks (NTP); skew between replicas shows up as that much slack in the rps limiter.
 */

/** The tiers in check order: platform+model, team, API key. */
export const TIERS: readonly Tier[] = ["model", "team", "key"];

/** One tier's limits, exactly as carried in the policy bundle. */
export type TierLimit = Policy["models"][number]["limits"];

/** Limits of all three tiers for one request. */
export type TierLimits = Record<Tier, TierLimit>;

/** What a denied check ran out of. */
export type LimitDimension = "rps" | "concurrency" | "tokens";

/**
 * A grant never takes more than this fraction of what any tier has left in any dimension: 1 / GRANT_SHARE of
 * the free rps slots and of the free concurrency slots, beyond the one slot of the request itself. Near a limit
 * a grant therefore shrinks to that one slot, and admission is exact again (one Redis check per request); a
 * replica holding a grant never holds more than a quarter of what the other replicas could still get.
 */
export const GRANT_SHARE = 4;

/** Outcome of {@link checkAndAcquire}. */
export type LimitDecision =
    | {
          allowed: true;
          /** The request's own concurrency lease. */
          leaseId: string;
          /**
           * Slots taken, including the request's own (1 ≤ granted ≤ the `want` asked for): `granted - 1` further
           * rps slots and concurrency leases ({@link grantLeaseIds}) in every tier, for the caller to hand out.
           */
          granted: number;
      }
    | {
          allowed: false;
          tier: Tier;
          dimension: LimitDimension;
          /** Milliseconds until a retry can succeed for this dimension (≥ 1). */
          retryAfterMs: number;
      };

/**
 * Where admission keeps rps state and concurrency leases, and what it reads:
 * - `counters` (default): per tier one HASH (`redisKeys.counters`) with the rps state and lease counters:
 *   leases held in total and per expiry bucket of {@link LEASE_BUCKET_MS}, plus one bit per lease in a marker
 *   per admission, a field of the key tier's HASH ({@link HASH_MARKER}), so a release counts once. Redis work
 *   per check does not grow with the leases held ({@link CHECK_COUNTERS_LUA}). Reads nothing of the earlier
 *   layout.
 * - `mixed`: writes as `counters` (but each marker a string of its own, `redisKeys.lease`, as the previous
 *   release's `counters` did), and also counts what the earlier layout holds (ZSET leases, the rps key):
 *   for replicas running beside ones that still write it ({@link CHECK_LIMITS_LUA}).
 * - `zset`: writes the earlier layout (one ZSET member per lease per tier, `redisKeys.concurrency`, and the
 *   rps key `redisKeys.rps`) exactly as earlier releases did, and reads both: beside old replicas.
 * A rolling upgrade of a running spoke goes zset → mixed → counters (services/auth/README.md). Whatever the
 * store, {@link releaseLease} releases both layouts.
 */
export type LeaseStore = "counters" | "mixed" | "zset";

/**
 * Expiry granularity of counter leases, ms: a lease's expiry (`now + leaseTtlMs`) is rounded up to the next
 * multiple, so an unreleased lease stops counting at most this much after its TTL (never before).
 */
export const LEASE_BUCKET_MS = 1000;

/** Most slots one grant may take ({@link checkAndAcquire} `want`): bounds the script's writes. */
export const MAX_GRANT = 512;

/** A lease token ({@link checkAndAcquire} `leaseToken`): unique per admission, no `.`. */
const TOKEN = /^[A-Za-z0-9_-]{1,64}$/;
/**
 * Prefix of the lease ids of the `counters` store: `h.<expiry bucket, ms, base 36>.<token>[.<slot>]`. The
 * admission's marker (one bit per slot, set while held) is the field `h.<bucket>.<token>` of the key tier's
 * counter HASH. Lease ids `c.…` (the `mixed` store, and `counters` replicas of the previous release) keep their
 * marker in a string key of its own (`redisKeys.lease`).
 */
export const HASH_MARKER = "h.";

/** A counter lease id: `c.` or `h.`, then `<expiry bucket, ms, base 36>.<token>[.<slot>]`. */
const COUNTER_LEASE = /^([ch])\.([0-9a-z]{1,12})\.([A-Za-z0-9_-]{1,64})(?:\.(\d{1,3}))?$/;

/** A counter lease id taken apart: its admission's marker (`base`), expiry bucket and slot (bit) index. */
export interface CounterLease {
    base: string;
    bucketMs: number;
    slot: number;
    /** Where the marker is: a field `base` of the key tier's counter HASH (`h.`), or the key `rl:lease:<base>` (`c.`). */
    marker: "hash" | "key";
}

/** Parses a counter lease id; undefined for anything else (a ZSET lease id of the earlier layout). */
export function parseCounterLease(leaseId: string): CounterLease | undefined {
    const m = COUNTER_LEASE.exec(leaseId);
    if (!m) return undefined;
    const slot = m[4] === undefined ? 0 : Number(m[4]);
    if (slot >= MAX_GRANT) return undefined;
    return { base: `${m[1]}.${m[2]}.${m[3]}`, bucketMs: parseInt(m[2], 36), slot, marker: m[1] === "h" ? "hash" : "key" };
}

const PROCESS_TAG = randomBytes(9).toString("base64url");
let tokenSeq = 0;

/**
 * A fresh lease token: 72 random bits fixed per process plus a counter (unique across replicas and restarts
 * without a random draw per check).
 */
export function newLeaseToken(): string {
    return PROCESS_TAG + (tokenSeq++).toString(36);
}

/**
 * The lease ids of a grant of `granted` slots whose first lease is `leaseId`: `leaseId` itself, then
 * `<leaseId>.1` … `<leaseId>.<granted - 1>` (the admission script names the extra leases so).
 */
export function grantLeaseIds(leaseId: string, granted: number): string[] {
    const out = [leaseId];
    for (let i = 1; i < granted; i++) out.push(`${leaseId}.${i}`);
    return out;
}

/**
 * Lua `sweep(cc, now)`: drops a counter HASH's expired buckets and the lease markers of expired buckets (fields
 * `h.<bucket, base 36>.<token>`, {@link HASH_MARKER}), returns (leases held, earliest bucket). Deletes in chunks
 * of 1000 fields (Lua's `unpack` limit).
 */
const SWEEP_LUA = `
local function sweep(cc, now)
  local all = call('HGETALL', cc)
  local held, first, dead = 0, nil, {}
  for j = 1, #all, 2 do
    local f = all[j]
    local b = tonumber(f)
    if b then
      if b <= now then dead[#dead + 1] = f
      else
        held = held + tonumber(all[j + 1])
        if not first or b < first then first = b end
      end
    elseif string.sub(f, 1, 2) == 'h.' then
      local mb = tonumber(string.match(f, '^h%.(%w+)%.') or '', 36)
      if mb and mb <= now then dead[#dead + 1] = f end
    end
  end
  for j = 1, #dead, 1000 do call('HDEL', cc, unpack(dead, j, math.min(j + 999, #dead))) end
  if first then call('HSET', cc, 'n', held, 'e', first) else call('HSET', cc, 'n', 0) call('HDEL', cc, 'e') end
  return held, first or math.huge
end
`;

/**
 * Admission script of the `mixed` and `zset` stores ({@link LeaseStore}). KEYS, per tier in {@link TIERS}
 * order: the earlier layout's rps key, lease ZSET (earlier layout), lease counter HASH, token-window counter; then
 * the admission's lease marker. ARGV: nowMs, leaseId, leaseTtlMs, want, expiry bucket (ms; 0 = write the
 * earlier layout, the `zset` store), then per tier: requestsPerSecond, concurrentRequests, tokensPerWindow,
 * windowEndMs.
 *
 * Phase 1 checks every tier for one request without writing anything but the removal of already-expired
 * leases; phase 2 commits only when all tiers pass, so a denied request consumes nothing. The six string keys
 * (earlier rps state and token counters) are read with one MGET up front (nothing in phase 1 writes them).
 * - rps: GCRA (a token bucket of capacity max(1, rps) refilled at rps/s). The state is the theoretical
 *   arrival time (ms, decimal string): the HASH's `t`, or the earlier layout's rps key, whichever is larger
 *   (each writer moves the larger on by its admissions, so the pair is one GCRA). It lives 10 s past the time
 *   the bucket would be full again (missing state means a full bucket; the slack keeps it for replicas whose
 *   clocks run behind).
 * - concurrency: leases held = the counter HASH's `n` plus, while the tier has a ZSET, its members with a
 *   score above now. HASH fields: `n` (leases held), `<bucket ms>` (leases held that expire at that bucket),
 *   `e` / `l` (earliest / latest bucket present), `x` (the HASH's expiry, moved in 10 s steps). Once now
 *   reaches `e`, expired buckets are swept: their counts leave `n` (a lease expires by its TTL). The HASH
 *   expires after its latest bucket and its rps state. A check that finds no expired bucket reads one HASH per
 *   tier and, when admitted, writes it once.
 *   The marker (a string of one bit per slot, all set, expiring with the bucket) lets a release count once.
 * - tokens: read-only here; the metering service adds usage to the fixed-window counter ({@link addTokens}).
 *
 * Grants (`want` > 1): when the request passes, up to `want - 1` further slots are taken in the same commit, as
 * if that many more requests had arrived at `nowMs`, but never more than 1 / {@link GRANT_SHARE} of the rps
 * or concurrency slots any tier has left after the request's own. `want` = 1 is the plain per-request check.
 *
 * Returns `{0, leaseId, granted}` when allowed (leases named by {@link grantLeaseIds}), or
 * `{tierIndex (1-based), dimension, retryAfterMs}` when denied.
 */
const ADMIT_LUA_FUNCTION = `
local call = redis.call
local share = ${GRANT_SHARE}
${SWEEP_LUA}
local function admit(kb, ab)
  local now = tonumber(ARGV[ab + 1])
  local lease = ARGV[ab + 2]
  local ttl = tonumber(ARGV[ab + 3])
  local n = tonumber(ARGV[ab + 4])
  local bucket = tonumber(ARGV[ab + 5])
  local strings = call('MGET', KEYS[kb + 1], KEYS[kb + 4], KEYS[kb + 5], KEYS[kb + 8], KEYS[kb + 9], KEYS[kb + 12])
  local zsets = call('EXISTS', KEYS[kb + 2], KEYS[kb + 6], KEYS[kb + 10]) > 0
  local st = {}
  for i = 0, 2 do
    local base = kb + i * 4
    local cc = KEYS[base + 3]
    local h = call('HMGET', cc, 't', 'n', 'e', 'l', 'x', ARGV[ab + 5])
    local rps = tonumber(ARGV[ab + 6 + i * 4])
    local interval = 1000 / rps
    local capacity = math.max(interval, 1000)
    -- rps state: the counter HASH's 't', or the earlier layout's key while a replica still writes it (each
    -- writer moves the larger of the two on, so the larger is the one arrival time of all admissions)
    local tat = math.max(now, tonumber(strings[i * 2 + 1] or '0'), tonumber(h[1] or '0'))
    if tat + interval - now > capacity then
      return {i + 1, 'rps', math.max(1, math.ceil(tat + interval - now - capacity))}
    end
    if n > 1 then
      -- rps slots left after the request's own: the largest k with tat + (1 + k) * interval - now <= capacity
      local k = math.floor((capacity - (tat - now)) / interval) - 1
      while k > 0 and tat + (1 + k) * interval - now > capacity do k = k - 1 end
      n = math.min(n, 1 + math.floor(k / share))
    end
    local counted = tonumber(h[2] or '0')
    local first = tonumber(h[3]) or math.huge
    if first <= now then counted, first = sweep(cc, now) end
    local held = counted
    local zkey = KEYS[base + 2]
    if zsets then
      call('ZREMRANGEBYSCORE', zkey, '-inf', now)
      held = held + call('ZCARD', zkey)
    end
    local conc = tonumber(ARGV[ab + 7 + i * 4])
    if held >= conc then
      if zsets then
        local z = call('ZRANGE', zkey, 0, 0, 'WITHSCORES')
        if z[2] and tonumber(z[2]) < first then first = tonumber(z[2]) end
      end
      if first == math.huge then first = now + 1 end
      return {i + 1, 'concurrency', math.max(1, math.ceil(first - now))}
    end
    if n > 1 then n = math.min(n, 1 + math.floor((conc - held - 1) / share)) end
    if tonumber(strings[i * 2 + 2] or '0') >= tonumber(ARGV[ab + 8 + i * 4]) then
      return {i + 1, 'tokens', math.max(1, math.ceil(tonumber(ARGV[ab + 9 + i * 4]) - now))}
    end
    st[i] = {tat, interval, counted, first, tonumber(h[4] or '0'), tonumber(h[5] or '0'), tonumber(h[6] or '0')}
  end
  local members
  if bucket == 0 then
    members = {now + ttl, lease}
    for j = 1, n - 1 do
      members[#members + 1] = now + ttl
      members[#members + 1] = lease .. '.' .. j
    end
  else
    -- one bit per slot, most significant first (SETBIT order): a marker with no bit left is deleted by a release
    local r = n % 8
    call('SET', KEYS[kb + 13], string.rep('\\255', math.floor(n / 8)) .. (r > 0 and string.char(256 - 2 ^ (8 - r)) or ''), 'PXAT', bucket)
  end
  for i = 0, 2 do
    local base = kb + i * 4
    local s = st[i]
    local tat = s[1] + n * s[2]
    if bucket == 0 then
      call('SET', KEYS[base + 1], string.format('%.3f', tat), 'PX', math.ceil(tat - now) + 10000)
      local zkey = KEYS[base + 2]
      call('ZADD', zkey, unpack(members))
      local last = call('ZRANGE', zkey, -1, -1, 'WITHSCORES')
      call('PEXPIREAT', zkey, math.ceil(tonumber(last[2])))
    else
      local cc = KEYS[base + 3]
      local w = {'t', string.format('%.3f', tat), 'n', s[3] + n, bucket, s[7] + n}
      if bucket < s[4] then w[#w + 1] = 'e' w[#w + 1] = bucket end
      if bucket > s[5] then w[#w + 1] = 'l' w[#w + 1] = bucket end
      -- the HASH lives until its last bucket and 10 s past the rps state; its expiry moves in 10 s steps
      local need = math.max(bucket, math.ceil(tat) + 10000)
      if need > s[6] then w[#w + 1] = 'x' w[#w + 1] = need + 10000 end
      call('HSET', cc, unpack(w))
      if need > s[6] then call('PEXPIREAT', cc, need + 10000) end
    end
  end
  return {0, lease, n}
end
`;

/** The admission script described above, for one check. */
export const CHECK_LIMITS_LUA = `${ADMIT_LUA_FUNCTION}
return admit(0, 0)
`;

/** Keys per admission check in {@link CHECK_LIMITS_LUA} (4 per tier, then the lease marker). */
const ADMIT_KEYS = 13;
/** ARGV entries per admission check in {@link CHECK_LIMITS_LUA} (5 + 4 per tier). */
const ADMIT_ARGS = 17;

/**
 * N admission checks in one script call, run in order, each exactly as {@link CHECK_LIMITS_LUA} would run it
 * alone (the batch is atomic as a whole, which is at least as strong). KEYS: the checks' 13 keys one after the
 * other; ARGV: the checks' 17 arguments one after the other. Returns one reply per check, in order.
 */
export const CHECK_LIMITS_BATCH_LUA = `${ADMIT_LUA_FUNCTION}
local out = {}
for n = 0, #KEYS / ${ADMIT_KEYS} - 1 do
  out[n + 1] = admit(n * ${ADMIT_KEYS}, n * ${ADMIT_ARGS})
end
return out
`;

/**
 * The admission check of the `counters` store once no replica writes the earlier layout: as
 * {@link CHECK_LIMITS_LUA} without reading ZSETs or the earlier rps keys, and with the admission's lease marker
 * a field of the key tier's counter HASH ({@link HASH_MARKER}) instead of a key of its own (the HASH's `l`, which
 * nothing reads, is no longer written).
 * KEYS: per context (a model and a team tier shared by checks of the call) the model tier's counter HASH and
 * token-window counter, then the team tier's (4 each); then per check the key tier's counter HASH and
 * token-window counter (2). ARGV: the number L of limit sets, L sets of requestsPerSecond, concurrentRequests,
 * tokensPerWindow, windowSeconds; the number C of contexts, C pairs of 1-based limit sets (model, team); then per
 * check nowMs, leaseId (`h.…`, also the marker's field), want, expiry bucket (ms), its 1-based context and the
 * key tier's limit set (6). An admitted check answers the slots it took (a number); a denied one
 * `{tierIndex, dimension, retryAfterMs}`.
 *
 * Redis work per admitted check of a quiet key (its model and team HASHes shared with the other checks of the
 * call): one HMGET and one HSET of the key tier's HASH and one GET of its token counter (plus a PEXPIREAT when
 * the HASH's expiry moves, every 10 s). The HSET writes only fields that changed; a model or team HASH, token
 * counter or bucket other checks of the call already read is not read again. A key tier's HASH named by one check
 * of the call (a quiet key's) is read and written by that check alone, with no state table and no deferred write; one
 * named by several (a busy key's checks beside its grant) is kept as state like the model and team tiers'.
 * Measured with callgrind on redis-server 7.0 (`npm run bench -- auth-redis`, services/auth/redis-instructions.ts: the
 * bench's quiet-key mix in steady state, 1000 keys each checked 7.5 times a second on a simulated clock, 2 s lease TTL,
 * so a sweep on about 0.13 checks in 1): about 155,000 instructions per check at 6 checks per call, 131,000 at 16,
 * which is about 117,000 per check plus 230,000 per call (the script call itself, and the model and team tiers' reads
 * and writes). Of the per-check part, with each piece left out in turn: the lease marker's field (an HSET argument,
 * longer listpack scans in HMGET and HSET, and the sweeps' HGETALL of a HASH mostly made of markers with their HDELs)
 * about 27,500; the model and team tiers' per-check bookkeeping and their writes about 21,000; the key tier's token GET
 * about 5,500. The marker is the largest part, and only a data-layout change (markers out of the key tier's HASH, with
 * a migration like `AUTH_LEASE_STORE`'s) removes it. On the 2-core development VM each script call also costs
 * redis-server about 30 µs of CPU to be woken and to read and answer the socket (a one-command round trip measured
 * alone), whatever it carries.
 */
const COUNTERS_ADMIT_LUA_FUNCTION = `
local call = redis.call
local byte, match = string.byte, string.match
local floor, ceil, max, min, huge = math.floor, math.ceil, math.max, math.min, math.huge
local share = ${GRANT_SHARE}
-- Each model and team tier HASH this call touches is read once and written once, by flush() at the end: the call
-- is atomic, so a batch of checks sharing the model and team tiers reads and writes those HASHes once, not once
-- per check.
local states, listed, tokens = {}, {}, {}
-- tonumber (strtod) is the costliest step of a check: a string seen before in this call (limits, now, buckets,
-- counts; Lua strings are interned) is parsed once
-- (arithmetic coercion, one strtod; tonumber() runs two, and every value read here is written by these scripts as
-- a decimal number: anything else fails the call, closed)
local nums = {}
local function num(v)
  if not v then return nil end
  local x = nums[v]
  if not x then x = v + 0 nums[v] = x end
  return x
end
local function state(cc, field)
  local s = states[cc]
  if not s then
    local h = call('HMGET', cc, 't', 'n', 'e', 'x', field)
    local e, x = num(h[3]) or math.huge, num(h[4]) or 0
    -- every field a check may set is in the constructor, so the table is sized once (no rehash per check)
    s = {t = h[1] and h[1] + 0, n = num(h[2]) or 0, e = e, x = x, e0 = e, x0 = x,
      b = {[field] = num(h[5]) or 0}, changed = false, dirty = false, marks = false, es = false}
    states[cc] = s
    if not listed[cc] then listed[cc] = true listed[#listed + 1] = cc end
  elseif not s.b[field] then
    s.b[field] = num(call('HGET', cc, field)) or 0
  end
  return s
end
-- Drops the expired buckets of HASH cc and the markers of their leases (SWEEP_LUA) and returns its state, all
-- read by the one HGETALL; the new count and earliest bucket are written with the call's other changes (save)
local function sweepState(cc, now, field)
  local all = call('HGETALL', cc)
  local held, first, dead = 0, nil, {}
  local t, e, x, c = nil, math.huge, 0, 0
  local nd = 0
  for j = 1, #all, 2 do
    local f = all[j]
    local c1 = byte(f)
    -- a bucket field is a decimal number (a digit first); the others are t, n, e, x, l and h. markers
    local b = c1 >= 48 and c1 <= 57 and tonumber(f)
    if b then
      if b <= now then nd = nd + 1 dead[nd] = f
      else
        local v = all[j + 1] + 0
        held = held + v
        if not first or b < first then first = b end
        if f == field then c = v end
      end
    elseif f == 't' then t = all[j + 1] + 0
    elseif f == 'e' then e = tonumber(all[j + 1]) or math.huge
    elseif f == 'x' then x = tonumber(all[j + 1]) or 0
    elseif c1 == 104 and byte(f, 2) == 46 then
      local mb = tonumber(match(f, '^h%.(%w+)%.') or '', 36)
      if mb and mb <= now then nd = nd + 1 dead[nd] = f end
    end
  end
  for j = 1, nd, 1000 do call('HDEL', cc, unpack(dead, j, math.min(j + 999, nd))) end
  return {t = t, n = held, e = first or math.huge, x = x, e0 = e, x0 = x, b = {[field] = c}, changed = true,
    dirty = false, marks = false, es = false}
end
-- writes what changed: rps state, count, touched buckets, e / x when they moved, new markers (integers as
-- strings made here: Lua's own number-to-string conversion of a redis.call argument is several times slower)
local fmt = string.format
local function save(cc, s)
  if not s.changed then return end
  -- sized for the usual write (n, t, one bucket, e, x, one marker) up front: no rehash while it fills
  local w = {'n', fmt('%d', s.n), nil, nil, nil, nil, nil, nil, nil, nil, nil, nil}
  local k = 2
  if s.t then
    -- '%.3f' of the arrival time, from integers (a float conversion of a 13-digit number costs several times more)
    local tm = floor(s.t * 1000 + 0.5)
    w[3] = 't' w[4] = fmt('%d.%03d', floor(tm / 1000), tm % 1000)
    k = 4
  end
  if s.dirty then for f in pairs(s.dirty) do w[k + 1] = f w[k + 2] = fmt('%d', s.b[f]) k = k + 2 end end
  if s.e ~= s.e0 then
    if s.e == math.huge then call('HDEL', cc, 'e') else w[k + 1] = 'e' w[k + 2] = s.es or fmt('%d', s.e) k = k + 2 end
  end
  local x = s.x ~= s.x0 and fmt('%d', s.x)
  if x then w[k + 1] = 'x' w[k + 2] = x k = k + 2 end
  local marks = s.marks
  if marks then for j = 1, #marks do w[k + j] = marks[j] end k = k + #marks end
  call('HSET', cc, unpack(w, 1, k))
  if x then call('PEXPIREAT', cc, x) end
  s.changed, s.dirty, s.marks, s.es, s.e0, s.x0 = false, false, false, false, s.e, s.x
end
local function flush()
  for j = 1, #listed do
    local s = states[listed[j]]
    if s then save(listed[j], s) end
  end
end
-- limit sets: ARGV[1] = how many, then 4 arguments each (requestsPerSecond, concurrentRequests, tokensPerWindow,
-- windowSeconds); a check names one per tier, so limits shared by the checks of a call are sent and parsed once
local sets = {}
local function limitSet(j)
  local l = sets[j]
  if not l then
    local o = 1 + (j - 1) * 4
    l = {interval = 1000 / tonumber(ARGV[o + 1]), conc = tonumber(ARGV[o + 2]), tokens = tonumber(ARGV[o + 3]),
      window = tonumber(ARGV[o + 4])}
    sets[j] = l
  end
  return l
end
-- contexts: ARGV[ctxs] = how many, then 2 arguments each (the model and the team tier's limit set); KEYS begin
-- with 4 keys each (the model tier's HASH and token counter, the team tier's): the tiers a check shares with the
-- other checks of the call, sent once
local ctxs = 2 + tonumber(ARGV[1]) * 4
local ctxKeys = tonumber(ARGV[ctxs]) * 4
local first = ctxs + ctxKeys / 2
-- how many checks of the call name each key tier HASH
local checksOf = {}
for j = ctxKeys + 1, #KEYS, 2 do
  local k = KEYS[j]
  checksOf[k] = (checksOf[k] or 0) + 1
end
local sel, tats, intervals = {}, {}, {}
-- marker value for n slots: one bit per slot, most significant bit first (as SETBIT numbers them)
local function marker(n)
  if n == 1 then return '\\128' end
  local r = n % 8
  return string.rep('\\255', math.floor(n / 8)) .. (r > 0 and string.char(256 - 2 ^ (8 - r)) or '')
end
-- the rps and concurrency room of one tier (state: t = arrival time or nil, held = leases held, e = earliest
-- bucket) for a check at now asking for n slots: the slots it may take (n, or fewer near a limit: GRANT_SHARE),
-- or 0 and the denial
local function room(tat, interval, held, e, lm, now, n)
  local capacity = interval > 1000 and interval or 1000
  if tat + interval - now > capacity then return 0, 'rps', max(1, ceil(tat + interval - now - capacity)) end
  if n > 1 then
    local k = floor((capacity - (tat - now)) / interval) - 1
    while k > 0 and tat + (1 + k) * interval - now > capacity do k = k - 1 end
    n = min(n, 1 + floor(k / share))
  end
  local conc = lm.conc
  if held >= conc then
    if e == huge then e = now + 1 end
    return 0, 'concurrency', max(1, ceil(e - now))
  end
  if n > 1 then n = min(n, 1 + floor((conc - held - 1) / share)) end
  return n
end
-- a denial for tokens: until the end of the fixed window (services/shared/identity.ts windowStart)
local function tokensFull(i, lm, now)
  local sec = floor(now / 1000)
  return {i, 'tokens', max(1, ceil((sec - sec % lm.window + lm.window) * 1000 - now))}
end
local function admit(kb, ab)
  local now = ARGV[ab + 1] + 0
  local n = ARGV[ab + 3] + 0
  local field = ARGV[ab + 4]
  local bucket = num(field)
  local c = num(ARGV[ab + 5]) - 1
  -- the key tier's HASH is usually touched by this one check of the call: read here and written at once (direct);
  -- a key checked more than once in the call (a busy key beside its grant) is kept as state like the model and team
  -- tiers
  local kcc = KEYS[kb + 1]
  local direct = checksOf[kcc] == 1
  local last = direct and 2 or 3
  -- tiers kept as state for the whole call (shared by its checks), written by flush()
  for i = 1, last do
    local cc, tk, set
    if i < 3 then cc, tk, set = KEYS[c * 4 + i * 2 - 1], KEYS[c * 4 + i * 2], ARGV[ctxs + c * 2 + i]
    else cc, tk, set = kcc, KEYS[kb + 2], ARGV[ab + 6] end
    local s = state(cc, field)
    if s.e <= now then
      -- expired buckets leave the count (once a second per busy tier): write what this call changed, sweep
      save(cc, s)
      s = sweepState(cc, now, field)
      states[cc] = s
    end
    local lm = limitSet(num(set))
    local interval = lm.interval
    local tat = s.t or now
    if tat < now then tat = now end
    local dim, retry
    n, dim, retry = room(tat, interval, s.n, s.e, lm, now, n)
    if n == 0 then return {i, dim, retry} end
    local used = tokens[tk]
    if not used then
      used = num(call('GET', tk)) or 0
      tokens[tk] = used
    end
    if used >= lm.tokens then return tokensFull(i, lm, now) end
    sel[i] = s tats[i] = tat intervals[i] = interval
  end
  local cc = kcc
  local t, held, e, x, bc, e0, tat, interval
  if direct then
    local h = call('HMGET', cc, 't', 'n', 'e', 'x', field)
    e0 = h[3]
    e0 = e0 and e0 + 0 or huge
    if e0 <= now then
      local s = sweepState(cc, now, field)
      t, held, e, x, bc = s.t, s.n, s.e, s.x, s.b[field]
    else
      t = h[1]
      t = t and t + 0
      held = h[2]
      held = held and held + 0 or 0
      e = e0
      x = h[4]
      x = x and x + 0 or 0
      bc = h[5]
      bc = bc and bc + 0 or 0
    end
    local lm = limitSet(num(ARGV[ab + 6]))
    interval = lm.interval
    tat = t or now
    if tat < now then tat = now end
    local denied, dim, retry
    n, dim, retry = room(tat, interval, held, e, lm, now, n)
    if n == 0 then denied = {3, dim, retry}
    else
      local used = call('GET', KEYS[kb + 2])
      if used and used + 0 >= lm.tokens then denied = tokensFull(3, lm, now) end
    end
    if denied then
      -- a sweep's new count and earliest bucket are written even when the check is denied
      if e ~= e0 then
        if e == huge then call('HSET', cc, 'n', fmt('%d', held)) call('HDEL', cc, 'e')
        else call('HSET', cc, 'n', fmt('%d', held), 'e', fmt('%d', e)) end
      end
      return denied
    end
  end
  -- admitted: the state tiers' new state is written by flush(), a direct key tier's here
  if not direct then
    local ks = sel[3]
    local marks = ks.marks
    if marks then
      local m = #marks
      marks[m + 1] = ARGV[ab + 2]
      marks[m + 2] = marker(n)
    else
      ks.marks = {ARGV[ab + 2], marker(n)}
    end
  end
  for i = 1, last do
    local s = sel[i]
    s.t = tats[i] + n * intervals[i]
    s.n = s.n + n
    s.b[field] = s.b[field] + n
    local d = s.dirty
    if d then d[field] = true else s.dirty = {[field] = true} end
    if bucket < s.e then s.e = bucket s.es = field end
    -- the HASH lives past its last bucket and 10 s past its rps state; its expiry moves in 10 s steps
    local need = ceil(s.t) + 10000
    if need < bucket then need = bucket end
    if need > s.x then s.x = need + 10000 end
    s.changed = true
  end
  if not direct then return n end
  t = tat + n * interval
  local tm = floor(t * 1000 + 0.5)
  local ts = fmt('%d.%03d', floor(tm / 1000), tm % 1000)
  local ns, bs = fmt('%d', held + n), fmt('%d', bc + n)
  local lease, mark = ARGV[ab + 2], marker(n)
  local es
  if bucket < e then es = field elseif e ~= e0 then es = fmt('%d', e) end
  local need = ceil(t) + 10000
  if need < bucket then need = bucket end
  local xs = need > x and fmt('%d', need + 10000)
  if es then
    if xs then call('HSET', cc, 'n', ns, 't', ts, field, bs, 'e', es, 'x', xs, lease, mark)
    else call('HSET', cc, 'n', ns, 't', ts, field, bs, 'e', es, lease, mark) end
  elseif xs then call('HSET', cc, 'n', ns, 't', ts, field, bs, 'x', xs, lease, mark)
  else call('HSET', cc, 'n', ns, 't', ts, field, bs, lease, mark) end
  if xs then call('PEXPIREAT', cc, xs) end
  return n
end
`;

/** {@link COUNTERS_ADMIT_LUA_FUNCTION} for one check. */
export const CHECK_COUNTERS_LUA = `${COUNTERS_ADMIT_LUA_FUNCTION}
local r = admit(ctxKeys, first)
flush()
return r
`;

/**
 * Keys and ARGV entries per check of {@link CHECK_COUNTERS_LUA} (the limit sets and the model and team tiers'
 * contexts come first, once per call).
 */
const COUNTERS_KEYS = 2;
const COUNTERS_ARGS = 6;

/** {@link COUNTERS_ADMIT_LUA_FUNCTION} for a batch of checks, as {@link CHECK_LIMITS_BATCH_LUA}. */
export const CHECK_COUNTERS_BATCH_LUA = `${COUNTERS_ADMIT_LUA_FUNCTION}
local out = {}
for n = 0, (#KEYS - ctxKeys) / ${COUNTERS_KEYS} - 1 do
  out[n + 1] = admit(ctxKeys + n * ${COUNTERS_KEYS}, first + n * ${COUNTERS_ARGS})
end
flush()
return out
`;

/** Removes lease ARGV[1] from every concurrency ZSET in KEYS (the earlier layout). Returns how many held it. */
export const RELEASE_LEASE_LUA = `
local n = 0
for i = 1, #KEYS do
  n = n + redis.call('ZREM', KEYS[i], ARGV[1])
end
return n
`;

/**
 * Releases counter leases of one admission. KEYS: the marker, then each tier's counter HASH. ARGV: the
 * bucket (ms), then the slot indexes. A slot counts only when its marker bit was still set (so releasing
 * twice, or giving back a slot metering already released, counts once), and a tier is decremented only while
 * the bucket is still there (a bucket already swept by expiry counts nothing). A bucket whose last lease leaves
 * is deleted, so a HASH holds the buckets of leases still held, not one per second of the lease TTL (a sweep
 * reads the whole HASH). Returns, per tier, how many leases it let go (`{model, team, key}`).
 */
export const RELEASE_COUNTERS_LUA = `
local call = redis.call
local m = KEYS[1]
local bits = call('STRLEN', m) * 8
local u = 0
for j = 2, #ARGV do
  local s = tonumber(ARGV[j])
  if s < bits and call('SETBIT', m, s, 0) == 1 then u = u + 1 end
end
local out = {0, 0, 0}
if u == 0 then return out end
if call('BITCOUNT', m) == 0 then call('DEL', m) end
for i = 2, #KEYS do
  local held = tonumber(call('HGET', KEYS[i], ARGV[1]) or '0')
  local d = math.min(u, held)
  if d > 0 then
    if d == held then call('HDEL', KEYS[i], ARGV[1]) else call('HINCRBY', KEYS[i], ARGV[1], -d) end
    call('HINCRBY', KEYS[i], 'n', -d)
    out[i - 1] = d
  end
end
return out
`;

/**
 * Lua `unmark(kc, field, from)`: clears the slots ARGV[from] … ARGV[#ARGV] of the marker `field` of HASH `kc`
 * ({@link HASH_MARKER}); returns how many were still set. A marker left with no slot set is deleted.
 */
const UNMARK_LUA = `
local function unmark(kc, field, from)
  local v = call('HGET', kc, field)
  if not v then return 0 end
  local bytes = {string.byte(v, 1, -1)}
  local u = 0
  for j = from, #ARGV do
    local s = tonumber(ARGV[j])
    local i = math.floor(s / 8) + 1
    local b = bytes[i]
    if b then
      local p = 2 ^ (7 - s % 8)
      if math.floor(b / p) % 2 == 1 then bytes[i] = b - p u = u + 1 end
    end
  end
  if u == 0 then return 0 end
  for i = 1, #bytes do
    if bytes[i] ~= 0 then call('HSET', kc, field, string.char(unpack(bytes))) return u end
  end
  call('HDEL', kc, field)
  return u
end
`;

/**
 * Releases `h.` counter leases of one admission ({@link HASH_MARKER}). KEYS: each tier's counter HASH (the
 * marker is a field of the key tier's, the last). ARGV: the marker field, the bucket (ms), then the slot
 * indexes. Counts as {@link RELEASE_COUNTERS_LUA}: a slot only while its marker bit is set, a tier only while
 * the bucket is there. Returns, per tier, how many leases it let go (`{model, team, key}`).
 */
export const RELEASE_HASH_LUA = `
local call = redis.call
${UNMARK_LUA}
local out = {0, 0, 0}
local u = unmark(KEYS[3], ARGV[1], 3)
if u == 0 then return out end
for i = 1, 3 do
  local held = tonumber(call('HGET', KEYS[i], ARGV[2]) or '0')
  local d = math.min(u, held)
  if d > 0 then
    if d == held then call('HDEL', KEYS[i], ARGV[2]) else call('HINCRBY', KEYS[i], ARGV[2], -d) end
    call('HINCRBY', KEYS[i], 'n', -d)
    out[i] = d
  end
end
return out
`;

/**
 * Lua: lets go of `u` slots of bucket `bucket` in each tier's counter HASH (`hashOf(i)`, tier `i` = 1..3 in
 * {@link TIERS} order) and moves the tier's GCRA arrival time `t` back one rps interval (`ARGV[intervalArg(i)]`, ms) per
 * slot let go, never before `now`. Returns the slots let go over all tiers. Shared by {@link RETURN_HASH_LUA} and
 * {@link RETURN_COUNTERS_LUA}, whose KEYS lay the HASHes out differently.
 */
function giveBackLua(hashOf: string, intervalArg: string): string {
    return `local removed = 0
for i = 1, 3 do
  local cc = KEYS[${hashOf}]
  local held = tonumber(call('HGET', cc, bucket) or '0')
  local n = math.min(u, held)
  if n > 0 then
    if n == held then call('HDEL', cc, bucket) else call('HINCRBY', cc, bucket, -n) end
    call('HINCRBY', cc, 'n', -n)
    removed = removed + n
    local tat = tonumber(call('HGET', cc, 't') or '0')
    if tat > now then
      local back = tat - n * tonumber(ARGV[${intervalArg}])
      if back > now then call('HSET', cc, 't', string.format('%.3f', back)) else call('HDEL', cc, 't') end
    end
  end
end
return removed
`;
}

/**
 * Gives back unused `h.` slots of one grant: KEYS, each tier's counter HASH (model, team, key); ARGV: nowMs, the
 * three tiers' rps intervals (ms), the bucket (ms), the marker field, then the slot indexes. Counts like
 * {@link RELEASE_HASH_LUA} and moves each tier's GCRA arrival time back as {@link RETURN_COUNTERS_LUA} does.
 * Returns the leases let go over all tiers.
 */
export const RETURN_HASH_LUA = `
local call = redis.call
${UNMARK_LUA}
local now = tonumber(ARGV[1])
local bucket = ARGV[5]
local u = unmark(KEYS[3], ARGV[6], 7)
if u == 0 then return 0 end
${giveBackLua("i", "1 + i")}`;

/**
 * Adds ARGV[1] tokens to each token-window counter in KEYS; counter i expires at unix second ARGV[i + 1]
 * (the end of the following window, so the finished window stays readable for one more window).
 * Returns the new totals in KEYS order.
 */
export const ADD_TOKENS_LUA = `
local out = {}
for i = 1, #KEYS do
  out[i] = redis.call('INCRBY', KEYS[i], ARGV[1])
  redis.call('EXPIREAT', KEYS[i], ARGV[i + 1])
end
return out
`;

const shaCache = new Map<string, string>();

function sha1(script: string): string {
    let sha = shaCache.get(script);
    if (!sha) {
        sha = createHash("sha1").update(script).digest("hex");
        shaCache.set(script, sha);
    }
    return sha;
}

/**
 * Runs a Lua script by SHA (EVALSHA), loading it with EVAL on the first `NOSCRIPT` (after a Redis restart or
 * failover the script cache is empty).
 * @throws the Redis client's error when Redis is unreachable, times out, or the script fails.
 */
export async function runScript(redis: Redis, script: string, keys: string[], args: (string | number)[]): Promise<unknown> {
    try {
        return await redis.evalsha(sha1(script), keys.length, ...keys, ...args);
    } catch (err) {
        if (!(err instanceof Error) || !err.message.startsWith("NOSCRIPT")) throw err;
        return redis.eval(script, keys.length, ...keys, ...args);
    }
}

/** Concurrency ZSET keys (earlier layout) of the three tiers, in {@link TIERS} order. */
export function concurrencyKeys(ids: TierIds): string[] {
    return TIERS.map((t) => redisKeys.concurrency(t, ids[t]));
}

/** Lease counter HASH keys of the three tiers, in {@link TIERS} order. */
export function counterKeys(ids: TierIds): string[] {
    return TIERS.map((t) => redisKeys.counters(t, ids[t]));
}

/** Token-window counter keys of the three tiers at `nowMs`, in {@link TIERS} order. */
export function tokenKeys(ids: TierIds, nowMs: number, windowSeconds: Record<Tier, number>): string[] {
    return TIERS.map((t) => redisKeys.tokens(t, ids[t], windowStart(nowMs, windowSeconds[t])));
}

/**
 * The keys of an admission check that depend only on the tier ids (per tier: rps, lease ZSET, lease counters),
 * for callers that check the same ids often ({@link AdmissionBatcher.check}).
 */
export function admissionKeys(ids: TierIds): string[] {
    const out: string[] = [];
    for (const t of TIERS) out.push(redisKeys.rps(t, ids[t]), redisKeys.concurrency(t, ids[t]), redisKeys.counters(t, ids[t]));
    return out;
}

/** The expiry bucket (ms) of a counter lease taken at `nowMs`: `nowMs + leaseTtlMs` rounded up. */
export function leaseBucket(nowMs: number, leaseTtlMs: number): number {
    return Math.ceil((nowMs + leaseTtlMs) / LEASE_BUCKET_MS) * LEASE_BUCKET_MS;
}

/**
 * Checks rps, concurrency and token windows of all three tiers in one atomic script and, only if every tier
 * passes, takes one rps slot and a concurrency lease in each tier, plus up to `want - 1` further slots for a
 * grant ({@link CHECK_LIMITS_LUA}).
 * @param leaseToken unique per admission ({@link newLeaseToken}; letters, digits, `-`, `_`, at most 64). The
 *   lease id is `h.<expiry bucket>.<leaseToken>` with the `counters` store ({@link HASH_MARKER}),
 *   `c.<expiry bucket>.<leaseToken>` with `mixed`, `leaseToken` itself with `zset`.
 * @param nowMs caller's clock, ms since the Unix epoch.
 * @param leaseTtlMs how long the lease holds if no usage event releases it (ms); must exceed the longest
 *   request the gateway allows (AIGatewayRoute `timeouts.request`). Counter leases hold until the next
 *   {@link LEASE_BUCKET_MS} boundary after it.
 * @param want slots to take when the request passes, its own included: 1 (default) for a plain check, up to
 *   {@link MAX_GRANT}; fewer are granted near a limit ({@link GRANT_SHARE}).
 * @param store where the leases are written ({@link LeaseStore}).
 * @throws RangeError for a `want` outside 1..MAX_GRANT or a bad token; the Redis client's error when Redis is
 *   unreachable or times out (callers fail closed).
 */
export async function checkAndAcquire(
    redis: Redis,
    ids: TierIds,
    limits: TierLimits,
    leaseToken: string,
    nowMs: number,
    leaseTtlMs: number,
    want = 1,
    store: LeaseStore = "counters",
): Promise<LimitDecision> {
    validateCheck(want, leaseToken);
    const keys: string[] = [];
    const args: (string | number)[] = [];
    const sets = store === "counters" ? new LimitSets() : undefined;
    const leaseId = pushAdmission(keys, args, admissionKeys(ids), ids, limits, leaseToken, nowMs, leaseTtlMs, want, store, sets);
    return decodeAdmission(
        (await runScript(
            redis,
            sets ? CHECK_COUNTERS_LUA : CHECK_LIMITS_LUA,
            sets ? sets.keys(keys) : keys,
            sets ? sets.args(args) : args,
        )) as AdmissionReply,
        leaseId,
    );
}

/** A check's reply: the slots granted (counters script), or `[0, leaseId, granted]`, or `[tier, dimension, retryAfterMs]`. */
type AdmissionReply = number | [number, string, number];

/**
 * The distinct tier limits of one {@link CHECK_COUNTERS_LUA} call, each sent once (the model and team tiers'
 * limits repeat over the checks of a batch), and its distinct contexts: a model and a team tier (their HASHes,
 * token counters and limit sets), also sent once. A check names its context and its key tier's set by 1-based
 * index.
 */
class LimitSets {
    private readonly index = new Map<TierLimit, number>();
    private readonly head: (string | number)[] = [0];
    private readonly contexts = new Map<string, number>();
    private readonly contextArgs: number[] = [];
    private readonly contextKeys: string[] = [];
    private last?: { m: number; t: number; tok0: string; tok1: string; i: number };

    /** The 1-based index of `l`'s set, adding it on first sight. */
    of(l: TierLimit): number {
        let i = this.index.get(l);
        if (i === undefined) {
            i = this.index.size + 1;
            this.index.set(l, i);
            this.head.push(l.requestsPerSecond, l.concurrentRequests, l.tokensPerWindow, l.windowSeconds);
        }
        return i;
    }

    /**
     * The 1-based index of the context of a check with admission keys `fixed` ({@link admissionKeys}), token-window
     * keys `tok` and `limits`, adding it on first sight.
     */
    context(fixed: readonly string[], tok: readonly string[], limits: TierLimits): number {
        const m = this.of(limits.model);
        const t = this.of(limits.team);
        // the usual case, the previous check's context: no key string built
        const last = this.last;
        if (last && last.m === m && last.t === t && last.tok0 === tok[0] && last.tok1 === tok[1]) return last.i;
        // the token keys name the tier ids and the windows
        const key = `${m} ${t} ${tok[0]} ${tok[1]}`;
        let i = this.contexts.get(key);
        if (i === undefined) {
            i = this.contexts.size + 1;
            this.contexts.set(key, i);
            this.contextArgs.push(m, t);
            this.contextKeys.push(fixed[2], tok[0], fixed[5], tok[1]);
        }
        this.last = { m, t, tok0: tok[0], tok1: tok[1], i };
        return i;
    }

    /** The script's ARGV: how many sets, the sets, how many contexts, their sets, then the checks' arguments. */
    args(checks: (string | number)[]): (string | number)[] {
        this.head[0] = this.index.size;
        const out = this.head.concat([this.contexts.size], this.contextArgs);
        for (const a of checks) out.push(a);
        return out;
    }

    /** The script's KEYS: the contexts' keys, then the checks' keys. */
    keys(checks: string[]): string[] {
        if (this.contextKeys.length === 0) return checks;
        const out = this.contextKeys.slice();
        for (const k of checks) out.push(k);
        return out;
    }
}

/** Token-window keys of one `admissionKeys` array, for the windows they were built for. */
interface TokenKeys {
    /** Window start (s) per tier, and the windows' lengths (s) they were built with. */
    starts: number[];
    lengths: number[];
    keys: string[];
}
const tokenKeyCache = new WeakMap<readonly string[], TokenKeys>();

/**
 * The token-window keys of `ids` at `nowMs`, built once per window for callers that keep their
 * `admissionKeys` array (a pair's checks then build no key strings).
 */
function tokenKeysOf(fixed: readonly string[], ids: TierIds, limits: TierLimits, nowMs: number): TokenKeys {
    let c = tokenKeyCache.get(fixed);
    if (!c) {
        c = { starts: [-1, -1, -1], lengths: [0, 0, 0], keys: ["", "", ""] };
        tokenKeyCache.set(fixed, c);
    }
    for (let i = 0; i < 3; i++) {
        const t = TIERS[i];
        const w = limits[t].windowSeconds;
        const start = windowStart(nowMs, w);
        if (start !== c.starts[i] || w !== c.lengths[i]) {
            c.starts[i] = start;
            c.lengths[i] = w;
            c.keys[i] = redisKeys.tokens(t, ids[t], start);
        }
    }
    return c;
}

/**
 * @throws RangeError for a `want` outside 1..MAX_GRANT or a lease token that does not match {@link TOKEN}: what
 * {@link checkAndAcquire} and {@link AdmissionBatcher.check} accept before anything is queued or sent.
 */
function validateCheck(want: number, leaseToken: string): void {
    if (!Number.isInteger(want) || want < 1 || want > MAX_GRANT)
        throw new RangeError(`want must be an integer in 1..${MAX_GRANT}, got ${want}`);
    if (!TOKEN.test(leaseToken)) throw new RangeError(`lease token must match ${TOKEN}, got ${JSON.stringify(leaseToken)}`);
}

/**
 * Appends one check's keys and arguments ({@link CHECK_COUNTERS_LUA} for `counters`, with its limits in `sets`;
 * else {@link CHECK_LIMITS_LUA}). Returns the lease id the check asks for. `want` and `leaseToken` were accepted by
 * {@link validateCheck} when the check was made.
 */
function pushAdmission(
    keys: string[],
    args: (string | number)[],
    fixed: readonly string[],
    ids: TierIds,
    limits: TierLimits,
    leaseToken: string,
    nowMs: number,
    leaseTtlMs: number,
    want: number,
    store: LeaseStore,
    sets?: LimitSets,
): string {
    const bucket = store === "zset" ? 0 : leaseBucket(nowMs, leaseTtlMs);
    if (store === "counters") {
        if (!sets) throw new Error("pushAdmission: the counters store needs its call's limit sets");
        const tok = tokenKeysOf(fixed, ids, limits, nowMs);
        const leaseId = `${HASH_MARKER}${bucket.toString(36)}.${leaseToken}`;
        keys.push(fixed[8], tok.keys[2]);
        args.push(nowMs, leaseId, want, bucket, sets.context(fixed, tok.keys, limits), sets.of(limits.key));
        return leaseId;
    }
    const leaseId = bucket ? `c.${bucket.toString(36)}.${leaseToken}` : leaseToken;
    args.push(nowMs, leaseId, leaseTtlMs, want, bucket);
    for (let i = 0; i < 3; i++) {
        const t = TIERS[i];
        const l = limits[t];
        const start = windowStart(nowMs, l.windowSeconds);
        keys.push(fixed[i * 3], fixed[i * 3 + 1], fixed[i * 3 + 2], redisKeys.tokens(t, ids[t], start));
        args.push(l.requestsPerSecond, l.concurrentRequests, l.tokensPerWindow, (start + l.windowSeconds) * 1000);
    }
    keys.push(bucket ? redisKeys.lease(leaseId) : redisKeys.lease(""));
    return leaseId;
}

/**
 * Settles one queued check with its reply; a reply it cannot read (missing, malformed) rejects that check, so every
 * caller is answered and fails closed.
 */
function answer(
    c: { resolve: (d: LimitDecision) => void; reject: (e: unknown) => void },
    reply: AdmissionReply | undefined,
    leaseId: string,
): void {
    try {
        if (reply === undefined || reply === null) throw new Error("the admission script answered no reply for this check");
        c.resolve(decodeAdmission(reply, leaseId));
    } catch (err) {
        c.reject(err);
    }
}

function decodeAdmission(reply: AdmissionReply, leaseId: string): LimitDecision {
    if (typeof reply === "number") return { allowed: true, leaseId, granted: reply };
    if (reply[0] === 0) return { allowed: true, leaseId: reply[1], granted: Number(reply[2]) };
    return {
        allowed: false,
        tier: TIERS[reply[0] - 1],
        dimension: reply[1] as LimitDimension,
        retryAfterMs: Number(reply[2]),
    };
}

/**
 * Gives back the unused part of a grant of the earlier (`zset`) layout: KEYS, per tier in {@link TIERS}
 * order, the rps key and the concurrency ZSET; ARGV: nowMs, the number of unused slots u, the three tiers' rps
 * intervals (ms, 1000 / rps, as when the grant was taken), then the u unused lease ids. In each tier the
 * leases still held leave the ZSET, and the GCRA arrival time moves back by one interval per lease removed (so
 * giving back twice, or a lease metering already released, returns nothing twice), never before now: a bucket
 * that full has its key deleted. Returns how many ZSET members were removed (3 × u when nothing had expired
 * meanwhile).
 */
export const RETURN_GRANT_LUA = `
local call = redis.call
local now = tonumber(ARGV[1])
local u = tonumber(ARGV[2])
local removed = 0
if u == 0 then return 0 end
for i = 0, 2 do
  local rpsKey = KEYS[i * 2 + 1]
  local n = call('ZREM', KEYS[i * 2 + 2], unpack(ARGV, 6, 5 + u))
  removed = removed + n
  local tat = tonumber(call('GET', rpsKey) or '0')
  if n > 0 and tat > now then
    local back = tat - n * tonumber(ARGV[3 + i])
    if back > now then
      call('SET', rpsKey, string.format('%.3f', back), 'PX', math.ceil(back - now) + 10000)
    else
      call('DEL', rpsKey)
    end
  end
end
return removed
`;

/**
 * Gives back unused counter slots of one grant: KEYS, per tier in {@link TIERS} order, the rps key and the
 * counter HASH, then the marker; ARGV: nowMs, the three tiers' rps intervals (ms), the bucket (ms), then the
 * slot indexes. Counts like {@link RELEASE_COUNTERS_LUA}, and moves each tier's GCRA arrival time back by one
 * interval per lease let go there, as {@link RETURN_GRANT_LUA} does. Returns the leases let go over all tiers.
 */
export const RETURN_COUNTERS_LUA = `
local call = redis.call
local now = tonumber(ARGV[1])
local bucket = ARGV[5]
local m = KEYS[7]
local bits = call('STRLEN', m) * 8
local u = 0
for j = 6, #ARGV do
  local s = tonumber(ARGV[j])
  if s < bits and call('SETBIT', m, s, 0) == 1 then u = u + 1 end
end
if u == 0 then return 0 end
if call('BITCOUNT', m) == 0 then call('DEL', m) end
${giveBackLua("i * 2", "1 + i")}`;

/**
 * Returns `leases`, the unused slots of a grant taken with {@link checkAndAcquire} under `limits`, to every
 * tier: the rps slots they stood for and their concurrency leases ({@link RETURN_COUNTERS_LUA} for counter
 * leases, which must all come from one admission; {@link RETURN_GRANT_LUA} for ZSET leases). Safe to call for
 * leases that already expired or were released (nothing counted twice).
 * @param nowMs caller's clock, ms since the Unix epoch.
 * @returns leases let go, summed over the tiers (3 per lease still held).
 * @throws Error for counter leases of different admissions; the Redis client's error when Redis is
 *   unreachable or times out (the leases then expire by their TTL).
 */
export async function returnGrant(
    redis: Redis,
    ids: TierIds,
    limits: TierLimits,
    leases: readonly string[],
    nowMs: number,
): Promise<number> {
    if (leases.length === 0) return 0;
    const intervals = TIERS.map((t) => 1000 / limits[t].requestsPerSecond);
    const first = parseCounterLease(leases[0]);
    if (!first) {
        const keys = TIERS.flatMap((t) => [redisKeys.rps(t, ids[t]), redisKeys.concurrency(t, ids[t])]);
        return Number(await runScript(redis, RETURN_GRANT_LUA, keys, [nowMs, leases.length, ...intervals, ...leases]));
    }
    const slots = leases.map((l) => {
        const c = parseCounterLease(l);
        if (!c || c.base !== first.base) throw new Error(`returnGrant: ${l} is not a lease of admission ${first.base}`);
        return c.slot;
    });
    return returnSlots(redis, ids, limits, first.base, first.bucketMs, slots, nowMs, intervals);
}

/**
 * {@link returnGrant} for slots `slots` of counter admission `base` (expiry bucket `bucketMs`), without
 * building lease id strings (services/auth/admission.ts keeps a grant as a range of slots).
 */
export async function returnSlots(
    redis: Redis,
    ids: TierIds,
    limits: TierLimits,
    base: string,
    bucketMs: number,
    slots: readonly number[],
    nowMs: number,
    intervals: readonly number[] = TIERS.map((t) => 1000 / limits[t].requestsPerSecond),
): Promise<number> {
    if (slots.length === 0) return 0;
    if (base.startsWith(HASH_MARKER))
        return Number(await runScript(redis, RETURN_HASH_LUA, counterKeys(ids), [nowMs, ...intervals, bucketMs, base, ...slots]));
    const keys: string[] = [];
    for (const t of TIERS) keys.push(redisKeys.rps(t, ids[t]), redisKeys.counters(t, ids[t]));
    keys.push(redisKeys.lease(base));
    return Number(await runScript(redis, RETURN_COUNTERS_LUA, keys, [nowMs, ...intervals, bucketMs, ...slots]));
}

/**
 * The smallest call after which {@link AdmissionBatcher} may hold the next one (its `holdMs`): calls of fewer checks
 * mean the service is not waiting on Redis with requests piling up, and a check then never waits.
 */
export const HOLD_FROM_CHECKS = 4;

interface Queued {
    ids: TierIds;
    fixed: readonly string[];
    limits: TierLimits;
    token: string;
    nowMs: number;
    ttl: number;
    want: number;
    store: LeaseStore;
    resolve: (d: LimitDecision) => void;
    reject: (e: unknown) => void;
}

/**
 * Batches {@link checkAndAcquire} calls into script calls ({@link CHECK_LIMITS_BATCH_LUA}): one Redis write and
 * one reply for many checks instead of one each. Checks made while no batch is in flight go out at the end of
 * the event-loop iteration; checks made while a batch is in flight wait for its reply and then go out together
 * (at most `maxInFlight` batches in flight), so under load a batch carries what arrived during one round trip
 * and Redis runs one script per round trip instead of one per request. A lone check goes out as a plain
 * {@link CHECK_LIMITS_LUA} call. Decisions are the same as calling {@link checkAndAcquire} for each, in call
 * order. When a call fails (Redis unreachable, timeout), every check of its batch rejects with that error
 * (callers fail closed).
 */
export class AdmissionBatcher {
    private queue: Queued[] = [];
    private scheduled = false;
    private inFlight = 0;
    private readonly flushNow = () => {
        this.scheduled = false;
        this.flush();
    };
    /** While set, the next call waits for {@link holdTarget} checks or this timer (see the constructor's `holdMs`). */
    private holding: ReturnType<typeof setTimeout> | undefined;
    private holdTarget = 0;
    private readonly release = () => {
        this.holding = undefined;
        if (this.queue.length && !this.scheduled && this.inFlight < this.maxInFlight) this.flush();
    };
    /** A call of `checks` checks settled: send what queued meanwhile, or hold it for more under load. */
    private settled(checks: number): void {
        this.inFlight--;
        if (!this.queue.length || this.scheduled || this.holding) return;
        const target = Math.min(this.maxBatch, checks + this.queue.length);
        if (this.holdMs > 0 && checks >= HOLD_FROM_CHECKS && this.queue.length < target) {
            this.holdTarget = target;
            this.holding = setTimeout(this.release, this.holdMs);
            return;
        }
        this.flush();
    }

    /**
     * @param maxBatch most checks in one script call (bounds the script's run time inside Redis).
     * @param maxInFlight most batches awaiting their reply at once.
     * @param onCall called once per script call when it settles: its latency (seconds, from the send to the reply),
     *   whether it succeeded, and how many checks it carried (metrics: one observation per call, not per check).
     * @param holdMs under load, how long (ms) the next call may wait for more checks; 0 = never. When a call of at
     *   least {@link HOLD_FROM_CHECKS} checks settles with fewer checks queued than it carried plus those queued, the
     *   next call waits until that many are queued (the requests its answers release come back in a closed loop, and
     *   arrive at the same rate in an open one) or `holdMs` passes, whichever is first. Redis's cost per call (the
     *   wake-up, the socket, the script's set-up and the shared tiers' reads and writes) is then spread over more
     *   checks; a quiet moment (calls of fewer checks) never waits. Decisions are unchanged: the same checks, in the
     *   same order, in one atomic script call.
     */
    constructor(
        private readonly redis: Redis,
        private readonly maxBatch = 64,
        private readonly maxInFlight = 1,
        private readonly onCall?: (seconds: number, ok: boolean, checks: number) => void,
        private readonly holdMs = 0,
    ) {}

    /**
     * Same contract as {@link checkAndAcquire} (a bad `want` or token throws synchronously).
     * @param fixed `admissionKeys(ids)`, when the caller keeps it (saves building the keys per check).
     */
    check(
        ids: TierIds,
        limits: TierLimits,
        leaseToken: string,
        nowMs: number,
        leaseTtlMs: number,
        want = 1,
        store: LeaseStore = "counters",
        fixed: readonly string[] = admissionKeys(ids),
    ): Promise<LimitDecision> {
        validateCheck(want, leaseToken);
        return new Promise((resolve, reject) => {
            this.queue.push({ ids, fixed, limits, token: leaseToken, nowMs, ttl: leaseTtlMs, want, store, resolve, reject });
            if (this.holding) {
                if (this.queue.length < this.holdTarget) return;
                clearTimeout(this.holding);
                this.holding = undefined;
            }
            if (!this.scheduled && this.inFlight < this.maxInFlight) {
                this.scheduled = true;
                setImmediate(this.flushNow);
            }
        });
    }

    /**
     * Reports a settled call to `onCall`, after its checks were settled: a throwing callback (metrics) can neither
     * leave a check unanswered nor reject the call's promise chain.
     */
    private report(sent: number, ok: boolean, checks: number): void {
        if (!this.onCall) return;
        try {
            this.onCall((performance.now() - sent) / 1000, ok, checks);
        } catch {
            // metrics only: the decision stands
        }
    }

    private flush(): void {
        while (this.queue.length && this.inFlight < this.maxInFlight) {
            // One script call carries checks of one store (consecutive ones: call order is kept).
            let size = 1;
            const store = this.queue[0].store;
            while (size < this.queue.length && size < this.maxBatch && this.queue[size].store === store) size++;
            const batch = size === this.queue.length ? this.queue : this.queue.slice(0, size);
            this.queue = batch === this.queue ? [] : this.queue.slice(size);
            const sets = store === "counters" ? new LimitSets() : undefined;
            const keys: string[] = [];
            const checks: (string | number)[] = [];
            const leaseIds: string[] = [];
            for (const c of batch)
                leaseIds.push(pushAdmission(keys, checks, c.fixed, c.ids, c.limits, c.token, c.nowMs, c.ttl, c.want, c.store, sets));
            const args = sets ? sets.args(checks) : checks;
            const callKeys = sets ? sets.keys(keys) : keys;
            this.inFlight++;
            const sent = this.onCall ? performance.now() : 0;
            if (batch.length === 1) {
                const one = batch[0];
                runScript(this.redis, sets ? CHECK_COUNTERS_LUA : CHECK_LIMITS_LUA, callKeys, args)
                    .then(
                        (r) => {
                            answer(one, r as AdmissionReply, leaseIds[0]);
                            this.report(sent, true, 1);
                        },
                        (err: unknown) => {
                            one.reject(err);
                            this.report(sent, false, 1);
                        },
                    )
                    .finally(() => this.settled(1));
                continue;
            }
            runScript(this.redis, sets ? CHECK_COUNTERS_BATCH_LUA : CHECK_LIMITS_BATCH_LUA, callKeys, args)
                .then(
                    (replies) => {
                        const r = Array.isArray(replies) ? (replies as AdmissionReply[]) : [];
                        for (let i = 0; i < batch.length; i++) answer(batch[i], r[i], leaseIds[i]);
                        this.report(sent, true, batch.length);
                    },
                    (err: unknown) => {
                        for (const c of batch) c.reject(err);
                        this.report(sent, false, batch.length);
                    },
                )
                .finally(() => this.settled(batch.length));
        }
    }
}

/**
 * Leases held now in one tier, counted as admission counts them: the counter HASH's live buckets plus the
 * ZSET's unexpired members (tests, operations). Read-only.
 * @param nowMs caller's clock, ms since the Unix epoch.
 */
export async function leasesHeld(redis: Redis, tier: Tier, id: string, nowMs: number): Promise<number> {
    const [fields, zset] = await Promise.all([
        redis.hgetall(redisKeys.counters(tier, id)),
        redis.zcount(redisKeys.concurrency(tier, id), `(${nowMs}`, "+inf"),
    ]);
    let n = 0;
    for (const [f, v] of Object.entries(fields)) if (/^\d+$/.test(f) && Number(f) > nowMs) n += Number(v);
    return n + zset;
}

/**
 * Releases a concurrency lease in all three tiers (called by the metering service when the request's
 * usage event arrives), in either layout ({@link LeaseStore}): a counter lease id (`c.…`) by its marker bit and
 * counters ({@link RELEASE_COUNTERS_LUA}), any other id from the ZSETs. Idempotent: releasing an expired or
 * already released lease is a no-op.
 * @returns how many tiers still held the lease (0-3).
 * @throws the Redis client's error when Redis is unreachable or times out.
 */
export async function releaseLease(redis: Redis, ids: TierIds, leaseId: string): Promise<number> {
    const c = parseCounterLease(leaseId);
    if (!c) return Number(await runScript(redis, RELEASE_LEASE_LUA, concurrencyKeys(ids), [leaseId]));
    const r = (
        c.marker === "hash"
            ? await runScript(redis, RELEASE_HASH_LUA, counterKeys(ids), [c.base, c.bucketMs, c.slot])
            : await runScript(redis, RELEASE_COUNTERS_LUA, [redisKeys.lease(c.base), ...counterKeys(ids)], [c.bucketMs, c.slot])
    ) as number[];
    return r.reduce((a, b) => a + Number(b), 0);
}

/**
 * Adds a request's tokens to the fixed token window of each tier (called by the metering service per usage
 * event). The window is the one containing `nowMs` ({@link windowStart}); each tier has its own window length.
 * @param tokens non-negative integer token count (input + output, as the hub bills it).
 * @param nowMs ms since the Unix epoch that selects the window (the request's end time).
 * @param windowSeconds each tier's `limits.windowSeconds` from the policy bundle.
 * @returns the tiers' totals in their current windows after the addition.
 * @throws RangeError for a negative or non-integer token count; the Redis client's error when Redis fails.
 */
export async function addTokens(
    redis: Redis,
    ids: TierIds,
    tokens: number,
    nowMs: number,
    windowSeconds: Record<Tier, number>,
): Promise<Record<Tier, number>> {
    if (!Number.isInteger(tokens) || tokens < 0) throw new RangeError(`tokens must be a non-negative integer, got ${tokens}`);
    const expireAt = TIERS.map((t) => windowStart(nowMs, windowSeconds[t]) + 2 * windowSeconds[t]);
    const totals = (await runScript(redis, ADD_TOKENS_LUA, tokenKeys(ids, nowMs, windowSeconds), [tokens, ...expireAt])) as number[];
    return { model: Number(totals[0]), team: Number(totals[1]), key: Number(totals[2]) };
}
