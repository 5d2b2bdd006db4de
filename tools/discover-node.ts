/**
 * `npm run discover-node -- --name <profile name> [--root /] [--topo topo.txt] [--gpus gpus.csv] [--out file.yaml]`:
 * turns one node's real inventory into a node profile YAML that config/nodeProfile.ts accepts (a rail table
 * is data read from the hardware, never an index assumption).
 *
 * Reads (under `--root`, default `/`, so a copied or fake tree works the same):
 * - `sys/class/infiniband/<hca>/`: `device/uevent` (PCI_SLOT_NAME), `device/numa_node`, `device/device` (PCI device ID),
 *   `device/net/<netdev>` (the netdev bound to it), `ports/1/link_layer`, `ports/1/rate` ("400 Gb/sec (4X NDR)");
 * - `sys/class/net/<netdev>/type` (32 = ARPHRD_INFINIBAND, 1 = ARPHRD_ETHER), cross-checked against the link layer;
 * - `sys/bus/pci/devices/<bdf>/{vendor,class,numa_node}`: GPUs are vendor 0x10de with class 0x0302xx (3D controller);
 * - `sys/devices/system/node/node<N>`: the NUMA node count; `sys/class/dmi/id/{sys_vendor,product_name}`;
 * - `--topo`: the output of `nvidia-smi topo -m` (GPU x NIC matrix with PIX/PXB/PHB/NODE/SYS, "NIC Legend" naming the
 *   HCAs, NVLink as `NV<n>`): each GPU's rail HCA is its nearest NIC behind the same PCIe switch (PIX, else PXB);
 * - `--gpus`: `nvidia-smi --query-gpu=index,pci.bus_id,name,memory.total --format=csv,noheader` (GPU index <-> PCI address).
 *
 * What is derived rather than read is listed in the profile's `inferred` field with how to verify it: GPU indices
 * without `--gpus` (PCI address order, nvidia-smi's default enumeration), GPU/HCA pairing without `--topo` (same NUMA
 * node, fastest ports, nearest PCI bus), the rail index (= GPU index, the rail-optimised cabling convention), NVLink
 * bandwidth (NV<n> x 50 GB/s, NVLink 4) and HBM size (memory.total MiB / 1024).
 *
 * @throws (exit 2) on unreadable inventory; (exit 1) when the result fails the profile schema, naming each field;
 *   nothing is written then.
 */
import * as fs from "node:fs";
import * as path from "node:path";
import * as YAML from "yaml";
import { type NodeProfile, NodeProfileSchema } from "../config/nodeProfile";
import { exitOnHelp } from "./cli";

/** One RDMA device as sysfs shows it. */
export interface HcaInfo {
    hca: string;
    pciAddress: string;
    numa: number;
    deviceId: string;
    linkLayer: "InfiniBand" | "Ethernet";
    /** Gb/s (gigabits). */
    linkRateGbps: number;
    /** Netdev bound to the HCA's PCI function, if any. */
    netdev?: string;
}

/** One GPU as sysfs (and optionally nvidia-smi) shows it. */
export interface GpuInfo {
    /** CUDA/nvidia-smi index; `indexInferred` when taken from PCI order. */
    index: number;
    pciAddress: string;
    numa: number;
}

/** `nvidia-smi topo -m`, parsed. */
export interface Topology {
    /** proximity[gpuIndex][hcaName] = "PIX" | "PXB" | "PHB" | "NODE" | "SYS". */
    proximity: Map<number, Map<string, string>>;
    /** NUMA affinity per GPU index. */
    gpuNuma: Map<number, number>;
    /** NVLinks between GPU pairs (`NV18` -> 18), the smallest seen; undefined without NVLink. */
    nvlinks?: number;
}

const read = (f: string): string => fs.readFileSync(f, "utf8").trim();
const readOpt = (f: string): string | undefined => (fs.existsSync(f) ? read(f) : undefined);
const ls = (d: string): string[] => (fs.existsSync(d) ? fs.readdirSync(d).sort() : []);

