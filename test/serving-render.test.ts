/**
 * The repo's own spokes rendered through the real program under mocks: one DGD per placed endpoint, Mooncake pools,
 * the preflight ConfigMap and zero mandatory violations from the whole pack, in update and preview mode; a placement
 * that does not fit is a ConfigError. Schema validation against the upstream CRDs is not a unit test (they are not in
 * the repo): `.ci/run` renders every stack and runs `npm run validate -- --crds <upstream CRD dir>` on the result.
 */
import { versions } from "../config/versions";
import { spawnSync } from "node:child_process";
import * as path from "node:path";
import { beforeAll, describe, expect, it } from "vitest";
import { allPolicies } from "../policies/policies";
import { runPolicies } from "../tools/policy-runner";
import { isManifest, toManifest } from "../tools/outputs";
import { referenceableOutputs, unwrapWire } from "../tools/wire";
import { frontendService } from "../components/spoke/ModelEndpoint";
import { preflightScript } from "../lib/preflight";
import type { CapturedResource } from "../tools/harness";
import { byType, inputs, runHubAndSpoke, runRepoStack } from "./helpers";
import { ESBUILD_LOADER } from "./loader";

/** Every Kubernetes object the serving layer created (DGDs, Mooncake, preflight and client ConfigMaps). */
function servingObjects(rs: CapturedResource[]): Array<Record<string, any>> {
    const servingUrns = new Set(
        rs.filter((r) => /platform:spoke:(ModelEndpoint|MooncakeStore|RdmaPreflight|DynamoPlatform)/.test(r.type)).map((r) => r.urn),
    );
    return rs.filter((r) => isManifest(r) && servingUrns.has(r.parent)).map(toManifest);
}

describe.each(["spoke-hn1", "spoke-hcm1"])("%s", (spoke) => {
    let resources: CapturedResource[];
    beforeAll(async () => {
        resources = (await runHubAndSpoke(spoke)).spoke.resources;
    });

    it("renders one v1beta1 DGD per placed endpoint (two during a rollout), named after it (and its revision), in the inference namespace", () => {
        const dgds = byType(resources, "kubernetes:nvidia.com/v1beta1:DynamoGraphDeployment").map(inputs);
        expect(dgds.map((d) => `${d.metadata.namespace}/${d.metadata.name}/${d.spec.backendFramework}`).sort()).toEqual(
            spoke === "spoke-hcm1"
                ? [
                      "inference/llama-70b/vllm",
                      "inference/qwen3-32b/sglang",
                      // The shipped rollout (hcm1's Qwen): the target revision runs beside the source, its own graph
                      // (lib/rollout.ts), named so that neither graph's name begins with the other's.
                      "inference/v2-qwen3-32b/vllm",
                  ]
                : ["inference/llama-70b/vllm", "inference/qwen3-32b/sglang"],
        );
        for (const d of dgds) expect(d.spec.components[0]).toMatchObject({ name: "Frontend", type: "frontend" });
        expect(frontendService("qwen3-32b")).toEqual({ name: "qwen3-32b-frontend", namespace: "inference", port: 8000 });
    });

    it("ships the preflight script from the repo and pins the dynamo-platform chart", () => {
        const cm = byType(resources, "kubernetes:core/v1:ConfigMap")
            .map(inputs)
            .find((c) => c.metadata.name === "rdma-preflight");
        expect(cm?.data["preflight.sh"]).toBe(preflightScript());
        const rel = byType(resources, "kubernetes:helm.sh/v3:Release")
            .map(inputs)
            .find((r) => r.chart === "dynamo-platform");
        expect(rel).toMatchObject({
            version: versions.dynamoPlatform.version,
            namespace: "dynamo-system",
            repositoryOpts: { repo: "https://helm.ngc.nvidia.com/nvidia/ai-dynamo" },
        });
        expect(rel?.values.global).toEqual({
            nats: { install: false },
            etcd: { install: false },
            grove: { install: false, enabled: false },
            "kai-scheduler": { install: false, enabled: false },
        });
    });

    it("renders the serving objects as Kubernetes manifests", () => {
        expect(servingObjects(resources).length).toBeGreaterThan(4);
    });

    it("the whole policy pack reports nothing, in update and in preview mode", async () => {
        const r = await runPolicies(allPolicies, resources);
        expect(r.findings).toEqual([]);
        const preview = (await runHubAndSpoke(spoke, true)).spoke.resources;
        expect((await runPolicies(allPolicies, preview)).mandatory).toEqual([]);
    });
});

