import * as fs from "fs";
import * as path from "path";
import * as YAML from "yaml";
import { z } from "zod";

/** PCI address in domain:bus:device.function form, e.g. `0000:18:00.0` (lower-case hex). */
const PciAddress = z.string().regex(/^[0-9a-f]{4}:[0-9a-f]{2}:[0-9a-f]{2}\.[0-7]$/, "must be a PCI address like 0000:18:00.0 (lower-case hex)");
/** RDMA device (HCA) name as the kernel names it, e.g. `mlx5_3`. */
const HcaName = z.string().regex(/^[a-z][a-z0-9_]*$/, "must be an RDMA device name like mlx5_3");
/** Linux netdev name (IFNAMSIZ is 16 including NUL). */
const Netdev = z.string().regex(/^[a-zA-Z0-9_.-]{1,15}$/, "must be a Linux interface name (1-15 characters)");

/**
 * One compute rail of a node: rail `rail` carries GPU `gpu`'s east-west traffic through HCA `hca`.
 * Rail i of every node is cabled to leaf switch i (rail-optimised fabric, NVIDIA DGX SuperPOD RA).
 */
export const RailSchema = z.object({
    /** Rail index = leaf switch index, 0-based. */
    rail: z.number().int().min(0).max(31),
    /** GPU index as CUDA/nvidia-smi enumerates it on this node. */
    gpu: z.number().int().min(0).max(31),
    /** PCI address of that GPU; pairs with `pciAddress` in VLLM_GPU_NIC_PCIE_MAPPING. */
    gpuPciAddress: PciAddress,
    /** RDMA device name (`/sys/class/infiniband/<hca>`); never assume `mlx5_<gpu>`. */
    hca: HcaName,
    /** Network interface bound to the HCA; the RDMA shared device plugin selects by this name. */
    netdev: Netdev,
    /** PCI address of the HCA port. */
    pciAddress: PciAddress,
    /** NUMA node of the HCA (same as its GPU on HGX boards). */
    numa: z.number().int().min(0).max(7),
    /** PCI device ID: ConnectX-7 `1021`, BlueField-3 / SuperNIC `a2dc` (sriov-network-operator supported-NIC list). */
    deviceId: z.string().regex(/^[0-9a-f]{4}$/),
    /** Port link layer as `/sys/class/infiniband/<hca>/ports/1/link_layer` reports it. */
    linkLayer: z.enum(["InfiniBand", "Ethernet"]),
    /** Port rate in gigabits per second (NDR = 400). */
    linkRateGbps: z.number().int().positive(),
}).strict();

/** A north-south NIC (frontend Ethernet). KV-cache traffic must never be pinned to these. */
export const FrontendNicSchema = z.object({
    hca: HcaName,
    netdev: Netdev,
    pciAddress: PciAddress,
    numa: z.number().int().min(0).max(7),
    linkLayer: z.literal("Ethernet"),
    /** Port rate in gigabits per second. */
    linkRateGbps: z.number().int().positive(),
}).strict();

/**
 * The EFA side of an AWS GPU instance type (EKS spokes), in place of InfiniBand rails. EFA devices are not
 * pinned per rail by us: the EFA device plugin hands out `vpc.amazonaws.com/efa` devices and the EKS AL2023
 * accelerated AMI aligns them with the GPUs (reference/rdma.md §6.3).
 */
export const EfaSchema = z.object({
    /** EC2 instance type this profile describes, e.g. `p5en.48xlarge`. */
    instanceType: z.string().regex(/^[a-z][a-z0-9-]*\.[a-z0-9-]+$/, "must be an EC2 instance type like p5en.48xlarge"),
    /** `NetworkInfo.MaximumNetworkCards`: one EFA interface per card (p5en 16, p5e 32; reference/rdma.md §6.1). */
    networkCards: z.number().int().min(1).max(64),
    /** Line rate of one network card in gigabits per second (p5en 200, p5e 100). */
    cardRateGbps: z.number().int().positive(),
    /** EFA devices sharing a PCIe switch with each GPU (networkCards / GPUs). */
    devicesPerGpu: z.number().int().min(1),
}).strict();

/**
 * A node profile: the hardware of one server model as data (rail -> GPU -> HCA -> netdev -> PCI -> NUMA),
 * in the spirit of NVIDIA k8s-launch-kit presets. Everything rail-shaped in a spoke is generated from it.
 */
