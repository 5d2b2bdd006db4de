import { PutSecretValueCommand, SecretsManagerClient } from "@aws-sdk/client-secrets-manager";
import * as fs from "node:fs";
import * as path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { GATEWAY_NAMESPACE } from "../lib/gateway";
import { PLATFORM_NAMESPACE } from "../lib/labels";
import { AWS_FILES_DIR, SOURCE_KEY_SECRET } from "../lib/spoke-services";
import { installSourceKey, kubectlApply } from "../services/keys/source-key-install";
import { startSecretsManager, type SecretsManagerStandIn } from "../services/keys/testing/secrets-manager";
import { awsCredentialsFile, keySecretName, SOURCE_KEY_SLOT_ANNOTATION } from "../services/shared/spoke-key-slot";
import { installSourceKeyCommand } from "../tools/mint-key";
import { unwrapWire } from "../tools/wire";
import { byType, inputs, runHubAndSpoke, testTempDir } from "./helpers";
import { restoreEnv } from "./env-guard";

/**
 * On-prem spokes' AWS source keys never enter Pulumi state: the spoke program only names the operator-installed
 * Kubernetes Secret (services/shared/spoke-key-slot.ts SOURCE_KEY_SECRET), and `npm run mint-key --
 * install-source-key` puts the key there from the slot's Secrets Manager secret.
 */

const ONPREM = ["spoke-hn1", "spoke-hcm1"];
const GET_SECRET_VERSION = "aws:secretsmanager/getSecretVersion:getSecretVersion";

/** Every string in a value (secrets unwrapped). */
function strings(value: unknown, out: string[] = []): string[] {
    if (typeof value === "string") out.push(value);
    else if (value && typeof value === "object") for (const v of Object.values(value)) strings(v, out);
    return out;
}

describe.each([false, true])("on-prem spokes' state holds no AWS source key (preview=%s)", (preview) => {
    // Every invoke the programs make through the mocks' Secrets Manager is recorded; the mock still answers, so a
    // regression that reads the slot's secret again would put its (deterministic) key into the state below.
    const reads: string[] = [];
    let restore: () => void;
    let real: (a: Record<string, any>, r: string) => Record<string, unknown>;
    beforeAll(async () => {
        const { callMocks } = await import("../tools/mock-outputs");
        real = callMocks[GET_SECRET_VERSION];
        callMocks[GET_SECRET_VERSION] = (a, r) => {
            reads.push(String(a.secretId));
            return real(a, r);
        };
        restore = () => {
            callMocks[GET_SECRET_VERSION] = real;
        };
    });
    afterAll(() => restore());

    it.each(ONPREM)(
        "%s: no key-shaped value and no secret read in any resource input or output; pods mount the named Secret",
        async (stack) => {
            const { spoke } = await runHubAndSpoke(stack, preview);
            // The deployed hub's contracts (a spoke's preview reads the deployed hub too).
            const { hub } = await runHubAndSpoke(stack, false);
            const contracts = unwrapWire(hub.outputs.spokeContracts) as Record<string, any>;
            // What each slot's secret would hold (the mocks' Secrets Manager): none of it may appear.
            const keys = Object.values(contracts)
                .filter((c) => c.identity?.mode === "access-key")
                .map((c) => JSON.parse(String(real({ secretId: c.identity.secretArn }, "ap-southeast-1").secretString)));
            expect(keys.length).toBeGreaterThan(1);
            const all = [
                ...spoke.resources.flatMap((r) => [...strings(unwrapWire(r.inputs)), ...strings(unwrapWire(r.outputs))]),
                ...strings(unwrapWire(spoke.outputs)),
            ];
            expect(all.length).toBeGreaterThan(100);
            const leaks = all.filter(
                (s) =>
                    /\b(AKIA|ASIA)[A-Z0-9]{16}\b/.test(s) ||
                    /aws_secret_access_key/.test(s) ||
                    keys.some((k) => s.includes(k.secretAccessKey) || s.includes(k.accessKeyId)),
            );
            expect(leaks).toEqual([]);
            expect(spoke.resources.filter((r) => r.type === "aws:secretsmanager/secretVersion:SecretVersion")).toEqual([]);

            // Both services mount the config rendered here and the operator-installed key, by name.
            for (const [name, ns] of [
                ["agent-router-auth-deployment", GATEWAY_NAMESPACE],
                ["metering-statefulset", PLATFORM_NAMESPACE],
            ]) {
                const w = spoke.resources.find((r) => r.name === name);
                expect(w, name).toBeDefined();
                const pod = inputs(w!).spec.template.spec;
                expect(inputs(w!).metadata.namespace).toBe(ns);
                const vol = pod.volumes.find((v: any) => v.name === "aws");
                expect(vol.projected.sources[1]).toEqual({
                    secret: { name: SOURCE_KEY_SECRET.name, items: [{ key: SOURCE_KEY_SECRET.key, path: "credentials" }] },
                });
                expect(vol.projected.sources[0].secret.items).toEqual([{ key: "config", path: "config" }]);
                expect(pod.containers[0].volumeMounts).toContainEqual({ name: "aws", mountPath: AWS_FILES_DIR, readOnly: true });
                expect(SOURCE_KEY_SECRET.namespaces).toContain(ns);
                // The active slot (not secret) annotates the pods: moving activeKey rolls them onto the re-installed key.
                expect(inputs(w!).spec.template.metadata.annotations).toEqual({ [SOURCE_KEY_SLOT_ANNOTATION]: "2026-11" });
            }
            for (const s of byType(spoke.resources, "kubernetes:core/v1:Secret").filter((r) => r.name.endsWith("-aws")))
                expect(Object.keys(inputs(s).stringData), s.name).toEqual(["config"]);
        },
    );

    it("the programs (hub and on-prem spokes, run above with the recorder in place) made no Secrets Manager read", async () => {
        for (const stack of ONPREM) await runHubAndSpoke(stack, preview);
        expect(reads).toEqual([]);
        // The recorder sees reads: a read through it is recorded.
        const { callMocks } = await import("../tools/mock-outputs");
        callMocks[GET_SECRET_VERSION]({ secretId: "probe" }, "ap-southeast-1");
        expect(reads).toEqual(["probe"]);
        reads.length = 0;
    });
});

