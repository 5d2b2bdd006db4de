import { SecretsManagerClient } from "@aws-sdk/client-secrets-manager";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { API_KEY_PATTERN, hashApiKey, tenantKeySecretName } from "../shared/api-key";
import { PolicyIndex } from "../auth/policy";
import { apiKeyHashes, mintApiKey, retireApiKey } from "./mint";
import { type SecretsManagerStandIn, startSecretsManager } from "./testing/secrets-manager";

/** The minting path against a Secrets Manager stand-in speaking the SDK's wire protocol (services/keys/testing). */
describe("minting tenants' API keys outside Pulumi", () => {
    let sm: SecretsManagerStandIn;
    let client: SecretsManagerClient;
    beforeAll(async () => {
        sm = await startSecretsManager();
        client = new SecretsManagerClient({
            endpoint: sm.endpoint,
            region: "ap-southeast-1",
            credentials: { accessKeyId: "AKIAHUBDEPLOYER00001", secretAccessKey: "x".repeat(40) },
        });
    });
    afterAll(async () => {
        client.destroy();
        await sm.close();
    });

    it("writes the key only to its tenant's secret and returns only its SHA-256; the other keys stay", async () => {
        sm.createSecret(tenantKeySecretName("acme"));
        const a = await mintApiKey(client, "acme", "acme-search-prod");
        const b = await mintApiKey(client, "acme", "acme-search-ci");
        const stored = JSON.parse(sm.current(tenantKeySecretName("acme"))!) as Record<string, string>;
        expect(Object.keys(stored)).toEqual(["acme-search-ci", "acme-search-prod"]);
        for (const k of Object.values(stored)) expect(k).toMatch(new RegExp(`^${API_KEY_PATTERN.source}$`));
        expect(stored["acme-search-ci"]).not.toBe(stored["acme-search-prod"]);
        expect(a.sha256).toBe(hashApiKey(stored["acme-search-prod"]));
        expect(b.sha256).toBe(hashApiKey(stored["acme-search-ci"]));
        // What the caller gets back holds no key.
        expect(JSON.stringify([a, b])).not.toMatch(API_KEY_PATTERN);
        // The plaintext crossed the wire only in PutSecretValue to that secret, signed by the minting principal.
        const carrying = sm.requests.filter((r) => API_KEY_PATTERN.test(JSON.stringify(r.body)));
        expect(carrying.map((r) => [r.operation, r.body.SecretId, r.accessKeyId])).toEqual([
            ["PutSecretValue", tenantKeySecretName("acme"), "AKIAHUBDEPLOYER00001"],
            ["PutSecretValue", tenantKeySecretName("acme"), "AKIAHUBDEPLOYER00001"],
        ]);
    });

    it("a hub with its own platform:namePrefix mints into its own tenant secret, never another hub's in the account", async () => {
        sm.createSecret(tenantKeySecretName("umbrella"));
        sm.createSecret(tenantKeySecretName("umbrella", "staging"));
        const before = sm.current(tenantKeySecretName("umbrella"));
        const m = await mintApiKey(client, "umbrella", "umbrella-dev", "staging");
        expect(sm.current(tenantKeySecretName("umbrella"))).toBe(before);
        const stored = JSON.parse(sm.current("staging/tenants/umbrella/api-keys")!) as Record<string, string>;
        expect(hashApiKey(stored["umbrella-dev"])).toBe(m.sha256);
        expect((await apiKeyHashes(client, "umbrella", "staging")).map((k) => k.keyId)).toEqual(["umbrella-dev"]);
        await retireApiKey(client, "umbrella", "umbrella-dev", "staging");
        expect(JSON.parse(sm.current("staging/tenants/umbrella/api-keys")!)).toEqual({});
    });

    it("the hash it returns is what the auth service accepts: the minted key authenticates, another does not", async () => {
        sm.createSecret(tenantKeySecretName("globex"));
        const m = await mintApiKey(client, "globex", "globex-research-dev");
        const key = JSON.parse(sm.current(tenantKeySecretName("globex"))!)["globex-research-dev"] as string;
        const limits = { requestsPerSecond: 1, concurrentRequests: 1, tokensPerWindow: 1000, windowSeconds: 60 };
        const index = new PolicyIndex({
            revision: 1,
            contentHash: "c",
            policy: {
                models: [{ id: "m", limits }],
                tenants: [{ id: "globex", displayName: "Globex", teams: [{ id: "research", limits }] }],
                apiKeys: [
                    {
                        id: m.keyId,
                        sha256: m.sha256,
                        tenant: "globex",
                        team: "research",
                        models: ["m"],
                        expiresAt: "2099-01-01T00:00:00Z",
                        limits,
                    },
                ],
            },
        } as any);
        const now = Date.parse("2026-12-01T00:00:00Z");
        expect(index.authenticate(key, now)).toMatchObject({ keyId: "globex-research-dev", tenant: "globex" });
        expect(index.authenticate(`${key.slice(0, -1)}${key.endsWith("x") ? "y" : "x"}`, now)).toMatchObject({ status: 401 });
    });

    it("refuses a key id the secret already holds (rotation mints a new id), and a tenant whose secret the hub has not created", async () => {
        const before = sm.current(tenantKeySecretName("acme"));
        await expect(mintApiKey(client, "acme", "acme-search-prod")).rejects.toThrow(
            /already holds key "acme-search-prod".*mint a new key id/,
        );
        expect(sm.current(tenantKeySecretName("acme"))).toBe(before);
        await expect(mintApiKey(client, "initech", "initech-1")).rejects.toThrow(
            /platform\/tenants\/initech\/api-keys does not exist: .*platform:tenantKeys.readers.*apply the hub first/,
        );
    });

    it("lists hashes (never keys) and retires a key; a secret that is not a JSON object is refused untouched", async () => {
        const listed = await apiKeyHashes(client, "acme");
        expect(listed.map((k) => k.keyId)).toEqual(["acme-search-ci", "acme-search-prod"]);
        expect(JSON.stringify(listed)).not.toMatch(API_KEY_PATTERN);
        await retireApiKey(client, "acme", "acme-search-ci");
        expect(Object.keys(JSON.parse(sm.current(tenantKeySecretName("acme"))!))).toEqual(["acme-search-prod"]);
        await expect(retireApiKey(client, "acme", "acme-search-ci")).rejects.toThrow(/holds no key "acme-search-ci"/);
        sm.createSecret(tenantKeySecretName("hooli"));
        await client.send(
            new (await import("@aws-sdk/client-secrets-manager")).PutSecretValueCommand({
                SecretId: tenantKeySecretName("hooli"),
                SecretString: "not json",
            }),
        );
        await expect(mintApiKey(client, "hooli", "h1")).rejects.toThrow(/does not hold a JSON object/);
        expect(sm.current(tenantKeySecretName("hooli"))).toBe("not json");
    });
});
