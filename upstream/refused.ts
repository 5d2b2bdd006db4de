import type { Source } from "./types";
import { hostOf, unroutable } from "./address";
import { dynamoFrontendKvOnlyFlags } from "./dynamo";

/**
 * Combinations upstream refuses at start-up, or accepts and then silently degrades on. Data plus a small predicate
 * over one container's parsed view, so `npm run upstream-check` (tools/upstream-check.ts), tests and policies can all
 * use them. No imports beyond the fact types, the address judgement (./address.ts) and the facts they apply (./dynamo.ts).
 */

/** What a predicate sees of one container. */
export interface ContainerView {
    /** Entry point id (upstream EntrypointFacts.id), e.g. `dynamo.vllm`. */
    readonly entrypoint?: string;
    /** Flags as given: `--x v` / `--x=v` -> "v"; a switch -> true. Last occurrence wins. */
    readonly flags: Readonly<Record<string, string | true>>;
    /** Literal env values; a `valueFrom` entry reads as `{ from: <fieldPath or source> }`. */
    readonly env: Readonly<Record<string, string | { from: string }>>;
    /** Files the container reads by path (e.g. the MOONCAKE_CONFIG_PATH JSON resolved from its ConfigMap mount). */
    readonly files: Readonly<Record<string, string>>;
}

export interface RefusedCombination {
    readonly id: string;
    /** Component that refuses (or silently degrades). */
    readonly component: string;
    /** `startup`: the process exits; `silent`: it runs degraded (fallback, wrong address, recompute). */
    readonly effect: "startup" | "silent";
    readonly description: string;
    readonly source: Source;
    /** Returns the key at fault and why, or undefined when the container is fine. */
    readonly check: (c: ContainerView) => { key: string; message: string } | undefined;
}

const has = (c: ContainerView, f: string) => c.flags[f] !== undefined;
const envStr = (c: ContainerView, n: string) => {
    const v = c.env[n];
    return typeof v === "string" ? v : undefined;
};
function json(s: string | true | undefined): any {
    if (typeof s !== "string") return undefined;
    try {
        return JSON.parse(s);
    } catch {
        return undefined;
    }
}
/** The vLLM KV connectors named by `--kv-transfer-config`, outermost first. */
function vllmConnectors(c: ContainerView): { top?: string; all: string[]; cfg?: any } {
    const cfg = json(c.flags["--kv-transfer-config"]);
    if (!cfg) return { all: [] };
    const inner = (cfg.kv_connector_extra_config?.connectors ?? []).map((x: any) => x?.kv_connector).filter(Boolean);
    return { top: cfg.kv_connector, all: [cfg.kv_connector, ...inner].filter(Boolean), cfg };
}

