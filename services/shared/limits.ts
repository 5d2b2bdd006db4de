import { createHash } from "crypto";
import type { Redis } from "ioredis";
import type { Policy } from "./bundle";
import { redisKeys, Tier, TierIds, windowStart } from "./identity";

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
 * The lease ids of a grant of `granted` slots whose first lease is `leaseId`: `leaseId` itself, then
 * `<leaseId>.1` … `<leaseId>.<granted - 1>` (the admission script names the extra leases so).
 */
export function grantLeaseIds(leaseId: string, granted: number): string[] {
    const out = [leaseId];
    for (let i = 1; i < granted; i++) out.push(`${leaseId}.${i}`);
    return out;
}

/**
 * Admission script. KEYS, per tier in {@link TIERS} order: rps key, concurrency ZSET, token-window counter.
 * ARGV: nowMs, leaseId, leaseTtlMs, want, then per tier: requestsPerSecond, concurrentRequests, tokensPerWindow,
 * windowEndMs.
 *
 * Phase 1 checks every tier for one request without writing anything but the removal of already-expired
 * leases; phase 2 commits only when all tiers pass, so a denied request consumes nothing. The six string keys
 * (rps state and token counters) are read with one MGET up front (nothing in phase 1 writes them).
 * - rps: GCRA (a token bucket of capacity max(1, rps) refilled at rps/s). The key holds the theoretical
 *   arrival time (ms, decimal string) and expires 10 s after the bucket would be full again (a missing key
 *   means a full bucket; the slack keeps the state for replicas whose clocks run behind).
 * - concurrency: ZSET member = lease id, score = lease expiry (ms). Members with score ≤ now are expired.
 *   The key expires with its last lease.
 * - tokens: read-only here; the metering service adds usage to the fixed-window counter ({@link addTokens}).
 *
 * Grants (`want` > 1): when the request passes, up to `want - 1` further slots are taken in the same commit, as
 * if that many more requests had arrived at `nowMs`, but never more than 1 / {@link GRANT_SHARE} of the rps
 * or concurrency slots any tier has left after the request's own. `want` = 1 is the plain per-request check.
 *
 * Returns `{0, leaseId, granted}` when allowed (leases named by {@link grantLeaseIds}), or
 * `{tierIndex (1-based), dimension, retryAfterMs}` when denied.
 */
/** Lua function `admit(kb, ab)`: the admission check whose keys start after KEYS[kb] and arguments after ARGV[ab]. */
const ADMIT_LUA_FUNCTION = `
local call = redis.call
local share = ${GRANT_SHARE}
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

/** The admission script described above, for one check. */
export const CHECK_LIMITS_LUA = `${ADMIT_LUA_FUNCTION}
return admit(0, 0)
`;

/** Keys per admission check in {@link CHECK_LIMITS_LUA} (3 per tier). */
const ADMIT_KEYS = 9;
/** ARGV entries per admission check in {@link CHECK_LIMITS_LUA} (4 + 4 per tier). */
const ADMIT_ARGS = 16;

/** Most slots one grant may take ({@link checkAndAcquire} `want`): bounds the script's ZADD arguments. */
export const MAX_GRANT = 512;

/**
 * N admission checks in one script call, run in order, each exactly as {@link CHECK_LIMITS_LUA} would run it
 * alone (the batch is atomic as a whole, which is at least as strong). KEYS: the checks' 9 keys one after the
 * other; ARGV: the checks' 16 arguments one after the other. Returns one reply per check, in order.
 */
export const CHECK_LIMITS_BATCH_LUA = `${ADMIT_LUA_FUNCTION}
local out = {}
for n = 0, #KEYS / ${ADMIT_KEYS} - 1 do
  out[n + 1] = admit(n * ${ADMIT_KEYS}, n * ${ADMIT_ARGS})
end
return out
`;

/** Removes lease ARGV[1] from every concurrency ZSET in KEYS. Returns how many ZSETs held it. */
export const RELEASE_LEASE_LUA = `
local n = 0
for i = 1, #KEYS do
  n = n + redis.call('ZREM', KEYS[i], ARGV[1])
