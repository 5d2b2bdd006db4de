import { describe, expect, it } from "vitest";
import * as fs from "node:fs";
import * as os from "node:os";
import * as path from "node:path";
import * as YAML from "yaml";
import { ConfigError } from "../config/errors";
import { parseStackConfig } from "../config/stack";
import { platformKeys, stackConfigDoc } from "./helpers";
import { loadNodeProfileFile, NodeProfileSchema, presetFile, presetProfiles, railsInOrder } from "../config/nodeProfile";

/** NVIDIA's capture of the Cisco C885A in Ethernet mode (k8s-launch-kit@aa1fef72 presets/UCSC-885A-M8-H22). */
const ROCE_FIXTURE = path.join(__dirname, "fixtures", "node-profiles", "cisco-ucsc-885a-m8-h22-roce.yaml");
const dgx = () => structuredClone(presetProfiles().get("dgx-h200")) as any;

describe("node profiles (rail tables as data)", () => {
    it("ships DGX H200 with the User Guide GPU -> HCA map: GPU1 is mlx5_3, not mlx5_1", () => {
        const p = NodeProfileSchema.parse(dgx());
        const hcaOf = Object.fromEntries(p.rails.map((r) => [r.gpu, r.hca]));
        expect(hcaOf).toEqual({ 0: "mlx5_0", 1: "mlx5_3", 2: "mlx5_4", 3: "mlx5_5", 4: "mlx5_6", 5: "mlx5_9", 6: "mlx5_10", 7: "mlx5_11" });
        expect(p.rails.every((r) => r.linkRateGbps === 400 && r.linkLayer === "InfiniBand")).toBe(true);
        expect(p.gpu).toEqual({ product: "NVIDIA-H200", count: 8, memoryGB: 141, nvlinkGBps: 900 });
        expect(p.frontend.map((f) => [f.hca, f.linkRateGbps])).toEqual([
            ["mlx5_1", 200],
            ["mlx5_7", 200],
        ]);
        // NUMA split: GPUs/rails 0-3 on node 0, 4-7 on node 1 (k8s-launch-kit HGX H200 presets).
        expect(railsInOrder(p).map((r) => r.numa)).toEqual([0, 0, 0, 0, 1, 1, 1, 1]);
    });

    it("ships the Cisco UCS C885A as NVIDIA captured it (RoCE): netdevs out of rail order, rdma-core rocep* RDMA names", () => {
        // NVIDIA/k8s-launch-kit@aa1fef72:presets/UCSC-885A-M8-H22/topology.yaml (networkInterface, rdmaDevice per rail).
        const p = loadNodeProfileFile(ROCE_FIXTURE);
        expect(railsInOrder(p).map((r) => r.netdev)).toEqual(["eth3", "eth7", "eth4", "eth2", "eth9", "eth11", "eth10", "eth8"]);
        expect(railsInOrder(p).map((r) => r.hca)).toEqual([
            "rocep9s0f0",
            "rocep35s0f0",
            "rocep83s0f0",
            "rocep105s0f0",
            "rocep143s0f0",
            "rocep156s0f0",
            "rocep205s0f0",
            "rocep241s0f0",
        ]);
        expect(p.rails.every((r) => r.linkLayer === "Ethernet")).toBe(true);
    });

    it("ships the Cisco UCS C885A in InfiniBand mode with IB names, each derived name marked inferred", () => {
        const p = NodeProfileSchema.parse(presetProfiles().get("cisco-ucsc-885a-m8-h22"));
        const r0 = railsInOrder(p)[0];
        // Same PCI function as the capture's rocep9s0f0; rdma-core names an IB port ib + p<bus>s<slot>f<fn>
        // (linux-rdma/rdma-core kernel-boot/rdma-persistent-naming.rules, "mlx5_0 -> ibp0s12f4").
        expect([r0.pciAddress, r0.hca, r0.linkLayer]).toEqual(["0000:09:00.0", "ibp9s0f0", "InfiniBand"]);
        expect(p.rails.every((r) => r.netdev.startsWith("ib"))).toBe(true);
        expect(p.inferred.map((i) => i.path)).toEqual(expect.arrayContaining(["rails[].hca", "rails[].netdev", "rails[].gpuPciAddress"]));
    });

    it("every shipped preset parses; every value not read from a source is listed in inferred with a note", () => {
        for (const [name, doc] of presetProfiles()) {
            const r = NodeProfileSchema.safeParse(doc);
            expect(r.success, `${presetFile(name)}: ${JSON.stringify(r.error?.issues)}`).toBe(true);
            for (const i of r.data!.inferred) expect(i.note.length).toBeGreaterThan(10);
        }
        expect(presetFile("dgx-h200")).toBe(path.join("config", "node-profiles", "dgx-h200.yaml"));
    });

    it("rejects 7 rails for 8 GPUs", () => {
        const d = dgx();
        d.rails.pop();
        const r = NodeProfileSchema.safeParse(d);
        expect(r.success).toBe(false);
        expect(r.error!.issues.map((i) => [i.path.join("."), i.message])).toContainEqual([
            "rails",
            "has 7 rails for 8 GPUs: a rail-aligned fabric needs exactly one rail (one HCA) per GPU",
        ]);
    });

    it("rejects two rails on one HCA", () => {
        const d = dgx();
        d.rails[1].hca = "mlx5_0";
        const r = NodeProfileSchema.safeParse(d);
        expect(r.success).toBe(false);
        expect(r.error!.issues.map((i) => [i.path.join("."), i.message])).toContainEqual([
            "rails.1.hca",
            'HCA "mlx5_0" is already used by rails[0]; each rail needs its own HCA',
        ]);
    });

    it("rejects a frontend NIC that is also a rail, and bad PCI addresses", () => {
        const d = dgx();
        d.frontend[0].hca = "mlx5_3";
        d.rails[2].pciAddress = "0000:4F:00.0";
        const msgs = NodeProfileSchema.safeParse(d).error!.issues.map((i) => `${i.path.join(".")}: ${i.message}`);
        expect(msgs).toContain("frontend.0.hca: HCA mlx5_3 is also a compute rail; the frontend must be separate NICs");
        expect(msgs).toContain("rails.2.pciAddress: must be a PCI address like 0000:18:00.0 (lower-case hex)");
    });

    const issues = (d: unknown) => NodeProfileSchema.safeParse(d).error?.issues.map((i) => `${i.path.join(".")}: ${i.message}`) ?? [];

    it("refuses Ethernet netdev names on an InfiniBand rail (the plugin's linkTypes AND ifNames would match nothing)", () => {
        const d = dgx();
        d.rails[0].netdev = "eth3";
        expect(issues(d)).toContain(
            "rails.0.netdev: netdev eth3 is not a InfiniBand interface name (expected an IPoIB name (ib0, ibp24s0, ibs1f0)); the device plugin's linkTypes selector would match nothing",
        );
        const e = dgx();
        e.rails[1].netdev = "enp64s0np0";
        expect(issues(e)[0]).toMatch(/^rails\.1\.netdev: netdev enp64s0np0 is not a InfiniBand interface name/);
    });

    it("refuses IB names on an Ethernet (RoCE) rail and RoCE RDMA names on an IB rail", () => {
        const d = YAML.parse(fs.readFileSync(ROCE_FIXTURE, "utf8"));
        d.rails[2].netdev = "ibp83s0f0";
        d.rails[3].hca = "ibp105s0f0";
        const msgs = issues(d);
        expect(msgs.some((m) => m.startsWith("rails.2.netdev: netdev ibp83s0f0 is not a Ethernet interface name"))).toBe(true);
        expect(msgs.some((m) => m.startsWith("rails.3.hca: RDMA device ibp105s0f0 does not fit link layer Ethernet"))).toBe(true);
        const ib = dgx();
        ib.rails[0].hca = "rocep24s0";
        expect(issues(ib).some((m) => m.startsWith("rails.0.hca: RDMA device rocep24s0 does not fit link layer InfiniBand"))).toBe(true);
    });

    it("refuses one PCI address used twice across GPUs, rail HCAs and frontend NICs", () => {
        const gpuVsHca = dgx();
        gpuVsHca.rails[1].gpuPciAddress = gpuVsHca.rails[0].pciAddress;
        expect(issues(gpuVsHca)).toEqual([
            "rails.0.pciAddress: PCI address 0000:18:00.0 is already used by rails[1].gpuPciAddress (GPU 1); one PCI function is one device",
        ]);
        const front = dgx();
        front.frontend[1].pciAddress = "0000:dc:00.0";
        expect(issues(front)).toContain(
            "frontend.1.pciAddress: PCI address 0000:dc:00.0 is already used by rails[7].pciAddress (HCA mlx5_11); one PCI function is one device",
        );
        const twoGpus = dgx();
        twoGpus.rails[4].gpuPciAddress = "0000:1b:00.0";
        expect(issues(twoGpus)).toContain(
            "rails.4.gpuPciAddress: PCI address 0000:1b:00.0 is already used by rails[0].gpuPciAddress (GPU 0); one PCI function is one device",
        );
    });

    it("refuses a rail HCA on another NUMA node than its GPU, and NUMA nodes that do not exist", () => {
        // HGX H200 presets: GPU i and rail i behind one PCIe switch (gpuProximity PIX), same NUMA node (k8s-launch-kit@aa1fef72).
        const d = dgx();
        d.rails[2].numa = 1;
        expect(issues(d)).toContain(
            "rails.2.numa: rail 2 HCA mlx5_4 is on NUMA node 1 but its GPU 2 is on NUMA node 0: a rail HCA must sit on its GPU's NUMA node (same PCIe switch)",
        );
        const f = dgx();
        f.frontend[0].numa = 2;
        expect(issues(f)).toContain("frontend.0.numa: NUMA node 2 does not exist (numaNodes: 2, so 0..1)");
        const g = dgx();
        g.rails[5].gpuNuma = 3;
        g.rails[5].numa = 3;
        expect(issues(g)).toContain("rails.5.gpuNuma: NUMA node 3 does not exist (numaNodes: 2, so 0..1)");
    });

    it("refuses an inferred marker that names no field", () => {
        const d = dgx();
        d.inferred.push({ path: "rails[].gpuPci", note: "typo" }, { path: "frontend[5].netdev", note: "out of range" });
        // The preset's own markers come first (dgx-h200.yaml lists six).
        const n = d.inferred.length - 2;
        expect(issues(d)).toEqual([
            `inferred.${n}.path: rails[].gpuPci names no field of this profile`,
            `inferred.${n + 1}.path: frontend[5].netdev names no field of this profile`,
        ]);
    });

    it("loadNodeProfileFile names the file and the field", () => {
        const dir = fs.mkdtempSync(path.join(os.tmpdir(), "np-"));
        const d = dgx();
        d.rails[0].netdev = "eth0";
        const file = path.join(dir, "bad.yaml");
        fs.writeFileSync(file, YAML.stringify(d));
        expect(() => loadNodeProfileFile(file)).toThrow(`${file}: rails[0].netdev: netdev eth0 is not a InfiniBand interface name`);
        fs.rmSync(dir, { recursive: true });
    });
});

