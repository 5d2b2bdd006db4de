import * as fs from "node:fs";
import * as path from "node:path";
import * as YAML from "yaml";
import { z } from "zod";

/** PCI address in domain:bus:device.function form, e.g. `0000:18:00.0` (lower-case hex). */
const PciAddress = z
    .string()
    .regex(/^[0-9a-f]{4}:[0-9a-f]{2}:[0-9a-f]{2}\.[0-7]$/, "must be a PCI address like 0000:18:00.0 (lower-case hex)");
/**
 * RDMA device (HCA) name as the kernel or rdma-core names it: the kernel's `mlx5_<n>`, or a stable name from
 * rdma-core's `rdma_rename` (prefix by link layer: `ib*` InfiniBand, `roce*` RoCE, `iw*` iWARP, `opa*`, `rdma*`,
 * then `p<bus>s<slot>[f<fn>]` / `x<guid>` / `o<n>`; linux-rdma/rdma-core@00b335ca:kernel-boot/rdma-persistent-naming.rules).
 */
const HcaName = z.string().regex(/^[a-z][a-z0-9_]*$/, "must be an RDMA device name like mlx5_3 or ibp24s0");
/** Linux netdev name (IFNAMSIZ is 16 including NUL). */
const Netdev = z.string().regex(/^[a-zA-Z0-9_.-]{1,15}$/, "must be a Linux interface name (1-15 characters)");
/** NUMA node as `/sys/bus/pci/devices/<bdf>/numa_node` reports it (0-based; -1 = none is refused: HGX boards have 2). */
const Numa = z.number().int().min(0).max(7);

/**
 * What a name must look like for a link layer. Netdev: the kernel names IPoIB interfaces `ib%d`
 * (linux drivers/infiniband/ulp/ipoib/ipoib_main.c: `ipoib_add_port("ib%d", ...)` for every port whose link layer
 * is InfiniBand) and systemd's predictable names give InfiniBand the `ib` prefix (systemd src/udev/udev-builtin-net_id.c:
 * `ARPHRD_INFINIBAND` -> `prefix = "ib"`); an Ethernet netdev never starts with `ib` (`eth*`, `en*`). RDMA device: rdma-core's stable
 * names carry the link layer (`ibp24s0` vs `rocep9s0f0`); a kernel name `mlx5_<n>` fits either.
 */
export const LINK_LAYER_NAMES = {
    InfiniBand: {
        netdev: /^ib/,
        netdevHint: "an IPoIB name (ib0, ibp24s0, ibs1f0)",
        hca: /^(mlx5_\d+|ib[a-z0-9_]+)$/,
        hcaHint: "mlx5_<n> or an rdma-core InfiniBand name (ibp24s0)",
    },
    Ethernet: {
        netdev: /^(?!ib)/,
        netdevHint: "an Ethernet name (eth3, enp41s0f0np0), not ib*",
        hca: /^(mlx5_\d+|roce[a-z0-9_]+)$/,
        hcaHint: "mlx5_<n> or an rdma-core RoCE name (rocep9s0f0)",
    },
} as const;

/**
 * One compute rail of a node: rail `rail` carries GPU `gpu`'s east-west traffic through HCA `hca`.
 * Rail i of every node is cabled to leaf switch i (rail-optimised fabric, NVIDIA DGX SuperPOD RA).
 */