end
return n
`;

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

/** Concurrency ZSET keys of the three tiers, in {@link TIERS} order. */
export function concurrencyKeys(ids: TierIds): string[] {
    return TIERS.map((t) => redisKeys.concurrency(t, ids[t]));
}

/** Token-window counter keys of the three tiers at `nowMs`, in {@link TIERS} order. */
export function tokenKeys(ids: TierIds, nowMs: number, windowSeconds: Record<Tier, number>): string[] {
    return TIERS.map((t) => redisKeys.tokens(t, ids[t], windowStart(nowMs, windowSeconds[t])));
}

/**
 * Checks rps, concurrency and token windows of all three tiers in one atomic script and, only if every tier
 * passes, takes one rps slot and a concurrency lease `leaseId` in each tier, plus up to `want - 1` further
 * slots for a grant ({@link CHECK_LIMITS_LUA}).
 * @param nowMs caller's clock, ms since the Unix epoch.
 * @param leaseTtlMs how long the lease holds if no usage event releases it (ms); must exceed the longest
 *   request the gateway allows (AIGatewayRoute `timeouts.request`).
 * @param want slots to take when the request passes, its own included: 1 (default) for a plain check, up to
 *   {@link MAX_GRANT}; fewer are granted near a limit ({@link GRANT_SHARE}).
 * @throws RangeError for a `want` outside 1..MAX_GRANT; the Redis client's error when Redis is unreachable
 *   or times out (callers fail closed).
 */
export async function checkAndAcquire(
    redis: Redis, ids: TierIds, limits: TierLimits, leaseId: string, nowMs: number, leaseTtlMs: number, want = 1,
): Promise<LimitDecision> {
    const { keys, args } = admissionCall(ids, limits, leaseId, nowMs, leaseTtlMs, want);
    return decodeAdmission(await runScript(redis, CHECK_LIMITS_LUA, keys, args) as AdmissionReply);
}

type AdmissionReply = [number, string, number];

function admissionCall(
    ids: TierIds, limits: TierLimits, leaseId: string, nowMs: number, leaseTtlMs: number, want: number,
): { keys: string[]; args: (string | number)[] } {
    if (!Number.isInteger(want) || want < 1 || want > MAX_GRANT) throw new RangeError(`want must be an integer in 1..${MAX_GRANT}, got ${want}`);
    const keys: string[] = [];
    const args: (string | number)[] = [nowMs, leaseId, leaseTtlMs, want];
    for (const t of TIERS) {
        const l = limits[t];
        const start = windowStart(nowMs, l.windowSeconds);
        keys.push(redisKeys.rps(t, ids[t]), redisKeys.concurrency(t, ids[t]), redisKeys.tokens(t, ids[t], start));
        args.push(l.requestsPerSecond, l.concurrentRequests, l.tokensPerWindow, (start + l.windowSeconds) * 1000);
    }
    return { keys, args };
}

function decodeAdmission(reply: AdmissionReply): LimitDecision {
    if (reply[0] === 0) return { allowed: true, leaseId: reply[1], granted: Number(reply[2]) };
    return {
        allowed: false,
        tier: TIERS[reply[0] - 1],
        dimension: reply[1] as LimitDimension,
        retryAfterMs: Number(reply[2]),
    };
}

/**
 * Gives back the unused part of a grant: KEYS, per tier in {@link TIERS} order, the rps key and the
 * concurrency ZSET; ARGV: nowMs, the number of unused slots u, the three tiers' rps intervals (ms, 1000 / rps,
 * as when the grant was taken), then the u unused lease ids. In each tier the leases still held leave the
 * ZSET, and the GCRA arrival time moves back by one interval per lease removed (so giving back twice, or a
 * lease metering already released, returns nothing twice), never before now: a bucket that full has its key
 * deleted. Returns how many ZSET members were removed (3 × u when nothing had expired meanwhile).
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
 * Returns `leases`, the unused slots of a grant taken with {@link checkAndAcquire} under `limits`, to every
 * tier: the rps slots they stood for and their concurrency leases ({@link RETURN_GRANT_LUA}). Safe to call for
 * leases that already expired (nothing to remove).
 * @param nowMs caller's clock, ms since the Unix epoch.
 * @returns concurrency ZSET members removed (3 per lease still held).
 * @throws the Redis client's error when Redis is unreachable or times out (the leases then expire by their TTL).
 */
export async function returnGrant(redis: Redis, ids: TierIds, limits: TierLimits, leases: readonly string[], nowMs: number): Promise<number> {
    if (leases.length === 0) return 0;
    const keys = TIERS.flatMap((t) => [redisKeys.rps(t, ids[t]), redisKeys.concurrency(t, ids[t])]);
    const intervals = TIERS.map((t) => 1000 / limits[t].requestsPerSecond);
    return Number(await runScript(redis, RETURN_GRANT_LUA, keys, [nowMs, leases.length, ...intervals, ...leases]));
}

/**
 * Batches {@link checkAndAcquire} calls made in the same event-loop iteration into one script call
 * ({@link CHECK_LIMITS_BATCH_LUA}): one Redis write and one reply for all of them instead of one each. A
 * lone check goes out as a plain {@link CHECK_LIMITS_LUA} call. Decisions are the same as calling
 * {@link checkAndAcquire} for each, in call order. When the call fails (Redis unreachable, timeout), every
 * check of the batch rejects with that error (callers fail closed).
 */
export class AdmissionBatcher {
    private queue: { keys: string[]; args: (string | number)[]; resolve: (d: LimitDecision) => void; reject: (e: unknown) => void }[] = [];
    private scheduled = false;

    /** @param maxBatch most checks in one script call (bounds the script's run time inside Redis). */
    constructor(private readonly redis: Redis, private readonly maxBatch = 64) {}

    /** Same contract as {@link checkAndAcquire} (a bad `want` throws synchronously). */
    check(ids: TierIds, limits: TierLimits, leaseId: string, nowMs: number, leaseTtlMs: number, want = 1): Promise<LimitDecision> {
        const { keys, args } = admissionCall(ids, limits, leaseId, nowMs, leaseTtlMs, want);
        return new Promise((resolve, reject) => {
            this.queue.push({ keys, args, resolve, reject });
            if (!this.scheduled) {
                this.scheduled = true;
                setImmediate(() => this.flush());
            }
        });
    }

    private flush(): void {
        this.scheduled = false;
        while (this.queue.length) {
            const batch = this.queue.splice(0, this.maxBatch);
            if (batch.length === 1) {
                const [one] = batch;
                runScript(this.redis, CHECK_LIMITS_LUA, one.keys, one.args)
                    .then((r) => one.resolve(decodeAdmission(r as AdmissionReply)), one.reject);
                continue;
            }
            const keys: string[] = [];
            const args: (string | number)[] = [];
            for (const c of batch) { keys.push(...c.keys); args.push(...c.args); }
            runScript(this.redis, CHECK_LIMITS_BATCH_LUA, keys, args).then(
                (replies) => batch.forEach((c, i) => c.resolve(decodeAdmission((replies as AdmissionReply[])[i]))),
                (err: unknown) => batch.forEach((c) => c.reject(err)),
            );
        }
    }
}

/**
 * Releases a concurrency lease in all three tiers (called by the metering service when the request's
 * usage event arrives). Idempotent: releasing an expired or already released lease is a no-op.
 * @returns how many tiers still held the lease (0-3).
 * @throws the Redis client's error when Redis is unreachable or times out.
 */
export async function releaseLease(redis: Redis, ids: TierIds, leaseId: string): Promise<number> {
    return Number(await runScript(redis, RELEASE_LEASE_LUA, concurrencyKeys(ids), [leaseId]));
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
    redis: Redis, ids: TierIds, tokens: number, nowMs: number, windowSeconds: Record<Tier, number>,
): Promise<Record<Tier, number>> {
    if (!Number.isInteger(tokens) || tokens < 0) throw new RangeError(`tokens must be a non-negative integer, got ${tokens}`);
    const expireAt = TIERS.map((t) => windowStart(nowMs, windowSeconds[t]) + 2 * windowSeconds[t]);
    const totals = await runScript(redis, ADD_TOKENS_LUA, tokenKeys(ids, nowMs, windowSeconds), [tokens, ...expireAt]) as number[];
    return { model: Number(totals[0]), team: Number(totals[1]), key: Number(totals[2]) };
}
