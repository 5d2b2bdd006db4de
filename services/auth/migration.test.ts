import type { Redis } from "ioredis";
import { describe, expect, it } from "vitest";
import { redisPerFile } from "./test/redis-per-file";
import type { TierIds } from "../shared/identity";
import {
    checkAndAcquire,
    leaseBucket,
    leasesHeld,
    newLeaseToken,
    parseCounterLease,
    releaseLease,
    type TierLimits,
} from "../shared/limits";
import { UNLIMITED } from "./test/harness";
import { legacyCheck, previousCountersCheck } from "./test/legacy";

/**
 * A running spoke upgraded replica by replica (services/auth/README.md, "Upgrading a running spoke"): old
 * replicas (one ZSET member per lease, test/legacy.ts verbatim), then new ones with `AUTH_LEASE_STORE` `zset`,
 * `mixed` and `counters`, two kinds at a time as in each step of the rollout, on one real Redis, with the
 * metering service's `releaseLease` and TTL expiry in between. A seeded random walk checks after every step that
 * no tier holds more leases than its limit and that a check is admitted whenever there is room.
 */

/** `previous`: a `counters` replica of the release before lease markers moved into the key tier's HASH. */
type Kind = "old" | "zset" | "mixed" | "counters" | "previous";
const ids: TierIds = { model: "m", team: "acme/core", key: "k1" };
const T0 = Math.ceil(Date.now() / 3_600_000) * 3_600_000 + 3_600_000;
const TTL = 5_000;
const LIMIT = 7;
const limits: TierLimits = { model: UNLIMITED, team: { ...UNLIMITED, concurrentRequests: LIMIT }, key: UNLIMITED };

let redis: Redis;
redisPerFile((_, client) => {
    redis = client;
});

/** Deterministic pseudo-random numbers in [0, 1) (mulberry32). */
function rng(seed: number): () => number {
    let a = seed >>> 0;
    return () => {
        a = (a + 0x6d2b79f5) >>> 0;
        let t = a;
        t = Math.imul(t ^ (t >>> 15), t | 1);
        t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
        return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
    };
}

/** One admission by a replica of `kind` at `now`: the lease id and when it stops counting, or undefined. */
async function admit(kind: Kind, now: number, l: TierLimits = limits): Promise<{ lease: string; expiresAt: number } | undefined> {
    const token = newLeaseToken();
    if (kind === "old") {
        const lease = await legacyCheck(redis, ids, l, token, now, TTL);
        return lease === undefined ? undefined : { lease, expiresAt: now + TTL };
    }
    if (kind === "previous") {
        const lease = await previousCountersCheck(redis, ids, l, token, now, TTL);
        return lease === undefined ? undefined : { lease, expiresAt: leaseBucket(now, TTL) };
    }
    const d = await checkAndAcquire(redis, ids, l, token, now, TTL, 1, kind);
    if (!d.allowed) return undefined;
    return { lease: d.leaseId, expiresAt: kind === "zset" ? now + TTL : leaseBucket(now, TTL) };
}

/**
 * Random walk over `kinds`: admissions, releases by metering and clock steps. Returns the most leases the team
 * tier ever held (as Redis counts them for the new code) and whether a check was ever refused with room left.
 */
async function walk(kinds: Kind[], seed: number, steps = 600): Promise<{ maxHeld: number; refusedWithRoom: number; admitted: number }> {
    const r = rng(seed);
    let now = T0;
    const held: { lease: string; expiresAt: number }[] = [];
    let maxHeld = 0;
    let refusedWithRoom = 0;
    let admitted = 0;
    for (let i = 0; i < steps; i++) {
        const x = r();
        if (x < 0.6) {
            const kind = kinds[Math.floor(r() * kinds.length)];
            const live = held.filter((h) => h.expiresAt > now).length;
            const got = await admit(kind, now);
            if (got) {
                held.push(got);
                admitted++;
            } else if (live < LIMIT) refusedWithRoom++;
        } else if (x < 0.9 && held.length) {
            const [h] = held.splice(Math.floor(r() * held.length), 1);
            await releaseLease(redis, ids, h.lease);
        } else {
            now += Math.floor(r() * 2_000);
        }
        for (let j = held.length - 1; j >= 0; j--) if (held[j].expiresAt <= now) held.splice(j, 1);
        const inRedis = await leasesHeld(redis, "team", ids.team, now);
        expect(inRedis).toBe(held.length);
        maxHeld = Math.max(maxHeld, inRedis);
    }
    return { maxHeld, refusedWithRoom, admitted };
}

