import { Redis } from "ioredis";
import { describe, expect, it } from "vitest";
import { redisPerFile } from "./test/redis-per-file";
import { redisKeys, type TierIds, windowStart } from "../shared/identity";
import {
    addTokens,
    AdmissionBatcher,
    HOLD_FROM_CHECKS,
    checkAndAcquire,
    GRANT_SHARE,
    grantLeaseIds,
    LEASE_BUCKET_MS,
    leaseBucket,
    leasesHeld,
    type LimitDecision,
    parseCounterLease,
    releaseLease,
    returnGrant,
    type TierLimit,
    type TierLimits,
} from "../shared/limits";
import { type RedisServer, UNLIMITED } from "./test/harness";

/** services/shared/limits.ts against a real redis-server: the scripts the auth and metering services share. */

const ids: TierIds = { model: "m", team: "acme/core", key: "k1" };
const T0 = Math.ceil(Date.now() / 3_600_000) * 3_600_000 + 3_600_000;
const TTL = 30_000;
const limits = (o: Partial<Record<keyof TierLimits, Partial<TierLimit>>> = {}): TierLimits => ({
    model: { ...UNLIMITED, ...o.model },
    team: { ...UNLIMITED, ...o.team },
    key: { ...UNLIMITED, ...o.key },
});

let server: RedisServer;
let redis: Redis;
const tiers = ["model", "team", "key"] as const;
/** The counter lease id `checkAndAcquire` gives token `token` at `now`. */
const leaseOf = (token: string, now = T0) => `h.${leaseBucket(now, TTL).toString(36)}.${token}`;
/** Leases each tier holds at `now`. */
const heldAll = (now = T0) => Promise.all(tiers.map((t) => leasesHeld(redis, t, ids[t], now)));

redisPerFile((s, client) => {
    server = s;
    redis = client;
});

