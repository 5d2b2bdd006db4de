import { describe, expect, it } from "vitest";
import { NodeProfileSchema, presetProfiles, railsInOrder } from "../config/nodeProfile";

const dgx = () => structuredClone(presetProfiles().get("dgx-h200")) as any;

describe("node profiles (rail tables as data)", () => {
    it("ships DGX H200 with the User Guide GPU -> HCA map: GPU1 is mlx5_3, not mlx5_1", () => {
        const p = NodeProfileSchema.parse(dgx());
        const hcaOf = Object.fromEntries(p.rails.map((r) => [r.gpu, r.hca]));
        expect(hcaOf).toEqual({ 0: "mlx5_0", 1: "mlx5_3", 2: "mlx5_4", 3: "mlx5_5", 4: "mlx5_6", 5: "mlx5_9", 6: "mlx5_10", 7: "mlx5_11" });
        expect(p.rails.every((r) => r.linkRateGbps === 400 && r.linkLayer === "InfiniBand")).toBe(true);
        expect(p.gpu).toEqual({ product: "NVIDIA-H200", count: 8, memoryGB: 141, nvlinkGBps: 900 });
        expect(p.frontend.map((f) => [f.hca, f.linkRateGbps])).toEqual([["mlx5_1", 200], ["mlx5_7", 200]]);
        // NUMA split: GPUs/rails 0-3 on node 0, 4-7 on node 1 (k8s-launch-kit HGX H200 presets).
        expect(railsInOrder(p).map((r) => r.numa)).toEqual([0, 0, 0, 0, 1, 1, 1, 1]);
    });

    it("ships the Cisco UCS C885A profile with netdevs out of rail order", () => {
        const p = NodeProfileSchema.parse(presetProfiles().get("cisco-ucsc-885a-m8-h22"));
        expect(railsInOrder(p).map((r) => r.netdev)).toEqual(["eth3", "eth7", "eth4", "eth2", "eth9", "eth11", "eth10", "eth8"]);
        expect(railsInOrder(p).map((r) => r.pciAddress)[0]).toBe("0000:09:00.0");
    });

    it("rejects 7 rails for 8 GPUs", () => {
        const d = dgx(); d.rails.pop();
        const r = NodeProfileSchema.safeParse(d);
        expect(r.success).toBe(false);
        expect(r.error!.issues.map((i) => [i.path.join("."), i.message])).toContainEqual(["rails", "has 7 rails for 8 GPUs: a rail-aligned fabric needs exactly one rail (one HCA) per GPU"]);
    });

    it("rejects two rails on one HCA", () => {
        const d = dgx(); d.rails[1].hca = "mlx5_0";
        const r = NodeProfileSchema.safeParse(d);
        expect(r.success).toBe(false);
        expect(r.error!.issues.map((i) => [i.path.join("."), i.message])).toContainEqual(["rails.1.hca", 'HCA "mlx5_0" is already used by rails[0]; each rail needs its own HCA']);
    });

    it("rejects a frontend NIC that is also a rail, and bad PCI addresses", () => {
        const d = dgx(); d.frontend[0].hca = "mlx5_3"; d.rails[2].pciAddress = "0000:4F:00.0";
        const msgs = NodeProfileSchema.safeParse(d).error!.issues.map((i) => `${i.path.join(".")}: ${i.message}`);
        expect(msgs).toContain("frontend.0.hca: HCA mlx5_3 is also a compute rail; the frontend must be separate NICs");
        expect(msgs).toContain("rails.2.pciAddress: must be a PCI address like 0000:18:00.0 (lower-case hex)");
    });
});
