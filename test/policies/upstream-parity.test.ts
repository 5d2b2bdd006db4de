/**
 * The pack enforces exactly what `npm run upstream-check` enforces: one planted fault per rule of the upstream/check
 * registry, each found by that rule alone, by the CLI's full run (upstream/check `checkStack`, what
 * tools/upstream-check.ts runs per rendered stack) and by the pack (policies/upstream.ts `upstream-rules` and
 * policies/pd-compat.ts `pd-kv-settings-match`, which runs the pair rule) on the same object and key.
 */
import { describe, expect, it } from "vitest";
import * as check from "../../upstream/check";
import { pdSettingsMatch } from "../../policies/pd-compat";
import { upstreamRulesPolicy } from "../../policies/upstream";
import type { CapturedResource } from "../../tools/harness";
import {
    checkStack,
    containerRule,
    defaultFacts,
    emptyResult,
    helmValuesRule,
    kvClosedWorldRule,
    mooncakePairRule,
    type Obj,
    pairRule,
    type Rule,
    releasesOf,
    rules,
    signalsRule,
    unreadPodTemplateRule,
} from "../../upstream/check";
import { edit as editByName } from "./graph-edit";
import { component, edit, endpoint, k8s, mainOf, setArg, setEnv, stack, violations } from "./rdma-fixtures";

/** A compliant vLLM prefill/decode graph on the Mooncake pool (equal TP: one store pool keys blocks by tp_rank). */
const compliant = () =>
    stack([
        endpoint({
            engine: "vllm",
            topology: { mode: "disaggregated", prefill: { replicas: 1, gpusPerWorker: 4 }, decode: { replicas: 1, gpusPerWorker: 4 } },
        }),
    ]);
const GRAPH = "DynamoGraphDeployment/inference/llama-70b";
const dgd = (rs: CapturedResource[], fn: (o: Obj) => void) => edit(rs, "DynamoGraphDeployment", fn);

/** The rendered objects and resource records upstream-check reads (tools/render's manifests.yaml and resources.json). */
function rendered(rs: CapturedResource[]): { objects: Obj[]; resources: Obj[] } {
    return {
        objects: rs.filter((r) => r.type.startsWith("kubernetes:") && !r.type.startsWith("kubernetes:helm.sh/")).map((r) => r.inputs),
        resources: rs.map((r) => ({ type: r.type, name: r.name, inputs: r.inputs })),
    };
}

/** One planted fault: the rule that must find it, where (object, key) and optionally what the message says. */
interface Row {
    rule: Rule;
    name: string;
    object: string;
    key: string;
    detail?: RegExp;
    plant: (rs: CapturedResource[]) => CapturedResource[];
}