describe("checkAndAcquire", () => {
    it("takes a lease in all three tiers as counters in its expiry bucket, expiring each HASH with its last bucket", async () => {
        const d = await checkAndAcquire(redis, ids, limits(), "lease-1", T0, TTL);
        const bucket = leaseBucket(T0, TTL);
        expect(bucket).toBe(T0 + TTL);
        expect(d).toEqual({ allowed: true, leaseId: `h.${bucket.toString(36)}.lease-1`, granted: 1 });
        expect(parseCounterLease(d.allowed ? d.leaseId : "")).toEqual({
            base: d.allowed && d.leaseId,
            bucketMs: bucket,
            slot: 0,
            marker: "hash",
        });
        for (const t of tiers) {
            const k = redisKeys.counters(t, ids[t]);
            expect(await redis.hgetall(k)).toMatchObject({ n: "1", [bucket]: "1", e: String(bucket) });
            // The HASH holds the rps state too (`t`), and lives until its last bucket and 10 s past that state.
            expect(await redis.pexpiretime(k)).toBe(bucket + 10_000);
            // No ZSET member per lease.
            expect(await redis.exists(redisKeys.concurrency(t, ids[t]))).toBe(0);
        }
        // One marker per admission, one bit per slot (most significant first), a field of the key tier's HASH: no
        // key of its own per admission.
        expect(await redis.hgetBuffer(redisKeys.counters("key", ids.key), leaseOf("lease-1"))).toEqual(Buffer.from([0x80]));
        expect(await redis.hexists(redisKeys.counters("team", ids.team), leaseOf("lease-1"))).toBe(0);
        expect(await redis.dbsize()).toBe(3);
        // A lease's expiry is rounded up to the next bucket boundary: it never stops counting before its TTL.
        expect(leaseBucket(T0 + 1, TTL)).toBe(T0 + TTL + LEASE_BUCKET_MS);
    });

    it("a second lease in the same bucket is two counter increments; a later bucket moves the HASH's expiry", async () => {
        await checkAndAcquire(redis, ids, limits(), "a", T0 + 1, TTL);
        await checkAndAcquire(redis, ids, limits(), "b", T0 + 10, TTL);
        await checkAndAcquire(redis, ids, limits(), "c", T0 + 1_001, TTL);
        const k = redisKeys.counters("key", ids.key);
        expect(await redis.hgetall(k)).toMatchObject({
            n: "3",
            [T0 + TTL + 1_000]: "2",
            [T0 + TTL + 2_000]: "1",
            e: String(T0 + TTL + 1_000),
        });
        expect(await redis.pexpiretime(k)).toBeGreaterThanOrEqual(T0 + TTL + 2_000);
        expect(await heldAll(T0 + 1_000)).toEqual([3, 3, 3]);
    });

    it("rps is a token bucket of capacity max(1, rps) refilled at rps per second, also below 1 rps", async () => {
        const l = limits({ team: { requestsPerSecond: 0.5 } });
        expect((await checkAndAcquire(redis, ids, l, "a", T0, TTL)).allowed).toBe(true);
        // The limiter state lives until 10 s after the bucket would be full again (no state = a full bucket).
        expect(await redis.hget(redisKeys.counters("team", ids.team), "t")).toBe(`${T0 + 2_000}.000`);
        expect(await redis.pexpiretime(redisKeys.counters("team", ids.team))).toBeGreaterThanOrEqual(T0 + 12_000);
        expect(await checkAndAcquire(redis, ids, l, "b", T0 + 1_000, TTL)).toEqual({
            allowed: false,
            tier: "team",
            dimension: "rps",
            retryAfterMs: 1_000,
        });
        expect((await checkAndAcquire(redis, ids, l, "c", T0 + 2_000, TTL)).allowed).toBe(true);

        await redis.flushall();
        const burst = limits({ key: { requestsPerSecond: 5 } });
        const results = [];
        for (let i = 0; i < 7; i++) results.push((await checkAndAcquire(redis, ids, burst, `l${i}`, T0, TTL)).allowed);
        expect(results).toEqual([true, true, true, true, true, false, false]);
        expect((await checkAndAcquire(redis, ids, burst, "x", T0 + 200, TTL)).allowed).toBe(true);
    });

    it("checks tiers in order and reports the first that is full", async () => {
        const l = limits({ model: { concurrentRequests: 1 }, key: { concurrentRequests: 1 } });
        await checkAndAcquire(redis, ids, l, "a", T0, TTL);
        expect(await checkAndAcquire(redis, ids, l, "b", T0 + 5_000, TTL)).toEqual({
            allowed: false,
            tier: "model",
            dimension: "concurrency",
            retryAfterMs: TTL - 5_000,
        });
    });

    it("a denial writes nothing: no rps slot, no lease, in any tier", async () => {
        // Only the last tier (key) is full, so the model and team tiers pass phase 1 and would be charged by
        // a non-atomic implementation.
        const l = limits({ model: { requestsPerSecond: 1 }, key: { tokensPerWindow: 10 } });
        await addTokens(redis, ids, 10, T0, { model: 60, team: 60, key: 60 });
        expect(await checkAndAcquire(redis, ids, l, "a", T0, TTL)).toMatchObject({ allowed: false, tier: "key", dimension: "tokens" });
        const state = tiers.flatMap((t) => [redisKeys.rps(t, ids[t]), redisKeys.concurrency(t, ids[t]), redisKeys.counters(t, ids[t])]);
        expect(await redis.exists(...state)).toBe(0);
        // The model tier's single rps slot is still there once the key tier has room again.
        await redis.del(redisKeys.tokens("key", ids.key, windowStart(T0, 60)));
        expect((await checkAndAcquire(redis, ids, l, "b", T0, TTL)).allowed).toBe(true);
        expect((await checkAndAcquire(redis, ids, l, "c", T0, TTL)).allowed).toBe(false);
    });

    it("token windows: denies once the tier's counter reaches its limit, until the next window", async () => {
        const l = limits({ team: { tokensPerWindow: 100, windowSeconds: 3600 } });
        await addTokens(redis, ids, 100, T0 + 10_000, { model: 60, team: 3600, key: 60 });
        expect(await checkAndAcquire(redis, ids, l, "a", T0 + 20_000, TTL)).toEqual({
            allowed: false,
            tier: "team",
            dimension: "tokens",
            retryAfterMs: 3_580_000,
        });
        expect((await checkAndAcquire(redis, ids, l, "b", T0 + 3_600_000, TTL)).allowed).toBe(true);
    });

    it("reloads its script after SCRIPT FLUSH (Redis restart or failover)", async () => {
        expect((await checkAndAcquire(redis, ids, limits(), "a", T0, TTL)).allowed).toBe(true);
        await redis.script("FLUSH");
        expect((await checkAndAcquire(redis, ids, limits(), "b", T0, TTL)).allowed).toBe(true);
    });
});

