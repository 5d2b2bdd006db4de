import { promises as fs } from "node:fs";
import { Redis } from "ioredis";
import * as path from "node:path";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { AckSchema, bundlePaths, verifyBundle } from "../shared/bundle";
import { IDENTITY_HEADERS } from "../shared/identity";
import { type AuthService, startAuthService } from "./server";
import { check, ops } from "./test/client";
import {
    freePort,
    type HubKeys,
    hubKeys,
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

const MODEL = "Qwen/Qwen3-32B";
const k1: TestKey = { id: "k1", secret: "sk-one-aaaaaaaaaaaa", tenant: "acme", team: "core", models: [MODEL] };
const k2: TestKey = { id: "k2", secret: "sk-two-bbbbbbbbbbbb", tenant: "acme", team: "core", models: [MODEL] };
const rev1 = makePolicy({ models: { [MODEL]: undefined }, keys: [k1] });
const rev2 = makePolicy({ models: { [MODEL]: undefined }, keys: [k2] });

let redis: RedisServer;
let s3: S3Server;
let hub: HubKeys;
let tmp: TempDir;
let admin: Redis;
const running: AuthService[] = [];

beforeAll(async () => {
    [redis, s3] = await Promise.all([startRedis(), startS3()]);
    hub = hubKeys();
    tmp = tempDir("auth-bundles-");
    admin = new Redis(redis.url);
});

afterEach(async () => {
    await Promise.all(running.splice(0).map((s) => s.close()));
    // Some tests move a fake clock; limiter state from those must not meet a real-clock test.
    await admin.flushall();
});

afterAll(async () => {
    admin?.disconnect();
    await Promise.all([redis?.stop(), s3?.destroy()]);
    tmp?.remove();
});

/** Starts a service for `spoke` with its own cache file, tracked for shutdown after the test. */
async function start(spoke: string, o: { s3Endpoint?: string; cacheName?: string; env?: Record<string, string>; now?: () => number } = {}) {
    const logs = memoryLogger();
    const cachePath = path.join(tmp.dir, o.cacheName ?? `${spoke}.json`);
    const svc = await startAuthService(
        testConfig({
            spoke,
            publicKey: hub.publicKey,
            s3Endpoint: o.s3Endpoint ?? s3.endpoint,
            redisUrl: redis.url,
            cachePath,
            // These tests are about bundles: a Redis command slower than the production default (100 ms) on a loaded
            // test machine must not turn a check into a 503 (partition.test.ts covers the timeouts themselves).
            env: { AUTH_REDIS_TIMEOUT_MS: "2000", ...o.env },
        }),
        { log: logs.log, now: o.now },
    );
    running.push(svc);
    return { svc, cachePath, logs };
}

const allowedRevision = async (svc: AuthService, key: TestKey) => {
    const r = await check(svc.port, { key: key.secret, model: MODEL });
    return r.status === 200 ? r.headers.get(IDENTITY_HEADERS.revision) : r.status;
};

describe("no bundle ever loaded", () => {
    it("denies everything with 503 and is not ready, until a verified bundle arrives", async () => {
        const { svc, cachePath } = await start("spoke-empty");
        const r = await check(svc.port, { key: k1.secret, model: MODEL });
        expect(r.status).toBe(503);
        expect(r.error).toMatchObject({ type: "server_error", code: "policy_unavailable" });
        expect(r.headers.get(IDENTITY_HEADERS.tenant)).toBeNull();
        const ready = await ops(svc.opsPort, "/readyz");
        expect(ready.status).toBe(503);
        expect(JSON.parse(ready.text)).toMatchObject({ ready: false, revision: null, problems: ["no verified policy bundle loaded"] });
        expect((await ops(svc.opsPort, "/healthz")).status).toBe(200);
        expect((await ops(svc.opsPort, "/metrics")).text).toMatch(/^auth_bundle_revision 0$/m);

        await publishBundle(s3, hub, "spoke-empty", 1, rev1);
        expect(await svc.bundles.syncOnce()).toBe("updated");
        expect(await allowedRevision(svc, k1)).toBe("1");
        expect((await ops(svc.opsPort, "/readyz")).status).toBe(200);
        // Cached for restarts, as the signed document (re-verifiable).
        expect(verifyBundle(await fs.readFile(cachePath, "utf8"), hub.publicKey, "spoke-empty").revision).toBe(1);
    });

    it("a bundle signed for another spoke is rejected: still 503", async () => {
        await publishBundle(s3, hub, "spoke-wrong", 1, rev1, { signFor: "spoke-other" });
        const { svc, logs } = await start("spoke-wrong");
        expect(await svc.bundles.syncOnce()).toBe("rejected");
        expect((await check(svc.port, { key: k1.secret, model: MODEL })).status).toBe(503);
        expect(logs.lines.join("\n")).toContain('not \\"spoke-wrong\\"');
        expect(await s3.get(bundlePaths.ack("spoke-wrong", 1))).toBeUndefined();
    });

    it("a bundle signed with another key is rejected: still 503", async () => {
        await publishBundle(s3, hubKeys(), "spoke-forged", 1, rev1);
        const { svc } = await start("spoke-forged");
        expect(await svc.bundles.syncOnce()).toBe("rejected");
        expect((await check(svc.port, { key: k1.secret, model: MODEL })).status).toBe(503);
        expect((await ops(svc.opsPort, "/metrics")).text).toMatch(
            /auth_bundle_syncs_total\{result="rejected",reason="verify_failed"\} [1-9]/,
        );
    });
});

describe("lifecycle of one spoke", () => {
    const SPOKE = "spoke-life";
    let clock = Date.now();

    it("serves revision 1 and ACKs it", async () => {
        await publishBundle(s3, hub, SPOKE, 1, rev1);
        const { svc } = await start(SPOKE, { now: () => clock });
        expect(await allowedRevision(svc, k1)).toBe("1");
        const ack = AckSchema.parse(JSON.parse((await s3.get(bundlePaths.ack(SPOKE, 1)))!));
        expect(ack).toEqual({
            spoke: SPOKE,
            revision: 1,
            contentHash: verifyBundle(await s3.get(bundlePaths.bundle(SPOKE, 1)), hub.publicKey, SPOKE).contentHash,
            at: new Date(clock).toISOString(),
        });
    });

    it("rotates to revision 2: new key allowed, removed key refused, ACK 2, cache updated", async () => {
        const { svc, cachePath } = await start(SPOKE, { now: () => clock });
        await publishBundle(s3, hub, SPOKE, 2, rev2);
        expect(await svc.bundles.syncOnce()).toBe("updated");
        expect(await allowedRevision(svc, k2)).toBe("2");
        expect(await allowedRevision(svc, k1)).toBe(401);
        expect(AckSchema.parse(JSON.parse((await s3.get(bundlePaths.ack(SPOKE, 2)))!)).revision).toBe(2);
        expect(verifyBundle(await fs.readFile(cachePath, "utf8"), hub.publicKey, SPOKE).revision).toBe(2);
        expect(await svc.bundles.syncOnce()).toBe("unchanged");
    });

    it("never goes back: a pointer to revision 1 is ignored", async () => {
        const { svc } = await start(SPOKE, { now: () => clock });
        expect(await allowedRevision(svc, k2)).toBe("2");
        await publishBundle(s3, hub, SPOKE, 1, rev1);
        expect(await svc.bundles.syncOnce()).toBe("rejected");
        expect(await allowedRevision(svc, k2)).toBe("2");
        expect(await allowedRevision(svc, k1)).toBe(401);
        expect((await ops(svc.opsPort, "/metrics")).text).toMatch(/auth_bundle_syncs_total\{result="rejected",reason="rollback"\} 1/);
    });

    it("a tampered revision 3 is rejected and the last-known-good keeps serving", async () => {
        const { svc, cachePath } = await start(SPOKE, { now: () => clock });
        expect(await allowedRevision(svc, k2)).toBe("2");
        // Someone with bucket write access (but not the hub's signing key) adds their own key.
        await publishBundle(s3, hub, SPOKE, 3, rev2, {
            mutate: (doc) => {
                doc.bundle.policy.apiKeys.push(makePolicy({ models: {}, keys: [{ ...k1, id: "evil" }] }).apiKeys[0]);
            },
        });
        expect(await svc.bundles.syncOnce()).toBe("rejected");
        expect(await allowedRevision(svc, k1)).toBe(401);
        expect(await allowedRevision(svc, k2)).toBe("2");
        expect(await s3.get(bundlePaths.ack(SPOKE, 3))).toBeUndefined();
        expect(verifyBundle(await fs.readFile(cachePath, "utf8"), hub.publicKey, SPOKE).revision).toBe(2);
        expect((await ops(svc.opsPort, "/readyz")).status).toBe(200);
    });

    it("hub outage: the last-known-good keeps serving and the bundle age grows", async () => {
        await publishBundle(s3, hub, SPOKE, 4, rev2);
        const { svc } = await start(SPOKE, { now: () => clock });
        expect(await allowedRevision(svc, k2)).toBe("4");
        await s3.stop();
        try {
            clock += 600_000;
            expect(await svc.bundles.syncOnce()).toBe("error");
            expect(await allowedRevision(svc, k2)).toBe("4");
            expect((await ops(svc.opsPort, "/readyz")).status).toBe(200);
            const m = (await ops(svc.opsPort, "/metrics")).text;
            expect(Number(/^auth_bundle_age_seconds (\S+)$/m.exec(m)?.[1])).toBeGreaterThanOrEqual(600);
            expect(m).toMatch(/auth_bundle_syncs_total\{result="error",reason="hub_unreachable"\} 1/);
        } finally {
            await s3.start();
        }
    });

    it("a fresh process with only the cache file serves while the hub is unreachable", async () => {
        const deadHub = `http://127.0.0.1:${await freePort()}`;
        const { svc } = await start(SPOKE, { s3Endpoint: deadHub, now: () => clock });
        expect(await allowedRevision(svc, k2)).toBe("4");
        expect((await ops(svc.opsPort, "/readyz")).status).toBe(200);
        expect(await svc.bundles.syncOnce()).toBe("error");
    });

    it("a tampered cache file is not trusted at startup", async () => {
        const cacheName = "tampered-cache.json";
        const doc = JSON.parse((await s3.get(bundlePaths.bundle(SPOKE, 4)))!);
        doc.bundle.policy.apiKeys[0].models.push("other-model");
        await fs.writeFile(path.join(tmp.dir, cacheName), JSON.stringify(doc));
        const { svc, logs } = await start(SPOKE, { s3Endpoint: `http://127.0.0.1:${await freePort()}`, cacheName });
        expect((await check(svc.port, { key: k2.secret, model: MODEL })).status).toBe(503);
        expect(logs.lines.join("\n")).toContain("policy bundle cache file rejected");
    });
});

describe("polling", () => {
    it("picks up a new revision on its own at the configured interval", async () => {
        const SPOKE = "spoke-poll";
        await publishBundle(s3, hub, SPOKE, 1, rev1);
        // A sync is cut off at the poll interval (bundles.ts): 0.5 s leaves a loaded test machine's S3 stand-in time to
        // answer, where 0.1 s could cut every sync off and leave the service with no bundle (503).
        const { svc } = await start(SPOKE, { env: { AUTH_POLL_INTERVAL_SECONDS: "0.5" } });
        expect(await allowedRevision(svc, k1)).toBe("1");
        await publishBundle(s3, hub, SPOKE, 2, rev2);
        await expect.poll(() => allowedRevision(svc, k2), { timeout: 10_000, interval: 50 }).toBe("2");
        await expect.poll(async () => s3.get(bundlePaths.ack(SPOKE, 2)), { timeout: 10_000, interval: 50 }).toBeDefined();
    });
});