describe("npm run mint-key -- install-source-key", () => {
    let sm: SecretsManagerStandIn;
    let client: SecretsManagerClient;
    const credentials = { accessKeyId: "AKIASPOKEDEPLOYER001", secretAccessKey: "d".repeat(40) };
    const key = { accessKeyId: "AKIAHN1SOURCEKEY0001", secretAccessKey: "s3cr3t/Source+Key0123456789abcdefghijklm" };
    const env = { ...process.env };
    beforeAll(async () => {
        sm = await startSecretsManager();
        client = new SecretsManagerClient({ endpoint: sm.endpoint, region: "ap-southeast-1", credentials });
        sm.createSecret(keySecretName("hn1", "2026-11"));
        await client.send(new PutSecretValueCommand({ SecretId: keySecretName("hn1", "2026-11"), SecretString: JSON.stringify(key) }));
        sm.createSecret(keySecretName("hcm1", "2026-11"));
    });
    afterAll(async () => {
        restoreEnv(env);
        client.destroy();
        await sm.close();
    });

    /** A stand-in kubectl: records its argv and stdin, and answers as `kubectl apply` does (or fails with `fail`). */
    function fakeKubectl(fail?: string): { bin: string; argv: () => string[]; stdin: () => string; dir: string } {
        const dir = testTempDir("kubectl-");
        const bin = path.join(dir, "kubectl");
        fs.writeFileSync(
            bin,
            `#!/bin/sh\nprintf '%s\\n' "$@" > "${dir}/argv"\ncat > "${dir}/stdin"\n${
                fail ? `echo '${fail}' >&2\nexit 1` : `echo 'secret/${SOURCE_KEY_SECRET.name} serverside-applied'`
            }\n`,
            { mode: 0o755 },
        );
        return {
            bin,
            dir,
            argv: () => fs.readFileSync(path.join(dir, "argv"), "utf8").trim().split("\n"),
            stdin: () => fs.readFileSync(path.join(dir, "stdin"), "utf8"),
        };
    }

    it("reads the slot as the caller and applies the Secret in both namespaces, the key only on stdin; prints only its id", async () => {
        const k = fakeKubectl();
        Object.assign(process.env, {
            AWS_ENDPOINT_URL_SECRETS_MANAGER: sm.endpoint,
            AWS_ACCESS_KEY_ID: credentials.accessKeyId,
            AWS_SECRET_ACCESS_KEY: credentials.secretAccessKey,
        });
        const printed = await installSourceKeyCommand(["--hub", "hub-prod", "--spoke", "hn1", "--context", "hn1-admin"], k.bin);
        expect(printed).toContain(key.accessKeyId);
        expect(printed).not.toContain(key.secretAccessKey);
        expect(k.argv()).toEqual([
            "--context=hn1-admin",
            "apply",
            "--server-side",
            "--field-manager=platform-mint-key",
            "--force-conflicts",
            "-f",
            "-",
        ]);
        const list = JSON.parse(k.stdin());
        expect(list.items.map((s: any) => [s.kind, s.metadata.namespace, s.metadata.name])).toEqual([
            ["Secret", GATEWAY_NAMESPACE, SOURCE_KEY_SECRET.name],
            ["Secret", PLATFORM_NAMESPACE, SOURCE_KEY_SECRET.name],
        ]);
        for (const s of list.items) {
            expect(Buffer.from(s.data[SOURCE_KEY_SECRET.key], "base64").toString()).toBe(awsCredentialsFile(key));
            expect(JSON.stringify(s.metadata)).not.toContain(key.secretAccessKey);
            expect(s.metadata.annotations[SOURCE_KEY_SLOT_ANNOTATION]).toBe("2026-11");
        }
        // Read once, signed by the caller (the spoke's deployer); nothing written to AWS.
        expect(sm.requests.map((r) => [r.operation, r.body.SecretId, r.accessKeyId]).slice(-1)).toEqual([
            ["GetSecretValue", keySecretName("hn1", "2026-11"), credentials.accessKeyId],
        ]);
        // The key was on nothing but stdin: the stand-in's only files are its argv and stdin records.
        expect(fs.readFileSync(path.join(k.dir, "argv"), "utf8")).not.toContain(key.secretAccessKey);
    });

    it("a slot with no key yet names the mint command; kubectl's failure is reported with what to do; nothing is echoed", async () => {
        const k = fakeKubectl();
        await expect(installSourceKey(client, "hcm1", "2026-11", kubectlApply([], k.bin))).rejects.toThrow(
            /holds no key.*npm run mint-key -- spoke-access-key --spoke hcm1 --slot 2026-11/,
        );
        expect(fs.existsSync(path.join(k.dir, "stdin"))).toBe(false);
        const broken = fakeKubectl('Error from server (NotFound): namespaces "llm-gateway" not found');
        const err = await installSourceKey(client, "hn1", "2026-11", kubectlApply([], broken.bin)).catch((e: Error) => e);
        expect((err as Error).message).toMatch(/apply failed \(1\).*not found.*spoke's first `up`/);
        expect((err as Error).message).not.toContain(key.secretAccessKey);
        await expect(installSourceKey(client, "hn1", "2026-11", kubectlApply([], path.join(k.dir, "missing")))).rejects.toThrow(
            /cannot run/,
        );
    });

    it("refuses a spoke that has no source key, and an unknown slot, naming the hub file and key", async () => {
        await expect(installSourceKeyCommand(["--hub", "hub-prod", "--spoke", "sg1"])).rejects.toThrow(
            /Pulumi\.hub-prod\.yaml: platform:spokeIdentities\.sg1\.mode is not access-key/,
        );
        await expect(installSourceKeyCommand(["--hub", "hub-prod", "--spoke", "hn1", "--slot", "nope"])).rejects.toThrow(
            /platform:spokeIdentities\.hn1\.keys has no slot "nope"/,
        );
    });

    it("the Secret's namespaces are where the auth service and metering run", () => {
        expect([...SOURCE_KEY_SECRET.namespaces]).toEqual([GATEWAY_NAMESPACE, PLATFORM_NAMESPACE]);
    });
});
