import { beforeAll, describe, expect, it } from "vitest";
import * as fs from "node:fs";
import * as path from "node:path";
import { REGISTRY, versions } from "../config/versions";
import { PREFLIGHT_CONTAINER, PREFLIGHT_SCRIPT } from "../lib/preflight";
import { AUTH_ENV, loadConfig as loadAuthConfig } from "../services/auth/config";
import { loadConfig as loadMeteringConfig, METERING_ENV } from "../services/metering/config";
import { PREFLIGHT_ENV } from "../services/preflight/config";
import {
    LEDGER_OPS_ENV,
    loadLedgerOpsEnv,
    loadMigratorEnv,
    loadReconcilerEnv,
    MIGRATOR_ENV,
    RECONCILER_ENV,
} from "../services/reconciler/config";
import { generateSpokeSecrets, spokeSecretsManifest } from "../services/keys/spoke-secrets-install";
import { type EnvContract, envNames } from "../services/shared/env";
import { CONSUMER_ENV, readEnv as loadConsumerEnv } from "../services/usage-consumer/config";
import type { CapturedResource, RunStackResult, StackOutputs } from "../tools/harness";
import { dependencyOrder, discoverStacks } from "../lib/stackfiles";
import { MOCK_ACCOUNT_ID } from "../tools/mock-outputs";
import { referenceableOutputs } from "../tools/wire";
import { inputs, ROOT, runRepoStack, STACKS } from "./helpers";
import { res } from "./policies/rdma-fixtures";

/**
 * The seam between each component and the service it deploys: every container of every shipped stack that runs
 * one of our services, and every hub Lambda, has its rendered environment loaded through that service's own
 * loader (the code the process runs at start). Renaming a variable in a service, or making one required, fails
 * here; so does a component setting a name the service does not read.
 *
 * Closed: a container is found wherever a rendered object holds one (Deployment, StatefulSet, DaemonSet, Job, CronJob,
 * LeaderWorkerSet, DynamoGraphDeployment components, any other kind), and every image under our registry
 * (config/versions.ts `REGISTRY`) must have a contract here, as must every Lambda; our registry named anywhere else in
 * a rendered object (Helm values, a CRD field) fails too, since no contract could be checked there.
 */

interface Contract {
    contract: EnvContract;
    /** The service's own loader; throws on a missing or invalid variable. */
    load: (env: NodeJS.ProcessEnv) => unknown;
}

/** Container images of our services -> their contracts. Closed: an image under REGISTRY without one fails. */
const CONTAINERS: Record<string, Contract> = {
    [versions.authService.image]: { contract: AUTH_ENV, load: loadAuthConfig },
    [versions.meteringService.image]: { contract: METERING_ENV, load: loadMeteringConfig },
};
/** Hub Lambda function names (components/hub/UsageLedger.ts) -> their contracts. Closed: an unknown Lambda fails. */
const LAMBDAS: Record<string, Contract> = {
    "platform-usage-ledger-migrator": { contract: MIGRATOR_ENV, load: loadMigratorEnv },
    "platform-usage-consumer": { contract: CONSUMER_ENV, load: loadConsumerEnv },
    "platform-usage-reconciliation": { contract: RECONCILER_ENV, load: loadReconcilerEnv },
    "platform-usage-ledger-ops": { contract: LEDGER_OPS_ENV, load: loadLedgerOpsEnv },
};

const rendered: Record<string, RunStackResult> = {};

beforeAll(async () => {
    const outputs: Record<string, StackOutputs> = {};
    for (const s of dependencyOrder(discoverStacks(STACKS))) {
        // runStack rejects when the program throws.
        const r = await runRepoStack(s.name, { stackOutputs: outputs });
        rendered[s.name] = r;
        outputs[s.name] = { outputs: referenceableOutputs(r.outputs), secretOutputNames: [] };
    }
}, 300_000);

/**
 * The Secrets the operator installs beside a spoke (`npm run mint-key -- install-spoke-secrets`), as that command's
 * own manifest renders them with freshly generated values: the spoke program only names them.
 */
const INSTALLED: any[] = JSON.parse(spokeSecretsManifest("test", generateSpokeSecrets())).items;

