/**
 * Preview is the gate. Under `pulumi preview` the analyzer turns a policy that reads an unknown
 * value into an advisory "can't run policy ... during preview" (pulumi/pulumi-policy server.ts),
 * i.e. a silent pass. These tests run the whole pack on every stack under stacks/ in preview mode (a brand-new
 * stack: no previous outputs, computed outputs unknown) and normal mode, apply the same faults to both, and require
 * the same verdict; where a guarded value is truly unknown, the rule must fail closed and say so.
 */
import * as fs from "node:fs";
import { beforeAll, describe, expect, it } from "vitest";
import type { Policy } from "@pulumi/policy";
import { allPolicies } from "../../policies/policies";
import { efaLaunchTemplate } from "../../policies/efa";
import { failClosed } from "../../policies/lib/unknown";
import type { CapturedResource } from "../../tools/harness";
import { type PolicyReport, runPolicies } from "../../tools/policy-runner";
import { UNKNOWN } from "../../tools/wire";
import { runHubAndSpoke, runRepoStack, STACKS } from "../helpers";

const stacks = fs
    .readdirSync(STACKS)
    .map((f) => /^Pulumi\.(.+)\.yaml$/.exec(f)?.[1])
    .filter((s): s is string => !!s)
    .sort();
const rendered: Record<string, { normal: CapturedResource[]; preview: CapturedResource[] }> = {};

beforeAll(async () => {
    for (const s of stacks) {
        if (s.startsWith("hub"))
            rendered[s] = { normal: (await runRepoStack(s)).resources, preview: (await runRepoStack(s, { preview: true })).resources };
        else rendered[s] = { normal: (await runHubAndSpoke(s)).spoke.resources, preview: (await runHubAndSpoke(s, true)).spoke.resources };
    }
}, 240_000);

