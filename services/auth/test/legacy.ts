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