describe("grants (checkAndAcquire with want > 1)", () => {
    it("takes `want` slots in every tier in one commit, as that many requests arriving together would", async () => {
        const l = limits({ team: { requestsPerSecond: 100 } });
        const d = await checkAndAcquire(redis, ids, l, "g", T0, TTL, 5);
        const g = leaseOf("g");
        expect(d).toEqual({ allowed: true, leaseId: g, granted: 5 });
        expect(grantLeaseIds(g, 5)).toEqual([g, `${g}.1`, `${g}.2`, `${g}.3`, `${g}.4`]);
        expect(grantLeaseIds(g, 5).map((x) => parseCounterLease(x)?.slot)).toEqual([0, 1, 2, 3, 4]);
        expect(await heldAll()).toEqual([5, 5, 5]);
        // GCRA: five requests at T0 move the team's arrival time by 5 x 1000/100 ms.
        expect(await redis.hget(redisKeys.counters("team", ids.team), "t")).toBe(`${T0 + 50}.000`);
        // The same state as five single checks at T0.
        await redis.flushall();
        for (let i = 0; i < 5; i++) await checkAndAcquire(redis, ids, l, `g${i}`, T0, TTL);
        expect(await redis.hget(redisKeys.counters("team", ids.team), "t")).toBe(`${T0 + 50}.000`);
    });

    it(`never takes more than 1/${GRANT_SHARE} of what any tier has left beyond the request's own slot`, async () => {
        // key: 9 concurrent, nothing held -> 1 + floor(8 / 4) = 3; team: 21 rps -> 1 + floor(20 / 4) = 6.
        const l = limits({ key: { concurrentRequests: 9 }, team: { requestsPerSecond: 21 } });
        expect(await checkAndAcquire(redis, ids, l, "a", T0, TTL, 100)).toMatchObject({ allowed: true, granted: 3 });
        // 6 of 9 left -> 1 + floor(5 / 4) = 2.
        expect(await checkAndAcquire(redis, ids, l, "b", T0, TTL, 100)).toMatchObject({ allowed: true, granted: 2 });
        // 4 left -> 1 + floor(3 / 4) = 1: near the limit a grant is just the request's own slot.
        expect(await checkAndAcquire(redis, ids, l, "c", T0, TTL, 100)).toMatchObject({ allowed: true, granted: 1 });
        expect(await checkAndAcquire(redis, ids, l, "d", T0, TTL, 100)).toMatchObject({ allowed: true, granted: 1 });
        expect(await checkAndAcquire(redis, ids, l, "e", T0, TTL, 100)).toMatchObject({ allowed: true, granted: 1 });
        expect(await checkAndAcquire(redis, ids, l, "f", T0, TTL, 100)).toMatchObject({ allowed: true, granted: 1 });
        // 9 leases held: exactly the limit, never more.
        expect(await leasesHeld(redis, "key", ids.key, T0)).toBe(9);
        expect(await checkAndAcquire(redis, ids, l, "g", T0, TTL, 100)).toMatchObject({
            allowed: false,
            tier: "key",
            dimension: "concurrency",
        });
    });

    it("a denied grant request is the same denial as a single check and writes nothing", async () => {
        const l = limits({ model: { requestsPerSecond: 1 }, key: { tokensPerWindow: 10 } });
        await addTokens(redis, ids, 10, T0, { model: 60, team: 60, key: 60 });
        const single = await checkAndAcquire(redis, ids, l, "a", T0, TTL);
        expect(await checkAndAcquire(redis, ids, l, "a", T0, TTL, 50)).toEqual(single);
        const state = tiers.flatMap((t) => [redisKeys.rps(t, ids[t]), redisKeys.concurrency(t, ids[t]), redisKeys.counters(t, ids[t])]);
        expect(await redis.exists(...state, redisKeys.lease(leaseOf("a")))).toBe(0);
    });

    it("returnGrant gives unused slots back: leases leave every tier's counters and the rps arrival time moves back", async () => {
        const l = limits({ team: { requestsPerSecond: 100 } });
        await checkAndAcquire(redis, ids, l, "g", T0, TTL, 5);
        const all = grantLeaseIds(leaseOf("g"), 5);
        const unused = all.slice(2);
        expect(await returnGrant(redis, ids, l, unused, T0 + 10)).toBe(9);
        expect(await heldAll(T0 + 10)).toEqual([2, 2, 2]);
        expect(await redis.hget(redisKeys.counters("team", ids.team), "t")).toBe(`${T0 + 20}.000`);
        // Giving back twice gives nothing back twice (rps slots are given back per lease still held).
        expect(await returnGrant(redis, ids, l, unused, T0 + 10)).toBe(0);
        expect(await redis.hget(redisKeys.counters("team", ids.team), "t")).toBe(`${T0 + 20}.000`);
        // A slot metering already released is not given back again either.
        expect(await releaseLease(redis, ids, all[1])).toBe(3);
        expect(await returnGrant(redis, ids, l, all.slice(0, 2), T0 + 15)).toBe(3);
        expect(await heldAll(T0 + 15)).toEqual([0, 0, 0]);
        // An arrival time that would move before now leaves a full bucket: the key is deleted.
        expect(await redis.hexists(redisKeys.counters("team", ids.team), "t")).toBe(0);
    });

    it("returnGrant of the earlier ZSET layout still gives ZSET leases back", async () => {
        const l = limits({ team: { requestsPerSecond: 100 } });
        await checkAndAcquire(redis, ids, l, "g", T0, TTL, 5, "zset");
        expect(await redis.zrange(redisKeys.concurrency("key", ids.key), "0", "-1")).toEqual(grantLeaseIds("g", 5));
        expect(await returnGrant(redis, ids, l, grantLeaseIds("g", 5).slice(2), T0 + 10)).toBe(9);
        for (const t of tiers) expect(await redis.zrange(redisKeys.concurrency(t, ids[t]), "0", "-1")).toEqual(["g", "g.1"]);
        // The zset store keeps the rps state in the earlier layout's key too, where old replicas read it.
        expect(await redis.get(redisKeys.rps("team", ids.team))).toBe(`${T0 + 20}.000`);
    });

    it("refuses a want outside 1..MAX_GRANT", async () => {
        await expect(checkAndAcquire(redis, ids, limits(), "x", T0, TTL, 0)).rejects.toThrow(RangeError);
        await expect(checkAndAcquire(redis, ids, limits(), "x", T0, TTL, 513)).rejects.toThrow(RangeError);
    });
});