/** The Secret or ConfigMap of one render (or, for a Secret, an installed one) by namespace and name. */
function objectOf(kind: "Secret" | "ConfigMap", name: string, ns: string, resources: CapturedResource[]): any {
    const rendered = resources.filter((r) => r.type === `kubernetes:core/v1:${kind}`).map(inputs);
    const all = kind === "Secret" ? [...rendered, ...INSTALLED] : rendered;
    const o = all.find((x) => x.metadata?.name === name && (x.metadata?.namespace ?? "default") === ns);
    if (!o) throw new Error(`${kind} ${ns}/${name} is neither rendered nor installed`);
    return o;
}

/** The string data of a Secret or ConfigMap (base64 `data` decoded). */
function dataOf(o: any): Record<string, string> {
    const out: Record<string, string> = {};
    for (const [k, v] of Object.entries<string>(o.data ?? {}))
        out[k] = o.kind === "ConfigMap" ? v : Buffer.from(v, "base64").toString("utf8");
    return { ...out, ...(o.stringData ?? {}) };
}

/**
 * Resolves one Kubernetes env entry the way the kubelet would, from the objects of the same render (and the installed
 * ones). @throws Error naming the entry when it cannot be resolved
 */
function resolveEnvVar(e: any, ns: string, pod: string, resources: CapturedResource[]): string {
    if (typeof e.value === "string") return e.value;
    const ref = e.valueFrom?.secretKeyRef ?? e.valueFrom?.configMapKeyRef;
    if (ref) {
        const kind = e.valueFrom.secretKeyRef ? "Secret" : "ConfigMap";
        const v = dataOf({ ...objectOf(kind, ref.name, ns, resources), kind })[ref.key];
        if (typeof v !== "string") throw new Error(`${kind} ${ns}/${ref.name} has no key ${ref.key} (for ${e.name})`);
        return v;
    }
    if (e.valueFrom?.fieldRef?.fieldPath === "metadata.name") return pod;
    throw new Error(`env ${e.name}: no value and no resolvable valueFrom (${JSON.stringify(e.valueFrom)})`);
}

/** A container's whole environment: `envFrom` first, then `env` (which wins), as the kubelet builds it. */
function containerEnv(c: any, ns: string, pod: string, resources: CapturedResource[]): Record<string, string> {
    const env: Record<string, string> = {};
    for (const f of c.envFrom ?? []) {
        const kind = f.secretRef ? "Secret" : "ConfigMap";
        const ref = f.secretRef ?? f.configMapRef;
        for (const [k, v] of Object.entries(dataOf({ ...objectOf(kind, ref.name, ns, resources), kind }))) env[`${f.prefix ?? ""}${k}`] = v;
    }
    for (const e of c.env ?? []) env[e.name] = resolveEnvVar(e, ns, pod, resources);
    return env;
}

/** Why a rendered env does not load through its service's contract: names it does not read, its loader's error. */
function loadProblems(where: string, c: Contract, env: Record<string, string>): string[] {
    const known = new Set(envNames(c.contract));
    const out = Object.keys(env)
        .filter((n) => !known.has(n))
        .map((n) => `${where}: sets ${n}, which its service does not read`);
    try {
        c.load(env);
    } catch (e) {
        out.push(`${where}: its service's loader refuses the rendered env: ${(e as Error).message.split("\n")[0]}`);
    }
    return out;
}

/** An image reference without its tag or digest (a registry's port kept). */
const repositoryOf = (image: string) => image.replace(/@.*$/, "").replace(/:[^/:]*$/, "");

/**
 * Every container of every rendered object of one stack (any kind: a container is an object with a string `image`),
 * checked against its contract when its image is under our registry. Returns the images seen and every problem: an
 * image of ours without a contract, an env that does not load, our registry named outside a container's `image`.
 */
