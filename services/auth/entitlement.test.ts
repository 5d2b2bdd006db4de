import { createHmac } from "node:crypto";
import * as path from "node:path";
import { Redis } from "ioredis";
import { afterAll, beforeAll, beforeEach, describe, expect, it } from "vitest";
import type { Policy } from "../shared/bundle";
import { DYNAMO_HEADERS } from "../shared/identity";
import { type AuthService, startAuthService } from "./server";
import { check, ops } from "./test/client";
import {
    hubKeys,
    makePolicy,
    publishBundle,
    type RedisServer,
    type S3Server,
    startRedis,
    startS3,
    TEST_SALT_KEY,
    type TempDir,
    type TestKey,
    tempDir,
    testConfig,
} from "./test/harness";

// The auth decision against a real Redis (admission) and an S3 stand-in (the signed bundle): the client's hints are
// clamped to the key's entitlement and the cache salt is the platform's, whatever the client sends.

const SPOKE = "spoke-e";
const MODEL = "Qwen/Qwen3-32B";
const key = (id: string, tenant: string, team: string): TestKey => ({ id, secret: `sk-${id}-0123456789`, tenant, team, models: [MODEL] });
const acmeSearch = key("acme-search", "acme", "search");
const acmeSearch2 = key("acme-search-2", "acme", "search");
const acmeAgents = key("acme-agents", "acme", "agents");
const globex = key("globex-research", "globex", "research");
const initech = key("initech-ops", "initech", "ops");
const umbrella = key("umbrella-ops", "umbrella", "ops");

/** Entitlements as the hub resolves them (config/serving-policy.ts keyServing), written into the bundle. */
const SERVING: Record<string, NonNullable<Policy["apiKeys"][number]["serving"]>> = {
    [acmeSearch.id]: { priority: 5, strictPriority: 2, maxOutputLengthHint: 4096, cacheScopes: { [MODEL]: "team:acme/search" } },
    [acmeSearch2.id]: { priority: 1, strictPriority: 0, maxOutputLengthHint: 1024, cacheScopes: { [MODEL]: "team:acme/search" } },
    [acmeAgents.id]: { priority: 5, strictPriority: 2, maxOutputLengthHint: 4096, cacheScopes: { [MODEL]: "team:acme/agents" } },
    [globex.id]: { priority: 1, strictPriority: 1, maxOutputLengthHint: 2048, cacheScopes: { [MODEL]: "tenant:globex" } },
    [initech.id]: { priority: 0, strictPriority: 0, maxOutputLengthHint: 0, cacheScopes: { [MODEL]: "shared:ops-pool" } },
    [umbrella.id]: { priority: 0, strictPriority: 0, maxOutputLengthHint: 0, cacheScopes: { [MODEL]: "shared:ops-pool" } },
};
const base = makePolicy({ models: { [MODEL]: undefined }, keys: [acmeSearch, acmeSearch2, acmeAgents, globex, initech, umbrella] });
const policy: Policy = { ...base, apiKeys: base.apiKeys.map((k) => ({ ...k, serving: SERVING[k.id] })) };

/** The salt computed independently of the service: HMAC-SHA256(key, scope), base64url, 32 characters. */
const expectedSalt = (scope: string) =>
    createHmac("sha256", Buffer.from(TEST_SALT_KEY, "base64")).update(scope).digest("base64url").slice(0, 32);

const body = (nvext?: object, extra: object = {}) =>
    JSON.stringify({ model: MODEL, messages: [{ role: "user", content: "hi" }], ...(nvext ? { nvext } : {}), ...extra });

let redis: RedisServer;
let s3: S3Server;
let tmp: TempDir;
let admin: Redis;
let svc: AuthService;

beforeAll(async () => {
    [redis, s3] = await Promise.all([startRedis(), startS3()]);
    tmp = tempDir("auth-entitlement-");
    const keys = hubKeys();
    await publishBundle(s3, keys, SPOKE, 1, policy);
    admin = new Redis(redis.url);
    svc = await startAuthService(
        testConfig({
            spoke: SPOKE,
            publicKey: keys.publicKey,
            s3Endpoint: s3.endpoint,
            redisUrl: redis.url,
            cachePath: path.join(tmp.dir, "bundle.json"),
            env: { AUTH_REDIS_TIMEOUT_MS: "2000", AUTH_GRANT_HOLD_MS: "0" },
        }),
    );
});