describe("spoke-sg1 (EKS, EFA): the same serving layer on the EKS infrastructure", () => {
    let resources: CapturedResource[];
    beforeAll(async () => {
        resources = (await runHubAndSpoke("spoke-sg1")).spoke.resources;
    });

    it("renders the placed endpoint's DGD, the Dynamo platform and the preflight; no Mooncake on EFA", () => {
        expect(
            byType(resources, "kubernetes:nvidia.com/v1beta1:DynamoGraphDeployment")
                .map(inputs)
                .map((d) => `${d.metadata.namespace}/${d.metadata.name}/${d.spec.backendFramework}`)
                .sort(),
        ).toEqual(["inference/llama-70b/vllm", "inference/qwen3-32b/sglang"]);
        expect(
            byType(resources, "kubernetes:core/v1:ConfigMap")
                .map(inputs)
                .find((c) => c.metadata.name === "rdma-preflight")?.data["preflight.sh"],
        ).toBe(preflightScript());
        expect(
            byType(resources, "kubernetes:helm.sh/v3:Release")
                .map(inputs)
                .filter((r) => r.chart === "dynamo-platform"),
        ).toHaveLength(1);
        expect(byType(resources, "platform:spoke:MooncakeStore")).toEqual([]);
    });

    it("renders exactly the serving objects an EFA spoke needs", () => {
        expect(
            servingObjects(resources)
                .map((o) => o.kind)
                .sort(),
        ).toEqual(["ConfigMap", "DaemonSet", "DynamoGraphDeployment", "DynamoGraphDeployment", "Namespace"]);
    });

    it("a placement beyond the node group's desired nodes is a ConfigError naming the contract key", async () => {
        const hub = await runRepoStack("hub-prod");
        const outputs = structuredClone(unwrapWire(referenceableOutputs(hub.outputs))) as Record<string, any>;
        outputs.spokeContracts.sg1.endpoints[0].topology.decode.replicas = 4;
        await expect(runRepoStack("spoke-sg1", { stackOutputs: { "hub-prod": { outputs, secretOutputNames: [] } } })).rejects.toThrow(
            'stacks/Pulumi.spoke-sg1.yaml: invalid stack configuration\n  - hub output spokeContracts.sg1.endpoints: endpoints on pool "h200" need 24 GPUs; its 2 node(s) have 16',
        );
    });
});

describe("placement that does not fit", () => {
    it("is a ConfigError naming the stack file and the contract key", async () => {
        const hub = await runRepoStack("hub-prod");
        const outputs = structuredClone(unwrapWire(referenceableOutputs(hub.outputs))) as Record<string, any>;
        outputs.spokeContracts.hn1.endpoints[0].topology.decode.gpusPerWorker = 8;
        outputs.spokeContracts.hn1.endpoints[0].topology.decode.replicas = 2;
        await expect(runRepoStack("spoke-hn1", { stackOutputs: { "hub-prod": { outputs, secretOutputNames: [] } } })).rejects.toThrow(
            'stacks/Pulumi.spoke-hn1.yaml: invalid stack configuration\n  - hub output spokeContracts.hn1.endpoints: endpoints on pool "h200" need 24 GPUs; its 2 node(s) have 16',
        );
    });
});

describe("tools/bench-render.ts", () => {
    it("generates 1 hub + N spokes x M endpoints that render (CLI, own process) with no failure or mandatory violation", async () => {
        const { benchStacks } = await import("../tools/bench-render");
        const stacks = benchStacks(2, 3);
        expect(stacks.map((s) => s.name)).toEqual(["bench-hub", "spoke-b1", "spoke-b2"]);
        expect(JSON.parse(stacks[0].config["platform:endpoints"]).map((e: any) => `${e.spoke}/${e.name}/${e.engine}`)).toEqual([
            "b1/ep-1/vllm",
            "b1/ep-2/sglang",
            "b1/ep-3/vllm",
            "b2/ep-1/vllm",
            "b2/ep-2/sglang",
            "b2/ep-3/vllm",
        ]);
        const r = spawnSync(process.execPath, ["-r", ESBUILD_LOADER, "tools/bench-render.ts", "2", "--endpoints", "3", "--once"], {
            cwd: path.join(__dirname, ".."),
            encoding: "utf8",
            env: { ...process.env, TS_NODE_TRANSPILE_ONLY: "true" },
        });
        expect(r.status, r.stdout + r.stderr).toBe(0);
        expect(r.stdout).toMatch(/^rendered 3 stacks, \d+ resources in \d+ ms\n$/);
    });
});
