import { describe, expect, it } from "vitest";
import * as path from "node:path";
import { loadNodeProfileFile, NodeProfileSchema, presetProfiles } from "../config/nodeProfile";

const ROCE_FIXTURE = path.join(__dirname, "fixtures", "node-profiles", "cisco-ucsc-885a-m8-h22-roce.yaml");
import { gpuNicPcieMapping, ncclIbHca, railResource, railsForGpus, rdmaSharedDevicePluginConfig, ucxNetDevices } from "../lib/rails";

const profile = (n: string) => NodeProfileSchema.parse(presetProfiles().get(n));

describe("rail table -> RDMA shared device plugin config", () => {
    it("publishes one rdma/rail_<i> resource per rail selected by that rail's netdev", () => {
        const cfg = rdmaSharedDevicePluginConfig([profile("dgx-h200")], 63);
        expect(cfg.periodicUpdateInterval).toBe(300);
        expect(cfg.configList).toHaveLength(8);
        expect(cfg.configList[1]).toEqual({
            resourceName: "rail_1",
            resourcePrefix: "rdma",
            rdmaHcaMax: 63,
            selectors: { vendors: ["15b3"], linkTypes: ["infiniband"], ifNames: ["ibp64s0"] },
        });
        expect(cfg.configList.map((c) => c.resourceName)).toEqual([
            "rail_0",
            "rail_1",
            "rail_2",
            "rail_3",
            "rail_4",
            "rail_5",
            "rail_6",
            "rail_7",
        ]);
        expect(railResource(3)).toBe("rdma/rail_3");
    });

    it("ORs the rail-i netdevs of every node model into rail i's selector", () => {
        const cfg = rdmaSharedDevicePluginConfig([profile("dgx-h200"), profile("cisco-ucsc-885a-m8-h22")], 8);
        expect(cfg.configList[0].selectors.ifNames).toEqual(["ibp24s0", "ibp9s0f0"]);
        expect(cfg.configList[3].selectors.ifNames).toEqual(["ibp105s0f0", "ibp94s0"]);
        expect(cfg.configList.every((c) => c.selectors.linkTypes[0] === "infiniband")).toBe(true);
    });

    it("selects RoCE rails with linkTypes ether: the plugin ANDs linkTypes with ifNames, so IB's infiniband would match no eth* netdev", () => {
        // Mellanox/k8s-rdma-shared-dev-plugin@410b0f32:pkg/resources/resources_manager.go#GetFilteredDevices chains the filters.
        const cfg = rdmaSharedDevicePluginConfig([loadNodeProfileFile(ROCE_FIXTURE)], 8);
        expect(cfg.configList[0].selectors).toEqual({ vendors: ["15b3"], linkTypes: ["ether"], ifNames: ["eth3"] });
        expect(() => rdmaSharedDevicePluginConfig([profile("dgx-h200"), loadNodeProfileFile(ROCE_FIXTURE)], 8)).toThrow(
            "node profiles disagree on rail 0's link layer: dgx-h200 InfiniBand, cisco-ucsc-885a-m8-h22-roce Ethernet",
        );
    });

    it("refuses profiles with different rail counts", () => {
        const p = profile("dgx-h200");
        const q = { ...p, name: "half", rails: p.rails.slice(0, 4), gpu: { ...p.gpu, count: 4 } };
        expect(() => rdmaSharedDevicePluginConfig([p, q], 63)).toThrow(/disagree on rail count: dgx-h200 has 8, half has 4/);
    });
});

describe("per-worker NIC pinning from the rail table", () => {
    const p = profile("dgx-h200");
    it("pins UCX and NCCL to the worker's rail HCAs (exact NCCL match so mlx5_1 cannot match mlx5_10)", () => {
        const rails = railsForGpus(p, [0, 1]);
        expect(ucxNetDevices(rails)).toBe("mlx5_0:1,mlx5_3:1");
        expect(ncclIbHca(railsForGpus(p, [6, 7]))).toBe("=mlx5_10:1,mlx5_11:1");
        expect(gpuNicPcieMapping(rails)).toBe("0000:1b:00.0=0000:18:00.0,0000:43:00.0=0000:40:00.0");
        expect(() => railsForGpus(p, [8])).toThrow(/no rail for GPU 8/);
    });
});