const table: Row[] = [
    {
        rule: unreadPodTemplateRule,
        name: "a workload kind the walker cannot read",
        object: "Widget/inference/x",
        key: "spec.template.spec.containers",
        plant: (rs) => [
            ...rs,
            k8s({
                apiVersion: "example.com/v1",
                kind: "Widget",
                metadata: { name: "x", namespace: "inference" },
                spec: { template: { spec: { containers: [{ name: "w", image: "busybox:1.36" }] } } },
            }),
        ],
    },
    {
        rule: containerRule,
        name: "an unknown flag on both workers",
        object: `${GRAPH} component decode`,
        key: "--bogus-flag-xyz",
        plant: (rs) =>
            dgd(rs, (o) => {
                for (const n of ["prefill", "decode"]) mainOf(o, n).args.push("--bogus-flag-xyz");
            }),
    },
    {
        rule: helmValuesRule,
        name: "a Helm values key the chart does not read",
        object: "helm Release dynamo-platform (dynamo-platform@1.5.0)",
        key: "values.bogusTopLevelKey",
        plant: (rs) =>
            editByName(structuredClone(rs), "dynamo-platform", (o) => {
                o.values.bogusTopLevelKey = true;
            }),
    },
    {
        rule: pairRule,
        name: "decode's Mooncake config mount made writable",
        object: GRAPH,
        key: "volumeMounts",
        detail: /prefill has volumeMounts \/etc\/mooncake \(ro\) <- .* but decode has \/etc\/mooncake <- /,
        plant: (rs) =>
            dgd(rs, (o) => {
                for (const m of mainOf(o, "decode").volumeMounts) if (m.mountPath === "/etc/mooncake") m.readOnly = false;
            }),
    },
    {
        rule: kvClosedWorldRule,
        name: "UCX over TCP on both workers",
        object: GRAPH,
        key: "env.UCX_TLS",
        plant: (rs) =>
            dgd(rs, (o) => {
                for (const n of ["prefill", "decode"]) setEnv(mainOf(o, n), "UCX_TLS", "tcp");
            }),
    },
    {
        rule: mooncakePairRule,
        name: "the Mooncake store on another protocol than the engines",
        object: GRAPH,
        key: "protocol",
        plant: (rs) =>
            edit(
                rs,
                "Deployment",
                (o) => setEnv(o.spec.template.spec.containers[0], "MOONCAKE_PROTOCOL", "tcp"),
                "llama-70b-mooncake-store",
            ),
    },
    {
        rule: signalsRule,
        name: "a Planner config key PlannerConfig does not have",
        object: `${GRAPH} component Planner`,
        key: "--config.bogus_key",
        plant: (rs) =>
            dgd(rs, (o) => {
                const c = component(o, "Planner").podTemplate.spec.containers[0];
                const cfg = JSON.parse(c.args[c.args.indexOf("--config") + 1]);
                setArg(c, "--config", JSON.stringify({ ...cfg, bogus_key: 1 }));
            }),
    },
];

const pack = [upstreamRulesPolicy(), pdSettingsMatch];

/** Positions of registry entries that upstream/check does not export by name (the table can only import named rules). */
function unnamedRules(registry: readonly Rule[]): number[] {
    const named = new Set<unknown>(Object.values(check));
    return registry.flatMap((r, i) => (named.has(r) ? [] : [i]));
}

describe("every upstream-check rule runs in the pack, on the same object and key", () => {
    it("the table plants one fault per rule of the registry", () => {
        expect(new Set(table.map((r) => r.rule))).toEqual(new Set(rules));
    });
    it("every rule of the registry is a named export, so the table picks rules by name, never by position", () => {
        expect(unnamedRules(rules)).toEqual([]);
        // Planted: an inline rule appended to the registry is named, and the signals row keeps its rule.
        const appended: Rule = () => [];
        expect(unnamedRules([...rules, appended])).toEqual([rules.length]);
        expect(rules).toContain(signalsRule);
    });
    it("the compliant graph: no finding from upstream-check, no violation from the pack", async () => {
        const { objects, resources } = rendered(compliant());
        expect(checkStack("t", objects, resources).findings).toEqual([]);
        expect(await violations(pack, compliant())).toEqual([]);
    });
    for (const row of table)
        it(`${row.name}: ${row.object} ${row.key}`, async () => {
            const rs = row.plant(compliant());
            const { objects, resources } = rendered(rs);
            const at = (f: { object: string; key: string; message: string }) =>
                f.object === row.object && f.key === row.key && (!row.detail || row.detail.test(f.message));
            const stackOf = { stack: "t", objects, releases: releasesOf(resources) };
            const alone = row.rule(stackOf, defaultFacts, emptyResult());
            expect(alone.filter(at), JSON.stringify(alone, null, 1)).not.toEqual([]);
            const cli = checkStack("t", objects, resources).findings;
            expect(cli.filter(at), cli.map((f) => `${f.object} ${f.key}`).join("\n")).not.toEqual([]);
            const v = await violations(pack, rs);
            expect(
                v.filter((m) => m.startsWith(`${row.object} `) && m.includes(` field ${row.key}: `) && (!row.detail || row.detail.test(m))),
                v.join("\n"),
            ).not.toEqual([]);
        });
});