/** `0000:1B:00.0` or nvidia-smi's `00000000:1B:00.0` -> `0000:1b:00.0`. */
export function normalizePci(s: string): string {
    const m = /^(?:[0-9a-fA-F]{4}([0-9a-fA-F]{4})|([0-9a-fA-F]{4})):([0-9a-fA-F]{2}):([0-9a-fA-F]{2})\.([0-7])$/.exec(s.trim());
    if (!m) throw new Error(`not a PCI address: ${JSON.stringify(s)}`);
    return `${(m[1] ?? m[2]).toLowerCase()}:${m[3].toLowerCase()}:${m[4].toLowerCase()}.${m[5]}`;
}

/** Every RDMA device under `<root>/sys/class/infiniband`. */
export function readHcas(root: string): HcaInfo[] {
    const base = path.join(root, "sys", "class", "infiniband");
    const names = ls(base);
    if (names.length === 0) throw new Error(`no RDMA devices under ${base}`);
    return names.map((hca) => {
        const d = path.join(base, hca);
        const slot = /PCI_SLOT_NAME=(\S+)/.exec(read(path.join(d, "device", "uevent")))?.[1];
        if (!slot) throw new Error(`${d}/device/uevent has no PCI_SLOT_NAME`);
        const ll = read(path.join(d, "ports", "1", "link_layer"));
        if (ll !== "InfiniBand" && ll !== "Ethernet") throw new Error(`${d}/ports/1/link_layer: unknown link layer ${ll}`);
        const rate = /^(\d+)(?:\.\d+)?\s*Gb\/sec/.exec(read(path.join(d, "ports", "1", "rate")))?.[1];
        if (!rate) throw new Error(`${d}/ports/1/rate is not "<n> Gb/sec ..."`);
        const netdevs = ls(path.join(d, "device", "net"));
        const numa = Number(read(path.join(d, "device", "numa_node")));
        return {
            hca,
            pciAddress: normalizePci(slot),
            numa: Math.max(numa, 0),
            deviceId: read(path.join(d, "device", "device"))
                .replace(/^0x/, "")
                .toLowerCase(),
            linkLayer: ll,
            linkRateGbps: Number(rate),
            ...(netdevs.length ? { netdev: netdevs[0] } : {}),
        };
    });
}

/** NVIDIA 3D controllers (vendor 0x10de, class 0x0302xx) under `<root>/sys/bus/pci/devices`, in PCI address order. */
export function readGpus(root: string): Array<{ pciAddress: string; numa: number }> {
    const base = path.join(root, "sys", "bus", "pci", "devices");
    return ls(base)
        .filter(
            (bdf) =>
                readOpt(path.join(base, bdf, "vendor")) === "0x10de" && (readOpt(path.join(base, bdf, "class")) ?? "").startsWith("0x0302"),
        )
        .map((bdf) => ({ pciAddress: normalizePci(bdf), numa: Math.max(0, Number(read(path.join(base, bdf, "numa_node")))) }))
        .sort((a, b) => a.pciAddress.localeCompare(b.pciAddress));
}

/** Parses `nvidia-smi --query-gpu=index,pci.bus_id,name,memory.total --format=csv,noheader`. */
export function parseGpuCsv(text: string): Array<{ index: number; pciAddress: string; name?: string; memoryMiB?: number }> {
    return text
        .split("\n")
        .map((l) => l.trim())
        .filter(Boolean)
        .map((l) => {
            const [index, bus, name, mem] = l.split(",").map((x) => x.trim());
            if (!/^\d+$/.test(index ?? "")) throw new Error(`--gpus: not "index, pci.bus_id, ...": ${l}`);
            const mib = mem ? /^(\d+)\s*MiB$/.exec(mem)?.[1] : undefined;
            return {
                index: Number(index),
                pciAddress: normalizePci(bus),
                ...(name ? { name } : {}),
                ...(mib ? { memoryMiB: Number(mib) } : {}),
            };
        });
}

