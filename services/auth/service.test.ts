import { Redis } from "ioredis";
import * as path from "node:path";
import { afterAll, beforeAll, beforeEach, describe, expect, it } from "vitest";
import { IDENTITY_HEADERS, redisKeys, type Tier, tierIds, windowStart } from "../shared/identity";
import { addTokens, leasesHeld, type LimitDimension, parseCounterLease, releaseLease, type TierLimit } from "../shared/limits";
import { type AuthService, startAuthService } from "./server";
import { check, ops } from "./test/client";
import {
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
    UNLIMITED,
} from "./test/harness";

const SPOKE = "spoke-a";
const MODEL = "meta-llama/Llama-3.3-70B-Instruct";
const LEASE_TTL_S = 960;
/** Fake clock, starting on a future hour boundary so every Redis expiry it sets lies in the real future. */
const T0 = Math.ceil(Date.now() / 3_600_000) * 3_600_000 + 3_600_000;
let clock = T0;

const alice: TestKey = {
    id: "key-alice",
    secret: "sk-alice-0123456789",
    tenant: "acme",
    team: "research",
    models: [MODEL, "elsewhere-model"],
};
/** A key whose own concurrency limit (5) leaves a grant room to take slots ahead (1 + (5 - 1) / 4 = 2). */
const exact: TestKey = {
    id: "key-exact",
    secret: "sk-exact-0123456789",
    tenant: "acme",
    team: "exact",
    models: [MODEL],
    limits: { ...UNLIMITED, concurrentRequests: 5 },
};
const expired: TestKey = {
    id: "key-old",
    secret: "sk-old-0123456789",
    tenant: "acme",
    team: "research",
    models: [MODEL],
    expiresAt: new Date(T0 - 1000).toISOString(),
};

/** One scenario per (tier, dimension): its own model, team and key, with only that tier's dimension tight. */
const TIGHT: Record<LimitDimension, TierLimit> = {
    rps: { ...UNLIMITED, requestsPerSecond: 2 },
    concurrency: { ...UNLIMITED, concurrentRequests: 2 },
    tokens: { ...UNLIMITED, tokensPerWindow: 1000, windowSeconds: 60 },
};
const scenarios = (["model", "team", "key"] as Tier[]).flatMap((tier) =>
    (["rps", "concurrency", "tokens"] as LimitDimension[]).map((dim) => {
        const name = `${tier}-${dim}`;
        const key: TestKey = {
            id: `key-${name}`,
            secret: `sk-${name}-secret`,
            tenant: "globex",
            team: `team-${name}`,
            models: [`model-${name}`],
            limits: tier === "key" ? TIGHT[dim] : UNLIMITED,
        };
        return { tier, dim, name, key, model: `model-${name}` };
    }),
);

const policy = makePolicy({
    models: { [MODEL]: undefined, ...Object.fromEntries(scenarios.map((s) => [s.model, s.tier === "model" ? TIGHT[s.dim] : undefined])) },
    keys: [alice, exact, expired, ...scenarios.map((s) => s.key)],
    teamLimits: Object.fromEntries(scenarios.filter((s) => s.tier === "team").map((s) => [`globex/${s.key.team}`, TIGHT[s.dim]])),
});

let redis: RedisServer;
let s3: S3Server;
let tmp: TempDir;
let admin: Redis;
let svc: AuthService;
const logs = memoryLogger();

beforeAll(async () => {
    [redis, s3] = await Promise.all([startRedis(), startS3()]);
    tmp = tempDir("auth-svc-");
    const keys = hubKeys();
    await publishBundle(s3, keys, SPOKE, 1, policy);
    admin = new Redis(redis.url);
    admin.on("error", () => {
        /* expected while the outage test has Redis down */
    });
    svc = await startAuthService(
        testConfig({
            spoke: SPOKE,
            publicKey: keys.publicKey,
            s3Endpoint: s3.endpoint,
            redisUrl: redis.url,
            cachePath: path.join(tmp.dir, "bundle.json"),
            // A command timeout well above a loaded CI machine's stalls: a timed-out check is a 503 (fail closed),
            // which the exact-at-the-limit races would count as a refusal. Outages here are refused connections.
            env: { AUTH_LEASE_TTL_SECONDS: String(LEASE_TTL_S), AUTH_MAX_BODY_BYTES: String(64 * 1024), AUTH_REDIS_TIMEOUT_MS: "2000" },
        }),
        { log: logs.log, now: () => clock },
    );
});

