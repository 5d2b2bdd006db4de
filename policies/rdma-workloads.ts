import { run } from "./lib/unknown";
import { ucxIbForcesGlobal } from "../upstream/libraries";
import { ipoibNetworkNad, MULTUS_NETWORKS_ANNOTATION, parseNetworkSelections } from "../upstream/network-attachment";
import type { StackValidationPolicy } from "@pulumi/policy";
import {
    ncclFlagSet,
    ncclMatches,
    parseGpuNicMapping,
    parseNcclIbHca,
    parseNicSelectionVars,
    parseUcxNetDevices,
    truthy,
    ucxTlsEffect,
} from "./lib/env";
import { efaPlugins, gpuDirect, railsOfResource, rdmaPlugin } from "./lib/fabric";
import { containerPolicy, type Finding, stackPolicy, containerLabel } from "./lib/report";
import { EKS_NVIDIA_AMI_TYPES, LABELS, type PoolView } from "./lib/resources";
import {
    argv,
    type ContainerView,
    engineOf,
    envField,
    envValue,
    flagValue,
    gpusOf,
    inScope,
    kvUse,
    poolsOf,
    rdmaDevices,
    type StackView,
} from "./lib/workloads";

/**
 * EFA-specific workload rules (LIBFABRIC backend, FI_PROVIDER, privileged, P/D anti-affinity, hugepages) live in
 * policies/efa.ts; this module covers every fabric plus InfiniBand specifics.
 *
 * The RDMA guard for KV-transfer workloads. NIXL over UCX, NIXL over libfabric, Mooncake and NCCL all
 * fall back to TCP without an error (~98 s TTFT instead of 200-500 ms in Dynamo's measurement), so every
 * prefill/decode/KV-pool container must prove RDMA was intended: device resources, transports, NIC pinning,
 * memlock, and a pool whose device plugin and GPUDirect RDMA the same stack deploys.
 */

/** Name of the preflight init container (lib/preflight.ts `PREFLIGHT_CONTAINER`; test keeps them in sync). */
export const PREFLIGHT_CONTAINER = "rdma-preflight";

const EFA = "vpc.amazonaws.com/efa";

/** True when the container requests AWS EFA devices. */
function usesEfa(c: ContainerView): boolean {
    return c.limits[EFA] !== undefined || c.requests[EFA] !== undefined;
}

/** NIXL backends a vLLM `--kv-transfer-config` names (nested MultiConnector children included). */
function vllmBackends(c: ContainerView): string[] {
    const raw = flagValue(c, "--kv-transfer-config");
    if (!raw) return [];
    const walk = (o: any): string[] => {
        if (!o || typeof o !== "object") return [];
        const own = Array.isArray(o.kv_connector_extra_config?.backends) ? o.kv_connector_extra_config.backends.map(String) : [];
        const kids = Array.isArray(o.kv_connector_extra_config?.connectors) ? o.kv_connector_extra_config.connectors.flatMap(walk) : [];
        return [...own, ...kids];
    };
    try {
        return walk(JSON.parse(raw));
    } catch {
        return [];
    }
}

/**
 * True when the container selects NIXL's LIBFABRIC backend (Dynamo efa-on-aws guide): vLLM
 * `kv_connector_extra_config.backends`, `SGLANG_DISAGGREGATION_NIXL_BACKEND`, `TRTLLM_NIXL_KVCACHE_BACKEND`,
 * KVBM `DYN_KVBM_NIXL_BACKEND_LIBFABRIC`.
 */
export function selectsLibfabric(c: ContainerView): boolean {
    if (vllmBackends(c).some((b) => b.toUpperCase() === "LIBFABRIC")) return true;
    if ((envValue(c, "SGLANG_DISAGGREGATION_NIXL_BACKEND") ?? "").toUpperCase() === "LIBFABRIC") return true;
    if ((envValue(c, "TRTLLM_NIXL_KVCACHE_BACKEND") ?? "").toUpperCase() === "LIBFABRIC") return true;
    return truthy(envValue(c, "DYN_KVBM_NIXL_BACKEND_LIBFABRIC"));
}

/** NIXL runs over UCX in this container (a NIXL user not on the LIBFABRIC backend). */
function usesUcx(c: ContainerView): boolean {
    return kvUse(c).nixl && !selectsLibfabric(c);
}

/** Pools a container is pinned to, or every pool of the stack when unpinned (for subset checks). */
function candidatePools(c: ContainerView, v: StackView): PoolView[] {
    const p = poolsOf(c, v.pools).pools;
    return p.length ? p : v.pools;
}

function railHcas(pool: PoolView): string[] {
    return pool.rails.map((r) => r.hca);
}

/** Describes the value of an env var for messages. */
function shown(c: ContainerView, name: string): string {
    const e = c.env.get(name);
    if (!e) return `${name} is unset`;
    if (e.value === undefined) return `${name} comes from a source the policy cannot read`;
    return `${name}=${e.value}`;
}

/** What the container sets for InfiniBand addressing, for messages (none of it forces global addressing). */
function ibAddressingShown(c: ContainerView): string {
    const set = ["UCX_IB_IS_GLOBAL", "UCX_IB_ADDR_TYPE"].filter((n) => c.env.has(n));
    if (!set.length) return "UCX_IB_IS_GLOBAL is unset";
    return set
        .map((n) => {
            const s = shown(c, n);
            return n === "UCX_IB_ADDR_TYPE" && envValue(c, n) !== undefined ? `${s} (forces global only as ib_global or ib_site_local)` : s;
        })
        .join(" and ");
}

/** Rails requested through per-rail plugin resources, per pool (undefined when the resource is not a plugin resource). */
function requestedRails(c: ContainerView, v: StackView, pool: PoolView): Set<number> | undefined {
    const plugin = rdmaPlugin(v.resources);
    if (!plugin?.config) return undefined;
    const rails = new Set<number>();
    let any = false;
    for (const res of Object.keys(c.limits)) {
        const pr = plugin.config.configList.find((x) => x.resource === res);
        if (!pr) continue;
        any = true;
        for (const r of railsOfResource(pr, pool)) rails.add(r.rail);
    }
    return any ? rails : undefined;
}

// ------------------------------------------------------------------ policies