export const NodeProfileSchema = z.object({
    name: z.string().regex(/^[a-z0-9][a-z0-9-]*$/),
    description: z.string(),
    vendor: z.string(),
    model: z.string(),
    gpu: z.object({
        /** Value of the GPU feature discovery label `nvidia.com/gpu.product`. */
        product: z.string(),
        count: z.number().int().min(1).max(16),
        /** HBM per GPU in gigabytes. */
        memoryGB: z.number().positive(),
        /** NVLink bandwidth per GPU in gigabytes per second (GB/s, not Gb/s). */
        nvlinkGBps: z.number().positive(),
    }).strict(),
    numaNodes: z.number().int().min(1).max(8),
    /** InfiniBand compute rails (on-prem). Empty for an EFA profile. */
    rails: z.array(RailSchema).default([]),
    frontend: z.array(FrontendNicSchema).default([]),
    /** EFA layout (AWS instance types); a profile has either rails or efa, never both. */
    efa: EfaSchema.optional(),
}).strict().superRefine((p, ctx) => {
    const issue = (path: (string | number)[], message: string) => ctx.addIssue({ code: "custom", path, message });
    if (p.efa) {
        if (p.rails.length > 0) issue(["rails"], "an EFA profile has no InfiniBand rails; remove rails or efa");
        if (p.efa.networkCards !== p.efa.devicesPerGpu * p.gpu.count) {
            issue(["efa", "devicesPerGpu"], `${p.efa.devicesPerGpu} EFA per GPU x ${p.gpu.count} GPUs != ${p.efa.networkCards} network cards`);
        }
        return;
    }
    if (p.rails.length !== p.gpu.count) {
        issue(["rails"], `has ${p.rails.length} rails for ${p.gpu.count} GPUs: a rail-aligned fabric needs exactly one rail (one HCA) per GPU`);
    }
    const seen = (key: "rail" | "gpu" | "hca" | "netdev" | "pciAddress", what: string) => {
        const first = new Map<unknown, number>();
        p.rails.forEach((r, i) => {
            const v = r[key];
            if (first.has(v)) issue(["rails", i, key], `${what} ${JSON.stringify(v)} is already used by rails[${first.get(v)}]; each rail needs its own ${what}`);
            else first.set(v, i);
        });
    };
    seen("rail", "rail index");
    seen("gpu", "GPU");
    seen("hca", "HCA");
    seen("netdev", "netdev");
    seen("pciAddress", "PCI address");
    p.rails.forEach((r, i) => {
        if (r.gpu >= p.gpu.count) issue(["rails", i, "gpu"], `GPU ${r.gpu} does not exist on a ${p.gpu.count}-GPU node`);
        if (r.rail >= p.rails.length) issue(["rails", i, "rail"], `rail ${r.rail} is out of range 0..${p.rails.length - 1}`);
        if (r.numa >= p.numaNodes) issue(["rails", i, "numa"], `NUMA node ${r.numa} does not exist (numaNodes: ${p.numaNodes})`);
    });
    const railHcas = new Set(p.rails.map((r) => r.hca));
    const railNetdevs = new Set(p.rails.map((r) => r.netdev));
    p.frontend.forEach((f, i) => {
        if (railHcas.has(f.hca)) issue(["frontend", i, "hca"], `HCA ${f.hca} is also a compute rail; the frontend must be separate NICs`);
        if (railNetdevs.has(f.netdev)) issue(["frontend", i, "netdev"], `netdev ${f.netdev} is also a compute rail`);
    });
});

export type NodeProfile = z.infer<typeof NodeProfileSchema>;
export type Rail = z.infer<typeof RailSchema>;
export type FrontendNic = z.infer<typeof FrontendNicSchema>;
export type EfaLayout = z.infer<typeof EfaSchema>;

/** Directory holding the preset profiles shipped with the repo (`config/node-profiles/*.yaml`). */
export const PRESET_DIR = path.join(__dirname, "node-profiles");

let presetCache: Map<string, unknown> | undefined;

/**
 * Raw preset documents by name, read from {@link PRESET_DIR}. They are validated where they are used,
 * so a broken preset is reported against the stack key that selected it.
 */
export function presetProfiles(): Map<string, unknown> {
    if (!presetCache) {
        presetCache = new Map();
        for (const f of fs.readdirSync(PRESET_DIR).filter((f) => f.endsWith(".yaml")).sort()) {
            const doc = YAML.parse(fs.readFileSync(path.join(PRESET_DIR, f), "utf8"));
            presetCache.set(String(doc?.name ?? path.basename(f, ".yaml")), doc);
        }
    }
    return presetCache;
}

/** Rails sorted by rail index (the order every generated list follows). */
export function railsInOrder(p: NodeProfile): Rail[] {
    return [...p.rails].sort((a, b) => a.rail - b.rail);
}