/** The verdict: mandatory findings as `policy: message`, sorted. */
const verdict = (r: PolicyReport) => r.mandatory.map((f) => `${f.policyName}: ${f.message}`).sort();
const cantRun = (r: PolicyReport) => r.findings.filter((f) => /can't run policy/.test(f.message));

describe("the whole pack in preview mode on every stack under stacks/", () => {
    it("finds the repo's stacks", () => {
        expect(stacks).toEqual(expect.arrayContaining(["hub-prod", "spoke-hn1", "spoke-sg1"]));
    });
    for (const s of stacks) {
        it(`${s}: no rule degrades to "can't run during preview", and preview gives the verdict of a normal render`, async () => {
            const prev = await runPolicies(allPolicies, rendered[s].preview);
            const norm = await runPolicies(allPolicies, rendered[s].normal);
            expect(cantRun(prev)).toEqual([]);
            expect(verdict(prev)).toEqual(verdict(norm));
        });
    }
    // A spoke generates no secret any more (test/spoke-secrets.test.ts), so the generated Secret that was the on-prem
    // spoke's unknown is gone; the EKS spoke's unknowns remain, in an AWS resource and in a chart's values.
    it("the preview graphs really hold unknowns (the test is not vacuous): the EFA launch template's security groups, a chart's values", () => {
        const lt = rendered["spoke-sg1"].preview.find(efaTemplate)!;
        expect(JSON.stringify(lt.outputs)).toContain(UNKNOWN);
        expect(
            rendered["spoke-sg1"].preview.some((r) => r.type.startsWith("kubernetes:") && JSON.stringify(r.outputs).includes(UNKNOWN)),
        ).toBe(true);
    });
});

/** Applies `fn` to inputs and outputs of matching resources (a copy of the graph). */
function mutate(rs: CapturedResource[], match: (r: CapturedResource) => boolean, fn: (o: Record<string, any>) => void): CapturedResource[] {
    let hit = false;
    const out = rs.map((r) => {
        if (!match(r)) return r;
        hit = true;
        const c = structuredClone(r);
        fn(c.inputs as Record<string, any>);
        fn(c.outputs as Record<string, any>);
        return c;
    });
    if (!hit) throw new Error("fault matched no resource");
    return out;
}
const kind = (k: string, name?: string) => (r: CapturedResource) =>
    (r.inputs as any)?.kind === k && (name === undefined || (r.inputs as any)?.metadata?.name === name);
const type = (t: string) => (r: CapturedResource) => r.type === t;
/** The EFA node group's launch template (the system node group has one too, without EFA interfaces). */
const efaTemplate = (r: CapturedResource) =>
    r.type === "aws:ec2/launchTemplate:LaunchTemplate" && Array.isArray((r.inputs as any)?.networkInterfaces);
const role = (o: Record<string, any>, t: string) =>
    o.spec.components.find((c: any) => c.type === t).podTemplate.spec.containers.find((c: any) => c.name === "main");
const setEnv = (c: Record<string, any>, name: string, value: string) => {
    c.env = [...(c.env ?? []).filter((e: any) => e.name !== name), { name, value }];
};

/** Faults from the reference lists, each applied to a brand-new stack's preview and to its normal render. */
const faults: Array<{ name: string; stack: string; apply: (rs: CapturedResource[]) => CapturedResource[] }> = [
    {
        name: "UCX_TLS with tcp on prefill (ai-dynamo/nixl #1614)",
        stack: "spoke-hn1",
        apply: (rs) =>
            mutate(rs, kind("DynamoGraphDeployment", "llama-70b"), (o) => setEnv(role(o, "prefill"), "UCX_TLS", "cuda_copy,cuda_ipc,tcp")),
    },
    {
        name: "no RDMA device on decode (vllm #52607)",
        stack: "spoke-hn1",
        apply: (rs) =>
            mutate(rs, kind("DynamoGraphDeployment", "llama-70b"), (o) => {
                role(o, "decode").resources = { limits: { "nvidia.com/gpu": "4" } };
            }),
    },
    {
        name: "decode kv-cache dtype differs from prefill (class 2)",
        stack: "spoke-hn1",
        apply: (rs) =>
            mutate(rs, kind("DynamoGraphDeployment", "llama-70b"), (o) => {
                role(o, "decode").args.push("--kv-cache-dtype", "fp8");
            }),
    },
    {
        name: "envFrom a ConfigMap outside the stack (class 5)",
        stack: "spoke-hn1",
        apply: (rs) =>
            mutate(rs, kind("DynamoGraphDeployment", "llama-70b"), (o) => {
                role(o, "prefill").envFrom = [{ configMapRef: { name: "site-ucx" } }];
            }),
    },
    {
        name: "ext_authz failOpen (envoyproxy/gateway#6512)",
        stack: "spoke-hn1",
        apply: (rs) =>
            mutate(rs, kind("SecurityPolicy"), (o) => {
                o.spec.extAuth.failOpen = true;
            }),
    },
    {
        name: "identity headers not stripped early (ai-gateway#2410)",
        stack: "spoke-hn1",
        apply: (rs) =>
            mutate(rs, kind("ClientTrafficPolicy"), (o) => {
                o.spec.headers.earlyRequestHeaders = { remove: ["x-ai-eg-model"] };
            }),
    },
    {
        name: "gpu-operator values from a file (class 5)",
        stack: "spoke-hn1",
        apply: (rs) =>
            mutate(
                rs,
                (r) => (r.inputs as any).chart === "gpu-operator",
                (o) => {
                    o.valueYamlFiles = [{ path: "values.yaml" }];
                },
            ),
    },
    {
        name: "NicClusterPolicy plugin before PR #82",
        stack: "spoke-hn1",
        apply: (rs) =>
            mutate(rs, kind("NicClusterPolicy"), (o) => {
                o.spec.rdmaSharedDevicePlugin.version = "v1.3.2";
            }),
    },
    {
        name: "EFA launch template missing network cards",
        stack: "spoke-sg1",
        apply: (rs) =>
            mutate(rs, efaTemplate, (o) => {
                o.networkInterfaces = o.networkInterfaces.slice(0, 9);
            }),
    },
    {
        name: "EFA node group over two subnets",
        stack: "spoke-sg1",
        apply: (rs) =>
            mutate(
                rs,
                (r) => r.type === "aws:eks/nodeGroup:NodeGroup" && (r.inputs as any).labels?.["inference-platform.io/fabric"] === "efa",
                (o) => {
                    o.subnetIds = [...o.subnetIds, "subnet-b"];
                },
            ),
    },
    {
        name: "EFA device plugin allowlist without the instance type (aws/eks-charts PR #1348)",
        stack: "spoke-sg1",
        apply: (rs) =>
            mutate(
                rs,
                (r) => (r.inputs as any).chart === "aws-efa-k8s-device-plugin",
                (o) => {
                    o.values.supportedInstanceLabels.values = ["p5.48xlarge"];
                },
            ),
    },
    {
        name: "EFA worker without FI_PROVIDER=efa (nixl PR #833)",
        stack: "spoke-sg1",
        // The P/D graph (sg1 also runs an aggregated vLLM graph without KV transfer).
        apply: (rs) => mutate(rs, kind("DynamoGraphDeployment", "qwen3-32b"), (o) => setEnv(role(o, "decode"), "FI_PROVIDER", "tcp")),
    },
];

describe("every fault gives the same verdict in preview (brand-new stack) and normal mode", () => {
    for (const f of faults) {
        it(f.name, async () => {
            const norm = await runPolicies(allPolicies, f.apply(rendered[f.stack].normal));
            const prev = await runPolicies(allPolicies, f.apply(rendered[f.stack].preview));
            const base = new Set(verdict(await runPolicies(allPolicies, rendered[f.stack].normal)));
            expect(verdict(norm).filter((v) => !base.has(v)).length, "the fault is caught in normal mode").toBeGreaterThan(0);
            expect(cantRun(prev)).toEqual([]);
            expect(verdict(prev)).toEqual(verdict(norm));
        });
    }
});

describe("a guarded value that is truly unknown fails closed, saying so", () => {
    const only = (ps: Policy[]) => ps.map((p) => failClosed(p));
    it("EFA launch template whose interfaces are unknown (as the program built them before): mandatory, not advisory", async () => {
        const rs = mutate(rendered["spoke-sg1"].preview, efaTemplate, (o) => {
            o.networkInterfaces = UNKNOWN;
        });
        const r = await runPolicies(only([efaLaunchTemplate]), rs);
        expect(cantRun(r)).toEqual([]);
        expect(r.mandatory.map((f) => f.message)).toEqual([
            expect.stringMatching(
                /^aws:ec2\/launchTemplate:LaunchTemplate .*: property \.networkInterfaces is unknown during preview, and policy efa-node-group-launch-template guards it, so it refuses \(fail closed\)/,
            ),
        ]);
        // Unwrapped, the analyzer would degrade the rule to an advisory: what the wrapper exists to prevent.
        expect(cantRun(await runPolicies([efaLaunchTemplate], rs))).toHaveLength(1);
    });
    it("placement group name unknown: read from the placement group the template depends on", async () => {
        const rs = rendered["spoke-sg1"].preview;
        const lt = rs.find(efaTemplate)!;
        expect(JSON.stringify((lt.outputs as any).placement)).toContain(UNKNOWN);
        expect((await runPolicies(only([efaLaunchTemplate]), rs)).mandatory).toEqual([]);
        const wrongPg = mutate(rs, type("aws:ec2/placementGroup:PlacementGroup"), (o) => {
            o.strategy = "spread";
        });
        expect((await runPolicies(only([efaLaunchTemplate]), wrongPg)).mandatory.map((f) => f.message).join("\n")).toMatch(
            /has strategy spread, not cluster/,
        );
    });
    it("a DGD whose UCX_TLS is computed (unknown at preview) and a NicClusterPolicy whose config is unknown", async () => {
        const env = mutate(rendered["spoke-hn1"].preview, kind("DynamoGraphDeployment", "llama-70b"), (o) => {
            const m = role(o, "prefill");
            m.env = [...m.env.filter((e: any) => e.name !== "UCX_TLS"), { name: "UCX_TLS", value: UNKNOWN }];
        });
        const r1 = await runPolicies(allPolicies, env);
        expect(cantRun(r1)).toEqual([]);
        expect(r1.mandatory.map((f) => `${f.policyName}: ${f.message}`).join("\n")).toMatch(
            /guarded-settings-visible: .*sets guarded variable UCX_TLS from something the pack cannot read \(its value is unknown during preview\)/,
        );
        const ncp = mutate(rendered["spoke-hn1"].preview, kind("NicClusterPolicy"), (o) => {
            o.spec.rdmaSharedDevicePlugin.config = UNKNOWN;
        });
        const r2 = await runPolicies(allPolicies, ncp);
        expect(cantRun(r2)).toEqual([]);
        expect(
            r2.mandatory.some((f) =>
                /NicClusterPolicy .*property \.spec\.rdmaSharedDevicePlugin\.config is unknown during preview/.test(f.message),
            ),
        ).toBe(true);
    });
});
