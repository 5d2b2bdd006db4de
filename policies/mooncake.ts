import type { StackValidationPolicy } from "@pulumi/policy";
import { parseDeviceList, truthy } from "./lib/env";
import { containerPolicy, type Finding } from "./lib/report";
import { type ContainerView, envField, envValue, flagValue, kvUse, poolsOf, type StackView } from "./lib/workloads";

/**
 * Mooncake rules: Mooncake's default protocol is tcp, its
 * device auto-discovery picks unusable or non-routable HCAs. An explicit rail device list turns auto-discovery off, so a
 * missing HCA fails the client (MC_FORCE_HCA is read only under auto-discovery: upstream/mooncake.ts). Applies to store pods, vLLM workers with MooncakeConnector/MooncakeStoreConnector, SGLang HiCache or PD
 * with the Mooncake backend, and anything else configured through MOONCAKE_* / MC_* settings.
 */

/** A place a Mooncake setting is read from. */
interface Source {
    field: string;
    value: string;
}

/** Mooncake JSON configs a container uses: `MOONCAKE_CONFIG_PATH` resolved through a mounted ConfigMap, and SGLang's `--hicache-storage-backend-extra-config`. */
function jsonConfigs(c: ContainerView, v: StackView): Array<{ field: string; json: Record<string, any> }> {
    const out: Array<{ field: string; json: Record<string, any> }> = [];
    const path = envValue(c, "MOONCAKE_CONFIG_PATH");
    if (path) {
        const mount = findMount(c, path);
        if (mount) {
            const data = v.data.configMaps.get(`${c.namespace}/${mount.configMap}`);
            const text = data?.[mount.key];
            if (text !== undefined) {
                try {
                    out.push({ field: `ConfigMap ${mount.configMap} key ${mount.key} (MOONCAKE_CONFIG_PATH)`, json: JSON.parse(text) });
                } catch {
                    /* not JSON */
                }
            }
        }
    }
    const extra = flagValue(c, "--hicache-storage-backend-extra-config");
    if (extra) {
        try {
            out.push({ field: `${c.path}.args[--hicache-storage-backend-extra-config]`, json: JSON.parse(extra) });
        } catch {
            /* not JSON */
        }
    }
    return out;
}

/**
 * The ConfigMap and key a file path of the container comes from, via its volumeMounts: the mount's `subPath` picks a
 * file or directory of the volume, the volume's `items` map keys to relative paths (Kubernetes core/v1 VolumeMount
 * `subPath`, ConfigMapVolumeSource `items`).
 */
function findMount(c: ContainerView, file: string): { configMap: string; key: string } | undefined {
    for (const vm of c.volumeMounts) {
        const mp = vm.mountPath.replace(/\/+$/, "");
        const sub = vm.subPath?.replace(/^\/+|\/+$/g, "");
        let rel: string;
        if (file === mp && sub) rel = sub;
        else if (file.startsWith(`${mp}/`)) rel = sub ? `${sub}/${file.slice(mp.length + 1)}` : file.slice(mp.length + 1);
        else continue;
        const vol = c.pod.volumes.find((x) => x.name === vm.name);
        if (!vol?.configMap) continue;
        const key = vol.configMapItems ? vol.configMapItems.find((i) => i.path === rel)?.key : rel;
        if (key === undefined) continue;
        return { configMap: vol.configMap, key };
    }
    return undefined;
}

/** Protocol settings of a Mooncake user. */
function protocolSources(c: ContainerView, v: StackView): Source[] {
    const out: Source[] = [];
    const env = envValue(c, "MOONCAKE_PROTOCOL");
    if (env !== undefined) out.push({ field: envField(c, "MOONCAKE_PROTOCOL"), value: env });
    const sg = envValue(c, "SGLANG_MOONCAKE_PROTOCOL");
    if (sg !== undefined) out.push({ field: envField(c, "SGLANG_MOONCAKE_PROTOCOL"), value: sg });
    for (const j of jsonConfigs(c, v))
        if (j.json.protocol !== undefined) out.push({ field: `${j.field}.protocol`, value: String(j.json.protocol) });
    return out;
}