/** RDMA devices in requests and limits, at least one per GPU. */
export const rdmaResourcePerGpu = containerPolicy(
    {
        name: "rdma-resource-per-gpu",
        description:
            "Every container that moves KV cache or collectives (NIXL, Mooncake, NCCL) must request RDMA devices (rdma/*, vpc.amazonaws.com/efa), at least one per GPU, in limits (Kubernetes defaults a missing request to the limit, pkg/apis/core/v1/defaults.go SetDefaults_Pod) and, if also given in requests, equal to the limit (non-overcommittable, pkg/apis/core/validation ValidateResourceRequirements): without a device UCX, libfabric, Mooncake and NCCL silently use TCP (ai-dynamo/dynamo #1209, #12463; NVIDIA/nccl#451).",
        remediationSteps:
            "Request the node pool's rail resources (rdma/rail_<i>: 1 for every rail) or vpc.amazonaws.com/efa in resources.requests and resources.limits with equal values.",
    },
    (c) => {
        const out: Finding[] = [];
        const gpus = gpusOf(c);
        const lim = rdmaDevices(c, "limits");
        const req = rdmaDevices(c, "requests");
        if (lim.total === 0 && req.total === 0) {
            return [
                {
                    field: c.resourcesPath,
                    problem: `requests no RDMA device (rdma/*, ${EFA}) for ${gpus} GPU(s), so NIXL/UCX, Mooncake and NCCL fall back to TCP without an error`,
                    fix: "request the pool's rail resources (rdma/rail_<i>: 1 each) in both requests and limits",
                },
            ];
        }
        const need = Math.max(1, gpus);
        if (lim.total < need)
            out.push({
                field: `${c.resourcesPath}.limits`,
                problem: `has ${lim.total} RDMA device(s) for ${gpus} GPU(s); each GPU needs its own`,
                fix: `request at least ${need} RDMA devices (every rail resource of the pool)`,
            });
        for (const name of new Set([...Object.keys(lim.byName), ...Object.keys(req.byName)])) {
            if (lim.byName[name] === undefined)
                out.push({
                    field: `${c.resourcesPath}.limits[${name}]`,
                    problem: `${name} is requested but not limited`,
                    fix: `set limits ${name}: ${req.byName[name]} (equal to the request)`,
                });
            else if (req.byName[name] !== lim.byName[name])
                out.push({
                    field: `${c.resourcesPath}.requests[${name}]`,
                    problem: `${name} request ${req.byName[name]} differs from limit ${lim.byName[name]}`,
                    fix: "make requests and limits equal",
                });
        }
        return out;
    },
);

/** The rail/GPU assignment problem: the NVIDIA device plugin picks the GPUs, so every rail must be in the pod. */
export const railsCoverEveryGpu = containerPolicy(
    {
        name: "rdma-rails-cover-every-gpu",
        description:
            "A GPU pod using per-rail RDMA resources must request every rail of its pool: which GPUs it gets is decided by the NVIDIA device plugin at admission, and a GPU whose rail is missing has no PCIe-affine NIC (cross-socket or host-staged transfers, ~0.76 GB/s instead of 15-25 GB/s; ai-dynamo/dynamo recipes/deepseek-v4 README).",
        remediationSteps:
            "Request rdma/rail_<i>: 1 for every rail i of the pool (shared resources cost no capacity) and let the per-rank NIC map pick each rank's NIC.",
    },
    (c, v) => {
        const gpus = gpusOf(c);
        if (gpus === 0) return [];
        const out: Finding[] = [];
        for (const pool of poolsOf(c, v.pools).pools) {
            const rails = requestedRails(c, v, pool);
            if (!rails || pool.rails.length === 0) continue;
            const missing = pool.rails.filter((r) => !rails.has(r.rail)).map((r) => r.rail);
            if (missing.length) {
                out.push({
                    field: `${c.resourcesPath}.limits`,
                    problem: `requests rail(s) ${[...rails].sort((a, b) => a - b).join(",") || "none"} of pool ${pool.name} for ${gpus} GPU(s), but the NVIDIA device plugin may assign any ${gpus} of the node's ${pool.rails.length} GPUs; rail(s) ${missing.join(",")} would leave a GPU without its PCIe-affine NIC`,
                    fix: `request every rail resource of pool ${pool.name} (one device per rail)`,
                });
            }
        }
        return out;
    },
);

/** UCX_TLS with RDMA + CUDA transports and without tcp. */
export const ucxTlsRdmaNoTcp = containerPolicy(
    {
        name: "ucx-tls-rdma-no-tcp",
        description:
            "A NIXL-over-UCX container must set UCX_TLS with an RDMA transport (rc/dc/ud/ib) and a CUDA transport (cuda_copy/cuda_ipc) and without tcp; NIXL never restricts UCX_TLS, so unset means every transport including tcp (ai-dynamo/nixl#1614, ai-dynamo/dynamo #12463, vllm-project/aibrix#1407, NVIDIA/TensorRT-LLM PR #18373).",
        remediationSteps:
            "Set UCX_TLS=rc_x,rc,cuda_copy,cuda_ipc (InfiniBand) on the container, and remove tcp from any ConfigMap/Secret it loads with envFrom.",
    },
    (c) => {
        if (!usesUcx(c) || usesEfa(c)) return [];
        const field = envField(c, "UCX_TLS");
        const e = c.env.get("UCX_TLS");
        const fix = "set UCX_TLS=rc_x,rc,cuda_copy,cuda_ipc";
        if (!e)
            return [{ field, problem: "UCX_TLS is unset, so UCX may use every transport including tcp (NIXL never restricts it)", fix }];
        if (e.value === undefined)
            return [
                {
                    field,
                    problem: "UCX_TLS comes from a source the policy cannot read, so the transport cannot be proven",
                    fix: `${fix} as a literal value`,
                },
            ];
        const eff = ucxTlsEffect(e.value);
        const out: Finding[] = [];
        if (eff.tcp)
            out.push({
                field,
                problem: `UCX_TLS=${e.value} lets UCX use tcp, so a missing RDMA device degrades to TCP instead of failing`,
                fix,
            });
        if (!eff.rdma)
            out.push({ field, problem: `UCX_TLS=${e.value} has no RDMA transport (rc, dc, ud, ib) for inter-node KV transfer`, fix });
        if (!eff.cuda)
            out.push({
                field,
                problem: `UCX_TLS=${e.value} has no CUDA transport (cuda_copy, cuda_ipc), so GPU buffers are treated as host memory`,
                fix,
            });
        return out;
    },
);

