import { Redis } from "ioredis";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type RedisServer, startRedis } from "../auth/test/harness";
import { type Rig, startRig } from "./testing/rig";
import { type KillStep, meteringKillAndRedeliver } from "./testing/scenarios";

/**
 * Every side effect of a usage event happens once across redelivery, restart and `kill -9`: ledger rows,
 * hourly aggregates, and the Redis token-window counters the auth service's token limits read
 * (services/shared/limits.ts key layout). The real metering process (main.ts) runs as a child and is killed
 * with SIGKILL at each step; the collector then redelivers the batch it was unsure of.
 */
let rig: Rig;
let redisServer: RedisServer;
let redis: Redis;
beforeAll(async () => {
    [rig, redisServer] = await Promise.all([startRig(), startRedis()]);
    redis = new Redis(redisServer.url, { maxRetriesPerRequest: 1 });
});
afterAll(async () => {
    redis?.disconnect();
    await Promise.all([rig?.stop(), redisServer?.stop()]);
});

describe("exactly once: kill -9 at each step, then redelivery", () => {
    const steps: KillStep[] = ["after-spool", "after-tokens", "after-put", "mid-shipping"];
    for (const step of steps) {
        it(`kill -9 ${step}: token counters equal the ledger, nothing lost, nothing doubled`, async () => {
            const f = await meteringKillAndRedeliver(rig, redis, redisServer.url, step, 11 + steps.indexOf(step));
            expect(f.ledgerEvents).toBe(f.metered);
            expect(f.counters).toBeGreaterThan(50);
            expect(f.counterMismatches).toEqual([]);
            expect([f.lost, f.doubleCounted]).toEqual([0, 0]);
            if (step !== "mid-shipping") expect(f.killedByFailpoint).toBe(true);
        }, 90_000);
    }
});
