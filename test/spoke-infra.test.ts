/**
 * A spoke = provider-specific infrastructure + shared workloads (programs/spoke-infra.ts). Both infrastructure
 * builders hand the workloads the same shape, and splitting them out of programs/spoke.ts moved no on-prem URN:
 * test/fixtures/spoke-hn1-urns.json is the URN list of spoke-hn1 rendered before the split
 * (`npm run render -- --out <dir> spoke-hn1`, `resources.json`). A change that legitimately adds or renames on-prem
 * resources updates that file in the same pull request, where reviewers see every URN that moves. Added since: the
 * peer fallback to hcm1 (lib/failover.ts: peers ConfigMap, CA ConfigMap, peer Backend and AIServiceBackend, the
 * route's retry BackendTrafficPolicy). Removed since: the spoke's generated secrets (the counter store's password, the
 * cache-salt key) and the Secrets that carried them, now installed by `npm run mint-key -- install-spoke-secrets`; the
 * eight nv-ipam IPPools `rail-<i>` and IPoIBNetworks `h200-rail-<i>`, rendered since only with
 * `platform:backend.railNetworks: true` (no pod of the platform needs an IP on a rail; test/program.test.ts).
 */
import * as k8s from "@pulumi/kubernetes";
import * as fs from "node:fs";
import * as path from "node:path";
import { describe, expect, it } from "vitest";
import { BackendFabric } from "../components/spoke/BackendFabric";
import { EfaDevicePlugin } from "../components/spoke/EfaDevicePlugin";
import { GpuOperator } from "../components/spoke/GpuOperator";
import { isEksSpoke, parseStackConfig, type SpokeConfig } from "../config/stack";
import { buildEksInfra } from "../programs/eks-spoke";
import { buildOnPremInfra } from "../programs/onprem-spoke";
import type { SpokeInfra } from "../programs/spoke-infra";
import { runStack } from "../tools/harness";
import { platformKeys, runHubAndSpoke, stackConfigDoc, stackFile } from "./helpers";

const BEFORE_SPLIT = JSON.parse(fs.readFileSync(path.join(__dirname, "fixtures", "spoke-hn1-urns.json"), "utf8")) as string[];

describe.each([false, true])("spoke-hn1 URNs after the infra/workloads split (preview=%s)", (preview) => {
    it("are exactly those rendered before it", async () => {
        const { spoke } = await runHubAndSpoke("spoke-hn1", preview);
        const urns = new Set(spoke.resources.map((r) => r.urn));
        const removed = BEFORE_SPLIT.filter((u) => !urns.has(u));
        expect(urns.size).toBeGreaterThanOrEqual(BEFORE_SPLIT.length);
        const added = [...urns].filter((u) => !BEFORE_SPLIT.includes(u) && !u.endsWith("::pulumi:pulumi:Stack::platform-spoke-hn1"));
        expect({ removed, added }).toEqual({ removed: [], added: [] });
    });
});

/** Builds one infrastructure under mocks and returns what the workloads would see of it, as plain data. */
async function infraOf(stack: string): Promise<Record<string, any>> {
    const cfg = parseStackConfig(platformKeys(stackConfigDoc(stack)), `stacks/Pulumi.${stack}.yaml`);
    if (cfg.role !== "spoke") throw new Error(`${stack} is not a spoke`);
    const spoke: SpokeConfig = cfg.spoke;
    let infra: SpokeInfra | undefined;
    await runStack({
        project: "platform",
        stack,
        config: stackFile(stack).config,
        program: () => {
            infra = isEksSpoke(spoke) ? buildEksInfra(spoke) : buildOnPremInfra(spoke);
            return {};
        },
    });
    const i = infra!;
    const kind = (x: unknown) => [BackendFabric, EfaDevicePlugin, GpuOperator].find((c) => x instanceof c)?.name ?? "other";
    return {
        provider: i.provider instanceof k8s.Provider,
        namespaces: [i.platformNamespace, i.inferenceNamespace].every((n) => n instanceof k8s.core.v1.Namespace),
        pools: i.pools.map((p) => ({
            name: p.name,
            profile: p.profile.name,
            nodeCount: p.nodeCount,
            nodeSelector: p.nodeSelector,
            tolerations: p.tolerations,
            memlockUnlimited: p.memlockUnlimited,
            fabric: p.fabric,
            rdmaResources: p.rdmaResources,
            frontendHcas: p.frontendHcas,
            hugepages2MiPerNode: p.hugepages2MiPerNode,
        })),
        systemNodeSelector: i.systemNodeSelector,
        devicePlugins: i.devicePlugins.map(kind),
        gpuDirect: i.gpuDirect.map(kind),
        minLinkRateGbps: i.minLinkRateGbps,
        outputKeys: Object.keys(i.outputs),
    };
}

describe("SpokeInfra: one shape from both infrastructure builders", () => {
    const gpuTaint = [{ key: "nvidia.com/gpu", operator: "Equal", value: "present", effect: "NoSchedule" }];

    it("on-prem (spoke-hn1): rail resources from the backend fabric, frontend HCAs, no huge pages, no system selector", async () => {
        const i = await infraOf("spoke-hn1");
        expect([i.provider, i.namespaces]).toEqual([true, true]);
        expect(i.pools).toEqual([
            {
                name: "h200",
                profile: "dgx-h200",
                nodeCount: 2,
                nodeSelector: { "inference-platform.io/pool": "h200" },
                tolerations: gpuTaint,
                memlockUnlimited: true,
                fabric: "infiniband",
                rdmaResources: [0, 1, 2, 3, 4, 5, 6, 7].map((r) => `rdma/rail_${r}`),
                frontendHcas: ["mlx5_1", "mlx5_7"],
                hugepages2MiPerNode: 0,
            },
        ]);
        expect(i.systemNodeSelector).toEqual({});
        expect(i.devicePlugins).toEqual(["BackendFabric"]);
        expect(i.gpuDirect).toEqual(["GpuOperator"]);
        expect(i.minLinkRateGbps).toBe(400);
        // No railNetworks output: hn1 renders no rail networks (platform:backend.railNetworks is off).
        expect(i.outputKeys).toEqual(["railResources", "nodeSelectors", "frontendHcas"]);
    });

    it("EKS (spoke-sg1): EFA from the device plugin, no frontend HCAs, node-group huge pages, the CPU group as system nodes", async () => {
        const i = await infraOf("spoke-sg1");
        expect([i.provider, i.namespaces]).toEqual([true, true]);
        expect(i.pools).toEqual([
            {
                name: "h200",
                profile: "p5en-48xlarge",
                nodeCount: 2,
                nodeSelector: { "inference-platform.io/pool": "h200" },
                tolerations: gpuTaint,
                memlockUnlimited: true,
                fabric: "efa",
                rdmaResources: ["vpc.amazonaws.com/efa"],
                frontendHcas: [],
                hugepages2MiPerNode: 5128,
            },
        ]);
        expect(i.systemNodeSelector).toEqual({ "inference-platform.io/system": "true" });
        expect(i.devicePlugins).toEqual(["EfaDevicePlugin"]);
        expect(i.gpuDirect).toEqual(["GpuOperator"]);
        expect(i.minLinkRateGbps).toBe(200);
        expect(i.outputKeys).toEqual(["cluster", "nodeSelectors", "efaDevicesPerNode", "systemNodeSelector"]);
    });
});