/** UCX_NET_DEVICES explicit, rail HCAs of the pool, never all, never a frontend NIC. */
export const ucxNetDevicesRailHcas = containerPolicy(
    {
        name: "ucx-net-devices-rail-hcas",
        description:
            "A NIXL-over-UCX container must pin UCX_NET_DEVICES (on SGLang: the NIXL backend's device_list, which NIXL sets over UCX_NET_DEVICES) to rail HCAs of its node pool (device:port), never `all`, an exclusion list, a bond, a netdev or a frontend NIC: unset/all binds management or DPU NICs (NIXL_ERR_BACKEND, ai-dynamo/dynamo PR #10852), returns garbage on multi-HCA nodes (ai-dynamo/dynamo #12463) or picks an unroutable interface (openucx/ucx#9383).",
        remediationSteps:
            "Set UCX_NET_DEVICES to the pool's rail HCAs from its rail table, e.g. mlx5_0:1,mlx5_3:1,... (generated by lib/nixl.ts), and request each rail's resource.",
    },
    (c, v) => {
        if (!usesUcx(c) || usesEfa(c)) return [];
        const field = envField(c, "UCX_NET_DEVICES");
        const e = c.env.get("UCX_NET_DEVICES");
        const pools = candidatePools(c, v);
        const fix = `set UCX_NET_DEVICES to rail HCAs of ${
            pools.length
                ? `pool ${pools.map((p) => p.name).join("/")} (${pools
                      .map((p) =>
                          railHcas(p)
                              .map((h) => `${h}:1`)
                              .join(","),
                      )
                      .join(" | ")})`
                : "the node pool"
        }`;
        // vLLM's per-rank NIC selection sets UCX_NET_DEVICES in each rank's process to the NIC mapped to that rank's GPU
        // (VLLM_NIC_SELECTION_VARS=UCX_NET_DEVICES:<port> with VLLM_GPU_NIC_PCIE_MAPPING; vllm-project/vllm PR #42083,
        // vllm/v1/executor/vllm_net_devices.py `set_worker_net_device`): the mapping is judged by nic-map-per-rank.
        const perRank =
            engineOf(c) === "vllm" &&
            !!envValue(c, "VLLM_GPU_NIC_PCIE_MAPPING") &&
            parseNicSelectionVars(envValue(c, "VLLM_NIC_SELECTION_VARS") ?? "").some((x) => x.name === "UCX_NET_DEVICES");
        if (!e && perRank) return [];
        // SGLang: NIXL sets UCX NET_DEVICES from the backend's device_list over the environment, so the list is judged
        // alone (a UCX_NET_DEVICES beside it is inert, refused by the KV closed world: upstream/kv-transport.ts).
        const list = nixlDeviceList(c);
        if (list) {
            const what = `NIXL device_list "${list.list}" (UCX NET_DEVICES ${list.effective}, over any UCX_NET_DEVICES)`;
            return checkNetDevices(c, v, list.effective, list.field, what, fix).map((f) =>
                f.problem.startsWith(what) ? f : { ...f, problem: `${what}: ${f.problem}` },
            );
        }
        if (!e)
            return [
                {
                    field,
                    problem: "UCX_NET_DEVICES is unset, so UCX may use any device, including frontend, management or bridge interfaces",
                    fix,
                },
            ];
        if (e.value === undefined) return [{ field, problem: "UCX_NET_DEVICES comes from a source the policy cannot read", fix }];
        return checkNetDevices(c, v, e.value, field, "UCX_NET_DEVICES", fix);
    },
);

/**
 * SGLang's NIXL UCX backend `device_list` (SGLANG_DISAGGREGATION_NIXL_BACKEND_PARAMS): NIXL splits it on `", "`,
 * appends `:1` to each name and sets UCX's NET_DEVICES with `config.modifyAlways`, over any UCX_NET_DEVICES of the
 * environment (ai-dynamo/nixl@v1.4.0:src/plugins/ucx/ucx_backend.cpp nixlUcxEngine, src/plugins/ucx/ucx_utils.cpp,
 * config.cpp). So the list NIXL hands UCX is what the rail rules judge.
 *
 * @returns the list, the NET_DEVICES value NIXL makes of it (`mlx5_0:1,...`) and its field; undefined when the container
 *   is not SGLang or sets no readable string `device_list`
 */
function nixlDeviceList(c: ContainerView): { list: string; effective: string; field: string } | undefined {
    const name = "SGLANG_DISAGGREGATION_NIXL_BACKEND_PARAMS";
    const raw = envValue(c, name);
    if (engineOf(c) !== "sglang" || raw === undefined) return undefined;
    let list: unknown;
    try {
        list = (JSON.parse(raw) as Record<string, unknown>)?.device_list;
    } catch {
        return undefined; // not JSON: the KV closed world refuses it
    }
    if (typeof list !== "string") return undefined;
    const effective = list
        .split(", ")
        .map((d) => `${d}:1`)
        .join(",");
    return { list, effective, field: `${envField(c, name)}.device_list` };
}

/** The devices of a UCX NET_DEVICES value against the pools' rail tables. */
function checkNetDevices(c: ContainerView, v: StackView, value: string, field: string, what: string, fix: string): Finding[] {
    const pools = candidatePools(c, v);
    const { list, devices } = parseUcxNetDevices(value);
    if (list.all || list.negate)
        return [
            {
                field,
                problem: `${what === "UCX_NET_DEVICES" ? `UCX_NET_DEVICES=${value}` : what} ${list.negate ? "is an exclusion list, so every other device (frontend NICs, tcp netdevs) stays allowed" : "allows every device"}`,
                fix,
            },
        ];
    const out: Finding[] = [];
    for (const d of devices) {
        for (const pool of pools) {
            if (pool.frontendHcas.includes(d.device)) {
                out.push({
                    field,
                    problem: `${d.raw} is a frontend (north-south) NIC of pool ${pool.name}; KV traffic never rides the frontend`,
                    fix,
                });
                continue;
            }
            const rail = pool.rails.find((r) => r.hca === d.device);
            if (!rail) {
                const what = /bond/i.test(d.device)
                    ? "a bond device (UCX cannot open it as an RDMA device, ai-dynamo/dynamo #1209)"
                    : `not a rail HCA of pool ${pool.name}`;
                out.push({ field, problem: `${d.raw} is ${what}`, fix });
                continue;
            }
            const rails = requestedRails(c, v, pool);
            if (rails && !rails.has(rail.rail))
                out.push({
                    field,
                    problem: `${d.raw} is rail ${rail.rail}, whose RDMA resource the container does not request, so the device is not in the pod`,
                    fix: "request every rail resource the device list names",
                });
        }
        if (d.port === undefined && pools.some((p) => p.rails.some((r) => r.hca === d.device)))
            out.push({ field, problem: `${d.raw} has no :port; UCX names RDMA devices <hca>:<port>`, fix: `write ${d.device}:1` });
    }
    return out;
}

