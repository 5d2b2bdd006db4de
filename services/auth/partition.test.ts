import * as path from "node:path";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { IDENTITY_HEADERS } from "../shared/identity";
import { createBoundedRedis } from "../shared/net";
import { type SilentProxy, startSilentProxy } from "../shared/testing/silent-proxy";
import { type AuthService, startAuthService } from "./server";
import { check, ops } from "./test/client";
import {
    hubKeys,
    type HubKeys,
    makePolicy,
    memoryLogger,
    publishBundle,
    type RedisServer,
    type S3Server,
    startRedis,
    startS3,
    tempDir,
    type TempDir,
    testConfig,
    type TestKey,
} from "./test/harness";

/**
 * Silent partitions: the peer's TCP connection stays open and nothing comes back
 * (services/shared/testing/silent-proxy.ts), then the network heals and the connections open during the
 * partition stay dead. The service must drop and replace them by itself: auth back to 200 within a few
 * seconds of healing, a bundle published during the partition served within one poll interval after it.
 */

const MODEL = "Qwen/Qwen3-32B";
const k1: TestKey = { id: "k1", secret: "sk-part-one-aaaaaaaa", tenant: "acme", team: "core", models: [MODEL] };
const k2: TestKey = { id: "k2", secret: "sk-part-two-bbbbbbbb", tenant: "acme", team: "core", models: [MODEL] };
const rev1 = makePolicy({ models: { [MODEL]: undefined }, keys: [k1] });
const rev2 = makePolicy({ models: { [MODEL]: undefined }, keys: [k1, k2] });

/** "A few seconds": the socket reply deadline (1 s by default) plus reconnect back-off, with room for a loaded CI box. */
const REDIS_RECOVERY_BOUND_MS = 5_000;

let redis: RedisServer;
let s3: S3Server;
let hub: HubKeys;
let tmp: TempDir;
const cleanup: (() => Promise<void> | void)[] = [];

beforeAll(async () => {
    [redis, s3] = await Promise.all([startRedis(), startS3()]);
    hub = hubKeys();
    tmp = tempDir("auth-partition-");
});

afterEach(async () => {
    for (const c of cleanup.splice(0).reverse()) await c();
});

afterAll(async () => {
    await Promise.all([redis?.stop(), s3?.destroy()]);
    tmp?.remove();
});

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/**
 * Waits until the client behind `p` has replaced its connection during the partition (the proxy accepted a new one
 * since `acceptedAtSilence`): it noticed the silence by itself, and the connection it holds now is one opened during
 * the partition, which stays dead after the heal. Fails after `limitMs`.
 */
async function replacedDuringPartition(p: SilentProxy, acceptedAtSilence: number, limitMs: number): Promise<void> {
    const waited = await msUntil(async () => p.accepted > acceptedAtSilence, limitMs);
    expect(waited, "the client never replaced its silent connection").toBeLessThan(Infinity);
}

/** Polls `ok` every 25 ms until it holds; returns ms elapsed, or Infinity after `limitMs`. */
async function msUntil(ok: () => Promise<boolean>, limitMs: number): Promise<number> {
    const t0 = Date.now();
    while (Date.now() - t0 < limitMs) {
        if (await ok()) return Date.now() - t0;
        await sleep(25);
    }
    return Infinity;
}

async function startService(
    spoke: string,
    o: { redisUrl: string; s3Endpoint: string; env?: Record<string, string> },
): Promise<AuthService> {
    const svc = await startAuthService(
        testConfig({
            spoke,
            publicKey: hub.publicKey,
            s3Endpoint: o.s3Endpoint,
            redisUrl: o.redisUrl,
            cachePath: path.join(tmp.dir, `${spoke}.json`),
            env: o.env,
        }),
        { log: memoryLogger().log },
    );
    cleanup.push(() => svc.close());
    return svc;
}

async function proxy(port: number): Promise<SilentProxy> {
    const p = await startSilentProxy({ port });
    cleanup.push(() => p.close());
    return p;
}

