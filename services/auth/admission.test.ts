import { Redis } from "ioredis";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { redisPerFile } from "./test/redis-per-file";
import { redisKeys, type TierIds } from "../shared/identity";
import { leasesHeld, type LimitDecision, releaseLease, type TierLimit, type TierLimits } from "../shared/limits";
import { GrantAdmission, type GrantOptions } from "./admission";
import { type RedisServer, UNLIMITED } from "./test/harness";

/**
 * services/auth/admission.ts against a real redis-server: busy (key, model) pairs are admitted from grants,
 * and the bounds its module comment promises hold (never over a concurrency limit, exact near a limit, unused
 * slots given back, fail closed, a new revision drops the grant).
 */

const ids: TierIds = { model: "m", team: "acme/core", key: "k1" };
const PAIR = "k1\nm";
/** Fake wall clock on a future hour boundary (Redis expiries lie in the real future); frozen unless a test moves it. */
const T0 = Math.ceil(Date.now() / 3_600_000) * 3_600_000 + 3_600_000;
const TTL = 960_000;
const limits = (o: Partial<Record<keyof TierLimits, Partial<TierLimit>>> = {}): TierLimits => ({
    model: { ...UNLIMITED, ...o.model },
    team: { ...UNLIMITED, ...o.team },
    key: { ...UNLIMITED, ...o.key },
});
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

let server: RedisServer;
let admin: Redis;
const open: { a: GrantAdmission; r: Redis }[] = [];

redisPerFile((s, client) => {
    server = s;
    admin = client;
});
beforeEach(async () => {
    await admin.config("RESETSTAT");
});
afterEach(async () => {
    for (const { a, r } of open.splice(0)) {
        await a.close();
        r.disconnect();
    }
});

async function admission(o: Partial<GrantOptions> = {}): Promise<GrantAdmission> {
    const r = new Redis(server.url);
    await new Promise((resolve) => r.once("ready", resolve));
    const a = new GrantAdmission(r, { holdMs: 50, maxGrant: 256, leaseTtlMs: TTL, now: () => T0, batch: true, ...o });
    open.push({ a, r });
    return a;
}

/** Admission script calls Redis has run (EVALSHA, plus EVAL for a first load). */
async function scriptCalls(): Promise<number> {
    return [...(await admin.info("commandstats")).matchAll(/cmdstat_eval(?:sha)?:calls=(\d+)/g)].reduce((n, m) => n + Number(m[1]), 0);
}

/** `n` checks of one pair, `inFlight` at a time, as an HTTP server would issue them. */
async function burst(a: GrantAdmission, l: TierLimits, n: number, inFlight = 16, revision = 1): Promise<LimitDecision[]> {
    const out: LimitDecision[] = [];
    let next = 0;
    await Promise.all(
        Array.from({ length: inFlight }, async () => {
            while (next < n) {
                next++;
                out.push(await a.admit(PAIR, ids, l, revision));
            }
        }),
    );
    return out;
}

const allowed = (ds: LimitDecision[]) => ds.filter((d) => d.allowed).length;
/** Leases a tier holds at the frozen clock, as admission counts them. */
const held = (tier: keyof TierIds, id: string) => leasesHeld(admin, tier, id, T0);