/** TP > 1: per-rank NIC selection. */
export const nicMapPerRank = containerPolicy(
    {
        name: "nic-map-per-rank",
        description:
            "NIXL-over-UCX containers set VLLM_GPU_NIC_PCIE_MAPPING and VLLM_NIC_SELECTION_VARS together or not at all (one alone fails EngineCore init, vllm-project/vllm PR #42083); the map must match the pool's rail table; a worker with more than one GPU needs a per-rank NIC (the pair, or one UCX_NET_DEVICES entry per GPU): all ranks on one NIC measured ~0.76 GB/s vs 15-25 GB/s (ai-dynamo/dynamo recipes/deepseek-v4 README).",
        remediationSteps:
            "Set VLLM_GPU_NIC_PCIE_MAPPING to the pool's whole rail table (<gpu_bdf>=<nic_bdf>,...) and VLLM_NIC_SELECTION_VARS=UCX_NET_DEVICES:1, as lib/nixl.ts generates.",
    },
    (c, v) => {
        if (!usesUcx(c) || usesEfa(c)) return [];
        const out: Finding[] = [];
        const map = c.env.get("VLLM_GPU_NIC_PCIE_MAPPING");
        const vars = c.env.get("VLLM_NIC_SELECTION_VARS");
        const fix = "set VLLM_GPU_NIC_PCIE_MAPPING (whole rail table) and VLLM_NIC_SELECTION_VARS=UCX_NET_DEVICES:1 together";
        if (map && !vars)
            out.push({
                field: envField(c, "VLLM_NIC_SELECTION_VARS"),
                problem: "VLLM_GPU_NIC_PCIE_MAPPING is set without VLLM_NIC_SELECTION_VARS, which fails vLLM EngineCore init",
                fix,
            });
        if (vars && !map)
            out.push({
                field: envField(c, "VLLM_GPU_NIC_PCIE_MAPPING"),
                problem: "VLLM_NIC_SELECTION_VARS is set without VLLM_GPU_NIC_PCIE_MAPPING, which fails vLLM EngineCore init",
                fix,
            });
        if (vars?.value !== undefined && !parseNicSelectionVars(vars.value).some((x) => x.name === "UCX_NET_DEVICES")) {
            out.push({
                field: vars.field,
                problem: `VLLM_NIC_SELECTION_VARS=${vars.value} does not name UCX_NET_DEVICES, so ranks keep the shared device list`,
                fix: "set VLLM_NIC_SELECTION_VARS=UCX_NET_DEVICES:1",
            });
        }
        if (map?.value !== undefined) {
            const { pairs, malformed } = parseGpuNicMapping(map.value);
            for (const m of malformed) out.push({ field: map.field, problem: `entry "${m}" is not <gpu_bdf>=<nic_bdf>`, fix });
            for (const pool of poolsOf(c, v.pools).pools) {
                for (const p of pairs) {
                    const byGpu = pool.rails.find((r) => r.gpuPciAddress === p.gpu);
                    const byNic = pool.rails.find((r) => r.pciAddress === p.nic);
                    if (!byNic) out.push({ field: map.field, problem: `NIC ${p.nic} is not a rail NIC of pool ${pool.name}`, fix });
                    else if (byGpu && byGpu.pciAddress !== p.nic)
                        out.push({
                            field: map.field,
                            problem: `maps GPU ${p.gpu} to ${p.nic} (${byNic.hca}) but pool ${pool.name}'s rail table pairs it with ${byGpu.pciAddress} (${byGpu.hca})`,
                            fix,
                        });
                    else if (vars?.value !== undefined && parseNicSelectionVars(vars.value).some((x) => x.name === "UCX_NET_DEVICES")) {
                        // vLLM sets UCX_NET_DEVICES of the rank on that GPU to this NIC: its rail resource must be in the pod.
                        const rails = requestedRails(c, v, pool);
                        if (rails && !rails.has(byNic.rail))
                            out.push({
                                field: map.field,
                                problem: `maps GPU ${p.gpu} to ${byNic.hca} (rail ${byNic.rail}), whose RDMA resource the container does not request, so a rank placed on that GPU gets a NIC that is not in the pod`,
                                fix: "request every rail resource of the pool",
                            });
                    }
                }
                const missing = pool.rails.filter((r) => !pairs.some((p) => p.gpu === r.gpuPciAddress));
                if (missing.length)
                    out.push({
                        field: map.field,
                        problem: `does not cover GPU(s) ${missing.map((r) => r.gpuPciAddress).join(", ")} of pool ${pool.name}; a rank placed there gets no affine NIC`,
                        fix,
                    });
            }
        }
        const gpus = gpusOf(c);
        if (gpus > 1 && !map && !vars) {
            // SGLang's NIXL device_list replaces UCX_NET_DEVICES (nixlDeviceList): count its devices instead.
            const list = nixlDeviceList(c);
            const dev = list ? list.effective : envValue(c, "UCX_NET_DEVICES");
            const n = dev === undefined ? 0 : parseUcxNetDevices(dev).devices.length;
            if (n < gpus)
                out.push({
                    field: list ? list.field : envField(c, "UCX_NET_DEVICES"),
                    problem: `${gpus} GPUs (TP ranks) share ${n === 0 ? "no pinned" : n} NIC(s) (${list ? `device_list "${list.list}"` : shown(c, "UCX_NET_DEVICES")}); every rank needs its PCIe-affine NIC`,
                    fix,
                });
        }
        return out;
    },
);

/** ulimit in the entrypoint. */
function raisesMemlock(c: ContainerView): boolean {
    return /ulimit\s+(-[A-Za-z]*\s+)*-[A-Za-z]*l[A-Za-z]*\s+unlimited/.test(argv(c).join(" "));
}

function hasIpcLock(c: ContainerView): boolean {
    return c.security.privileged === true || c.security.capAdd.includes("IPC_LOCK") || c.security.capAdd.includes("ALL");
}

