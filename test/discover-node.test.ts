/**
 * `npm run discover-node` on fake sysfs trees of both link layers (test/fixtures/node-sysfs, written for these tests):
 * a DGX H200 with InfiniBand rails (the map of NVIDIA's DGX H100/H200 User Guide, as config/node-profiles/dgx-h200.yaml)
 * and a Cisco UCS C885A with RoCE rails (as NVIDIA/k8s-launch-kit@aa1fef72 presets/UCSC-885A-M8-H22 captured it).
 */
import { spawnSync } from "node:child_process";
import * as fs from "node:fs";
import * as os from "node:os";
import * as path from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { loadNodeProfileFile, NodeProfileSchema, presetProfiles } from "../config/nodeProfile";
import { discoverNode, normalizePci, parseTopo } from "../tools/discover-node";
import { ESBUILD_LOADER } from "./loader";

const ROOT = path.join(__dirname, "..");
const FX = path.join(__dirname, "fixtures", "node-sysfs");
const IB = path.join(FX, "dgx-h200-ib");
const ROCE = path.join(FX, "cisco-c885a-roce");
const topo = (d: string) => fs.readFileSync(path.join(d, "nvidia-smi-topo-m.txt"), "utf8");
const gpus = (d: string) => fs.readFileSync(path.join(d, "nvidia-smi-query-gpu.csv"), "utf8");
const tmp = fs.mkdtempSync(path.join(os.tmpdir(), "discover-"));
afterAll(() => fs.rmSync(tmp, { recursive: true, force: true }));

function cli(args: string[]) {
    return spawnSync(process.execPath, ["-r", ESBUILD_LOADER, "tools/discover-node.ts", ...args], {
        cwd: ROOT,
        encoding: "utf8",
        env: { ...process.env, TS_NODE_TRANSPILE_ONLY: "true" },
    });
}

describe("discover-node: InfiniBand (DGX H200)", () => {
    const { profile, skipped } = discoverNode({ root: IB, name: "dgx-h200-discovered", topo: topo(IB), gpus: gpus(IB) });
    const p = NodeProfileSchema.parse(profile);
    const preset = NodeProfileSchema.parse(presetProfiles().get("dgx-h200"));

    it("finds each GPU's rail HCA from nvidia-smi topo -m (PIX), not from the mlx5 index: GPU1 is mlx5_3", () => {
        expect(p.rails).toEqual(preset.rails);
        expect(p.rails[1]).toMatchObject({
            gpu: 1,
            hca: "mlx5_3",
            netdev: "ibp64s0",
            pciAddress: "0000:40:00.0",
            linkLayer: "InfiniBand",
            linkRateGbps: 400,
        });
    });

    it("takes the Ethernet ports as frontend and leaves the InfiniBand storage ports out, saying so", () => {
        expect(p.frontend).toEqual(preset.frontend);
        expect(skipped.map((s) => s.split(" ")[0])).toEqual(["mlx5_2", "mlx5_8"]);
    });

    it("marks only what it derived: rail index, product label, HBM size, NVLink bandwidth", () => {
        expect(p.inferred.map((i) => i.path)).toEqual(["rails[].rail", "gpu.product", "gpu.memoryGB", "gpu.nvlinkGBps"]);
        expect(p.gpu).toEqual({ product: "NVIDIA-H200", count: 8, memoryGB: 140, nvlinkGBps: 900 });
        expect(p.numaNodes).toBe(2);
    });
});

describe("discover-node: Ethernet / RoCE (Cisco UCS C885A)", () => {
    const capture = loadNodeProfileFile(path.join(__dirname, "fixtures", "node-profiles", "cisco-ucsc-885a-m8-h22-roce.yaml"));

    it("reads rocep* RDMA devices and eth* netdevs out of rail order, as NVIDIA's preset lists them", () => {
        const p = NodeProfileSchema.parse(discoverNode({ root: ROCE, name: "c885a", topo: topo(ROCE), gpus: gpus(ROCE) }).profile);
        expect(p.rails).toEqual(capture.rails);
        // The DPU's second port has no RDMA device in the capture (rdmaDevice ""), so it is no frontend HCA.
        expect(p.frontend).toEqual([capture.frontend[0]]);
    });

    it("without topo -m it pairs by NUMA node and PCI bus and marks the pairing inferred; without the GPU list it stops", () => {
        const p = NodeProfileSchema.parse(discoverNode({ root: ROCE, name: "c885a", gpus: gpus(ROCE), nvlinkGBps: 900 }).profile);
        expect(p.rails.map((r) => r.hca)).toEqual(capture.rails.map((r) => r.hca));
        expect(p.inferred.map((i) => i.path)).toContain("rails[].hca");
        expect(() => discoverNode({ root: ROCE, name: "c885a", nvlinkGBps: 900 })).toThrow(/GPU product unknown: pass --gpus/);
    });
});