afterAll(async () => {
    await svc?.close();
    admin?.disconnect();
    await Promise.all([redis?.stop(), s3?.destroy()]);
    tmp?.remove();
});

beforeEach(async () => {
    clock = T0;
    // The service runs with its default grants (services/auth/admission.ts): a key that sent a burst in the
    // previous test may hold slots for up to AUTH_GRANT_HOLD_MS. Let them be given back before wiping Redis, so
    // each test starts from per-request checks against an empty Redis.
    await expect
        .poll(async () => /^auth_grant_held_slots 0$/m.test((await ops(svc.opsPort, "/metrics")).text), { timeout: 5_000, interval: 20 })
        .toBe(true);
    await admin.flushall();
});

describe("allow", () => {
    it("returns 200 with every trusted identity header, overwriting spoofed client values", async () => {
        const spoofed = Object.fromEntries(Object.values(IDENTITY_HEADERS).map((h) => [h, "spoofed"]));
        const r = await check(svc.port, { key: alice.secret, model: MODEL, headers: spoofed });
        expect(r.status).toBe(200);
        expect(r.error).toBeUndefined();
        const h = Object.fromEntries(Object.values(IDENTITY_HEADERS).map((n) => [n, r.headers.get(n)]));
        expect(h).toMatchObject({
            [IDENTITY_HEADERS.tenant]: "acme",
            [IDENTITY_HEADERS.team]: "research",
            [IDENTITY_HEADERS.keyId]: "key-alice",
            [IDENTITY_HEADERS.model]: MODEL,
            [IDENTITY_HEADERS.revision]: "1",
        });
        // A counter lease expiring after the lease TTL, held in all three tiers until metering releases it.
        const lease = parseCounterLease(h[IDENTITY_HEADERS.lease]!);
        expect(lease).toMatchObject({ bucketMs: T0 + LEASE_TTL_S * 1000, slot: 0 });
        const ids = tierIds({ model: MODEL, tenant: "acme", team: "research", keyId: "key-alice" });
        for (const t of ["model", "team", "key"] as Tier[]) expect(await leasesHeld(admin, t, ids[t], T0)).toBe(1);
        expect(await releaseLease(admin, ids, h[IDENTITY_HEADERS.lease]!)).toBe(3);
        for (const t of ["model", "team", "key"] as Tier[]) expect(await leasesHeld(admin, t, ids[t], T0)).toBe(0);
    });

    it("serves every path under the prefix (Envoy prepends it to the client's path)", async () => {
        expect((await check(svc.port, { key: alice.secret, model: MODEL, path: "/authz/v1/completions?x=1" })).status).toBe(200);
    });
});