/** A working memlock path. */
export const rdmaMemlockPath = containerPolicy(
    {
        name: "rdma-memlock-path",
        description:
            "An RDMA container needs an unlimited memlock limit: either root (runAsUser 0) with IPC_LOCK and `ulimit -l unlimited` in its entrypoint, or a node pool that sets LimitMEMLOCK=infinity for containerd. Kubernetes has no rlimit field and IPC_LOCK is inert for non-root users, so ibv_reg_mr fails with ENOMEM and NCCL/UCX fall back (NVIDIA/nvidia-container-toolkit#2037, openucx/ucx#8229, kvcache-ai/Mooncake#281).",
        remediationSteps:
            "Run as root with capabilities.add [IPC_LOCK, SYS_RESOURCE] and an entrypoint `sh -c 'ulimit -l unlimited && exec ...'`, or pin the workload to a pool with memlockUnlimited: true (node bootstrap LimitMEMLOCK=infinity).",
    },
    (c, v) => {
        const pinned = poolsOf(c, v.pools).pools;
        if (pinned.length > 0 && pinned.every((p) => p.memlockUnlimited)) return [];
        const root = c.security.runAsUser === 0;
        const missing: string[] = [];
        if (!root)
            missing.push(
                c.security.runAsUser === undefined
                    ? "runs as the image's default user (Dynamo runtime images: UID 1000), not root"
                    : `runs as UID ${c.security.runAsUser}, not root`,
            );
        if (!hasIpcLock(c)) missing.push("does not add IPC_LOCK");
        if (!raisesMemlock(c)) missing.push("its entrypoint does not run ulimit -l unlimited");
        if (!missing.length) return [];
        const poolText = pinned.length
            ? `pool ${pinned
                  .filter((p) => !p.memlockUnlimited)
                  .map((p) => p.name)
                  .join(", ")} does not declare LimitMEMLOCK=infinity`
            : "it is not pinned to a pool that declares LimitMEMLOCK=infinity";
        return [
            {
                field: missing[0].startsWith("its entrypoint") ? `${c.path}.command` : c.security.field,
                problem: `has no working memlock path: it ${missing.join(", ")}, and ${poolText}`,
                fix: "run as root (runAsUser: 0) with IPC_LOCK and SYS_RESOURCE and start with ulimit -l unlimited, or use a pool with memlockUnlimited: true",
            },
        ];
    },
);

/** IPC_LOCK on RDMA pods. */
export const rdmaIpcLock = containerPolicy(
    {
        name: "rdma-ipc-lock",
        description:
            "Every RDMA container adds the IPC_LOCK capability (every upstream RDMA example does); without it a root process cannot pin memory beyond RLIMIT_MEMLOCK either.",
        remediationSteps: "Add IPC_LOCK to securityContext.capabilities.add (privileged: true also grants it).",
    },
    (c) =>
        hasIpcLock(c)
            ? []
            : [
                  {
                      field: `${c.security.field}.capabilities.add`,
                      problem: "does not add IPC_LOCK",
                      fix: "add IPC_LOCK to securityContext.capabilities.add",
                  },
              ],
);

/**
 * Fabric-specific addressing. InfiniBand: global (GRH) addressing forced for NIXL/UCX, proven from the pinned UCX's
 * source ({@link ucxIbForcesGlobal}, upstream/libraries.ts `ucx`): `UCX_IB_IS_GLOBAL` true, or the deprecated
 * `UCX_IB_ADDR_TYPE` ib_global / ib_site_local. `auto`, `ib_local` and `eth` force nothing on an InfiniBand port.
 */
export const rdmaFabricAddressing = containerPolicy(
    {
        name: "rdma-fabric-addressing",
        description:
            "RDMA addressing must be chosen explicitly for the pool's link layer: InfiniBand pools force global (GRH) addressing for NIXL/UCX with UCX_IB_IS_GLOBAL=y (openucx/ucx@v1.21.0:src/uct/ib/base/ib_iface.c; the deprecated UCX_IB_ADDR_TYPE counts only as ib_global or ib_site_local, since auto, ib_local and eth leave an InfiniBand port with a link-local subnet prefix LID-only); RoCE (Ethernet) pools set UCX_IB_GID_INDEX for UCX and MC_GID_INDEX for Mooncake, since automatic GID selection picks link-local or empty GIDs (ai-dynamo/dynamo #814, sgl-project/sglang PR #30737).",
        remediationSteps:
            "InfiniBand: UCX_IB_IS_GLOBAL=y (UCX_IB_ADDR_TYPE=eth does nothing on InfiniBand). RoCE: UCX_IB_GID_INDEX=<routable RoCEv2 index> and MC_GID_INDEX=<same>.",
    },
    (c, v) => {
        const out: Finding[] = [];
        const u = kvUse(c);
        for (const pool of poolsOf(c, v.pools).pools) {
            const layers = new Set(pool.rails.map((r) => r.linkLayer));
            if (
                layers.has("InfiniBand") &&
                usesUcx(c) &&
                !ucxIbForcesGlobal(envValue(c, "UCX_IB_IS_GLOBAL"), envValue(c, "UCX_IB_ADDR_TYPE"))
            ) {
                out.push({
                    field: envField(
                        c,
                        c.env.has("UCX_IB_IS_GLOBAL") || !c.env.has("UCX_IB_ADDR_TYPE") ? "UCX_IB_IS_GLOBAL" : "UCX_IB_ADDR_TYPE",
                    ),
                    problem: `${ibAddressingShown(c)} on InfiniBand pool ${pool.name}, so UCX does not force global (GRH) addressing: an InfiniBand port with a link-local subnet prefix is addressed by LID only`,
                    fix: "set UCX_IB_IS_GLOBAL=y",
                });
            }
            if (layers.has("Ethernet")) {
                if (usesUcx(c) && !c.env.has("UCX_IB_GID_INDEX"))
                    out.push({
                        field: envField(c, "UCX_IB_GID_INDEX"),
                        problem: `UCX_IB_GID_INDEX is unset on RoCE pool ${pool.name}, so UCX may pick a link-local GID and fail to create address handles`,
                        fix: "set UCX_IB_GID_INDEX to the routable RoCEv2 GID index",
                    });
                if (u.mooncake && !c.env.has("MC_GID_INDEX"))
                    out.push({
                        field: envField(c, "MC_GID_INDEX"),
                        problem: `MC_GID_INDEX is unset on RoCE pool ${pool.name}; Mooncake's automatic GID selection returns NULL on bonded RoCE NICs`,
                        fix: "set MC_GID_INDEX to the routable RoCEv2 GID index",
                    });
            }
        }
        return out;
    },
);

/** NCCL_NET values that pin NCCL to the network plugin of each fabric (aws-ofi-nccl accepts Libfabric, OFI, AWS Libfabric). */
const NCCL_NET_OK = { ib: ["ib"], efa: ["libfabric", "ofi", "aws libfabric"] };

function ncclApplies(c: ContainerView): boolean {
    return inScope(c) && (kvUse(c).nccl || gpusOf(c) > 1);
}