describe("GrantAdmission", () => {
    it("admits a busy pair mostly from grants: far fewer Redis calls than checks, every lease distinct and held", async () => {
        const a = await admission();
        const ds = await burst(a, limits(), 2_000);
        expect(allowed(ds)).toBe(2_000);
        const leases = ds.map((d) => (d.allowed ? d.leaseId : ""));
        expect(new Set(leases).size).toBe(2_000);
        expect(await scriptCalls()).toBeLessThan(2_000 / 10);
        // Every admitted request holds its lease in every tier; the rest is the grant still held. A lot that expired
        // is taken off heldSlots() at once and off Redis when its give-back is answered, so compare once settled.
        for (const t of ["model", "team", "key"] as const) {
            await expect.poll(async () => (await held(t, ids[t])) - a.heldSlots(), { timeout: 2_000, interval: 20 }).toBe(2_000);
        }
        // Metering releases a lease taken from a grant like any other.
        expect(await releaseLease(admin, ids, leases[1_999])).toBe(3);
    });

    it("a pair with one check at a time and little traffic gets no grant (one Redis check per request)", async () => {
        const a = await admission();
        for (let i = 0; i < 3; i++) {
            expect((await a.admit(PAIR, ids, limits(), 1)).allowed).toBe(true);
            await sleep(120); // longer than two hold periods: the demand of the last period is 1
        }
        expect(a.heldSlots()).toBe(0);
        expect(await held("key", ids.key)).toBe(3);
    });

    it("admits exactly the limit at an instant, then denies with the tier and dimension (grants shrink near a limit)", async () => {
        // The fake clock is frozen: no rps slot comes back, so the key tier's burst of 100 is all there is.
        const a = await admission();
        const ds = await burst(a, limits({ key: { requestsPerSecond: 100 } }), 300);
        expect(allowed(ds)).toBe(100);
        expect(ds.find((d) => !d.allowed)).toMatchObject({ allowed: false, tier: "key", dimension: "rps" });
    });

    for (const holdMs of [50, 0]) {
        it(`N simultaneous requests against a concurrency limit of N admit exactly N, round after round (grants ${holdMs ? "on" : "off"})`, async () => {
            const a = await admission({ holdMs });
            const cases: [limit: number, requests: number][] = [
                [5, 50],
                [1, 10],
                [16, 64],
                [5, 5],
            ];
            for (const [limit, requests] of cases) {
                const l = limits({ key: { concurrentRequests: limit } });
                for (let round = 0; round < 13; round++) {
                    // Arrivals spread over a few event-loop turns, as an HTTP server sees a simultaneous burst.
                    const ds = await Promise.all(
                        Array.from({ length: requests }, async (_, i) => {
                            for (let hop = 0; hop < i % 4; hop++) await new Promise((r) => setImmediate(r));
                            return a.admit(PAIR, ids, l, 1);
                        }),
                    );
                    expect({ limit, round, admitted: allowed(ds) }).toEqual({ limit, round, admitted: Math.min(limit, requests) });
                    expect(ds.find((d) => !d.allowed) ?? { allowed: false, tier: "key", dimension: "concurrency" }).toMatchObject({
                        tier: "key",
                        dimension: "concurrency",
                    });
                    // The requests end: metering releases their leases (slots still held by a grant stay held).
                    for (const d of ds) if (d.allowed) await releaseLease(admin, ids, d.leaseId);
                }
                // Nothing over the limit was ever held, and once the grant is given back nothing is held at all.
                await expect.poll(() => held("key", ids.key), { timeout: 2_000, interval: 20 }).toBe(0);
            }
        });
    }

    it("two replicas together never hold more leases than a concurrency limit, and unused ones come back", async () => {
        const [a, b] = [await admission(), await admission()];
        const l = limits({ team: { concurrentRequests: 40 } });
        const [da, db] = await Promise.all([burst(a, l, 150, 8), burst(b, l, 150, 8)]);
        const admitted = allowed(da) + allowed(db);
        expect(admitted).toBeLessThanOrEqual(40);
        // Under-admission is bounded too: a replica holds at most a quarter of the free slots beyond its own request.
        expect(admitted).toBeGreaterThanOrEqual(20);
        expect(await held("team", ids.team)).toBeLessThanOrEqual(40);
        // After the hold, only the admitted requests' leases are left.
        await expect.poll(() => a.heldSlots() + b.heldSlots(), { timeout: 2_000, interval: 20 }).toBe(0);
        await expect.poll(() => held("team", ids.team), { timeout: 2_000, interval: 20 }).toBe(admitted);
    });

    it("gives unused slots back after the hold: leases and rps slots", async () => {
        const a = await admission();
        const l = limits({ key: { requestsPerSecond: 1_000 } });
        const ds = await burst(a, l, 200);
        expect(allowed(ds)).toBe(200);
        expect(a.heldSlots()).toBeGreaterThan(0);
        await expect.poll(() => a.heldSlots(), { timeout: 2_000, interval: 20 }).toBe(0);
        await expect.poll(() => held("key", ids.key), { timeout: 2_000, interval: 20 }).toBe(200);
        // GCRA at the frozen clock: 200 requests at 1 ms each, nothing more.
        await expect
            .poll(() => admin.hget(redisKeys.counters("key", ids.key), "t"), { timeout: 2_000, interval: 20 })
            .toBe(`${T0 + 200}.000`);
    });

    it("replaces a lot before it expires: the first check after the expiry is still admitted without Redis", async () => {
        const hold = 200;
        const a = await admission({ holdMs: hold });
        await burst(a, limits(), 10);
        // The pair holds more than half of its demand: no refill for want of slots.
        expect(a.heldSlots() * 2).toBeGreaterThanOrEqual(10);
        // In the lot's last quarter, a check is admitted from it and starts a refill.
        await sleep(hold * 0.8);
        const calls = await scriptCalls();
        expect(a.admit(PAIR, ids, limits(), 1)).not.toBeInstanceOf(Promise);
        await expect.poll(scriptCalls, { timeout: 1_000, interval: 5 }).toBeGreaterThan(calls);
        // Past the old lot's expiry the refill's lot answers at once: no Redis round trip for the check.
        await sleep(hold * 0.3);
        expect(a.admit(PAIR, ids, limits(), 1)).not.toBeInstanceOf(Promise);
    });

    it("admits nothing from a grant once the Redis connection is down (fail closed)", async () => {
        const r = new Redis(server.url, { enableOfflineQueue: false, maxRetriesPerRequest: 0, retryStrategy: () => null });
        r.on("error", () => undefined);
        await new Promise((resolve) => r.once("ready", resolve));
        const a = new GrantAdmission(r, { holdMs: 1_000, maxGrant: 256, leaseTtlMs: TTL, now: () => T0, batch: true });
        open.push({ a, r });
        await burst(a, limits(), 200);
        expect(a.heldSlots()).toBeGreaterThan(0);
        const closed = new Promise((resolve) => r.once("end", resolve));
        r.disconnect();
        await closed;
        await expect(Promise.resolve(a.admit(PAIR, ids, limits(), 1))).rejects.toThrow();
    });

    it("a new policy revision drops the pair's grant: the next check goes to Redis under the new limits", async () => {
        const a = await admission({ holdMs: 1_000 });
        await burst(a, limits(), 200);
        expect(a.heldSlots()).toBeGreaterThan(0);
        // Revision 2 lowers the key's concurrency below what is already held: deny at once, not from the old grant.
        const d = await a.admit(PAIR, ids, limits({ key: { concurrentRequests: 10 } }), 2);
        expect(d).toMatchObject({ allowed: false, tier: "key", dimension: "concurrency" });
        await expect.poll(() => held("key", ids.key), { timeout: 2_000, interval: 20 }).toBe(200);
    });

    it("a grant never outlives the token window it was checked in", async () => {
        let now = T0 + 60_000 - 5; // 5 ms before the end of a 60 s token window
        const a = await admission({ holdMs: 1_000, now: () => now });
        const l = limits({ key: { tokensPerWindow: 1_000, windowSeconds: 60 } });
        await burst(a, l, 100);
        await sleep(30);
        now = T0 + 60_000 + 25;
        await admin.set(redisKeys.tokens("key", ids.key, (T0 + 60_000) / 1000), "1000");
        // The next window's counter is already over its budget: a grant from the last window must not hide it.
        expect(await a.admit(PAIR, ids, l, 1)).toMatchObject({ allowed: false, tier: "key", dimension: "tokens" });
    });

    it("with holdMs 0 every check is a Redis check", async () => {
        const a = await admission({ holdMs: 0 });
        expect(allowed(await burst(a, limits(), 100))).toBe(100);
        expect(a.heldSlots()).toBe(0);
        expect(await held("key", ids.key)).toBe(100);
    });

    it("refuses options outside their range", async () => {
        const r = new Redis(server.url, { lazyConnect: true });
        expect(() => new GrantAdmission(r, { holdMs: -1, maxGrant: 8, leaseTtlMs: TTL, now: () => T0, batch: true })).toThrow(RangeError);
        expect(() => new GrantAdmission(r, { holdMs: 50, maxGrant: 0, leaseTtlMs: TTL, now: () => T0, batch: true })).toThrow(RangeError);
        expect(() => new GrantAdmission(r, { holdMs: 50, maxGrant: 513, leaseTtlMs: TTL, now: () => T0, batch: true })).toThrow(RangeError);
        r.disconnect();
    });
});
