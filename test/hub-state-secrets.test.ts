import { describe, expect, it } from "vitest";
import { SecretsManagerClient } from "@aws-sdk/client-secrets-manager";
import { mintApiKey } from "../services/keys/mint";
import { startSecretsManager } from "../services/keys/testing/secrets-manager";
import { API_KEY_PATTERN, tenantKeySecretName } from "../services/shared/api-key";
import { secretPaths, strings } from "./state-walk";
import { flatConfig, runRepoStack, stackConfigDoc } from "./helpers";

/**
 * What the hub's Pulumi state holds that is secret, found by running the hub program (mocks) and walking every
 * resource's inputs and outputs and every stack output, as the engine would checkpoint them. A pull request's
 * preview must never be able to print a key through `.apply`, so no key material may be there at all: the list of
 * secret values is closed, each entry reviewed, and a new one fails this test.
 */

/**
 * The secrets the hub's state may hold, each with why it is there. API keys and AWS access keys are not among them:
 * tenants' keys and on-prem spokes' source keys are minted by `npm run mint-key` straight into their secrets
 * (services/keys/mint.ts, services/keys/spoke-key.ts).
 */
const REVIEWED: Record<string, string> = {
    "random:index/randomPassword:RandomPassword::usage-ledger-ingest-password.outputs.result":
        "ledger role password (components/hub/ledger): the database is reachable only inside the ledger's VPC",
    "random:index/randomPassword:RandomPassword::usage-ledger-reporter-password.outputs.result": "ledger role password, as above",
    "random:index/randomPassword:RandomPassword::usage-ledger-ingest-password.outputs.bcryptHash": "its hash",
    "random:index/randomPassword:RandomPassword::usage-ledger-reporter-password.outputs.bcryptHash": "its hash",
    "aws:secretsmanager/secretVersion:SecretVersion::usage-ledger-ingest-password.inputs.secretString": "the same password, delivered",
    "aws:secretsmanager/secretVersion:SecretVersion::usage-ledger-reporter-password.inputs.secretString": "the same password, delivered",
    "aws:secretsmanager/secretVersion:SecretVersion::usage-ledger-ingest-password.outputs.secretString": "the same password, delivered",
    "aws:secretsmanager/secretVersion:SecretVersion::usage-ledger-reporter-password.outputs.secretString": "the same password, delivered",
};

describe.each([false, true])("the hub's state holds no key material (preview=%s)", (preview) => {
    it("every secret value in the hub's resources and outputs is a reviewed one; none is an API key or an AWS key", async () => {
        const hub = await runRepoStack("hub-prod", { preview });
        const found = [
            ...hub.resources.flatMap((r) => [
                ...secretPaths(r.inputs, `${r.type}::${r.name}.inputs`),
                ...secretPaths(r.outputs, `${r.type}::${r.name}.outputs`),
            ]),
            ...secretPaths(hub.outputs, "stack.outputs"),
        ];
        expect(found.filter((p) => !REVIEWED[p])).toEqual([]);
        // The resources that generate key material are a closed list too (mocks do not mark every generated value
        // secret, so the types are checked as well): the ledger passwords and the signing seed. No AWS access key:
        // on-prem source keys are minted into their slots' secrets (services/keys/spoke-key.ts).
        const generators = hub.resources.filter((r) => /^random:|^aws:iam\/accessKey:|^tls:/.test(r.type));
        expect(generators.map((r) => `${r.type}::${r.name}`).sort()).toEqual(
            [
                // The bundle signing seed (components/hub/PolicyStore.ts), protected.
                "random:index/randomBytes:RandomBytes::policy-store-signing-seed",
                "random:index/randomPassword:RandomPassword::usage-ledger-ingest-password",
                "random:index/randomPassword:RandomPassword::usage-ledger-reporter-password",
            ].sort(),
        );
        for (const k of generators.filter((r) => !r.name.startsWith("usage-ledger-"))) expect(k.options?.protect, k.name).toBe(true);
        expect(
            hub.resources.filter(
                (r) =>
                    r.urn.includes("platform:hub:ApiKeys$random:") ||
                    r.urn.includes("ApiKeys$aws:secretsmanager/secretVersion") ||
                    r.urn.includes("platform:hub:SpokeIdentity$aws:secretsmanager/secretVersion"),
            ),
        ).toEqual([]);
        // Each access-key spoke's slots: a user that can be deleted with keys minted outside Pulumi, and a protected,
        // retained secret that the program never writes a value to.
        const ids = stackConfigDoc("hub-prod")["platform:spokeIdentities"] as Record<
            string,
            { mode: string; keys?: Array<{ id: string }> }
        >;
        const slots = Object.entries(ids)
            .filter(([, id]) => id.mode === "access-key")
            .flatMap(([s, id]) => id.keys!.map((k) => [s, k.id]));
        expect(slots.length).toBeGreaterThan(0);
        for (const [s, k] of slots) {
            const user = hub.resources.find((r) => r.type === "aws:iam/user:User" && r.name === `spoke-${s}-source-${k}`);
            expect(user?.inputs.forceDestroy, `${s}/${k} user`).toBe(true);
            const secret = hub.resources.find((r) => r.type === "aws:secretsmanager/secret:Secret" && r.name === `spoke-${s}-key-${k}`);
            expect([secret?.options?.protect, secret?.options?.retainOnDelete], `${s}/${k} secret`).toEqual([true, true]);
        }
        const text = strings([hub.resources.map((r) => [r.inputs, r.outputs]), hub.outputs]);
        expect(text.filter((s) => API_KEY_PATTERN.test(s))).toEqual([]);
    });
});

describe("keys minted for every tenant never reach the hub", () => {
    it("the hub run after minting holds none of them: its program has no way to learn a key, only the printed hashes", async () => {
        const sm = await startSecretsManager();
        const client = new SecretsManagerClient({
            endpoint: sm.endpoint,
            region: "ap-southeast-1",
            credentials: { accessKeyId: "AKIAHUBDEPLOYER00001", secretAccessKey: "x".repeat(40) },
        });
        try {
            const doc = structuredClone(stackConfigDoc("hub-prod"));
            for (const t of Object.keys(doc["platform:tenantKeys"].readers)) sm.createSecret(tenantKeySecretName(t));
            for (const k of doc["platform:apiKeys"]) k.sha256 = (await mintApiKey(client, k.tenant, k.id)).sha256;
            const minted = Object.keys(doc["platform:tenantKeys"].readers).flatMap((t) =>
                Object.values(JSON.parse(sm.current(tenantKeySecretName(t))!) as Record<string, string>),
            );
            expect(minted).toHaveLength(doc["platform:apiKeys"].length);
            const hub = await runRepoStack("hub-prod", { config: flatConfig(doc) });
            const text = JSON.stringify([hub.resources.map((r) => [r.inputs, r.outputs]), hub.outputs]);
            for (const key of minted) expect(text.includes(key)).toBe(false);
            // The bundle model carries exactly the minted keys' hashes.
            const model = hub.resources.find((r) => r.name === "policy-store-hn1-bundle");
            expect(model, "the hn1 bundle object").toBeDefined();
            for (const k of doc["platform:apiKeys"]) expect(text).toContain(k.sha256);
        } finally {
            client.destroy();
            await sm.close();
        }
    });
});