describe("Redis goes silent, then heals", () => {
    it("denies with 503 during the partition and is back to 200 within a few seconds of healing", async () => {
        const SPOKE = "part-redis";
        await publishBundle(s3, hub, SPOKE, 1, rev1);
        const p = await proxy(redis.port);
        const svc = await startService(SPOKE, { redisUrl: `redis://127.0.0.1:${p.port}`, s3Endpoint: s3.endpoint });
        expect((await check(svc.port, { key: k1.secret, model: MODEL })).status).toBe(200);

        const acceptedAtSilence = p.accepted;
        p.silence();
        // Fail closed, and fast: the command timeout (100 ms), not Envoy's ext_authz timeout.
        for (let i = 0; i < 5; i++) {
            const r = await check(svc.port, { key: k1.secret, model: MODEL });
            expect(r.status).toBe(503);
            expect(r.headers.get(IDENTITY_HEADERS.tenant)).toBeNull();
        }
        // The partition lasts until the service has dropped the silent connection (the socket reply deadline) and
        // holds one opened during the partition, dead after the heal.
        await replacedDuringPartition(p, acceptedAtSilence, 10_000);
        p.heal();
        const recovery = await msUntil(async () => (await check(svc.port, { key: k1.secret, model: MODEL })).status === 200, 15_000);
        expect(recovery).toBeLessThan(REDIS_RECOVERY_BOUND_MS);
    });

    it("a busy key's grant admits nothing once its hold has passed after Redis went silent", async () => {
        const SPOKE = "part-redis-grant";
        const HOLD_MS = 200;
        await publishBundle(s3, hub, SPOKE, 1, rev1);
        const p = await proxy(redis.port);
        const svc = await startService(SPOKE, {
            redisUrl: `redis://127.0.0.1:${p.port}`,
            s3Endpoint: s3.endpoint,
            env: { AUTH_GRANT_HOLD_MS: String(HOLD_MS) },
        });
        // Busy: 8 checks in flight for half a second, so the key holds a grant when the partition starts.
        let stop = false;
        const busy = Array.from({ length: 8 }, async () => {
            while (!stop) await check(svc.port, { key: k1.secret, model: MODEL });
        });
        await sleep(500);
        stop = true;
        await Promise.all(busy);
        const held = Number(/^auth_grant_held_slots (\S+)$/m.exec((await ops(svc.opsPort, "/metrics")).text)?.[1]);
        expect(held).toBeGreaterThan(0);
        // Then a slow prober, one check every 10 ms for a second: the grant would last it far beyond the hold.
        const silencedAt = Date.now();
        p.silence();
        const after = { withinHold: 0, pastHold: 0, denied: 0 };
        while (Date.now() - silencedAt < 1_000) {
            const sent = Date.now();
            const r = await check(svc.port, { key: k1.secret, model: MODEL });
            if (r.status === 503) after.denied++;
            else if (r.status === 200) after[sent - silencedAt > HOLD_MS ? "pastHold" : "withinHold"]++;
            await sleep(10);
        }
        expect(after.pastHold).toBe(0);
        expect(after.denied).toBeGreaterThan(0);
        p.heal();
    });

    it("also when the connection was idle during the partition (the heartbeat notices)", async () => {
        const SPOKE = "part-redis-idle";
        await publishBundle(s3, hub, SPOKE, 1, rev1);
        const p = await proxy(redis.port);
        const svc = await startService(SPOKE, { redisUrl: `redis://127.0.0.1:${p.port}`, s3Endpoint: s3.endpoint });
        expect((await check(svc.port, { key: k1.secret, model: MODEL })).status).toBe(200);
        const acceptedAtSilence = p.accepted;
        p.silence();
        // No request: only the heartbeat's PING can notice that the connection went silent and have it replaced.
        await replacedDuringPartition(p, acceptedAtSilence, 10_000);
        p.heal();
        const recovery = await msUntil(async () => (await check(svc.port, { key: k1.secret, model: MODEL })).status === 200, 15_000);
        expect(recovery).toBeLessThan(REDIS_RECOVERY_BOUND_MS);
    });

    it("createBoundedRedis (shared with metering) replaces the silent connection instead of keeping it", async () => {
        const p = await proxy(redis.port);
        const { redis: client, close } = createBoundedRedis(`redis://127.0.0.1:${p.port}`, { commandTimeoutMs: 100, socketTimeoutMs: 500 });
        cleanup.push(close);
        await expect.poll(() => client.status, { timeout: 5_000 }).toBe("ready");
        expect(await client.ping()).toBe("PONG");
        p.silence();
        await expect(client.ping()).rejects.toThrow(/timed out/i);
        p.heal();
        const recovery = await msUntil(
            () =>
                client.ping().then(
                    () => true,
                    () => false,
                ),
            15_000,
        );
        expect(recovery).toBeLessThan(REDIS_RECOVERY_BOUND_MS);
    });
});

describe("S3 goes silent while the hub publishes, then heals", () => {
    it("the bundle published during the partition is served within one poll interval after healing", async () => {
        const SPOKE = "part-s3";
        const POLL_MS = 1_000;
        await publishBundle(s3, hub, SPOKE, 1, rev1);
        const p = await proxy(Number(new URL(s3.endpoint).port));
        const svc = await startService(SPOKE, {
            redisUrl: redis.url,
            s3Endpoint: `http://127.0.0.1:${p.port}`,
            env: { AUTH_POLL_INTERVAL_SECONDS: String(POLL_MS / 1000), AUTH_S3_TIMEOUT_MS: "400" },
        });
        expect((await check(svc.port, { key: k1.secret, model: MODEL })).status).toBe(200);

        const acceptedAtSilence = p.accepted;
        p.silence();
        // Let polls start on the silenced keep-alive connection and on new ones, then publish behind the partition.
        await replacedDuringPartition(p, acceptedAtSilence, 10 * POLL_MS);
        await publishBundle(s3, hub, SPOKE, 2, rev2);
        await sleep(POLL_MS);
        // The last-known-good revision keeps serving during the partition.
        expect((await check(svc.port, { key: k2.secret, model: MODEL })).status).toBe(401);
        expect((await check(svc.port, { key: k1.secret, model: MODEL })).status).toBe(200);

        p.heal();
        const recovery = await msUntil(async () => {
            const r = await check(svc.port, { key: k2.secret, model: MODEL });
            return r.status === 200 && r.headers.get(IDENTITY_HEADERS.revision) === "2";
        }, 20_000);
        // One poll interval, plus the sync itself on loopback (a few ms; slack for a loaded 2-core CI box).
        expect(recovery).toBeLessThan(POLL_MS + 600);
    });
});