describe("AdmissionBatcher", () => {
    // The auth service sends the checks of one event-loop iteration as one script call; every decision and
    // every write must be what one checkAndAcquire per request, in arrival order, would give.
    const tight = limits({ team: { concurrentRequests: 3 }, key: { requestsPerSecond: 4 } });
    const other: TierIds = { model: "m", team: "acme/other", key: "k2" };

    it("decides a same-tick batch exactly like sequential checks, in order, and writes the same state", async () => {
        const batcher = new AdmissionBatcher(redis);
        await redis.config("RESETSTAT");
        const batched = await Promise.all(
            Array.from({ length: 6 }, (_, i) => batcher.check(i % 2 ? other : ids, tight, `lease-${i}`, T0 + i, TTL)),
        );
        const batchState = await Promise.all(
            tiers.flatMap((t) =>
                [ids, other].flatMap((x) => [redis.hgetall(redisKeys.counters(t, x[t])), redis.get(redisKeys.rps(t, x[t]))]),
            ),
        );
        // One script call for the six checks (EVALSHA, plus one EVAL when the script was not cached yet).
        const calls = [...(await redis.info("commandstats")).matchAll(/cmdstat_eval(?:sha)?:calls=(\d+)/g)].reduce(
            (n, m) => n + Number(m[1]),
            0,
        );
        expect(calls).toBeLessThanOrEqual(2);
        await redis.flushall();
        const sequential: LimitDecision[] = [];
        for (let i = 0; i < 6; i++) sequential.push(await checkAndAcquire(redis, i % 2 ? other : ids, tight, `lease-${i}`, T0 + i, TTL));
        const seqState = await Promise.all(
            tiers.flatMap((t) =>
                [ids, other].flatMap((x) => [redis.hgetall(redisKeys.counters(t, x[t])), redis.get(redisKeys.rps(t, x[t]))]),
            ),
        );
        expect(batched).toEqual(sequential);
        expect(batchState).toEqual(seqState);
        // The limits really bit: team "acme/core" admits 3 concurrent requests, the fourth of them is denied.
        expect(batched.map((d) => d.allowed)).toEqual([true, true, true, true, true, true]);
        const more = await Promise.all([0, 1].map((i) => batcher.check(ids, tight, `late-${i}`, T0 + 10, TTL)));
        expect(more[0]).toMatchObject({ allowed: false, tier: "team", dimension: "concurrency" });
    });

    it("checks with different limits in one batch: each tier is held to its own check's limits, as sequential checks", async () => {
        // Limits are sent once per distinct object per call and named by index: a mix of objects, some equal in value.
        const perCheck = [
            limits({ key: { concurrentRequests: 1 }, model: { concurrentRequests: 4 } }),
            limits({ key: { concurrentRequests: 2 }, model: { concurrentRequests: 4 } }),
            limits({ key: { concurrentRequests: 5, tokensPerWindow: 5, windowSeconds: 3600 } }),
            tight,
        ];
        const at = (i: number) => ({ who: i % 2 ? other : ids, l: perCheck[i % perCheck.length] });
        const run = async (batched: boolean) => {
            await redis.flushall();
            await addTokens(redis, ids, 5, T0, { model: 60, team: 60, key: 3600 });
            const batcher = new AdmissionBatcher(redis);
            const ds = batched
                ? await Promise.all(Array.from({ length: 8 }, (_, i) => batcher.check(at(i).who, at(i).l, `m${i}`, T0 + i, TTL)))
                : await (async () => {
                      const out: LimitDecision[] = [];
                      for (let i = 0; i < 8; i++) out.push(await checkAndAcquire(redis, at(i).who, at(i).l, `m${i}`, T0 + i, TTL));
                      return out;
                  })();
            const state = await Promise.all(tiers.flatMap((t) => [ids, other].map((x) => redis.hgetall(redisKeys.counters(t, x[t])))));
            return { ds, state };
        };
        const batched = await run(true);
        expect(batched).toEqual(await run(false));
        expect(batched.ds.map((d) => (d.allowed ? "ok" : `${d.tier}/${d.dimension}`))).toEqual([
            "ok",
            "ok",
            "key/tokens",
            "ok",
            "key/concurrency",
            "key/concurrency",
            "key/tokens",
            "ok",
        ]);
    });

    it("a batch in which buckets expire sweeps them once and decides and writes exactly as sequential checks", async () => {
        const l = limits({ team: { concurrentRequests: 3 } });
        const run = async (batched: boolean) => {
            await redis.flushall();
            for (let i = 0; i < 3; i++) await checkAndAcquire(redis, ids, l, `pre${i}`, T0, TTL);
            const at = (i: number) => T0 + TTL + i; // every earlier lease has expired by then
            const batcher = new AdmissionBatcher(redis);
            const ds = batched
                ? await Promise.all(Array.from({ length: 7 }, (_, i) => batcher.check(i % 2 ? other : ids, l, `b${i}`, at(i), TTL)))
                : await (async () => {
                      const out: LimitDecision[] = [];
                      for (let i = 0; i < 7; i++) out.push(await checkAndAcquire(redis, i % 2 ? other : ids, l, `b${i}`, at(i), TTL));
                      return out;
                  })();
            const state = await Promise.all(tiers.flatMap((t) => [ids, other].map((x) => redis.hgetall(redisKeys.counters(t, x[t])))));
            return { ds, state };
        };
        const batched = await run(true);
        const sequential = await run(false);
        expect(batched).toEqual(sequential);
        // acme/core's fourth check is refused: the three swept leases made room for exactly three.
        expect(batched.ds.map((d) => d.allowed)).toEqual([true, true, true, true, true, true, false]);
        expect(await leasesHeld(redis, "team", ids.team, T0 + TTL + 10)).toBe(3);
    });

    it("a key tier's sweep is written also when the check is then denied: its expired leases leave the count at once", async () => {
        const l = limits({ key: { concurrentRequests: 2, tokensPerWindow: 10, windowSeconds: 3600 } });
        for (let i = 0; i < 2; i++) expect((await checkAndAcquire(redis, ids, l, `pre${i}`, T0, TTL)).allowed).toBe(true);
        expect(await checkAndAcquire(redis, ids, l, "full", T0 + 1, TTL)).toMatchObject({ allowed: false, dimension: "concurrency" });
        await addTokens(redis, ids, 10, T0 + TTL, { model: 60, team: 60, key: 3600 });
        // Past the leases' bucket: the key tier sweeps them, then refuses for tokens; the sweep stays written.
        const batcher = new AdmissionBatcher(redis);
        const ds = await Promise.all([0, 1].map((i) => batcher.check(ids, l, `late${i}`, T0 + TTL + 1_000, TTL)));
        expect(ds).toEqual([0, 1].map(() => expect.objectContaining({ allowed: false, tier: "key", dimension: "tokens" })));
        const h = await redis.hgetall(redisKeys.counters("key", ids.key));
        expect(h.n).toBe("0");
        expect(Object.keys(h).filter((f) => f === "e" || /^\d+$/.test(f) || f.startsWith("h."))).toEqual([]);
        expect(await leasesHeld(redis, "key", ids.key, T0 + TTL + 1_000)).toBe(0);
    });

    it("a failed call rejects every check of the batch (callers fail closed)", async () => {
        const down = new Redis(`redis://127.0.0.1:${server.port}`, { lazyConnect: true, enableOfflineQueue: false });
        down.on("error", () => undefined);
        const calls: [boolean, number][] = [];
        const batcher = new AdmissionBatcher(down, 64, 1, (_s, ok, checks) => calls.push([ok, checks]));
        const r = await Promise.allSettled([1, 2, 3].map((i) => batcher.check(ids, limits(), `x-${i}`, T0, TTL)));
        expect(r.map((x) => x.status)).toEqual(["rejected", "rejected", "rejected"]);
        // the failed call is reported once, with the checks it carried (the service's latency metric)
        expect(calls).toEqual([[false, 3]]);
        down.disconnect();
    });

    it("reports each script call once, with its latency and the checks it carried, not once per check", async () => {
        const calls: [number, boolean, number][] = [];
        const batcher = new AdmissionBatcher(redis, 4, 1, (s, ok, checks) => calls.push([s, ok, checks]));
        // six checks in one tick with at most four per call: two calls, of four and of two
        const ds = await Promise.all(Array.from({ length: 6 }, (_, i) => batcher.check(ids, limits(), `c-${i}`, T0 + i, TTL)));
        expect(ds.every((d) => d.allowed)).toBe(true);
        expect(calls.map(([, ok, n]) => [ok, n])).toEqual([
            [true, 4],
            [true, 2],
        ]);
        for (const [s] of calls) expect(s).toBeGreaterThan(0);
        expect(await leasesHeld(redis, "key", ids.key, T0 + 10)).toBe(6);
        // A callback that throws (metrics) neither leaves a check unanswered nor fails it.
        const throwing = new AdmissionBatcher(redis, 4, 1, () => {
            throw new Error("metrics broke");
        });
        const more = await Promise.all([0, 1].map((i) => throwing.check(ids, limits(), `t-${i}`, T0 + 20, TTL)));
        expect(more.every((d) => d.allowed)).toBe(true);
        // the one-check call too, and a failed call: the check is answered (rejected), nothing goes unhandled
        expect(await throwing.check(ids, limits(), "t-one", T0 + 21, TTL)).toMatchObject({ allowed: true });
        const down = new Redis(`redis://127.0.0.1:${server.port}`, { lazyConnect: true, enableOfflineQueue: false });
        down.on("error", () => undefined);
        const failing = new AdmissionBatcher(down, 4, 1, () => {
            throw new Error("metrics broke");
        });
        await expect(failing.check(ids, limits(), "t-down", T0 + 22, TTL)).rejects.toThrow();
        await expect(Promise.all([1, 2].map((i) => failing.check(ids, limits(), `t-down-${i}`, T0 + 22, TTL)))).rejects.toThrow();
        down.disconnect();
    });

    it("a reply it cannot read rejects the checks it misses, and answers the rest", async () => {
        // a script answering fewer replies than checks (a script of another release, a proxy cutting the reply short)
        const short = Object.create(redis) as typeof redis;
        short.evalsha = (async (...a: Parameters<typeof redis.evalsha>) =>
            ((await redis.evalsha(...a)) as unknown[]).slice(0, 1)) as typeof redis.evalsha;
        const batcher = new AdmissionBatcher(short);
        const r = await Promise.allSettled([0, 1, 2].map((i) => batcher.check(ids, limits(), `s-${i}`, T0 + 30, TTL)));
        expect(r.map((x) => x.status)).toEqual(["fulfilled", "rejected", "rejected"]);
        expect((r[1] as PromiseRejectedResult).reason.message).toMatch(/answered no reply for this check/);
    });

    describe("holding the next call under load (holdMs)", () => {
        /** A batcher whose script calls' sizes are recorded, holding up to `holdMs`. */
        const recorded = (holdMs: number) => {
            const sizes: number[] = [];
            const batcher = new AdmissionBatcher(redis, undefined, undefined, (_s, _ok, checks) => sizes.push(checks), holdMs);
            return { batcher, sizes };
        };
        const turn = () => new Promise((r) => setImmediate(r));
        const check = (b: AdmissionBatcher, token: string) => b.check(ids, limits(), token, T0 + 40, TTL);

        it(`after a call of ${HOLD_FROM_CHECKS} or more checks, the next call waits until it carries as many as that one plus those queued meanwhile`, async () => {
            // a timer that never fires within the test: only the count can release the hold
            const { batcher, sizes } = recorded(60_000);
            const first = [0, 1, 2, 3].map((i) => check(batcher, `h-${i}`));
            await turn(); // the call of four is sent at the end of this event-loop turn
            const queued = [4, 5].map((i) => check(batcher, `h-${i}`)); // arrive while it is in flight
            let answered = 0;
            for (const p of queued) p.then(() => answered++);
            expect((await Promise.all(first)).every((d) => d.allowed)).toBe(true);
            for (let i = 0; i < 5; i++) await turn();
            // held: four answered plus two queued = six wanted, two there
            expect(answered).toBe(0);
            expect(sizes).toEqual([4]);
            const more = [6, 7, 8, 9].map((i) => check(batcher, `h-${i}`));
            expect((await Promise.all([...queued, ...more])).every((d) => d.allowed)).toBe(true);
            expect(sizes).toEqual([4, 6]);
        });

        it("a hold ends after holdMs with what is queued", async () => {
            const { batcher, sizes } = recorded(5);
            const first = [0, 1, 2, 3].map((i) => check(batcher, `e-${i}`));
            await turn();
            const late = check(batcher, "e-4");
            await Promise.all(first);
            expect((await late).allowed).toBe(true);
            expect(sizes).toEqual([4, 1]);
        });

        it(`at lower load (calls of fewer than ${HOLD_FROM_CHECKS} checks) a check never waits, whatever holdMs`, async () => {
            const { batcher, sizes } = recorded(60_000);
            const first = [0, 1].map((i) => check(batcher, `q-${i}`));
            await turn();
            const next = check(batcher, "q-2");
            await Promise.all(first);
            expect((await next).allowed).toBe(true);
            expect(sizes).toEqual([2, 1]);
        });

        it("holdMs 0 (the default) never holds", async () => {
            const { batcher, sizes } = recorded(0);
            const first = [0, 1, 2, 3, 4].map((i) => check(batcher, `z-${i}`));
            await turn();
            const next = check(batcher, "z-5");
            await Promise.all(first);
            expect((await next).allowed).toBe(true);
            expect(sizes).toEqual([5, 1]);
        });
    });
});