export const RailSchema = z
    .object({
        /** Rail index = leaf switch index, 0-based. */
        rail: z.number().int().min(0).max(31),
        /** GPU index as CUDA/nvidia-smi enumerates it on this node. */
        gpu: z.number().int().min(0).max(31),
        /** PCI address of that GPU; pairs with `pciAddress` in VLLM_GPU_NIC_PCIE_MAPPING. */
        gpuPciAddress: PciAddress,
        /** NUMA node of the GPU (`nvidia-smi topo -m` "NUMA Affinity"); must equal the rail HCA's {@link numa}. */
        gpuNuma: Numa,
        /** RDMA device name (`/sys/class/infiniband/<hca>`); never assume `mlx5_<gpu>`. */
        hca: HcaName,
        /** Network interface bound to the HCA; the RDMA shared device plugin selects by this name. */
        netdev: Netdev,
        /** PCI address of the HCA port. */
        pciAddress: PciAddress,
        /** NUMA node of the HCA (same as its GPU on HGX boards). */
        numa: Numa,
        /** PCI device ID: ConnectX-7 `1021`, BlueField-3 / SuperNIC `a2dc` (sriov-network-operator supported-NIC list). */
        deviceId: z.string().regex(/^[0-9a-f]{4}$/),
        /** Port link layer as `/sys/class/infiniband/<hca>/ports/1/link_layer` reports it. */
        linkLayer: z.enum(["InfiniBand", "Ethernet"]),
        /** Port rate in gigabits per second (NDR = 400). */
        linkRateGbps: z.number().int().positive(),
    })
    .strict();

/** A north-south NIC (frontend Ethernet). KV-cache traffic must never be pinned to these. */
export const FrontendNicSchema = z
    .object({
        hca: HcaName,
        netdev: Netdev,
        pciAddress: PciAddress,
        numa: Numa,
        linkLayer: z.literal("Ethernet"),
        /** Port rate in gigabits per second. */
        linkRateGbps: z.number().int().positive(),
    })
    .strict();

/**
 * A value in the profile that was not read on the node (or in an upstream capture of it) but derived, with why.
 * `path` names the field: `rails[].hca` (every rail), `rails[3].netdev`, `frontend[0].netdev`, `gpu.memoryGB`.
 * `npm run discover-node` on a real node replaces inferred values with read ones.
 */
export const InferredSchema = z
    .object({
        path: z
            .string()
            .regex(/^[a-zA-Z]+(\[\d*\])?(\.[a-zA-Z]+(\[\d*\])?)*$/, "must be a field path like rails[].hca or frontend[0].netdev"),
        /** How the value was derived and how to verify it on the node. */
        note: z.string().min(1),
    })
    .strict();

/**
 * The EFA side of an AWS GPU instance type (EKS spokes), in place of InfiniBand rails. EFA devices are not
 * pinned per rail by us: the EFA device plugin hands out `vpc.amazonaws.com/efa` devices and the EKS AL2023
 * accelerated AMI aligns them with the GPUs.
 */
export const EfaSchema = z
    .object({
        /** EC2 instance type this profile describes, e.g. `p5en.48xlarge`. */
        instanceType: z.string().regex(/^[a-z][a-z0-9-]*\.[a-z0-9-]+$/, "must be an EC2 instance type like p5en.48xlarge"),
        /** `NetworkInfo.MaximumNetworkCards`: one EFA interface per card (p5en 16, p5e 32). */
        networkCards: z.number().int().min(1).max(64),
        /** Line rate of one network card in gigabits per second (p5en 200, p5e 100). */
        cardRateGbps: z.number().int().positive(),
        /** EFA devices sharing a PCIe switch with each GPU (networkCards / GPUs). */
        devicesPerGpu: z.number().int().min(1),
    })
    .strict();

/** Resolves an {@link InferredSchema} path against a profile; `undefined` when it names no field. */
function resolvePath(doc: unknown, path: string): unknown[] | undefined {
    let cur: unknown[] = [doc];
    for (const seg of path.split(".")) {
        const m = /^([a-zA-Z]+)(?:\[(\d*)\])?$/.exec(seg)!;
        const next: unknown[] = [];
        for (const c of cur) {
            if (c === null || typeof c !== "object" || !(m[1] in c)) return undefined;
            const v = (c as Record<string, unknown>)[m[1]];
            if (m[2] === undefined) {
                next.push(v);
                continue;
            }
            if (!Array.isArray(v)) return undefined;
            if (m[2] === "") next.push(...v);
            else if (Number(m[2]) < v.length) next.push(v[Number(m[2])]);
            else return undefined;
        }
        if (next.length === 0) return undefined;
        cur = next;
    }
    return cur;
}