/** NCCL must not drop to sockets. */
export const ncclNoSocketFallback = containerPolicy(
    {
        name: "nccl-no-socket-fallback",
        description:
            "A container that runs NCCL on an RDMA pool (more than one GPU, or NCCL settings) must pin NCCL_NET to the fabric's plugin (IB, or Libfabric on EFA) and must not disable IB: without NCCL_NET, 'NET/IB : No device found' is an INFO line and NCCL runs on sockets (NVIDIA/nccl#451).",
        remediationSteps: "Set NCCL_NET=IB (InfiniBand) or NCCL_NET=Libfabric (EFA), and NCCL_IB_DISABLE=0 (or unset).",
    },
    (c) => {
        const out: Finding[] = [];
        const efa = usesEfa(c);
        const want = efa ? NCCL_NET_OK.efa : NCCL_NET_OK.ib;
        const net = c.env.get("NCCL_NET");
        const fix = `set NCCL_NET=${efa ? "Libfabric" : "IB"}`;
        if (!net)
            out.push({
                field: envField(c, "NCCL_NET"),
                problem: "NCCL_NET is unset, so NCCL silently falls back to the Socket transport when the RDMA plugin finds no device",
                fix,
            });
        else if (net.value === undefined)
            out.push({ field: net.field, problem: "NCCL_NET comes from a source the policy cannot read", fix });
        else if (!want.includes(net.value.trim().toLowerCase()))
            out.push({
                field: net.field,
                problem: `NCCL_NET=${net.value} does not pin NCCL to the ${efa ? "EFA (aws-ofi-nccl)" : "InfiniBand"} plugin`,
                fix,
            });
        if (ncclFlagSet(envValue(c, "NCCL_IB_DISABLE")))
            out.push({
                field: envField(c, "NCCL_IB_DISABLE"),
                problem: `NCCL_IB_DISABLE=${envValue(c, "NCCL_IB_DISABLE")} turns InfiniBand off, so NCCL uses sockets`,
                fix: "set NCCL_IB_DISABLE=0 or remove it",
            });
        return out;
    },
    ncclApplies,
);

/** NCCL_IB_HCA parsed as NCCL does. */
export const ncclIbHcaRailHcas = containerPolicy(
    {
        name: "nccl-ib-hca-rail-hcas",
        description:
            "A container running NCCL over InfiniBand must set NCCL_IB_HCA to rail HCAs of its pool: NCCL matches entries as prefixes unless the list starts with '=' (mlx5_1 also selects mlx5_10 and mlx5_11), '^' excludes instead of selects, and unset lets NCCL use frontend or storage HCAs.",
        remediationSteps: "Set NCCL_IB_HCA==<rail hca>:1,... with the leading '=' for exact matching, from the pool's rail table.",
    },
    (c, v) => {
        if (usesEfa(c)) return [];
        const pools = candidatePools(c, v);
        const e = c.env.get("NCCL_IB_HCA");
        const field = envField(c, "NCCL_IB_HCA");
        const fix = `set NCCL_IB_HCA==${
            pools[0]
                ? railHcas(pools[0])
                      .map((h) => `${h}:1`)
                      .join(",")
                : "<rail hcas>"
        }`;
        if (!e) return [{ field, problem: "NCCL_IB_HCA is unset, so NCCL may use frontend or storage HCAs", fix }];
        if (e.value === undefined) return [{ field, problem: "NCCL_IB_HCA comes from a source the policy cannot read", fix }];
        const list = parseNcclIbHca(e.value);
        if (list.exclude)
            return [
                {
                    field,
                    problem: `NCCL_IB_HCA=${e.value} is an exclusion list, so every other HCA (frontend, storage) stays selectable`,
                    fix,
                },
            ];
        const out: Finding[] = [];
        for (const pool of pools) {
            const nodeHcas = [...railHcas(pool), ...pool.frontendHcas];
            for (const entry of list.entries) {
                if (entry.port !== undefined && !(Number.isInteger(entry.port) && entry.port >= 1)) {
                    // NCCL compares the entry's port number with each HCA port's (1-based), so this entry selects nothing
                    out.push({ field, problem: `entry ${entry.raw} names no HCA port (ports are numbered from 1)`, fix });
                    continue;
                }
                const hits = ncclMatches(list, entry, nodeHcas);
                const front = hits.filter((h) => pool.frontendHcas.includes(h));
                if (front.length)
                    out.push({
                        field,
                        problem: `entry ${entry.raw} selects frontend NIC(s) ${front.join(", ")} of pool ${pool.name}`,
                        fix,
                    });
                else if (hits.length === 0)
                    out.push({ field, problem: `entry ${entry.raw} matches no rail HCA of pool ${pool.name}`, fix });
                else if (!list.exact && hits.length > 1)
                    out.push({
                        field,
                        problem: `entry ${entry.raw} is a prefix match and selects ${hits.join(", ")} (NCCL matches prefixes without a leading '=')`,
                        fix,
                    });
            }
        }
        return out;
    },
    ncclApplies,
);

/** No hostPath /dev/infiniband. */
export const noHostPathInfiniband = stackPolicy(
    {
        name: "no-hostpath-infiniband",
        description:
            "RDMA workloads must not mount /dev/infiniband (or /dev) from the host: it bypasses per-rail device allocation, exposes every HCA (on EFA it breaks the provider: aws-samples/aws-do-eks PR #63), and hides a missing device-plugin resource.",
        remediationSteps: "Remove the hostPath volume and request the pool's RDMA resources instead.",
    },
    (v) => {
        const out: Array<{ subject: string; finding: Finding; urn?: string }> = [];
        const seen = new Set<string>();
        for (const c of v.containers) {
            if (!inScope(c)) continue;
            const key = `${c.resource.urn}#${c.pod.path}`;
            if (seen.has(key)) continue;
            seen.add(key);
            for (const vol of c.pod.volumes) {
                const p = (vol.hostPath ?? "").replace(/\/+$/, "");
                if (p === "/dev" || p === "/dev/infiniband" || p.startsWith("/dev/infiniband/")) {
                    out.push({
                        subject: containerLabel(c),
                        finding: {
                            field: `${c.pod.path}.volumes[${vol.name}].hostPath`,
                            problem: `mounts ${vol.hostPath} from the host`,
                            fix: "remove the hostPath volume and request the pool's RDMA resources",
                        },
                        urn: c.resource.urn,
                    });
                }
            }
        }
        return out;
    },
);