describe("deny", () => {
    it("401 for a missing, unknown or non-bearer key, with an OpenAI-style body", async () => {
        const variants: Record<string, string>[] = [
            {},
            { authorization: "Bearer sk-nope" },
            { authorization: `Basic ${alice.secret}` },
            { authorization: "Bearer" },
        ];
        for (const headers of variants) {
            const r = await check(svc.port, { model: MODEL, headers });
            expect(r.status).toBe(401);
            expect(r.headers.get("content-type")).toBe("application/json");
            expect(r.error).toEqual({ message: expect.any(String), type: "invalid_request_error", code: "invalid_api_key" });
            expect(r.headers.get(IDENTITY_HEADERS.tenant)).toBeNull();
        }
    });

    it("401 for an expired key", async () => {
        const r = await check(svc.port, { key: expired.secret, model: MODEL });
        expect(r.status).toBe(401);
        expect(r.error?.code).toBe("expired_api_key");
    });

    it("403 for a model the key may not use, and for one the key lists but this spoke does not serve", async () => {
        for (const model of [scenarios[0].model, "elsewhere-model"]) {
            const r = await check(svc.port, { key: alice.secret, model });
            expect(r.status).toBe(403);
            expect(r.error).toMatchObject({ type: "invalid_request_error", code: "model_not_allowed" });
        }
    });

    it("400 when the body has no usable model; 401 still comes first for a bad key", async () => {
        for (const body of ["not json", "{}", JSON.stringify({ model: 7 }), JSON.stringify({ model: "x".repeat(300) }), "null"]) {
            const r = await check(svc.port, { key: alice.secret, body });
            expect(r.status).toBe(400);
            expect(r.error?.code).toBe("model_required");
        }
        expect((await check(svc.port, { key: "sk-nope", body: "{}" })).status).toBe(401);
    });

    it("GET /v1/models needs only a valid key: identity headers, no model, no lease, nothing consumed", async () => {
        const keysBefore = await admin.keys("rl:*");
        const r = await check(svc.port, { key: alice.secret, method: "GET", path: "/authz/v1/models" });
        expect(r.status).toBe(200);
        expect(r.headers.get(IDENTITY_HEADERS.tenant)).toBe("acme");
        expect(r.headers.get(IDENTITY_HEADERS.keyId)).toBe("key-alice");
        expect(r.headers.get(IDENTITY_HEADERS.model)).toBeNull();
        expect(r.headers.get(IDENTITY_HEADERS.lease)).toBeNull();
        expect((await admin.keys("rl:*")).sort()).toEqual(keysBefore.sort());
        expect((await check(svc.port, { key: "sk-nope", method: "GET", path: "/authz/v1/models" })).status).toBe(401);
        expect((await check(svc.port, { key: expired.secret, method: "GET", path: "/authz/v1/models?limit=5" })).status).toBe(401);
        // Only the listing is exempt: another GET without a body still needs a model.
        expect((await check(svc.port, { key: alice.secret, method: "GET", path: "/authz/v1/models/x/extra" })).status).toBe(400);
    });

    it("413 for a body over AUTH_MAX_BODY_BYTES", async () => {
        const r = await check(svc.port, { key: alice.secret, body: JSON.stringify({ model: MODEL, pad: "x".repeat(70 * 1024) }) });
        expect(r.status).toBe(413);
        expect(r.error?.code).toBe("request_too_large");
    });

    it("404 outside the ext_authz prefix (no ops endpoint on this port)", async () => {
        for (const p of ["/metrics", "/healthz", "/authzx/v1/chat/completions"]) {
            expect((await check(svc.port, { key: alice.secret, model: MODEL, path: p })).status).toBe(404);
        }
    });
});

