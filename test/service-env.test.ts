import { beforeAll, describe, expect, it } from "vitest";
import * as fs from "node:fs";
import * as path from "node:path";
import { versions } from "../config/versions";
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
import { referenceableOutputs } from "../tools/wire";
import { inputs, ROOT, runRepoStack, STACKS } from "./helpers";

/**
 * The seam between each component and the service it deploys: every container of every shipped stack that runs
 * one of our services, and every hub Lambda, has its rendered environment loaded through that service's own
 * loader (the code the process runs at start). Renaming a variable in a service, or making one required, fails
 * here; so does a component setting a name the service does not read.
 */

interface Contract {
    contract: EnvContract;
    /** The service's own loader; throws on a missing or invalid variable. */
    load: (env: NodeJS.ProcessEnv) => unknown;
}

/** Container images of our services -> their contracts. */
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

/** Resolves one Kubernetes env entry the way the kubelet would, from the objects of the same render (and the installed ones). */
function resolveEnvVar(e: any, ns: string, pod: string, resources: CapturedResource[]): string {
    if (typeof e.value === "string") return e.value;
    const ref = e.valueFrom?.secretKeyRef;
    if (ref) {
        const secret = [...resources.filter((r) => r.type === "kubernetes:core/v1:Secret").map(inputs), ...INSTALLED].find(
            (x) => x.metadata?.name === ref.name && (x.metadata?.namespace ?? "default") === ns,
        );
        expect(secret, `Secret ${ns}/${ref.name} referenced by ${e.name} is rendered or installed`).toBeDefined();
        const v =
            secret!.stringData?.[ref.key] ??
            (secret!.data?.[ref.key] === undefined ? undefined : Buffer.from(secret!.data[ref.key], "base64").toString("utf8"));
        expect(v, `Secret ${ns}/${ref.name} has key ${ref.key} (for ${e.name})`).toBeTypeOf("string");
        return v as string;
    }
    if (e.valueFrom?.fieldRef?.fieldPath === "metadata.name") return pod;
    throw new Error(`env ${e.name}: no value and no resolvable valueFrom (${JSON.stringify(e.valueFrom)})`);
}

function expectLoads(where: string, c: Contract, env: Record<string, string>) {
    const known = new Set(envNames(c.contract));
    expect(
        Object.keys(env).filter((n) => !known.has(n)),
        `${where}: variables its service does not read`,
    ).toEqual([]);
    expect(() => c.load(env), `${where}: the service's loader accepts the rendered env`).not.toThrow();
}

describe("service contracts: every rendered environment loads through its service's own loader", () => {
    it("every container of our services, in every shipped stack (auth and metering each somewhere)", () => {
        const seen = new Set<string>();
        for (const [stack, r] of Object.entries(rendered)) {
            for (const w of r.resources.filter(
                (x) => x.type === "kubernetes:apps/v1:Deployment" || x.type === "kubernetes:apps/v1:StatefulSet",
            )) {
                const d = inputs(w);
                const ns = d.metadata?.namespace ?? "default";
                const pod = `${d.metadata?.name}-0`;
                for (const c of d.spec?.template?.spec?.containers ?? []) {
                    const image = String(c.image ?? "").replace(/[:@].*$/, "");
                    const contract = CONTAINERS[image];
                    if (!contract) continue;
                    seen.add(image);
                    const env = Object.fromEntries((c.env ?? []).map((e: any) => [e.name, resolveEnvVar(e, ns, pod, r.resources)]));
                    expectLoads(`${stack} ${ns}/${d.metadata?.name} container ${c.name}`, contract, env);
                }
            }
        }
        expect([...seen].sort()).toEqual(Object.keys(CONTAINERS).sort());
    });

    it("every hub Lambda (closed: a Lambda without a contract fails)", () => {
        const seen = new Set<string>();
        for (const [stack, r] of Object.entries(rendered)) {
            for (const f of r.resources.filter((x) => x.type === "aws:lambda/function:Function").map(inputs)) {
                const contract = LAMBDAS[f.name];
                expect(contract, `${stack}: Lambda ${f.name} has a contract in this test`).toBeDefined();
                seen.add(f.name);
                expectLoads(`${stack} Lambda ${f.name}`, contract, f.environment?.variables ?? {});
            }
        }
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
                if (o.name === PREFLIGHT_CONTAINER && Array.isArray(o.env))
                    found.push({ where, env: Object.fromEntries(o.env.map((e: any) => [e.name, e.value])) });
                for (const v of Object.values(o)) walk(v, where);
            }
        };
        for (const [stack, r] of Object.entries(rendered))
            for (const res of r.resources) walk(inputs(res), `${stack} ${res.type} ${res.name}`);
        expect(found.length).toBeGreaterThan(0);
        for (const f of found) expectLoads(f.where, { contract: PREFLIGHT_ENV, load: (env) => PREFLIGHT_ENV.parse(env) }, f.env);
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