/** nixl PR #833: LIBFABRIC needs EFA devices. */
export const libfabricRequiresEfa = containerPolicy(
    {
        name: "libfabric-requires-efa",
        description:
            "A container that selects NIXL's LIBFABRIC backend must request vpc.amazonaws.com/efa (a limit, or equal request and limit): without EFA devices NIXL's libfabric backend picks the sockets (TCP) provider and logs it at INFO (ai-dynamo/nixl PR #833; upstream disagg-tcp.yaml is exactly this).",
        remediationSteps: "Request vpc.amazonaws.com/efa (devices per GPU x GPUs) in requests and limits, on an EFA node group.",
    },
    (c) => {
        if (!selectsLibfabric(c)) return [];
        const lim = Number(c.limits[EFA] ?? 0);
        const req = Number(c.requests[EFA] ?? 0);
        return lim > 0 && req > 0
            ? []
            : [
                  {
                      field: `${c.resourcesPath}.${lim > 0 ? "requests" : "limits"}[${EFA}]`,
                      problem: `selects NIXL's LIBFABRIC backend but requests ${lim > 0 ? "no EFA in requests" : "no EFA device"}, so libfabric falls back to the sockets provider`,
                      fix: `request ${EFA} in requests and limits`,
                  },
              ];
    },
);

/** Stack rule: the pool the workload lands on has its device plugin and GPUDirect RDMA deployed by this stack. */
export const rdmaWorkloadOnRdmaPool = containerPolicy(
    {
        name: "rdma-workload-on-rdma-pool",
        description: `An RDMA workload must be pinned (nodeSelector or required node affinity on ${LABELS.pool}) to a node pool of the same stack whose RDMA device plugin publishes every RDMA resource it requests on that pool's NICs, and, for GPU workloads, whose GPU Operator enables GPUDirect RDMA (DMA-BUF or nvidia-peermem). Otherwise pods stay Pending, or run with host staging (NVIDIA/nccl#1676: all-reduce 180 -> 10 GB/s with only an INFO line).`,
        remediationSteps: `Add nodeSelector ${LABELS.pool}: <pool>, and deploy BackendFabric (NicClusterPolicy) or the EFA device plugin and GpuOperator with GPUDirect RDMA in the same stack.`,
    },
    (c, v) => {
        const { pools, named } = poolsOf(c, v.pools);
        const fieldSel = `${c.pod.path}.nodeSelector[${LABELS.pool}]`;
        if (named.length === 0)
            return [
                {
                    field: fieldSel,
                    problem: "is not pinned to a node pool, so it may land on nodes without RDMA devices or GPUDirect",
                    fix: `set nodeSelector ${LABELS.pool} to one of ${v.pools.map((p) => p.name).join(", ") || "the stack's pools"}`,
                },
            ];
        const out: Finding[] = [];
        for (const n of named)
            if (!pools.some((p) => p.name === n))
                out.push({
                    field: fieldSel,
                    problem: `pool ${n} is not a node pool of this stack`,
                    fix: `use one of ${v.pools.map((p) => p.name).join(", ") || "(none defined)"}`,
                });
        const plugin = rdmaPlugin(v.resources);
        for (const pool of pools) {
            if (pool.fabric === "efa") {
                if (efaPlugins(v.resources).length === 0)
                    out.push({
                        field: `${c.resourcesPath}.limits[${EFA}]`,
                        problem: `pool ${pool.name} is EFA but the stack deploys no aws-efa-k8s-device-plugin, so ${EFA} is never advertised`,
                        fix: "deploy the EFA device plugin chart in the same stack",
                    });
            } else {
                for (const res of Object.keys(c.limits).filter((r) => r.startsWith("rdma/"))) {
                    const pr = plugin?.config?.configList.find((x) => x.resource === res);
                    if (!plugin)
                        out.push({
                            field: `${c.resourcesPath}.limits[${res}]`,
                            problem: `${res} is requested but the stack deploys no NicClusterPolicy (RDMA shared device plugin)`,
                            fix: "deploy BackendFabric in the same stack",
                        });
                    else if (!pr)
                        out.push({
                            field: `${c.resourcesPath}.limits[${res}]`,
                            problem: `${res} is not published by NicClusterPolicy ${plugin.name}`,
                            fix: `request resources the plugin publishes (${plugin.config?.configList.map((x) => x.resource).join(", ") ?? "none"})`,
                        });
                    else if (railsOfResource(pr, pool).length === 0)
                        out.push({
                            field: `${c.resourcesPath}.limits[${res}]`,
                            problem: `${res} selects no NIC of pool ${pool.name} (ifNames ${pr.ifNames.join(", ")})`,
                            fix: `select pool ${pool.name}'s rail netdevs in the plugin config`,
                        });
                }
            }
            // GPUDirect: the GPU Operator's driver (open modules for DMA-BUF, or nvidia-peermem); on an EKS node group also
            // the accelerated NVIDIA AMI, which ships the driver and EFA's GPUDirect module while the operator's driver is off.
            if (gpusOf(c) > 0 && !gpuDirect(v.resources).enabled && !pool.gpuDirectFromAmi) {
                out.push(
                    pool.fabric === "efa"
                        ? {
                              field: `${c.resourcesPath}.limits[nvidia.com/gpu]`,
                              problem: `EFA pool ${pool.name} runs no EKS accelerated NVIDIA AMI and the stack deploys no GPU Operator driver with GPUDirect RDMA, so KV moves through host memory`,
                              fix: `use amiType ${EKS_NVIDIA_AMI_TYPES[0]} for the node group (components/spoke/EfaNodeGroup.ts), or a GpuOperator driver with DMA-BUF`,
                          }
                        : {
                              field: `${c.resourcesPath}.limits[nvidia.com/gpu]`,
                              problem: `the stack deploys no GPU Operator with GPUDirect RDMA for pool ${pool.name}, so KV moves through host memory`,
                              fix: "deploy GpuOperator with gpuDirectRdma dmabuf (driver.kernelModuleType=open) or peermem (driver.rdma.enabled=true)",
                          },
                );
            }
        }
        return out;
    },
);

/** The preflight proves RDMA is there at pod start. */
export const rdmaPreflightInit = containerPolicy(
    {
        name: "rdma-preflight-init-container",
        description:
            "Every RDMA workload pod runs the RDMA preflight (services/preflight/preflight.sh) as an init container named rdma-preflight with the workload's RDMA resources, so a pod without devices, ACTIVE ports, memlock or UCX RDMA transports fails at start instead of serving over TCP.",
        remediationSteps:
            "Add the rdma-preflight init container (lib/preflight.ts preflightInitContainer) with the same RDMA and GPU resources and security context as the workload.",
    },
    (c) => {
        const pf = c.pod.initContainers.find((i) => i.container === PREFLIGHT_CONTAINER);
        const field = `${c.pod.path}.initContainers`;
        if (!pf)
            return [
                {
                    field,
                    problem: `pod has no ${PREFLIGHT_CONTAINER} init container, so nothing proves at start that RDMA is usable`,
                    fix: `add the ${PREFLIGHT_CONTAINER} init container running services/preflight/preflight.sh`,
                },
            ];
        const out: Finding[] = [];
        if (!/preflight\.sh/.test(argv(pf).join(" ")))
            out.push({
                field: `${pf.path}.command`,
                problem: `${PREFLIGHT_CONTAINER} does not run preflight.sh`,
                fix: "run sh /opt/platform/preflight/preflight.sh",
            });
        const need = rdmaDevices(c, "limits").byName;
        const have = rdmaDevices(pf, "limits").byName;
        const short = Object.keys(need).filter((k) => (have[k] ?? 0) < need[k]);
        if (short.length)
            out.push({
                field: `${pf.path}.resources.limits`,
                problem: `${PREFLIGHT_CONTAINER} lacks ${short.join(", ")}, so it cannot see the devices the workload will use`,
                fix: "give the init container the workload's RDMA resources",
            });
        return out;
    },
    (c) => inScope(c) && rdmaDevices(c, "limits").total > 0 && c.container === c.pod.containers.find(inScope)?.container,
);

