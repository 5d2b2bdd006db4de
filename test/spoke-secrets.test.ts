import * as fs from "node:fs";
import * as path from "node:path";
import { describe, expect, it } from "vitest";
import { GATEWAY_NAMESPACE } from "../lib/gateway";
import { PLATFORM_NAMESPACE } from "../lib/labels";
import { kubectlApply } from "../services/keys/source-key-install";
import { installSpokeSecrets, kubectlSecretExists, SPOKE_SECRETS, spokeSecretsManifest } from "../services/keys/spoke-secrets-install";
import { CACHE_SALT_SECRET, COUNTER_STORE_ADDRESS, COUNTER_STORE_SECRET, counterStoreUrl } from "../services/shared/spoke-secrets";
import { installSpokeSecretsCommand } from "../tools/mint-key";
import type { CapturedResource } from "../tools/harness";
import { secretPaths, strings } from "./state-walk";
import { inputs, runHubAndSpoke, testTempDir } from "./helpers";

/**
 * A spoke's Pulumi state holds no key material: a pull request's preview of a spoke holds the spoke's passphrase and
 * runs the pull request's own code, so whatever the state holds it can print. The spoke's own secrets (the counter
 * store's password, the auth service's cache-salt key) are generated and installed by `npm run mint-key --
 * install-spoke-secrets` (services/keys/spoke-secrets-install.ts); the program only names their Secrets.
 */

const SPOKES = ["spoke-hn1", "spoke-hcm1", "spoke-sg1"];

/**
 * The Pulumi secrets a spoke's state may hold, each reviewed: on-prem spokes' AWS shared config file (role ARN and
 * region, no credential: components/spoke/AuthService.ts, Metering.ts), secret only because the Kubernetes provider
 * marks every Secret's `stringData` secret. Checked below to hold nothing but that file.
 */
const REVIEWED: Record<string, string> = {
    "kubernetes:core/v1:Secret::agent-router-auth-aws.inputs.stringData": "the auth service's AWS config file (role ARN, region)",
    "kubernetes:core/v1:Secret::agent-router-auth-aws.outputs.stringData": "as above",
    "kubernetes:core/v1:Secret::metering-aws.inputs.stringData": "metering's AWS config file (role ARN, region)",
    "kubernetes:core/v1:Secret::metering-aws.outputs.stringData": "as above",
};

/** The Secrets the spoke program rendered before its secrets were installed outside Pulumi (the upgrade removes them). */
const FORMER_SECRETS = ["counters-credentials", "auth-cache-salt", "metering-redis"];

describe.each(SPOKES.flatMap((s) => [false, true].map((p) => [s, p] as const)))(
    "%s's state holds no key material (preview=%s)",
    (stack, preview) => {
        it("no generator, no Pulumi secret in any resource or output; the Secrets it names are the installed ones", async () => {
            const { spoke } = await runHubAndSpoke(stack, preview);
            const generators = spoke.resources.filter((r) => /^random:|^tls:|^aws:iam\/accessKey:/.test(r.type));
            expect(generators.map((r) => `${r.type}::${r.name}`)).toEqual([]);
            const found = [
                ...spoke.resources.flatMap((r) => [
                    ...secretPaths(r.inputs, `${r.type}::${r.name}.inputs`),
                    ...secretPaths(r.outputs, `${r.type}::${r.name}.outputs`),
                ]),
                ...secretPaths(spoke.outputs, "stack.outputs"),
            ];
            expect(found.filter((p) => !REVIEWED[p])).toEqual([]);
            for (const name of ["agent-router-auth-aws", "metering-aws"]) {
                const r = spoke.resources.find((x) => x.type === "kubernetes:core/v1:Secret" && x.name === name);
                if (!r) continue;
                const data = inputs(r).stringData;
                if (preview && data === undefined) continue;
                expect(Object.keys(data), name).toEqual(["config"]);
                expect(data.config, name).toMatch(/^\[profile [^\]]+\]\nrole_arn = arn:aws:iam::\d{12}:role\/[^\n]+\n/);
                expect(data.config, name).not.toMatch(/aws_secret_access_key|aws_session_token/);
            }
            // The rendered Secret objects no longer carry the values: none has the former names, the installed names,
            // or a counter-store URL with a password.
            const secrets = spoke.resources.filter((r) => r.type === "kubernetes:core/v1:Secret").map(inputs);
            const names = secrets.map((s) => s.metadata?.name);
            for (const n of [...FORMER_SECRETS, COUNTER_STORE_SECRET.name, CACHE_SALT_SECRET.name]) expect(names).not.toContain(n);
            expect(
                strings([spoke.resources.map((r) => [r.inputs, r.outputs]), spoke.outputs]).filter((s) => /redis:\/\/:[^@]+@/.test(s)),
            ).toEqual([]);
            // Every reference to an installed Secret is in a namespace the tool writes it to.
            const refs = secretRefs(spoke.resources).filter(
                (r) => r.name === COUNTER_STORE_SECRET.name || r.name === CACHE_SALT_SECRET.name,
            );
            expect(refs.length).toBeGreaterThanOrEqual(4);
            for (const r of refs) {
                const s = r.name === COUNTER_STORE_SECRET.name ? COUNTER_STORE_SECRET : CACHE_SALT_SECRET;
                expect(s.namespaces as readonly string[], `${r.where} reads ${r.name}`).toContain(r.namespace);
            }
            expect(new Set(refs.map((r) => `${r.namespace}/${r.name}/${r.key}`))).toEqual(
                new Set([
                    `${GATEWAY_NAMESPACE}/${COUNTER_STORE_SECRET.name}/password`,
                    `${GATEWAY_NAMESPACE}/${COUNTER_STORE_SECRET.name}/url`,
                    `${PLATFORM_NAMESPACE}/${COUNTER_STORE_SECRET.name}/url`,
                    `${GATEWAY_NAMESPACE}/${CACHE_SALT_SECRET.name}/key`,
                ]),
            );
        });
    },
);