describe("three-tier limits", () => {
    const ids = (s: (typeof scenarios)[number]) => tierIds({ model: s.model, tenant: "globex", team: s.key.team, keyId: s.key.id });

    for (const s of scenarios.filter((x) => x.dim === "rps")) {
        it(`${s.tier} tier: requests per second`, async () => {
            expect((await check(svc.port, { key: s.key.secret, model: s.model })).status).toBe(200);
            expect((await check(svc.port, { key: s.key.secret, model: s.model })).status).toBe(200);
            const denied = await check(svc.port, { key: s.key.secret, model: s.model });
            expect(denied.status).toBe(429);
            expect(denied.headers.get("retry-after")).toBe("1");
            expect(denied.error).toMatchObject({ type: "requests", code: "rate_limit_exceeded" });
            expect(denied.error?.message).toContain("requests per second");
            clock += 500; // GCRA: one slot back every 1000/rps ms
            expect((await check(svc.port, { key: s.key.secret, model: s.model })).status).toBe(200);
            expect((await check(svc.port, { key: s.key.secret, model: s.model })).status).toBe(429);
        });
    }

    for (const s of scenarios.filter((x) => x.dim === "concurrency")) {
        it(`${s.tier} tier: concurrent requests, released by releaseLease`, async () => {
            const first = await check(svc.port, { key: s.key.secret, model: s.model });
            expect(first.status).toBe(200);
            expect((await check(svc.port, { key: s.key.secret, model: s.model })).status).toBe(200);
            clock += 10_000;
            const denied = await check(svc.port, { key: s.key.secret, model: s.model });
            expect(denied.status).toBe(429);
            expect(denied.headers.get("retry-after")).toBe("1");
            expect(denied.error?.message).toContain("concurrent requests");
            expect(await releaseLease(admin, ids(s), first.headers.get(IDENTITY_HEADERS.lease)!)).toBe(3);
            expect((await check(svc.port, { key: s.key.secret, model: s.model })).status).toBe(200);
            expect((await check(svc.port, { key: s.key.secret, model: s.model })).status).toBe(429);
        });

        it(`${s.tier} tier: N simultaneous requests against a concurrency limit of N admit exactly N, round after round (N = 2)`, async () => {
            for (let round = 0; round < 13; round++) {
                const rs = await Promise.all(Array.from({ length: 20 }, () => check(svc.port, { key: s.key.secret, model: s.model })));
                const ok = rs.filter((r) => r.status === 200);
                expect({
                    round,
                    admitted: ok.length,
                    others: [...new Set(rs.filter((r) => r.status !== 200).map((r) => r.status))],
                }).toEqual({ round, admitted: TIGHT.concurrency.concurrentRequests, others: [429] });
                // The requests end: metering releases their leases.
                for (const r of ok) expect(await releaseLease(admin, ids(s), r.headers.get(IDENTITY_HEADERS.lease)!)).toBe(3);
            }
        });

        it(`${s.tier} tier: an unreleased lease expires after the lease TTL`, async () => {
            expect((await check(svc.port, { key: s.key.secret, model: s.model })).status).toBe(200);
            expect((await check(svc.port, { key: s.key.secret, model: s.model })).status).toBe(200);
            clock += LEASE_TTL_S * 1000 - 1;
            expect((await check(svc.port, { key: s.key.secret, model: s.model })).status).toBe(429);
            clock += 1;
            expect((await check(svc.port, { key: s.key.secret, model: s.model })).status).toBe(200);
        });
    }

    it("50 simultaneous requests against a concurrency limit of 5 admit exactly 5, round after round, with grants", async () => {
        const exactIds = tierIds({ model: MODEL, tenant: exact.tenant, team: exact.team, keyId: exact.id });
        for (let round = 0; round < 13; round++) {
            const rs = await Promise.all(Array.from({ length: 50 }, () => check(svc.port, { key: exact.secret, model: MODEL })));
            const ok = rs.filter((r) => r.status === 200);
            expect({ round, admitted: ok.length, others: [...new Set(rs.filter((r) => r.status !== 200).map((r) => r.status))] }).toEqual({
                round,
                admitted: 5,
                others: [429],
            });
            for (const r of ok) expect(await releaseLease(admin, exactIds, r.headers.get(IDENTITY_HEADERS.lease)!)).toBe(3);
        }
    });

    for (const s of scenarios.filter((x) => x.dim === "tokens")) {
        it(`${s.tier} tier: tokens per window, from the counters metering adds to`, async () => {
            clock = T0 + 15_000; // 45 s left in the 60 s window
            const windows = { model: 60, team: 60, key: 60 };
            await addTokens(admin, ids(s), 999, clock, windows);
            expect((await check(svc.port, { key: s.key.secret, model: s.model })).status).toBe(200);
            await addTokens(admin, ids(s), 1, clock, windows);
            const denied = await check(svc.port, { key: s.key.secret, model: s.model });
            expect(denied.status).toBe(429);
            expect(denied.headers.get("retry-after")).toBe("45");
            expect(denied.error).toMatchObject({ type: "tokens", code: "rate_limit_exceeded" });
            clock = (windowStart(clock, 60) + 60) * 1000; // next window
            expect((await check(svc.port, { key: s.key.secret, model: s.model })).status).toBe(200);
        });
    }

    it("a denied request consumes nothing in any tier", async () => {
        const s = scenarios.find((x) => x.tier === "key" && x.dim === "tokens")!;
        const i = ids(s);
        await addTokens(admin, i, 1000, clock, { model: 60, team: 60, key: 60 });
        const denied = await check(svc.port, { key: s.key.secret, model: s.model });
        expect(denied.status).toBe(429);
        const state = (["model", "team", "key"] as Tier[]).flatMap((t) => [
            redisKeys.rps(t, i[t]),
            redisKeys.concurrency(t, i[t]),
            redisKeys.counters(t, i[t]),
        ]);
        expect(await admin.exists(...state)).toBe(0);
    });
});

