import type { Redis } from "ioredis";
import { describe, expect, it } from "vitest";
import { redisPerFile } from "./test/redis-per-file";
import { CHECK_COUNTERS_BATCH_LUA, leaseBucket } from "../shared/limits";
import { strippedCheckScript } from "./bench";

/**
 * The bound's stripped floor (`npm run bench -- auth-bound`) must run the shipped admission script less exactly the
 * lease marker and the shared tiers, or the bound measures something else: run both scripts on a real Redis with a call
 * of the layout the bench's floors send (services/auth/bench.ts `startRedisFloor`: one limit set, one context of the
 * model and team tiers, then per check the key tier's HASH and token counter and six arguments), here with limits low
 * enough to show the arithmetic.
 */
let redis: Redis;
redisPerFile((_, client) => {
    redis = client;
});

// the clock of now: the script expires each HASH at an absolute time (PEXPIREAT) past its last bucket
const NOW = Date.now();
const BUCKET = leaseBucket(NOW, 2_000);
const CONTEXT = ["rl:c:model:m", "rl:tok:model:m", "rl:c:team:t", "rl:tok:team:t"];
const LEASE = (k: string) => `h.${BUCKET.toString(36)}.${k}`;

/** One call of two quiet keys' checks, as the floors send it. */
async function call(script: string): Promise<unknown> {
    const keys = [...CONTEXT, "rl:c:key:a", "rl:tok:key:a", "rl:c:key:b", "rl:tok:key:b"];
    const args = [1, 1000, 100, 1e9, 60, 1, 1, 1];
    for (const k of ["a", "b"]) args.push(NOW, LEASE(k) as never, 1, BUCKET, 1, 1);
    return redis.eval(script, keys.length, ...keys, ...args);
}

describe("auth bench bound: the stripped admission script", () => {
    it("still admits each quiet check on its key tier's counters (rps state, lease count, bucket)", async () => {
        expect(await call(strippedCheckScript())).toEqual([1, 1]);
        const a = await redis.hgetall("rl:c:key:a");
        expect(a.n).toBe("1");
        expect(a[String(BUCKET)]).toBe("1");
        // GCRA arrival time moved on by one interval (1000 ms / 1000 rps)
        expect(Number(a.t)).toBe(NOW + 1);
    });

    it("writes no lease marker and no model or team tier state, which the shipped script does", async () => {
        await call(strippedCheckScript());
        expect(Object.keys(await redis.hgetall("rl:c:key:a")).filter((f) => f.startsWith("h."))).toEqual([]);
        expect(await redis.exists("rl:c:model:m", "rl:c:team:t")).toBe(0);

        await redis.flushall();
        expect(await call(CHECK_COUNTERS_BATCH_LUA)).toEqual([1, 1]);
        expect(Object.keys(await redis.hgetall("rl:c:key:a"))).toContain(LEASE("a"));
        expect(await redis.hget("rl:c:model:m", "n")).toBe("2");
        expect(await redis.hget("rl:c:team:t", "n")).toBe("2");
    });

    it("refuses a script without the lines it takes out, rather than measure something else", () => {
        expect(() => strippedCheckScript(CHECK_COUNTERS_BATCH_LUA.replaceAll(", lease, mark)", ")"))).toThrow(/lease, mark/);
        expect(() => strippedCheckScript(CHECK_COUNTERS_BATCH_LUA.replace("for i = 1, last do", "for i = 1, 2 do"))).toThrow(
            /for i = 1, last do/,
        );
    });
});