/** A secondary network the stack renders on a netdev: the NetworkAttachmentDefinition the operator makes of it. */
interface RailNetwork {
    kind: string;
    /** NAD name = the CR's name (Mellanox/network-operator@v26.1.2 manifests/state-*-network). */
    name: string;
    /** NAD namespace = `spec.networkNamespace`, `default` when empty ({@link ipoibNetworkNad}). */
    namespace: string;
    master: string;
}

/** IPoIBNetworks and MacvlanNetworks of the stack with a `spec.master`. */
function railNetworksOf(v: StackView): RailNetwork[] {
    const out: RailNetwork[] = [];
    for (const r of v.resources)
        run(() => {
            const p = r.props ?? {};
            if ((p.kind === "IPoIBNetwork" || p.kind === "MacvlanNetwork") && p.spec?.master)
                out.push({
                    kind: String(p.kind),
                    name: String(p.metadata?.name ?? r.name),
                    namespace: p.spec.networkNamespace ? String(p.spec.networkNamespace) : ipoibNetworkNad.defaultNamespace,
                    master: String(p.spec.master),
                });
        });
    return out;
}

/** RDMA CM / RoCE need a rail network per requested rail, attached through the pod's Multus annotation. */
export const rdmaCmRailNetworks = containerPolicy(
    {
        name: "rdma-cm-rail-networks",
        description:
            "A workload that uses RDMA CM (UCX rdmacm) or runs on a RoCE pool needs an IP on each rail it uses: its k8s.v1.cni.cncf.io/networks annotation must name, in the namespace the operator puts it (spec.networkNamespace), a secondary network (IPoIBNetwork / MacvlanNetwork) on each requested rail's netdev, with the same rail index. Multus attaches a NetworkAttachmentDefinition only to a pod whose annotation names it (k8snetworkplumbingwg/multus-cni pkg/k8sclient GetPodNetwork). Plain verbs on InfiniBand (NIXL over UCX rc, Mooncake, NCCL) work from the pod network; rdma_cm without a rail IP fails (network-operator#953, k8s-rdma-shared-dev-plugin#108).",
        remediationSteps:
            "Set platform:backend.railNetworks: true in the spoke's stack file (BackendFabric then renders one IPoIBNetwork <pool>-rail-<i> per rail in the inference namespace) and list the requested rails' networks in the pod annotation k8s.v1.cni.cncf.io/networks as inference/<pool>-rail-<i>, in rail order.",
    },
    (c, v) => {
        const tls = `${envValue(c, "UCX_TLS") ?? ""},${envValue(c, "UCX_SOCKADDR_TLS_PRIORITY") ?? ""}`;
        const out: Finding[] = [];
        const field = `${c.pod.path.replace(/\.spec$/, "")}.metadata.annotations[${MULTUS_NETWORKS_ANNOTATION}]`;
        for (const pool of poolsOf(c, v.pools).pools) {
            const roce = pool.rails.some((r) => r.linkLayer === "Ethernet");
            if (!/rdmacm/i.test(tls) && !roce) continue;
            const rails = requestedRails(c, v, pool) ?? new Set<number>();
            if (rails.size === 0) continue;
            const nets = parseNetworkSelections(c.pod.annotations[MULTUS_NETWORKS_ANNOTATION], c.namespace);
            if (nets === undefined) {
                out.push({
                    field,
                    problem: `Multus cannot parse the annotation ${JSON.stringify(c.pod.annotations[MULTUS_NETWORKS_ANNOTATION])}, so no rail network is attached`,
                    fix: "write it as a comma-separated list of <namespace>/<name> or a JSON list of {name, namespace}",
                });
                continue;
            }
            const stackNets = railNetworksOf(v);
            for (const rail of pool.rails.filter((x) => rails.has(x.rail))) {
                const onRail = stackNets.filter((n) => n.master === rail.netdev);
                if (nets.some((s) => onRail.some((n) => n.name === s.name && n.namespace === s.namespace))) continue;
                const what = `uses ${roce ? "RoCE" : "RDMA CM"} on rail ${rail.rail} (${rail.hca})`;
                const expected = `${pool.name}-rail-${rail.rail}`;
                if (onRail.length === 0) {
                    out.push({
                        field,
                        problem: `${what} but the stack renders no network on its netdev ${rail.netdev}`,
                        fix: `set platform:backend.railNetworks: true and attach ${c.namespace}/${expected}`,
                    });
                    continue;
                }
                const misplaced = nets.find((s) => onRail.some((n) => n.name === s.name));
                const target = onRail.find((n) => n.name === misplaced?.name) ?? onRail[0];
                out.push({
                    field,
                    problem: misplaced
                        ? `${what}: the annotation names ${misplaced.namespace}/${misplaced.name}, but the operator creates that NetworkAttachmentDefinition in ${target.namespace}, so Multus attaches nothing on ${rail.netdev}`
                        : `${what} but attaches no network on its netdev ${rail.netdev}`,
                    fix: `attach network ${target.namespace}/${target.name}`,
                });
            }
        }
        return out;
    },
);

/** The RDMA workload policies. */
export const rdmaWorkloadPolicies: StackValidationPolicy[] = [
    rdmaResourcePerGpu,
    railsCoverEveryGpu,
    ucxTlsRdmaNoTcp,
    ucxNetDevicesRailHcas,
    nicMapPerRank,
    rdmaMemlockPath,
    rdmaIpcLock,
    rdmaFabricAddressing,
    ncclNoSocketFallback,
    ncclIbHcaRailHcas,
    noHostPathInfiniband,
    libfabricRequiresEfa,
    rdmaWorkloadOnRdmaPool,
    rdmaPreflightInit,
    rdmaCmRailNetworks,
];