/**
 * A node profile: the hardware of one server model as data (rail -> GPU -> HCA -> netdev -> PCI -> NUMA),
 * in the spirit of NVIDIA k8s-launch-kit presets. Everything rail-shaped in a spoke is generated from it.
 *
 * Refused (each issue names the field, so the stack key or preset file can be fixed): a rail count other than
 * the GPU count; a rail, GPU, HCA, netdev or PCI address used twice; one PCI address on two devices anywhere
 * (GPUs, rail HCAs, frontend NICs); a GPU or NUMA node that does not exist; a rail HCA on another NUMA node than
 * its GPU (the rail's traffic would cross the inter-socket link; k8s-launch-kit HGX H200 presets pair each rail
 * with a GPU behind the same PCIe switch, `gpuProximity: PIX`); names that do not fit the declared link layer
 * ({@link LINK_LAYER_NAMES}); a frontend NIC that is a rail; an `inferred` path that names no field.
 */
export const NodeProfileSchema = z
    .object({
        name: z.string().regex(/^[a-z0-9][a-z0-9-]*$/),
        description: z.string(),
        vendor: z.string(),
        model: z.string(),
        gpu: z
            .object({
                /** Value of the GPU feature discovery label `nvidia.com/gpu.product`. */
                product: z.string(),
                count: z.number().int().min(1).max(16),
                /** HBM per GPU in gigabytes. */
                memoryGB: z.number().positive(),
                /** NVLink bandwidth per GPU in gigabytes per second (GB/s, not Gb/s). */
                nvlinkGBps: z.number().positive(),
            })
            .strict(),
        numaNodes: z.number().int().min(1).max(8),
        /**
         * Host memory (DRAM) of one node in GiB (2^30 bytes). Bounds what the node's KV tiers in host memory add up to:
         * KVBM host tiers (config/endpoint.ts `kvTiers.hostGiB`) and Mooncake store segments (lib/serving.ts
         * `nodeHostBudget`). Unset: an endpoint with `kvTiers` cannot be placed on the profile.
         */
        hostMemoryGiB: z.number().int().positive().optional(),
        /**
         * Local NVMe that workers can use as one filesystem: where it is mounted on the node and how many GiB it holds.
         * EKS: the instance-store RAID0 nodeadm builds (`localStorage.strategy: RAID0`, lib/efa.ts) at `/mnt/k8s-disks/0`,
         * with /var/lib/kubelet and /var/lib/containerd bind-mounted onto it
         * (awslabs/amazon-eks-ami@029ecebc29668887eda4817ef065378f60d5b527:templates/shared/runtime/bin/setup-local-disks).
         * On-prem: the data filesystem of the local NVMe drives. Holds the KVBM disk tiers (`kvTiers.nvmeGiB`) and the
         * per-node model cache (`fastStart.modelCache`). Unset: neither can be placed on the profile.
         */
        localNvme: z
            .object({
                /** Absolute mount point on the node. */
                mountPath: z.string().regex(/^\/[A-Za-z0-9._/-]*[A-Za-z0-9._-]$/, "must be an absolute path without a trailing slash"),
                /** Usable capacity in GiB (2^30 bytes), after RAID and filesystem. */
                capacityGiB: z.number().int().positive(),
            })
            .strict()
            .optional(),
        /** InfiniBand compute rails (on-prem). Empty for an EFA profile. */
        rails: z.array(RailSchema).default([]),
        frontend: z.array(FrontendNicSchema).default([]),
        /** EFA layout (AWS instance types); a profile has either rails or efa, never both. */
        efa: EfaSchema.optional(),
        /** Values derived rather than read on the node, each with how to verify it. */
        inferred: z.array(InferredSchema).default([]),
    })
    .strict()
    .superRefine((p, ctx) => {
        const issue = (path: (string | number)[], message: string) => ctx.addIssue({ code: "custom", path, message });
        p.inferred.forEach((x, i) => {
            if (!resolvePath(p, x.path)) issue(["inferred", i, "path"], `${x.path} names no field of this profile`);
        });
        if (p.efa) {
            if (p.rails.length > 0) issue(["rails"], "an EFA profile has no InfiniBand rails; remove rails or efa");
            if (p.efa.networkCards !== p.efa.devicesPerGpu * p.gpu.count) {
                issue(
                    ["efa", "devicesPerGpu"],
                    `${p.efa.devicesPerGpu} EFA per GPU x ${p.gpu.count} GPUs != ${p.efa.networkCards} network cards`,
                );
            }
            return;
        }
        if (p.rails.length !== p.gpu.count) {
            issue(
                ["rails"],
                `has ${p.rails.length} rails for ${p.gpu.count} GPUs: a rail-aligned fabric needs exactly one rail (one HCA) per GPU`,
            );
        }
        const seen = (key: "rail" | "gpu" | "hca" | "netdev", what: string) => {
            const first = new Map<unknown, number>();
            p.rails.forEach((r, i) => {
                const v = r[key];
                if (first.has(v))
                    issue(
                        ["rails", i, key],
                        `${what} ${JSON.stringify(v)} is already used by rails[${first.get(v)}]; each rail needs its own ${what}`,
                    );
                else first.set(v, i);
            });
        };
        seen("rail", "rail index");
        seen("gpu", "GPU");
        seen("hca", "HCA");
        seen("netdev", "netdev");
        // One PCI function is one device: a GPU, a rail HCA and a frontend NIC never share an address.
        const pciOwner = new Map<string, string>();
        const claim = (pci: string, owner: string, path: (string | number)[]) => {
            const prev = pciOwner.get(pci);
            if (prev !== undefined) issue(path, `PCI address ${pci} is already used by ${prev}; one PCI function is one device`);
            else pciOwner.set(pci, owner);
        };
        p.rails.forEach((r, i) => claim(r.gpuPciAddress, `rails[${i}].gpuPciAddress (GPU ${r.gpu})`, ["rails", i, "gpuPciAddress"]));
        p.rails.forEach((r, i) => claim(r.pciAddress, `rails[${i}].pciAddress (HCA ${r.hca})`, ["rails", i, "pciAddress"]));
        p.frontend.forEach((f, i) => claim(f.pciAddress, `frontend[${i}].pciAddress (${f.hca})`, ["frontend", i, "pciAddress"]));
        const numaRange = `numaNodes: ${p.numaNodes}, so 0..${p.numaNodes - 1}`;
        p.rails.forEach((r, i) => {
            if (r.gpu >= p.gpu.count) issue(["rails", i, "gpu"], `GPU ${r.gpu} does not exist on a ${p.gpu.count}-GPU node`);
            if (r.rail >= p.rails.length) issue(["rails", i, "rail"], `rail ${r.rail} is out of range 0..${p.rails.length - 1}`);
            if (r.numa >= p.numaNodes) issue(["rails", i, "numa"], `NUMA node ${r.numa} does not exist (${numaRange})`);
            if (r.gpuNuma >= p.numaNodes) issue(["rails", i, "gpuNuma"], `NUMA node ${r.gpuNuma} does not exist (${numaRange})`);
            if (r.numa !== r.gpuNuma) {
                issue(
                    ["rails", i, "numa"],
                    `rail ${r.rail} HCA ${r.hca} is on NUMA node ${r.numa} but its GPU ${r.gpu} is on NUMA node ${r.gpuNuma}: a rail HCA must sit on its GPU's NUMA node (same PCIe switch)`,
                );
            }
            const names = LINK_LAYER_NAMES[r.linkLayer];
            if (!names.netdev.test(r.netdev))
                issue(
                    ["rails", i, "netdev"],
                    `netdev ${r.netdev} is not a ${r.linkLayer} interface name (expected ${names.netdevHint}); the device plugin's linkTypes selector would match nothing`,
                );
            if (!names.hca.test(r.hca))
                issue(["rails", i, "hca"], `RDMA device ${r.hca} does not fit link layer ${r.linkLayer} (expected ${names.hcaHint})`);
        });
        const railHcas = new Set(p.rails.map((r) => r.hca));
        const railNetdevs = new Set(p.rails.map((r) => r.netdev));
        p.frontend.forEach((f, i) => {
            if (railHcas.has(f.hca))
                issue(["frontend", i, "hca"], `HCA ${f.hca} is also a compute rail; the frontend must be separate NICs`);
            if (railNetdevs.has(f.netdev)) issue(["frontend", i, "netdev"], `netdev ${f.netdev} is also a compute rail`);
            if (f.numa >= p.numaNodes) issue(["frontend", i, "numa"], `NUMA node ${f.numa} does not exist (${numaRange})`);
            const names = LINK_LAYER_NAMES.Ethernet;
            if (!names.netdev.test(f.netdev))
                issue(["frontend", i, "netdev"], `netdev ${f.netdev} is not an Ethernet interface name (expected ${names.netdevHint})`);
            if (!names.hca.test(f.hca))
                issue(["frontend", i, "hca"], `RDMA device ${f.hca} does not fit link layer Ethernet (expected ${names.hcaHint})`);
        });
    });