/** Device-list settings of a Mooncake user. */
function deviceSources(c: ContainerView, v: StackView): Source[] {
    const out: Source[] = [];
    const env = envValue(c, "MOONCAKE_DEVICE");
    if (env !== undefined) out.push({ field: envField(c, "MOONCAKE_DEVICE"), value: env });
    const filters = envValue(c, "MC_TE_FILTERS");
    if (filters !== undefined) out.push({ field: envField(c, "MC_TE_FILTERS"), value: filters });
    const ib = flagValue(c, "--disaggregation-ib-device");
    if (ib !== undefined) out.push({ field: `${c.path}.args[--disaggregation-ib-device]`, value: ib });
    for (const j of jsonConfigs(c, v))
        if (j.json.device_name !== undefined) out.push({ field: `${j.field}.device_name`, value: String(j.json.device_name) });
    return out;
}

const isMooncake = (c: ContainerView) => kvUse(c).mooncake;

/** Explicit rdma/efa protocol. */
export const mooncakeProtocolRdma = containerPolicy(
    {
        name: "mooncake-protocol-rdma",
        description:
            "Mooncake's protocol must be set explicitly to rdma (or efa on EFA) wherever it is configured (MOONCAKE_PROTOCOL, the MOONCAKE_CONFIG_PATH JSON, SGLang's HiCache extra config, SGLANG_MOONCAKE_PROTOCOL) and never tcp: its default is tcp (Mooncake store deployment guide), and MC_FORCE_TCP must not be set.",
        remediationSteps: 'Set MOONCAKE_PROTOCOL=rdma and "protocol": "rdma" in every Mooncake JSON config; remove MC_FORCE_TCP.',
    },
    (c, v) => {
        const srcs = protocolSources(c, v);
        const out: Finding[] = [];
        if (srcs.length === 0)
            out.push({
                field: envField(c, "MOONCAKE_PROTOCOL"),
                problem: "sets no Mooncake protocol, so Mooncake uses its default, tcp",
                fix: "set MOONCAKE_PROTOCOL=rdma",
            });
        for (const s of srcs) {
            if (!["rdma", "efa"].includes(s.value.trim().toLowerCase()))
                out.push({
                    field: s.field,
                    problem: `Mooncake protocol is "${s.value}", not rdma or efa`,
                    fix: "set it to rdma (efa on EFA)",
                });
        }
        if (truthy(envValue(c, "MC_FORCE_TCP")))
            out.push({
                field: envField(c, "MC_FORCE_TCP"),
                problem: `MC_FORCE_TCP=${envValue(c, "MC_FORCE_TCP")} forces the TCP transport`,
                fix: "remove MC_FORCE_TCP",
            });
        return out;
    },
    isMooncake,
);

/** vllm-project/vllm PR #44919: explicit rail devices. */
export const mooncakeDevicesRailHcas = containerPolicy(
    {
        name: "mooncake-devices-rail-hcas",
        description:
            "A Mooncake user must list its RDMA devices explicitly (MOONCAKE_DEVICE, JSON device_name, --disaggregation-ib-device, or MC_TE_FILTERS), only rail HCAs of its node pool and never a frontend NIC or 'auto-discovery' (which picks devices with link_layer Unknown, limited pkeys or the wrong route group, vllm-project/vllm PR #44919), and on rail-optimised pools set MC_ENABLE_DEST_DEVICE_AFFINITY=1 so transfers stay on one rail.",
        remediationSteps:
            "Set MOONCAKE_DEVICE (and device_name in JSON configs) to the pool's rail HCAs, e.g. mlx5_0,mlx5_3,...; set MC_ENABLE_DEST_DEVICE_AFFINITY=1.",
    },
    (c, v) => {
        const out: Finding[] = [];
        const pinned = poolsOf(c, v.pools).pools;
        const pools = pinned.length ? pinned : v.pools;
        const srcs = deviceSources(c, v);
        const rails = pools.filter((p) => p.rails.length > 0);
        const fix = `set MOONCAKE_DEVICE=${rails[0] ? rails[0].rails.map((r) => r.hca).join(",") : "<rail hcas>"}`;
        if (srcs.every((s) => parseDeviceList(s.value).length === 0))
            out.push({
                field: envField(c, "MOONCAKE_DEVICE"),
                problem: "lists no Mooncake RDMA device, so Mooncake auto-discovers every HCA, including unusable or non-routable ones",
                fix,
            });
        for (const s of srcs) {
            for (const d of parseDeviceList(s.value)) {
                if (d.toLowerCase() === "auto-discovery") {
                    out.push({ field: s.field, problem: "uses auto-discovery instead of the rail HCAs", fix });
                    continue;
                }
                for (const pool of rails) {
                    if (pool.frontendHcas.includes(d))
                        out.push({ field: s.field, problem: `${d} is a frontend (north-south) NIC of pool ${pool.name}`, fix });
                    else if (!pool.rails.some((r) => r.hca === d))
                        out.push({ field: s.field, problem: `${d} is not a rail HCA of pool ${pool.name}`, fix });
                }
            }
        }
        if (pinned.some((p) => p.rails.length > 1) && envValue(c, "MC_ENABLE_DEST_DEVICE_AFFINITY") !== "1") {
            out.push({
                field: envField(c, "MC_ENABLE_DEST_DEVICE_AFFINITY"),
                problem:
                    "MC_ENABLE_DEST_DEVICE_AFFINITY is not 1 on a rail-optimised pool, so a transfer may cross rails through the spine",
                fix: "set MC_ENABLE_DEST_DEVICE_AFFINITY=1",
            });
        }
        return out;
    },
    isMooncake,
);

