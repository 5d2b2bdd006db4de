import { randomBytes } from "node:crypto";
import * as fs from "node:fs";
import { Redis } from "ioredis";
import * as os from "node:os";
import * as path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startRedis, type RedisServer } from "../auth/test/harness";
import { bundlePaths, type Policy, publicKeyFromSeed, signBundle } from "../shared/bundle";
import { redisKeys, tierIds, windowStart } from "../shared/identity";
import { checkAndAcquire, leasesHeld } from "../shared/limits";
import type { UsageEvent } from "../shared/usage";
import { BundleWindows, DEFAULT_WINDOW_SECONDS, RedisLimits } from "./limits";
import { MeteringService } from "./service";
import { Spool } from "./spool";
import { syntheticRequests } from "./testing/synthetic";
import { extractRecords, toOtlpRequest } from "./otlp";

const L = (windowSeconds: number) => ({ requestsPerSecond: 1000, concurrentRequests: 10, tokensPerWindow: 1_000_000, windowSeconds });
const POLICY: Policy = {
    models: [{ id: "meta-llama/Llama-3.3-70B-Instruct", limits: L(60) }],
    tenants: [{ id: "acme", displayName: "ACME", teams: [{ id: "search", limits: L(300) }] }],
    apiKeys: [
        {
            id: "acme-search-prod",
            sha256: "a".repeat(64),
            tenant: "acme",
            team: "search",
            models: ["meta-llama/Llama-3.3-70B-Instruct"],
            expiresAt: "2027-01-01T00:00:00Z",
            limits: L(3600),
        },
    ],
};
const seed = randomBytes(32);

function bucket(revision: number, policy: Policy): Map<string, string> {
    const key = bundlePaths.bundle("hn1", revision);
    const signed = signBundle(seed, "hn1", revision, policy);
    return new Map([
        [bundlePaths.current("hn1"), JSON.stringify({ revision, key, contentHash: signed.bundle.contentHash })],
        [key, JSON.stringify(signed)],
    ]);
}

let redis: RedisServer;
let client: Redis;
beforeAll(async () => {
    redis = await startRedis();
    client = new Redis(redis.url, { maxRetriesPerRequest: 1, commandTimeout: 500, enableOfflineQueue: false });
    client.on("error", () => undefined);
    await new Promise<void>((resolve) => client.once("ready", () => resolve()));
});
afterAll(async () => {
    client?.disconnect();
    await redis?.stop();
});

describe("token windows from the signed policy bundle", () => {
    it("reads each tier's windowSeconds; unknown ids fall back to the schema default; only moves forward", async () => {
        let objects = bucket(3, POLICY);
        const w = new BundleWindows(
            async (k) => {
                const v = objects.get(k);
                if (v === undefined) throw new Error(`NoSuchKey ${k}`);
                return v;
            },
            "hn1",
            publicKeyFromSeed(seed),
        );
        expect(w.windowSeconds({ model: "x", team: "y", key: "z" })).toEqual({ model: 60, team: 60, key: 60 });
        expect(await w.refresh()).toBe(true);
        expect(w.windowSeconds({ model: "meta-llama/Llama-3.3-70B-Instruct", team: "acme/search", key: "acme-search-prod" })).toEqual({
            model: 60,
            team: 300,
            key: 3600,
        });
        expect(w.windowSeconds({ model: "other", team: "acme/search", key: "nope" })).toEqual({
            model: DEFAULT_WINDOW_SECONDS,
            team: 300,
            key: DEFAULT_WINDOW_SECONDS,
        });
        expect(await w.refresh()).toBe(false);
        // A bundle signed by someone else is refused; the last good windows stay.
        const forged = bucket(4, POLICY);
        const other = signBundle(randomBytes(32), "hn1", 4, POLICY);
        forged.set(bundlePaths.bundle("hn1", 4), JSON.stringify(other));
        objects = forged;
        await expect(w.refresh()).rejects.toThrow("signature does not verify");
        expect(w.revision).toBe(3);
    });
});