/** A node profile as parsed ({@link NodeProfileSchema}): GPUs, rails, frontend NICs and, for EKS, the EFA layout. */
export type NodeProfile = z.infer<typeof NodeProfileSchema>;
/** One rail of a node profile as parsed ({@link RailSchema}): its GPU, HCA, netdev, link layer and link rate
 * (Gb/s). */
export type Rail = z.infer<typeof RailSchema>;
/** A north-south NIC of a node profile as parsed ({@link FrontendNicSchema}). */
export type FrontendNic = z.infer<typeof FrontendNicSchema>;
/** The EFA layout of an EKS node profile as parsed ({@link EfaSchema}). */
export type EfaLayout = z.infer<typeof EfaSchema>;

/** Directory holding the preset profiles shipped with the repo (`config/node-profiles/*.yaml`). */
export const PRESET_DIR = path.join(__dirname, "node-profiles");

let presetCache: Map<string, unknown> | undefined;
const presetFiles = new Map<string, string>();

/**
 * Raw preset documents by name, read from {@link PRESET_DIR}. They are validated where they are used,
 * so a broken preset is reported against the stack key that selected it (and {@link presetFile} names its file).
 */
export function presetProfiles(): Map<string, unknown> {
    if (!presetCache) {
        presetCache = new Map();
        for (const f of fs
            .readdirSync(PRESET_DIR)
            .filter((f) => f.endsWith(".yaml"))
            .sort()) {
            const doc = YAML.parse(fs.readFileSync(path.join(PRESET_DIR, f), "utf8"));
            const name = String(doc?.name ?? path.basename(f, ".yaml"));
            presetCache.set(name, doc);
            presetFiles.set(name, path.join("config", "node-profiles", f));
        }
    }
    return presetCache;
}