/** Bytes of a Mooncake size (`10gb`, `512GB`, `3355443200`; binary units). NaN when unparseable. */
export function mooncakeBytes(v: string): number {
    const m = /^\s*(\d+(?:\.\d+)?)\s*(b|kb|mb|gb|tb)?\s*$/i.exec(v);
    if (!m) return NaN;
    const mult: Record<string, number> = { b: 1, kb: 2 ** 10, mb: 2 ** 20, gb: 2 ** 30, tb: 2 ** 40 };
    return Number(m[1]) * mult[(m[2] ?? "b").toLowerCase()];
}

/** Bytes of a Kubernetes memory quantity (`528Gi`, `500G`, `1e9`). NaN when unparseable. */
export function k8sBytes(v: string): number {
    const m = /^\s*(\d+(?:\.\d+)?)(Ki|Mi|Gi|Ti|Pi|k|K|M|G|T|P|e\d+)?\s*$/.exec(v);
    if (!m) return NaN;
    const s = m[2] ?? "";
    if (s.startsWith("e")) return Number(m[1]) * 10 ** Number(s.slice(1));
    const mult: Record<string, number> = {
        "": 1,
        Ki: 2 ** 10,
        Mi: 2 ** 20,
        Gi: 2 ** 30,
        Ti: 2 ** 40,
        Pi: 2 ** 50,
        k: 1e3,
        K: 1e3,
        M: 1e6,
        G: 1e9,
        T: 1e12,
        P: 1e15,
    };
    return Number(m[1]) * mult[s];
}

/** Mooncake Kubernetes guide, "Capacity": the segment stays below the pod's memory limit. */
export const mooncakeSegmentFitsMemory = containerPolicy(
    {
        name: "mooncake-segment-fits-memory",
        description:
            "A Mooncake store pod contributing a host-RAM segment (MOONCAKE_GLOBAL_SEGMENT_SIZE > 0) must have a memory limit above the segment, or the kernel OOM-kills it once the pool fills (Mooncake Kubernetes deployment guide, 'Capacity'; registration of a segment larger than allowed fails with 'Cannot allocate memory', kvcache-ai/Mooncake#1382).",
        remediationSteps: "Set resources.limits.memory (and requests) to the segment size plus headroom (lib/mooncake.ts adds 16Gi).",
    },
    (c) => {
        const raw = envValue(c, "MOONCAKE_GLOBAL_SEGMENT_SIZE");
        if (raw === undefined) return [];
        const seg = mooncakeBytes(raw);
        if (!(seg > 0)) return [];
        const lim = c.limits.memory;
        if (lim === undefined)
            return [
                {
                    field: `${c.resourcesPath}.limits.memory`,
                    problem: `contributes a ${raw} segment without a memory limit`,
                    fix: "set a memory limit above the segment size",
                },
            ];
        const bytes = k8sBytes(lim);
        return bytes > seg
            ? []
            : [
                  {
                      field: `${c.resourcesPath}.limits.memory`,
                      problem: `memory limit ${lim} does not exceed the ${raw} Mooncake segment`,
                      fix: "raise the memory limit above the segment size plus headroom",
                  },
              ];
    },
    isMooncake,
);

/** Mooncake policies. */
export const mooncakePolicies: StackValidationPolicy[] = [mooncakeProtocolRdma, mooncakeDevicesRailHcas, mooncakeSegmentFitsMemory];