/** Every `secretKeyRef` of every workload's containers, with the workload's namespace. */
function secretRefs(resources: CapturedResource[]): Array<{ where: string; namespace: string; name: string; key: string }> {
    return resources
        .filter((r) => /^kubernetes:apps\/v1:(Deployment|StatefulSet|DaemonSet)$/.test(r.type))
        .map(inputs)
        .flatMap((d) =>
            [...(d.spec?.template?.spec?.containers ?? []), ...(d.spec?.template?.spec?.initContainers ?? [])].flatMap((c: any) =>
                (c.env ?? [])
                    .filter((e: any) => e.valueFrom?.secretKeyRef)
                    .map((e: any) => ({
                        where: `${d.metadata?.namespace}/${d.metadata?.name} ${c.name} ${e.name}`,
                        namespace: d.metadata?.namespace ?? "default",
                        name: e.valueFrom.secretKeyRef.name,
                        key: e.valueFrom.secretKeyRef.key,
                    })),
            ),
        );
}

describe("the installed Secrets' namespaces and address", () => {
    it("are where Valkey, the auth service and metering run", () => {
        expect(COUNTER_STORE_SECRET.namespaces).toEqual([GATEWAY_NAMESPACE, PLATFORM_NAMESPACE]);
        expect(CACHE_SALT_SECRET.namespaces).toEqual([GATEWAY_NAMESPACE]);
        expect(COUNTER_STORE_ADDRESS.namespace).toBe(GATEWAY_NAMESPACE);
    });
});

/** A stand-in kubectl: `get secret` answers from `existing` (lines `<ns>/<name>`), `apply` records its stdin. */
function fakeKubectl(existing: string[] = []): { bin: string; dir: string; calls: () => string[]; stdin: () => string | undefined } {
    const dir = testTempDir("kubectl-");
    fs.writeFileSync(path.join(dir, "existing"), existing.map((e) => `${e}\n`).join(""));
    const bin = path.join(dir, "kubectl");
    fs.writeFileSync(
        bin,
        [
            "#!/bin/sh",
            `echo "$*" >> "${dir}/calls"`,
            `for a in "$@"; do case "$a" in apply) cat > "${dir}/stdin"; echo applied; exit 0;; esac; done`,
            // get secret NAME -n NS ...
            'shift_to_get() { while [ "$1" != get ]; do shift; done; echo "$3 $5"; }',
            'set -- $(shift_to_get "$@")',
            `if grep -qx "$2/$1" "${dir}/existing"; then echo "secret/$1"; fi`,
        ].join("\n"),
        { mode: 0o755 },
    );
    return {
        bin,
        dir,
        calls: () => fs.readFileSync(path.join(dir, "calls"), "utf8").trim().split("\n"),
        stdin: () => (fs.existsSync(path.join(dir, "stdin")) ? fs.readFileSync(path.join(dir, "stdin"), "utf8") : undefined),
    };
}