describe("operations", () => {
    it("/healthz and /readyz are up with a bundle and Redis", async () => {
        expect(await ops(svc.opsPort, "/healthz")).toEqual({ status: 200, text: "ok\n" });
        const ready = await ops(svc.opsPort, "/readyz");
        expect(ready.status).toBe(200);
        expect(JSON.parse(ready.text)).toEqual({ ready: true, revision: 1, problems: [] });
    });

    it("/metrics exposes decisions by code and tier, bundle revision and age, Redis latency", async () => {
        const s = scenarios.find((x) => x.tier === "team" && x.dim === "rps")!;
        for (let i = 0; i < 3; i++) await check(svc.port, { key: s.key.secret, model: s.model });
        await check(svc.port, { key: "sk-nope", model: MODEL });
        clock = T0 + 42_000;
        const m = await ops(svc.opsPort, "/metrics");
        expect(m.status).toBe(200);
        expect(m.text).toMatch(/auth_decisions_total\{code="429",tier="team",reason="rate_limit_exceeded"\} [1-9]/);
        expect(m.text).toMatch(/auth_decisions_total\{code="200",tier="none",reason="allowed"\} [1-9]/);
        expect(m.text).toMatch(/auth_decisions_total\{code="401",tier="none",reason="invalid_api_key"\} [1-9]/);
        expect(m.text).toMatch(/^auth_bundle_revision 1$/m);
        const age = Number(/^auth_bundle_age_seconds (\S+)$/m.exec(m.text)?.[1]);
        expect(age).toBeGreaterThanOrEqual(42);
        expect(m.text).toMatch(/auth_redis_latency_seconds_count\{op="check",result="ok"\} [1-9]/);
        expect(m.text).toContain("auth_check_duration_seconds_bucket");
    });

    it("never logs API keys", () => {
        const all = logs.lines.join("\n");
        for (const k of [alice, expired, ...scenarios.map((s) => s.key)]) expect(all).not.toContain(k.secret);
        expect(logs.lines.length).toBeGreaterThan(0);
    });
});

describe("Redis outage (fail closed)", () => {
    it("answers 503 while Redis is down, is not ready, and recovers when it is back", async () => {
        await redis.stop();
        const r = await check(svc.port, { key: alice.secret, model: MODEL });
        expect(r.status).toBe(503);
        expect(r.error).toMatchObject({ type: "server_error", code: "limits_unavailable" });
        expect(r.headers.get(IDENTITY_HEADERS.tenant)).toBeNull();
        const ready = await ops(svc.opsPort, "/readyz");
        expect(ready.status).toBe(503);
        expect(JSON.parse(ready.text).problems[0]).toMatch(/^redis unreachable/);
        // Auth decisions that need no Redis still come first.
        expect((await check(svc.port, { key: "sk-nope", model: MODEL })).status).toBe(401);
        // One log line per outage, not one per denied request.
        for (let i = 0; i < 3; i++) expect((await check(svc.port, { key: alice.secret, model: MODEL })).status).toBe(503);
        expect(logs.lines.filter((l) => l.includes("limit check failed")).length).toBe(1);

        await redis.start();
        await expect.poll(async () => (await ops(svc.opsPort, "/readyz")).status, { timeout: 10_000, interval: 100 }).toBe(200);
        expect((await check(svc.port, { key: alice.secret, model: MODEL })).status).toBe(200);
    });
});