function scanContainers(stack: string, resources: CapturedResource[]): { seen: Set<string>; problems: string[] } {
    const seen = new Set<string>();
    const problems: string[] = [];
    for (const res of resources) {
        const o = inputs(res);
        const ns = o.metadata?.namespace ?? "default";
        const pod = `${o.metadata?.name ?? res.name}-0`;
        const checked = new Set<string>();
        const mentions: string[] = [];
        const walk = (x: unknown, at: string) => {
            if (typeof x === "string") {
                if (x.includes(REGISTRY)) mentions.push(at);
            } else if (Array.isArray(x)) x.forEach((y, i) => walk(y, `${at}[${i}]`));
            else if (x && typeof x === "object") {
                const c = x as Record<string, any>;
                if (typeof c.image === "string" && c.image.startsWith(`${REGISTRY}/`)) {
                    const where = `${stack} ${res.type} ${ns}/${o.metadata?.name ?? res.name} container ${c.name ?? at}`;
                    const repo = repositoryOf(c.image);
                    const contract = CONTAINERS[repo];
                    checked.add(`${at}.image`);
                    if (!contract) problems.push(`${where}: image ${repo} is ours (under ${REGISTRY}) and has no contract in this test`);
                    else {
                        seen.add(repo);
                        try {
                            problems.push(...loadProblems(where, contract, containerEnv(c, ns, pod, resources)));
                        } catch (e) {
                            problems.push(`${where}: ${(e as Error).message}`);
                        }
                    }
                }
                for (const [k, v] of Object.entries(c)) walk(v, `${at}.${k}`);
            }
        };
        walk(o, "");
        for (const at of mentions.filter((m) => !checked.has(m)))
            problems.push(
                `${stack} ${res.type} ${res.name} ${at}: names ${REGISTRY} outside a container's image, where no contract is checked`,
            );
    }
    return { seen, problems };
}

/** Every Lambda of one stack against LAMBDAS (closed: a Lambda without a contract is a problem). */
function scanLambdas(stack: string, resources: CapturedResource[]): { seen: Set<string>; problems: string[] } {
    const seen = new Set<string>();
    const problems: string[] = [];
    for (const f of resources.filter((x) => x.type === "aws:lambda/function:Function").map(inputs)) {
        const contract = LAMBDAS[f.name];
        if (!contract) problems.push(`${stack}: Lambda ${f.name} has no contract in this test`);
        else {
            seen.add(f.name);
            problems.push(...loadProblems(`${stack} Lambda ${f.name}`, contract, f.environment?.variables ?? {}));
        }
    }
    return { seen, problems };
}

function expectLoads(where: string, c: Contract, env: Record<string, string>) {
    expect(loadProblems(where, c, env)).toEqual([]);
}