afterAll(async () => {
    await svc?.close();
    admin?.disconnect();
    await Promise.all([redis?.stop(), s3?.destroy()]);
    tmp?.remove();
});

beforeEach(async () => {
    await admin.flushall();
});

describe("priority as an entitlement", () => {
    it("clamps a client's higher priority and tier to the key's ceiling, through a real admission", async () => {
        const r = await check(svc.port, { key: acmeSearch.secret, body: body({ agent_hints: { priority: 1000, strict_priority: 9 } }) });
        expect(r.status).toBe(200);
        expect(r.headers.get(DYNAMO_HEADERS.priority)).toBe("5");
        expect(r.headers.get(DYNAMO_HEADERS.strictPriority)).toBe("2");
        // The admission ran against Redis: the request holds a concurrency lease there.
        expect((await admin.keys("rl:*")).length).toBeGreaterThan(0);
    });

    it("keeps a client's lower hints (never raises them) and gives the entitlement when none are sent", async () => {
        const lower = await check(svc.port, { key: acmeSearch.secret, body: body({ agent_hints: { priority: -3, strict_priority: 1 } }) });
        expect([lower.headers.get(DYNAMO_HEADERS.priority), lower.headers.get(DYNAMO_HEADERS.strictPriority)]).toEqual(["-3", "1"]);
        const none = await check(svc.port, { key: globex.secret, model: MODEL });
        expect([none.headers.get(DYNAMO_HEADERS.priority), none.headers.get(DYNAMO_HEADERS.strictPriority)]).toEqual(["1", "1"]);
    });

    it("overwrites priority headers the client sent itself", async () => {
        const r = await check(svc.port, {
            key: acmeSearch2.secret,
            model: MODEL,
            headers: { [DYNAMO_HEADERS.priority]: "999", [DYNAMO_HEADERS.strictPriority]: "999" },
        });
        expect(r.status).toBe(200);
        expect([r.headers.get(DYNAMO_HEADERS.priority), r.headers.get(DYNAMO_HEADERS.strictPriority)]).toEqual(["1", "0"]);
    });

    it("refuses an output-length hint above the ceiling before any limit is consumed", async () => {
        const r = await check(svc.port, { key: acmeSearch2.secret, body: body({ agent_hints: { osl: 1025 } }) });
        expect(r.status).toBe(400);
        expect(r.error?.code).toBe("hint_above_entitlement");
        expect(r.error?.message).toMatch(/osl 1025 is above .* 1024 tokens/);
        expect(await admin.keys("rl:*")).toEqual([]);
        const ok = await check(svc.port, { key: acmeSearch2.secret, body: body({ agent_hints: { osl: 1024 } }) });
        expect(ok.status).toBe(200);
    });
});

describe("tenant-bound cache salt", () => {
    it("sends the derived salt, not the one the client put in the body or the header", async () => {
        const r = await check(svc.port, {
            key: globex.secret,
            body: body({ cache_salt: "tenant-acme-guess" }, { cache_salt: "top-level-guess" }),
            headers: { [DYNAMO_HEADERS.cacheSalt]: "acme" },
        });
        expect(r.status).toBe(200);
        expect(r.headers.get(DYNAMO_HEADERS.cacheSalt)).toBe(expectedSalt("tenant:globex"));
    });

    it("gives two tenants different salts, one team's keys the same, and a sharing group one salt", async () => {
        const salt = async (k: TestKey) => (await check(svc.port, { key: k.secret, model: MODEL })).headers.get(DYNAMO_HEADERS.cacheSalt);
        const [s1, s2, s3_, g, i, u] = await Promise.all([acmeSearch, acmeSearch2, acmeAgents, globex, initech, umbrella].map(salt));
        expect(s1).toBe(expectedSalt("team:acme/search"));
        expect(s2).toBe(s1);
        expect(s3_).not.toBe(s1);
        expect(g).not.toBe(s1);
        expect(i).toBe(expectedSalt("shared:ops-pool"));
        expect(u).toBe(i);
        expect(new Set([s1, s3_, g, i]).size).toBe(4);
    });

    it("never logs or exposes the salt key", async () => {
        const metrics = await ops(svc.opsPort, "/metrics");
        expect(metrics.text).not.toContain(TEST_SALT_KEY);
    });
});
