import { execFile } from "node:child_process";
import { promisify } from "node:util";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type IamStandIn, startIam } from "../services/keys/testing/iam";
import { type SecretsManagerStandIn, startSecretsManager } from "../services/keys/testing/secrets-manager";
import { keySecretName, sourceUserName } from "../services/shared/spoke-key-slot";
import { API_KEY_PATTERN, hashApiKey, tenantKeySecretName } from "../services/shared/api-key";
import { ROOT } from "./helpers";
import { ESBUILD_LOADER } from "./loader";

/** `npm run mint-key` end to end, against the Secrets Manager stand-in (services/keys/testing), through the SDK's own endpoint variable. */
describe("npm run mint-key", () => {
    let sm: SecretsManagerStandIn;
    beforeAll(async () => {
        sm = await startSecretsManager();
        sm.createSecret(tenantKeySecretName("acme"));
    });
    afterAll(() => sm.close());
    const run = async (args: string[], extraEnv: Record<string, string> = {}) => {
        try {
            const r = await promisify(execFile)(process.execPath, ["-r", ESBUILD_LOADER, "tools/mint-key.ts", ...args], {
                cwd: ROOT,
                env: {
                    PATH: process.env.PATH,
                    AWS_ENDPOINT_URL_SECRETS_MANAGER: sm.endpoint,
                    AWS_ACCESS_KEY_ID: "AKIAHUBDEPLOYER00002",
                    AWS_SECRET_ACCESS_KEY: "y".repeat(40),
                    ...extraEnv,
                },
            });
            return { code: 0, out: r.stdout, err: r.stderr };
        } catch (e) {
            const x = e as { code: number; stdout: string; stderr: string };
            return { code: x.code, out: x.stdout, err: x.stderr };
        }
    };

    it("mints into the tenant's secret and prints only the hash line for the hub file; --list prints hashes", async () => {
        const r = await run(["--hub", "hub-prod", "--tenant", "acme", "--key", "acme-search-2027"]);
        expect(r.code, r.err).toBe(0);
        const key = JSON.parse(sm.current(tenantKeySecretName("acme"))!)["acme-search-2027"] as string;
        expect(r.out).toContain(`platform:apiKeys[id=acme-search-2027].sha256: ${hashApiKey(key)}\n`);
        expect(`${r.out}${r.err}`).not.toMatch(API_KEY_PATTERN);
        const list = await run(["--hub", "hub-prod", "--tenant", "acme", "--list"]);
        expect(list.out).toBe(`acme-search-2027 sha256: ${hashApiKey(key)}\n`);
        expect(sm.requests.filter((q) => q.operation === "PutSecretValue").map((q) => q.accessKeyId)).toEqual(["AKIAHUBDEPLOYER00002"]);
    });

    it("refuses a tenant without readers in the hub file, and a missing action, before calling AWS", async () => {
        const before = sm.requests.length;
        const r = await run(["--hub", "hub-prod", "--tenant", "initech", "--key", "k"]);
        expect(r.code).toBe(1);
        expect(r.err).toMatch(/platform:tenantKeys.readers names no reader for tenant "initech"/);
        expect((await run(["--hub", "hub-prod", "--tenant", "acme"])).err).toMatch(/exactly one of --key, --retire, --list/);
        expect(sm.requests.length).toBe(before);
    });

    describe("spoke-access-key", () => {
        let iam: IamStandIn;
        beforeAll(async () => {
            iam = await startIam();
            iam.createUser(sourceUserName("hn1", "2026-11"));
            sm.createSecret(keySecretName("hn1", "2026-11"));
        });
        afterAll(() => iam.close());
        const runSpoke = (args: string[]) => run(["spoke-access-key", ...args], { AWS_ENDPOINT_URL_IAM: iam.endpoint });

        it("mints the slot's key into its secret and prints only the access key id", async () => {
            const r = await runSpoke(["--hub", "hub-prod", "--spoke", "hn1", "--slot", "2026-11"]);
            expect(r.code, r.err).toBe(0);
            const [[id, secret]] = [...iam.keys(sourceUserName("hn1", "2026-11"))!.entries()];
            expect(JSON.parse(sm.current(keySecretName("hn1", "2026-11"))!)).toEqual({ accessKeyId: id, secretAccessKey: secret });
            expect(r.out).toContain(`minted access key ${id} for slot "2026-11" of hn1`);
            expect(`${r.out}${r.err}`).not.toContain(secret);
            expect(iam.requests.map((q) => q.accessKeyId)).toEqual(iam.requests.map(() => "AKIAHUBDEPLOYER00002"));
        });

        it("refuses a spoke that is not access-key, an unknown slot, and retiring the active slot, before calling AWS", async () => {
            const before = iam.requests.length;
            const go = (args: string[]) => runSpoke(["--hub", "hub-prod", ...args]);
            expect((await go(["--spoke", "sg1", "--slot", "k1"])).err).toMatch(/platform:spokeIdentities.sg1.mode is not access-key/);
            expect((await go(["--spoke", "hn1", "--slot", "k9"])).err).toMatch(/platform:spokeIdentities.hn1.keys has no slot "k9"/);
            expect((await go(["--spoke", "hn1", "--slot", "2026-11", "--retire"])).err).toMatch(/activeKey is "2026-11"/);
            expect(iam.requests.length).toBe(before);
        });
    });
});