describe("npm run discover-node (CLI)", () => {
    it("writes a profile file the schema loads (PCI addresses quoted)", () => {
        const out = path.join(tmp, "ib.yaml");
        const r = cli([
            "--name",
            "dgx-h200-discovered",
            "--root",
            IB,
            "--topo",
            path.join(IB, "nvidia-smi-topo-m.txt"),
            "--gpus",
            path.join(IB, "nvidia-smi-query-gpu.csv"),
            "--out",
            out,
        ]);
        expect(r.status, r.stderr).toBe(0);
        const text = fs.readFileSync(out, "utf8");
        expect(text).toContain('gpuPciAddress: "0000:1b:00.0"');
        expect(text).toMatch(/^# Node profile discovered by `npm run discover-node`/);
        expect(loadNodeProfileFile(out).rails).toHaveLength(8);
        // It says what it wrote, and which values were derived rather than read.
        expect(r.stdout).toMatch(
            new RegExp(
                `^wrote ${out.replace(/[.*+?^${}()|[\]\\]/g, "\\$&")}: node profile "dgx-h200-discovered": 8 GPUs, 8 rails \\(GPU0->mlx5_0 GPU1->mlx5_3 `,
            ),
        );
        expect(r.stdout).toMatch(/\d value\(s\) inferred, not read; verify before the first pulumi up:\n {4}- rails\[\]\.rail: /);
        expect(r.stdout).toContain("set platform:nodePools[].profile: dgx-h200-discovered");
    });

    it("refuses, and writes nothing, when the node has a rail HCA on another NUMA node than its GPU", () => {
        const bad = path.join(tmp, "bad-tree");
        fs.cpSync(IB, bad, { recursive: true });
        fs.writeFileSync(path.join(bad, "sys", "class", "infiniband", "mlx5_3", "device", "numa_node"), "1\n");
        const out = path.join(tmp, "bad.yaml");
        const r = cli([
            "--name",
            "x",
            "--root",
            bad,
            "--topo",
            path.join(bad, "nvidia-smi-topo-m.txt"),
            "--gpus",
            path.join(bad, "nvidia-smi-query-gpu.csv"),
            "--out",
            out,
        ]);
        expect(r.status).toBe(1);
        expect(r.stderr).toContain("rails.1.numa: rail 1 HCA mlx5_3 is on NUMA node 1 but its GPU 1 is on NUMA node 0");
        expect(fs.existsSync(out)).toBe(false);
    });

    it("refuses a netdev whose sysfs type disagrees with its HCA's link layer", () => {
        const bad = path.join(tmp, "bad-type");
        fs.cpSync(IB, bad, { recursive: true });
        fs.writeFileSync(path.join(bad, "sys", "class", "net", "ibp24s0", "type"), "1\n");
        const r = cli([
            "--name",
            "x",
            "--root",
            bad,
            "--topo",
            path.join(bad, "nvidia-smi-topo-m.txt"),
            "--gpus",
            path.join(bad, "nvidia-smi-query-gpu.csv"),
        ]);
        expect(r.status).toBe(2);
        expect(r.stderr).toContain("ibp24s0: sys/class/net type 1 disagrees with mlx5_0 link layer InfiniBand");
    });
});

describe("parsers", () => {
    it("nvidia-smi bus ids and the topo matrix", () => {
        expect(normalizePci("00000000:1B:00.0")).toBe("0000:1b:00.0");
        const t = parseTopo(topo(IB));
        expect(t.proximity.get(1)!.get("mlx5_3")).toBe("PIX");
        expect(t.proximity.get(1)!.get("mlx5_1")).toBe("NODE");
        expect(t.gpuNuma.get(5)).toBe(1);
        expect(t.nvlinks).toBe(18);
    });
});
