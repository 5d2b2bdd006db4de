import { describe, expect, it } from "vitest";
import { signBundle } from "../shared/bundle";
import { ConfigError, describeConfig, loadConfig } from "./config";
import { bearerToken, hashApiKey, isRefusal, PolicyIndex } from "./policy";
import { hubKeys, makePolicy, type TestKey, UNLIMITED } from "./test/harness";

/** Pure parts of the auth service: policy index, bearer parsing, configuration. No servers. */

const hub = hubKeys();
const key: TestKey = {
    id: "k1",
    secret: "sk-abc",
    tenant: "acme",
    team: "core",
    models: ["m1", "m-elsewhere"],
    expiresAt: "2030-01-01T00:00:00Z",
};
const bundle = (policy = makePolicy({ models: { m1: undefined, m2: { ...UNLIMITED, requestsPerSecond: 3 } }, keys: [key] })) =>
    signBundle(hub.seed, "s", 7, policy).bundle;

describe("bearerToken", () => {
    it("accepts 'Bearer <key>' with any scheme case and rejects everything else", () => {
        expect(bearerToken("Bearer sk-abc")).toBe("sk-abc");
        expect(bearerToken("bearer   sk-abc ")).toBe("sk-abc");
        for (const h of [undefined, "", "Bearer", "Bearer ", "Basic sk-abc", "Bearer a b", "sk-abc"])
            expect(bearerToken(h)).toBeUndefined();
    });
});

describe("PolicyIndex", () => {
    const index = new PolicyIndex(bundle());
    const t = Date.parse("2029-06-01T00:00:00Z");

    it("resolves a key by the SHA-256 of the bearer token, with its team's and its own limits", () => {
        const k = index.authenticate("sk-abc", t);
        expect(isRefusal(k)).toBe(false);
        if (isRefusal(k)) return;
        expect(k).toMatchObject({ keyId: "k1", tenant: "acme", team: "core" });
        expect(index.authorizeModel(k, "m1")).toEqual({ model: UNLIMITED, team: UNLIMITED, key: UNLIMITED });
        expect(hashApiKey("sk-abc")).toMatch(/^[0-9a-f]{64}$/);
        expect(index.revision).toBe(7);
    });

    it("refuses unknown, missing and expired keys with 401, and models outside the key or the spoke with 403", () => {
        expect(index.authenticate("sk-other", t)).toMatchObject({ status: 401, code: "invalid_api_key" });
        expect(index.authenticate(undefined, t)).toMatchObject({ status: 401, code: "invalid_api_key" });
        expect(index.authenticate("sk-abc", Date.parse(key.expiresAt!))).toMatchObject({ status: 401, code: "expired_api_key" });
        const k = index.authenticate("sk-abc", t);
        if (isRefusal(k)) throw new Error("expected a key");
        expect(index.authorizeModel(k, "m2")).toMatchObject({ status: 403, code: "model_not_allowed" });
        expect(index.authorizeModel(k, "m-elsewhere")).toMatchObject({ status: 403, code: "model_not_allowed" });
    });

    it("rejects an inconsistent policy (so the bundle is refused and the last-known-good kept)", () => {
        const base = makePolicy({ models: { m1: undefined }, keys: [key] });
        const dupHash = { ...base, apiKeys: [...base.apiKeys, { ...base.apiKeys[0], id: "k2" }] };
        const dupId = { ...base, apiKeys: [...base.apiKeys, { ...base.apiKeys[0], sha256: "0".repeat(64) }] };
        const noTeam = { ...base, apiKeys: [{ ...base.apiKeys[0], team: "ghost" }] };
        const badExpiry = { ...base, apiKeys: [{ ...base.apiKeys[0], expiresAt: "soon" }] };
        const dupModel = { ...base, models: [...base.models, ...base.models] };
        expect(() => new PolicyIndex(bundle(dupHash))).toThrow(/same hash/);
        expect(() => new PolicyIndex(bundle(dupId))).toThrow(/listed twice/);
        expect(() => new PolicyIndex(bundle(noTeam))).toThrow(/unknown team "acme\/ghost"/);
        expect(() => new PolicyIndex(bundle(badExpiry))).toThrow(/unparsable expiresAt/);
        expect(() => new PolicyIndex(bundle(dupModel))).toThrow(/model "m1" listed twice/);
    });
});

describe("loadConfig", () => {
    const env = {
        AUTH_SPOKE: "onprem-a",
        AUTH_HUB_PUBLIC_KEY: hub.publicKey,
        AUTH_POLICY_BUCKET: "platform-policy",
        AUTH_POLICY_BUCKET_OWNER: "123456789012",
        AUTH_S3_REGION: "eu-west-1",
        AUTH_REDIS_URL: "redis://:hunter2@redis.auth.svc:6379/0",
        AUTH_CACHE_SALT_KEY: Buffer.alloc(32, 0x5a).toString("base64"),
    };

    it("applies documented defaults", () => {
        const c = loadConfig(env);
        expect(c).toMatchObject({
            port: 8080,
            opsPort: 9090,
            pathPrefix: "/authz",
            pollIntervalMs: 15_000,
            leaseTtlMs: 960_000,
            cachePath: "/var/cache/auth/bundle.json",
            maxBodyBytes: 32 * 1024 * 1024,
            redis: { timeoutMs: 100 },
            s3: { region: "eu-west-1", forcePathStyle: false, endpoint: undefined },
        });
    });

    it("lists every invalid variable without echoing values", () => {
        let err: unknown;
        try {
            loadConfig({
                ...env,
                AUTH_SPOKE: undefined,
                AUTH_HUB_PUBLIC_KEY: "c2hvcnQ=",
                AUTH_REDIS_URL: "http://hunter2@x",
                AUTH_OPS_PORT: "8080",
                AUTH_S3_REGION: undefined,
            });
        } catch (e) {
            err = e;
        }
        expect(err).toBeInstanceOf(ConfigError);
        const msg = (err as Error).message;
        for (const v of ["AUTH_SPOKE", "AUTH_HUB_PUBLIC_KEY", "AUTH_REDIS_URL", "AUTH_S3_REGION"]) expect(msg).toContain(v);
        expect(msg).not.toContain("hunter2");
    });

    it("refuses the ops port on the ext_authz port", () => {
        expect(() => loadConfig({ ...env, AUTH_OPS_PORT: "8080" })).toThrow(/AUTH_PORT and AUTH_OPS_PORT must differ/);
    });

    it("describeConfig drops the Redis password and the cache-salt key", () => {
        const text = JSON.stringify(describeConfig(loadConfig(env)));
        expect(text).not.toContain("hunter2");
        expect(text).not.toContain(env.AUTH_CACHE_SALT_KEY);
        expect(text).not.toContain("cacheSaltKey");
        expect(text).toContain("redis.auth.svc:6379");
    });

    it("refuses a missing or short cache-salt key", () => {
        expect(() => loadConfig({ ...env, AUTH_CACHE_SALT_KEY: undefined })).toThrow(/AUTH_CACHE_SALT_KEY/);
        expect(() => loadConfig({ ...env, AUTH_CACHE_SALT_KEY: Buffer.alloc(16).toString("base64") })).toThrow(
            /AUTH_CACHE_SALT_KEY: must decode to at least 32 bytes/,
        );
    });
});