describe("releaseLease", () => {
    it("removes the lease from all three tiers and is idempotent", async () => {
        const l = limits({ team: { concurrentRequests: 1 } });
        await checkAndAcquire(redis, ids, l, "a", T0, TTL);
        expect((await checkAndAcquire(redis, ids, l, "b", T0, TTL)).allowed).toBe(false);
        expect(await releaseLease(redis, ids, leaseOf("a"))).toBe(3);
        expect(await releaseLease(redis, ids, leaseOf("a"))).toBe(0);
        expect(await heldAll()).toEqual([0, 0, 0]);
        expect((await checkAndAcquire(redis, ids, l, "b", T0, TTL)).allowed).toBe(true);
        // Neither an unknown lease nor a slot past the admission's grant counts anything.
        expect(await releaseLease(redis, ids, leaseOf("zz"))).toBe(0);
        expect(await releaseLease(redis, ids, `${leaseOf("b")}.9`)).toBe(0);
        expect(await heldAll()).toEqual([1, 1, 1]);
    });

    it("a marker holds exactly its admission's slots and leaves the HASH with the last one released", async () => {
        const kc = redisKeys.counters("key", ids.key);
        const g = await checkAndAcquire(redis, ids, limits(), "g", T0, TTL, 10);
        expect(g).toMatchObject({ allowed: true, granted: 10 });
        expect(await redis.hgetBuffer(kc, leaseOf("g"))).toEqual(Buffer.from([0xff, 0xc0]));
        await checkAndAcquire(redis, ids, limits(), "a", T0, TTL);
        // Slot 3 of a single admission, slot 10 of a grant of 10: no such lease, nothing counted.
        expect(await releaseLease(redis, ids, `${leaseOf("a")}.3`)).toBe(0);
        expect(await releaseLease(redis, ids, `${leaseOf("g")}.10`)).toBe(0);
        expect(await releaseLease(redis, ids, leaseOf("a"))).toBe(3);
        expect(await redis.hexists(kc, leaseOf("a"))).toBe(0);
        for (const lease of grantLeaseIds(leaseOf("g"), 10)) expect(await releaseLease(redis, ids, lease)).toBe(3);
        expect(await heldAll()).toEqual([0, 0, 0]);
        expect(Object.keys(await redis.hgetall(kc)).filter((f) => f.startsWith("h."))).toEqual([]);
    });

    it("a bucket whose last lease is released leaves the HASH at once; the next check counts what is still held", async () => {
        const l = limits({ team: { concurrentRequests: 2 } });
        await checkAndAcquire(redis, ids, l, "a", T0, TTL);
        await checkAndAcquire(redis, ids, l, "b", T0 + 1_000, TTL);
        const g = await checkAndAcquire(redis, ids, limits(), "g", T0 + 2_000, TTL, 3);
        expect(await releaseLease(redis, ids, leaseOf("a"))).toBe(3);
        expect(await returnGrant(redis, ids, limits(), grantLeaseIds(g.allowed ? g.leaseId : "", 3), T0 + 2_000)).toBe(9);
        for (const t of tiers) {
            const h = await redis.hgetall(redisKeys.counters(t, ids[t]));
            // Only b's bucket is left; `e` still names a's (it is recomputed by the sweep once it is due).
            expect(Object.keys(h).filter((f) => /^\d+$/.test(f))).toEqual([String(leaseBucket(T0 + 1_000, TTL))]);
            expect(h).toMatchObject({ n: "1", e: String(leaseBucket(T0, TTL)) });
        }
        // At a's bucket the sweep finds nothing to take from n: b still counts, one slot is free.
        const at = leaseBucket(T0, TTL);
        expect((await checkAndAcquire(redis, ids, l, "c", at, TTL)).allowed).toBe(true);
        expect(await checkAndAcquire(redis, ids, l, "d", at, TTL)).toMatchObject({ allowed: false, tier: "team" });
        expect(await heldAll(at)).toEqual([2, 2, 2]);
        expect(await redis.hget(redisKeys.counters("team", ids.team), "e")).toBe(String(leaseBucket(T0 + 1_000, TTL)));
    });

    it("the markers of leases never released leave the key tier's HASH with their bucket", async () => {
        const kc = redisKeys.counters("key", ids.key);
        for (const t of ["x", "y", "z"]) await checkAndAcquire(redis, ids, limits(), t, T0, TTL);
        await checkAndAcquire(redis, ids, limits(), "w", T0 + TTL - 1, TTL);
        expect(Object.keys(await redis.hgetall(kc)).filter((f) => f.startsWith("h."))).toHaveLength(4);
        // The first check at the expiry bucket sweeps it: its count and the markers of its leases.
        await checkAndAcquire(redis, ids, limits(), "v", T0 + TTL, TTL);
        expect(
            Object.keys(await redis.hgetall(kc))
                .filter((f) => f.startsWith("h."))
                .sort(),
        ).toEqual([leaseOf("v", T0 + TTL), leaseOf("w", T0 + TTL - 1)].sort());
        expect(await releaseLease(redis, ids, leaseOf("x"))).toBe(0);
        expect(await heldAll(T0 + TTL)).toEqual([2, 2, 2]);
    });

    it("releases leases with a marker key of their own (mixed store, previous release) and deletes the key with the last slot", async () => {
        const d = await checkAndAcquire(redis, ids, limits(), "m", T0, TTL, 2, "mixed");
        const lease = d.allowed ? d.leaseId : "";
        expect(parseCounterLease(lease)).toMatchObject({ marker: "key", bucketMs: leaseBucket(T0, TTL) });
        expect(await releaseLease(redis, ids, lease)).toBe(3);
        expect(await redis.exists(redisKeys.lease(lease))).toBe(1);
        expect(await releaseLease(redis, ids, `${lease}.1`)).toBe(3);
        expect(await redis.exists(redisKeys.lease(lease))).toBe(0);
        expect(await heldAll()).toEqual([0, 0, 0]);
    });

    it("an unreleased lease stops counting at its expiry bucket, and a late release then counts nothing", async () => {
        const l = limits({ key: { concurrentRequests: 1 } });
        await checkAndAcquire(redis, ids, l, "a", T0, TTL);
        expect((await checkAndAcquire(redis, ids, l, "b", T0 + TTL - 1, TTL)).allowed).toBe(false);
        const b = await checkAndAcquire(redis, ids, l, "b", T0 + TTL, TTL);
        expect(b.allowed).toBe(true);
        // The expired bucket was swept: only b's lease is counted.
        expect(await redis.hget(redisKeys.counters("key", ids.key), "n")).toBe("1");
        expect(await redis.hexists(redisKeys.counters("key", ids.key), String(T0 + TTL))).toBe(0);
        // Releasing the expired lease (its marker may outlive the sweep when clocks differ) takes nothing from b.
        expect(await releaseLease(redis, ids, leaseOf("a"))).toBe(0);
        expect(await leasesHeld(redis, "key", ids.key, T0 + TTL)).toBe(1);
        // A HASH whose every bucket expired is deleted by the next check.
        await checkAndAcquire(redis, ids, limits(), "c", T0 + 3 * TTL, TTL);
        expect(await redis.hget(redisKeys.counters("key", ids.key), "n")).toBe("1");
    });

    it("a crashed replica's leases (never released) stop counting at their TTL like any other", async () => {
        const l = limits({ team: { concurrentRequests: 3 } });
        for (const t of ["x", "y", "z"]) await checkAndAcquire(redis, ids, l, t, T0, TTL);
        expect(await checkAndAcquire(redis, ids, l, "w", T0 + TTL - 1, TTL)).toMatchObject({
            allowed: false,
            tier: "team",
            dimension: "concurrency",
            retryAfterMs: 1,
        });
        expect((await checkAndAcquire(redis, ids, l, "w", T0 + TTL, TTL)).allowed).toBe(true);
    });
});

describe("addTokens", () => {
    it("adds to each tier's own fixed window and expires the counter one window after it ends", async () => {
        const windows = { model: 60, team: 3600, key: 86_400 };
        const now = T0 + 90_000;
        expect(await addTokens(redis, ids, 40, now, windows)).toEqual({ model: 40, team: 40, key: 40 });
        expect(await addTokens(redis, ids, 2, now + 60_000, windows)).toEqual({ model: 2, team: 42, key: 42 });
        for (const [t, w] of Object.entries(windows) as [keyof typeof windows, number][]) {
            const start = windowStart(now, w);
            expect(await redis.expiretime(redisKeys.tokens(t, ids[t], start))).toBe(start + 2 * w);
        }
        expect(await redis.get(redisKeys.tokens("model", ids.model, windowStart(now, 60)))).toBe("40");
    });

    it("rejects a negative or fractional token count", async () => {
        await expect(addTokens(redis, ids, -1, T0, { model: 60, team: 60, key: 60 })).rejects.toThrow(RangeError);
        await expect(addTokens(redis, ids, 1.5, T0, { model: 60, team: 60, key: 60 })).rejects.toThrow(RangeError);
    });
});