describe("npm run mint-key -- install-spoke-secrets", () => {
    it("creates both Secrets in every namespace, one password in both copies, values only on stdin, never printed", async () => {
        const k = fakeKubectl();
        const out = await installSpokeSecretsCommand(["--spoke", "hn1"], k.bin);
        const manifest = JSON.parse(k.stdin()!);
        const items = manifest.items as any[];
        expect(items.map((i) => `${i.metadata.namespace}/${i.metadata.name}`)).toEqual([
            `llm-gateway/${COUNTER_STORE_SECRET.name}`,
            `platform-system/${COUNTER_STORE_SECRET.name}`,
            `llm-gateway/${CACHE_SALT_SECRET.name}`,
        ]);
        const dec = (s: string) => Buffer.from(s, "base64").toString("utf8");
        const [gw, plat, salt] = items;
        expect(dec(gw.data.password)).toMatch(/^[A-Za-z0-9_-]{40}$/);
        expect(dec(plat.data.password)).toBe(dec(gw.data.password));
        expect(dec(gw.data.url)).toBe(counterStoreUrl(dec(gw.data.password)));
        expect(dec(plat.data.url)).toBe(dec(gw.data.url));
        expect(new URL(dec(gw.data.url)).password).toBe(dec(gw.data.password));
        // 32 random bytes; test/service-env.test.ts loads the rendered env with these Secrets through the services' loaders.
        const key = dec(salt.data.key);
        expect(Buffer.from(key, "base64")).toHaveLength(32);
        // Nothing secret in argv or in what is printed; the spoke file's context is used; server-side apply on stdin.
        const calls = k.calls();
        for (const v of [dec(gw.data.password), key]) {
            expect(calls.join("\n")).not.toContain(v);
            expect(out).not.toContain(v);
        }
        expect(calls.every((c) => c.startsWith("--context=hn1-admin "))).toBe(true);
        expect(calls.filter((c) => c.includes(" apply "))).toEqual([
            "--context=hn1-admin apply --server-side --field-manager=platform-mint-key --force-conflicts -f -",
        ]);
        expect(out).toMatch(/installed counter-password/);
        expect(out).toMatch(/installed cache-salt-key/);
    });

    it("keeps what exists (nothing applied), refuses copies that would disagree, and rotates only on request", async () => {
        const all = Object.values(SPOKE_SECRETS).flatMap((s) => s.namespaces.map((ns) => `${ns}/${s.name}`));
        const full = fakeKubectl(all);
        const out = await installSpokeSecretsCommand(["--spoke", "sg1", "--kubeconfig", "/x/sg1"], full.bin);
        expect(full.stdin()).toBeUndefined();
        expect(out).toMatch(/kept counter-password .*--rotate counter-password/);
        expect(full.calls().every((c) => c.startsWith("--kubeconfig=/x/sg1 "))).toBe(true);

        const partial = fakeKubectl([`llm-gateway/${COUNTER_STORE_SECRET.name}`]);
        await expect(installSpokeSecrets("hn1", kubectlSecretExists([], partial.bin), kubectlApply([], partial.bin))).rejects.toThrow(
            /exists in llm-gateway but not in platform-system.*--rotate counter-password/,
        );
        expect(partial.stdin()).toBeUndefined();

        const rotate = fakeKubectl(all);
        const r = await installSpokeSecrets("hn1", kubectlSecretExists([], rotate.bin), kubectlApply([], rotate.bin), "counter-password");
        expect(r.written.map((w) => w.kind)).toEqual(["counter-password"]);
        expect(r.kept.map((w) => w.kind)).toEqual(["cache-salt-key"]);
        expect(JSON.parse(rotate.stdin()!).items.map((i: any) => i.metadata.name)).toEqual([
            COUNTER_STORE_SECRET.name,
            COUNTER_STORE_SECRET.name,
        ]);
    });

    it("refuses an unknown spoke or rotation, naming them", async () => {
        const k = fakeKubectl();
        await expect(installSpokeSecretsCommand(["--spoke", "nowhere"], k.bin)).rejects.toThrow(
            /no spoke file has platform:spoke.name nowhere/,
        );
        await expect(installSpokeSecretsCommand(["--spoke", "hn1", "--rotate", "everything"], k.bin)).rejects.toThrow(
            /--rotate everything: one of counter-password, cache-salt-key/,
        );
        await expect(installSpokeSecretsCommand([], k.bin)).rejects.toThrow(/needs --spoke/);
        // An EKS spoke's file names no context: the cluster must be named, never kubectl's current context.
        await expect(installSpokeSecretsCommand(["--spoke", "sg1"], k.bin)).rejects.toThrow(/give --context or --kubeconfig/);
        expect(fs.existsSync(path.join(k.dir, "calls"))).toBe(false);
    });

    it("the manifest holds exactly the values given, and only the Secrets asked for", () => {
        const m = JSON.parse(spokeSecretsManifest("hn1", { cacheSaltKey: "k".repeat(44) }));
        expect(m.items).toHaveLength(1);
        expect(m.items[0].metadata).toMatchObject({ name: CACHE_SALT_SECRET.name, labels: { "platform.io/spoke": "hn1" } });
    });
});