/** Repository-relative file of preset `name` (`config/node-profiles/dgx-h200.yaml`), or undefined. */
export function presetFile(name: string): string | undefined {
    presetProfiles();
    return presetFiles.get(name);
}

/** `rails[2].netdev` from a zod path. */
function fieldPath(p: PropertyKey[]): string {
    return p.map((x, i) => (typeof x === "number" ? `[${x}]` : `${i > 0 ? "." : ""}${String(x)}`)).join("");
}

/**
 * Parses a node profile YAML file (a preset, or one written by `npm run discover-node`).
 * @throws Error naming the file and every refused field (`<file>: rails[2].netdev: ...`)
 */
export function loadNodeProfileFile(file: string): NodeProfile {
    let doc: unknown;
    try {
        doc = YAML.parse(fs.readFileSync(file, "utf8"));
    } catch (e) {
        throw new Error(`${file}: ${(e as Error).message}`);
    }
    const r = NodeProfileSchema.safeParse(doc);
    if (!r.success)
        throw new Error(
            r.error.issues.map((i) => `${file}: ${fieldPath(i.path as PropertyKey[]) || "(top level)"}: ${i.message}`).join("\n"),
        );
    return r.data;
}

/** Rails sorted by rail index (the order every generated list follows). */
export function railsInOrder(p: NodeProfile): Rail[] {
    return [...p.rails].sort((a, b) => a.rail - b.rail);
}