describe("rolling upgrade from ZSET leases to counters", () => {
    for (const seed of [1, 2, 3]) {
        it(`step 1, old replicas beside new ones with AUTH_LEASE_STORE=zset: never over the limit, never refused with room (seed ${seed})`, async () => {
            const w = await walk(["old", "zset"], seed);
            expect(w.maxHeld).toBe(LIMIT);
            expect(w.refusedWithRoom).toBe(0);
        });

        it(`step 2, zset replicas beside mixed ones: never over the limit, never refused with room (seed ${seed})`, async () => {
            const w = await walk(["zset", "mixed"], seed);
            expect(w.maxHeld).toBe(LIMIT);
            expect(w.refusedWithRoom).toBe(0);
        });

        it(`step 3, mixed replicas beside counters ones: never over the limit, never refused with room (seed ${seed})`, async () => {
            const w = await walk(["mixed", "counters"], seed);
            expect(w.maxHeld).toBe(LIMIT);
            expect(w.refusedWithRoom).toBe(0);
        });
    }

    for (const seed of [1, 2]) {
        it(`counters replicas of the previous release (marker keys) beside current ones (markers in the HASH): never over, never refused with room (seed ${seed})`, async () => {
            const w = await walk(["previous", "counters"], seed);
            expect(w.maxHeld).toBe(LIMIT);
            expect(w.refusedWithRoom).toBe(0);
            expect(w.admitted).toBeGreaterThan(100);
        });
    }

    for (const pair of [
        ["old", "zset"],
        ["zset", "mixed"],
        ["mixed", "counters"],
    ] as [Kind, Kind][]) {
        it(`rps at an instant: ${pair.join(" and ")} replicas together admit exactly the burst`, async () => {
            const l: TierLimits = { model: UNLIMITED, team: UNLIMITED, key: { ...UNLIMITED, requestsPerSecond: 10 } };
            let admitted = 0;
            for (let i = 0; i < 30; i++) if (await admit(pair[i % 2], T0, l)) admitted++;
            expect(admitted).toBe(10);
        });
    }

    it("a mixed replica counts the ZSET leases an old replica holds, and they still expire by TTL and release", async () => {
        const old = await Promise.all([0, 1, 2, 3].map(() => admit("old", T0)));
        expect(old.every(Boolean)).toBe(true);
        const mine = await Promise.all([0, 1, 2].map(() => admit("mixed", T0 + 1)));
        expect(mine.every(Boolean)).toBe(true);
        expect(await admit("mixed", T0 + 2)).toBeUndefined();
        await releaseLease(redis, ids, old[0]!.lease);
        expect(parseCounterLease(old[0]!.lease)).toBeUndefined();
        expect(await admit("mixed", T0 + 3)).toBeDefined();
        // The old leases expire at T0 + TTL: three slots free up.
        expect(await leasesHeld(redis, "team", ids.team, T0 + TTL)).toBe(4);
        expect(await Promise.all([0, 1, 2, 3].map(() => admit("mixed", T0 + TTL)))).toSatisfy(
            (a: unknown[]) => a.filter(Boolean).length === 3,
        );
    });

    it("why three steps: old replicas cannot see counters, counters replicas cannot see ZSET leases", async () => {
        for (let i = 0; i < LIMIT; i++) expect(await admit("mixed", T0)).toBeDefined();
        expect(await admit("mixed", T0)).toBeUndefined();
        // An old replica sees an empty ZSET and admits: no old replica may run beside counter writers.
        expect(await admit("old", T0)).toBeDefined();
        await redis.flushall();
        for (let i = 0; i < LIMIT; i++) expect(await admit("zset", T0)).toBeDefined();
        // A counters replica does not read ZSETs: it may only start once no replica writes them and their
        // leases have expired (the lease TTL after the last zset replica stopped).
        expect(await admit("counters", T0)).toBeDefined();
        expect(await admit("mixed", T0)).toBeUndefined();
    });
});