describe("service contracts: every rendered environment loads through its service's own loader", () => {
    it("every container of our services, in every shipped stack and every kind of object (auth and metering each somewhere)", () => {
        const seen = new Set<string>();
        const problems: string[] = [];
        for (const [stack, r] of Object.entries(rendered)) {
            const x = scanContainers(stack, r.resources);
            for (const i of x.seen) seen.add(i);
            problems.push(...x.problems);
        }
        expect(problems).toEqual([]);
        expect([...seen].sort()).toEqual(Object.keys(CONTAINERS).sort());
    });

    it("the contracts cover exactly the images config/versions.ts puts under our registry", () => {
        const ours: string[] = [];
        const walk = (x: unknown) => {
            if (x && typeof x === "object") {
                const o = x as Record<string, unknown>;
                if (typeof o.image === "string" && o.image.startsWith(`${REGISTRY}/`)) ours.push(o.image);
                Object.values(o).forEach(walk);
            }
        };
        walk(versions);
        expect(ours.sort()).toEqual(Object.keys(CONTAINERS).sort());
    });

    it("is closed: an image of ours without a contract fails in any kind of workload, and so does a bad env or a hidden reference", () => {
        const container = (image: string, env: unknown[] = []) => ({ name: "app", image, env });
        const pod = (c: unknown) => ({ spec: { containers: [c] } });
        const other = `${REGISTRY}/platform-new:0.1.0`;
        const kinds: Array<[string, (c: unknown) => Record<string, unknown>]> = [
            ["kubernetes:apps/v1:Deployment", (c) => ({ spec: { template: pod(c) } })],
            ["kubernetes:apps/v1:StatefulSet", (c) => ({ spec: { template: pod(c) } })],
            ["kubernetes:apps/v1:DaemonSet", (c) => ({ spec: { template: { spec: { initContainers: [c], containers: [] } } } })],
            ["kubernetes:batch/v1:Job", (c) => ({ spec: { template: pod(c) } })],
            ["kubernetes:batch/v1:CronJob", (c) => ({ spec: { jobTemplate: { spec: { template: pod(c) } } } })],
            [
                "kubernetes:leaderworkerset.x-k8s.io/v1:LeaderWorkerSet",
                (c) => ({ spec: { leaderWorkerTemplate: { workerTemplate: pod(c) } } }),
            ],
            [
                "kubernetes:nvidia.com/v1beta1:DynamoGraphDeployment",
                (c) => ({ spec: { components: [{ name: "x", podTemplate: pod(c) }] } }),
            ],
            [
                "kubernetes:nvidia.com/v1alpha1:DynamoGraphDeployment",
                (c) => ({ spec: { services: { X: { extraPodSpec: { mainContainer: c } } } } }),
            ],
        ];
        for (const [type, wrap] of kinds) {
            const obj = { metadata: { name: "w", namespace: "platform" }, ...wrap(container(other)) };
            expect(scanContainers("planted", [res(type, "w", obj)]).problems, type).toEqual([
                `planted ${type} platform/w container app: image ${REGISTRY}/platform-new is ours (under ${REGISTRY}) and has no contract in this test`,
            ]);
            // A known image with an env its service does not load.
            const bad = {
                metadata: { name: "w", namespace: "platform" },
                ...wrap(container(`${versions.authService.image}:1`, [{ name: "AUTH_BUCKET", value: "b" }])),
            };
            const p = scanContainers("planted", [res(type, "w", bad)]).problems;
            expect(
                p.some((m) => m.endsWith("sets AUTH_BUCKET, which its service does not read")),
                type,
            ).toBe(true);
            expect(
                p.some((m) => m.includes("its service's loader refuses the rendered env")),
                type,
            ).toBe(true);
        }
        // Our registry in Helm values (no container there to check).
        const release = res("kubernetes:helm.sh/v3:Release", "r", {
            values: { image: { repository: `${REGISTRY}/platform-auth`, tag: "1" } },
        });
        expect(scanContainers("planted", [release]).problems).toEqual([
            `planted kubernetes:helm.sh/v3:Release r .values.image.repository: names ${REGISTRY} outside a container's image, where no contract is checked`,
        ]);
        // envFrom is read too: a ConfigMap's keys are names the container sets.
        const cm = res("kubernetes:core/v1:ConfigMap", "cm", {
            kind: "ConfigMap",
            metadata: { name: "cm", namespace: "platform" },
            data: { AUTH_BUCKET: "b" },
        });
        const withEnvFrom = res("kubernetes:batch/v1:Job", "j", {
            metadata: { name: "j", namespace: "platform" },
            spec: { template: pod({ ...container(`${versions.authService.image}:1`), envFrom: [{ configMapRef: { name: "cm" } }] }) },
        });
        expect(
            scanContainers("planted", [cm, withEnvFrom]).problems.some((m) =>
                m.endsWith("sets AUTH_BUCKET, which its service does not read"),
            ),
        ).toBe(true);
        // A Lambda without a contract.
        const fn = res("aws:lambda/function:Function", "f", { name: "platform-new-function", environment: { variables: {} } });
        expect(scanLambdas("planted", [fn]).problems).toEqual(["planted: Lambda platform-new-function has no contract in this test"]);
    });

    it("every hub Lambda (closed: a Lambda without a contract fails)", () => {
        const seen = new Set<string>();
        const problems: string[] = [];
        for (const [stack, r] of Object.entries(rendered)) {
            const x = scanLambdas(stack, r.resources);
            for (const i of x.seen) seen.add(i);
            problems.push(...x.problems);
        }
        expect(problems).toEqual([]);
        expect([...seen].sort()).toEqual(Object.keys(LAMBDAS).sort());
    });

    it("the RDMA preflight: its contract is exactly what preflight.sh reads, and every rendered preflight container parses", () => {
        // The script is POSIX sh: its loader is its own `${PREFLIGHT_X:-default}` reads, outside comments.
        const code = fs
            .readFileSync(PREFLIGHT_SCRIPT, "utf8")
            .split("\n")
            .filter((l) => !/^\s*#/.test(l))
            .join("\n");
        const read = [...new Set(code.match(/PREFLIGHT_[A-Z_]+/g) ?? [])].sort();
        expect(read).toEqual(envNames(PREFLIGHT_ENV).sort());
        expect(path.relative(ROOT, PREFLIGHT_SCRIPT)).toBe("services/preflight/preflight.sh");
        // Every init container named rdma-preflight anywhere in a rendered resource (pods, DGDs, Mooncake).
        const found: Array<{ where: string; env: Record<string, string> }> = [];
        const walk = (x: unknown, where: string) => {
            if (Array.isArray(x)) x.forEach((y) => walk(y, where));
            else if (x && typeof x === "object") {
                const o = x as Record<string, any>;
                if (o.name === PREFLIGHT_CONTAINER && typeof o.image === "string")
                    found.push({ where, env: Object.fromEntries((o.env ?? []).map((e: any) => [e.name, e.value])) });
                for (const v of Object.values(o)) walk(v, where);
            }
        };
        for (const [stack, r] of Object.entries(rendered))
            for (const res of r.resources) walk(inputs(res), `${stack} ${res.type} ${res.name}`);
        expect(found.length).toBeGreaterThan(0);
        for (const f of found) expectLoads(f.where, { contract: PREFLIGHT_ENV, load: (env) => PREFLIGHT_ENV.parse(env) }, f.env);
    });

    it("the bucket owner every service sends (ExpectedBucketOwner) is the hub's account, in every rendered environment", () => {
        const owners: Record<string, string[]> = {};
        const note = (name: string, value: string) => {
            owners[name] ??= [];
            owners[name].push(value);
        };
        for (const r of Object.values(rendered)) {
            for (const w of r.resources.filter(
                (x) => x.type === "kubernetes:apps/v1:Deployment" || x.type === "kubernetes:apps/v1:StatefulSet",
            ))
                for (const c of inputs(w).spec?.template?.spec?.containers ?? [])
                    for (const e of c.env ?? []) if (/_BUCKET_OWNER$/.test(e.name)) note(e.name, e.value);
            for (const f of r.resources.filter((x) => x.type === "aws:lambda/function:Function").map(inputs))
                for (const [n, v] of Object.entries(f.environment?.variables ?? {})) if (/_BUCKET_OWNER$/.test(n)) note(n, String(v));
        }
        expect(Object.keys(owners).sort()).toEqual([
            "AUTH_POLICY_BUCKET_OWNER",
            "FAILED_BATCH_BUCKET_OWNER",
            "METERING_POLICY_BUCKET_OWNER",
        ]);
        expect(new Set(Object.values(owners).flat())).toEqual(new Set([MOCK_ACCOUNT_ID]));
        // Each spoke's auth and metering, the consumer and the ledger operations Lambda.
        expect(owners.FAILED_BATCH_BUCKET_OWNER).toHaveLength(2);
    });

    it("a planted rename is caught: the component setting AUTH_BUCKET where the service reads AUTH_POLICY_BUCKET", () => {
        // The planted fault of the seam: the component sets a name the service does not read.
        const stack = Object.values(rendered).find((r) =>
            r.resources.some((x) => x.type === "kubernetes:apps/v1:Deployment" && inputs(x).metadata?.name === "auth"),
        )!;
        const d = inputs(stack.resources.find((x) => x.type === "kubernetes:apps/v1:Deployment" && inputs(x).metadata?.name === "auth")!);
        const env = Object.fromEntries(
            d.spec.template.spec.containers[0].env.map((e: any) => [
                e.name,
                resolveEnvVar(e, d.metadata.namespace, "auth-0", stack.resources),
            ]),
        );
        const { AUTH_POLICY_BUCKET, ...rest } = env;
        expect(() =>
            expectLoads("planted", { contract: AUTH_ENV, load: loadAuthConfig }, { ...rest, AUTH_BUCKET: AUTH_POLICY_BUCKET }),
        ).toThrow();
        expect(() => loadAuthConfig(rest)).toThrow(/AUTH_POLICY_BUCKET/);
    });
});