export const refusedCombinations: readonly RefusedCombination[] = [
    {
        id: "vllm-mooncake-store-mode-segment",
        component: "vllm",
        effect: "startup",
        description:
            "MooncakeStoreConnector: mode defaults to embedded, which refuses global_segment_size 0; standalone-store requires exactly 0",
        source: "vllm-project/vllm@v0.28.0:vllm/distributed/kv_transfer/kv_connector/v1/mooncake/store/worker.py#MooncakeStoreConfig.__post_init__",
        check(c) {
            if (c.entrypoint !== "dynamo.vllm" || !vllmConnectors(c).all.includes("MooncakeStoreConnector")) return undefined;
            const path = envStr(c, "MOONCAKE_CONFIG_PATH");
            if (!path)
                return { key: "env.MOONCAKE_CONFIG_PATH", message: "MooncakeStoreConnector needs MOONCAKE_CONFIG_PATH (its config file)" };
            const file = c.files[path];
            if (file === undefined)
                return {
                    key: "env.MOONCAKE_CONFIG_PATH",
                    message: `config file ${path} is not mounted from a ConfigMap the check can read`,
                };
            const cfg = json(file) ?? {};
            const mode = cfg.mode ?? "embedded";
            const seg = cfg.global_segment_size === undefined ? undefined : Number(String(cfg.global_segment_size).replace(/[a-z]+$/i, ""));
            if (mode !== "embedded" && mode !== "standalone-store")
                return { key: `${path}:mode`, message: `unknown Mooncake mode ${JSON.stringify(mode)}` };
            if (mode === "embedded" && seg === 0)
                return {
                    key: `${path}:global_segment_size`,
                    message:
                        "embedded mode (the default) requires global_segment_size > 0; set mode standalone-store for a separate store pool",
                };
            if (mode === "standalone-store" && seg !== 0)
                return { key: `${path}:global_segment_size`, message: "standalone-store mode requires global_segment_size == 0" };
            return undefined;
        },
    },
    {
        id: "vllm-kv-connector-without-role",
        component: "vllm",
        effect: "startup",
        description: "KVTransferConfig: kv_connector without kv_role, or an unknown kv_role / kv_load_failure_policy",
        source: "vllm-project/vllm@v0.28.0:vllm/config/kv_transfer.py#KVTransferConfig.__post_init__",
        check(c) {
            const { cfg } = vllmConnectors(c);
            if (!cfg) return undefined;
            if (cfg.kv_connector && !cfg.kv_role)
                return { key: "--kv-transfer-config.kv_role", message: "kv_connector is set without kv_role" };
            if (cfg.kv_role && !["kv_producer", "kv_consumer", "kv_both"].includes(cfg.kv_role))
                return { key: "--kv-transfer-config.kv_role", message: `unsupported kv_role ${cfg.kv_role}` };
            if (cfg.kv_load_failure_policy !== undefined && !["recompute", "fail"].includes(cfg.kv_load_failure_policy))
                return {
                    key: "--kv-transfer-config.kv_load_failure_policy",
                    message: `must be recompute or fail, got ${cfg.kv_load_failure_policy}`,
                };
            return undefined;
        },
    },
    {
        id: "vllm-nixl-side-channel-localhost",
        component: "dynamo-vllm",
        effect: "silent",
        description:
            "NixlConnector inside MultiConnector: Dynamo does not set VLLM_NIXL_SIDE_CHANNEL_HOST, so the prefill advertises vLLM's default localhost to decode; a literal loopback or wildcard does the same",
        source: "ai-dynamo/dynamo@2a6da14c83617f5412caba5777dbf0e2399e9c5f:components/src/dynamo/vllm/args.py",
        check(c) {
            const { top, all } = vllmConnectors(c);
            if (c.entrypoint !== "dynamo.vllm" || !all.includes("NixlConnector")) return undefined;
            const v = c.env.VLLM_NIXL_SIDE_CHANNEL_HOST;
            if (typeof v === "string" && unroutable(hostOf(v)))
                return { key: "env.VLLM_NIXL_SIDE_CHANNEL_HOST", message: `${v} is not routable from the decode pod` };
            if (v === undefined && top !== "NixlConnector" && top !== "PdConnector")
                return {
                    key: "env.VLLM_NIXL_SIDE_CHANNEL_HOST",
                    message: `unset with top-level ${top}: vLLM advertises localhost; set it from status.podIP`,
                };
            return undefined;
        },
    },
    {
        id: "sglang-host-ip-not-routable",
        component: "sglang",
        effect: "silent",
        description:
            "An SGLang P/D worker advertises SGLANG_HOST_IP; unset it is guessed and falls back to 0.0.0.0, a loopback or wildcard value is unreachable from the peer",
        source: "sgl-project/sglang@v0.5.18:python/sglang/srt/utils/common.py#get_local_ip_auto",
        check(c) {
            const mode = c.flags["--disaggregation-mode"];
            if (c.entrypoint !== "dynamo.sglang" || (mode !== "prefill" && mode !== "decode")) return undefined;
            const v = c.env.SGLANG_HOST_IP;
            if (v === undefined)
                return {
                    key: "env.SGLANG_HOST_IP",
                    message: "unset: the advertised address is guessed (fallback 0.0.0.0); set it from status.podIP",
                };
            if (typeof v === "string" && unroutable(hostOf(v)))
                return { key: "env.SGLANG_HOST_IP", message: `${v} is not routable from the peer` };
            return undefined;
        },
    },
    {
        id: "vllm-nic-map-pair",
        component: "vllm",
        effect: "startup",
        description: "VLLM_GPU_NIC_PCIE_MAPPING and VLLM_NIC_SELECTION_VARS must be set together",
        source: "vllm-project/vllm@v0.28.0:vllm/v1/executor/vllm_net_devices.py#set_worker_net_device",
        check(c) {
            const a = c.env.VLLM_GPU_NIC_PCIE_MAPPING !== undefined,
                b = c.env.VLLM_NIC_SELECTION_VARS !== undefined;
            if (a && !b)
                return {
                    key: "env.VLLM_NIC_SELECTION_VARS",
                    message: "VLLM_GPU_NIC_PCIE_MAPPING is set without it; EngineCore init raises",
                };
            if (b && !a)
                return {
                    key: "env.VLLM_GPU_NIC_PCIE_MAPPING",
                    message: "VLLM_NIC_SELECTION_VARS is set without it; EngineCore init raises",
                };
            return undefined;
        },
    },
    {
        id: "vllm-nic-map-static-list",
        component: "vllm",
        effect: "silent",
        description:
            "A static UCX_NET_DEVICES with several HCAs beside the per-rank map: each rank's HCA is prepended to the set, so ranks still share every rail",
        source: "vllm-project/vllm@v0.28.0:vllm/v1/executor/vllm_net_devices.py#set_worker_gpu_nic_mapping",
        check(c) {
            const sel = envStr(c, "VLLM_NIC_SELECTION_VARS"),
                dev = envStr(c, "UCX_NET_DEVICES");
            if (!sel || !dev || !/(^|,)UCX_NET_DEVICES(:|,|$)/.test(sel)) return undefined;
            if (dev.split(",").filter((x) => x.trim()).length > 1)
                return {
                    key: "env.UCX_NET_DEVICES",
                    message: `static list ${dev} defeats the per-rank NIC map (UCX reads the list as a set); leave it unset`,
                };
            return undefined;
        },
    },
    {
        id: "sglang-decode-hicache-without-radix",
        component: "sglang",
        effect: "startup",
        description:
            "P/D decode forces the radix cache off; HiCache with the radix cache off is refused unless --disaggregation-decode-enable-radix-cache",
        source: "sgl-project/sglang@v0.5.18:python/sglang/srt/server_args.py#ServerArgs._handle_pd_disaggregation",
        check(c) {
            if (c.entrypoint !== "dynamo.sglang" || c.flags["--disaggregation-mode"] !== "decode" || !has(c, "--enable-hierarchical-cache"))
                return undefined;
            if (!has(c, "--disaggregation-decode-enable-radix-cache"))
                return {
                    key: "--enable-hierarchical-cache",
                    message: "decode worker with HiCache needs --disaggregation-decode-enable-radix-cache",
                };
            return undefined;
        },
    },
    {
        id: "sglang-decode-radix-cache-backend",
        component: "sglang",
        effect: "startup",
        description: "--disaggregation-decode-enable-radix-cache is refused with the fake transfer backend and with --enable-hisparse",
        source: "sgl-project/sglang@v0.5.18:python/sglang/srt/server_args.py#ServerArgs._handle_pd_disaggregation",
        check(c) {
            if (!has(c, "--disaggregation-decode-enable-radix-cache")) return undefined;
            if (c.flags["--disaggregation-transfer-backend"] === "fake")
                return {
                    key: "--disaggregation-transfer-backend",
                    message: "fake backend is incompatible with --disaggregation-decode-enable-radix-cache",
                };
            if (has(c, "--enable-hisparse"))
                return { key: "--enable-hisparse", message: "incompatible with --disaggregation-decode-enable-radix-cache" };
            return undefined;
        },
    },
    {
        id: "dynamo-frontend-kv-only-flags",
        component: "dynamo-frontend",
        effect: "startup",
        description: `${Object.keys(dynamoFrontendKvOnlyFlags).join(", ")} need --router-mode kv (upstream/dynamo.ts dynamoFrontendKvOnlyFlags: the start fails or the flag is inert)`,
        source: "ai-dynamo/dynamo@2a6da14c83617f5412caba5777dbf0e2399e9c5f:components/src/dynamo/frontend/frontend_args.py",
        check(c) {
            if (c.entrypoint !== "dynamo.frontend") return undefined;
            const mode = c.flags["--router-mode"] ?? envStr(c, "DYN_ROUTER_MODE") ?? "round-robin";
            if (mode === "kv") return undefined;
            for (const [f, fact] of Object.entries(dynamoFrontendKvOnlyFlags)) {
                const v = c.flags[f];
                if (v !== undefined && v !== fact.unless)
                    return { key: f, message: `needs --router-mode kv (is ${mode}): ${fact.needs} [${fact.source}]` };
            }
            return undefined;
        },
    },
    {
        id: "mooncake-affinity-conflict",
        component: "mooncake-client",
        effect: "silent",
        description:
            "MC_ENABLE_HCA_PEER_AFFINITY and MC_ENABLE_DEST_DEVICE_AFFINITY together: both are turned off and the default peer device selection is used",
        source: "kvcache-ai/Mooncake@v0.3.12.post1:mooncake-transfer-engine/src/config.cpp",
        check(c) {
            if (
                c.env.MC_ENABLE_DEST_DEVICE_AFFINITY !== undefined &&
                c.env.MC_ENABLE_HCA_PEER_AFFINITY !== undefined &&
                envStr(c, "MC_ENABLE_HCA_PEER_AFFINITY") !== "0"
            ) {
                return {
                    key: "env.MC_ENABLE_HCA_PEER_AFFINITY",
                    message: "cannot be combined with MC_ENABLE_DEST_DEVICE_AFFINITY; both fall back off",
                };
            }
            return undefined;
        },
    },
    {
        id: "mooncake-protocol-tcp",
        component: "mooncake-client",
        effect: "silent",
        description: "MOONCAKE_PROTOCOL defaults to tcp: a Mooncake client without rdma runs the pool over TCP",
        source: "kvcache-ai/Mooncake@v0.3.12.post1:mooncake-wheel/mooncake/mooncake_config.py#MooncakeConfig.load_from_env",
        check(c) {
            if (c.env.MOONCAKE_MASTER === undefined) return undefined;
            const p = envStr(c, "MOONCAKE_PROTOCOL");
            if (p === undefined || p === "tcp")
                return { key: "env.MOONCAKE_PROTOCOL", message: `${p ?? "unset (tcp)"}: the pool would run over TCP` };
            return undefined;
        },
    },
    // Dynamo KVBM (upstream/kvbm.ts) on a vLLM worker.
    {
        id: "kvbm-needs-tier",
        component: "kvbm",
        effect: "startup",
        description:
            "DynamoConnector (KVBM) without DYN_KVBM_CPU_CACHE_GB or DYN_KVBM_DISK_CACHE_GB: the leader has no tier to allocate and refuses to start",
        source: "ai-dynamo/dynamo@2a6da14c83617f5412caba5777dbf0e2399e9c5f:lib/llm/src/block_manager/distributed/leader.rs",
        check(c) {
            if (c.entrypoint !== "dynamo.vllm" || !vllmConnectors(c).all.includes("DynamoConnector")) return undefined;
            const n = (k: string) => Number(envStr(c, k) ?? 0);
            if (n("DYN_KVBM_CPU_CACHE_GB") > 0 || n("DYN_KVBM_DISK_CACHE_GB") > 0) return undefined;
            return { key: "env.DYN_KVBM_CPU_CACHE_GB", message: "KVBM is loaded but no tier is sized (set the host tier)" };
        },
    },
    {
        id: "kvbm-tier-order",
        component: "kvbm",
        effect: "silent",
        description:
            "KVBM tiers out of order: a disk tier without a host tier offloads GPU->disk directly (experimental, no disk offload filter), and a lower tier smaller than the one above it churns (blocks evicted and reloaded after every pass)",
        source: "ai-dynamo/dynamo@2a6da14c83617f5412caba5777dbf0e2399e9c5f:docs/fern/pages/reference/components/kvbm-configuration.mdx",
        check(c) {
            if (c.entrypoint !== "dynamo.vllm" || !vllmConnectors(c).all.includes("DynamoConnector")) return undefined;
            const cpu = Number(envStr(c, "DYN_KVBM_CPU_CACHE_GB") ?? 0);
            const disk = Number(envStr(c, "DYN_KVBM_DISK_CACHE_GB") ?? 0);
            if (disk > 0 && !(cpu > 0))
                return { key: "env.DYN_KVBM_DISK_CACHE_GB", message: "a disk tier without a host tier (G1->G3 bypass, experimental)" };
            if (disk > 0 && disk < cpu)
                return { key: "env.DYN_KVBM_DISK_CACHE_GB", message: `disk tier ${disk} GB is smaller than the host tier ${cpu} GB` };
            if (disk > 0 && envStr(c, "DYN_KVBM_DISK_CACHE_DIR") === undefined)
                return {
                    key: "env.DYN_KVBM_DISK_CACHE_DIR",
                    message: "unset: the disk tier's files go to /tmp/ in the container's writable layer, not the node's NVMe",
                };
            return undefined;
        },
    },
    {
        id: "kvbm-one-offload-backend",
        component: "kvbm",
        effect: "silent",
        description:
            "KVBM stacked with another offloading backend in one worker (MooncakeStoreConnector): Dynamo's offloading backends are alternatives, not layers",
        source: "ai-dynamo/dynamo@2a6da14c83617f5412caba5777dbf0e2399e9c5f:docs/fern/pages/cli/kv-cache-offloading/overview.mdx",
        check(c) {
            const all = vllmConnectors(c).all;
            if (c.entrypoint !== "dynamo.vllm" || !all.includes("DynamoConnector") || !all.includes("MooncakeStoreConnector"))
                return undefined;
            return { key: "--kv-transfer-config", message: "DynamoConnector and MooncakeStoreConnector in one worker" };
        },
    },
];