/** Parses the matrix and NIC legend of `nvidia-smi topo -m`. */
export function parseTopo(text: string): Topology {
    const lines = text.split("\n");
    const headerAt = lines.findIndex((l) => /\bGPU0\b/.test(l) && /Affinity/.test(l));
    if (headerAt < 0) throw new Error("--topo: no `nvidia-smi topo -m` header (GPU0 ... CPU Affinity NUMA Affinity)");
    const cols = lines[headerAt]
        .trim()
        .split(/\s+/)
        .filter((c) => /^(GPU|NIC)\d+$/.test(c));
    const legend = new Map<string, string>();
    for (const l of lines) {
        const m = /^\s*(NIC\d+):\s*(\S+)\s*$/.exec(l);
        if (m) legend.set(m[1], m[2]);
    }
    const proximity = new Map<number, Map<string, string>>();
    const gpuNuma = new Map<number, number>();
    let nvlinks: number | undefined;
    for (const l of lines.slice(headerAt + 1)) {
        const cells = l.trim().split(/\s+/);
        const g = /^GPU(\d+)$/.exec(cells[0] ?? "");
        if (!g) continue;
        const gpu = Number(g[1]);
        const row = new Map<string, string>();
        cols.forEach((c, i) => {
            const v = cells[i + 1];
            const nv = /^NV(\d+)$/.exec(v ?? "");
            if (nv) nvlinks = nvlinks === undefined ? Number(nv[1]) : Math.min(nvlinks, Number(nv[1]));
            if (c.startsWith("NIC")) {
                const hca = legend.get(c);
                if (!hca) throw new Error(`--topo: ${c} is not in the NIC Legend`);
                row.set(hca, v);
            }
        });
        proximity.set(gpu, row);
        const numa = cells[cols.length + 2];
        if (numa !== undefined && /^\d+$/.test(numa)) gpuNuma.set(gpu, Number(numa));
    }
    return { proximity, gpuNuma, ...(nvlinks !== undefined ? { nvlinks } : {}) };
}

const RANK: Record<string, number> = { PIX: 0, PXB: 1, PHB: 2, NODE: 3, SYS: 4 };
const pciBus = (a: string) => parseInt(a.split(":")[1], 16);

/** Options of {@link discoverNode}. */
export interface DiscoverOptions {
    root: string;
    name: string;
    description?: string;
    topo?: string;
    gpus?: string;
    /** NVLink bandwidth per GPU in GB/s (gigabytes) when `topo` does not show it. */
    nvlinkGBps?: number;
}