describe("lease release and token accounting (real Redis)", () => {
    it("releases the lease the auth service took and adds input+output tokens to each tier's window", async () => {
        const w = new BundleWindows(async (k) => bucket(1, POLICY).get(k)!, "hn1", publicKeyFromSeed(seed));
        await w.refresh();
        const limits = new RedisLimits(client, w);
        const [req] = syntheticRequests(50, "hn1", 3).filter(
            (r) => r.kind === "reported" && r.expected!.model.startsWith("meta") && r.expected!.keyId === "acme-search-prod",
        );
        const now = Date.now();
        const ev = {
            ...req.expected!,
            startedAt: new Date(now).toISOString(),
            endedAt: new Date(now + 1500).toISOString(),
            seq: 0,
            source: "metering-0.x",
        } as UsageEvent;
        const ids = tierIds(ev);
        const tiers = ["model", "team", "key"] as const;
        // A counter lease (the auth service's default) and one of the earlier ZSET layout (a spoke mid-upgrade).
        const d = await checkAndAcquire(client, ids, { model: L(60), team: L(300), key: L(3600) }, "lease-xyz", now, 960_000);
        const z = await checkAndAcquire(client, ids, { model: L(60), team: L(300), key: L(3600) }, "lease-old", now, 960_000, 1, "zset");
        expect(d).toMatchObject({ allowed: true, granted: 1 });
        expect(z).toEqual({ allowed: true, leaseId: "lease-old", granted: 1 });
        const lease = d.allowed ? d.leaseId : "";
        for (const t of tiers) expect(await leasesHeld(client, t, ids[t], now)).toBe(2);

        await limits.apply(ev, lease);
        await limits.releaseLease(ev, "lease-old");
        for (const t of tiers) expect(await leasesHeld(client, t, ids[t], now)).toBe(0);
        // A redelivered release counts nothing.
        await limits.releaseLease(ev, lease);
        for (const t of tiers) expect(await client.hget(redisKeys.counters(t, ids[t]), "n")).toBe("0");
        const end = Date.parse(ev.endedAt);
        const total = ev.inputTokens + ev.outputTokens;
        expect(await client.get(redisKeys.tokens("model", ids.model, windowStart(end, 60)))).toBe(String(total));
        expect(await client.get(redisKeys.tokens("team", ids.team, windowStart(end, 300)))).toBe(String(total));
        expect(await client.get(redisKeys.tokens("key", ids.key, windowStart(end, 3600)))).toBe(String(total));
    });

    it("a Redis outage never blocks metering: records are still spooled and acknowledged", async () => {
        const dir = fs.mkdtempSync(path.join(os.tmpdir(), "metering-limits-"));
        try {
            const spool = await Spool.open({ dir, instance: "metering-0", maxBytes: 1 << 20 });
            const svc = new MeteringService({
                spoke: "hn1",
                spool,
                limits: new RedisLimits(client, { windowSeconds: () => ({ model: 60, team: 60, key: 60 }) }),
            });
            await redis.stop();
            const reqs = syntheticRequests(40, "hn1", 5).filter((r) => r.expected);
            const out = await svc.ingest(extractRecords(toOtlpRequest(reqs.map((r) => r.record))));
            expect(out.spooled).toBe(reqs.length);
            await svc.idle();
            expect(svc.limitsFailures).toBe(reqs.length);
            await spool.close();
        } finally {
            await redis.start();
            // The shared client reconnects in the background (no offline queue): the next test needs it ready.
            if (client.status !== "ready") await new Promise<void>((resolve) => client.once("ready", () => resolve()));
            fs.rmSync(dir, { recursive: true, force: true });
        }
    });
});

describe("token accounting on a silent Redis", () => {
    it("a Redis connection that goes silent is dropped; after the heal every token is added once, within seconds", async () => {
        const { startSilentProxy } = await import("../shared/testing/silent-proxy");
        const { LimitsApplier, meteringRedisOptions } = await import("./limits");
        const { pendingEvent } = await import("./testing/scenarios");
        const proxy = await startSilentProxy({ host: "127.0.0.1", port: redis.port });
        const r = new Redis(`redis://127.0.0.1:${proxy.port}`, meteringRedisOptions(300));
        r.on("error", () => undefined);
        const dir = fs.mkdtempSync(path.join(os.tmpdir(), "metering-silent-redis-"));
        try {
            await new Promise<void>((resolve) => r.once("ready", () => resolve()));
            await client.flushall();
            const spool = await Spool.open({ dir, instance: "metering-0", maxBytes: 1 << 20 });
            const sink = new RedisLimits(r, { windowSeconds: () => ({ model: 60, team: 60, key: 60 }) });
            const applier = new LimitsApplier(spool, sink, dir, { idleMs: 10, maxBackoffMs: 200 });
            await applier.start();
            const first = await spool.append([pendingEvent("silent-redis", 0)]);
            await applier.caughtUp(5000);
            const acceptedAtSilence = proxy.accepted;
            proxy.silence();
            const later = await spool.append(Array.from({ length: 20 }, (_, i) => pendingEvent("silent-redis", 1 + i)));
            // The partition lasts until the silent connection was dropped (its socket reply deadline) and replaced by one
            // opened during the partition, which stays dead after the heal.
            const deadline = Date.now() + 10_000;
            while (proxy.accepted === acceptedAtSilence) {
                if (Date.now() > deadline) throw new Error("the silent Redis connection was never replaced");
                await new Promise((res) => setTimeout(res, 25));
            }
            expect(applier.appliedThroughSeq).toBe(0);
            proxy.heal();
            const t = Date.now();
            await applier.caughtUp(10_000);
            expect(Date.now() - t).toBeLessThan(5000);
            await applier.stop();
            // Every key-tier counter equals the tokens of its events, per window (each event counted once).
            const want = new Map<string, number>();
            for (const e of [...first, ...later]) {
                const k = redisKeys.tokens("key", tierIds(e).key, windowStart(Date.parse(e.endedAt), 60));
                want.set(k, (want.get(k) ?? 0) + e.inputTokens + e.outputTokens);
            }
            for (const [k, v] of want) expect(Number(await client.get(k))).toBe(v);
            await spool.close();
        } finally {
            r.disconnect();
            await proxy.close();
            fs.rmSync(dir, { recursive: true, force: true });
        }
    });
});
