import { describe, expect, it } from "vitest";
import { gpuDirectRdma, ibRailResources } from "../../policies/rdma-fabric";
import type { CapturedResource } from "../../tools/harness";
import { runPolicies } from "../../tools/policy-runner";
import { SECRET_SIG, SIG_KEY, UNKNOWN } from "../../tools/wire";
import { byType, runHubAndSpoke } from "../helpers";

/** The real spoke-hn1 graph, cloned so each test can break one thing. */
async function spokeGraph(): Promise<CapturedResource[]> {
    const { spoke } = await runHubAndSpoke("spoke-hn1");
    return spoke.resources;
}

function edit(rs: CapturedResource[], type: string, fn: (outputs: Record<string, any>) => void): CapturedResource[] {
    return rs.map((r) => {
        if (r.type !== type) return r;
        const c = structuredClone(r);
        fn(c.outputs as Record<string, any>);
        fn(c.inputs as Record<string, any>);
        return c;
    });
}

describe("policy ib-pool-one-rdma-resource-per-gpu", () => {
    it("passes on the repo's spoke (compliant)", async () => {
        const report = await runPolicies([ibRailResources], await spokeGraph());
        expect(report.findings).toEqual([]);
    });

    it("fails when a rail's netdev is not selected by any resource", async () => {
        const rs = edit(await spokeGraph(), "kubernetes:mellanox.com/v1alpha1:NicClusterPolicy", (o) => {
            const cfg = JSON.parse(o.spec.rdmaSharedDevicePlugin.config);
            cfg.configList = cfg.configList.filter((c: any) => c.resourceName !== "rail_3");
            o.spec.rdmaSharedDevicePlugin.config = JSON.stringify(cfg);
        });
        const report = await runPolicies([ibRailResources], rs);
        expect(report.mandatory.map((f) => f.message)).toEqual([
            "Node pool h200: GPU 3 (rail 3, HCA mlx5_5, netdev ibp94s0) is selected by 0 RDMA resources in NicClusterPolicy backend-nic-cluster-policy spec.rdmaSharedDevicePlugin.config; it needs exactly one.",
        ]);
        expect(report.mandatory[0].resourceType).toBe("kubernetes:mellanox.com/v1alpha1:NicClusterPolicy");
    });

    it("fails when one resource selects two rails' HCAs", async () => {
        const rs = edit(await spokeGraph(), "kubernetes:mellanox.com/v1alpha1:NicClusterPolicy", (o) => {
            const cfg = JSON.parse(o.spec.rdmaSharedDevicePlugin.config);
            cfg.configList[0].selectors.ifNames = ["ibp24s0", "ibp64s0"];
            cfg.configList.splice(1, 1);
            o.spec.rdmaSharedDevicePlugin.config = JSON.stringify(cfg);
        });
        const msgs = (await runPolicies([ibRailResources], rs)).mandatory.map((f) => f.message);
        expect(msgs).toContain(
            "NicClusterPolicy backend-nic-cluster-policy: resource rdma/rail_0 selects 2 HCAs (mlx5_0, mlx5_3) on pool h200; one resource must map to one rail.",
        );
    });

    it("fails when the rail table puts two rails on one HCA", async () => {
        const rs = edit(await spokeGraph(), "kubernetes:core/v1:NodePatch", (o) => {
            const key = "inference-platform.io/rail-table";
            const rails = JSON.parse(o.metadata.annotations[key]);
            rails[1].hca = "mlx5_0";
            o.metadata.annotations[key] = JSON.stringify(rails);
        });
        const msgs = (await runPolicies([ibRailResources], rs)).mandatory.map((f) => f.message);
        expect(msgs).toContain("Node pool h200: rails 0 and 1 are both on HCA mlx5_0; each rail needs a distinct HCA.");
    });

    it("fails when no NicClusterPolicy publishes the rails", async () => {
        const rs = (await spokeGraph()).filter((r) => r.type !== "kubernetes:mellanox.com/v1alpha1:NicClusterPolicy");
        const msgs = (await runPolicies([ibRailResources], rs)).mandatory.map((f) => f.message);
        expect(msgs).toEqual([
            "No NicClusterPolicy in the stack, but node pool(s) h200 use InfiniBand: nothing publishes the rail RDMA resources. Deploy BackendFabric in the same stack.",
        ]);
    });

    it("reports an unknown plugin config in preview as advisory, like the analyzer", async () => {
        const rs = edit(await spokeGraph(), "kubernetes:mellanox.com/v1alpha1:NicClusterPolicy", (o) => {
            o.spec.rdmaSharedDevicePlugin.config = UNKNOWN;
        });
        const report = await runPolicies([ibRailResources], rs);
        expect(report.mandatory).toEqual([]);
        expect(report.findings[0].enforcementLevel).toBe("advisory");
        expect(report.findings[0].message).toMatch(/can't run policy 'ib-pool-one-rdma-resource-per-gpu' during preview/);
    });
});

describe("policy gpudirect-rdma-enabled", () => {
    it("passes with DMA-BUF (open kernel modules)", async () => {
        expect((await runPolicies([gpuDirectRdma], await spokeGraph())).findings).toEqual([]);
    });

    it("passes with legacy nvidia-peermem", async () => {
        const rs = edit(await spokeGraph(), "kubernetes:helm.sh/v3:Release", (o) => {
            if (o.chart === "gpu-operator") {
                o.values.driver.kernelModuleType = "auto";
                o.values.driver.rdma.enabled = true;
            }
        });
        expect((await runPolicies([gpuDirectRdma], rs)).findings).toEqual([]);
    });

    it("fails when neither DMA-BUF nor peermem is configured", async () => {
        const rs = edit(await spokeGraph(), "kubernetes:helm.sh/v3:Release", (o) => {
            if (o.chart === "gpu-operator") o.values.driver.kernelModuleType = "proprietary";
        });
        const [f] = (await runPolicies([gpuDirectRdma], rs)).mandatory;
        expect(f.message).toBe(
            "Helm release gpu-operator-gpu-operator (gpu-operator): GPUDirect RDMA is off: set values.driver.kernelModuleType=open (DMA-BUF) or values.driver.rdma.enabled=true (nvidia-peermem).",
        );
    });

    it("fails when the stack has an IB pool but no GPU Operator", async () => {
        const rs = (await spokeGraph()).filter(
            (r) => !(r.type === "kubernetes:helm.sh/v3:Release" && (r.inputs as any).chart === "gpu-operator"),
        );
        const msgs = (await runPolicies([gpuDirectRdma], rs)).mandatory.map((f) => f.message);
        expect(msgs).toEqual([
            "Node pool(s) h200 use InfiniBand but the stack deploys no gpu-operator Helm release: GPUDirect RDMA is not configured.",
        ]);
    });

    it("sees through secret-wrapped values (analyzer deserialiser)", async () => {
        const rs = (await spokeGraph()).map((r) => {
            if (r.type !== "kubernetes:helm.sh/v3:Release" || (r.inputs as any).chart !== "gpu-operator") return r;
            const c = structuredClone(r);
            (c.outputs as any).values = {
                [SIG_KEY]: SECRET_SIG,
                value: { driver: { enabled: true, kernelModuleType: "proprietary", rdma: { enabled: false } } },
            };
            return c;
        });
        const [f] = (await runPolicies([gpuDirectRdma], rs)).mandatory;
        expect(f.message).toMatch(/GPUDirect RDMA is off/);
        expect(byType(rs, "kubernetes:helm.sh/v3:Release").filter((r) => (r.inputs as any).chart === "gpu-operator")).toHaveLength(1);
    });
});