/** Builds the profile document (not yet validated) and the notes on what was left out. */
export function discoverNode(o: DiscoverOptions): { profile: Record<string, unknown>; skipped: string[] } {
    const hcas = readHcas(o.root);
    const sysGpus = readGpus(o.root);
    if (sysGpus.length === 0)
        throw new Error(`no NVIDIA GPUs (vendor 0x10de, class 0x0302) under ${path.join(o.root, "sys/bus/pci/devices")}`);
    const inferred: Array<{ path: string; note: string }> = [];
    const csv = o.gpus ? parseGpuCsv(o.gpus) : undefined;
    const topo = o.topo ? parseTopo(o.topo) : undefined;

    // GPU index <-> PCI address.
    let gpus: GpuInfo[];
    if (csv) {
        gpus = csv.map((c) => {
            const s = sysGpus.find((g) => g.pciAddress === c.pciAddress);
            if (!s) throw new Error(`--gpus: GPU ${c.index} at ${c.pciAddress} is not an NVIDIA GPU in sysfs`);
            return { index: c.index, pciAddress: c.pciAddress, numa: s.numa };
        });
    } else {
        gpus = sysGpus.map((g, i) => ({ index: i, ...g }));
        inferred.push({
            path: "rails[].gpu",
            note: "GPU index from PCI address order (nvidia-smi's default enumeration); verify with `nvidia-smi --query-gpu=index,pci.bus_id`",
        });
    }

    // Each GPU's rail HCA.
    const railOf = new Map<number, HcaInfo>();
    if (topo) {
        for (const g of gpus) {
            const row = topo.proximity.get(g.index);
            if (!row) throw new Error(`--topo: no row for GPU${g.index}`);
            const best = [...row.entries()]
                .map(([hca, p]) => ({ h: hcas.find((x) => x.hca === hca), p: RANK[p] ?? 9 }))
                .filter((x) => x.h && x.p <= RANK.PXB)
                .sort((a, b) => a.p - b.p || b.h!.linkRateGbps - a.h!.linkRateGbps || a.h!.hca.localeCompare(b.h!.hca));
            if (!best.length) throw new Error(`--topo: GPU${g.index} has no NIC behind its PCIe switch (PIX/PXB): no rail HCA for it`);
            railOf.set(g.index, best[0].h!);
        }
    } else {
        const fastest = Math.max(...hcas.map((h) => h.linkRateGbps));
        const free = hcas.filter((h) => h.linkRateGbps === fastest);
        for (const g of gpus) {
            const c = free
                .filter((h) => h.numa === g.numa && ![...railOf.values()].includes(h))
                .sort(
                    (a, b) => Math.abs(pciBus(a.pciAddress) - pciBus(g.pciAddress)) - Math.abs(pciBus(b.pciAddress) - pciBus(g.pciAddress)),
                );
            if (!c.length)
                throw new Error(
                    `GPU ${g.index} (${g.pciAddress}, NUMA ${g.numa}) has no free ${fastest} Gb/s HCA on its NUMA node; pass --topo`,
                );
            railOf.set(g.index, c[0]);
        }
        inferred.push({
            path: "rails[].hca",
            note: "GPU <-> HCA pairing without `nvidia-smi topo -m`: fastest ports, same NUMA node, nearest PCI bus; verify with --topo (PIX)",
        });
    }
    const used = new Set([...railOf.values()].map((h) => h.hca));
    if (used.size !== railOf.size)
        throw new Error(`two GPUs share one rail HCA (${[...railOf.entries()].map(([g, h]) => `GPU${g}=${h.hca}`).join(", ")})`);

    const netType = (netdev: string) => readOpt(path.join(o.root, "sys", "class", "net", netdev, "type"));
    const skipped: string[] = [];
    const rails = [...railOf.entries()]
        .sort((a, b) => a[0] - b[0])
        .map(([gi, h]) => {
            const g = gpus.find((x) => x.index === gi)!;
            if (!h.netdev) throw new Error(`rail HCA ${h.hca} (GPU ${gi}) has no netdev in sys/class/infiniband/${h.hca}/device/net`);
            const t = netType(h.netdev);
            if (t !== undefined && t !== (h.linkLayer === "InfiniBand" ? "32" : "1"))
                throw new Error(`${h.netdev}: sys/class/net type ${t} disagrees with ${h.hca} link layer ${h.linkLayer}`);
            return {
                rail: gi,
                gpu: gi,
                gpuPciAddress: g.pciAddress,
                gpuNuma: topo?.gpuNuma.get(gi) ?? g.numa,
                hca: h.hca,
                netdev: h.netdev,
                pciAddress: h.pciAddress,
                numa: h.numa,
                deviceId: h.deviceId,
                linkLayer: h.linkLayer,
                linkRateGbps: h.linkRateGbps,
            };
        });
    inferred.push({
        path: "rails[].rail",
        note: "rail index = GPU index (GPU i of every node cabled to leaf i); verify against the cabling plan",
    });
    const frontend = hcas
        .filter((h) => !used.has(h.hca))
        .flatMap((h) => {
            if (h.linkLayer !== "Ethernet") {
                skipped.push(`${h.hca} (${h.pciAddress}, InfiniBand, not a GPU's nearest NIC: storage or spare port)`);
                return [];
            }
            if (!h.netdev) {
                skipped.push(`${h.hca} (${h.pciAddress}, no netdev)`);
                return [];
            }
            return [
                {
                    hca: h.hca,
                    netdev: h.netdev,
                    pciAddress: h.pciAddress,
                    numa: h.numa,
                    linkLayer: "Ethernet" as const,
                    linkRateGbps: h.linkRateGbps,
                },
            ];
        });

    const numaNodes = ls(path.join(o.root, "sys", "devices", "system", "node")).filter((n) => /^node\d+$/.test(n)).length || 1;
    const first = csv?.[0];
    const product = first?.name ? first.name.replace(/\s+/g, "-") : undefined;
    if (!product)
        throw new Error(
            "GPU product unknown: pass --gpus (nvidia-smi --query-gpu=index,pci.bus_id,name,memory.total --format=csv,noheader)",
        );
    if (!first?.memoryMiB) throw new Error("GPU memory unknown: --gpus needs the memory.total column");
    inferred.push({
        path: "gpu.product",
        note: "nvidia-smi name with spaces as dashes, the form of GPU feature discovery's nvidia.com/gpu.product label",
    });
    inferred.push({ path: "gpu.memoryGB", note: `memory.total ${first.memoryMiB} MiB / 1024, rounded` });
    let nvlinkGBps = o.nvlinkGBps;
    if (nvlinkGBps === undefined) {
        if (!topo?.nvlinks) throw new Error("NVLink bandwidth unknown: pass --topo (NV<n>) or --nvlink-gbps");
        nvlinkGBps = topo.nvlinks * 50;
        inferred.push({
            path: "gpu.nvlinkGBps",
            note: `NV${topo.nvlinks} x 50 GB/s per link (NVLink 4); verify with \`nvidia-smi nvlink -s\``,
        });
    }
    const vendor = readOpt(path.join(o.root, "sys", "class", "dmi", "id", "sys_vendor")) ?? "unknown";
    const model = readOpt(path.join(o.root, "sys", "class", "dmi", "id", "product_name")) ?? "unknown";
    return {
        profile: {
            name: o.name,
            description:
                o.description ??
                `${vendor} ${model}, ${gpus.length} x ${product}, ${rails.length} x ${rails[0]?.linkRateGbps} Gb/s ${rails[0]?.linkLayer} rails (discovered)`,
            vendor,
            model,
            gpu: { product, count: gpus.length, memoryGB: Math.round(first.memoryMiB / 1024), nvlinkGBps },
            numaNodes,
            rails,
            frontend,
            inferred,
        },
        skipped,
    };
}