describe("a stack file's inline profile: refused naming the stack file and the key", () => {
    const reject = (mutate: (p: any) => void) => {
        const doc = structuredClone(stackConfigDoc("spoke-hn1"));
        const p = dgx();
        mutate(p);
        doc["platform:nodePools"][0].profile = p;
        try {
            parseStackConfig(platformKeys(doc), "stacks/Pulumi.spoke-hn1.yaml");
        } catch (e) {
            if (e instanceof ConfigError) return e;
            throw e;
        }
        throw new Error("expected a ConfigError");
    };
    it.each([
        [
            "one PCI address on a GPU and a frontend NIC",
            (p: any) => {
                p.frontend[0].pciAddress = p.rails[0].gpuPciAddress;
            },
            "platform:nodePools[0].profile.frontend[0].pciAddress",
            "PCI address 0000:1b:00.0 is already used by rails[0].gpuPciAddress (GPU 0)",
        ],
        [
            "a rail HCA off its GPU's NUMA node",
            (p: any) => {
                p.rails[6].numa = 0;
            },
            "platform:nodePools[0].profile.rails[6].numa",
            "rail 6 HCA mlx5_10 is on NUMA node 0 but its GPU 6 is on NUMA node 1",
        ],
        [
            "a frontend NIC on a NUMA node that does not exist",
            (p: any) => {
                p.frontend[1].numa = 3;
            },
            "platform:nodePools[0].profile.frontend[1].numa",
            "NUMA node 3 does not exist",
        ],
        [
            "an Ethernet netdev on an InfiniBand rail",
            (p: any) => {
                p.rails[3].netdev = "eth2";
            },
            "platform:nodePools[0].profile.rails[3].netdev",
            "netdev eth2 is not a InfiniBand interface name",
        ],
    ])("%s", (_t, mutate, key, message) => {
        const err = reject(mutate);
        expect(err.message.startsWith("stacks/Pulumi.spoke-hn1.yaml: invalid stack configuration")).toBe(true);
        expect(
            err.issues.find((i) => i.key === key && i.message.includes(message)),
            err.message,
        ).toBeDefined();
    });
});