/** The profile as YAML: header comment, one flow-style line per rail and frontend NIC (as the shipped presets). */
export function profileYaml(profile: Record<string, unknown>, header: string[]): string {
    const doc = new YAML.Document(profile);
    for (const key of ["rails", "frontend"]) {
        const seq = doc.get(key) as YAML.YAMLSeq | undefined;
        for (const item of seq?.items ?? []) (item as YAML.YAMLMap).flow = true;
    }
    // PCI addresses quoted as the presets write them: YAML 1.1 readers would take `0000:18:00.0` for a sexagesimal number.
    YAML.visit(doc, {
        Pair(_, pair) {
            const k = YAML.isScalar(pair.key) ? pair.key.value : pair.key;
            if ((k === "pciAddress" || k === "gpuPciAddress") && YAML.isScalar(pair.value)) pair.value.type = "QUOTE_DOUBLE";
        },
    });
    doc.commentBefore = header.map((l) => ` ${l}`).join("\n");
    return doc.toString({ lineWidth: 0 });
}

/** Validates a discovered profile; throws naming every refused field. */
export function validateDiscovered(profile: Record<string, unknown>, origin: string): NodeProfile {
    const r = NodeProfileSchema.safeParse(profile);
    if (!r.success)
        throw new Error(
            `the profile discovered from ${origin} is refused:\n${r.error.issues.map((i) => `  - ${i.path.join(".")}: ${i.message}`).join("\n")}`,
        );
    return r.data;
}

const HELP = `
usage: npm run discover-node -- --name <profile name> [--root DIR] [--topo FILE] [--gpus FILE]
                               [--nvlink-gbps N] [--description TEXT] [--out FILE.yaml]

Turns one node's real inventory into a node profile (the rail table as data): RDMA devices, netdevs, link rates
and NUMA nodes from sysfs under --root; GPU <-> HCA pairing from \`nvidia-smi topo -m\`; GPU indices from
\`nvidia-smi --query-gpu=index,pci.bus_id,name,memory.total --format=csv,noheader\`. What is derived rather than
read is listed in the profile's \`inferred\` field with how to verify it. Prints the profile (or writes --out and
says what it wrote). Exit 1 when the result fails the profile schema, 2 on unreadable inventory.

Options:
  --name NAME          profile name (the file stem under config/node-profiles/)
  --root DIR           read sys/ under DIR instead of / (a copied tree works the same)
  --topo FILE          output of \`nvidia-smi topo -m\`
  --gpus FILE          output of the nvidia-smi --query-gpu line above
  --nvlink-gbps N      NVLink bandwidth per GPU in GB/s (bytes) when the topology cannot say
  --description TEXT   the profile's description
  --out FILE.yaml      write the profile there instead of printing it
  -h, --help           this text

Examples (on the captured tree in the repository):
  npm run discover-node -- --name dgx-h200-lab --root test/fixtures/node-sysfs/dgx-h200-ib \\
      --topo test/fixtures/node-sysfs/dgx-h200-ib/nvidia-smi-topo-m.txt \\
      --gpus test/fixtures/node-sysfs/dgx-h200-ib/nvidia-smi-query-gpu.csv
  npm run discover-node -- --name my-node --topo topo.txt --gpus gpus.csv --out config/node-profiles/my-node.yaml
`;

function main(): number {
    const argv = process.argv.slice(2);
    exitOnHelp(argv, HELP);
    const opt: Record<string, string> = {};
    for (let i = 0; i < argv.length; i++) {
        const m = /^--(root|name|description|topo|gpus|out|nvlink-gbps)$/.exec(argv[i]);
        if (!m || argv[i + 1] === undefined)
            throw new Error(
                `unknown or incomplete option ${argv[i]} (usage: npm run discover-node -- --name <name> [--root /] [--topo file] [--gpus file] [--nvlink-gbps n] [--out file.yaml])`,
            );
        opt[m[1]] = argv[++i];
    }
    if (!opt.name) throw new Error("--name <profile name> is required (e.g. --name cisco-ucsc-885a-m8-h22)");
    const root = opt.root ?? "/";
    const { profile, skipped } = discoverNode({
        root,
        name: opt.name,
        description: opt.description,
        topo: opt.topo ? fs.readFileSync(opt.topo, "utf8") : undefined,
        gpus: opt.gpus ? fs.readFileSync(opt.gpus, "utf8") : undefined,
        nvlinkGBps: opt["nvlink-gbps"] ? Number(opt["nvlink-gbps"]) : undefined,
    });
    let parsed: NodeProfile;
    try {
        parsed = validateDiscovered(profile, root);
    } catch (e) {
        process.stderr.write(`discover-node: ${(e as Error).message}\n`);
        return 1;
    }
    const header = [
        `Node profile discovered by \`npm run discover-node\` from ${root === "/" ? "this node" : root}.`,
        `Sources: sysfs (sys/class/infiniband, sys/class/net, sys/bus/pci/devices)${opt.topo ? ", nvidia-smi topo -m" : ""}${opt.gpus ? ", nvidia-smi --query-gpu" : ""}.`,
        "Values listed under `inferred` were derived, not read: verify them before the first `pulumi up`.",
        ...(skipped.length ? ["Not rails and not frontend NICs:", ...skipped.map((s) => `  ${s}`)] : []),
    ];
    const text = profileYaml(profile, header);
    // What was written, and what to check: on stdout with --out, else on stderr (stdout is the profile itself).
    const rails = parsed.rails.map((r) => `GPU${r.gpu}->${r.hca}`).join(" ");
    const summary = `${[
        `${opt.out ? `wrote ${opt.out}` : "discovered"}: node profile "${parsed.name}": ${parsed.gpu.count} GPUs, ${parsed.rails.length} rails (${rails}), ${parsed.frontend.length} frontend NIC(s)`,
        ...(parsed.inferred.length
            ? [
                  `  ${parsed.inferred.length} value(s) inferred, not read; verify before the first pulumi up:`,
                  ...parsed.inferred.map((i) => `    - ${i.path}: ${i.note}`),
              ]
            : []),
        `  to use it: keep it as config/node-profiles/${parsed.name}.yaml and set platform:nodePools[].profile: ${parsed.name}`,
    ].join("\n")}\n`;
    if (opt.out) {
        fs.writeFileSync(opt.out, text);
        process.stdout.write(summary);
    } else {
        process.stdout.write(text);
        process.stderr.write(summary);
    }
    return 0;
}

if (require.main === module) {
    try {
        process.exit(main());
    } catch (e) {
        process.stderr.write(`discover-node: ${(e as Error).message}\n`);
        process.exit(2);
    }
}
